"""The fake torch's native libraries: libc10_cuda.so and libtorch_cuda.so, through ctypes.

They are looked up in $CUTRACE_FAKETORCH_LIB (a directory) or, failing that, in
<repository>/build/gpu/faketorch/lib (four levels above this package's
directory: tests/gpu/faketorch/torch -> the repository). Their own dependencies
(libcudart.so.12, libnccl.so.2, and the driver libcuda.so.1 the runtime opens)
resolve through LD_LIBRARY_PATH, which should name the fake stack (build/fake).

ctypes releases the GIL for the duration of every call, as real torch's
operators do, so a tracer sees these calls with the GIL released.
"""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def lib_dir():
    d = os.environ.get("CUTRACE_FAKETORCH_LIB")
    if d:
        return d
    return os.path.normpath(os.path.join(_HERE, "..", "..", "..", "..", "build", "gpu", "faketorch", "lib"))


def _load(name):
    path = os.path.join(lib_dir(), name)
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"fake torch: cannot load {path} ({e}); build it with `make faketorch` "
                          f"and run with LD_LIBRARY_PATH=<build>/fake") from None


c10 = _load("libc10_cuda.so")
tc = _load("libtorch_cuda.so")

u64 = ctypes.c_uint64
P64 = ctypes.POINTER(ctypes.c_uint64)
Psz = ctypes.POINTER(ctypes.c_size_t)
Pint = ctypes.POINTER(ctypes.c_int)
i = ctypes.c_int
sz = ctypes.c_size_t
buf = ctypes.c_char_p

_SIGS = {
    c10: {
        "c10_configure": [i],
        "c10_malloc": [sz, u64, i, P64],
        "c10_free": [u64],
        "c10_empty_cache": [],
        "c10_block_info": [u64, P64, P64, P64],
        "c10_stats": [ctypes.POINTER(ctypes.c_int64), i],
        "c10_stat_count": [],
        "c10_mapping_end": [u64, P64],
        "c10_mem_get_info": [Psz, Psz],
        "c10_device_count": [Pint],
        "c10_set_device": [i],
        "c10_get_device": [Pint],
        "c10_device_props": [i, Psz, ctypes.c_char_p, i],
        "c10_host_alloc": [sz, P64],
        "c10_host_free": [u64],
        "c10_host_is_pinned": [u64],
        "c10_host_stats": [P64, P64],
        "c10_ipc_export": [u64, ctypes.c_char_p, P64, P64],
        "c10_ipc_open": [ctypes.c_char_p, P64],
        "c10_ipc_close": [u64],
        "c10_ipc_open_count": [],
        "c10_ipc_export_expandable": [u64, sz, ctypes.c_char_p, sz, Psz, P64],
        "c10_ipc_open_expandable": [ctypes.c_char_p, sz, P64],
    },
    tc: {
        "tc_stream_create": [P64],
        "tc_stream_destroy": [u64],
        "tc_stream_synchronize": [u64],
        "tc_stream_wait": [u64, u64],
        "tc_device_synchronize": [],
        "tc_memcpy": [u64, u64, sz, i],
        "tc_launch": [u64, sz, u64],
        "tc_is_capturing": [u64, Pint],
        "tc_capture_begin": [u64, i],
        "tc_capture_end": [u64, P64, P64],
        "tc_graph_launch": [u64, u64],
        "tc_graph_destroy": [u64, u64],
        "tc_nccl_version": [Pint],
        "tc_nccl_unique_id": [ctypes.c_char_p],
        "tc_nccl_init": [i, ctypes.c_char_p, i, i, P64],
        "tc_nccl_all_reduce": [u64, u64, u64, sz, i, i, u64],
        "tc_nccl_destroy": [u64],
    },
}
for _lib, _fns in _SIGS.items():
    for _name, _args in _fns.items():
        _f = getattr(_lib, _name)
        _f.argtypes = _args
        _f.restype = ctypes.c_int
tc.tc_launch_count.argtypes = []
tc.tc_launch_count.restype = ctypes.c_uint64
tc.tc_cuda_error_string.argtypes = [ctypes.c_int]
tc.tc_cuda_error_string.restype = ctypes.c_char_p
tc.tc_nccl_error_string.argtypes = [ctypes.c_int]
tc.tc_nccl_error_string.restype = ctypes.c_char_p

CUDA_ERROR_MEMORY_ALLOCATION = 2
CU_ERROR_OUT_OF_MEMORY = 2


class CudaError(RuntimeError):
    pass


class OutOfMemoryError(CudaError):
    pass


def check(rc, what):
    """Raises for a failing cudaError_t/CUresult rc of the call `what`."""
    if rc == 0:
        return
    text = (tc.tc_cuda_error_string(rc) or b"unknown error").decode(errors="replace")
    if rc == CUDA_ERROR_MEMORY_ALLOCATION:
        raise OutOfMemoryError(f"CUDA out of memory ({what}: {text})")
    raise CudaError(f"CUDA error: {text} ({what}, error {rc})")


def check_nccl(rc, what):
    if rc == 0:
        return
    text = (tc.tc_nccl_error_string(rc) or b"unknown error").decode(errors="replace")
    raise RuntimeError(f"NCCL error in {what}: {text} (ncclResult {rc})")


def memcpy(dst, src, n, kind):
    """cudaMemcpy of n bytes. The fake driver checks a device range against the
    one mapping holding it, so a copy over several pages of an expandable
    segment is made page by page (real torch makes one call)."""
    dst_dev, src_dev = kind in (1, 3), kind in (2, 3)
    while n > 0:
        chunk = n
        for dev, p in ((dst_dev, dst), (src_dev, src)):
            end = ctypes.c_uint64(0)
            if dev and c10.c10_mapping_end(p, ctypes.byref(end)) == 0:
                chunk = min(chunk, end.value - p)
        check(tc.tc_memcpy(dst, src, chunk, kind), "cudaMemcpy")
        dst, src, n = dst + chunk, src + chunk, n - chunk


def out64():
    return ctypes.c_uint64(0)
