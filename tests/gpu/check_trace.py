"""check_trace.py - the trace checks of tests/gpu/run.sh, on a directory of cutrace traces.

Reads the trace files with Python's own sqlite3 module (read-only: file: URIs with mode=ro),
the `cutrace timeline --json` report, and the facts files the test programs write (one JSON
object per line: their own ground truth, docs in the programs), so that the test needs no
sqlite3 CLI and no package beyond the standard library.

    check_trace.py apis DIR PATTERN...        every pattern (SQL LIKE: ncclCommInit%) names an
                                              API with a successful call in some trace of DIR
    check_trace.py count DIR MIN SQL          the first column of SQL, summed over DIR's traces,
                                              is at least MIN
    check_trace.py ipc DIR                    every handle opened with cudaIpcOpenMemHandle was
                                              exported in another process's trace (at least one)
    check_trace.py timeline CUTRACE DIR LO_MIB HI_MIB
                                              at every memory query of `cutrace timeline --json`:
                                              traced live + unexplained = used, traced live is
                                              what the allocations views say was live then (an
                                              exited process's memory gone with it; a GPU
                                              without uuid fails: no uuid to cross-check on),
                                              and LO_MIB <= unexplained <= HI_MIB
    check_trace.py holdings DIR FACTS         at every mem_get_info fact of prog "cuda": its
                                              meminfo row (same pid, free and total, in order),
                                              where the process's own live device, managed and
                                              vmm bytes (not NCCL's internal buffers) == "held"
                                              and its live host bytes == "host_held"
    check_trace.py reserved DIR FACTS         at every mem_get_info fact of prog "torch": live
                                              device/vmm bytes allocated under a libc10_cuda
                                              frame == "reserved"; with "allocator" "default",
                                              their live cudaMalloc rows == "segments"
    check_trace.py context CUTRACE DIR LO_MIB HI_MIB
                                              unexplained memory (timeline) at each process's
                                              first memory query, divided by the processes
                                              alive on that GPU then (their contexts), in
                                              [LO_MIB, HI_MIB]; reports it and its spread
                                              over the process's queries
    check_trace.py ends DIR                   every trace ended 'exit', no writer_error, no
                                              recovered_records, no dropped_records
    check_trace.py warnings FILE...           no "cutrace:" line in the files but `cutrace
                                              run`'s closing "cutrace: trace in ..." line
    check_trace.py devices DIR                every trace that called CUDA has devices rows
                                              (uuid GPU-..., name, total_bytes > 0) and CUDA
                                              runtime and driver versions; NCCL's with NCCL calls
    check_trace.py vmm-cover DIR FACTS NAME   tensor fact NAME's bytes are covered, at one
                                              moment, by cuMemMap'd ranges of cuMemCreate
                                              handles, and no cudaMalloc is that large
    check_trace.py frames DIR FACTS NAME      the allocation holding tensor NAME (its cudaMalloc,
                                              or the cuMemCreate mapped at its first byte) has
                                              the fact's python frame (function, file) and a
                                              native frame in libc10_cuda
    check_trace.py reports CUTRACE DIR OTHER_DIR
                                              summary, timeline, collectives, sites, budget
                                              (--framework vllm), diff OTHER_DIR DIR and export
                                              and report (each when `cutrace --help` lists it;
                                              both with -o into a scratch directory) exit with a
                                              status docs/cli.md calls success and print
                                              something; no trace file of either directory
                                              changes, and nothing is added but the names
                                              cache `sites` keeps beside a trace
                                              (<trace>.symbols, docs/stacks.md)
    check_trace.py ipc-facts DIR FACTS        every ipc_export / ipc_open fact's handle is
                                              exported / opened in its pid's trace; at least
                                              one handle exported and opened, by other pids
    check_trace.py nccl-mem DIR FACTS         every nccl_mem_alloc fact is an ncclMemAlloc
                                              allocation (ptr, size) ended by ncclMemFree
    check_trace.py pinned DIR FACTS           every pinned fact is a host allocation (ptr, size)
    check_trace.py graph DIR MODE             some trace has a successful cudaStreamBeginCapture*
                                              in MODE (global, thread_local, relaxed), a captured
                                              successful ncclAllReduce after it, and a
                                              cudaGraphLaunch*

Prints one line (the detail for run.sh's table) and exits 0 when the check
holds, 1 when it does not, 2 when it cannot be made (no traces, a bad file,
a usage error: the usage then goes to standard error).
"""
import glob
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import urllib.parse

MIB = 1 << 20
# The timeline's categories that are this GPU's memory (docs/cli.md, timeline).
TRACED_CATEGORIES = ("nccl", "ipc_exported", "vmm", "runtime", "managed")


class CheckError(Exception):
    """The check cannot be made (exit 2)."""


def traces(directory):
    """DIR's traces: its own *.db, or those of its one run (`cutrace run -o DIR`
    writes each run to a directory of its own, DIR/run-..., with a manifest.json)."""
    files = sorted(glob.glob(os.path.join(directory, "*.db")))
    runs = glob.glob(os.path.join(directory, "run-*", "manifest.json"))
    if not files and len(runs) == 1:
        files = sorted(glob.glob(os.path.join(os.path.dirname(runs[0]), "*.db")))
    if not files:
        raise CheckError(f"no traces in {directory}")
    return files


def connect(path):
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        return sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise CheckError(f"{path}: {e}") from e


