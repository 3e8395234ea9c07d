"""roads.py - CUDA memory calls from Python on the roads real programs take,
for the pyframes integration suite (tests/integration/test_pyframes.c).

    python3.X roads.py EXPECT.json [--no-ext] [--subinterp]

Calls the fake runtime (libcudart.so.12 on LD_LIBRARY_PATH) three ways:
  cdll   ctypes.CDLL: the GIL is released around the call (SGLang, pynccl)
  ext    the cutrace_nogil C extension (tests/python/ext, on PYTHONPATH):
         released too, with Py_BEGIN_ALLOW_THREADS, as PyTorch's bindings
  pydll  ctypes.PyDLL: the GIL stays held, for comparison
from many places: plain calls, methods, a threading.Thread, a generator
driven by next(), a coroutine under asyncio.run, recursion deeper than the
tracer's stack depth limit, a C thread (PyGILState_Ensure), lambdas,
comprehensions, functools.partial, a decorator, and with sys.setprofile and
sys.settrace active. --no-ext leaves out what needs the extension (for an
interpreter it is not built for); --subinterp runs instead a program that
also calls from a second interpreter (Py_NewInterpreter).

For every CUDA call, traceback.extract_stack() runs on the same source line
just before it, so both see the same frames at the same lines. EXPECT.json
gets every call in the order it was made:
  {"python": "3.12.1", "calls": [{"api", "road", "gil", "size", "ptr",
   "ctx", "kept", "frames": [[file, line, function, c], ...]}, ...]}
frames innermost first (the trace's order), c = 1 where the frame was
entered from C (a new eval loop: the tracer's entry marker), 0 where it was
called from the next frame out by a plain Python call, null where that is
not known for every version (the test checks c only where it is known).
Each malloc gets a size no other call has, so the test can also tell the
calls apart by size; "kept" marks the allocations that stay live until the
end (freed by release_all), so that `cutrace sites` shows them at the peak. stdout: a summary that does not depend on tracing.

Stdlib only; runs on CPython 3.9 to 3.14.
"""
import asyncio
import ctypes
import functools
import json
import os
import sys
import threading
import traceback

HERE_FILE = os.path.abspath(__file__)

cdll = ctypes.CDLL("libcudart.so.12")
pydll = ctypes.PyDLL("libcudart.so.12")
for _lib in (cdll, pydll):
    _lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    _lib.cudaMalloc.restype = ctypes.c_int
    _lib.cudaFree.argtypes = [ctypes.c_void_p]
    _lib.cudaFree.restype = ctypes.c_int
    _lib.cudaMemGetInfo.argtypes = [ctypes.POINTER(ctypes.c_size_t)] * 2
    _lib.cudaMemGetInfo.restype = ctypes.c_int

ext = None  # cutrace_nogil, unless --no-ext
ROADS = ["cdll", "ext", "pydll"]
EXPECT = []  # every call, in order
KEPT = []  # (road, ptr) live until release_all: the test's `cutrace sites` sees them
CTX = ["start"]  # the scenario running
NEXT_SIZE = [1 << 20]

# Which roads.py functions are entered from C (each call begins an eval
# loop), and which are reached in ways whose entry differs between
# versions or with specialization (left unknown).
FROM_C = {"<module>", "gen_steps", "c_thread_body", "partial_body"}
UNKNOWN_ENTRY = {"thread_body", "co_inner", "co_outer", "__init__", "grown", "decorated",
                 "sub_main", "profiled", "traced_fn"}
# Under a profile or trace function nothing inward is claimed.
TRACING = {"profiled", "traced_fn"}


def next_size():
    NEXT_SIZE[0] += 4096
    return NEXT_SIZE[0]


def frames_of(st):
    """extract_stack's frames innermost first, with what is known of their entry."""
    frames = [[fs.filename, fs.lineno, fs.name] for fs in reversed(st)]
    tracing = False
    for i in range(len(frames) - 1, -1, -1):  # outermost first
        file, _, name = frames[i]
        ours = file == HERE_FILE
        tracing = tracing or (ours and name in TRACING)
        caller_ours = i + 1 < len(frames) and frames[i + 1][0] == HERE_FILE
        if not ours or tracing or name in UNKNOWN_ENTRY:
            c = None
        elif name in FROM_C:
            c = 1
        elif caller_ours:
            c = 0
        else:
            c = None
        frames[i].append(c)
    return frames


