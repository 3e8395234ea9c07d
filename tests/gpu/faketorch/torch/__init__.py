"""A fake `torch` for cutrace's real-GPU test's dry run on the fake CUDA stack.

Only the API listed in tests/gpu/faketorch/README.md exists. Device memory comes
from libc10_cuda.so (a model of PyTorch's CUDA caching allocator), streams,
copies, graphs and NCCL from libtorch_cuda.so, both through ctypes. The fake
stack runs no kernels, so every tensor keeps its values on the host: an exact
mirror (the array module) up to 64 MiB, a single "every element is v" value
beyond, so that programs' checks work without gigabytes of host memory.
"""
import array as _array
import builtins as _builtins
import ctypes as _ctypes
import mmap as _mmap
import os as _os
import threading as _threading

from . import _native
from . import version  # noqa: F401  (torch.version.cuda)

__version__ = "2.11.0+cutrace.fake"

MIRROR_LIMIT = 64 << 20  # tensors up to this many bytes keep every value

_pybool = _builtins.bool
_pyfloat = _builtins.float
_pyint = _builtins.int
_pyall = _builtins.all


class dtype:
    def __init__(self, name, code, itemsize, is_floating_point, nccl):
        self.name = name
        self.code = code  # array module type code of the mirror
        self.itemsize = itemsize
        self.is_floating_point = is_floating_point
        self.nccl = nccl  # ncclDataType_t

    def __repr__(self):
        return f"torch.{self.name}"

    def convert(self, v):
        if self.name == "bool":
            return 1 if v else 0
        if self.is_floating_point:
            return _pyfloat(v)
        v = _pyint(v)
        if self.name == "uint8":
            return v & 0xFF
        return v

    def python(self, v):
        if self.name == "bool":
            return _pybool(v)
        return v


uint8 = dtype("uint8", "B", 1, False, 1)      # ncclUint8
int64 = dtype("int64", "q", 8, False, 4)      # ncclInt64
float32 = dtype("float32", "f", 4, True, 7)   # ncclFloat32
_bool = dtype("bool", "B", 1, False, 0)       # ncclInt8 (as ProcessGroupNCCL sends bool)
long = int64
_DTYPES = {d.name: d for d in (uint8, int64, float32, _bool)}


