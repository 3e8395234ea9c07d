"""pyhot.py - time per CUDA call made from Python, for bench/run.sh: the
cost of Python frames in call stacks.

    python3 pyhot.py CALLS DEPTH [held|released]   prints "<ns per call> <calls>"

Loads the fake runtime with ctypes.PyDLL (`held`, the default: the GIL stays
held during the call, as in a C extension that keeps it) or ctypes.CDLL
(`released`: the GIL is released around the call, as on every road of a
real server) and alternates cudaMalloc(4 KiB), cudaFree and cudaMemGetInfo
with DEPTH Python frames on the stack at each call (DEPTH >= 4), in bursts
of 300 calls with a pause after each so that the writer keeps up.
"""
import ctypes
import sys
import time

RELEASED = len(sys.argv) > 3 and sys.argv[3] == "released"
cudart = (ctypes.CDLL if RELEASED else ctypes.PyDLL)("libcudart.so.12")
BURST = 300
OWN_FRAMES = 4  # <module>, main, at_depth(0), calls


def calls(n):
    p = ctypes.c_void_p()
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    size = ctypes.c_size_t(4096)
    for _ in range(0, n, 3):
        if (cudart.cudaMalloc(ctypes.byref(p), size) or cudart.cudaFree(p)
                or cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))):
            sys.exit(3)


def at_depth(level, n):
    if level > 0:
        return at_depth(level - 1, n)
    busy = 0
    for _ in range(0, n, BURST):
        t0 = time.perf_counter_ns()
        calls(BURST)
        busy += time.perf_counter_ns() - t0
        time.sleep(0.03)
    return busy


def main():
    n = int(sys.argv[1]) // BURST * BURST
    depth = int(sys.argv[2])
    calls(3)  # the context, outside the timing
    busy = at_depth(max(depth - OWN_FRAMES, 0), n)
    print(f"{busy / n:.1f} {n}")


if __name__ == "__main__":
    main()
