"""torch.cuda of the fake torch: devices, the caching allocator's numbers,
streams and CUDA graphs (see tests/gpu/faketorch/README.md)."""
import ctypes
import gc
import itertools
import threading

from . import _native

OutOfMemoryError = type("OutOfMemoryError", (_native.OutOfMemoryError,), {"__module__": "torch.cuda"})

_init_lock = threading.Lock()
_initialized = [False]
_tls = threading.local()
_graph_ids = itertools.count(1)
_capturing = {}  # stream handle -> the CUDAGraph capturing on it


def _lazy_init():
    if _initialized[0]:
        return
    with _init_lock:
        if _initialized[0]:
            return
        # Reads PYTORCH_CUDA_ALLOC_CONF once, as the allocator's first use does.
        _native.c10.c10_configure(-1)
        _initialized[0] = True


def is_available():
    n = ctypes.c_int(0)
    return _native.c10.c10_device_count(ctypes.byref(n)) == 0 and n.value > 0


def device_count():
    n = ctypes.c_int(0)
    return n.value if _native.c10.c10_device_count(ctypes.byref(n)) == 0 else 0


def set_device(device):
    from . import device as _dev
    idx = device if isinstance(device, int) else _dev(device).index or 0
    _lazy_init()
    _native.check(_native.c10.c10_set_device(idx), "cudaSetDevice")


def current_device():
    d = ctypes.c_int(0)
    _native.check(_native.c10.c10_get_device(ctypes.byref(d)), "cudaGetDevice")
    return d.value


class _DeviceProperties:
    def __init__(self, name, total_memory):
        self.name = name
        self.total_memory = total_memory
        self.major, self.minor = 9, 0
        self.multi_processor_count = 132

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None):
    idx = _index(device)
    total = ctypes.c_size_t(0)
    name = ctypes.create_string_buffer(256)
    _native.check(_native.c10.c10_device_props(idx, ctypes.byref(total), name, len(name)),
                  "cudaGetDeviceProperties")
    return _DeviceProperties(name.value.decode(errors="replace"), total.value)


def get_device_name(device=None):
    return get_device_properties(device).name


def _index(device):
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    from . import device as _dev
    d = _dev(device)
    return d.index if d.index is not None else current_device()


def mem_get_info(device=None):
    _lazy_init()
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    _native.check(_native.c10.c10_mem_get_info(ctypes.byref(free), ctypes.byref(total)), "cudaMemGetInfo")
    return free.value, total.value


def synchronize(device=None):
    _lazy_init()
    _native.check(_native.tc.tc_device_synchronize(), "cudaDeviceSynchronize")


# --- the caching allocator's numbers -----------------------------------------

_STAT_TYPES = ["allocation", "segment", "active", "allocated_bytes", "reserved_bytes",
               "active_bytes", "requested_bytes"]
_POOLS = ["all", "small_pool", "large_pool"]
_METRICS = ["current", "peak", "allocated", "freed"]


def _raw_stats():
    n = _native.c10.c10_stat_count()
    out = (ctypes.c_int64 * n)()
    _native.check(_native.c10.c10_stats(out, n), "memory_stats")
    return list(out)


def memory_stats(device=None):
    raw = _raw_stats()
    stats = {}
    k = 0
    for t in _STAT_TYPES:
        for p in _POOLS:
            for m in _METRICS:
                stats[f"{t}.{p}.{m}"] = raw[k]
                k += 1
    stats["num_alloc_retries"] = raw[k]
    stats["num_ooms"] = raw[k + 1]
    stats["num_device_alloc"] = raw[k + 2]
    stats["num_device_free"] = raw[k + 3]
    stats["num_sync_all_streams"] = 0
    stats["max_split_size"] = -1
    return dict(sorted(stats.items()))


def memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.peak"]


def empty_cache():
    if _initialized[0]:
        _native.c10.c10_empty_cache()


def ipc_collect():
    """Real torch frees here the blocks other processes stopped using; the fake
    keeps no such limbo (see the README), so only dead tensors are collected."""
    gc.collect()


# --- streams -------------------------------------------------------------------

