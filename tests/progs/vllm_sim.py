"""vllm_sim.py - a vLLM V1 server's start-up, simulated, for `cutrace budget` (tests/integration/test_budget_vllm.c).

Launched as vLLM launches: this launcher takes the flags, never touches
CUDA, and starts one worker per rank with multiprocessing spawn; the workers
reach the CUDA runtime and NCCL only through ctypes.CDLL (the GIL released
around each call, as on a real server). Each worker starts the way the V1
GPU worker does (vllm/v1/worker/gpu_worker.py, vllm/utils/mem_utils.py,
vllm/v1/core/kv_cache_utils.py), with its functions' names:

  Worker.init_device         NCCL, then MemorySnapshot() (S0) and requested:
                             math.ceil(total * U) on the current path
                             (request_memory), total * U as a float on the
                             older one; free < requested raises ValueError;
  Worker.load_model          the weights, torch's memory (model_memory_usage);
  determine_available_memory memory_profiling around profile_run (its
                             snapshots before and after, S1), then on the
                             current path profile_cudagraph_memory (a
                             measurement before and after each capture),
                             applied when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
                             says so;
  check_enough_kv_cache_memory  "No available memory ..." or the max_model_len
                             ValueError; then the blocks and the KV cache.

Torch's memory is what the worker cudaMalloc'd itself (each tensor its own
segment, so allocated == reserved, as cutrace's point value takes it);
non-torch memory is NCCL's (ncclMemAlloc during the profiling pass).

    vllm_sim.py --path older|current [--gpu-memory-utilization U]
                [--tensor-parallel-size N] [--max-model-len N] [--block-size N]
                [--num-layers L] [--block-bytes B] [--weights BYTES]
                [--activation BYTES] [--non-torch-size BYTES]
                [--graph-captures N] [--graph-bytes BYTES]

The launcher prints one JSON line per rank, in rank order, with the numbers
the worker computed by vLLM's arithmetic and the message it raised (null
when none), and exits 1 when a worker failed.
"""
import argparse
import contextlib
import ctypes
import json
import math
import multiprocessing
import os
import queue
import sys

MIB = 1 << 20
GIB_BYTES = 1 << 30
TENSOR = 64 * MIB  # weights in 64 MiB tensors: a burst above cutrace's 1 GiB minimum
NO_BLOCKS = ("No available memory for the cache blocks. Try increasing "
             "`gpu_memory_utilization` when initializing the engine.")


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def check(what, rc):
    if rc != 0:
        raise RuntimeError(f"{what} returned {rc}")


def format_gib(b):
    return round(b / GIB_BYTES, 2)


class Cuda:
    """The runtime as torch reaches it, and torch's own counters over it."""

    def __init__(self):
        self.rt = ctypes.CDLL("libcudart.so.12")
        self.nccl = ctypes.CDLL("libnccl.so.2")
        self.live = {}  # torch's tensors: one cudaMalloc each
        self.allocated = 0
        self.peak = 0
        self.other = []

    def malloc(self, size):
        ptr = ctypes.c_void_p()
        check("cudaMalloc", self.rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)))
        self.live[ptr.value] = (ptr, size)
        self.allocated += size
        self.peak = max(self.peak, self.allocated)
        return ptr.value

    def free(self, key):
        ptr, size = self.live.pop(key)
        check("cudaFree", self.rt.cudaFree(ptr))
        self.allocated -= size

    def nccl_alloc(self, size):
        ptr = ctypes.c_void_p()
        check("ncclMemAlloc", self.nccl.ncclMemAlloc(ctypes.byref(ptr), ctypes.c_size_t(size)))
        self.other.append(ptr)

    def mem_get_info(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        check("cudaMemGetInfo", self.rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)))
        return free.value, total.value

    def teardown(self):
        for key in list(self.live):
            self.free(key)
        for ptr in self.other:
            check("ncclMemFree", self.nccl.ncclMemFree(ptr))


CUDA = None


class MemorySnapshot:
    def __init__(self, auto_measure=True):
        self.torch_peak = self.free_memory = self.total_memory = 0
        self.torch_memory = self.non_torch_memory = 0
        if auto_measure:
            self.measure()

    def measure(self):
        self.torch_peak = CUDA.peak
        self.free_memory, self.total_memory = CUDA.mem_get_info()
        self.torch_memory = CUDA.allocated  # memory_reserved: each tensor its segment
        self.non_torch_memory = self.total_memory - self.free_memory - self.torch_memory