def query(path, sql, params=(), db=None):
    """SQL's rows, on DB (a connection to PATH) or on a connection of its own."""
    own = db is None
    if own:
        db = connect(path)
    try:
        return db.execute(sql, params).fetchall()
    except sqlite3.Error as e:
        raise CheckError(f"{os.path.basename(path)}: {e}") from e
    finally:
        if own:
            db.close()


def check_apis(directory, patterns):
    files = traces(directory)
    missing = []
    for pattern in patterns:
        found = sum(query(f, "SELECT count(*) FROM calls WHERE api LIKE ? AND result = 0",
                          (pattern,))[0][0] for f in files)
        if found == 0:
            missing.append(pattern)
    if missing:
        return False, f"missing: {', '.join(missing)}"
    return True, f"all {len(patterns)} present in {len(files)} trace(s)"


def check_count(directory, minimum, sql):
    files = traces(directory)
    total = sum((query(f, sql)[0][0] or 0) for f in files)
    return total >= minimum, f"{total} (at least {minimum} expected)"


def check_ipc(directory):
    files = traces(directory)
    exported, opened = {}, []
    for f in files:
        for api, handle in query(f, "SELECT api, handle_hex FROM ipc WHERE result = 0"):
            if api.startswith("cudaIpcGetMemHandle") or api.startswith("cuIpcGetMemHandle"):
                exported.setdefault(handle, set()).add(f)
            else:
                opened.append((handle, f))
    if not opened:
        return False, "no successful cudaIpcOpenMemHandle in any trace"
    joined = sum(1 for handle, f in opened if exported.get(handle, set()) - {f})
    ok = joined == len(opened)
    return ok, f"{joined} of {len(opened)} opened handle(s) exported by another process"


def live_from_views(files_by_key, key, pid, seq, t_ns, ended):
    """GPU memory live on GPU `key` at a query: the allocations views of every
    process on it (in the querying process by effect order, in the others by time;
    a process that exited before, `ended` {pid: its last event's t_ns}, holds none)."""
    total = 0
    for path, path_pid in files_by_key.get(key, []):
        if path_pid != pid and path_pid in ended and ended[path_pid] < t_ns:
            continue
        ordinals = [row[0] for row in query(path, "SELECT device FROM devices WHERE uuid = ?",
                                            (key,))]
        if not ordinals:
            continue
        marks = ",".join("?" * len(ordinals))
        if path_pid == pid:
            # replayed in effect order, as docs/schema.md says (the query's own: 2 * seq)
            sql = (f"SELECT sum(size) FROM allocations, (SELECT effect_order AS at FROM calls"
                   f" WHERE seq = ?) WHERE kind IN ('device', 'managed', 'vmm')"
                   f" AND device IN ({marks}) AND effect_order < at"
                   f" AND (free_effect_order IS NULL OR free_effect_order > at)")
            params = (seq, *ordinals)
        else:
            sql = (f"SELECT sum(size) FROM allocations WHERE kind IN ('device', 'managed', 'vmm')"
                   f" AND device IN ({marks}) AND t_ns <= ?"
                   f" AND (free_t_ns IS NULL OR free_t_ns > ?)")
            params = (*ordinals, t_ns, t_ns)
        total += query(path, sql, params)[0][0] or 0
    return total


def check_timeline(cutrace, directory, lo_mib, hi_mib):
    files = traces(directory)
    run = subprocess.run([cutrace, "timeline", "--json", directory], capture_output=True,
                         text=True, check=False)
    if run.returncode != 0:
        raise CheckError(f"cutrace timeline exited {run.returncode}: {run.stderr.strip()}")
    report = json.loads(run.stdout)
    files_by_key = {}
    for f in files:
        pid = query(f, "SELECT pid FROM process")[0][0]
        for (uuid,) in query(f, "SELECT uuid FROM devices WHERE uuid IS NOT NULL"):
            files_by_key.setdefault(uuid, []).append((f, pid))

    problems, unexplained, count, no_uuid = [], [], 0, set()
    for gpu in report["gpus"]:
        exited = {p["pid"] for p in gpu.get("processes", []) if p.get("exited")}
        ended = {m["pid"]: m["t_ns"] for m in gpu["milestones"]
                 if m["kind"] == "process_end" and m["pid"] in exited}
        for m in gpu["milestones"]:
            if m["kind"] != "measurement" or not m.get("measurement"):
                continue
            count += 1
            meas, traced = m["measurement"], m["traced_bytes"]
            where = f"pid {m['pid']} seq {m['seq']}"
            by_category = sum(m["live"].get(c, 0) for c in TRACED_CATEGORIES)
            if by_category != traced:
                problems.append(f"{where}: categories sum to {by_category}, traced {traced}")
            if traced + meas["unexplained_bytes"] != meas["used_bytes"]:
                problems.append(f"{where}: traced {traced} + unexplained "
                                f"{meas['unexplained_bytes']} != used {meas['used_bytes']}")
            if meas["total_bytes"] - meas["free_bytes"] != meas["used_bytes"]:
                problems.append(f"{where}: used is not total - free")
            if gpu.get("identified_by") != "uuid":
                no_uuid.add(gpu.get("key"))
            else:
                views = live_from_views(files_by_key, gpu["key"], m["pid"], m["seq"], m["t_ns"],
                                        ended)
                if views != traced:
                    problems.append(f"{where}: timeline traced {traced}, allocations views {views}")
            u = meas["unexplained_bytes"]
            unexplained.append(u)
            if not lo_mib * MIB <= u <= hi_mib * MIB:
                problems.append(f"{where} ({m['api']}): unexplained {u / MIB:.1f} MiB outside "
                                f"[{lo_mib}, {hi_mib}] MiB")
    if count == 0:
        return False, "no memory queries in the timeline"
    for key in sorted(str(k) for k in no_uuid):
        problems.insert(0, f"GPU {key}: no uuid to cross-check on")
    span = f"{min(unexplained) / MIB:.1f}..{max(unexplained) / MIB:.1f} MiB"
    if problems:
        return False, f"{count} queries, unexplained {span}: {shown(problems)}"
    return True, f"{count} queries on {len(report['gpus'])} GPU(s), unexplained {span}"


