"""cudart_calls.py - the CUDA calls the server-shaped test programs make
(stk_sglang_current.py, stk_vllm_current.py, sglang_sim.py), through the
fake runtime.

    import cudart_calls as cuda
    cuda.load(gil_held)       ctypes.CDLL (the GIL released around each call,
                              as on a real server) or ctypes.PyDLL (kept)
    cuda.malloc(size) -> buffer, cuda.free(buffer), cuda.free_all()
    cuda.mem_get_info() -> (free, total)   one cudaMemGetInfo, as
                              torch.cuda.mem_get_info makes it
    cuda.set_device(ordinal)  cudaSetDevice, as torch.cuda.set_device
    cuda.ipc_export(buffer)   cudaIpcGetMemHandle, as custom all-reduce
                              exports its buffers to its peers
"""
import ctypes

_cudart = None
_kept = []


def load(gil_held):
    global _cudart
    _cudart = (ctypes.PyDLL if gil_held else ctypes.CDLL)("libcudart.so.12")


def _check(what, rc):
    if rc != 0:
        raise RuntimeError(f"{what} returned {rc}")


def malloc(size):
    buf = ctypes.c_void_p()
    _check("cudaMalloc", _cudart.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(size)))
    _kept.append(buf)
    return buf


def free(buf):
    _kept.remove(buf)
    _check("cudaFree", _cudart.cudaFree(buf))


def free_all():
    for buf in list(_kept):
        free(buf)


class _IpcMemHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def set_device(ordinal):
    _check("cudaSetDevice", _cudart.cudaSetDevice(ordinal))


def ipc_export(buf):
    handle = _IpcMemHandle()
    _check("cudaIpcGetMemHandle", _cudart.cudaIpcGetMemHandle(ctypes.byref(handle), buf))
    return handle


def mem_get_info():
    free_bytes, total = ctypes.c_size_t(), ctypes.c_size_t()
    _check("cudaMemGetInfo",
           _cudart.cudaMemGetInfo(ctypes.byref(free_bytes), ctypes.byref(total)))
    return free_bytes.value, total.value