def record(st, api, road, rc, size=None, ptr=None):
    if rc != 0:
        raise RuntimeError("%s (%s) returned %d" % (api, road, rc))
    EXPECT.append({"api": api, "road": road, "gil": road == "pydll", "size": size, "ptr": ptr,
                   "ctx": CTX[-1], "kept": False, "frames": frames_of(st)})
    return ptr


# ---- the three roads; the CUDA call shares its line with extract_stack ----

def malloc_cdll(size):
    p = ctypes.c_void_p()
    st = traceback.extract_stack(); rc = cdll.cudaMalloc(ctypes.byref(p), size)  # noqa: E702
    return record(st, "cudaMalloc", "cdll", rc, size=size, ptr=p.value)


def malloc_ext(size):
    st = traceback.extract_stack(); ptr = ext.malloc(size)  # noqa: E702
    return record(st, "cudaMalloc", "ext", 0, size=size, ptr=ptr)


def malloc_pydll(size):
    p = ctypes.c_void_p()
    st = traceback.extract_stack(); rc = pydll.cudaMalloc(ctypes.byref(p), size)  # noqa: E702
    return record(st, "cudaMalloc", "pydll", rc, size=size, ptr=p.value)


def free_cdll(ptr):
    st = traceback.extract_stack(); rc = cdll.cudaFree(ptr)  # noqa: E702
    record(st, "cudaFree", "cdll", rc, ptr=ptr)


def free_ext(ptr):
    st = traceback.extract_stack(); ext.free(ptr)  # noqa: E702
    record(st, "cudaFree", "ext", 0, ptr=ptr)


def free_pydll(ptr):
    st = traceback.extract_stack(); rc = pydll.cudaFree(ptr)  # noqa: E702
    record(st, "cudaFree", "pydll", rc, ptr=ptr)


def info_cdll():
    f, t = ctypes.c_size_t(), ctypes.c_size_t()
    st = traceback.extract_stack(); rc = cdll.cudaMemGetInfo(ctypes.byref(f), ctypes.byref(t))  # noqa: E702,E501
    record(st, "cudaMemGetInfo", "cdll", rc)
    return f.value


def info_ext():
    st = traceback.extract_stack(); f, _ = ext.mem_get_info()  # noqa: E702
    record(st, "cudaMemGetInfo", "ext", 0)
    return f


def info_pydll():
    f, t = ctypes.c_size_t(), ctypes.c_size_t()
    st = traceback.extract_stack(); rc = pydll.cudaMemGetInfo(ctypes.byref(f), ctypes.byref(t))  # noqa: E702,E501
    record(st, "cudaMemGetInfo", "pydll", rc)
    return f.value


MALLOC = {"cdll": malloc_cdll, "ext": malloc_ext, "pydll": malloc_pydll}
FREE = {"cdll": free_cdll, "ext": free_ext, "pydll": free_pydll}
INFO = {"cdll": info_cdll, "ext": info_ext, "pydll": info_pydll}


def keep(road_ptr):
    """Keeps the allocation just recorded live until release_all."""
    EXPECT[-1]["kept"] = True
    KEPT.append(road_ptr)


def exercise(road):
    """One allocation kept, one made and freed, one measurement: all three APIs."""
    keep((road, MALLOC[road](next_size())))
    ptr = MALLOC[road](next_size())
    INFO[road]()
    FREE[road](ptr)


def inline_road():
    return "ext" if ext is not None else "cdll"


# ---- the scenarios ----

def scenario_plain():
    for road in ROADS:
        exercise(road)


class Pool:
    def __init__(self, road):
        self.road = road
        keep((road, MALLOC[road](next_size())))

    def grow(self):
        exercise(self.road)

    @classmethod
    def make(cls, road):
        pool = cls(road)
        pool.grow()
        return pool

    @staticmethod
    def measure(road):
        INFO[road]()

    @property
    def grown(self):
        exercise(self.road)
        return True


