"""torch.multiprocessing of the fake torch: the standard library's, with
reductions for tensors registered in multiprocessing's ForkingPickler (as
torch/multiprocessing/reductions.py does).

A CUDA tensor travels as a CUDA IPC handle: the sender calls
cudaIpcGetMemHandle on the base of the caching-allocator segment holding it
and sends (handle, offset, size, dtype, shape, device, values if small); the
receiver opens each handle once (cudaIpcOpenMemHandle, in libc10_cuda) and
closes it when the last tensor on it dies. The host mirror of the values
(the fake keeps values on the host) moves to a shared file under /dev/shm, so
writes on either side are seen on the other, as on a GPU. Memory of expandable segments
travels as its pages' file descriptors instead (see c10_ipc_export_expandable).
CPU tensors travel by value.
"""
import array
import itertools
import mmap
import multiprocessing as _mp
import os
import tempfile
from multiprocessing.reduction import ForkingPickler

from multiprocessing import (  # noqa: F401  (torch.multiprocessing re-exports these)
    Event, Process, Queue, SimpleQueue, active_children, current_process, get_all_start_methods,
    get_start_method, set_start_method,
)


def get_context(method=None):
    return _mp.get_context(method)


_shm_ids = itertools.count()


def _map_mirror(t, path):
    with open(path, "r+b") as f:
        m = mmap.mmap(f.fileno(), t.nbytes)
    t._arr = memoryview(m).cast(t.dtype.code)
    t._shm = (path, m)


def _values_of(t, share):
    """The values to send. A CUDA tensor's mirror moves into a shared file first
    (once), so that sender and receivers see each other's writes, as they do
    on a GPU; a CPU tensor's values are copied."""
    if t._arr is None:
        return ("const", t._const)
    if not share or t.nbytes == 0:
        return ("arr", t._arr.tobytes())
    if t._shm is None:
        base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        path = os.path.join(base, f"faketorch-{os.getpid()}-{next(_shm_ids)}")
        with open(path, "wb") as f:
            f.write(t._arr.tobytes())
        _map_mirror(t, path)
        t.untyped_storage().shm_path = path
    return ("shm", t._shm[0])


def _restore(t, values):
    kind, v = values
    if kind == "shm" and t._arr is not None:
        try:
            _map_mirror(t, v)
        except OSError:  # the sender's tensor is gone already: its values are unknown
            pass
    elif kind == "arr" and t._arr is not None:
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
                                      t.nbytes, _values_of(t, True), kind))
    return (rebuild_cpu_tensor, (t.dtype.name, tuple(t.shape), _values_of(t, False)))


def init_reductions():
    import torch
    ForkingPickler.register(torch.Tensor, reduce_tensor)


init_reductions()
