"""selftest.py - the fake torch package's own test (tests/gpu/faketorch).

    python3 selftest.py [--facts PATH]      exercise every API the real-GPU test's
                                            scripts may use; prints deterministic
                                            lines, exits 1 when a check fails
    python3 selftest.py --check-trace DIR --facts PATH [--expandable]
                                            check a trace of the above (sqlite3)
    python3 selftest.py --all --build BUILD [--torch-check FILE]
                                            everything: build/fake env, both
                                            allocators, plain and under
                                            `cutrace run`, stdout compared, traces
                                            checked; torch_check.py the same way

The first form needs the fake's environment: LD_LIBRARY_PATH=<build>/fake,
PYTHONPATH=tests/gpu/faketorch (and, for a private fake GPU,
CUTRACE_FAKE_STATE=<dir>/state). --all sets it up itself.
"""
import argparse
import glob
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

MIB = 1 << 20
GIB = 1 << 30

failures = []
facts_path = None


def fact(**kw):
    if not facts_path:
        return
    kw.setdefault("prog", "faketorch-selftest")
    kw["pid"] = os.getpid()
    with open(facts_path, "a") as f:
        f.write(json.dumps(kw) + "\n")
        f.flush()


def check(name, ok, detail=""):
    print(f"{name}: {'ok' if ok else 'FAILED'}{' ' + detail if detail else ''}", flush=True)
    if not ok:
        failures.append(name)


# --- the exercise ------------------------------------------------------------

def meminfo(torch, allocator):
    free, total = torch.cuda.mem_get_info()
    fact(event="mem_get_info", free=free, total=total, reserved=torch.cuda.memory_reserved(),
         allocated=torch.cuda.memory_allocated(),
         segments=torch.cuda.memory_stats().get("segment.all.current", 0), allocator=allocator)
    return free, total


def make_big(torch):
    big = torch.empty(2 * GIB, dtype=torch.uint8, device="cuda")
    fact(event="tensor", name="big", ptr=big.data_ptr(), size=big.nbytes, function="make_big",
         file=os.path.basename(__file__))
    return big


def ipc_child(q_in, q_out, ready, facts):
    global facts_path
    facts_path = facts
    import torch
    t = q_in.get()
    ok = t.is_cuda and t.tolist() == [3.0] * 1000 and bool((t == 3.0).all())
    handle = t.untyped_storage()._share_cuda_()[1]
    if len(handle) == 64:
        fact(event="ipc_open", handle_hex=handle.hex())
    t.fill_(5)
    torch.cuda.synchronize()
    q_out.put((ok, t.numel(), str(t.dtype)))
    del t
    torch.cuda.ipc_collect()
    ready.set()


def ipc_roundtrip(torch, mp, expandable):
    """A CUDA tensor through a spawn Queue (CUDA IPC)."""
    ctx = mp.get_context("spawn")
    q_in, q_out, ready = ctx.Queue(), ctx.SimpleQueue(), ctx.Event()
    shared = torch.full((1000,), 3.0, device="cuda")
    handle = shared.untyped_storage()._share_cuda_()[1]
    if not expandable:  # a cudaIpcMemHandle (expandable: the pages' descriptors)
        fact(event="ipc_export", handle_hex=handle.hex(), size=shared.nbytes)
    p = ctx.Process(target=ipc_child, args=(q_in, q_out, ready, facts_path))
    p.start()
    q_in.put(shared)
    got = q_out.get()
    ready.wait(60)
    p.join(60)
    check("ipc", got == (True, 1000, "torch.float32") and p.exitcode == 0, str(got))
    check("ipc: the child's write seen here", bool((shared == 5).all()))
    del shared
    torch.cuda.ipc_collect()


