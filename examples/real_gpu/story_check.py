"""story_check.py - the roads of an inference server's GPU memory, on one GPU.

    python3 story_check.py [--facts PATH] [--section NAME]...

Each road is a section (--section NAME, repeatable, runs only those; default
all, in this order). A failing section prints FAILED and the next one runs.

  ctypes_ipc    the CudaRTLibrary pattern of vLLM and SGLang: the libcudart
                that torch loaded, found in /proc/self/maps and opened with
                ctypes; cudaMalloc 256 MiB, cudaMemset, cudaIpcGetMemHandle; a
                second process (multiprocessing, spawn) finds its libcudart the
                same way, cudaIpcOpenMemHandle, reads and writes with cudaMemcpy,
                cudaIpcCloseMemHandle; the exporter checks the bytes
  torch_ipc     a CUDA tensor sent to a spawned process through a
                torch.multiprocessing queue (CUDA IPC underneath); the child
                changes it, the parent sees the change; torch.cuda.ipc_collect
  nccl_mem      torch.distributed (NCCL, world size 1, device_id: the
                communicator is made at once), ncclMemAlloc 1 GiB and
                ncclMemFree through ctypes on the libnccl found loaded (the
                PyNcclLibrary pattern), mem_get_info while it lives, all_reduce
  pinned        pinned host memory through torch (pin_memory=True) and through
                the runtime (cudaHostAlloc, cudaFreeHost), copies both ways
  graph_global  a CUDA graph captured in global mode with an all_reduce inside,
                replayed 3 times

An "end" line always follows (destroy_process_group, empty_cache, mem_get_info).

Data checks that fail are reported and the section goes on with its API calls
(on cutrace's fake GPU stack copies from device memory move no bytes, so the
data checks fail there while every call is still made). Output is deterministic
(sizes, yes/no facts; no pointers, timings or free-memory numbers): a traced
run prints exactly what an untraced one prints. The numbers a checker needs go
to the facts file (--facts PATH; child processes append to the same file).
Exit status: 0 when every section passed, 1 when any failed, 2 when torch or a
GPU is missing.
"""
import argparse
import ctypes
import multiprocessing
import os
import shutil
import sys
import tempfile

from sections import GIB, MIB, Facts, Section, first_line, global_graph_with_all_reduce, \
    run_section, yes_no

IPC_BYTES = 256 * MIB
IPC_OFFSET = 4 * MIB  # where the importer writes
PROBE = 16  # bytes read and written through IPC
TORCH_IPC_ELEMENTS = 8 * MIB  # int64: 64 MiB
NCCL_BYTES = GIB
PINNED_BYTES = 64 * MIB
CHILD_TIMEOUT = 180  # seconds a child may take (spawn, import torch, CUDA context)
SCRIPT = os.path.basename(__file__)

# cuda_runtime_api.h / driver_types.h values
cudaMemcpyHostToDevice = 1
cudaMemcpyDeviceToHost = 2
cudaIpcMemLazyEnablePeerAccess = 1
cudaHostAllocDefault = 0


# ---- native libraries through ctypes ----