class Stream:
    def __new__(cls, device=None, priority=0, _handle=None, **kwargs):
        self = super().__new__(cls)
        self._owned = False
        if _handle is not None:
            self.cuda_stream = _handle
        else:
            _lazy_init()
            h = _native.out64()
            _native.check(_native.tc.tc_stream_create(ctypes.byref(h)), "cudaStreamCreateWithFlags")
            self.cuda_stream = h.value
            self._owned = True
        self.device_index = _index(device) if device is not None else 0
        return self

    def wait_stream(self, stream):
        _native.check(_native.tc.tc_stream_wait(self.cuda_stream, stream.cuda_stream), "wait_stream")

    def synchronize(self):
        _native.check(_native.tc.tc_stream_synchronize(self.cuda_stream), "cudaStreamSynchronize")

    def query(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream

    def __hash__(self):
        return hash(self.cuda_stream)

    def __repr__(self):
        return f"<torch.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"

    # Streams of torch's pool live as long as the process: never destroyed.


_default_stream = None


def default_stream(device=None):
    global _default_stream
    if _default_stream is None:
        _default_stream = Stream(_handle=0)  # the legacy default stream
    return _default_stream


def current_stream(device=None):
    s = getattr(_tls, "stream", None)
    return s if s is not None else default_stream()


def set_stream(s):
    _tls.stream = s


class stream:
    """Context manager: makes s the thread's current stream."""

    def __init__(self, s):
        self.s = s

    def __enter__(self):
        self.prev = getattr(_tls, "stream", None)
        if self.s is not None:
            _tls.stream = self.s
        return self.s

    def __exit__(self, *exc):
        _tls.stream = self.prev
        return False


class StreamContext(stream):
    pass


# --- CUDA graphs -----------------------------------------------------------------

def _capturing_graph(s):
    return _capturing.get(s.cuda_stream)


def _alloc_key():
    """The allocator's pool for this thread's allocations: its current stream's,
    or the private pool of the graph capturing on that stream."""
    s = current_stream()
    g = _capturing.get(s.cuda_stream)
    return g._pool_key if g is not None else s.cuda_stream


_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}


class CUDAGraph:
    def __init__(self):
        self._graph = 0
        self._exec = 0
        self._work = []
        self._pool_key = (1 << 62) | next(_graph_ids)
        self._stream = None

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if capture_error_mode not in _MODES:
            raise RuntimeError(f"Unknown capture_error_mode {capture_error_mode!r}")
        s = current_stream()
        if s.cuda_stream == 0:
            raise RuntimeError("CUDA graphs must be captured on a non-default stream.")
        if pool is not None and hasattr(pool, "_pool_key"):
            self._pool_key = pool._pool_key
        _native.check(_native.tc.tc_capture_begin(s.cuda_stream, _MODES[capture_error_mode]),
                      "cudaStreamBeginCapture")
        self._stream = s
        _capturing[s.cuda_stream] = self

    def capture_end(self):
        s = self._stream
        _capturing.pop(s.cuda_stream, None)
        g, x = _native.out64(), _native.out64()
        rc = _native.tc.tc_capture_end(s.cuda_stream, ctypes.byref(g), ctypes.byref(x))
        self._graph, self._exec = g.value, x.value
        _native.check(rc, "cudaStreamEndCapture")

    def _record(self, work):
        self._work.append(work)

    def replay(self):
        if not self._exec:
            raise RuntimeError("replay: the graph was not captured")
        _native.check(_native.tc.tc_graph_launch(self._exec, current_stream().cuda_stream), "cudaGraphLaunch")
        for w in self._work:
            w()

    def pool(self):
        return self

    def reset(self):
        if self._graph or self._exec:
            _native.tc.tc_graph_destroy(self._graph, self._exec)
        self._graph = self._exec = 0
        self._work = []

    def __del__(self):
        try:
            self.reset()
        except Exception:
            pass


class graph:
    """torch.cuda.graph: synchronize, collect, empty the cache, then capture on
    a side stream (one shared by default, as torch's default_capture_stream)."""
    default_capture_stream = None

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        if self.__class__.default_capture_stream is None:
            self.__class__.default_capture_stream = Stream()
        self.pool = () if pool is None else (pool,)
        self.capture_stream = stream if stream is not None else self.__class__.default_capture_stream
        self.stream_ctx = StreamContext(self.capture_stream)
        self.cuda_graph = cuda_graph
        self.capture_error_mode = capture_error_mode
        if capture_error_mode not in _MODES:
            raise RuntimeError(f"Unknown capture_error_mode {capture_error_mode!r}")

    def __enter__(self):
        synchronize()
        gc.collect()
        empty_cache()
        self.stream_ctx.__enter__()
        self.cuda_graph.capture_begin(*self.pool, capture_error_mode=self.capture_error_mode)

    def __exit__(self, *exc):
        try:
            self.cuda_graph.capture_end()
        finally:
            self.stream_ctx.__exit__(*exc)
        return False