# ---- ground truth: the programs' facts files (tests/gpu: one JSON object per line) ----

MASK = (1 << 64) - 1
# cudaStreamCaptureMode (CUDA's driver_types.h, included by cuda_runtime_api.h).
CAPTURE_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}
GPU_KINDS = ("device", "managed", "vmm")
C10_CUDA = "libc10_cuda"
# `cutrace run`'s own closing line (analyzer/cmd/run.c), the one "cutrace:" line that is no warning.
RUN_CLOSING = re.compile(r"^cutrace: trace in .* \(\d+ files?(, plus \d+ from earlier runs)?\); "
                         r"next: cutrace summary .*$")


def u64(value):
    return value & MASK if value is not None else None


def mib(value):
    return f"{value / MIB:.1f}"


def shown(problems, limit=4):
    more = f"; and {len(problems) - limit} more" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


def load_facts(path, prog=None, event=None):
    """The facts of PATH in file order, each with its line number as "_line"."""
    facts = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CheckError(f"facts {path}: {e.strerror}") from e
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            fact = json.loads(line)
        except ValueError as e:
            raise CheckError(f"{path}:{number}: not JSON: {e}") from e
        if not isinstance(fact, dict):
            raise CheckError(f"{path}:{number}: not a JSON object")
        fact["_line"] = number
        facts.append(fact)
    return [f for f in facts if (prog is None or f.get("prog") == prog)
            and (event is None or f.get("event") == event)]


def need(fact, *keys):
    missing = [k for k in keys if k not in fact]
    if missing:
        raise CheckError(f"facts line {fact['_line']} ({fact.get('event')}): no "
                         f"{', '.join(missing)}")
    return [fact[k] for k in keys]


def traces_by_pid(directory):
    """pid -> its trace files, in start order (an exec keeps the pid)."""
    by_pid = {}
    for f in traces(directory):
        rows = query(f, "SELECT pid, start_mono_ns FROM process")
        if not rows:
            raise CheckError(f"{os.path.basename(f)}: no process row")
        by_pid.setdefault(rows[0][0], []).append((rows[0][1] or 0, f))
    return {pid: [f for _, f in sorted(files)] for pid, files in by_pid.items()}


class NoTrace(Exception):
    """A process of the facts left no trace in DIR: the check fails (exit 1)."""


def files_of(by_pid, pid, what):
    files = by_pid.get(pid)
    if not files:
        raise NoTrace(f"{what}: pid {pid} of the facts has no trace "
                      f"(traced pids: {', '.join(map(str, sorted(by_pid))) or 'none'})")
    return files


def meminfo_rows(files):
    rows = []
    for f in files:
        for seq, free, total, order in query(
                f, "SELECT m.seq, m.free_bytes, m.total_bytes, c.effect_order FROM meminfo m"
                   " JOIN calls c ON c.seq = m.seq ORDER BY m.seq"):
            rows.append((f, seq, u64(free), u64(total), order))
    return rows


def match_queries(facts, files):
    """Each mem_get_info fact with the meminfo row of its process that reports the same
    free/total, in order: [(fact, row)] and the facts that found none."""
    rows, j, matched, unmatched = meminfo_rows(files), 0, [], []
    for fact in facts:
        free, total = need(fact, "free", "total")
        k = j
        while k < len(rows) and (rows[k][2], rows[k][3]) != (u64(free), u64(total)):
            k += 1
        if k == len(rows):
            after = f" after seq {rows[j - 1][1]}" if j else ""
            unmatched.append(f"pid {fact['pid']} line {fact['_line']}: no meminfo row with free "
                             f"{free} total {total}{after}")
            continue
        matched.append((fact, rows[k]))
        j = k + 1
    return matched, unmatched


