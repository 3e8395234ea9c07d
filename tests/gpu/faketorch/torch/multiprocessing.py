"""torch.multiprocessing of the fake torch: the standard library's, with
reductions for tensors registered in multiprocessing's ForkingPickler (as
torch/multiprocessing/reductions.py does).

A CUDA tensor travels as a CUDA IPC handle: the sender calls
cudaIpcGetMemHandle on the base of the caching-allocator segment holding it
and sends (handle, offset, size, dtype, shape, device, values if small); the
receiver opens each handle once (cudaIpcOpenMemHandle, in libc10_cuda) and
closes it when the last tensor on it dies. Memory of expandable segments
travels as its pages' file descriptors instead (see c10_ipc_export_expandable).
CPU tensors travel by value.
"""
import array
import multiprocessing as _mp
from multiprocessing.reduction import ForkingPickler

from multiprocessing import (  # noqa: F401  (torch.multiprocessing re-exports these)
    Event, Process, Queue, SimpleQueue, active_children, current_process, get_all_start_methods,
    get_start_method, set_start_method,
)


def get_context(method=None):
    return _mp.get_context(method)


def _values_of(t):
    if t._arr is not None:
        return ("arr", t._arr.tobytes())
    return ("const", t._const)


def _restore(t, values):
    kind, v = values
    if kind == "arr" and t._arr is not None:
        t._set_values(array.array(t.dtype.code, v))
    elif kind == "const":
        t._set_values(("const", v))


def rebuild_cuda_tensor(dtype_name, shape, device_index, handle, offset, nbytes, values, kind="cuda"):
    import ctypes
    import torch
    from torch import _native
    torch.cuda._lazy_init()
    _native.check(_native.c10.c10_set_device(device_index), "cudaSetDevice")
    base = _native.out64()
    if kind == "vmm":  # an expandable segment's pages
        _native.check(_native.c10.c10_ipc_open_expandable(handle, len(handle), ctypes.byref(base)),
                      "cuMemImportFromShareableHandle")
    else:
        _native.check(_native.c10.c10_ipc_open(handle, ctypes.byref(base)), "cudaIpcOpenMemHandle")
    storage = torch.UntypedStorage("ipc", base.value + offset, nbytes, torch.device("cuda", device_index),
                                   ipc_base=base.value, ipc_handle=handle, ipc_offset=offset)
    t = torch.Tensor(shape, torch._DTYPES[dtype_name], torch.device("cuda", device_index), _storage=storage)
    _restore(t, values)
    return t


def rebuild_cpu_tensor(dtype_name, shape, values):
    import torch
    t = torch.Tensor(shape, torch._DTYPES[dtype_name], torch.device("cpu"))
    _restore(t, values)
    return t


def reduce_tensor(t):
    import torch
    if t.is_cuda:
        handle, offset, kind = torch._export_ipc(t.data_ptr(), t.nbytes)
        return (rebuild_cuda_tensor, (t.dtype.name, tuple(t.shape), t.device.index, handle, offset,
                                      t.nbytes, _values_of(t), kind))
    return (rebuild_cpu_tensor, (t.dtype.name, tuple(t.shape), _values_of(t)))


def init_reductions():
    import torch
    ForkingPickler.register(torch.Tensor, reduce_tensor)


init_reductions()