class MemoryProfilingResult:
    def __init__(self, before_create, weights_memory):
        self.before_create = before_create
        self.weights_memory = weights_memory
        self.before_profile = MemorySnapshot(auto_measure=False)
        self.after_profile = MemorySnapshot(auto_measure=False)
        self.torch_peak_increase = self.non_torch_increase = self.non_kv_cache_memory = 0


@contextlib.contextmanager
def memory_profiling(baseline_snapshot, weights_memory):
    CUDA.peak = CUDA.allocated  # torch.cuda.reset_peak_memory_stats()
    result = MemoryProfilingResult(baseline_snapshot, weights_memory)
    result.before_profile.measure()
    yield result
    result.after_profile.measure()
    result.torch_peak_increase = result.after_profile.torch_peak - result.before_profile.torch_peak
    result.non_torch_increase = (result.after_profile.non_torch_memory
                                 - result.before_create.non_torch_memory)
    result.non_kv_cache_memory = (result.non_torch_increase + result.torch_peak_increase
                                  + result.weights_memory)


class GPUModelRunner:
    def __init__(self, args):
        self.args = args
        self.model_memory_usage = 0

    def load_model(self):
        before = CUDA.allocated
        for _ in range(self.args.weights // TENSOR):
            CUDA.malloc(TENSOR)
        self.model_memory_usage = CUDA.allocated - before

    def profile_run(self):
        # activations: all live at once (the peak is their sum), then freed,
        # and NCCL's buffers the forward pass takes (non-torch, kept)
        acts = [CUDA.malloc(size) for size in (self.args.activation // 2,
                                               self.args.activation - self.args.activation // 2)]
        if self.args.non_torch_size:
            CUDA.nccl_alloc(self.args.non_torch_size)
        for key in acts:
            CUDA.free(key)

    def profile_cudagraph_memory(self):
        samples = []
        for _ in range(self.args.graph_captures):
            before = CUDA.mem_get_info()[0]
            CUDA.malloc(self.args.graph_bytes)  # the capture's pool, kept until the end
            after = CUDA.mem_get_info()[0]
            samples.append(before - after)
        return sum(samples)

    def initialize_kv_cache(self, blocks):
        for _ in range(self.args.num_layers):
            CUDA.malloc(blocks * self.args.block_bytes)


class Worker:
    def __init__(self, args, rank, ids):
        self.args, self.rank, self.ids = args, rank, ids
        self.model_runner = GPUModelRunner(args)
        self.current = args.path == "current"

    def init_worker_distributed_environment(self):
        CUDA.rt.cudaSetDevice(self.rank)
        uid = NcclUniqueId()
        if self.rank == 0:
            check("ncclGetUniqueId", CUDA.nccl.ncclGetUniqueId(ctypes.byref(uid)))
            for _ in range(self.args.tensor_parallel_size - 1):
                self.ids.put(ctypes.string_at(ctypes.byref(uid), ctypes.sizeof(uid)))
        else:
            uid = NcclUniqueId.from_buffer_copy(self.ids.get(timeout=60))
        self.comm = ctypes.c_void_p()
        check("ncclCommInitRank", CUDA.nccl.ncclCommInitRank(
            ctypes.byref(self.comm), self.args.tensor_parallel_size, uid, self.rank))

    def init_device(self):
        self.init_worker_distributed_environment()
        self.init_snapshot = MemorySnapshot()
        util = self.args.gpu_memory_utilization
        total, free = self.init_snapshot.total_memory, self.init_snapshot.free_memory
        if self.current:  # request_memory
            self.requested_memory = math.ceil(total * util)
            if free < self.requested_memory:
                raise ValueError(
                    f"Free memory on device cuda:{self.rank} "
                    f"({format_gib(free)}/{format_gib(total)} GiB) on startup "
                    f"is less than desired GPU memory utilization "
                    f"({util}, {format_gib(self.requested_memory)} GiB). Decrease GPU memory "
                    f"utilization or reduce GPU memory used by other processes.")
        else:
            self.requested_memory = total * util
            if free < self.requested_memory:
                raise ValueError(
                    f"Free memory on device ({format_gib(free)}/{format_gib(total)} GiB) on "
                    f"startup is less than desired GPU memory utilization "
                    f"({util}, {format_gib(self.requested_memory)} GiB). Decrease GPU memory "
                    f"utilization or reduce GPU memory used by other processes.")

    def load_model(self):
        self.model_runner.load_model()

    def determine_available_memory(self):
        with memory_profiling(self.init_snapshot,
                              weights_memory=int(self.model_runner.model_memory_usage)) as result:
            self.model_runner.profile_run()
        self.profile_result = result
        self.cudagraph_memory_estimate = 0
        if self.current:
            self.cudagraph_memory_estimate = self.model_runner.profile_cudagraph_memory()
        applied = (self.cudagraph_memory_estimate
                   if int(os.environ.get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "0")) else 0)
        self.cudagraph_memory_estimate_applied = applied
        return int(self.requested_memory - result.non_kv_cache_memory - applied)


def max_memory_usage_bytes(args, max_model_len):
    return args.num_layers * (-(-max_model_len // args.block_size)) * args.block_bytes


def estimate_max_model_len(args, available):
    left, right = 1, args.max_model_len
    if max_memory_usage_bytes(args, left) > available:
        return 0
    result = 1
    while left <= right:
        mid = (left + right) // 2
        if max_memory_usage_bytes(args, mid) <= available:
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def check_enough_kv_cache_memory(args, available):
    if available <= 0:
        raise ValueError(NO_BLOCKS)
    needed = max_memory_usage_bytes(args, args.max_model_len)
    if needed > available:
        estimated = estimate_max_model_len(args, available)
        estimated_msg = ""
        if estimated > 0:
            estimated_msg = ("Based on the available memory, "
                             f"the estimated maximum model length is {estimated}.")
        raise ValueError(
            f"To serve at least one request with the models's max seq len "
            f"({args.max_model_len}), ({needed/GIB_BYTES:.2f} GiB KV "
            f"cache is needed, which is larger than the available KV cache "
            f"memory ({available/GIB_BYTES:.2f} GiB). "
            f"{estimated_msg} "
            f"Try increasing `gpu_memory_utilization` or decreasing "
            f"`max_model_len` when initializing the engine.")
    return needed


def worker(rank, args, ids, results):
    global CUDA
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(args.tensor_parallel_size))
    CUDA = Cuda()
    w = Worker(args, rank, ids)
    line = {"rank": rank, "path": args.path, "message": None}
    try:
        try:
            w.init_device()
        finally:
            s0 = w.init_snapshot
            line.update(s0_free=s0.free_memory, total=s0.total_memory,
                        requested=math.ceil(w.requested_memory) if w.current
                        else int(w.requested_memory))
        w.load_model()
        available = w.determine_available_memory()
        r = w.profile_result
        line.update(weights=r.weights_memory, peak_activation=r.torch_peak_increase,
                    non_torch_increase=r.non_torch_increase,
                    graph_measured=w.cudagraph_memory_estimate,
                    graph_applied=w.cudagraph_memory_estimate_applied, available=available)
        needed = check_enough_kv_cache_memory(args, available)
        blocks = int(available // args.block_bytes // args.num_layers)
        line.update(needed=needed, blocks=blocks, tokens=blocks * args.block_size)
        w.model_runner.initialize_kv_cache(blocks)
    except ValueError as e:
        line["message"] = str(e)
    results.put((rank, json.dumps(line)))
    CUDA.teardown()
    check("ncclCommDestroy", CUDA.nccl.ncclCommDestroy(w.comm))
    if line["message"]:
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description="a vLLM-like launcher")
    parser.add_argument("--path", choices=["older", "current"], required=True)
    parser.add_argument("--gpu-memory-utilization", type=float)
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--num-layers", type=int, default=32)
    parser.add_argument("--block-bytes", type=int, default=2 * 8 * 128 * 2 * 16)
    parser.add_argument("--weights", type=int, default=3 * GIB_BYTES)
    parser.add_argument("--activation", type=int, default=768 * MIB)
    parser.add_argument("--non-torch-size", type=int, default=0)
    parser.add_argument("--graph-captures", type=int, default=3)
    parser.add_argument("--graph-bytes", type=int, default=40 * MIB)
    args = parser.parse_args()
    if args.gpu_memory_utilization is None:  # vllm/config/cache.py's default
        args.gpu_memory_utilization = 0.92 if args.path == "current" else 0.9
    context = multiprocessing.get_context("spawn")
    ids, results = context.Queue(), context.Queue()
    procs = [context.Process(target=worker, args=(rank, args, ids, results))
             for rank in range(args.tensor_parallel_size)]
    for proc in procs:
        proc.start()
    lines = {}
    try:
        while len(lines) < len(procs):
            rank, line = results.get(timeout=120)
            lines[rank] = line
    except queue.Empty:
        pass
    for proc in procs:
        proc.join()
    for rank in sorted(lines):
        print(lines[rank])
    return 1 if any(proc.exitcode != 0 for proc in procs) or len(lines) != len(procs) else 0


if __name__ == "__main__":
    sys.exit(main())
