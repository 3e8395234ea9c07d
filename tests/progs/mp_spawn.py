"""mp_spawn.py - a CUDA-using child started by multiprocessing's "spawn".

The parent never touches CUDA (it must leave no trace); the child, a fresh
interpreter that inherits only the environment, loads a library that calls
the runtime and must be traced.

    python3 mp_spawn.py /path/to/libcuda_helper.so
"""
import ctypes
import multiprocessing
import sys


def child(library, n):
    sys.exit(ctypes.CDLL(library).helper_allocs(n))


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    process = context.Process(target=child, args=(sys.argv[1], 5))
    process.start()
    process.join()
    print("spawned child exited with", process.exitcode)
    sys.exit(process.exitcode)
