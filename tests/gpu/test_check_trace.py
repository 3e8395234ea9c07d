"""test_check_trace.py - the checks of tests/gpu/check_trace.py, each shown to pass on a
consistent trace and to fail (exit 1) on the lie it exists to catch.

    python3 tests/gpu/test_check_trace.py [-v]

The traces here are small synthetic SQLite files with tables named like the views of
docs/schema.md and the columns check_trace.py reads; `cutrace` is a fake script whose output
each test chooses. RealTraceTests then runs the checks on real traces of this build on the
fake CUDA stack (build/cutrace, build/libcutrace.so, build/fake: `make`), through small ctypes
programs that write their own facts; it is skipped without that build (BUILD=DIR names
another build directory). Standard library only; Python 3.10 to 3.13.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHECKER = os.path.join(HERE, "check_trace.py")
BUILD = os.environ.get("BUILD") or os.path.join(ROOT, "build")
MIB = 1 << 20
GIB = 1 << 30
TOTAL = 80 * GIB
C10 = "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so"
NCCL = "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
PROG = "/work/prog"

SCHEMA = """
CREATE TABLE process(pid, ppid, host, start_mono_ns, start_wall_ns, cuda_runtime_version,
                     cuda_driver_version, nccl_version);
CREATE TABLE devices(device, uuid, pci_bus_id, name, total_bytes, first_seq);
CREATE TABLE calls(seq, t_ns, api, layer, device, ptr, size, result, nested, parent_seq, flags,
                   arg0, arg1, module, stack_id, ret_seq, effect_order);
CREATE TABLE allocations(seq, t_ns, api, device, ptr, size, kind, module, free_seq, free_t_ns,
                         free_api, effect_order, free_effect_order);
CREATE TABLE meminfo(seq, t_ns, device, free_bytes, total_bytes);
CREATE TABLE ipc(seq, t_ns, api, device, ptr, handle_hex, result, flags);
CREATE TABLE collectives(seq, t_ns, op, comm_id, bytes, captured, result);
CREATE TABLE stacks(stack_id, depth, kind, module, symbol, file, line);
CREATE TABLE symbols(ip INTEGER PRIMARY KEY, symbol TEXT NOT NULL);
CREATE TABLE meta(key, value);
"""

ACQUIRING = ("cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged", "cuMemCreate",
             "ncclMemAlloc", "cudaIpcOpenMemHandle", "cuMemAlloc_v2", "cuMemAddressReserve")


def signed(value):
    return value - (1 << 64) if isinstance(value, int) and value >= 1 << 63 else value


class FakeTrace:
    """One process's trace: calls numbered in order, effect orders as docs/schema.md says."""

    def __init__(self, pid, start=0):
        self.pid, self.start, self.seq = pid, start, 0
        self.calls, self.allocs, self.meminfo, self.ipc, self.collectives = [], [], [], [], []
        self.stacks, self.meta = {}, {"end_state": "exit", "format_version": "6"}
        self.process = dict(cuda_runtime_version=13000, cuda_driver_version=13000,
                            nccl_version=None)
        self.devices = [(0, "GPU-5fa8593a-6926-2c82-58a7-5c65769c7822", "NVIDIA H200", TOTAL)]
        self.next_ptr = 0x7f0000000000

    def call(self, api, layer="runtime", ptr=0, size=0, result=0, flags=0, arg0=0, arg1=0,
             module=PROG, stack=0, parent=0):
        self.seq += 1
        order = 2 * self.seq + 1 if api in ACQUIRING else 2 * self.seq
        self.calls.append(dict(seq=self.seq, t_ns=1000 * self.seq, api=api, layer=layer,
                               device=0, ptr=ptr, size=size, result=result,
                               nested=int(parent != 0), parent_seq=parent, flags=flags,
                               arg0=arg0, arg1=arg1, module=module, stack_id=stack,
                               ret_seq=self.seq, effect_order=order))
        return self.seq

    def stack(self, *frames):
        """frames: ("native", module) or ("python", function, file), innermost first."""
        stack_id = len(self.stacks) + 1
        self.stacks[stack_id] = frames
        return stack_id

    def alloc(self, api, size, kind="device", module=PROG, stack=0, parent=0, ptr=None,
              layer="runtime"):
        if ptr is None:
            ptr, self.next_ptr = self.next_ptr, self.next_ptr + max(size, 1 << 21)
        seq = self.call(api, layer, ptr=ptr, size=size, module=module, stack=stack,
                        parent=parent)
        row = dict(seq=seq, t_ns=1000 * seq, api=api, device=0, ptr=ptr, size=size, kind=kind,
                   module=module, free_seq=None, free_t_ns=None, free_api=None,
                   effect_order=2 * seq + 1, free_effect_order=None)
        self.allocs.append(row)
        return row

    def free(self, row, api="cudaFree"):
        seq = self.call(api, ptr=row["ptr"])
        row.update(free_seq=seq, free_t_ns=1000 * seq, free_api=api, free_effect_order=2 * seq)
        return seq

    def query(self, free, total=TOTAL):
        seq = self.call("cudaMemGetInfo", arg0=free, arg1=total)
        self.meminfo.append((seq, 1000 * seq, 0, free, total))
        return seq

    def save(self, directory):
        """The file, with 64-bit values stored signed as the tracer's are."""
        path = os.path.join(directory, f"node-{self.pid}-{self.start}.db")
        db = sqlite3.connect(path)
        db.executescript(SCHEMA)
        p = self.process
        db.execute("INSERT INTO process VALUES(?, 1, 'node', ?, ?, ?, ?, ?)",
                   (self.pid, self.start, self.start, p["cuda_runtime_version"],
                    p["cuda_driver_version"], p["nccl_version"]))
        for device, uuid, name, total in self.devices:
            db.execute("INSERT INTO devices VALUES(?, ?, '0000:18:00.0', ?, ?, 1)",
                       (device, uuid, name, total))
        for c in self.calls:
            db.execute(f"INSERT INTO calls({', '.join(c)}) VALUES({', '.join('?' * len(c))})",
                       tuple(signed(v) for v in c.values()))
        for a in self.allocs:
            db.execute(f"INSERT INTO allocations({', '.join(a)}) "
                       f"VALUES({', '.join('?' * len(a))})", tuple(signed(v) for v in a.values()))
        db.executemany("INSERT INTO meminfo VALUES(?, ?, ?, ?, ?)", self.meminfo)
        db.executemany("INSERT INTO ipc VALUES(?, 0, ?, 0, 1, ?, ?, 0)", self.ipc)
        db.executemany("INSERT INTO collectives VALUES(?, 0, ?, 1, 4096, ?, ?)", self.collectives)
        for stack_id, frames in self.stacks.items():
            for depth, frame in enumerate(frames):
                if frame[0] == "native":
                    row = (stack_id, depth, "native", frame[1], None, None, None)
                else:
                    row = (stack_id, depth, "python", None, frame[1], frame[2], 10)
                db.execute("INSERT INTO stacks VALUES(?, ?, ?, ?, ?, ?, ?)", row)
        db.executemany("INSERT INTO meta VALUES(?, ?)", self.meta.items())
        db.commit()
        db.close()
        return path


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="check-trace-test-")
        self.dir = os.path.join(self.tmp, "trace")
        os.mkdir(self.dir)
        self.facts = os.path.join(self.tmp, "facts.jsonl")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def write_facts(self, *facts):
        with open(self.facts, "w", encoding="utf-8") as f:
            for fact in facts:
                f.write(json.dumps(fact) + "\n")

    def save(self, *traces, directory=None):
        for t in traces:
            t.save(directory or self.dir)

    def check(self, *args):
        run = subprocess.run([sys.executable, CHECKER, *args], capture_output=True, text=True,
                             check=False, timeout=120)
        lines = run.stdout.splitlines()
        self.assertEqual(len(lines), 1, f"{args[0]}: not one line: {run.stdout!r} {run.stderr!r}")
        return run.returncode, lines[0]

    def passes(self, *args, says=None):
        rc, line = self.check(*args)
        self.assertEqual(rc, 0, f"{args[0]} should pass: {line}")
        if says:
            self.assertIn(says, line)
        return line

    def fails(self, *args, says=None):
        rc, line = self.check(*args)
        self.assertEqual(rc, 1, f"{args[0]} should fail: {line}")
        if says:
            self.assertIn(says, line)
        return line

    def cannot(self, *args, says=None):
        rc, line = self.check(*args)
        self.assertEqual(rc, 2, f"{args[0]} should not be computable: {line}")
        self.assertTrue(line.startswith("cannot check:"), line)
        if says:
            self.assertIn(says, line)
        return line

    def fake_cutrace(self, script):
        """A `cutrace` that runs SCRIPT (Python; `args` is its argument list)."""
        path = os.path.join(self.tmp, "cutrace")
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"#!{sys.executable}\nimport json, os, sqlite3, sys\nargs = sys.argv[1:]\n")
            f.write(textwrap.dedent(script))
        os.chmod(path, 0o755)
        return path


