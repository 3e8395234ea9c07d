"""ctypes_roads.py - CUDA and NCCL reached only through ctypes, as SGLang does.

Two ranks, each a process that never links CUDA: like SGLang's
cuda_wrapper.py (CudaRTLibrary) it loads the runtime with ctypes and calls
cudaMalloc, cudaIpcGetMemHandle and cudaIpcOpenMemHandle on the peer's
buffer; like pynccl_wrapper.py it loads NCCL with ctypes and makes a
communicator and one all-reduce. Every call is a dlsym on a library handle.

    python3 ctypes_roads.py EXCHANGE_DIR        (starts both ranks)
"""
import ctypes
import os
import subprocess
import sys
import time


class CudaIpcMemHandle(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 64)]


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def wait_for(path):
    for _ in range(4000):
        if os.path.exists(path):
            return
        time.sleep(0.005)
    raise TimeoutError(path)


def publish(path, data):
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.rename(path + ".tmp", path)


def check(what, rc):
    if rc != 0:
        raise RuntimeError(f"{what} returned {rc}")


def rank_main(rank, exchange):
    cudart = ctypes.CDLL("libcudart.so.12")
    nccl = ctypes.CDLL("libnccl.so.2")
    check("cudaSetDevice", cudart.cudaSetDevice(rank))

    buf = ctypes.c_void_p()
    check("cudaMalloc", cudart.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(8 << 20)))
    handle = CudaIpcMemHandle()
    check("cudaIpcGetMemHandle", cudart.cudaIpcGetMemHandle(ctypes.byref(handle), buf))
    publish(os.path.join(exchange, f"handle{rank}"), bytes(handle))
    peer_file = os.path.join(exchange, f"handle{1 - rank}")
    wait_for(peer_file)
    with open(peer_file, "rb") as f:
        peer_handle = CudaIpcMemHandle.from_buffer_copy(f.read())
    peer = ctypes.c_void_p()
    check("cudaIpcOpenMemHandle",
          cudart.cudaIpcOpenMemHandle(ctypes.byref(peer), peer_handle, ctypes.c_uint(1)))

    uid = NcclUniqueId()
    uid_file = os.path.join(exchange, "nccl-id")
    if rank == 0:
        check("ncclGetUniqueId", nccl.ncclGetUniqueId(ctypes.byref(uid)))
        publish(uid_file, bytes(uid))
    wait_for(uid_file)
    with open(uid_file, "rb") as f:
        uid = NcclUniqueId.from_buffer_copy(f.read())
    comm = ctypes.c_void_p()
    check("ncclCommInitRank", nccl.ncclCommInitRank(ctypes.byref(comm), 2, uid, rank))
    # float32 = 7, sum = 0, the default stream
    check("ncclAllReduce", nccl.ncclAllReduce(buf, buf, ctypes.c_size_t(1024), 7, 0, comm, None))
    check("ncclCommDestroy", nccl.ncclCommDestroy(comm))

    # Both ranks are done with each other's buffers before either frees its own.
    publish(os.path.join(exchange, f"done{rank}"), b"")
    wait_for(os.path.join(exchange, f"done{1 - rank}"))
    check("cudaIpcCloseMemHandle", cudart.cudaIpcCloseMemHandle(peer))
    check("cudaFree", cudart.cudaFree(buf))
    print(f"rank {rank} ok")


if __name__ == "__main__":
    if len(sys.argv) == 3:
        rank_main(int(sys.argv[2]), sys.argv[1])
        sys.exit(0)
    ranks = [subprocess.Popen([sys.executable, __file__, sys.argv[1], str(r)]) for r in (0, 1)]
    sys.exit(max(p.wait() for p in ranks))