def exercise():
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    expandable = "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    allocator = "expandable" if expandable else "default"
    print(f"allocator: {allocator}", flush=True)
    check("version", torch.__version__.startswith("2.") and torch.version.cuda == "12.8")
    check("available", torch.cuda.is_available() and torch.cuda.device_count() == 1)
    torch.cuda.set_device(0)
    check("current_device", torch.cuda.current_device() == 0)
    free0, total = meminfo(torch, allocator)
    props = torch.cuda.get_device_properties(0)
    check("properties", props.total_memory == total and "H200" in props.name)
    check("device", torch.device("cuda", 0) == torch.device("cuda:0") and str(torch.device("cuda", 0)) == "cuda:0")

    # The caching allocator's arithmetic.
    page_large = 20 * MIB
    big = make_big(torch)
    big.fill_(1)
    st = torch.cuda.memory_stats()
    want_big = 2 * GIB if not expandable else -(-2 * GIB // page_large) * page_large
    check("big reserved", torch.cuda.memory_reserved() == want_big
          and st["segment.all.current"] == (0 if expandable else 1),
          f"{torch.cuda.memory_reserved()} B in {st['segment.all.current']} segment(s)")
    free1, _ = meminfo(torch, allocator)
    check("free dropped", free0 - free1 >= 2 * GIB)
    small = [torch.zeros(1000, device="cuda") for _ in range(100)]
    check("small rounding", torch.cuda.memory_allocated() == 2 * GIB + 100 * 4096)
    mid = [torch.full((MIB,), float(i), device="cuda") for i in range(8)]
    reserved = torch.cuda.memory_reserved()
    if expandable:  # the 12 MiB mapped behind big take three of the 4 MiB tensors
        want = -(-(2 * GIB + 32 * MIB) // page_large) * page_large + 2 * MIB
    else:
        want = 2 * GIB + 2 * MIB + 2 * 20 * MIB  # one small segment, two 20 MiB ones
    check("pools", reserved == want, f"reserved {reserved} B")
    own = torch.empty(12 * MIB, dtype=torch.uint8, device="cuda")
    if not expandable:
        check("own segment", torch.cuda.memory_reserved() == want + 12 * MIB
              and torch.cuda.memory_stats()["segment.all.current"] == 5)
    meminfo(torch, allocator)
    # (big == 1) is a temporary 2 GiB bool tensor: cached once freed, as in torch.
    check("big values", bool((big == 1).all()) and big.sum().item() == 2 * GIB)
    del small, mid, own
    check("cached after del", torch.cuda.memory_allocated() == 2 * GIB and
          torch.cuda.memory_reserved() >= want)
    del big
    check("big cached", torch.cuda.memory_allocated() == 0 and torch.cuda.memory_reserved() > 0)
    meminfo(torch, allocator)
    # A request that fits only once the cache (big and (big == 1), 2 GiB each, and 2 GiB cached
    # for a side stream) is given back: one retry.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        tmp = torch.empty(2 * GIB, dtype=torch.uint8, device="cuda")
    del tmp
    free, _ = torch.cuda.mem_get_info()
    retries = torch.cuda.memory_stats()["num_alloc_retries"]
    huge = torch.empty(free + 5 * GIB, dtype=torch.uint8, device="cuda")
    st = torch.cuda.memory_stats()
    check("retry", st["num_alloc_retries"] == retries + 1, f"{st['num_alloc_retries'] - retries} retries")
    meminfo(torch, allocator)
    del huge
    torch.cuda.empty_cache()
    check("empty_cache", torch.cuda.memory_reserved() == 0 and torch.cuda.memory_stats()["segment.all.current"] == 0)
    meminfo(torch, allocator)
    try:
        torch.empty(200 * GIB, dtype=torch.uint8, device="cuda")
        check("oom", False)
    except torch.cuda.OutOfMemoryError:
        check("oom", torch.cuda.memory_stats()["num_ooms"] == 1)

    # Values, copies, pinned memory.
    torch.manual_seed(0)
    a = torch.arange(1000, dtype=torch.int64)
    d = a.to("cuda")
    check("to cuda", d.is_cuda and d.device == torch.device("cuda", 0) and d.dtype == torch.int64
          and tuple(d.shape) == (1000,) and d.numel() == 1000 and d.element_size() == 8)
    e = (d * 2 + 1).cpu()
    check("arithmetic", e.tolist() == [2 * i + 1 for i in range(1000)] and not e.is_cuda)
    check("equal", torch.equal(d.cpu(), a) and not torch.equal(d, d + 1))
    check("storage", d.untyped_storage().data_ptr() == d.data_ptr() and d.untyped_storage().nbytes() == 8000)
    f = torch.ones((4,), dtype=torch.float32, device="cuda") * 2.5
    check("float", f.tolist() == [2.5] * 4 and f.sum().item() == 10.0 and bool(torch.all(f == 2.5)))
    u = torch.full((16,), 255, dtype=torch.uint8, device="cuda") + 1
    check("uint8 wraps", u.tolist() == [0] * 16)
    host = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
    fact(event="pinned", ptr=host.data_ptr(), size=host.nbytes)
    host.fill_(7)
    dev = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    dev.copy_(host, non_blocking=True)
    back = torch.zeros(1 << 20, dtype=torch.uint8).pin_memory()
    back.copy_(dev, non_blocking=True)
    torch.cuda.synchronize()
    check("pinned", host.is_pinned() and back.is_pinned() and not a.is_pinned()
          and bool((back == 7).all()) and back.to("cuda", non_blocking=True).sum().item() == 7 << 20)

    # Streams.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        check("stream", torch.cuda.current_stream() == s)
        w = d * 3
    torch.cuda.current_stream().wait_stream(s)
    check("stream values", torch.cuda.current_stream() != s and w.tolist()[:3] == [0, 3, 6])

    # torch.distributed, eager (device_id) then lazy.
    tmp = tempfile.mkdtemp(prefix="faketorch-")
    store = os.path.join(tmp, "store")
    dist.init_process_group(backend="nccl", init_method=f"file://{store}", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    check("init", dist.is_initialized() and dist.get_backend() == "nccl" and dist.get_world_size() == 1
          and os.path.exists(store))
    x = torch.arange(MIB, dtype=torch.float32, device="cuda")
    dist.all_reduce(x)
    dist.barrier()
    check("all_reduce", torch.equal(x, torch.arange(MIB, dtype=torch.float32, device="cuda")))
    meminfo(torch, allocator)

    # Graphs, with an all_reduce inside, in both capture modes.
    for mode in ("global", "thread_local"):
        static = torch.ones(MIB, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode=mode):
            y = static * 2
            dist.all_reduce(y)
        ok = []
        for v in (1, 2, 3):
            static.fill_(float(v))
            g.replay()
            torch.cuda.synchronize()
            ok.append(bool(torch.all(y == 2 * v)))
        fact(event="graph", mode=mode, replays=3)
        check(f"graph {mode}", all(ok), str(ok))
        del g, y, static
    dist.destroy_process_group()
    check("destroy", not dist.is_initialized() and not os.path.exists(store))
    store2 = os.path.join(tmp, "store2")
    dist.init_process_group(backend="nccl", init_method=f"file://{store2}", rank=0, world_size=1)
    dist.all_reduce(torch.ones(8, device="cuda"))  # the communicator is made here
    dist.destroy_process_group()
    os.rmdir(tmp)

    # torch.multiprocessing: a CUDA tensor through a spawn Queue (CUDA IPC).
    del a, d, e, f, u, host, dev, back, w, x
    ipc_roundtrip(torch, mp, expandable)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    meminfo(torch, allocator)
    check("end", torch.cuda.memory_allocated() == 0 and torch.cuda.memory_reserved() == 0)
    print(f"result: {'FAILED ' + ' '.join(failures) if failures else 'all ok'}", flush=True)
    return 1 if failures else 0


# --- trace checks ------------------------------------------------------------

def check_trace(trace_dir, facts, expandable):
    with open(facts) as f:
        rows = [json.loads(line) for line in f]
    by_pid = {}
    for r in rows:
        by_pid.setdefault(r["pid"], []).append(r)
    # `cutrace run -o DIR` writes the run to DIR/run-... (one run here).
    dbs = glob.glob(os.path.join(trace_dir, "*.db")) or glob.glob(os.path.join(trace_dir, "run-*", "*.db"))
    main_pid = rows[0]["pid"]
    main_db = [d for d in dbs if f"-{main_pid}-" in os.path.basename(d)]
    check("trace files", len(main_db) == 1 and len(dbs) == 2, f"{len(dbs)} files")
    if not main_db:
        return
    con = sqlite3.connect(main_db[0])
    big = next(r for r in rows if r["event"] == "tensor" and r["name"] == "big")

    def frames(stack_id):
        return con.execute("SELECT kind, module, symbol FROM stacks WHERE stack_id = ? ORDER BY depth",
                           (stack_id,)).fetchall()

    def has_frames(stack_id, function):
        fr = frames(stack_id)
        native = any(k == "native" and (m or "").endswith("libc10_cuda.so") for k, m, _ in fr)
        py = any(k == "python" and s == function for k, _, s in fr)
        return native and py

    if not expandable:
        row = con.execute("SELECT c.stack_id, a.module FROM allocations a JOIN calls c ON c.seq = a.seq "
                          "WHERE a.api = 'cudaMalloc' AND a.ptr = ? AND a.size = ?",
                          (big["ptr"], 2 * GIB)).fetchone()
        check("trace: big cudaMalloc stack", row is not None and has_frames(row[0], "make_big")
              and row[1].endswith("libc10_cuda.so"))
    else:
        n = con.execute("SELECT count(*) FROM allocations WHERE api = 'cudaMalloc' AND size >= ?",
                        (2 * GIB,)).fetchone()[0]
        maps = con.execute("SELECT count(*) FROM calls WHERE api = 'cuMemMap' AND ptr >= ? AND ptr < ?",
                           (big["ptr"], big["ptr"] + 2 * GIB)).fetchone()[0]
        creates = con.execute("SELECT c.stack_id FROM allocations a JOIN calls c ON c.seq = a.seq "
                              "WHERE a.kind = 'vmm' AND a.api = 'cuMemCreate'").fetchall()
        covered = con.execute("SELECT count(*) FROM allocations WHERE kind = 'reserve' AND ptr <= ? "
                              "AND ptr + size >= ?", (big["ptr"], big["ptr"] + 2 * GIB)).fetchone()[0]
        check("trace: big is VMM", n == 0 and covered >= 1 and maps >= 103 and len(creates) >= 103
              and any(has_frames(s, "make_big") for (s,) in creates), f"maps {maps}")
    kinds = "('vmm')" if expandable else "('device')"
    infos = con.execute("SELECT m.seq, m.free_bytes, m.total_bytes, c.effect_order FROM meminfo m "
                        "JOIN calls c ON c.seq = m.seq ORDER BY m.seq").fetchall()
    mine = [r for r in by_pid[main_pid] if r["event"] == "mem_get_info"]
    i, matched, bad = 0, 0, []
    for r in mine:
        while i < len(infos) and (infos[i][1], infos[i][2]) != (r["free"], r["total"]):
            i += 1
        if i == len(infos):
            bad.append("unmatched")
            break
        at = infos[i][3]
        live = con.execute(f"SELECT coalesce(sum(size), 0) FROM allocations WHERE kind IN {kinds} "
                           "AND module LIKE '%libc10_cuda.so' AND effect_order < ? "
                           "AND (free_effect_order IS NULL OR free_effect_order > ?)", (at, at)).fetchone()[0]
        if live != r["reserved"]:
            bad.append(f"{r['reserved']}!={live}")
        # expandable: no cudaMalloc, and segment.all.current stays 0, as in torch
        segs = con.execute("SELECT count(*) FROM allocations WHERE api = 'cudaMalloc' "
                           "AND module LIKE '%libc10_cuda.so' AND effect_order < ? "
                           "AND (free_effect_order IS NULL OR free_effect_order > ?)", (at, at)).fetchone()[0]
        if segs != r["segments"]:
            bad.append(f"segments {r['segments']}!={segs}")
        matched += 1
        i += 1
    check("trace: reserved == live libc10 bytes at each mem_get_info", not bad and matched == len(mine),
          f"{matched} of {len(mine)} {bad[:3]}")
    pinned = next(r for r in rows if r["event"] == "pinned")
    row = con.execute("SELECT module FROM allocations WHERE kind = 'host' AND ptr = ?", (pinned["ptr"],)).fetchone()
    check("trace: pinned via cudaHostAlloc in libc10", row is not None and row[0].endswith("libc10_cuda.so"))
    captured = con.execute("SELECT count(*) FROM collectives WHERE captured").fetchone()[0]
    check("trace: captured all_reduce in both graphs", captured == 2, str(captured))
    comms = con.execute("SELECT count(*) FROM communicators").fetchone()[0]
    check("trace: two communicators", comms == 2, str(comms))
    if expandable:  # the child imported the pages through the driver: kind ipc, api cuMemImport...
        imports = 0
        for d in dbs:
            if d not in main_db:
                c2 = sqlite3.connect(d)
                imports += c2.execute("SELECT count(*) FROM allocations WHERE kind = 'ipc' AND "
                                      "api = 'cuMemImportFromShareableHandle'").fetchone()[0]
                c2.close()
        check("trace: the child imported the shared pages", imports >= 1, str(imports))
        return end_states(dbs)
    exported = next(r for r in rows if r["event"] == "ipc_export")["handle_hex"]
    opened = 0
    for d in dbs:
        if d in main_db:
            continue
        c2 = sqlite3.connect(d)
        opened += c2.execute("SELECT count(*) FROM ipc WHERE api = 'cudaIpcOpenMemHandle' AND handle_hex = ?",
                             (exported,)).fetchone()[0]
        c2.close()
    exports = con.execute("SELECT count(*) FROM ipc WHERE api = 'cudaIpcGetMemHandle' AND handle_hex = ?",
                          (exported,)).fetchone()[0]
    child_open = [r for r in rows if r["event"] == "ipc_open"]
    check("facts: the child opened the exported handle", [r["handle_hex"] for r in child_open] == [exported])
    check("trace: IPC handle exported and opened once in the child", exports >= 1 and opened == 1,
          f"{exports} exports, {opened} opens")
    end_states(dbs)


def end_states(dbs):
    for d in dbs:
        c2 = sqlite3.connect(d)
        meta = dict(c2.execute("SELECT key, value FROM meta").fetchall())
        c2.close()
        check(f"trace: {os.path.basename(d)} ended exit", meta.get("end_state") == "exit"
              and not meta.get("writer_error"), meta.get("end_state", "?"))


def _has_column(con, table, column):
    try:
        return any(r[1] == column for r in con.execute(f"PRAGMA table_info({table})"))
    except sqlite3.Error:
        return False


# --- everything --------------------------------------------------------------

def run_all(build, torch_check):
    here = os.path.dirname(os.path.abspath(__file__))
    work = tempfile.mkdtemp(prefix="faketorch-selftest-")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.join(build, "fake")
    env["PYTHONPATH"] = here
    env["CUTRACE_FAKETORCH_LIB"] = os.path.join(build, "gpu", "faketorch", "lib")
    env["CUTRACE_FAKE_STATE"] = os.path.join(work, "state")
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    cutrace = os.path.join(build, "cutrace")
    for conf in ("", "expandable_segments:True"):
        e = dict(env)
        if conf:
            e["PYTORCH_CUDA_ALLOC_CONF"] = conf
        tag = "expandable" if conf else "default"
        outs = []
        for traced in (False, True):
            facts = os.path.join(work, f"facts-{tag}-{int(traced)}.jsonl")
            cmd = [sys.executable, os.path.abspath(__file__), "--facts", facts]
            tdir = os.path.join(work, f"trace-{tag}")
            if traced:
                cmd = [cutrace, "run", "-o", tdir, "--"] + cmd
            p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
            outs.append(p.stdout)
            check(f"{tag} {'traced' if traced else 'plain'} exit 0", p.returncode == 0,
                  "" if p.returncode == 0 else p.stdout[-2000:] + p.stderr[-2000:])
        check(f"{tag} stdout traced == plain", outs[0] == outs[1])
        check_trace(tdir, facts, bool(conf))
        if torch_check and os.path.exists(torch_check):
            outs = []
            for traced in (False, True):
                cmd = [sys.executable, torch_check]
                if traced:
                    cmd = [cutrace, "run", "-o", os.path.join(work, f"tc-{tag}"), "--"] + cmd
                p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   timeout=600)
                outs.append(p.stdout)
                check(f"torch_check {tag} {'traced' if traced else 'plain'} exit 0", p.returncode == 0,
                      "" if p.returncode == 0 else p.stdout[-2000:] + p.stderr[-2000:])
            check(f"torch_check {tag} stdout traced == plain", outs[0] == outs[1])
    if failures:
        print(f"selftest: FAILED {', '.join(failures)} (work files in {work})")
    else:
        shutil.rmtree(work, ignore_errors=True)
        print("selftest: all ok")
    return 1 if failures else 0


def main():
    global facts_path
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts")
    ap.add_argument("--check-trace")
    ap.add_argument("--expandable", action="store_true")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--build")
    ap.add_argument("--torch-check")
    args = ap.parse_args()
    if args.all or args.build:
        build = os.path.abspath(args.build or os.environ.get("BUILD", "build"))
        tc = args.torch_check or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                              "examples", "real_gpu", "torch_check.py")
        return run_all(build, os.path.abspath(tc))
    if args.check_trace:
        check_trace(args.check_trace, args.facts, args.expandable)
        return 1 if failures else 0
    facts_path = args.facts
    return exercise()


if __name__ == "__main__":
    sys.exit(main())