def cuda_fact(pid, free, held, host_held=0, total=TOTAL):
    return dict(prog="cuda", pid=pid, event="mem_get_info", section="s", free=free, total=total,
                held=held, host_held=host_held)


class HoldingsTests(Case):
    def program(self, nccl_internal_counted=False):
        t = FakeTrace(100)
        t.process["nccl_version"] = 22809
        facts = [cuda_fact(100, TOTAL - GIB, 0)]
        t.query(TOTAL - GIB)
        a = t.alloc("cudaMalloc", 256 * MIB)
        t.alloc("cudaMallocHost", 8 * MIB, kind="host")
        init = t.call("ncclCommInitRank", layer="nccl")
        # NCCL's own buffer, made inside its init: not the program's
        t.alloc("cuMemCreate", 64 * MIB, kind="vmm", module=NCCL, parent=init, layer="driver")
        # the program's ncclMemAlloc: a device row; its cuMem* calls are nested, not rows
        n = t.alloc("ncclMemAlloc", GIB, module=PROG, layer="nccl")
        t.call("cuMemCreate", layer="driver", ptr=0x99, size=GIB, module=NCCL, parent=n["seq"])
        held = 256 * MIB + GIB + (64 * MIB if nccl_internal_counted else 0)
        t.query(TOTAL - 3 * GIB)
        facts.append(cuda_fact(100, TOTAL - 3 * GIB, held, 8 * MIB))
        t.free(a)
        t.free(n, "ncclMemFree")
        t.query(TOTAL - 2 * GIB)
        facts.append(cuda_fact(100, TOTAL - 2 * GIB, 0, 8 * MIB))
        return t, facts

    def test_consistent(self):
        t, facts = self.program()
        self.save(t)
        self.write_facts(*facts, dict(prog="torch", pid=7, event="mem_get_info", free=1, total=2))
        self.passes("holdings", self.dir, self.facts,
                    says="3 queries, held == traced at each (max 1280.0 MiB)")

    def test_nccl_internal_buffer_counted_as_held(self):
        t, facts = self.program(nccl_internal_counted=True)
        self.save(t)
        self.write_facts(*facts)
        self.fails("holdings", self.dir, self.facts, says="held 1409286144, traced 1342177280")

    def test_free_not_seen(self):
        t, facts = self.program()
        t.allocs[0].update(free_seq=None, free_t_ns=None, free_api=None, free_effect_order=None)
        self.save(t)
        self.write_facts(*facts)
        self.fails("holdings", self.dir, self.facts, says="held 0, traced 268435456")

    def test_pinned_memory_not_in_host_held(self):
        t, facts = self.program()
        facts[1]["host_held"] = 0
        self.save(t)
        self.write_facts(*facts)
        self.fails("holdings", self.dir, self.facts, says="host_held 0, traced host 8388608")

    def test_query_not_traced(self):
        t, facts = self.program()
        facts.insert(1, cuda_fact(100, TOTAL - 5 * GIB, 0))
        self.save(t)
        self.write_facts(*facts)
        self.fails("holdings", self.dir, self.facts, says="no meminfo row with free")

    def test_no_trace_for_pid(self):
        t, facts = self.program()
        self.save(t)
        self.write_facts(*[dict(f, pid=555) for f in facts])
        self.fails("holdings", self.dir, self.facts, says="pid 555 of the facts has no trace "
                                                          "(traced pids: 100)")

    def test_bad_facts(self):
        t, _ = self.program()
        self.save(t)
        with open(self.facts, "w", encoding="utf-8") as f:
            f.write('{"prog": "cuda", "event": "mem_get_info"\n')
        self.cannot("holdings", self.dir, self.facts, says="not JSON")
        self.cannot("holdings", self.dir, os.path.join(self.tmp, "none"))


