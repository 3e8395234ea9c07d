"""kv_cache_configurator.py - SGLang about 0.5.16 and later's
KVCacheConfigurator as sglang_sim.py runs it
(python/sglang/srt/mem_cache/kv_cache_configurator.py): configure ->
_resolve_memory_pool_config -> _profile_available_bytes measures post
(the MIN over the ranks at TP > 1); rest = post - pre * (1 - F) - the
multimodal reserve (SGLANG_VLM_CACHE_SIZE_MB, default 100, / 1024 GiB);
rest <= 0 raises SGLang's ValueError, else available_bytes =
int(rest * 2^30); pool_configurator's tokens, the --max-total-tokens cap
floored again, then the pools: a draft worker's configure takes the
target's config and makes its own layers' buffers.
"""
import math
import os

from sglang.srt.model_executor.pool_configurator import DefaultPoolConfigurator
from sim_support import (allocate_kv_buffers, allocate_req_to_token_pool,
                         get_available_gpu_memory, max_num_reqs_for, record, report)


def mm_runtime_reservation_gb(*, is_multimodal):
    """No GPU feature transport here: the embedding cache alone."""
    if not is_multimodal:
        return 0.0
    reserved_mb = int(os.environ.get("SGLANG_VLM_CACHE_SIZE_MB", "100"))
    return reserved_mb / 1024


class KVCacheConfigurator:
    def __init__(self, args, runner, cpu_group, memory_pool_config=None):
        self.args, self.runner, self.cpu_group = args, runner, cpu_group
        self.is_draft_worker = runner.is_draft_worker
        self.memory_pool_config = memory_pool_config

    def configure(self, *, pre_model_load_memory):
        if self.args.speculative_algorithm and self.is_draft_worker:
            config = self.memory_pool_config
        else:
            config = self._resolve_memory_pool_config(pre_model_load_memory)
        self._init_pools(config)
        get_available_gpu_memory("cuda", self.runner.gpu_id)  # "Memory pool end. ..."
        return config

    def _profile_available_bytes(self, pre_model_load_memory):
        available_gpu_memory = get_available_gpu_memory(
            "cuda", self.runner.gpu_id, distributed=self.args.tp > 1, cpu_group=self.cpu_group)
        report["post_free_bytes"] = report["last_free_bytes"]
        slack_gb = pre_model_load_memory * (1 - self.args.mem_fraction_static)
        mm_reservation_gb = mm_runtime_reservation_gb(is_multimodal=self.args.multimodal_sim)
        rest_memory = available_gpu_memory - slack_gb - mm_reservation_gb
        record(pre_model_load_memory, available_gpu_memory, mm_reservation_gb, rest_memory)
        if rest_memory <= 0:
            minimum_mem_fraction_static = 1 - available_gpu_memory / pre_model_load_memory
            suggested_mem_fraction_static = math.ceil(minimum_mem_fraction_static * 1000) / 1000
            raise ValueError(
                f"Loaded weights leave no GPU memory for the KV cache under "
                f"--mem-fraction-static={self.args.mem_fraction_static}. "
                f"Raise --mem-fraction-static above "
                f"{suggested_mem_fraction_static:.3f} "
                f"(minimum viable = 1 - available/pre = "
                f"{minimum_mem_fraction_static:.4f}). If using speculative "
                f"decoding, draft weights are now counted.")
        report["available_bytes"] = int(rest_memory * (1 << 30))
        return report["available_bytes"]

    def _apply_token_constraints(self, token_capacity):
        if self.args.max_total_tokens is not None:
            token_capacity = min(token_capacity, self.args.max_total_tokens)
        return token_capacity

    def config_from_budget(self, budget_bytes):
        configurator = DefaultPoolConfigurator(self)
        config = configurator.calculate_pool_sizes(budget_bytes, self.args.page_size)
        max_tokens = self._apply_token_constraints(config.max_total_num_tokens)
        if max_tokens != config.max_total_num_tokens:
            config = configurator.calculate_pool_sizes_from_max_tokens(max_tokens,
                                                                       self.args.page_size)
        return config

    def _resolve_memory_pool_config(self, pre_model_load_memory):
        available_bytes = self._profile_available_bytes(pre_model_load_memory)
        config = self.config_from_budget(available_bytes)
        config.max_running_requests = max_num_reqs_for(config.max_total_num_tokens,
                                                       self.args.context_length)
        return config

    def _init_pools(self, config):
        if not self.is_draft_worker:
            allocate_req_to_token_pool(config.max_running_requests, self.args.context_length)
        allocate_kv_buffers(self.args, self.runner.num_layers, config.max_total_num_tokens)