class Trace:
    """What the ground-truth checks read of one trace file, read once."""

    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        self.db = connect(path)
        self.allocations = [
            dict(seq=r[0], api=r[1], kind=r[2], module=r[3] or "", ptr=u64(r[4]), size=r[5],
                 order=r[6], free_order=r[7], free_api=r[8], device=r[9])
            for r in self.query("SELECT seq, api, kind, module, ptr, size, effect_order,"
                                " free_effect_order, free_api, device FROM allocations"
                                " ORDER BY effect_order, seq")]
        self._calls, self._stacks = None, {}

    def query(self, sql, params=()):
        return query(self.path, sql, params, self.db)

    def live(self, at, keep):
        """The allocations live when effect order AT took effect, for which keep(row)."""
        return [a for a in self.allocations if a["order"] is not None and a["order"] < at
                and (a["free_order"] is None or a["free_order"] > at) and keep(a)]

    def call(self, seq):
        """(stack_id, parent_seq) of call SEQ; the calls with either, read at once."""
        if self._calls is None:
            self._calls = {r[0]: (r[1], r[2]) for r in self.query(
                "SELECT seq, stack_id, parent_seq FROM calls WHERE stack_id != 0"
                " OR parent_seq != 0")}
        return self._calls.get(seq, (0, 0))

    def stack_id(self, seq):
        """The call's stack; a call made inside another traced call has that call's."""
        seen = set()
        while seq and seq not in seen:
            seen.add(seq)
            stack_id, parent = self.call(seq)
            if stack_id:
                return stack_id
            seq = parent
        return 0

    def frames(self, seq):
        stack_id = self.stack_id(seq)
        if stack_id not in self._stacks:
            self._stacks[stack_id] = self.query(
                "SELECT kind, module, symbol, file FROM stacks WHERE stack_id = ?"
                " ORDER BY depth", (stack_id,)) if stack_id else []
        return self._stacks[stack_id]

    def has_native(self, seq, name):
        """Whether the call's stack has a native frame in a module whose file name has NAME."""
        return any(kind == "native" and module and name in os.path.basename(module)
                   for kind, module, _, _ in self.frames(seq))


def nccl_internal(row):
    return "libnccl" in row["module"] and row["api"] != "ncclMemAlloc"


def matched_queries(directory, facts, what, problems):
    """Each memory-query fact with the trace row it matched, pid by pid in the
    facts' order: (pid, fact, Trace, seq, effect order). Facts that match no
    row are appended to problems."""
    by_pid, cache, pids = traces_by_pid(directory), {}, []
    for fact in facts:
        if fact.get("pid") not in pids:
            pids.append(fact.get("pid"))
    for pid in pids:
        mine = [f for f in facts if f.get("pid") == pid]
        matched, unmatched = match_queries(mine, files_of(by_pid, pid, what))
        problems += unmatched
        for fact, (path, seq, _, _, order) in matched:
            trace = cache[path] = cache.get(path) or Trace(path)
            yield pid, fact, trace, seq, order


def check_holdings(directory, facts_path):
    facts = load_facts(facts_path, "cuda", "mem_get_info")
    if not facts:
        return False, "no mem_get_info facts of prog cuda"
    problems, count, peak = [], 0, 0
    for pid, fact, trace, seq, order in matched_queries(directory, facts, "holdings", problems):
        held, host_held = need(fact, "held", "host_held")
        live = trace.live(order, lambda a: not nccl_internal(a))
        device = sum(a["size"] for a in live if a["kind"] in GPU_KINDS)
        host = sum(a["size"] for a in live if a["kind"] == "host")
        count += 1
        peak = max(peak, device)
        if device != held:
            problems.append(f"pid {pid} seq {seq}: held {held}, traced {device}")
        if host != host_held:
            problems.append(f"pid {pid} seq {seq}: host_held {host_held}, traced host {host}")
    if problems:
        return False, f"{count} of {len(facts)} queries matched: {shown(problems)}"
    return True, f"{count} queries, held == traced at each (max {mib(peak)} MiB)"


def check_reserved(directory, facts_path):
    facts = load_facts(facts_path, "torch", "mem_get_info")
    if not facts:
        return False, "no mem_get_info facts of prog torch"
    problems, count, peak, segments_checked = [], 0, 0, 0
    for pid, fact, trace, seq, order in matched_queries(directory, facts, "reserved", problems):
        (reserved,) = need(fact, "reserved")
        live = trace.live(order, lambda a: a["kind"] in ("device", "vmm")
                          and trace.has_native(a["seq"], C10_CUDA))
        traced = sum(a["size"] for a in live)
        count += 1
        peak = max(peak, traced)
        if traced != reserved:
            problems.append(f"pid {pid} seq {seq}: reserved {reserved}, traced "
                            f"{traced} under libc10_cuda")
        if fact.get("allocator") == "default":
            (segments,) = need(fact, "segments")
            rows = sum(1 for a in live if a["api"] == "cudaMalloc")
            segments_checked += 1
            if rows != segments:
                problems.append(f"pid {pid} seq {seq}: {segments} segments, {rows} live "
                                f"cudaMalloc rows")
    if problems:
        return False, f"{count} of {len(facts)} queries matched: {shown(problems)}"
    return True, (f"{count} queries, reserved == traced at each (max {mib(peak)} MiB), "
                  f"segments == cudaMalloc rows at {segments_checked}")


def timeline_report(cutrace, directory):
    run = subprocess.run([cutrace, "timeline", "--json", directory], capture_output=True,
                         text=True, check=False)
    if run.returncode != 0:
        raise CheckError(f"cutrace timeline exited {run.returncode}: {run.stderr.strip()}")
    return json.loads(run.stdout)


