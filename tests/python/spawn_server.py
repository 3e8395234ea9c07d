"""spawn_server.py - a server launcher shaped like SGLang's, for the `launch` integration suite.

The launcher takes the server's flags, never touches CUDA or NCCL itself (so
it leaves no trace) and starts one worker per rank with multiprocessing,
using the start method asked for: "spawn" (fresh interpreters whose command
line is `python -c "from multiprocessing.spawn import spawn_main; ..."
--multiprocessing-fork`, as SGLang and vLLM start theirs), "forkserver"
(forked by a server process the launcher started) or "fork". So the flags
are on the launcher's command line only, and a trace must find them there.

Each worker reaches the CUDA runtime and NCCL only through ctypes.CDLL
(libcudart.so.12, libnccl.so.2 from LD_LIBRARY_PATH: the fake stack in the
tests), which releases the GIL around every call as a real server's calls
do, and starts as SGLang's model runner does: cudaSetDevice(rank), the NCCL
communicator (rank 0's unique id handed to the others through a queue, as
torch's store would), with --enable-custom-all-reduce its IPC staging
buffers, the pre-load measurement (cudaMemGetInfo), the weights, the
post-load measurement, the KV pool, then the teardown. Each worker has
RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE in its environment, as
torch-style launchers give them.

    spawn_server.py --method spawn|forkserver|fork [--tp N]
                    [--mem-fraction-static F] [--enable-custom-all-reduce]
                    [--api-key KEY] [--model-path PATH] [--own-process-group]

Prints one line per rank, in rank order ("rank R: pre_free=... post_free=..."),
and exits 0 when every worker did.
"""
import argparse
import ctypes
import multiprocessing
import os
import queue
import sys

MIB = 1 << 20
WEIGHT_TENSORS = 12  # 12 x 128 MiB: a weight burst above cutrace's 1 GiB minimum
WEIGHT_BYTES = 128 * MIB
CUSTOM_AR_BYTES = 64 * MIB  # staging buffer per rank, exported over IPC
KV_LAYERS = 4
CELL_SIZE = 70272  # cutrace budget's default KV bytes per token


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class IpcMemHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def check(what, rc):
    if rc != 0:
        raise RuntimeError(f"{what} returned {rc}")


def worker(rank, args, ids, results):
    # What torch-style launchers give each worker, set before the first CUDA
    # call (the trace reads the environment when it is made, at that call).
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.tp),
                      LOCAL_WORLD_SIZE=str(args.tp))
    cudart = ctypes.CDLL("libcudart.so.12")
    nccl = ctypes.CDLL("libnccl.so.2")
    kept = []

    def malloc(size):
        ptr = ctypes.c_void_p()
        check("cudaMalloc", cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)))
        kept.append(ptr)
        return ptr

    def free_memory():
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        check("cudaMemGetInfo", cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)))
        return free.value

    check("cudaSetDevice", cudart.cudaSetDevice(rank))
    uid = NcclUniqueId()
    if rank == 0:
        check("ncclGetUniqueId", nccl.ncclGetUniqueId(ctypes.byref(uid)))
        for _ in range(args.tp - 1):
            ids.put(ctypes.string_at(ctypes.byref(uid), ctypes.sizeof(uid)))
    else:
        uid = NcclUniqueId.from_buffer_copy(ids.get(timeout=60))
    comm = ctypes.c_void_p()
    check("ncclCommInitRank", nccl.ncclCommInitRank(ctypes.byref(comm), args.tp, uid, rank))
    if args.enable_custom_all_reduce:
        handle = IpcMemHandle()
        check("cudaIpcGetMemHandle",
              cudart.cudaIpcGetMemHandle(ctypes.byref(handle), malloc(CUSTOM_AR_BYTES)))
    pre = free_memory()
    for _ in range(WEIGHT_TENSORS):
        malloc(WEIGHT_BYTES)
    post = free_memory()
    # SGLang's arithmetic (docs/budget.md) with its MIN over the ranks left
    # out: the KV pool is sized from this rank's own numbers.
    rest = post / (1 << 30) - pre / (1 << 30) * (1 - args.mem_fraction_static)
    tokens = int(rest * (1 << 30) // CELL_SIZE)
    for _ in range(KV_LAYERS):
        malloc(tokens * CELL_SIZE // KV_LAYERS)
    for ptr in kept:
        check("cudaFree", cudart.cudaFree(ptr))
    check("ncclCommDestroy", nccl.ncclCommDestroy(comm))
    results.put((rank, f"rank {rank}: pre_free={pre} post_free={post} tokens={tokens}"))


def main():
    parser = argparse.ArgumentParser(description="an SGLang-like launcher")
    parser.add_argument("--method", choices=["spawn", "forkserver", "fork"], required=True)
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--mem-fraction-static", type=float, default=0.8)
    parser.add_argument("--enable-custom-all-reduce", action="store_true")
    parser.add_argument("--api-key")
    parser.add_argument("--model-path", default="fake/model")
    parser.add_argument("--own-process-group", action="store_true",
                        help="lead a process group of its own (the forkserver and the workers"
                        " join it), so that a test can kill the whole server at once")
    args = parser.parse_args()
    if args.own_process_group:
        os.setpgid(0, 0)
    context = multiprocessing.get_context(args.method)
    ids, results = context.Queue(), context.Queue()
    procs = [context.Process(target=worker, args=(rank, args, ids, results))
             for rank in range(args.tp)]
    for proc in procs:
        proc.start()
    lines = {}
    try:
        while len(lines) < args.tp:
            rank, line = results.get(timeout=120)
            lines[rank] = line
    except queue.Empty:
        pass
    for proc in procs:
        proc.join()
    for rank in sorted(lines):
        print(lines[rank])
    failed = [proc.exitcode for proc in procs if proc.exitcode != 0]
    if failed or len(lines) != args.tp:
        print(f"launcher: {len(failed)} worker(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