def find_loaded_library(stem):
    """The path of the loaded library whose file name is STEM.so[.N...], read
    from /proc/self/maps: the library the process already uses (torch's), not
    whichever one the dynamic loader would find by name."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) < 6:
                continue
            path = fields[5].strip()
            if not path.startswith("/"):
                continue
            base = os.path.basename(path)
            if base == f"{stem}.so" or base.startswith(f"{stem}.so."):
                return path
    return None


class CudaIpcMemHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class NativeLibrary:
    """A shared library opened with ctypes, each function's argtypes and restype
    declared before it is called; call() raises on a non-zero status."""

    FUNCTIONS = ()

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.fns = {}
        for name, restype, argtypes in self.FUNCTIONS:
            fn = getattr(self.lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
            self.fns[name] = fn

    def error_string(self, status):
        return str(status)

    def call(self, name, *args):
        status = self.fns[name](*args)
        if status != 0:
            raise RuntimeError(f"{name} failed: {self.error_string(status)} ({status})")


class CudaRT(NativeLibrary):
    """libcudart's functions the servers' CudaRTLibrary wrappers declare."""

    FUNCTIONS = (
        ("cudaSetDevice", ctypes.c_int, [ctypes.c_int]),
        ("cudaDeviceSynchronize", ctypes.c_int, []),
        ("cudaMalloc", ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]),
        ("cudaFree", ctypes.c_int, [ctypes.c_void_p]),
        ("cudaMemset", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]),
        ("cudaMemcpy", ctypes.c_int,
         [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]),
        ("cudaIpcGetMemHandle", ctypes.c_int,
         [ctypes.POINTER(CudaIpcMemHandle), ctypes.c_void_p]),
        ("cudaIpcOpenMemHandle", ctypes.c_int,
         [ctypes.POINTER(ctypes.c_void_p), CudaIpcMemHandle, ctypes.c_uint]),
        ("cudaIpcCloseMemHandle", ctypes.c_int, [ctypes.c_void_p]),
        ("cudaHostAlloc", ctypes.c_int,
         [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]),
        ("cudaFreeHost", ctypes.c_int, [ctypes.c_void_p]),
        ("cudaGetErrorString", ctypes.c_char_p, [ctypes.c_int]),
    )

    def error_string(self, status):
        text = self.fns["cudaGetErrorString"](status)
        return text.decode(errors="replace") if text else str(status)


class Nccl(NativeLibrary):
    """libnccl's functions vLLM's PyNcclLibrary declares, the ones used here."""

    FUNCTIONS = (
        ("ncclGetVersion", ctypes.c_int, [ctypes.POINTER(ctypes.c_int)]),
        ("ncclMemAlloc", ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]),
        ("ncclMemFree", ctypes.c_int, [ctypes.c_void_p]),
        ("ncclGetErrorString", ctypes.c_char_p, [ctypes.c_int]),
    )

    def error_string(self, status):
        text = self.fns["ncclGetErrorString"](status)
        return text.decode(errors="replace") if text else str(status)


def load_cudart():
    path = find_loaded_library("libcudart")
    if path is None:
        raise RuntimeError("no libcudart is loaded (/proc/self/maps)")
    return CudaRT(path)


def read_device(rt, ptr, count):
    """COUNT bytes of device memory at PTR, through cudaMemcpy."""
    buf = ctypes.create_string_buffer(count)
    rt.call("cudaMemcpy", ctypes.cast(buf, ctypes.c_void_p), ctypes.c_void_p(ptr), count,
            cudaMemcpyDeviceToHost)
    return buf.raw


def write_device(rt, ptr, data):
    buf = ctypes.create_string_buffer(data, len(data))
    rt.call("cudaMemcpy", ctypes.c_void_p(ptr), ctypes.cast(buf, ctypes.c_void_p), len(data),
            cudaMemcpyHostToDevice)


# ---- the processes the sections spawn (top level: spawn imports them) ----

def ctypes_ipc_child(handle, facts_path, conn):
    """The importer: torch loaded as in a server's worker, then libcudart found
    and called the exporter's way. Sends a dict back; never prints."""
    result = {"error": None, "seen": False, "library": None}
    facts = Facts(facts_path, "story")
    try:
        import torch
        torch.cuda.set_device(0)
        rt = load_cudart()
        result["library"] = os.path.basename(rt.path)
        rt.call("cudaSetDevice", 0)
        ptr = ctypes.c_void_p()
        rt.call("cudaIpcOpenMemHandle", ctypes.byref(ptr),
                CudaIpcMemHandle.from_buffer_copy(handle), cudaIpcMemLazyEnablePeerAccess)
        facts.emit("ipc_open", "ctypes_ipc", handle_hex=handle.hex(), ptr=ptr.value)
        try:
            result["seen"] = read_device(rt, ptr.value, PROBE) == b"\x5a" * PROBE
            write_device(rt, ptr.value + IPC_OFFSET, b"\xa5" * PROBE)
            rt.call("cudaDeviceSynchronize")
        finally:
            rt.call("cudaIpcCloseMemHandle", ptr)
    except Exception as e:
        result["error"] = first_line(e)
    conn.send(result)
    conn.close()