def torch_fact(pid, free, reserved, segments, allocator="default"):
    return dict(prog="torch", pid=pid, event="mem_get_info", section="s", free=free, total=TOTAL,
                reserved=reserved, allocated=reserved, segments=segments, allocator=allocator)


class ReservedTests(Case):
    def program(self, t):
        caching = t.stack(("native", "/usr/lib/libcudart.so.13"), ("native", C10),
                          ("python", "caching", "torch_check.py"))
        other = t.stack(("native", PROG), ("python", "ctypes_road", "torch_check.py"))
        t.query(TOTAL - GIB)
        a = t.alloc("cudaMalloc", 2 * MIB, module=C10, stack=caching)
        t.alloc("cudaMalloc", 20 * MIB, module=C10, stack=caching)
        t.alloc("cudaMalloc", 64 * MIB, module=PROG, stack=other)  # not the caching allocator's
        t.alloc("cudaMallocHost", 2 * MIB, kind="host", module=C10, stack=caching)
        t.query(TOTAL - 2 * GIB)
        t.free(a)
        t.query(TOTAL - 3 * GIB)
        return [torch_fact(t.pid, TOTAL - GIB, 0, 0), torch_fact(t.pid, TOTAL - 2 * GIB,
                22 * MIB, 2), torch_fact(t.pid, TOTAL - 3 * GIB, 20 * MIB, 1)]

    def test_consistent(self):
        t = FakeTrace(200)
        facts = self.program(t)
        self.save(t)
        self.write_facts(*facts)
        self.passes("reserved", self.dir, self.facts, says="segments == cudaMalloc rows at 3")

    def test_segments_off_by_one(self):
        t = FakeTrace(200)
        facts = self.program(t)
        facts[2]["segments"] = 2
        self.save(t)
        self.write_facts(*facts)
        self.fails("reserved", self.dir, self.facts, says="2 segments, 1 live cudaMalloc rows")

    def test_reserved_differs(self):
        t = FakeTrace(200)
        facts = self.program(t)
        facts[1]["reserved"] += 2 * MIB
        self.save(t)
        self.write_facts(*facts)
        self.fails("reserved", self.dir, self.facts, says="reserved 25165824, traced 23068672")

    def test_nested_call_has_its_parents_stack(self):
        # expandable segments: cuMemCreate made under the caching allocator's frames, through
        # a wrapper whose own call carries the stack
        t = FakeTrace(200)
        caching = t.stack(("native", C10), ("python", "caching", "torch_check.py"))
        wrapper = t.call("cudaGraphInstantiate", stack=caching)
        t.alloc("cuMemCreate", 20 * MIB, kind="vmm", module=C10, parent=wrapper,
                layer="driver")
        t.query(TOTAL - GIB)
        self.save(t)
        self.write_facts(torch_fact(200, TOTAL - GIB, 20 * MIB, 0, "expandable"))
        self.passes("reserved", self.dir, self.facts, says="segments == cudaMalloc rows at 0")


class ContextTests(Case):
    def timeline(self, *measurements, identified_by="uuid"):
        """measurements: (pid, seq, unexplained MiB)."""
        milestones = [dict(kind="first_call", pid=1, seq=1, t_ns=0, measurement=None)]
        for i, (pid, seq, unexplained) in enumerate(measurements):
            u = int(unexplained * MIB)
            milestones.append(dict(kind="measurement", pid=pid, seq=seq, t_ns=10 * i, api="x",
                                   live={"runtime": GIB}, traced_bytes=GIB, measurement=dict(
                                       free_bytes=TOTAL - GIB - u, total_bytes=TOTAL,
                                       used_bytes=GIB + u, unexplained_bytes=u)))
        report = dict(gpus=[dict(key="GPU-5fa8", identified_by=identified_by,
                                 milestones=milestones)])
        return self.fake_cutrace(f"print(json.dumps({report!r}))\n")

    def test_in_band(self):
        FakeTrace(1).save(self.dir)
        cutrace = self.timeline((1, 5, 520), (2, 3, 1060), (1, 9, 524))
        self.passes("context", cutrace, self.dir, "400", "700",
                    says="pid 1: context 520.0 MiB, spread 4.0 MiB over 2; pid 2: context "
                         "1060.0 MiB (2 contexts: 530.0 MiB each)")

    def test_second_context_not_shared(self):
        FakeTrace(1).save(self.dir)
        # pid 2's first query while pid 1 is alive: 530 MiB for two contexts is too little
        cutrace = self.timeline((1, 5, 520), (2, 3, 530), (1, 9, 524))
        self.fails("context", cutrace, self.dir, "400", "700",
                   says="pid 2 seq 3: context 265.0 MiB each outside [400, 700] MiB")

    def test_context_outside_band(self):
        FakeTrace(1).save(self.dir)
        # the first query's 2 GiB of unexplained memory is no CUDA context
        cutrace = self.timeline((1, 5, 2048), (1, 9, 520))
        self.fails("context", cutrace, self.dir, "400", "700",
                   says="pid 1 seq 5: context 2048.0 MiB outside [400, 700] MiB")

    def test_timeline_fails(self):
        FakeTrace(1).save(self.dir)
        cutrace = self.fake_cutrace("print('cutrace: x: bad', file=sys.stderr)\nsys.exit(1)\n")
        self.cannot("context", cutrace, self.dir, "400", "700", says="timeline exited 1")


class TimelineTests(Case):
    def test_no_uuid_is_a_failure(self):
        t = FakeTrace(1)
        t.devices = [(0, None, "NVIDIA H200", TOTAL)]
        t.alloc("cudaMalloc", GIB)
        seq = t.query(TOTAL - GIB - 512 * MIB)
        t.save(self.dir)
        u = 512 * MIB
        report = dict(gpus=[dict(key="node:0", identified_by="host_and_ordinal", milestones=[
            dict(kind="measurement", pid=1, seq=seq, t_ns=0, api="cudaMemGetInfo",
                 live={"runtime": GIB}, traced_bytes=GIB,
                 measurement=dict(free_bytes=TOTAL - GIB - u, total_bytes=TOTAL,
                                  used_bytes=GIB + u, unexplained_bytes=u))])])
        cutrace = self.fake_cutrace(f"print(json.dumps({report!r}))\n")
        self.fails("timeline", cutrace, self.dir, "400", "700",
                   says="GPU node:0: no uuid to cross-check on")
        report["gpus"][0].update(key=t.devices[0][1], identified_by="uuid")
        t.devices = [(0, "GPU-5fa8593a-6926-2c82-58a7-5c65769c7822", "NVIDIA H200", TOTAL)]
        os.unlink(os.path.join(self.dir, os.listdir(self.dir)[0]))
        t.save(self.dir)
        report["gpus"][0]["key"] = t.devices[0][1]
        cutrace = self.fake_cutrace(f"print(json.dumps({report!r}))\n")
        self.passes("timeline", cutrace, self.dir, "400", "700", says="1 queries on 1 GPU(s)")