def check_context(cutrace, directory, lo_mib, hi_mib):
    """Unexplained memory at each process's first query is its CUDA context, and
    the contexts of the other processes alive on that GPU then (a spawned child's
    first query also sees its parent's): the band is per context, the unexplained
    bytes divided by the processes whose milestones span that moment."""
    report = timeline_report(cutrace, directory)
    per, spans = {}, {}
    for gpu in report["gpus"]:
        for m in gpu["milestones"]:
            span = spans.setdefault((gpu["key"], m["pid"]), [m["t_ns"], m["t_ns"]])
            span[0], span[1] = min(span[0], m["t_ns"]), max(span[1], m["t_ns"])
            if m["kind"] == "measurement" and m.get("measurement"):
                per.setdefault((gpu["key"], m["pid"]), []).append(
                    (m["t_ns"], m["seq"], m["measurement"]["unexplained_bytes"]))
    if not per:
        return False, "no memory queries in the timeline"
    parts, problems = [], []
    for (key, pid), queries in sorted(per.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        queries.sort()
        values = [u for _, _, u in queries]
        t0, context = queries[0][0], values[0]
        alive = sum(1 for (k, _), (lo, hi) in spans.items() if k == key and lo <= t0 <= hi)
        each = context / max(alive, 1)
        label = f"pid {pid}" if len({k for k, _ in per}) == 1 else f"pid {pid} on {key}"
        shared = f" ({alive} contexts: {mib(each)} MiB each)" if alive > 1 else ""
        parts.append(f"{label}: context {mib(context)} MiB{shared}, spread "
                     f"{mib(max(values) - min(values))} MiB over {len(values)}")
        if not lo_mib * MIB <= each <= hi_mib * MIB:
            problems.append(f"{label} seq {queries[0][1]}: context {mib(each)} MiB"
                            f"{' each' if alive > 1 else ''} outside [{lo_mib:g}, {hi_mib:g}] MiB")
    detail = "; ".join(parts)
    if problems:
        return False, f"{shown(problems)} ({detail})"
    return True, detail


def meta(path):
    return dict(query(path, "SELECT key, value FROM meta"))


def check_ends(directory):
    files = traces(directory)
    problems = []
    for f in files:
        m, name = meta(f), os.path.basename(f)
        if m.get("end_state") != "exit":
            note = f" ({m['end_note']})" if m.get("end_note") else ""
            problems.append(f"{name}: end_state {m.get('end_state')}{note}")
        if m.get("writer_error"):
            problems.append(f"{name}: writer_error {m['writer_error']}")
        for key in ("recovered_records", "dropped_records"):
            if key in m and str(m[key]) not in ("", "0"):
                problems.append(f"{name}: {key} {m[key]}")
    if problems:
        return False, f"{len(problems)} problem(s) in {len(files)} trace(s): {shown(problems)}"
    return True, f"{len(files)} trace(s) ended exit, no writer error, nothing recovered or dropped"


def check_warnings(paths):
    found = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise CheckError(f"{path}: {e.strerror}") from e
        found += [(path, line) for line in lines
                  if line.startswith("cutrace:") and not RUN_CLOSING.match(line)]
    if found:
        first = "; ".join(f"{os.path.basename(p)}: {line[:160]}" for p, line in found[:3])
        return False, f"{len(found)} warning(s) in {len(paths)} file(s): {first}"
    return True, f"none in {len(paths)} file(s)"


# Calls that ask about the machine without using a device (the tracer fills `devices` after the
# program's first successful call on one): a trace with only these has none to check.
NO_DEVICE_USE = {"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cudaGetDeviceCount",
                 "cudaRuntimeGetVersion", "cudaDriverGetVersion", "ncclGetVersion",
                 "cuGetProcAddress", "cuGetProcAddress_v2", "cudaGetDriverEntryPoint",
                 "cudaGetDriverEntryPointByVersion"}


def check_devices(directory):
    files = traces(directory)
    problems, named, checked = [], {}, 0
    for f in files:
        name = os.path.basename(f)
        layers = {layer for (layer,) in query(f, "SELECT DISTINCT layer FROM calls")}
        used = [api for (api,) in query(f, "SELECT DISTINCT api FROM calls ORDER BY api")
                if api not in NO_DEVICE_USE]
        if not layers & {"runtime", "driver", "nccl"} or not used:
            continue
        checked += 1
        proc = query(f, "SELECT cuda_runtime_version, cuda_driver_version, nccl_version"
                        " FROM process")
        runtime, driver, nccl = proc[0] if proc else (None, None, None)
        if not runtime:
            problems.append(f"{name}: no cuda_runtime_version")
        if not driver:
            problems.append(f"{name}: no cuda_driver_version")
        if "nccl" in layers and not nccl:
            problems.append(f"{name}: NCCL calls but no nccl_version")
        devices = query(f, "SELECT device, uuid, name, total_bytes FROM devices")
        if not devices:
            problems.append(f"{name}: no devices row (calls {', '.join(used[:4])}"
                            f"{', ...' if len(used) > 4 else ''})")
        for device, uuid, dev_name, total in devices:
            if not (uuid or "").startswith("GPU-"):
                problems.append(f"{name}: device {device} uuid {uuid!r}")
            if not dev_name:
                problems.append(f"{name}: device {device} has no name")
            if not total or total <= 0:
                problems.append(f"{name}: device {device} total_bytes {total}")
            versions = f"runtime {runtime}, driver {driver}" + (f", nccl {nccl}" if nccl else "")
            named.setdefault((dev_name, total, (uuid or "")[:12]), set()).add(versions)
    if checked == 0:
        return False, "no trace called CUDA"
    listed = "; ".join(f"{n} {mib(t or 0)} MiB {u} ({' / '.join(sorted(v))})"
                       for (n, t, u), v in sorted(named.items(), key=str))
    if problems:
        return False, f"{shown(problems)} [{listed}]"
    return True, f"{checked} trace(s): {listed}"


def tensor_fact(facts_path, name):
    tensors = [f for f in load_facts(facts_path, event="tensor") if f.get("name") == name]
    if not tensors:
        raise CheckError(f"no tensor fact named {name}")
    fact = tensors[-1]
    need(fact, "pid", "ptr", "size")
    return fact, load_facts(facts_path)


def fact_moment(facts, fact, files):
    """The effect order (in the tensor's trace) of the first memory query its program made after
    writing the tensor fact, when one matched: the tensor was made before it."""
    pid = fact["pid"]
    queries = [f for f in facts if f.get("pid") == pid and f.get("event") == "mem_get_info"]
    matched, _ = match_queries(queries, files)
    for q, row in matched:
        if q["_line"] > fact["_line"]:
            return row[0], row[4]
    return None, None


def maps_of(path):
    """Successful cuMemMap calls of handles from successful cuMemCreate, and the unmaps."""
    created = {u64(h) for (h,) in query(path, "SELECT ptr FROM calls WHERE api = 'cuMemCreate'"
                                              " AND result = 0")}
    events = []
    for seq, api, ptr, size, handle, order in query(
            path, "SELECT seq, api, ptr, size, arg0, effect_order FROM calls"
                  " WHERE api IN ('cuMemMap', 'cuMemUnmap') AND result = 0 ORDER BY effect_order"):
        if api == "cuMemMap" and u64(handle) not in created:
            continue
        events.append((order, seq, api, u64(ptr), size, u64(handle)))
    return events


def covered(intervals, lo, hi):
    at = lo
    for start, end in sorted(intervals):
        if start > at:
            break
        at = max(at, end)
        if at >= hi:
            return True
    return at >= hi


def check_vmm_cover(directory, facts_path, name):
    fact, _ = tensor_fact(facts_path, name)
    ptr, size = u64(fact["ptr"]), fact["size"]
    files = files_of(traces_by_pid(directory), fact["pid"], f"tensor {name}")
    lo, hi = ptr, ptr + size
    where, moment = None, None
    for path in files:
        mapped = {}
        for order, seq, api, va, length, handle in maps_of(path):
            if api == "cuMemUnmap":
                for key in [k for k in mapped if k[0] < va + length and va < k[1]]:
                    del mapped[key]
                continue
            mapped[(va, va + length)] = handle
            if va < hi and lo < va + length and covered(mapped, lo, hi):
                where, moment = path, seq
                pages = sum(1 for s, e in mapped if s < hi and lo < e)
                break
        if where:
            break
    big = []
    for path in files:
        big += [(os.path.basename(path), s, n) for s, n in query(
            path, "SELECT seq, size FROM allocations WHERE kind = 'device' AND"
                  " api LIKE 'cudaMalloc%' AND size >= ?", (size,))]
    problems = []
    if not where:
        problems.append(f"{name} [{lo:#x}, +{mib(size)} MiB) never covered by mapped "
                        f"cuMemCreate handles")
    if big:
        problems.append(f"{len(big)} cudaMalloc of at least {mib(size)} MiB (seq {big[0][1]}, "
                        f"{mib(big[0][2])} MiB)")
    if problems:
        return False, "; ".join(problems)
    return True, (f"{name} ({mib(size)} MiB) covered by {pages} mapped cuMemCreate range(s) at "
                  f"seq {moment}; no cudaMalloc that large")


def check_frames(directory, facts_path, name):
    fact, facts = tensor_fact(facts_path, name)
    function, file_name = need(fact, "function", "file")
    ptr, size = u64(fact["ptr"]), fact["size"]
    files = files_of(traces_by_pid(directory), fact["pid"], f"tensor {name}")
    moment_path, moment = fact_moment(facts, fact, files)
    found = None
    for path in files:
        before = (lambda order: moment is None or path != moment_path or order < moment)
        trace = Trace(path)
        segments = [a for a in trace.allocations if a["kind"] == "device"
                    and a["api"].startswith("cudaMalloc") and a["ptr"] <= ptr
                    and ptr + size <= a["ptr"] + a["size"] and before(a["order"])]
        if segments:
            found = (trace, segments[-1]["seq"], f"{segments[-1]['api']} seq {segments[-1]['seq']}")
            continue
        maps = [(order, seq, handle) for order, seq, api, va, length, handle in maps_of(path)
                if api == "cuMemMap" and va <= ptr < va + length and before(order)]
        if maps:
            order, map_seq, handle = maps[-1]
            creates = [(seq, o) for seq, o, h in query(
                path, "SELECT seq, effect_order, ptr FROM calls WHERE api = 'cuMemCreate'"
                      " AND result = 0 ORDER BY effect_order") if u64(h) == handle and o < order]
            if creates:
                found = (trace, creates[-1][0], f"cuMemCreate seq {creates[-1][0]} (mapped at "
                                                f"seq {map_seq})")
    if not found:
        return False, f"no cudaMalloc or mapped cuMemCreate holds tensor {name} at {ptr:#x}"
    trace, seq, what = found
    frames = trace.frames(seq)
    python = [(s, f) for k, _, s, f in frames if k == "python"]
    problems = []
    if not any(s == function and (f or "").endswith(file_name) for s, f in python):
        inner = f"{python[0][0]} ({os.path.basename(python[0][1] or '')})" if python else "none"
        problems.append(f"no python frame {function} in {file_name} (innermost: {inner})")
    if not trace.has_native(seq, C10_CUDA):
        problems.append("no native frame in libc10_cuda")
    if problems:
        return False, f"{what}: {'; '.join(problems)}"
    return True, f"{what}: python frame {function} ({file_name}), native frame in libc10_cuda"


def file_hashes(directories):
    hashes = {}
    for directory in directories:
        for root, _, names in os.walk(directory):
            for n in names:
                path = os.path.join(root, n)
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb") as f:
                        hashes[path] = hashlib.sha256(f.read()).hexdigest()
    return hashes


# What a report may write (docs/stacks.md, "Where names are kept"): the names
# cache beside a trace, <trace>.symbols; a trace itself never changes.
NAMES_CACHE = ".symbols"


def is_names_cache(path):
    """A <trace>.symbols file beside its <trace>.db."""
    return path.endswith(NAMES_CACHE) and os.path.exists(path[:-len(NAMES_CACHE)] + ".db")


def check_reports(cutrace, directory, other):
    traces(directory)
    traces(other)
    help_run = subprocess.run([cutrace, "--help"], capture_output=True, text=True, check=False)
    commands = re.findall(r"^  (\w+)  ", help_run.stdout, re.M)
    runs = [("summary", [directory]), ("timeline", [directory]), ("collectives", [directory]),
            ("sites", [directory]), ("budget", ["--framework", "vllm", "--json", directory]),
            ("diff", [other, directory])]
    # The pictures write a file (-o), outside both runs: what they print is not the point.
    scratch = tempfile.mkdtemp(prefix="check-reports-")
    written = {}
    for command, name in (("export", "trace.pftrace"), ("report", "report.html")):
        if command in commands:
            written[command] = os.path.join(scratch, name)
            runs.append((command, [directory, "-o", written[command]]))
    before = file_hashes([directory, other])
    results, problems = [], []
    for command, args in runs:
        run = subprocess.run([cutrace, command, *args], capture_output=True, text=True,
                             check=False, timeout=300)
        status = f"{command} {run.returncode}"
        ok = run.returncode == 0
        if command == "budget" and run.returncode == 1 and run.stdout.strip():
            # docs/cli.md, budget: 1 also "when no rank could be analysed", with the report
            # on stdout (bad input prints nothing there): not a server's trace.
            try:
                analysed = json.loads(run.stdout).get("ranks_analysed")
            except ValueError:
                analysed = None
            if analysed == 0:
                ok, status = True, "budget 1 (documented: no rank to analyse)"
        if not ok:
            err = run.stderr.strip().splitlines()
            problems.append(f"{command} exited {run.returncode}" + (f": {err[-1][:120]}" if err
                                                                   else ""))
        elif command in written:
            if not os.path.isfile(written[command]) or os.path.getsize(written[command]) == 0:
                problems.append(f"{command} wrote nothing to {written[command]}")
        elif not run.stdout.strip():
            problems.append(f"{command} printed nothing")
        results.append(status)
    shutil.rmtree(scratch, ignore_errors=True)
    for command in ("export", "report"):
        if command not in commands:
            results.append(f"{command}: not in this build")
    after = file_hashes([directory, other])
    changed, named = [], 0
    for path in sorted(set(before) | set(after)):
        if before.get(path) == after.get(path):
            continue
        name = os.path.basename(path)
        if is_names_cache(path) and path in after:
            named += 1
        elif path not in after or path not in before:
            changed.append(f"{name} {'removed' if path not in after else 'added'}")
        else:
            changed.append(f"{name} changed")
    if changed:
        problems.append(f"trace files changed: {shown(changed, 3)}")
    detail = ", ".join(results)
    if problems:
        return False, f"{shown(problems)} ({detail})"
    stored = (f"; trace files unchanged, {named} names cache(s) written beside them (sites, "
              "as documented)" if named else "; trace files unchanged")
    return True, f"{detail}{stored}"


def check_ipc_facts(directory, facts_path):
    facts = load_facts(facts_path)
    exports = [f for f in facts if f.get("event") == "ipc_export"]
    opens = [f for f in facts if f.get("event") == "ipc_open"]
    by_pid = traces_by_pid(directory)
    problems, cache = [], {}

    def traced(pid, handle, opened):
        if pid not in cache:
            cache[pid] = [(api, h) for path in files_of(by_pid, pid, "ipc")
                          for api, h in query(path, "SELECT api, handle_hex FROM ipc"
                                                    " WHERE result = 0")]
        return any(h == handle and (("Open" in api) == opened) for api, h in cache[pid])

    for fact in exports + opens:
        pid, handle = need(fact, "pid", "handle_hex")
        opened = fact["event"] == "ipc_open"
        if not traced(pid, handle.lower(), opened):
            problems.append(f"pid {pid} line {fact['_line']}: handle {handle[:16]}... not "
                            f"{'opened' if opened else 'exported'} in its trace")
    pairs = [(e, o) for e in exports for o in opens
             if e["handle_hex"].lower() == o["handle_hex"].lower()]
    problems += [f"handle {e['handle_hex'][:16]}... exported and opened by pid {e['pid']}"
                 for e, o in pairs if e["pid"] == o["pid"]]
    if not pairs:
        problems.append(f"no handle both exported and opened ({len(exports)} export(s), "
                        f"{len(opens)} open(s))")
    if problems:
        return False, shown(problems)
    return True, (f"{len(exports)} export(s), {len(opens)} open(s) traced; {len(pairs)} pair(s) "
                  f"across {len({(e['pid'], o['pid']) for e, o in pairs})} process pair(s)")


def check_allocation_facts(directory, facts_path, event, what, match):
    facts = load_facts(facts_path, event=event)
    if not facts:
        return False, f"no {event} facts"
    by_pid = traces_by_pid(directory)
    problems, cache, total = [], {}, 0
    for fact in facts:
        pid, ptr, size = need(fact, "pid", "ptr", "size")
        if pid not in cache:
            cache[pid] = [a for path in files_of(by_pid, pid, event)
                          for a in Trace(path).allocations]
        rows = [a for a in cache[pid] if a["ptr"] == u64(ptr) and a["size"] == size and match(a)]
        if not rows:
            near = [a for a in cache[pid] if a["ptr"] == u64(ptr)]
            seen = (f" (at that ptr: {near[-1]['api']} {near[-1]['kind']} {near[-1]['size']})"
                    if near else "")
            problems.append(f"pid {pid} line {fact['_line']}: no {what} {ptr:#x} of {size}{seen}")
            continue
        total += size
        if event == "nccl_mem_alloc" and not any(a["free_api"] == "ncclMemFree" for a in rows):
            problems.append(f"pid {pid} {ptr:#x}: ended by {rows[-1]['free_api']}, "
                            f"not ncclMemFree")
    if problems:
        return False, shown(problems)
    ended = ", each ended by ncclMemFree" if event == "nccl_mem_alloc" else ""
    return True, f"{len(facts)} {event} fact(s), {mib(total)} MiB, each a traced {what}{ended}"


def check_graph(directory, mode):
    if mode not in CAPTURE_MODES:
        raise CheckError(f"mode {mode}: not one of {', '.join(CAPTURE_MODES)}")
    value = CAPTURE_MODES[mode]
    seen = []
    for path in traces(directory):
        name = os.path.basename(path)
        captures = query(path, "SELECT seq, flags FROM calls WHERE api LIKE"
                               " 'cudaStreamBeginCapture%' AND result = 0 ORDER BY seq")
        modes = sorted({flags for _, flags in captures})
        first = [seq for seq, flags in captures if flags == value]
        if not first:
            seen.append(f"{name}: capture modes {modes or 'none'}")
            continue
        reduces = query(path, "SELECT seq FROM collectives WHERE op = 'ncclAllReduce' AND"
                              " captured = 1 AND result = 0 AND seq > ? ORDER BY seq", (first[0],))
        launches = query(path, "SELECT seq FROM calls WHERE api LIKE 'cudaGraphLaunch%' AND"
                               " result = 0 ORDER BY seq")
        if reduces and launches:
            return True, (f"{name}: {mode} capture seq {first[0]}, captured ncclAllReduce seq "
                          f"{reduces[0][0]}, {len(launches)} cudaGraphLaunch")
        seen.append(f"{name}: {mode} capture seq {first[0]}, {len(reduces)} captured "
                    f"ncclAllReduce after it, {len(launches)} cudaGraphLaunch")
    return False, f"no trace has all three: {shown(seen, 3)}"


# name: (number of arguments, or (minimum,), the check)
COMMANDS = {
    "apis": ((2,), lambda a: check_apis(a[0], a[1:])),
    "count": (3, lambda a: check_count(a[0], int(a[1]), a[2])),
    "ipc": (1, lambda a: check_ipc(a[0])),
    "timeline": (4, lambda a: check_timeline(a[0], a[1], float(a[2]), float(a[3]))),
    "holdings": (2, lambda a: check_holdings(a[0], a[1])),
    "reserved": (2, lambda a: check_reserved(a[0], a[1])),
    "context": (4, lambda a: check_context(a[0], a[1], float(a[2]), float(a[3]))),
    "ends": (1, lambda a: check_ends(a[0])),
    "warnings": ((1,), check_warnings),
    "devices": (1, lambda a: check_devices(a[0])),
    "vmm-cover": (3, lambda a: check_vmm_cover(a[0], a[1], a[2])),
    "frames": (3, lambda a: check_frames(a[0], a[1], a[2])),
    "reports": (3, lambda a: check_reports(a[0], a[1], a[2])),
    "ipc-facts": (2, lambda a: check_ipc_facts(a[0], a[1])),
    "nccl-mem": (2, lambda a: check_allocation_facts(
        a[0], a[1], "nccl_mem_alloc", "ncclMemAlloc allocation",
        lambda row: row["api"] == "ncclMemAlloc")),
    "pinned": (2, lambda a: check_allocation_facts(
        a[0], a[1], "pinned", "host allocation", lambda row: row["kind"] == "host")),
    "graph": (2, lambda a: check_graph(a[0], a[1])),
}


def main(argv):
    name, args = (argv[1], argv[2:]) if len(argv) > 1 else (None, [])
    arity, check = COMMANDS.get(name, (None, None))
    if check is None or (len(args) < arity[0] if isinstance(arity, tuple) else len(args) != arity):
        print(f"cannot check: usage: check_trace.py {name or 'NAME'} ...: see its usage on stderr")
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        return 2
    try:
        ok, detail = check(args)
    except CheckError as e:
        print(f"cannot check: {e}")
        return 2
    except NoTrace as e:
        print(e)
        return 1
    except subprocess.TimeoutExpired as e:
        print(f"cannot check: {' '.join(e.cmd)} ran past {e.timeout:g} s")
        return 2
    # a report, trace or facts file not as documented
    except (OSError, ValueError, KeyError, TypeError, sqlite3.Error) as e:
        print(f"cannot check: {type(e).__name__}: {e}")
        return 2
    print(detail)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
