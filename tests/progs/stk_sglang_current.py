"""stk_sglang_current.py - a current SGLang start-up in Python, for `cutrace budget`.

The functions are named and called in the order of SGLang about 0.5.16
(python/sglang/srt/distributed/bootstrap.py, model_executor/model_runner.py,
mem_cache/kv_cache_configurator.py, utils/common.py), with speculative
decoding's draft worker:

  1. the target's ModelRunner.init_torch_distributed calls bootstrap's
     init_torch_distributed, which measures three times: at its start, after
     the NCCL groups and custom all-reduce buffers (pre_model_load_memory,
     the MIN over the ranks: `pre`), and once more for the TP balance check;
  2. the target's load_model measures twice, loads the weights, measures once;
  3. the draft worker's ModelRunner does 1 and 2 again (its own weights);
  4. the scheduler's init_memory_pools -> KVCacheConfigurator.configure ->
     _resolve_memory_pool_config -> _profile_available_bytes measures
     (`post`), the pools are made, configure measures for its log.

`cutrace budget` must take measurement 2 of 14 as pre and measurement 13
as post. CUDA is reached as SGLang and PyTorch reach it: ctypes.CDLL, which
releases the GIL around every call (--gil-held: ctypes.PyDLL, which keeps
it, for a tracer that reads Python frames only with the GIL held).

    python3 stk_sglang_current.py [--gil-held]     prints "ok"
"""
import sys

import cudart_calls as cuda

GIL_HELD = "--gil-held" in sys.argv
cuda.load(GIL_HELD)
malloc, mem_get_info = cuda.malloc, cuda.mem_get_info

MiB = 1 << 20


def get_available_gpu_memory(distributed=False):
    """utils/common.py: free GiB; distributed, the MIN over the ranks (one
    rank here: the all-reduce over the CPU group changes nothing)."""
    free, _ = mem_get_info()
    return free / (1 << 30)


def init_torch_distributed(is_draft_worker):
    """bootstrap.py's init_torch_distributed: three measurements."""
    before_avail_memory = get_available_gpu_memory()
    if not is_draft_worker:
        # the NCCL groups and the custom all-reduce buffers
        malloc(8 * MiB)
        malloc(8 * MiB)
    pre_model_load_memory = get_available_gpu_memory(distributed=not is_draft_worker)
    local_gpu_memory = get_available_gpu_memory()
    assert before_avail_memory >= local_gpu_memory
    return pre_model_load_memory


class ModelRunner:
    def __init__(self, is_draft_worker, weights):
        self.is_draft_worker = is_draft_worker
        self.weights = weights
        self.init_torch_distributed()
        self.initialize()

    def init_torch_distributed(self):
        self.pre_model_load_memory = init_torch_distributed(self.is_draft_worker)

    def initialize(self):
        self.load_model()

    def load_model(self):
        before_avail_memory = get_available_gpu_memory()
        get_available_gpu_memory()  # "Load weight begin. avail mem=..."
        for _ in range(self.weights):
            malloc(64 * MiB)
        after_avail_memory = get_available_gpu_memory()  # "Load weight end. ..."
        assert after_avail_memory < before_avail_memory


class KVCacheConfigurator:
    def __init__(self, runner):
        self.runner = runner

    def configure(self, pre_model_load_memory):
        config = self._resolve_memory_pool_config(pre_model_load_memory)
        for _ in range(4):
            malloc(config)
        get_available_gpu_memory()  # "Memory pool end. avail mem=..."

    def _resolve_memory_pool_config(self, pre_model_load_memory):
        available_bytes = self._profile_available_bytes(pre_model_load_memory)
        return min(available_bytes // 8, 128 * MiB)

    def _profile_available_bytes(self, pre_model_load_memory):
        available_gpu_memory = get_available_gpu_memory(distributed=True)
        rest_memory = available_gpu_memory - pre_model_load_memory * (1 - 0.5)
        return int(rest_memory * (1 << 30))


class Scheduler:
    def __init__(self):
        self.target = ModelRunner(is_draft_worker=False, weights=48)  # 3 GiB
        self.draft = ModelRunner(is_draft_worker=True, weights=4)
        self.init_memory_pools()

    def init_memory_pools(self):
        KVCacheConfigurator(self.target).configure(self.target.pre_model_load_memory)


def main():
    Scheduler()
    cuda.free_all()
    print("ok")


if __name__ == "__main__":
    main()