class TimelineCrossCheckTests(Case):
    UUID = "GPU-5fa8593a-6926-2c82-58a7-5c65769c7822"

    def run_timeline(self, traced_at_query):
        """pid 1 queries after pid 2, which exited holding 22 MiB it never freed."""
        child = FakeTrace(2)
        child.alloc("cudaMalloc", 22 * MIB)  # t_ns 1000
        a = FakeTrace(1, start=1)
        a.alloc("cudaMalloc", GIB)
        a.call("cudaSetDevice")
        seq = a.query(TOTAL - GIB - 512 * MIB)  # t_ns 3000
        self.save(a, child)
        u = 512 * MIB
        report = dict(gpus=[dict(key=self.UUID, identified_by="uuid", processes=[
            dict(pid=1, exited=True), dict(pid=2, exited=True)], milestones=[
            dict(kind="process_end", pid=2, seq=1, t_ns=2000, live={}, traced_bytes=0),
            dict(kind="measurement", pid=1, seq=seq, t_ns=3000, api="cudaMemGetInfo",
                 live={"runtime": traced_at_query}, traced_bytes=traced_at_query,
                 measurement=dict(free_bytes=TOTAL - GIB - u, total_bytes=TOTAL,
                                  used_bytes=GIB + u,
                                  unexplained_bytes=GIB + u - traced_at_query))])])
        return self.fake_cutrace(f"print(json.dumps({report!r}))\n")

    def test_exited_process_holds_nothing(self):
        cutrace = self.run_timeline(GIB)
        self.passes("timeline", cutrace, self.dir, "400", "700", says="1 queries on 1 GPU(s)")

    def test_timeline_forgets_the_querying_process(self):
        cutrace = self.run_timeline(0)
        self.fails("timeline", cutrace, self.dir, "0", "2000",
                   says="timeline traced 0, allocations views 1073741824")


class EndsTests(Case):
    def test_all_exit(self):
        self.save(FakeTrace(1), FakeTrace(2))
        self.passes("ends", self.dir, says="2 trace(s) ended exit")

    def test_killed(self):
        t = FakeTrace(2)
        t.meta.update(end_state="killed", end_note="ended without recording how")
        self.save(FakeTrace(1), t)
        self.fails("ends", self.dir, says="end_state killed (ended without recording how)")

    def test_writer_error_recovered_dropped(self):
        t = FakeTrace(1)
        t.meta.update(writer_error="disk full", recovered_records="12", dropped_records="3")
        self.save(t)
        line = self.fails("ends", self.dir, says="writer_error disk full")
        self.assertIn("recovered_records 12", line)
        self.assertIn("dropped_records 3", line)

    def test_no_traces(self):
        self.cannot("ends", self.dir, says="no traces")


class WarningsTests(Case):
    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_closing_lines_are_no_warnings(self):
        a = self.write("a.err", "hello\ncutrace: trace in /o/t (3 files); next: cutrace summary "
                                "/o/t\n")
        b = self.write("b.err", "cutrace: trace in 'a b' (1 file, plus 2 from earlier runs); "
                                "next: cutrace summary 'a b'\n  cutrace: indented is output\n")
        self.passes("warnings", a, b, says="none in 2 file(s)")

    def test_a_warning(self):
        a = self.write("a.err", "cutrace: trace in t (1 file); next: cutrace summary t\n")
        b = self.write("b.err", "x\ncutrace: CUTRACE_STACKS=bogus: not a setting, using all\n"
                                "cutrace: no trace written to t: the command made no CUDA calls"
                                "\n")
        line = self.fails("warnings", a, b, says="2 warning(s) in 2 file(s): b.err: cutrace: "
                                                 "CUTRACE_STACKS=bogus")
        self.assertIn("no trace written", line)

    def test_missing_file(self):
        self.cannot("warnings", os.path.join(self.tmp, "nope"))


class DevicesTests(Case):
    def test_named(self):
        t = FakeTrace(1)
        t.call("ncclAllReduce", layer="nccl")
        t.process["nccl_version"] = 22809
        self.save(t, FakeTrace(2))
        self.passes("devices", self.dir, says="NVIDIA H200 81920.0 MiB GPU-5fa8593a (runtime "
                                              "13000, driver 13000, nccl 22809)")

    def test_no_uuid(self):
        t = FakeTrace(1)
        t.devices = [(0, "", "NVIDIA H200", TOTAL)]
        t.call("cudaMalloc")
        self.save(t)
        self.fails("devices", self.dir, says="device 0 uuid ''")

    def test_nccl_without_version(self):
        t = FakeTrace(1)
        t.call("ncclCommInitRank", layer="nccl")
        self.save(t)
        self.fails("devices", self.dir, says="NCCL calls but no nccl_version")

    def test_no_devices_no_driver(self):
        t = FakeTrace(1)
        t.call("cudaMalloc", result=35)
        t.devices, t.process["cuda_driver_version"] = [], None
        self.save(t)
        line = self.fails("devices", self.dir, says="no cuda_driver_version")
        self.assertIn("no devices row", line)

    def test_zero_total(self):
        t = FakeTrace(1)
        t.devices = [(0, "GPU-1", "NVIDIA H200", 0)]
        t.call("cudaMalloc")
        self.save(t)
        self.fails("devices", self.dir, says="total_bytes 0")


def tensor_fact(pid, name, ptr, size, function="expandable", file="torch_check.py"):
    return dict(prog="torch", pid=pid, event="tensor", section="s", name=name, ptr=ptr,
                size=size, function=function, file=file)


