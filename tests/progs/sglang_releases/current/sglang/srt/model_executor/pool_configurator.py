"""pool_configurator.py - SGLang about 0.5.16 and later's MemoryPoolConfig
and DefaultPoolConfigurator (MHA and MLA models) as sglang_sim.py runs them
(python/sglang/srt/model_executor/pool_configurator.py): with an EAGLE or
STANDALONE draft the target's cell is int(cell * (1 + D / L)); tokens =
available_bytes // cell floored to the page; a pool of no tokens raises
SGLang's RuntimeError.
"""
from sim_support import NOT_ENOUGH_MEMORY, cell_size, report


class MemoryPoolConfig:
    def __init__(self, max_total_num_tokens):
        self.max_total_num_tokens = max_total_num_tokens
        self.max_running_requests = None
        if self.max_total_num_tokens <= 0:
            raise RuntimeError(NOT_ENOUGH_MEMORY)


class DefaultPoolConfigurator:
    def __init__(self, kvc):
        args = kvc.args
        num_layers = kvc.runner.num_layers
        self._cell_size = cell_size(args, num_layers)
        if args.speculative_algorithm in ("EAGLE", "STANDALONE") and not kvc.is_draft_worker:
            eagle_draft_num_layers = args.speculative_draft_layers
            if eagle_draft_num_layers > 0 and num_layers > 0:
                self._cell_size = int(self._cell_size *
                                      (1 + int(eagle_draft_num_layers) / int(num_layers)))
        report["cell_size"] = self._cell_size

    def calculate_pool_sizes(self, available_bytes, page_size):
        max_total_num_tokens = available_bytes // self._cell_size
        report["tokens_profiled"] = max_total_num_tokens
        max_total_num_tokens = max_total_num_tokens // page_size * page_size
        report["tokens"] = max_total_num_tokens
        return MemoryPoolConfig(max_total_num_tokens=max_total_num_tokens)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens, page_size):
        max_total_num_tokens = max_total_num_tokens // page_size * page_size
        report["tokens"] = max_total_num_tokens
        return MemoryPoolConfig(max_total_num_tokens=max_total_num_tokens)