def scenario_methods():
    for road in ROADS:
        pool = Pool.make(road)
        Pool.measure(road)
        if not pool.grown:
            raise RuntimeError("property")


def thread_body(road, errors):
    try:
        exercise(road)
    except BaseException as e:  # reported by the main thread
        errors.append(e)


def scenario_thread():
    for road in ROADS:
        errors = []
        t = threading.Thread(target=thread_body, args=(road, errors), name="roads-" + road)
        t.start()
        t.join()
        if errors:
            raise errors[0]


def gen_steps(roads):
    for road in roads:
        exercise(road)
        yield road


def scenario_generator():
    steps = gen_steps(ROADS)
    done = []
    while True:
        try:
            done.append(next(steps))
        except StopIteration:
            break
    if done != ROADS:
        raise RuntimeError("generator: %r" % done)


async def co_inner(road):
    await asyncio.sleep(0)
    exercise(road)
    return road


async def co_outer(roads):
    done = []
    for road in roads:
        done.append(await co_inner(road))
    return done


def scenario_coroutine():
    if asyncio.run(co_outer(ROADS)) != ROADS:
        raise RuntimeError("coroutine")


def recurse(n, road):
    if n == 0:
        return exercise(road)
    return recurse(n - 1, road)


def scenario_recursion():
    for road in ROADS:
        recurse(80, road)  # past the tracer's 32 frames


def c_thread_body():
    for road in ROADS:
        exercise(road)
    return threading.current_thread().name.startswith("Dummy")


def scenario_c_thread():
    if not ext.in_c_thread(c_thread_body):
        raise RuntimeError("in_c_thread ran on a Python thread")


def scenario_lambda():
    via = lambda road: exercise(road)  # noqa: E731
    for road in ROADS:
        via(road)
    p = ctypes.c_void_p()
    size = next_size()
    grab = lambda: (traceback.extract_stack(), cdll.cudaMalloc(ctypes.byref(p), size))  # noqa: E731
    st, rc = grab()
    keep(("cdll", record(st, "cudaMalloc", "cdll", rc, size=size, ptr=p.value)))


def scenario_comprehension():
    [exercise(road) for road in ROADS]
    sizes = [next_size() for _ in range(2)]
    if ext is not None:
        got = [(traceback.extract_stack(), 0, ext.malloc(s), s) for s in sizes]
    else:
        ps = [ctypes.c_void_p() for _ in sizes]
        got = [(traceback.extract_stack(), cdll.cudaMalloc(ctypes.byref(p), s), p, s) for p, s in zip(ps, sizes)]  # noqa: E501
        got = [(st, rc, p.value, s) for st, rc, p, s in got]
    for st, rc, ptr, s in got:
        keep((inline_road(), record(st, "cudaMalloc", inline_road(), rc, size=s, ptr=ptr)))


def partial_body(road):
    exercise(road)


def scenario_partial():
    for road in ROADS:
        functools.partial(partial_body, road)()
    p = ctypes.c_void_p()
    size = next_size()
    malloc_into_p = functools.partial(cdll.cudaMalloc, ctypes.byref(p))
    st = traceback.extract_stack(); rc = malloc_into_p(size)  # noqa: E702
    keep(("cdll", record(st, "cudaMalloc", "cdll", rc, size=size, ptr=p.value)))


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@logged
def decorated(road):
    exercise(road)


def scenario_decorator():
    for road in ROADS:
        decorated(road)


SUMMARY = []


def profiled(road):
    exercise(road)