class VmmTests(Case):
    PAGE = 20 * MIB

    def expandable(self, t, pages, base=0x7e0000000000, unmap_at=None, stack=0):
        """A segment grown page by page: cuMemCreate + cuMemMap each."""
        t.call("cuMemAddressReserve", layer="driver", ptr=base, size=8 * GIB, module=C10)
        for i in range(pages):
            handle = 0x1000 + i
            t.call("cuMemCreate", layer="driver", ptr=handle, size=self.PAGE, module=C10,
                   stack=stack)
            t.allocs.append(dict(seq=t.seq, t_ns=0, api="cuMemCreate", device=0, ptr=handle,
                                 size=self.PAGE, kind="vmm", module=C10, free_seq=None,
                                 free_t_ns=None, free_api=None, effect_order=2 * t.seq + 1,
                                 free_effect_order=None))
            t.call("cuMemMap", layer="driver", ptr=base + i * self.PAGE, size=self.PAGE,
                   arg0=handle, module=C10)
            if unmap_at == i:
                t.call("cuMemUnmap", layer="driver", ptr=base, size=self.PAGE, module=C10)
        return base

    def test_covered(self):
        t = FakeTrace(300)
        base = self.expandable(t, 103)
        t.alloc("cudaMalloc", 512 * MIB)  # smaller than the tensor: allowed
        self.save(t)
        self.write_facts(tensor_fact(300, "big", base + MIB, 2 * GIB))
        self.passes("vmm-cover", self.dir, self.facts, "big",
                    says="big (2048.0 MiB) covered by 103 mapped cuMemCreate range(s)")

    def test_two_gib_cudamalloc_under_expandable(self):
        t = FakeTrace(300)
        base = self.expandable(t, 103)
        t.alloc("cudaMalloc", 2 * GIB)
        self.save(t)
        self.write_facts(tensor_fact(300, "big", base, 2 * GIB))
        self.fails("vmm-cover", self.dir, self.facts, "big",
                   says="1 cudaMalloc of at least 2048.0 MiB")

    def test_one_page_is_not_the_tensor(self):
        t = FakeTrace(300)
        base = self.expandable(t, 1)
        self.save(t)
        self.write_facts(tensor_fact(300, "big", base, 2 * GIB))
        self.fails("vmm-cover", self.dir, self.facts, "big", says="never covered")

    def test_page_unmapped_before_the_rest_was_mapped(self):
        t = FakeTrace(300)
        base = self.expandable(t, 103, unmap_at=50)
        self.save(t)
        self.write_facts(tensor_fact(300, "big", base, 2 * GIB))
        self.fails("vmm-cover", self.dir, self.facts, "big", says="never covered")

    def test_handle_not_created(self):
        t = FakeTrace(300)
        base = self.expandable(t, 103)
        for c in t.calls:
            if c["api"] == "cuMemCreate" and c["ptr"] == 0x1000 + 7:
                c["result"] = 2
        self.save(t)
        self.write_facts(tensor_fact(300, "big", base, 2 * GIB))
        self.fails("vmm-cover", self.dir, self.facts, "big", says="never covered")

    def test_no_such_tensor(self):
        self.save(FakeTrace(300))
        self.write_facts(tensor_fact(300, "big", 1, 1))
        self.cannot("vmm-cover", self.dir, self.facts, "small", says="no tensor fact named small")


class FramesTests(Case):
    def test_cudamalloc_segment(self):
        t = FakeTrace(400)
        good = t.stack(("native", "/usr/lib/libcudart.so.13"), ("native", C10),
                       ("native", "/venv/lib/libtorch_python.so"),
                       ("python", "empty", "/venv/torch/__init__.py"),
                       ("python", "caching", "/work/examples/real_gpu/torch_check.py"))
        seg = t.alloc("cudaMalloc", 20 * MIB, module=C10, stack=good)
        t.query(TOTAL - GIB)
        self.save(t)
        self.write_facts(tensor_fact(400, "small", seg["ptr"] + 512, 4096, "caching"),
                         torch_fact(400, TOTAL - GIB, 20 * MIB, 1))
        self.passes("frames", self.dir, self.facts, "small",
                    says="cudaMalloc seq 1: python frame caching (torch_check.py), native frame "
                         "in libc10_cuda")

    def test_wrong_function_and_no_c10(self):
        t = FakeTrace(400)
        bad = t.stack(("native", "/usr/lib/libcudart.so.13"), ("native", PROG),
                      ("python", "other", "/work/torch_check.py"))
        seg = t.alloc("cudaMalloc", 20 * MIB, module=PROG, stack=bad)
        self.save(t)
        self.write_facts(tensor_fact(400, "small", seg["ptr"], 4096, "caching"))
        line = self.fails("frames", self.dir, self.facts, "small",
                          says="no python frame caching in torch_check.py (innermost: other")
        self.assertIn("no native frame in libc10_cuda", line)

    def test_the_segment_made_before_the_next_query(self):
        # the address was a segment of another function's before: the one made last before
        # the program's next query after the fact holds the tensor
        t = FakeTrace(400)
        old = t.stack(("native", C10), ("python", "warmup", "torch_check.py"))
        new = t.stack(("native", C10), ("python", "caching", "torch_check.py"))
        first = t.alloc("cudaMalloc", 20 * MIB, module=C10, stack=old)
        t.free(first)
        t.alloc("cudaMalloc", 20 * MIB, module=C10, stack=new, ptr=first["ptr"])
        t.query(TOTAL - GIB)
        t.alloc("cudaMalloc", 20 * MIB, module=C10, stack=old, ptr=first["ptr"])
        self.save(t)
        self.write_facts(tensor_fact(400, "small", first["ptr"], 4096, "caching"),
                         torch_fact(400, TOTAL - GIB, 20 * MIB, 1))
        self.passes("frames", self.dir, self.facts, "small", says="cudaMalloc seq 3")

    def test_vmm_page(self):
        t = FakeTrace(400)
        good = t.stack(("native", C10), ("python", "expandable", "torch_check.py"))
        base = VmmTests.expandable(VmmTests(), t, 3, stack=good)
        self.save(t)
        self.write_facts(tensor_fact(400, "big", base + 30 * MIB, 40 * MIB))
        self.passes("frames", self.dir, self.facts, "big", says="cuMemCreate seq 4 (mapped at "
                                                                "seq 5)")

    def test_not_allocated(self):
        self.save(FakeTrace(400))
        self.write_facts(tensor_fact(400, "big", 0x1234, 4096))
        self.fails("frames", self.dir, self.facts, "big", says="no cudaMalloc or mapped")


