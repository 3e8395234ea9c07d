"""run_workers.py - servers that start workers, for the `cutrace run` integration tests.

Every worker reaches the CUDA runtime only through ctypes (libcudart.so.12
from LD_LIBRARY_PATH: the fake stack in the tests), as SGLang's CudaRTLibrary
does: cudaSetDevice(LOCAL_RANK % 2), cudaMalloc of (RANK + 1) MiB,
cudaMemGetInfo, cudaFree. Launchers never touch CUDA, so they must leave no
trace, and each worker must leave its own.

    run_workers.py worker [--exit-code N] [--signal NAME]
        one worker; RANK, LOCAL_RANK, WORLD_SIZE from the environment (0, 0, 1)
    run_workers.py torchrun N [--fail-rank R]
        a torchrun-like launcher: N workers started with subprocess.Popen,
        each with RANK/LOCAL_RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; worker R
        (if given) exits 3. Exits 1 when a worker failed, as torchrun does.
    run_workers.py mp N [--method forkserver]
        N workers started by multiprocessing with the "spawn" method (fresh
        interpreters that inherit only the environment), as vLLM does, or
        forked by a "forkserver" process.

Output is deterministic: one line per worker in rank order (launchers collect
the workers' lines), so traced and untraced runs print the same.
"""
import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys

MIB = 1 << 20


def cuda_work(rank, local_rank):
    """The worker's CUDA calls; returns a line that depends only on the rank."""
    cudart = ctypes.CDLL("libcudart.so.12")
    rc = cudart.cudaSetDevice(local_rank % 2)
    if rc != 0:
        return f"cudaSetDevice returned {rc}"
    ptr = ctypes.c_void_p()
    rc = cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t((rank + 1) * MIB))
    if rc != 0:
        return f"cudaMalloc returned {rc}"
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    rc = cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
    if rc != 0:
        return f"cudaMemGetInfo returned {rc}"
    rc = cudart.cudaFree(ptr)
    if rc != 0:
        return f"cudaFree returned {rc}"
    return f"allocated {rank + 1} MiB on device {local_rank % 2}"


def worker(args):
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    print(f"rank {rank} of {world}: {cuda_work(rank, local_rank)}", flush=True)
    if "--signal" in args:
        os.kill(os.getpid(), getattr(signal, args[args.index("--signal") + 1]))
    if "--exit-code" in args:
        return int(args[args.index("--exit-code") + 1])
    return 0


def torchrun(args):
    n = int(args[0])
    fail_rank = int(args[args.index("--fail-rank") + 1]) if "--fail-rank" in args else -1
    procs = []
    for rank in range(n):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n),
                   LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
        cmd = [sys.executable, os.path.abspath(__file__), "worker"]
        if rank == fail_rank:
            cmd += ["--exit-code", "3"]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
    failed = False
    for rank, proc in enumerate(procs):
        out, _ = proc.communicate()
        sys.stdout.write(out)
        if proc.returncode != 0:
            print(f"launcher: rank {rank} exited with {proc.returncode}")
            failed = True
    return 1 if failed else 0


def spawned(rank, world, conn):
    conn.send(f"rank {rank} of {world}: {cuda_work(rank, rank)}")
    conn.close()


def mp(args):
    n = int(args[0])
    method = args[args.index("--method") + 1] if "--method" in args else "spawn"
    context = multiprocessing.get_context(method)
    pipes, procs = [], []
    for rank in range(n):
        receiver, sender = context.Pipe(duplex=False)
        proc = context.Process(target=spawned, args=(rank, n, sender))
        proc.start()
        sender.close()
        pipes.append(receiver)
        procs.append(proc)
    for pipe in pipes:
        print(pipe.recv())
    for proc in procs:
        proc.join()
    return 0 if all(proc.exitcode == 0 for proc in procs) else 1


if __name__ == "__main__":
    modes = {"worker": worker, "torchrun": torchrun, "mp": mp}
    if len(sys.argv) < 2 or sys.argv[1] not in modes:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(modes[sys.argv[1]](sys.argv[2:]))
