"""stress.py - many Python threads calling CUDA through ctypes.CDLL (the GIL
released) while code objects are born and die, the main thread collects
garbage and the process forks: for the pyframes suite's stress test
(tests/integration/test_pyframes.c), run under the ASan build of the tracer.

    python3.X stress.py

Each of THREADS threads runs ROUNDS rounds; each round calls a function of
this file through a code object made for that round (a fresh compile of
this file every few rounds, a copy by code.replace() otherwise) and drops
it, so that the tracer's code cache sees addresses reused by other code
objects. Meanwhile the main thread runs gc.collect() and forks FORKS
children, each making a few CUDA calls from named functions before
os._exit(0). Every Python frame in every trace must name a function of
this file or of threading.py at a line of that function (check_frames.py).

stdout: one line that does not depend on tracing; exit status 0 when every
call succeeded and every child exited 0.
"""
import ctypes
import gc
import os
import sys
import threading
import types
import warnings

THREADS = 16
ROUNDS = 30
FORKS = 3

cdll = ctypes.CDLL("libcudart.so.12")
cdll.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cdll.cudaMalloc.restype = ctypes.c_int
cdll.cudaFree.argtypes = [ctypes.c_void_p]
cdll.cudaFree.restype = ctypes.c_int
cdll.cudaMemGetInfo.argtypes = [ctypes.POINTER(ctypes.c_size_t)] * 2
cdll.cudaMemGetInfo.restype = ctypes.c_int


def check(what, rc):
    if rc != 0:
        raise RuntimeError("%s returned %d" % (what, rc))


def step_alloc(size):
    p = ctypes.c_void_p()
    check("cudaMalloc", cdll.cudaMalloc(ctypes.byref(p), size))
    check("cudaFree", cdll.cudaFree(p))


def step_measure(size):
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check("cudaMemGetInfo", cdll.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)))
    step_alloc(size)


def step_nested(size, depth=6):
    if depth:
        return step_nested(size, depth - 1)
    held = []
    for i in range(3):
        p = ctypes.c_void_p()
        check("cudaMalloc", cdll.cudaMalloc(ctypes.byref(p), size + i))
        held.append(p)
    for p in held:
        check("cudaFree", cdll.cudaFree(p))


STEPS = ("step_alloc", "step_measure", "step_nested")


def find_code(code, name):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            found = find_code(const, name)
            if found is not None:
                return found
    return None


def fresh_function(name, round_no):
    """A new code object for one of this file's functions, at its own lines."""
    if round_no % 4 == 0:
        with open(__file__) as f:
            module_code = compile(f.read(), __file__, "exec")
        code = find_code(module_code, name)
    else:
        code = globals()[name].__code__.replace()
    return types.FunctionType(code, globals(), name, globals()[name].__defaults__)


def worker(k, errors):
    try:
        for round_no in range(ROUNDS):
            name = STEPS[(k + round_no) % len(STEPS)]
            fn = fresh_function(name, round_no)
            fn((1 << 20) + 4096 * k)
            del fn
    except BaseException as e:  # reported by the main thread
        errors.append("thread %d: %r" % (k, e))


def child_alloc(size):
    p = ctypes.c_void_p()
    check("cudaMalloc", cdll.cudaMalloc(ctypes.byref(p), size))
    check("cudaFree", cdll.cudaFree(p))


def child_main():
    try:
        for i in range(3):
            child_alloc((2 << 20) + i)
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        check("cudaMemGetInfo", cdll.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)))
    except BaseException as e:
        sys.stderr.write("child: %r\n" % (e,))
        os._exit(1)
    os._exit(0)


def fork_child():
    pid = os.fork()
    if pid == 0:
        child_main()
    _, status = os.waitpid(pid, 0)
    return status


def main():
    # 3.12+ warns when a process with threads forks: this one means to.
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    errors = []
    # CUDA is up before any thread starts or the process forks, as a server's
    # main process has it by then: a fork while another thread is inside the
    # runtime's one-time initialisation hands the child a half-made runtime
    # (seen once in CI: the first child's cudaMalloc failed with 201).
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check("cudaMemGetInfo", cdll.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)))
    threads = [threading.Thread(target=worker, args=(k, errors), name="stress-%d" % k)
               for k in range(THREADS)]
    for t in threads:
        t.start()
    statuses = []
    collections = 0
    while any(t.is_alive() for t in threads) or len(statuses) < FORKS:
        gc.collect()
        collections += 1
        if len(statuses) < FORKS and collections % 3 == 0:
            statuses.append(fork_child())
    for t in threads:
        t.join()
    bad = [s for s in statuses if s != 0]
    if errors or bad:
        sys.stderr.write("stress: errors %r, child statuses %r\n" % (errors, statuses))
        sys.exit(1)
    print("stress: %d threads x %d rounds, %d forks: ok" % (THREADS, ROUNDS, FORKS))


if __name__ == "__main__":
    main()