class ReportsTests(Case):
    CUTRACE = """
    commands = ["summary", "collectives", "timeline", "budget", "diff", "sites", "run"]
    commands += os.environ.get("FAKE_MORE", "").split()
    if args == ["--help"]:
        print("usage: cutrace <command>\\n\\ncommands:")
        for c in commands:
            print(f"  {c:11}  what it does")
        sys.exit(0)
    status = json.loads(os.environ.get("FAKE_STATUS", "{}"))
    command = args[0]
    if command == "budget" and os.environ.get("FAKE_BUDGET") == "none":
        print(json.dumps({"report": "budget", "ranks_analysed": 0}))
        sys.exit(1)
    if command == "sites" and not os.environ.get("FAKE_WRITER"):
        for name in os.listdir(args[-1]):
            if name.endswith(".db"):
                with open(os.path.join(args[-1], name[:-3] + ".symbols"), "w") as f:
                    f.write("names")
    elif command == os.environ.get("FAKE_WRITER"):
        for name in os.listdir(args[-1]):
            if not name.endswith(".db"):
                continue
            db = sqlite3.connect(os.path.join(args[-1], name))
            if command == "sites":
                db.execute("INSERT OR IGNORE INTO symbols VALUES(1234, 'caching_malloc')")
            else:
                db.execute("DELETE FROM calls WHERE seq = 1")
            db.commit()
            db.close()
    if "-o" in args and not os.environ.get("FAKE_NO_FILE"):
        with open(args[args.index("-o") + 1], "w") as f:
            f.write(f"{command} picture")
    print(f"{command} report")
    sys.exit(status.get(command, 0))
    """

    def setUp(self):
        super().setUp()
        self.other = os.path.join(self.tmp, "other")
        os.mkdir(self.other)
        t = FakeTrace(1)
        t.alloc("cudaMalloc", GIB)
        self.save(t)
        self.save(FakeTrace(2), directory=self.other)
        self.cutrace = self.fake_cutrace(self.CUTRACE)

    def reports(self, env, expect_rc, says):
        old = dict(os.environ)
        os.environ.update(env)
        try:
            rc, line = self.check("reports", self.cutrace, self.dir, self.other)
        finally:
            os.environ.clear()
            os.environ.update(old)
        self.assertEqual(rc, expect_rc, line)
        self.assertIn(says, line)
        return line

    def test_all_succeed(self):
        line = self.reports({}, 0, "summary 0, timeline 0, collectives 0, sites 0, budget 0, "
                                   "diff 0, export: not in this build")
        self.assertIn("trace files unchanged, 1 names cache(s) written beside them", line)
        self.reports({}, 0, "trace files unchanged")  # named already: nothing new to store

    def test_budget_nothing_to_replay_is_documented(self):
        self.reports({"FAKE_BUDGET": "none", "FAKE_MORE": "export"}, 0,
                     "budget 1 (documented: no rank to analyse), diff 0, export 0")

    def test_pictures_write_their_file_outside_the_runs(self):
        self.reports({"FAKE_MORE": "export report"}, 0, "diff 0, export 0, report 0")
        self.reports({"FAKE_MORE": "export report", "FAKE_NO_FILE": "1"}, 1,
                     "export wrote nothing to ")

    def test_a_report_fails(self):
        self.reports({"FAKE_STATUS": json.dumps({"budget": 1})}, 1, "budget exited 1")
        self.reports({"FAKE_STATUS": json.dumps({"diff": 2})}, 1, "diff exited 2")
        self.reports({"FAKE_STATUS": json.dumps({"export": 1}), "FAKE_MORE": "export"}, 1,
                     "export exited 1")

    def test_a_report_changes_a_trace(self):
        self.reports({"FAKE_WRITER": "summary"}, 1, "trace files changed: node-1-0.db changed")
        # Names stored into the trace itself, as sites once did: a trace changed all the same.
        self.reports({"FAKE_WRITER": "sites"}, 1, "trace files changed: node-1-0.db changed")


class IpcFactsTests(Case):
    H1, H2 = "ab" * 64, "cd" * 64

    def test_pair(self):
        a, b = FakeTrace(10), FakeTrace(11)
        a.ipc.append((1, "cudaIpcGetMemHandle", self.H1, 0))
        b.ipc.append((1, "cudaIpcOpenMemHandle", self.H1, 0))
        self.save(a, b)
        self.write_facts(dict(prog="cuda", pid=10, event="ipc_export", handle_hex=self.H1,
                              size=4096),
                         dict(prog="cuda", pid=11, event="ipc_open", handle_hex=self.H1))
        self.passes("ipc-facts", self.dir, self.facts, says="1 pair(s) across 1 process pair")

    def test_open_not_traced(self):
        a, b = FakeTrace(10), FakeTrace(11)
        a.ipc.append((1, "cudaIpcGetMemHandle", self.H1, 0))
        b.ipc.append((1, "cudaIpcOpenMemHandle", self.H1, 201))  # failed: not an open
        self.save(a, b)
        self.write_facts(dict(prog="cuda", pid=10, event="ipc_export", handle_hex=self.H1),
                         dict(prog="cuda", pid=11, event="ipc_open", handle_hex=self.H1))
        self.fails("ipc-facts", self.dir, self.facts, says="pid 11 line 2: handle abababab")

    def test_same_process_and_no_pair(self):
        a = FakeTrace(10)
        a.ipc += [(1, "cudaIpcGetMemHandle", self.H1, 0), (2, "cudaIpcOpenMemHandle", self.H1, 0),
                  (3, "cudaIpcGetMemHandle", self.H2, 0)]
        self.save(a)
        self.write_facts(dict(prog="cuda", pid=10, event="ipc_export", handle_hex=self.H1),
                         dict(prog="cuda", pid=10, event="ipc_open", handle_hex=self.H1))
        self.fails("ipc-facts", self.dir, self.facts, says="exported and opened by pid 10")
        self.write_facts(dict(prog="cuda", pid=10, event="ipc_export", handle_hex=self.H2))
        self.fails("ipc-facts", self.dir, self.facts, says="no handle both exported and opened")


