"""bench.py - `make bench`: the cost of tracing in ONE table, every figure
against the target of issue 19, and build/bench/results.json.

    python3 bench/bench.py BUILD_DIR [--tiny]

Hot path (what an intercepted call costs the program): bench/hotpath (C) and
bench/pyhot.py (Python, ctypes) in bursts that fit the ring, with a pause
after each so that the writer keeps up. Each figure is the median of
BENCH_RUNS (default 5) runs, untraced and traced runs interleaved so that a
change in the machine's load hits both; "added" is traced minus untraced.
Instructions come from valgrind's callgrind, counted only inside the
program's calls (--toggle-collect=hot_calls, or ffi_call for Python, where
the first call is taken out by the difference of two call counts): they are
repeatable on a shared machine, where nanoseconds are not. A traced run
that waited for the writer (its trace's calls.wait_ns is not 0) measured
the writer, not the hot path: its row says so instead of giving a figure.

Writer-bound figures are apart: calls without pause (the program is then
bound by the writer's commit rate) against bench/rawinsert, plain SQLite
inserting the same rows in the same run; the waits when the ring fills;
the trace's bytes per event. Startup: the first CUDA call traced and
untraced, and examples/tp_server_sim's 8-rank startup. ltrace on the same
calls when installed. The analyzer: bench/analyzer.sh at 10^5, 10^6, 10^7
events (BENCH_SIZES).

--tiny (make bench-check): one run each, few calls, no callgrind, the
analyzer at 10^4 events: the table's shape and results.json (written to
build/bench/tiny/, so that the last full run's stays), in seconds.
Environment: BENCH_RUNS, BENCH_CALLS (per thread, hot path), BENCH_PY_CALLS,
BENCH_SUSTAINED (calls of the writer-bound runs), BENCH_SIZES,
BENCH_CALLGRIND=0 (no instruction counts), BENCH_ONLY=hot,py,writer,startup,
ltrace,analyzer (those parts of the table only). Exits 1 when a measurement
failed, never for a GAP.
"""
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# The targets of issue 19 (and 16 for the analyzer).
HOT_NS, HOT_INSTR = 150, 300
NATIVE32_NS = 1000
PY16_NS = 300
WRITER_RATE, WRITER_INSTR = 1_000_000, 9005 / 3
WAIT_MAX_MS = 1.0
FIRST_MS = 2.0
STARTUP_RATIO = 1.2
AN_RATE, AN_GROWTH, AN_BPE = 1e6, 11.0, 150


