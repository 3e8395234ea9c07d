"""nccl_calls.py - the NCCL calls a server-shaped test program makes
(sglang_sim.py) through the fake libnccl.so.2, as torch's ProcessGroupNCCL
or SGLang's PyNcclCommunicator make them: ctypes.CDLL, which releases the
GIL around each call.

    import nccl_calls as nccl
    nccl.load()
    uid = nccl.unique_id()             rank 0's ncclGetUniqueId, as bytes
    comm = nccl.init_rank(uid, nranks, rank)
    nccl.destroy(comm)
"""
import ctypes

_nccl = None


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def _check(what, rc):
    if rc != 0:
        raise RuntimeError(f"{what} returned {rc}")


def load():
    global _nccl
    _nccl = ctypes.CDLL("libnccl.so.2")


def unique_id():
    uid = _UniqueId()
    _check("ncclGetUniqueId", _nccl.ncclGetUniqueId(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.byref(uid), ctypes.sizeof(uid))


def init_rank(uid_bytes, nranks, rank):
    comm = ctypes.c_void_p()
    uid = _UniqueId.from_buffer_copy(uid_bytes)
    _check("ncclCommInitRank", _nccl.ncclCommInitRank(ctypes.byref(comm), nranks, uid, rank))
    return comm


def destroy(comm):
    _check("ncclCommDestroy", _nccl.ncclCommDestroy(comm))