class AllocationFactsTests(Case):
    def test_nccl_mem_alloc(self):
        t = FakeTrace(20)
        n = t.alloc("ncclMemAlloc", GIB, layer="nccl", ptr=0xffff800000000000)
        t.free(n, "ncclMemFree")
        self.save(t)
        self.write_facts(dict(prog="cuda", pid=20, event="nccl_mem_alloc", ptr=0xffff800000000000,
                              size=GIB))
        self.passes("nccl-mem", self.dir, self.facts, says="1 nccl_mem_alloc fact(s), 1024.0 MiB")

    def test_nccl_mem_alloc_lies(self):
        t = FakeTrace(20)
        n = t.alloc("ncclMemAlloc", GIB, layer="nccl")
        t.free(n, "cudaFree")
        c = t.alloc("cudaMalloc", GIB)
        self.save(t)
        self.write_facts(dict(prog="cuda", pid=20, event="nccl_mem_alloc", ptr=n["ptr"],
                              size=GIB))
        self.fails("nccl-mem", self.dir, self.facts, says="ended by cudaFree, not ncclMemFree")
        self.write_facts(dict(prog="cuda", pid=20, event="nccl_mem_alloc", ptr=c["ptr"],
                              size=GIB))
        self.fails("nccl-mem", self.dir, self.facts, says="(at that ptr: cudaMalloc device")

    def test_pinned(self):
        t = FakeTrace(30)
        h = t.alloc("cudaHostAlloc", 64 * MIB, kind="host")
        d = t.alloc("cudaMalloc", 64 * MIB)
        self.save(t)
        self.write_facts(dict(prog="torch", pid=30, event="pinned", ptr=h["ptr"], size=64 * MIB))
        self.passes("pinned", self.dir, self.facts, says="1 pinned fact(s), 64.0 MiB")
        self.write_facts(dict(prog="torch", pid=30, event="pinned", ptr=h["ptr"], size=32 * MIB))
        self.fails("pinned", self.dir, self.facts, says="no host allocation")
        self.write_facts(dict(prog="torch", pid=30, event="pinned", ptr=d["ptr"], size=64 * MIB))
        self.fails("pinned", self.dir, self.facts, says="no host allocation")
        self.write_facts(dict(prog="torch", pid=30, event="section", name="x", ok=True))
        self.fails("pinned", self.dir, self.facts, says="no pinned facts")


class GraphTests(Case):
    def program(self, mode, captured=1, launch=True, reduce_before=False):
        t = FakeTrace(50)
        if reduce_before:
            t.collectives.append((t.call("ncclAllReduce", layer="nccl"), "ncclAllReduce", 1, 0))
        t.call("cudaStreamBeginCapture", flags=mode)
        t.collectives.append((t.call("ncclAllReduce", layer="nccl"), "ncclAllReduce",
                              captured, 0))
        t.call("cudaStreamEndCapture")
        if launch:
            t.call("cudaGraphLaunch")
        return t

    def test_global(self):
        self.save(self.program(0))
        self.passes("graph", self.dir, "global", says="global capture seq 1, captured "
                                                      "ncclAllReduce seq 2, 1 cudaGraphLaunch")

    def test_thread_local_is_not_global(self):
        self.save(self.program(1))
        self.fails("graph", self.dir, "global", says="capture modes [1]")
        self.passes("graph", self.dir, "thread_local")

    def test_not_captured_not_launched(self):
        self.save(self.program(0, captured=0, reduce_before=True))
        self.fails("graph", self.dir, "global", says="0 captured ncclAllReduce after it")
        os.unlink(os.path.join(self.dir, os.listdir(self.dir)[0]))
        self.save(self.program(0, launch=False))
        self.fails("graph", self.dir, "global", says="0 cudaGraphLaunch")

    def test_bad_mode(self):
        self.save(self.program(0))
        self.cannot("graph", self.dir, "eager", says="not one of global")


class ProtocolTests(Case):
    def test_usage(self):
        self.cannot("frames", self.dir, says="usage")
        self.cannot("nope", says="usage")

    def test_old_checks_still_work(self):
        t = FakeTrace(1)
        t.call("cudaMalloc")
        t.ipc.append((1, "cudaIpcGetMemHandle", "ab" * 64, 0))
        u = FakeTrace(2)
        u.ipc.append((1, "cudaIpcOpenMemHandle", "ab" * 64, 0))
        self.save(t, u)
        self.passes("apis", self.dir, "cudaMal%", says="all 1 present in 2 trace(s)")
        self.fails("apis", self.dir, "cudaFree")
        self.passes("count", self.dir, "1", "SELECT count(*) FROM calls")
        self.passes("ipc", self.dir, says="1 of 1 opened handle(s) exported by another process")


def have_build():
    return all(os.path.exists(os.path.join(BUILD, p)) for p in
               ("cutrace", "libcutrace.so", "fake/libcudart.so.12", "fake/libnccl.so.2",
                "fake/libfake_expandable.so"))


CUDA_PROG = r"""
import ctypes, json, os, sys
facts = sys.argv[1]
rt, nccl = ctypes.CDLL("libcudart.so.12"), ctypes.CDLL("libnccl.so.2")
held = host_held = 0

def fact(**kw):
    with open(facts, "a") as f:
        f.write(json.dumps(dict(kw, prog="cuda", pid=os.getpid())) + "\n")

def query():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0
    fact(event="mem_get_info", free=free.value, total=total.value, held=held,
         host_held=host_held)

assert rt.cudaSetDevice(0) == 0
query()
p, h, n = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(64 << 20)) == 0
held += 64 << 20
query()
assert rt.cudaMallocHost(ctypes.byref(h), ctypes.c_size_t(8 << 20)) == 0
host_held += 8 << 20
fact(event="pinned", ptr=h.value, size=8 << 20)
assert nccl.ncclMemAlloc(ctypes.byref(n), ctypes.c_size_t(32 << 20)) == 0
held += 32 << 20
fact(event="nccl_mem_alloc", ptr=n.value, size=32 << 20)
query()
assert nccl.ncclMemFree(n) == 0
held -= 32 << 20
assert rt.cudaFree(p) == 0
held -= 64 << 20
query()
assert rt.cudaFreeHost(h) == 0
host_held -= 8 << 20
query()
if len(sys.argv) > 2:   # a child that opens what this process exports
    handle = ctypes.create_string_buffer(64)
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(2 << 20)) == 0
    assert rt.cudaIpcGetMemHandle(handle, p) == 0
    fact(event="ipc_export", handle_hex=handle.raw.hex(), size=2 << 20)
    import subprocess
    subprocess.run([sys.executable, sys.argv[2], facts, handle.raw.hex()], check=True)
"""

