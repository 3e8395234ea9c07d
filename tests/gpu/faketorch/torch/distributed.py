"""torch.distributed of the fake torch: the NCCL backend only, with a FileStore.

As in ProcessGroupNCCL: with device_id the communicator is made at once
(ncclGetUniqueId on rank 0, shared through the store, ncclCommInitRank),
otherwise at the first collective; all_reduce is ncclAllReduce of the tensor
in place; destroy_process_group finalizes and destroys the communicator.
Collectives run on the caller's current stream (see the README)."""
import ctypes
import fcntl
import os
import struct
import time

from . import _native


class ReduceOp:
    SUM = 0
    PRODUCT = 1
    MAX = 2
    MIN = 3
    AVG = 4


class FileStore:
    """torch's FileStore layout, in spirit: an append-only file of
    (8-byte length, key) (8-byte length, value) records under flock; the last
    worker to close it removes the file."""

    CLEANUP_KEY = "cleanup/"

    def __init__(self, path, world_size=-1):
        self.path = path
        self.world_size = world_size
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        os.close(fd)

    def _locked(self, fn):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return fn(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _read_all(fd):
        os.lseek(fd, 0, os.SEEK_SET)
        data = b""
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            data += chunk
        table, pos = {}, 0
        while pos + 8 <= len(data):
            (klen,) = struct.unpack_from("<Q", data, pos)
            key = data[pos + 8:pos + 8 + klen].decode()
            pos += 8 + klen
            (vlen,) = struct.unpack_from("<Q", data, pos)
            table[key] = data[pos + 8:pos + 8 + vlen]
            pos += 8 + vlen
        return table

    @staticmethod
    def _append(fd, key, value):
        k = key.encode()
        os.write(fd, struct.pack("<Q", len(k)) + k + struct.pack("<Q", len(value)) + value)

    def set(self, key, value):
        if isinstance(value, str):
            value = value.encode()
        self._locked(lambda fd: self._append(fd, key, bytes(value)))

    def get(self, key, timeout=300.0):
        end = time.monotonic() + timeout
        delay = 0.001
        while True:
            table = self._locked(self._read_all)
            if key in table:
                return table[key]
            if time.monotonic() > end:
                raise RuntimeError(f"FileStore: timed out waiting for key {key!r}")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def add(self, key, amount):
        def op(fd):
            table = self._read_all(fd)
            value = int(table.get(key, b"0")) + amount
            self._append(fd, key, str(value).encode())
            return value
        return self._locked(op)

    def close(self):
        if self.add(self.CLEANUP_KEY, 1) >= self.world_size:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


class _ProcessGroup:
    def __init__(self, store, rank, world_size, device_index):
        self.store = store
        self.rank = rank
        self.world_size = world_size
        self.device_index = device_index
        self.comm = 0

    def communicator(self, device_index):
        if self.comm:
            return self.comm
        uid = ctypes.create_string_buffer(128)
        if self.rank == 0:
            _native.check_nccl(_native.tc.tc_nccl_unique_id(uid), "ncclGetUniqueId")
            self.store.set("ncclUniqueId/0", uid.raw)
        else:
            uid = ctypes.create_string_buffer(self.store.get("ncclUniqueId/0"), 128)
        comm = _native.out64()
        _native.check_nccl(_native.tc.tc_nccl_init(self.world_size, uid, self.rank, device_index,
                                                   ctypes.byref(comm)), "ncclCommInitRank")
        self.comm = comm.value
        return self.comm


_pg = None


def is_available():
    return True


def is_nccl_available():
    return True


def is_initialized():
    return _pg is not None


def _default():
    if _pg is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return _pg


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    global _pg
    if _pg is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if backend not in (None, "nccl", "cuda:nccl"):
        raise RuntimeError(f"fake torch: only the nccl backend is modelled, not {backend!r}")
    if store is None:
        if init_method is None:
            init_method = "env://"
        if not init_method.startswith("file://"):
            raise RuntimeError(f"fake torch: only file:// init methods are modelled, not {init_method!r}")
        if world_size < 1 or rank < 0:
            raise ValueError("world_size and rank are required with a file:// init_method")
        store = FileStore(init_method[len("file://"):], world_size)
    from . import cuda, device as _device
    dev_index = None
    if device_id is not None:
        d = _device(device_id)
        dev_index = d.index if d.index is not None else cuda.current_device()
    _pg = _ProcessGroup(store, rank, world_size, dev_index)
    if dev_index is not None:  # eager: the communicator now, on that device
        cuda.set_device(dev_index)
        _pg.communicator(dev_index)


def get_backend(group=None):
    _default()
    return "nccl"


def get_world_size(group=None):
    return _default().world_size


def get_rank(group=None):
    return _default().rank


class _Work:
    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    pg = _default()
    if not tensor.is_cuda:
        raise RuntimeError("No backend type associated with device type cpu")
    from . import cuda, _run
    comm = pg.communicator(tensor.device.index)
    s = cuda.current_stream()
    ptr = tensor.data_ptr()
    _native.check_nccl(_native.tc.tc_nccl_all_reduce(comm, ptr, ptr, tensor.numel(), tensor.dtype.nccl,
                                                     op, s.cuda_stream), "ncclAllReduce")
    # The fake NCCL moves no data: the values stay as they are, which is the
    # right answer at world size 1 (for SUM, MAX, MIN, AVG and PRODUCT alike).
    _run([tensor], lambda: None)
    return _Work() if async_op else None


def barrier(group=None, async_op=False, device_ids=None):
    """ProcessGroupNCCL's barrier: an all_reduce of a one-element tensor, then a wait."""
    pg = _default()
    from . import cuda, zeros
    idx = device_ids[0] if device_ids else (pg.device_index if pg.device_index is not None
                                              else cuda.current_device())
    t = zeros(1, device=f"cuda:{idx}")
    all_reduce(t)
    cuda.current_stream().synchronize()
    return _Work() if async_op else None


def destroy_process_group(group=None):
    global _pg
    pg = _default()
    _pg = None
    if pg.comm:
        _native.check_nccl(_native.tc.tc_nccl_destroy(pg.comm), "ncclCommDestroy")
        pg.comm = 0
    if isinstance(pg.store, FileStore):
        pg.store.close()