def torch_ipc_child(inbox, outbox, release, facts_path):
    """The receiver of a CUDA tensor: checks it, changes it, says so, and keeps
    running until the sender has looked (the sender owns the memory)."""
    result = {"error": None, "seen": False}
    facts = Facts(facts_path, "story")
    try:
        import torch
        torch.cuda.set_device(0)
        shared = inbox.get(timeout=CHILD_TIMEOUT)
        facts.emit("tensor", "torch_ipc", name="shared_received", ptr=shared.data_ptr(),
                   size=shared.numel() * shared.element_size(), function="torch_ipc_child",
                   file=SCRIPT)
        result["seen"] = bool((shared == 7).all())
        shared.fill_(9)
        torch.cuda.synchronize()
        del shared
    except Exception as e:
        result["error"] = first_line(e)
    outbox.put(result)
    release.wait(CHILD_TIMEOUT)


def finish_child(proc, what):
    proc.join(CHILD_TIMEOUT)
    if proc.is_alive():
        proc.terminate()
        proc.join(10)
        raise RuntimeError(f"{what} did not end within {CHILD_TIMEOUT} s")
    return proc.exitcode


# ---- the program ----

class Story:
    def __init__(self, torch, facts):
        self.torch = torch
        self.dist = None
        self.facts = facts
        self.held = 0  # device bytes held through ctypes (cudaMalloc, ncclMemAlloc)
        self.host_held = 0  # pinned host bytes held through ctypes (cudaHostAlloc)
        self.store_dir = None
        self._rt = None
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        self.allocator = "expandable" if "expandable_segments:True" in conf else "default"

    def rt(self):
        if self._rt is None:
            self._rt = load_cudart()
        return self._rt

    def mem_get_info(self, sec):
        """torch.cuda.mem_get_info, and at once the caching allocator's view of
        it and what this program holds outside of torch."""
        torch = self.torch
        free, total = torch.cuda.mem_get_info()
        sec.fact("mem_get_info", free=free, total=total,
                 reserved=torch.cuda.memory_reserved(),
                 allocated=torch.cuda.memory_allocated(),
                 segments=torch.cuda.memory_stats().get("segment.all.current", 0),
                 allocator=self.allocator, held=self.held, host_held=self.host_held)
        return free, total

    def ensure_dist(self):
        """torch.distributed at world size 1 over a file:// store (no network);
        device_id makes ProcessGroupNCCL create its communicator at once."""
        import torch.distributed as dist
        self.dist = dist
        if dist.is_initialized():
            return dist
        self.store_dir = tempfile.mkdtemp(prefix="story_check-")
        dist.init_process_group(backend="nccl",
                                init_method=f"file://{os.path.join(self.store_dir, 'store')}",
                                rank=0, world_size=1, device_id=self.torch.device("cuda", 0))
        return dist

    # -- sections: each function is named as its section --

    def ctypes_ipc(self, sec):
        rt = self.rt()
        rt.call("cudaSetDevice", 0)
        ptr = ctypes.c_void_p()
        rt.call("cudaMalloc", ctypes.byref(ptr), IPC_BYTES)
        self.held += IPC_BYTES
        try:
            rt.call("cudaMemset", ptr, 0x5A, IPC_BYTES)
            rt.call("cudaDeviceSynchronize")
            handle = CudaIpcMemHandle()
            rt.call("cudaIpcGetMemHandle", ctypes.byref(handle), ptr)
            raw = bytes(bytearray(handle))
            sec.fact("ipc_export", handle_hex=raw.hex(), size=IPC_BYTES, ptr=ptr.value)
            self.mem_get_info(sec)
            ctx = multiprocessing.get_context("spawn")
            receiver, sender = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=ctypes_ipc_child, args=(raw, self.facts.path, sender))
            proc.start()
            sender.close()
            result = None
            if receiver.poll(CHILD_TIMEOUT):
                result = receiver.recv()
            receiver.close()
            status = finish_child(proc, "the importing process")
            # the exporter's reads come first: a failed importer skips no call here
            back = sec.check("the importer's bytes seen here",
                             read_device(rt, ptr.value + IPC_OFFSET, PROBE) == b"\xa5" * PROBE)
            kept = sec.check("the bytes before them unchanged",
                             read_device(rt, ptr.value + IPC_OFFSET - PROBE, PROBE)
                             == b"\x5a" * PROBE)
            if result is None:
                raise RuntimeError(f"the importing process sent nothing (exit status {status})")
            if result["error"]:
                raise RuntimeError(f"in the importing process: {result['error']}")
            if status != 0:
                raise RuntimeError(f"the importing process exited with status {status}")
            seen = sec.check("bytes seen in the importer", result["seen"])
        finally:
            rt.call("cudaFree", ptr)
            self.held -= IPC_BYTES
        return (f"{IPC_BYTES // MIB} MiB from cudaMalloc of the loaded {os.path.basename(rt.path)} "
                f"(importer: {result['library']}), exported, opened in a spawned process, "
                f"bytes seen there: {yes_no(seen)}, its bytes seen here: {yes_no(back)}, "
                f"the rest unchanged: {yes_no(kept)}")

    def torch_ipc(self, sec):
        torch = self.torch
        torch.cuda.set_device(0)
        ctx = torch.multiprocessing.get_context("spawn")
        inbox, outbox, release = ctx.Queue(), ctx.Queue(), ctx.Event()
        shared = torch.full((TORCH_IPC_ELEMENTS,), 7, dtype=torch.int64, device="cuda")
        size = shared.numel() * shared.element_size()
        sec.fact("tensor", name="shared", ptr=shared.data_ptr(), size=size,
                 function="torch_ipc", file=SCRIPT)
        torch.cuda.synchronize()
        proc = ctx.Process(target=torch_ipc_child,
                           args=(inbox, outbox, release, self.facts.path))
        proc.start()
        result = None
        try:
            inbox.put(shared)
            result = outbox.get(timeout=CHILD_TIMEOUT)
        finally:
            torch.cuda.synchronize()
            changed = sec.check("the receiver's change seen here", (shared == 9).all())
            release.set()
            status = finish_child(proc, "the receiving process")
        if result["error"]:
            raise RuntimeError(f"in the receiving process: {result['error']}")
        if status != 0:
            raise RuntimeError(f"the receiving process exited with status {status}")
        seen = sec.check("the values seen in the receiver", result["seen"])
        self.mem_get_info(sec)  # the tensor is still live here
        del shared
        torch.cuda.ipc_collect()
        torch.cuda.empty_cache()
        self.mem_get_info(sec)
        return (f"a {size // MIB} MiB CUDA tensor sent through a torch.multiprocessing queue, "
                f"values seen there: {yes_no(seen)}, its change seen here: {yes_no(changed)}")

    def nccl_mem(self, sec):
        torch = self.torch
        dist = self.ensure_dist()
        path = find_loaded_library("libnccl")
        x = torch.arange(MIB, dtype=torch.float32, device="cuda")
        if path is None:
            dist.all_reduce(x)
            torch.cuda.synchronize()
            self.mem_get_info(sec)
            raise RuntimeError("no libnccl is loaded (/proc/self/maps): "
                               "this torch may link NCCL statically")
        nccl = Nccl(path)
        version = ctypes.c_int()
        nccl.call("ncclGetVersion", ctypes.byref(version))
        free_before, _ = self.mem_get_info(sec)
        ptr = ctypes.c_void_p()
        nccl.call("ncclMemAlloc", ctypes.byref(ptr), NCCL_BYTES)
        self.held += NCCL_BYTES
        try:
            sec.fact("nccl_mem_alloc", ptr=ptr.value, size=NCCL_BYTES)
            free_live, _ = self.mem_get_info(sec)
            dropped = sec.check("free dropped by at least 1 GiB",
                                free_before - free_live >= NCCL_BYTES)
            dist.all_reduce(x)
            torch.cuda.synchronize()
            same = sec.check("all_reduce over one rank keeps the values",
                             torch.equal(x, torch.arange(MIB, dtype=torch.float32,
                                                         device="cuda")))
        finally:
            nccl.call("ncclMemFree", ptr)
            self.held -= NCCL_BYTES
        self.mem_get_info(sec)
        return (f"backend {dist.get_backend()}, world size {dist.get_world_size()}, "
                f"ncclMemAlloc {NCCL_BYTES // GIB} GiB of the loaded {os.path.basename(path)}, "
                f"free dropped by at least that: {yes_no(dropped)}, "
                f"all_reduce correct: {yes_no(same)}, ncclMemFree")

    def pinned(self, sec):
        torch = self.torch
        # torch's caching host allocator
        host = torch.empty(PINNED_BYTES, dtype=torch.uint8, device="cpu", pin_memory=True)
        sec.fact("pinned", ptr=host.data_ptr(), size=host.numel() * host.element_size())
        back = torch.empty(PINNED_BYTES, dtype=torch.uint8, device="cpu", pin_memory=True)
        sec.fact("pinned", ptr=back.data_ptr(), size=back.numel() * back.element_size())
        is_pinned = sec.check("torch's buffers pinned", host.is_pinned() and back.is_pinned())
        host.fill_(7)
        back.fill_(0)
        dev = host.to("cuda", non_blocking=True)
        back.copy_(dev, non_blocking=True)
        torch.cuda.synchronize()
        torch_same = sec.check("torch's bytes came back", torch.equal(back, host))
        # the runtime's, through ctypes
        rt = self.rt()
        rt.call("cudaSetDevice", 0)
        hptr = ctypes.c_void_p()
        rt.call("cudaHostAlloc", ctypes.byref(hptr), PINNED_BYTES, cudaHostAllocDefault)
        self.host_held += PINNED_BYTES
        dptr = ctypes.c_void_p()
        try:
            sec.fact("pinned", ptr=hptr.value, size=PINNED_BYTES)
            rt.call("cudaMalloc", ctypes.byref(dptr), PINNED_BYTES)
            self.held += PINNED_BYTES
            ctypes.memset(hptr, 0x3C, PINNED_BYTES)
            rt.call("cudaMemcpy", dptr, hptr, PINNED_BYTES, cudaMemcpyHostToDevice)
            ctypes.memset(hptr, 0, PINNED_BYTES)
            rt.call("cudaMemcpy", hptr, dptr, PINNED_BYTES, cudaMemcpyDeviceToHost)
            self.mem_get_info(sec)  # all pinned buffers live: host memory, not device memory
            runtime_same = sec.check(
                "the runtime's bytes came back",
                ctypes.string_at(hptr.value, PROBE) == b"\x3c" * PROBE and
                ctypes.string_at(hptr.value + PINNED_BYTES - PROBE, PROBE) == b"\x3c" * PROBE)
        finally:
            if dptr.value:
                rt.call("cudaFree", dptr)
                self.held -= PINNED_BYTES
            rt.call("cudaFreeHost", hptr)
            self.host_held -= PINNED_BYTES
        del host, back, dev
        return (f"{PINNED_BYTES // MIB} MiB twice with pin_memory=True, pinned: {yes_no(is_pinned)}, "
                f"same bytes back: {yes_no(torch_same)}; {PINNED_BYTES // MIB} MiB from "
                f"cudaHostAlloc, same bytes back: {yes_no(runtime_same)}, cudaFreeHost")

    def graph_global(self, sec):
        dist = self.ensure_dist()
        # the graph's private pool is live at the query
        return global_graph_with_all_reduce(self.torch, dist, sec, after_replays=self.mem_get_info)

    def end(self, sec):
        torch = self.torch
        if self.dist is not None and self.dist.is_initialized():
            self.dist.destroy_process_group()
        if self.store_dir:
            shutil.rmtree(self.store_dir, ignore_errors=True)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.mem_get_info(sec)
        return f"allocated at the end {torch.cuda.memory_allocated()} B"


SECTIONS = ("ctypes_ipc", "torch_ipc", "nccl_mem", "pinned", "graph_global")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", metavar="PATH",
                        help="append the program's ground truth to PATH, one JSON object a line")
    parser.add_argument("--section", metavar="NAME", action="append", choices=SECTIONS,
                        help="run this section (repeatable; default: all)")
    args = parser.parse_args()
    try:
        import torch
        import torch.distributed  # noqa: F401 (the sections use it)
        import torch.multiprocessing  # noqa: F401
    except ImportError as e:
        print(f"story_check: torch is not installed ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("story_check: torch sees no GPU", file=sys.stderr)
        return 2

    facts = Facts(args.facts, "story")
    story = Story(torch, facts)
    # torch's CUDA context first: the libraries the sections look up are
    # those torch loaded and uses
    torch.cuda.set_device(0)
    story.mem_get_info(Section("start", facts))

    chosen = [name for name in SECTIONS if not args.section or name in args.section]
    failures = [name for name in chosen + ["end"]
                if not run_section(name, getattr(story, name), facts)]
    total = len(chosen) + 1
    print(f"result: {total - len(failures)} of {total} sections ok", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