OPENER = r"""
import ctypes, json, os, sys
rt = ctypes.CDLL("libcudart.so.12")
raw = bytes.fromhex(sys.argv[2])


class Handle(ctypes.Structure):  # cudaIpcMemHandle_t, passed by value
    _fields_ = [("reserved", ctypes.c_char * 64)]


handle = Handle()
ctypes.memmove(ctypes.byref(handle), raw, 64)
q = ctypes.c_void_p()
assert rt.cudaSetDevice(0) == 0
assert rt.cudaIpcOpenMemHandle(ctypes.byref(q), handle, ctypes.c_uint(1)) == 0
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(dict(prog="cuda", pid=os.getpid(), event="ipc_open",
                            handle_hex=raw.hex())) + "\n")
assert rt.cudaIpcCloseMemHandle(q) == 0
"""

# libfake_expandable.so copied under the caching allocator's name: its cuMemCreate and
# cuMemMap calls (through driver entry points, as PyTorch's expandable segments) then have a
# native frame in "libc10_cuda.so" under this script's python frames.
EXPANDABLE_PROG = r"""
import ctypes, json, os, sys
facts, lib = sys.argv[1], sys.argv[2]
rt = ctypes.CDLL("libcudart.so.12")
c10 = ctypes.CDLL(lib)
c10.fex_base.restype = ctypes.c_void_p
c10.fex_mapped_bytes.restype = ctypes.c_size_t

def fact(**kw):
    with open(facts, "a") as f:
        f.write(json.dumps(dict(kw, prog="torch", pid=os.getpid())) + "\n")

def query():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0
    fact(event="mem_get_info", free=free.value, total=total.value,
         reserved=c10.fex_mapped_bytes(), allocated=0, segments=0, allocator="expandable")

def expandable():
    assert c10.fex_reserve(ctypes.c_size_t(8 << 30), 0) == 0
    assert c10.fex_grow(ctypes.c_size_t(2 << 30)) == 0
    fact(event="tensor", name="big", ptr=c10.fex_base(), size=2 << 30, function="expandable",
         file=os.path.basename(__file__))

assert rt.cudaSetDevice(0) == 0
query()
expandable()
query()
assert c10.fex_shrink(ctypes.c_size_t(1 << 30)) == 0
query()
assert c10.fex_release() == 0
query()
"""


@unittest.skipUnless(have_build(), f"no build in {BUILD} (run make)")
class RealTraceTests(Case):
    """The checks on real traces of this build on the fake CUDA stack: their SQL against the
    real views."""

    def run_traced(self, directory, *argv, state="state"):
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(BUILD, "fake"),
                   CUTRACE_FAKE_STATE=os.path.join(self.tmp, state), CUTRACE_FAKE_GPUS="1",
                   CUTRACE_FAKE_GPU_MEM="96G", CUTRACE_FAKE_CTX_MEM="512M")
        env.pop("LD_PRELOAD", None)
        err = os.path.join(self.tmp, os.path.basename(directory) + ".err")
        with open(err, "w", encoding="utf-8") as f:
            run = subprocess.run([os.path.join(BUILD, "cutrace"), "run", "-o", directory, "--",
                                  sys.executable, *argv], env=env, stderr=f, check=False,
                                 timeout=120)
        with open(err, encoding="utf-8") as f:
            self.assertEqual(run.returncode, 0, f.read())
        return err

    def script(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_cuda_program(self):
        prog = self.script("cuda_prog.py", CUDA_PROG)
        opener = self.script("opener.py", OPENER)
        err = self.run_traced(self.dir, prog, self.facts, opener)
        other = os.path.join(self.tmp, "other")
        other_facts = os.path.join(self.tmp, "other.jsonl")
        other_err = self.run_traced(other, prog, other_facts, state="state2")
        cutrace = os.path.join(BUILD, "cutrace")
        self.passes("holdings", self.dir, self.facts, says="5 queries, held == traced at each "
                                                           "(max 96.0 MiB)")
        self.passes("pinned", self.dir, self.facts, says="1 pinned fact(s)")
        self.passes("nccl-mem", self.dir, self.facts, says="each ended by ncclMemFree")
        self.passes("ipc-facts", self.dir, self.facts, says="1 pair(s) across 1 process pair")
        self.passes("ends", self.dir, says="2 trace(s) ended exit")
        self.passes("devices", self.dir, says="(cutrace fake) 98304.0 MiB GPU-")
        self.passes("warnings", err, other_err, says="none in 2 file(s)")
        self.passes("context", cutrace, self.dir, "400", "600", says="context 512.0 MiB")
        self.passes("timeline", cutrace, self.dir, "400", "600")
        self.passes("reports", cutrace, self.dir, other, says="summary 0, timeline 0")
        self.passes("reports", cutrace, self.dir, other, says="trace files unchanged")
        self.fails("graph", self.dir, "global", says="capture modes none")
        # the lies, on the real trace: a query's held off by one page; a fact of memory the
        # trace never saw
        with open(self.facts, encoding="utf-8") as f:
            facts = [json.loads(line) for line in f]
        facts[1]["held"] += 2 * MIB
        facts[2]["ptr"] += 4096
        self.write_facts(*facts)
        self.fails("holdings", self.dir, self.facts, says="held 69206016, traced 67108864")
        self.fails("pinned", self.dir, self.facts, says="no host allocation")

    def test_expandable_segment(self):
        lib = os.path.join(self.tmp, "libc10_cuda.so")
        shutil.copy(os.path.join(BUILD, "fake", "libfake_expandable.so"), lib)
        prog = self.script("torchlike.py", EXPANDABLE_PROG)
        self.run_traced(self.dir, prog, self.facts, lib)
        self.passes("reserved", self.dir, self.facts, says="4 queries, reserved == traced at "
                                                           "each (max 2060.0 MiB)")
        self.passes("vmm-cover", self.dir, self.facts, "big", says="big (2048.0 MiB) covered")
        self.passes("frames", self.dir, self.facts, "big",
                    says="python frame expandable (torchlike.py), native frame in libc10_cuda")
        with open(self.facts, encoding="utf-8") as f:
            facts = [json.loads(line) for line in f]
        for fact in facts:
            if fact["event"] == "tensor":
                fact.update(size=3 << 30, function="caching")
        self.write_facts(*facts)
        self.fails("vmm-cover", self.dir, self.facts, "big", says="never covered")
        self.fails("frames", self.dir, self.facts, "big", says="no python frame caching")


if __name__ == "__main__":
    unittest.main()