class device:
    def __init__(self, type, index=None):  # noqa: A002  (torch's own parameter name)
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, _pyint):
            type, index = "cuda", type
        elif ":" in type:
            type, idx = type.split(":", 1)
            index = _pyint(idx)
        if type not in ("cuda", "cpu"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {type}")
        self.type = type
        self.index = index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


def _device_of(d):
    if d is None:
        return device("cpu")
    d = device(d)
    if d.type == "cuda" and d.index is None:
        from . import cuda
        d = device("cuda", cuda.current_device())
    return d


class Size(tuple):
    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"torch.Size([{', '.join(str(s) for s in self)}])"


def _shape_of(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, _pyint) or s < 0:
            raise RuntimeError(f"bad size {size!r}")
    return Size(size)


class UntypedStorage:
    """A tensor's memory: caching-allocator device memory, an IPC-opened range,
    pinned host memory from the host caching allocator, or ordinary host memory."""

    def __init__(self, kind, ptr, nbytes, dev, keep=None, ipc_base=0, ipc_handle=None, ipc_offset=0):
        self.kind = kind  # "cuda" | "ipc" | "pinned" | "cpu"
        self.ptr = ptr
        self.size = nbytes
        self.device = dev
        self.keep = keep  # cpu: the object that owns the bytes
        self.ipc_base = ipc_base
        self.ipc_handle = ipc_handle  # ipc: the handle it was opened from, for re-sharing
        self.ipc_offset = ipc_offset
        self.shm_path = None  # the sender's shared mirror file, removed with the storage

    def data_ptr(self):
        return self.ptr

    def nbytes(self):
        return self.size

    def _share_cuda_(self):
        """(device, handle, storage size, offset in the segment), the head of real torch's tuple."""
        if self.kind == "ipc":
            return (self.device.index, self.ipc_handle, self.size, self.ipc_offset)
        if self.kind != "cuda":
            raise RuntimeError("_share_cuda_: not caching-allocator CUDA memory")
        handle, offset, _ = _export_ipc(self.ptr, self.size)
        return (self.device.index, handle, self.size, offset)

    def __del__(self):
        try:
            if not self.ptr:
                return
            if self.kind == "cuda":
                _native.c10.c10_free(self.ptr)
            elif self.kind == "ipc":
                _native.c10.c10_ipc_close(self.ipc_base)
            elif self.kind == "pinned":
                _native.c10.c10_host_free(self.ptr)
            self.ptr = 0
            if self.shm_path:
                _os.unlink(self.shm_path)
                self.shm_path = None
        except Exception:  # interpreter shutdown: the libraries may be gone
            pass


CUDA_ERROR_NOT_SUPPORTED = 801


def _export_ipc(ptr, nbytes=0):
    """(handle, offset, kind): a cudaIpcMemHandle of ptr's segment ("cuda"), or
    for an expandable segment the description of its pages ("vmm")."""
    handle = _ctypes.create_string_buffer(64)
    off, seg = _native.out64(), _native.out64()
    rc = _native.c10.c10_ipc_export(ptr, handle, _ctypes.byref(off), _ctypes.byref(seg))
    if rc == CUDA_ERROR_NOT_SUPPORTED:
        blob = _ctypes.create_string_buffer(16 + 4 * 65536)
        n = _ctypes.c_size_t(0)
        _native.check(_native.c10.c10_ipc_export_expandable(ptr, max(nbytes, 1), blob, len(blob),
                                                            _ctypes.byref(n), _ctypes.byref(off)),
                      "cuMemExportToShareableHandle")
        return blob.raw[:n.value], off.value, "vmm"
    _native.check(rc, "cudaIpcGetMemHandle")
    return handle.raw, off.value, "cuda"


def _cuda_storage(nbytes, dev):
    from . import cuda
    cuda._lazy_init()
    ptr = _native.out64()
    if nbytes:
        rc = _native.c10.c10_malloc(nbytes, cuda._alloc_key(), dev.index, _ctypes.byref(ptr))
        if rc:
            try:
                _native.check(rc, f"allocating {nbytes} bytes")
            except _native.OutOfMemoryError as e:
                raise cuda.OutOfMemoryError(str(e)) from None
    return UntypedStorage("cuda", ptr.value, nbytes, dev)


def _host_storage(nbytes, pinned, mirror):
    if pinned:
        from . import cuda
        cuda._lazy_init()
        ptr = _native.out64()
        _native.check(_native.c10.c10_host_alloc(nbytes, _ctypes.byref(ptr)), "cudaHostAlloc")
        return UntypedStorage("pinned", ptr.value, nbytes, device("cpu"))
    if mirror is not None:
        addr = mirror.buffer_info()[0] if len(mirror) else 0
        return UntypedStorage("cpu", addr, nbytes, device("cpu"), keep=mirror)
    # Large: an untouched anonymous mapping, so a pointer exists without memory.
    m = _mmap.mmap(-1, max(nbytes, 1))
    addr = _ctypes.addressof(_ctypes.c_char.from_buffer(m))
    return UntypedStorage("cpu", addr, nbytes, device("cpu"), keep=m)


class Tensor:
    __hash__ = object.__hash__

    def __init__(self, shape, dt, dev, pin_memory=False, _storage=None):
        self._shape = Size(shape)
        self._dtype = dt
        self._device = dev
        n = self._shape.numel()
        nbytes = n * dt.itemsize
        self._arr = _array.array(dt.code, bytes(nbytes)) if nbytes <= MIRROR_LIMIT else None
        self._const = 0
        self._shm = None  # (path, mmap) once the mirror lives in shared memory (CUDA IPC)
        if _storage is not None:
            self._storage = _storage
        elif dev.type == "cuda":
            self._storage = _cuda_storage(nbytes, dev)
        else:
            self._storage = _host_storage(nbytes, pin_memory, self._arr)

    # --- values -------------------------------------------------------------
    def _set_values(self, values):
        """values: an array of this dtype's code and length, or ("const", v)."""
        if isinstance(values, tuple):
            v = self._dtype.convert(values[1])
            if self._arr is not None:
                self._put(_array.array(self._dtype.code, [v]) * len(self._arr))
            else:
                self._const = v
        elif self._arr is not None:
            self._put(values)
        else:
            self._const = values[0] if len(values) else 0

    def _put(self, arr):
        if self._shm is not None or (self._storage.kind == "cpu" and self._storage.keep is self._arr):
            # keep the buffer: host memory's data_ptr, or a mirror shared with other processes
            self._arr[:] = arr if self._shm is None else _array.array(self._dtype.code, arr)
        else:
            self._arr = arr

    def _values(self):
        """An iterable of the values (an array) or ("const", v)."""
        if self._arr is not None:
            return self._arr
        return ("const", self._const)

    def _elementwise(self, fn, out_dtype):
        out = Tensor(self._shape, out_dtype, self._device)
        src = self

        def work():
            vals = src._values()
            if isinstance(vals, tuple):
                out._set_values(("const", fn(vals[1])))
            elif out._arr is not None:
                conv = out_dtype.convert
                out._set_values(_array.array(out_dtype.code, [conv(fn(x)) for x in vals]))
            else:
                out._set_values(("const", fn(vals[0]) if len(vals) else 0))
        _run([out, src], work)
        return out

    def _binary(self, other, fn, out_dtype):
        if not isinstance(other, Tensor):
            return self._elementwise(lambda x: fn(x, other), out_dtype)
        if tuple(other.shape) != tuple(self._shape):
            raise RuntimeError(f"shapes {tuple(self._shape)} and {tuple(other.shape)} differ")
        out = Tensor(self._shape, out_dtype, self._device)
        a, b = self, other

        def work():
            va, vb = a._values(), b._values()
            if isinstance(va, tuple) and isinstance(vb, tuple):
                out._set_values(("const", fn(va[1], vb[1])))
                return
            if isinstance(va, tuple):
                va = [va[1]] * len(vb)
            if isinstance(vb, tuple):
                vb = [vb[1]] * len(va)
            conv = out_dtype.convert
            out._set_values(_array.array(out_dtype.code, [conv(fn(x, y)) for x, y in zip(va, vb)]))
        _run([out, a, b], work)
        return out

    def _result_dtype(self, scalar):
        if isinstance(scalar, Tensor):
            return self._dtype
        if isinstance(scalar, _pyfloat) and not self._dtype.is_floating_point:
            return float32
        return self._dtype

    def __mul__(self, other):
        return self._binary(other, lambda x, y: x * y, self._result_dtype(other))

    __rmul__ = __mul__

    def __add__(self, other):
        return self._binary(other, lambda x, y: x + y, self._result_dtype(other))

    __radd__ = __add__

    def __sub__(self, other):
        return self._binary(other, lambda x, y: x - y, self._result_dtype(other))

    def __eq__(self, other):
        if isinstance(other, Tensor):
            return self._binary(other, lambda x, y: x == y, _bool)
        target = other
        return self._elementwise(lambda x: x == target, _bool)

    def __ne__(self, other):
        if isinstance(other, Tensor):
            return self._binary(other, lambda x, y: x != y, _bool)
        target = other
        return self._elementwise(lambda x: x != target, _bool)

    def fill_(self, value):
        v = value.item() if isinstance(value, Tensor) else value
        dst = self
        _run([dst], lambda: dst._set_values(("const", v)))
        return self

    def zero_(self):
        return self.fill_(0)

    def _reduce(self, how, out_dtype):
        out = Tensor((), out_dtype, self._device)
        src = self

        def work():
            vals = src._values()
            n = src._shape.numel()
            if how == "all":
                if isinstance(vals, tuple):
                    r = n == 0 or _pybool(vals[1])
                else:
                    r = 0 not in vals
            elif isinstance(vals, tuple):
                r = vals[1] * n
            else:
                r = sum(vals)
            out._set_values(("const", r))
        _run([out, src], work)
        return out

    def all(self):
        return self._reduce("all", _bool)

    def sum(self):
        return self._reduce("sum", float32 if self._dtype.is_floating_point else int64)

    def item(self):
        if self._shape.numel() != 1:
            raise RuntimeError("a Tensor with more than one element cannot be converted to Scalar")
        if self._device.type == "cuda":  # _local_scalar_dense: a copy to the host
            host = _array.array(self._dtype.code, bytes(self._dtype.itemsize))
            _native.check(_native.tc.tc_memcpy(host.buffer_info()[0], self._storage.ptr,
                                               self._dtype.itemsize, 2), "cudaMemcpy")
        vals = self._values()
        v = vals[1] if isinstance(vals, tuple) else vals[0]
        return self._dtype.python(v)

    def __bool__(self):
        return _pybool(self.item())

    def __float__(self):
        return _pyfloat(self.item())

    def __int__(self):
        return _pyint(self.item())

    def tolist(self):
        vals = self._values()
        n = self._shape.numel()
        if isinstance(vals, tuple):
            if n * self._dtype.itemsize > MIRROR_LIMIT:
                raise RuntimeError("tolist of a tensor over 64 MiB: the fake keeps no per-element values")
            flat = [vals[1]] * n
        else:
            flat = list(vals)
        flat = [self._dtype.python(v) for v in flat]
        if not self._shape:
            return flat[0]

        def nest(items, dims):
            if len(dims) == 1:
                return items
            step = len(items) // dims[0]
            return [nest(items[i * step:(i + 1) * step], dims[1:]) for i in range(dims[0])]
        return nest(flat, list(self._shape))

    # --- memory -------------------------------------------------------------
    def copy_(self, src, non_blocking=False):
        if tuple(src.shape) != tuple(self._shape):
            raise RuntimeError(f"copy_: shapes {tuple(src.shape)} and {tuple(self._shape)} differ")
        kind = {("cpu", "cpu"): 0, ("cpu", "cuda"): 1, ("cuda", "cpu"): 2,
                ("cuda", "cuda"): 3}[(src._device.type, self._device.type)]
        n = min(self.nbytes, src.nbytes)
        if kind and n:
            _native.memcpy(self._storage.ptr, src._storage.ptr, n, kind)
        dst = self

        def work():
            vals = src._values()
            if isinstance(vals, tuple) or src._dtype is not dst._dtype:
                if isinstance(vals, tuple):
                    dst._set_values(vals)
                else:
                    conv = dst._dtype.convert
                    dst._set_values(_array.array(dst._dtype.code, [conv(x) for x in vals]))
            else:
                dst._set_values(_array.array(dst._dtype.code, vals))
        work()
        return self

    def to(self, *args, **kwargs):
        non_blocking = kwargs.pop("non_blocking", False)
        target = kwargs.pop("device", None)
        dt = kwargs.pop("dtype", None)
        for a in args:
            if isinstance(a, dtype):
                dt = a
            else:
                target = a
        dev = self._device if target is None else _device_of(target)
        dt = dt or self._dtype
        if dev == self._device and dt is self._dtype:
            return self
        out = Tensor(self._shape, dt, dev)
        return out.copy_(self, non_blocking=non_blocking)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        return self.to(device if device is not None else "cuda", non_blocking=non_blocking)

    def pin_memory(self):
        if self._device.type != "cpu":
            raise RuntimeError("cannot pin a CUDA tensor")
        out = Tensor(self._shape, self._dtype, self._device, pin_memory=True)
        return out.copy_(self)

    def is_pinned(self):
        return self._storage.kind == "pinned"

    def data_ptr(self):
        return self._storage.ptr

    def untyped_storage(self):
        return self._storage

    def numel(self):
        return self._shape.numel()

    def element_size(self):
        return self._dtype.itemsize

    def size(self, dim=None):
        return self._shape if dim is None else self._shape[dim]

    def dim(self):
        return len(self._shape)

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    @property
    def nbytes(self):
        return self._shape.numel() * self._dtype.itemsize

    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def device(self):
        return self._device

    @property
    def is_cuda(self):
        return self._device.type == "cuda"

    def __repr__(self):
        dev = f", device='{self._device}'" if self.is_cuda else ""
        return f"tensor(shape={tuple(self._shape)}, dtype={self._dtype}{dev})"


def _run(tensors, work):
    """Runs `work` (the values' side of a kernel) after a launch on the current
    stream, or records it in the graph being captured there, to run at replay."""
    cuda_t = [t for t in tensors if t._device.type == "cuda"]
    if not cuda_t:
        work()
        return
    from . import cuda
    stream = cuda.current_stream()
    out = cuda_t[0]
    _native.tc.tc_launch(out._storage.ptr, out.nbytes, stream.cuda_stream)
    g = cuda._capturing_graph(stream)
    if g is not None:
        g._record(work)
    else:
        work()


def _factory_dtype(value, dt):
    if dt is not None:
        return dt
    if isinstance(value, _pybool):
        return _bool
    if isinstance(value, _pyint):
        return int64
    return float32


def empty(*size, dtype=None, device=None, pin_memory=False, requires_grad=False):
    t = Tensor(_shape_of(size), dtype or float32, _device_of(device), pin_memory=pin_memory)
    return t


def zeros(*size, dtype=None, device=None, pin_memory=False, requires_grad=False):
    return full(_shape_of(size), 0, dtype=dtype or float32, device=device, pin_memory=pin_memory)


def ones(*size, dtype=None, device=None, pin_memory=False, requires_grad=False):
    return full(_shape_of(size), 1, dtype=dtype or float32, device=device, pin_memory=pin_memory)


def full(size, fill_value, dtype=None, device=None, pin_memory=False, requires_grad=False):
    t = Tensor(_shape_of((size,)), _factory_dtype(fill_value, dtype), _device_of(device),
               pin_memory=pin_memory)
    return t.fill_(fill_value)


def arange(*args, dtype=None, device=None, requires_grad=False):
    if len(args) == 1:
        start, end, step = 0, args[0], 1
    elif len(args) == 2:
        start, end, step = args[0], args[1], 1
    else:
        start, end, step = args
    values = range(start, end, step) if _pyall(isinstance(a, _pyint) for a in (start, end, step)) else None
    if values is None:
        count = max(0, -(-(end - start) // step))
        values = [start + i * step for i in range(_pyint(count))]
    dt = dtype or (int64 if _pyall(isinstance(a, _pyint) for a in (start, end, step)) else float32)
    t = Tensor((len(values),), dt, _device_of(device))
    if t._arr is not None:
        conv = dt.convert
        work_values = _array.array(dt.code, [conv(v) for v in values]) if dt.code != "q" else _array.array("q", values)
    else:
        work_values = None

    def work():
        if work_values is not None:
            t._set_values(work_values)
        else:
            t._set_values(("const", 0))
    if t._device.type == "cpu":
        work()
    else:
        _run([t], work)
    return t


def tensor(data, dtype=None, device=None):
    flat = list(data) if isinstance(data, (list, tuple)) else [data]
    shape = (len(flat),) if isinstance(data, (list, tuple)) else ()
    dt = dtype or (_factory_dtype(flat[0], None) if flat else float32)
    cpu = Tensor(shape, dt, _device_of("cpu"))
    cpu._set_values(_array.array(dt.code, [dt.convert(v) for v in flat]))
    return cpu.to(_device_of(device)) if device is not None else cpu


def equal(a, b):
    if tuple(a.shape) != tuple(b.shape):
        return False
    va, vb = a._values(), b._values()
    if isinstance(va, tuple) and isinstance(vb, tuple):
        return va[1] == vb[1]
    if isinstance(va, tuple):
        return _pyall(v == va[1] for v in vb)
    if isinstance(vb, tuple):
        return _pyall(v == vb[1] for v in va)
    if a._dtype is b._dtype:
        return va == vb
    return _pyall(x == y for x, y in zip(va, vb))


def all(t):  # noqa: A001  (torch.all)
    return t.all()


_seed = [0]


def manual_seed(seed):
    _seed[0] = _pyint(seed)
    return _seed[0]


class no_grad:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_lock = _threading.Lock()

# torch.bool and torch.float are names of Python builtins: bound last, so the
# code above keeps the builtins.
globals()["bool"] = _bool
globals()["float"] = float32

from . import cuda  # noqa: E402
from . import distributed  # noqa: E402
from . import multiprocessing  # noqa: E402

OutOfMemoryError = cuda.OutOfMemoryError