class Bench:
    def __init__(self, build, tiny):
        self.build = os.path.abspath(build)
        self.tiny = tiny
        env = os.environ.get
        self.runs = int(env("BENCH_RUNS", "1" if tiny else "5"))
        self.calls = int(env("BENCH_CALLS", "600" if tiny else "30000"))
        self.py_calls = int(env("BENCH_PY_CALLS", "300" if tiny else "9000"))
        self.sustained = int(env("BENCH_SUSTAINED", "3000" if tiny else "300000"))
        self.sizes = env("BENCH_SIZES", "10000" if tiny else "100000 1000000 10000000").split()
        self.callgrind = (not tiny and env("BENCH_CALLGRIND", "1") != "0"
                          and shutil.which("valgrind") is not None)
        self.cg_why = ("tiny configuration" if tiny else "BENCH_CALLGRIND=0"
                       if env("BENCH_CALLGRIND", "1") == "0" else "valgrind not installed")
        self.work = tempfile.mkdtemp(prefix="cutrace-bench-")
        # The tiny run (make test's) keeps its files apart: it never replaces the last
        # full run's results.json.
        self.out = os.path.join(self.build, "bench", "tiny" if tiny else "")
        self.cgdir = os.path.join(self.out, "callgrind")
        os.makedirs(self.cgdir, exist_ok=True)
        self.python = sys.executable
        self.env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(self.build, "fake"),
                        CUTRACE_FAKE_STATE=os.path.join(self.work, "gpu-state"),
                        CUTRACE_FAKE_GPUS="1")
        for k in ("LD_PRELOAD", "CUTRACE_STACKS", "CUTRACE_DIR", "CUTRACE_STACK_DEPTH"):
            self.env.pop(k, None)
        self.rows = []
        self.failed = False
        self.py_none_instr = None

    # ---------------------------------------------------------------- running
    def trace_dir(self):
        d = os.path.join(self.work, "trace")
        shutil.rmtree(d, ignore_errors=True)
        return d

    def run(self, argv, stacks=None, extra=None, valgrind=None, gpus=None):
        """Runs argv (traced when stacks is given); returns (stdout, wall s, trace dir)."""
        env = dict(self.env)
        trace = None
        if stacks is not None:
            trace = self.trace_dir()
            env.update(LD_PRELOAD=os.path.join(self.build, "libcutrace.so"),
                       CUTRACE_STACKS=stacks, CUTRACE_DIR=trace)
        if gpus:
            env["CUTRACE_FAKE_GPUS"] = str(gpus)
        env.update(extra or {})
        if valgrind:
            argv = ["valgrind", "--tool=callgrind"] + valgrind + argv
        t0 = time.perf_counter()
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, check=False)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: exit status {p.returncode}: {p.stderr[-500:]}")
        return p.stdout, wall, trace, p.stderr

    def hotpath(self, mode, threads, calls, depth=0, stacks=None, extra=None):
        out, wall, trace, _ = self.run([os.path.join(self.build, "bench/hotpath"), mode,
                                        str(threads), str(calls), str(depth)], stacks, extra)
        f = out.split()
        return {"ns": float(f[0]), "calls": int(f[1]), "first_ms": float(f[2]), "wall": wall,
                "trace": self.trace_stats(trace)}

    def pyhot(self, calls, depth, gil, stacks=None, valgrind=None):
        extra = {"CUTRACE_STACK_DEPTH": "64"}
        out, wall, trace, err = self.run([self.python, os.path.join(HERE, "pyhot.py"), str(calls),
                                          str(depth), gil], stacks, extra, valgrind)
        return {"ns": float(out.split()[0]), "trace": self.trace_stats(trace), "stderr": err}

    @staticmethod
    def trace_stats(trace):
        """Records, waits (calls.wait_ns: the program waiting for the writer) and bytes of a trace."""
        if trace is None:
            return None
        st = {"records": 0, "wait_ns": 0, "max_wait_ns": 0, "bytes": 0, "files": 0,
              "complete": True}
        for name in sorted(os.listdir(trace)):
            path = os.path.join(trace, name)
            st["bytes"] += os.path.getsize(path)
            if not name.endswith(".db"):
                continue
            st["files"] += 1
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                try:
                    row = db.execute("SELECT count(*), coalesce(sum(wait_ns), 0),"
                                     " coalesce(max(wait_ns), 0) FROM calls").fetchone()
                except sqlite3.Error:  # a trace without the view: its table
                    row = db.execute("SELECT count(*), coalesce(sum(wait_ns), 0),"
                                     " coalesce(max(wait_ns), 0) FROM events").fetchone()
                end = db.execute("SELECT value FROM meta WHERE key = 'end_state'").fetchone()
                # "running": the writer had not committed everything when the process ended.
                st["complete"] &= end is not None and end[0] != "running"
            finally:
                db.close()
            st["records"] += row[0]
            st["wait_ns"] += row[1]
            st["max_wait_ns"] = max(st["max_wait_ns"], row[2])
        return st

    def interleaved(self, variants):
        """variants: name -> function running once. Runs them in turn, BENCH_RUNS times."""
        got = {k: [] for k in variants}
        for _ in range(self.runs):
            for k, f in variants.items():
                got[k].append(f())
        return got

    @staticmethod
    def med(results, key="ns"):
        return statistics.median(r[key] for r in results)

    @staticmethod
    def waited(results):
        """Total ns the traced runs waited for the writer, and the longest wait."""
        tr = [r["trace"] for r in results if r.get("trace")]
        return sum(t["wait_ns"] for t in tr), max((t["max_wait_ns"] for t in tr), default=0)

    # ------------------------------------------------------------- callgrind
    def collected(self, stderr):
        m = re.findall(r"Collected\s*:\s*(\d+)", stderr)
        if not m:
            raise RuntimeError("callgrind printed no count: " + stderr[-300:])
        return int(m[-1])

    def cg_hot(self, name, depth=0, stacks=None, calls=3000):
        """Instructions inside hot_calls (the calls and their hooks, no other thread)."""
        out_file = os.path.join(self.cgdir, name + ".out")
        argv = [os.path.join(self.build, "bench/hotpath"), "burst", "1", str(calls), str(depth)]
        _, _, trace, err = self.run(argv, stacks, valgrind=[
            "--toggle-collect=hot_calls", "--callgrind-out-file=" + out_file])
        return self.collected(err), self.trace_stats(trace)

    def cg_py(self, name, depth, gil, stacks):
        """Instructions per Python call inside ffi_call (the foreign call with its hook), the
        first call (the tracer's start) taken out by the difference of two call counts."""
        n1, n2 = 300, 1200
        counts = []
        for n in (n1, n2):
            out_file = os.path.join(self.cgdir, f"{name}-{n}.out")
            r = self.pyhot(n, depth, gil, stacks, valgrind=[
                "--toggle-collect=ffi_call", "--callgrind-out-file=" + out_file])
            counts.append(self.collected(r["stderr"]))
        return (counts[1] - counts[0]) / (n2 - n1)

    @staticmethod
    def cg_tracer_threads(prefix):
        """Instructions of the threads of a --separate-threads=yes run that are not the
        program's (no main, no hot_calls in their profile): the tracer's own threads."""
        d, base = os.path.split(prefix)
        program_fn = re.compile(r"^c?fn=\(\d+\)\s+(hot_calls|main)$")
        total = 0
        for f in os.listdir(d):
            if not re.fullmatch(re.escape(base) + r"-\d+", f):
                continue
            ir, program = 0, False
            with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith(("summary:", "totals:")) and not ir:
                        ir = int(line.split()[1])
                    elif program_fn.match(line.rstrip("\n")):
                        program = True
            if not program:
                total += ir
        return total

    # ------------------------------------------------------------------ rows
    def row(self, rid, section, what, value, target, verdict, **fig):
        self.rows.append({"id": rid, "section": section, "what": what, "value": value,
                          "target": target, "verdict": verdict, "figures": fig})

    def safe(self, rid, section, what, target, fn):
        """Runs one row's measurement; a failure becomes a FAILED row, the bench goes on."""
        try:
            fn()
        except (RuntimeError, OSError, ValueError, IndexError, sqlite3.Error) as e:
            self.failed = True
            self.row(rid, section, what, "FAILED: " + str(e).splitlines()[0][:100], target,
                     "FAILED")

    def waited_text(self, wait_ns, max_ns):
        return (f"writer-bound: the traced runs waited {wait_ns / 1e6:.1f} ms for the writer"
                f" (longest {max_ns / 1e6:.2f} ms); not a hot-path figure")

    def instr_text(self, instr):
        return f"{instr:,.0f} instr" if instr is not None else f"instr n/a ({self.cg_why})"

    def hot_rows(self):
        sec = "hot path (per program call)"
        hp = "burst"

        def c_row(rid, what, depth, stacks, target_ns, target_instr, threads=1, cg=True):
            u = lambda: self.hotpath(hp, threads, self.calls, depth)
            t = lambda: self.hotpath(hp, threads, self.calls, depth, stacks)
            got = self.interleaved({"untraced": u, "traced": t})
            base, traced = self.med(got["untraced"]), self.med(got["traced"])
            added = traced - base
            instr = None
            if self.callgrind and cg:
                n = 3000
                ui, _ = self.cg_hot(rid + "-untraced", depth, None, n)
                ti, tst = self.cg_hot(rid, depth, stacks, n)
                instr = (ti - ui) / n
                if tst["wait_ns"]:
                    instr = None  # the count holds the wait's spinning
            w, wmax = self.waited(got["traced"])
            fig = dict(untraced_ns=base, traced_ns=traced, added_ns=added, added_instr=instr,
                       threads=threads, depth=depth, stacks=stacks, wait_ns=w, max_wait_ns=wmax,
                       runs=self.runs, calls_per_thread=self.calls)
            target = f"<={target_ns} ns" + (f", <={target_instr} instr" if target_instr else "")
            if w:
                self.row(rid, sec, what, self.waited_text(w, wmax), target, "writer-bound", **fig)
                return
            ok = added <= target_ns and (target_instr is None or instr is None
                                         or instr <= target_instr)
            val = f"{added:+.0f} ns ({base:.0f} -> {traced:.0f})"
            if cg:
                val += ", +" + self.instr_text(instr)
            self.row(rid, sec, what, val, target, "ok" if ok else "GAP", **fig)

        self.safe("hot_none", sec, "no stacks, 1 thread", "<=150 ns, <=300 instr",
                  lambda: c_row("hot_none", "no stacks, 1 thread", 0, "none", HOT_NS, HOT_INSTR))
        self.safe("hot_native32", sec, "native stacks, depth 32", "<=1000 ns",
                  lambda: c_row("hot_native32", "native stacks, depth 32", 32, "native",
                                NATIVE32_NS, None))
        for threads in (1, 2, 4, 16):
            rid = f"threads_{threads}"
            what = f"no stacks, {threads} thread{'s' if threads > 1 else ''} (per thread)"
            self.safe(rid, sec, what, "<=150 ns",
                      lambda t=threads, r=rid, w=what: c_row(r, w, 0, "none", HOT_NS, None, t, False))

    def py_rows(self):
        sec = "hot path (per program call)"
        for gil in ("held", "released"):
            for depth in (10, 16, 30):
                rid = f"py_{gil}_{depth}"
                what = f"Python frames, GIL {gil}, {depth} frames"
                target = f"<={PY16_NS} ns" if depth == 16 else "- (16 frames: <=300 ns)"

                def one(gil=gil, depth=depth, rid=rid, what=what, target=target):
                    got = self.interleaved({
                        "none": lambda: self.pyhot(self.py_calls, depth, gil, "none"),
                        "python": lambda: self.pyhot(self.py_calls, depth, gil, "python")})
                    none, frames = self.med(got["none"]), self.med(got["python"])
                    added = frames - none
                    instr = None
                    if self.callgrind:
                        # Inside ffi_call, stacks=none reads no frame: one baseline for all.
                        if self.py_none_instr is None:
                            self.py_none_instr = self.cg_py("py_none", 16, "released", "none")
                        instr = self.cg_py(rid, depth, gil, "python") - self.py_none_instr
                    w, wmax = self.waited(got["none"] + got["python"])
                    fig = dict(stacks_none_ns=none, stacks_python_ns=frames, added_ns=added,
                               added_instr=instr, gil=gil, frames=depth, wait_ns=w,
                               max_wait_ns=wmax, runs=self.runs, calls=self.py_calls)
                    if w:
                        self.row(rid, sec, what, self.waited_text(w, wmax), target,
                                 "writer-bound", **fig)
                        return
                    verdict = "-" if depth != 16 else "ok" if added <= PY16_NS else "GAP"
                    self.row(rid, sec, what, f"{added:+.0f} ns over stacks=none ({none:.0f} ->"
                             f" {frames:.0f}), +{self.instr_text(instr)}", target, verdict, **fig)

                self.safe(rid, sec, what, target, one)

    def writer_rows(self):
        sec = "writer-bound (calls without pause)"
        n = self.sustained

        def rate():
            got = self.interleaved({"traced": lambda: self.hotpath("sustained", 1, n, 0, "none")})
            recs = got["traced"][-1]["trace"]["records"]
            # The process's time less its first call (the trace's creation, a row of its own).
            wall = statistics.median(r["wall"] - r["first_ms"] / 1e3 for r in got["traced"])
            w, wmax = self.waited(got["traced"])
            writer_rate = recs / wall
            # The same rows, inserted by plain SQLite from the last trace.
            db = [f for f in os.listdir(os.path.join(self.work, "trace")) if f.endswith(".db")][0]
            shutil.copy(os.path.join(self.work, "trace", db), os.path.join(self.work, "rows.db"))
            raws = []
            for i in range(self.runs):
                out, _, _, _ = self.run([os.path.join(self.build, "bench/rawinsert"),
                                         os.path.join(self.work, "rows.db"),
                                         os.path.join(self.work, f"raw{i}.db")])
                rows, secs = out.split()
                raws.append(int(rows) / float(secs))
            raw_rate = statistics.median(raws)
            w_instr = raw_instr = None
            if self.callgrind:
                w_instr, raw_instr = self.cg_writer()
            fig = dict(records=recs, calls=n, wall_s=wall, writer_records_per_s=writer_rate,
                       raw_insert_records_per_s=raw_rate, writer_instr_per_record=w_instr,
                       raw_insert_instr_per_record=raw_instr, program_waited_ns=w,
                       bound_by_writer=w > 0)
            bound = "" if w else ">= "  # no wait: the producer was the bound
            val = (f"{bound}{writer_rate / 1e3:,.0f}k rec/s vs raw SQLite {raw_rate / 1e3:,.0f}k"
                   f" ({writer_rate / raw_rate:.2f}x)")
            if w_instr is not None:
                val += f"; {w_instr:,.0f} vs {raw_instr:,.0f} instr/rec"
            else:
                val += f"; instr n/a ({self.cg_why})"
            ok = writer_rate >= WRITER_RATE or (w_instr is not None and w_instr <= WRITER_INSTR)
            self.row("writer", sec, f"writer records/s, {n:,} calls, 1 thread", val,
                     ">=1M rec/s or <=3,002 instr/rec", "ok" if ok else "GAP", **fig)
            b = got["traced"][-1]["trace"]
            self.row("bytes_per_event", sec, "trace bytes per event (record)",
                     f"{b['bytes'] / max(recs, 1):.1f} B/event ({b['bytes'] / n:.1f} B/call)",
                     "- (reported)", "-", bytes=b["bytes"], records=recs, calls=n)
            self.wait_row("wait_1", sec, f"waits per 10^6 calls, 1 thread ({n:,} calls)",
                          got["traced"], n)

        self.safe("writer", sec, "writer records/s", ">=1M rec/s or <=3,002 instr/rec", rate)

        def wait16():
            per = max(n // 16 // 300 * 300, 300)
            got = self.interleaved({"t": lambda: self.hotpath("sustained", 16, per, 0, "none")})
            self.wait_row("wait_16", sec, f"waits per 10^6 calls, 16 threads ({per * 16:,} calls)",
                          got["t"], per * 16)

        self.safe("wait_16", sec, "waits per 10^6 calls, 16 threads", "longest wait <=1 ms",
                  wait16)

        def burst():
            calls = 3000 if self.tiny else 100_000
            got = self.interleaved({"t": lambda: self.hotpath("sustained", 1, calls, 0, "none")})
            w = statistics.median(r["trace"]["wait_ns"] for r in got["t"])
            wmax = max(r["trace"]["max_wait_ns"] for r in got["t"])
            self.row("burst_100k", sec, f"one burst of {calls:,} calls (ring absorbs it)",
                     f"waited {w / 1e6:.2f} ms in all, longest wait {wmax / 1e6:.3f} ms",
                     "longest wait <=1 ms", "ok" if wmax <= WAIT_MAX_MS * 1e6 else "GAP",
                     calls=calls, wait_ns=w, max_wait_ns=wmax)

        self.safe("burst_100k", sec, "one burst of 100,000 calls", "longest wait <=1 ms", burst)

    def wait_row(self, rid, sec, what, results, calls):
        w = statistics.median(r["trace"]["wait_ns"] for r in results)
        wmax = max(r["trace"]["max_wait_ns"] for r in results)
        per = w / calls * 1e6 / 1e6  # ms per 10^6 calls
        self.row(rid, sec, what, f"{per:,.1f} ms waited per 10^6 calls, longest wait"
                 f" {wmax / 1e6:.3f} ms", "longest wait <=1 ms",
                 "ok" if wmax <= WAIT_MAX_MS * 1e6 else "GAP", calls=calls, wait_ns=w,
                 wait_ms_per_million_calls=per, max_wait_ns=wmax)

    def cg_writer(self):
        """Instructions per record of the tracer's threads (the writer; the trace's creation
        is taken out by the difference of two call counts), and of the raw
        SQLite insert of the same rows."""
        per_thread, recs = [], []
        for n in (3000, 12000):
            prefix = os.path.join(self.cgdir, f"writer-{n}.out")
            linger = 5000
            while True:
                for f in os.listdir(self.cgdir):
                    if f.startswith(f"writer-{n}.out"):
                        os.remove(os.path.join(self.cgdir, f))
                _, _, trace, _ = self.run(
                    [os.path.join(self.build, "bench/hotpath"), "sustained", "1", str(n), "0"],
                    "none", extra={"BENCH_LINGER_MS": str(linger)},
                    valgrind=["--separate-threads=yes", "--callgrind-out-file=" + prefix])
                st = self.trace_stats(trace)
                if st["complete"] and st["records"] >= n:
                    break
                if linger >= 40000:
                    raise RuntimeError(f"the writer did not finish under valgrind ({st})")
                linger *= 2  # the writer had not finished when the program exited
            per_thread.append(self.cg_tracer_threads(prefix))
            recs.append(st["records"])
        w_instr = (per_thread[1] - per_thread[0]) / (recs[1] - recs[0])
        db = [f for f in os.listdir(trace) if f.endswith(".db")][0]
        raw_out = os.path.join(self.cgdir, "raw_insert.out")
        _, _, _, err = self.run([os.path.join(self.build, "bench/rawinsert"),
                                 os.path.join(trace, db), os.path.join(self.work, "rawcg.db")],
                                valgrind=["--toggle-collect=raw_insert_rows",
                                          "--callgrind-out-file=" + raw_out])
        return w_instr, self.collected(err) / recs[1]

    def startup_rows(self):
        sec = "startup"

        def first():
            got = self.interleaved({
                "untraced": lambda: self.hotpath("burst", 1, 300, 0),
                "traced": lambda: self.hotpath("burst", 1, 300, 0, "none")})
            u, t = self.med(got["untraced"], "first_ms"), self.med(got["traced"], "first_ms")
            instr = None
            if self.callgrind:
                # Every thread's instructions from the start until the first call returns
                # (--dump-after=first_call: part 1 of the profile), traced less untraced.
                cnt = []
                for name, stacks in (("first_call-untraced", None), ("first_call", "none")):
                    out_file = os.path.join(self.cgdir, name + ".out")
                    self.run([os.path.join(self.build, "bench/hotpath"), "burst", "1", "300", "0"],
                             stacks, valgrind=["--dump-after=first_call",
                                               "--callgrind-out-file=" + out_file])
                    with open(out_file + ".1", encoding="utf-8", errors="replace") as fh:
                        cnt.append(next(int(x.split()[1]) for x in fh
                                        if x.startswith(("summary:", "totals:"))))
                instr = cnt[1] - cnt[0]
            val = f"{t:.2f} ms traced vs {u:.2f} ms untraced ({t - u:+.2f} ms)"
            val += ", " + (f"{instr / 1e6:+.2f}M instr (start to first return, all threads)"
                           if instr is not None else f"instr n/a ({self.cg_why})")
            self.row("first_call", sec, "first CUDA call of a process", val, "<=2 ms added",
                     "ok" if t - u <= FIRST_MS else "GAP", traced_ms=t, untraced_ms=u,
                     added_ms=t - u, added_instr=instr)

        self.safe("first_call", sec, "first CUDA call of a process", "<=2 ms added", first)

        def sim():
            tp = 2 if self.tiny else 8
            argv = [os.path.join(self.build, "examples/tp_server_sim"), "--tp", str(tp)]
            got = self.interleaved({
                "untraced": lambda: {"wall": self.run(argv, gpus=tp)[1]},
                "traced": lambda: {"wall": self.run(argv, "none", gpus=tp)[1]}})
            u, t = self.med(got["untraced"], "wall"), self.med(got["traced"], "wall")
            self.row("startup_8rank", sec, f"simulated {tp}-rank startup (tp_server_sim)",
                     f"{t / u:.2f}x ({u * 1e3:.0f} -> {t * 1e3:.0f} ms; +{(t - u) * 1e3 / tp:.1f} ms"
                     f" per rank, {os.cpu_count()} cores)", "<=1.2x",
                     "ok" if t / u <= STARTUP_RATIO else "GAP", ranks=tp, untraced_s=u,
                     traced_s=t, ratio=t / u, added_ms_per_rank=(t - u) * 1e3 / tp)

        self.safe("startup_8rank", sec, "simulated 8-rank startup", "<=1.2x", sim)

    def ltrace_row(self):
        sec = "comparison"
        if shutil.which("ltrace") is None:
            self.row("ltrace", sec, "ltrace on the same calls", "n/a (ltrace not installed)",
                     "- (comparison row)", "n/a")
            return

        def lt():
            calls = 300 if self.tiny else 3000
            argv = [os.path.join(self.build, "bench/hotpath"), "sustained", "1", str(calls), "0"]
            got = self.interleaved({
                "untraced": lambda: {"wall": self.run(argv)[1]},
                "ltrace": lambda: {"wall": self.run(
                    ["ltrace", "-f", "-o", os.devnull,
                     "-e", "cudaMalloc+cudaFree+cudaMemGetInfo"] + argv)[1]}})
            u, t = self.med(got["untraced"], "wall"), self.med(got["ltrace"], "wall")
            per = (t - u) / calls * 1e9
            self.row("ltrace", sec, "ltrace on the same calls", f"+{per / 1e3:,.1f} us per call",
                     "- (comparison row)", "-", added_ns=per, calls=calls)

        self.safe("ltrace", sec, "ltrace on the same calls", "- (comparison row)", lt)

    def analyzer_rows(self):
        sec = "analyzer"
        res = os.path.join(self.work, "analyzer.results")
        env = dict(os.environ, BENCH_RESULTS=res)
        if self.tiny:
            env["BENCH_REPEAT"] = "1"
        with open(os.path.join(self.out, "analyzer.out"), "w", encoding="utf-8") as fh:
            p = subprocess.run([os.path.join(HERE, "analyzer.sh"), self.build] + self.sizes,
                               env=env, stdout=fh, stderr=subprocess.PIPE, text=True, check=False)
        if p.returncode != 0 or not os.path.exists(res):
            self.failed = True
            self.row("analyzer", sec, "bench/analyzer.sh", "FAILED: " + p.stderr[-200:], "-",
                     "FAILED")
            return
        t = {}
        lines = []
        with open(res, encoding="utf-8") as fh:
            for line in fh:
                name, events, wall, cpu, rss, status = line.split()
                lines.append((name, int(events), float(wall), float(cpu), int(rss), status))
                n = int(events) // 2 if name == "diff" else int(events)
                t[(name, n)] = float(cpu)
        for name, events, wall, cpu, rss, status in lines:
            n = events // 2 if name == "diff" else events
            rid = f"analyzer_{name}_{n}"
            what = f"{name}, {n:.0e} events".replace("e+0", "e")
            if status != "0":
                self.row(rid, sec, what, f"FAILED ({status})", "-", "FAILED")
                if status != "timeout":
                    self.failed = True
                continue
            rate = events / cpu if cpu > 0 else 0
            bpe = rss * 1024 / events
            targets, verdicts = [], []
            growth = None
            if name != "scan":
                if n == 1_000_000:
                    targets.append(">=1M ev/s")
                    verdicts.append(rate >= AN_RATE)
                if n >= 10_000_000 and t.get((name, 1_000_000)):
                    growth = cpu / t[(name, 1_000_000)]
                    targets.append("growth <=11x")
                    verdicts.append(growth <= AN_GROWTH)
                if n >= 1_000_000:
                    targets.append("<=150 B/event")
                    verdicts.append(bpe <= AN_BPE)
            val = (f"{cpu:.2f} s cpu, {rate / 1e3:,.0f}k ev/s, peak {rss / 1024:.0f} MiB"
                   f" ({bpe:.0f} B/event)")
            scan = t.get(("scan", n))
            if name != "scan" and scan:
                val += f", {cpu / scan:.1f}x scan"
            if growth is not None:
                val += f", growth {growth:.1f}x"
            target = ", ".join(targets) if targets else (
                "- (baseline: plain SQLite scan)" if name == "scan" else "- (below 10^6)")
            verdict = "-" if not verdicts else "ok" if all(verdicts) else "GAP"
            self.row(rid, sec, what, val, target, verdict, events=events, wall_s=wall, cpu_s=cpu,
                     peak_rss_kib=rss, events_per_cpu_s=rate, bytes_per_event=bpe, growth=growth)

    # ---------------------------------------------------------------- output
    def table(self):
        w_what = max(len(r["what"]) for r in self.rows)
        w_val = min(max(len(r["value"]) for r in self.rows), 100)
        w_tgt = max(len(r["target"]) for r in self.rows)
        lines = []
        section = None
        for r in self.rows:
            if r["section"] != section:
                section = r["section"]
                lines.append(f"-- {section}")
            lines.append(f"  {r['what']:<{w_what}}  {r['value']:<{w_val}}  {r['target']:<{w_tgt}}"
                         f"  {r['verdict']}")
        head = f"  {'what':<{w_what}}  {'measured':<{w_val}}  {'target':<{w_tgt}}  verdict"
        gaps = sum(r["verdict"] == "GAP" for r in self.rows)
        oks = sum(r["verdict"] == "ok" for r in self.rows)
        return "\n".join([head] + lines + [f"targets: {oks} ok, {gaps} GAP"])

    def main(self):
        start = time.time()
        parts = {"hot": self.hot_rows, "py": self.py_rows, "writer": self.writer_rows,
                 "startup": self.startup_rows, "ltrace": self.ltrace_row,
                 "analyzer": self.analyzer_rows}
        only = os.environ.get("BENCH_ONLY", "").split(",") if os.environ.get("BENCH_ONLY") else parts
        try:
            for name in only:
                parts[name]()
        finally:
            shutil.rmtree(self.work, ignore_errors=True)
        print(f"cutrace bench ({'tiny' if self.tiny else 'full'} configuration:"
              f" {self.runs} interleaved runs per figure, medians; instructions:"
              f" {'callgrind' if self.callgrind else 'n/a, ' + self.cg_why}; {os.cpu_count()} cores)")
        print(self.table())
        results = {"configuration": {"tiny": self.tiny, "runs": self.runs, "calls": self.calls,
                                     "py_calls": self.py_calls, "sustained": self.sustained,
                                     "analyzer_sizes": [int(s) for s in self.sizes],
                                     "callgrind": self.callgrind, "cores": os.cpu_count(),
                                     "python": sys.version.split()[0],
                                     "seconds": round(time.time() - start, 1)},
                   "rows": self.rows}
        with open(os.path.join(self.out, "results.json"), "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)
        print(f"(every figure: {os.path.join(self.out, 'results.json')}; callgrind outputs:"
              f" {self.cgdir}; the analyzer's own table: {os.path.join(self.out, 'analyzer.out')})")
        return 1 if self.failed else 0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] != "--tiny"):
        sys.exit("usage: bench/bench.py BUILD_DIR [--tiny]")
    sys.exit(Bench(sys.argv[1], len(sys.argv) == 3).main())