def scenario_setprofile():
    events = []

    def profile(frame, event, arg):
        if frame.f_code.co_filename == HERE_FILE:
            events.append((event, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        for road in ROADS:
            profiled(road)
    finally:
        sys.setprofile(None)
    calls = [name for event, name in events if event == "call"]
    for name in ("profiled", "exercise", "malloc_cdll", "free_pydll", "info_cdll"):
        if name not in calls:
            raise RuntimeError("setprofile saw no call of %s" % name)
    if ext is not None and ("c_call", "malloc_ext") not in events:
        raise RuntimeError("setprofile saw no c_call in malloc_ext")
    SUMMARY.append("setprofile: %d events: %s" % (len(events), event_digest(events)))


def traced_fn(road):
    exercise(road)


def scenario_settrace():
    events = []

    def trace(frame, event, arg):
        if frame.f_code.co_filename != HERE_FILE:
            return None
        events.append((event, frame.f_code.co_name, frame.f_lineno))
        return trace

    first = len(EXPECT)
    sys.settrace(trace)
    try:
        for road in ROADS:
            traced_fn(road)
    finally:
        sys.settrace(None)
    # Every CUDA call's line was traced as a line event of its function.
    for e in EXPECT[first:]:
        _, line, name, _ = e["frames"][0]
        if ("line", name, line) not in events:
            raise RuntimeError("settrace saw no line %d of %s" % (line, name))
    SUMMARY.append("settrace: %d events: %s" % (len(events), event_digest(events)))


def event_digest(events):
    """Counts per event kind: the same traced or not, and short."""
    counts = {}
    for e in events:
        counts[e[0]] = counts.get(e[0], 0) + 1
    return " ".join("%s=%d" % kv for kv in sorted(counts.items()))


def release_all():
    while KEPT:
        road, ptr = KEPT.pop()
        FREE[road](ptr)


SCENARIOS = [
    ("plain", scenario_plain),  # first: a CDLL call is the tracer's first Python call
    ("methods", scenario_methods),
    ("thread", scenario_thread),
    ("generator", scenario_generator),
    ("coroutine", scenario_coroutine),
    ("recursion", scenario_recursion),
    ("c_thread", scenario_c_thread),
    ("lambda", scenario_lambda),
    ("comprehension", scenario_comprehension),
    ("partial", scenario_partial),
    ("decorator", scenario_decorator),
    ("setprofile", scenario_setprofile),
    ("settrace", scenario_settrace),
]


# ---- a second interpreter ----

def sub_main(out_path, with_ext):
    """Runs in the sub-interpreter: its own module, its own lists."""
    global ext
    if with_ext:
        import cutrace_nogil
        ext = cutrace_nogil
    else:
        ROADS.remove("ext")
    CTX.append("subinterpreter")
    for road in ROADS:
        exercise(road)
    release_all()
    with open(out_path, "w") as f:
        json.dump(EXPECT, f)


def scenario_subinterpreter(out_path):
    sub_out = out_path + ".sub"
    code = ("import sys; sys.path.insert(0, %r); import roads; roads.sub_main(%r, %r)"
            % (os.path.dirname(HERE_FILE), sub_out, ext is not None))
    status = ext.in_subinterpreter(code)
    if status != 0:
        raise RuntimeError("the sub-interpreter's code failed: %d" % status)
    with open(sub_out) as f:
        EXPECT.extend(json.load(f))
    os.unlink(sub_out)


def main(argv):
    global ext
    out_path = argv[1]
    opts = set(argv[2:])
    if "--no-ext" in opts:
        ROADS.remove("ext")
        scenarios = [s for s in SCENARIOS if s[0] != "c_thread"]
    else:
        import cutrace_nogil
        ext = cutrace_nogil
        scenarios = SCENARIOS
    if "--subinterp" in opts:
        scenarios = [("before", scenario_plain),
                     ("subinterpreter", lambda: scenario_subinterpreter(out_path)),
                     ("after", scenario_plain)]
    for name, run in scenarios:
        CTX.append(name)
        run()
        CTX.pop()
        print("ok %s" % name)
    CTX.append("release")
    release_all()
    with open(out_path, "w") as f:
        json.dump({"python": "%d.%d.%d" % sys.version_info[:3], "calls": EXPECT}, f, indent=0)
    for line in SUMMARY:
        print(line)
    counts = {}
    for e in EXPECT:
        counts[e["api"]] = counts.get(e["api"], 0) + 1
    print("calls: %s" % " ".join("%s=%d" % kv for kv in sorted(counts.items())))
    print("ok")


if __name__ == "__main__":
    main(sys.argv)
