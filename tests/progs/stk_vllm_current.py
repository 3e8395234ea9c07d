"""stk_vllm_current.py - a current vLLM V1 worker's start-up in Python, for `cutrace budget`.

The functions are named and called in the order of vLLM about 0.25-0.30
(vllm/v1/worker/gpu_worker.py, vllm/utils/mem_utils.py):

  1. Worker.init_device initializes the distributed environment (NCCL's
     buffer), then takes MemorySnapshot() (`S0`);
  2. Worker.load_model loads the weights (no measurement);
  3. Worker.determine_available_memory runs memory_profiling, a
     @contextlib.contextmanager: its snapshot before profile_run (resumed
     by contextlib's __enter__), profile_run's activations, then its
     snapshot after it (resumed by __exit__: `S1`);
  4. profile_cudagraph_memory measures before and after capturing graphs,
     after the with block;
  5. the KV cache.

`cutrace budget --framework vllm` must take measurement 1 of 5 as S0 and
measurement 3 as S1, not the last one of determine_available_memory. CUDA
is reached as PyTorch reaches it, with the GIL released: ctypes.CDLL
(--gil-held: ctypes.PyDLL, which keeps the GIL).

    python3 stk_vllm_current.py [--gil-held]     prints "ok"
"""
import contextlib
import sys
from dataclasses import dataclass, field

import cudart_calls as cuda

GIL_HELD = "--gil-held" in sys.argv
cuda.load(GIL_HELD)
malloc, mem_get_info = cuda.malloc, cuda.mem_get_info
free = cuda.free

MiB = 1 << 20


@dataclass
class MemorySnapshot:
    free_memory: int = 0
    total_memory: int = 0
    auto_measure: bool = True

    def __post_init__(self):
        if self.auto_measure:
            self.measure()

    def measure(self):
        self.free_memory, self.total_memory = mem_get_info()


@dataclass
class MemoryProfilingResult:
    before_create: MemorySnapshot
    before_profile: MemorySnapshot = field(
        default_factory=lambda: MemorySnapshot(auto_measure=False))
    after_profile: MemorySnapshot = field(
        default_factory=lambda: MemorySnapshot(auto_measure=False))


@contextlib.contextmanager
def memory_profiling(baseline_snapshot):
    result = MemoryProfilingResult(before_create=baseline_snapshot)
    result.before_profile.measure()
    yield result
    result.after_profile.measure()


class GPUModelRunner:
    def load_model(self):
        self.weights = [malloc(64 * MiB) for _ in range(48)]  # 3 GiB

    def profile_run(self):
        activations = [malloc(256 * MiB) for _ in range(2)]
        for buf in activations:  # freed, and empty_cache gives them back
            free(buf)

    def profile_cudagraph_memory(self):
        before, _ = mem_get_info()
        pool = malloc(32 * MiB)
        after, _ = mem_get_info()
        free(pool)
        return before - after

    def initialize_kv_cache(self, available):
        for _ in range(4):
            malloc(min(available // 8, 256 * MiB))


def init_worker_distributed_environment():
    malloc(64 * MiB)  # NCCL's buffers


class Worker:
    def __init__(self):
        self.model_runner = GPUModelRunner()

    def init_device(self):
        init_worker_distributed_environment()
        self.init_snapshot = MemorySnapshot()
        self.requested_memory = int(self.init_snapshot.total_memory * 0.9)

    def load_model(self):
        self.model_runner.load_model()

    def determine_available_memory(self):
        with memory_profiling(self.init_snapshot) as profile_result:
            self.model_runner.profile_run()
        self.model_runner.profile_cudagraph_memory()
        used = self.init_snapshot.free_memory - profile_result.after_profile.free_memory
        return self.requested_memory - used


def main():
    worker = Worker()
    worker.init_device()
    worker.load_model()
    available = worker.determine_available_memory()
    worker.model_runner.initialize_kv_cache(available)
    cuda.free_all()
    print("ok")


if __name__ == "__main__":
    main()
