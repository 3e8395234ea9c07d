#!/usr/bin/env python3
"""check_sql.py - make test's check that every query of docs/sql.md works.

    tests/docs/check_sql.py BUILD_DIR

Makes a real run on the fake GPU stack under `cutrace run` (the demo's
tensor-parallel server with its custom all-reduce, 4 ranks: weights, IPC
exports and opens, NCCL inits; tests/progs/tp_collectives, 4 ranks: many
collectives on split communicators; tests/progs/rt_sequence: failed calls),
packs the three runs' traces with `cutrace pack`, then runs each ```sql
block of docs/sql.md on the pack, read-only, with Python's sqlite3 and, when
it is installed, with the sqlite3 command users paste into. A query fails
when it errors, returns no row, or returns a row that is not plausible (the
checks below, per numbered section): a doc whose queries rot fails make test.
"""
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join(ROOT, "docs", "sql.md")
sys.dont_write_bytecode = True  # make test writes nothing into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from problems import Problems  # noqa: E402

problems = Problems("check-sql")
fail = problems.fail


def library(v):
    return isinstance(v, str) and v != "" and "/" not in v


# Per section number: (what every row must satisfy, what some row must).
CHECKS = {
    1: (lambda r: r["peak_mib"] > 0 and 0 <= r["size_mib"] <= r["peak_mib"] and library(r["library"]),
        lambda rows: max(sum(1 for x in rows if x["pid"] == r["pid"]) for r in rows) <= 5),
    2: (lambda r: r["bytes"] > 0 and r["allocations"] > 0 and r["kind"] not in ("ipc", "reserve"),
        lambda rows: any(r["library"] == "libnccl.so.2" for r in rows)),
    3: (lambda r: library(r["library"]) and 0 <= r["live_at_end_bytes"] <= r["allocated_bytes"]
        and r["processes"] >= 1,
        lambda rows: {"libnccl.so.2", "tp_server_sim"} <= {r["library"] for r in rows}),
    4: (lambda r: r["opens"] > 0 and r["exporter_pid"] != r["opener_pid"] and r["failed_opens"] == 0
        and r["exported_bytes"] > 0,
        lambda rows: len({r["exporter_pid"] for r in rows}) == 4),
    5: (lambda r: r["calls"] > 0 and r["second"] >= 0 and 0 <= r["rank"] < r["nranks"] and r["bytes"] >= 0,
        lambda rows: max(r["calls"] for r in rows) >= 20),
    6: (lambda r: r["result"] != 0 and r["calls"] > 0 and r["error"] is not None,
        lambda rows: any(r["error"] == "cudaErrorMemoryAllocation" for r in rows)),
    7: (lambda r: r["used_mib"] >= 0 and r["traced_by_process_mib"] >= 0,
        lambda rows: any(0 < r["traced_by_process_mib"] <= r["used_mib"] for r in rows)),
    8: (lambda r: r["calls"] > 0 and float(r["total_ms"]) >= 0 and float(r["max_us"]) >= float(r["mean_us"])
        and r["tracer_wait_ns"] >= 0,
        lambda rows: any(r["api"] == "cudaMalloc" for r in rows)),
    9: (lambda r: 1 <= r["ranks_traced"] <= r["nranks"] and r["min_calls_per_rank"] <= r["max_calls_per_rank"],
        lambda rows: any(r["ranks_traced"] == r["nranks"] == 4 and r["min_calls_per_rank"] > 0 for r in rows)),
    10: (lambda r: r["allocations"] > 0 and r["bytes"] > 0 and 0 <= r["never_freed"] <= r["allocations"],
         lambda rows: len({r["size_class"] for r in rows}) >= 3),
}


def queries():
    """[(number, title, sql)] of docs/sql.md: one ```sql block per '## N. title' section."""
    text = open(DOC).read()
    found = []
    for m in re.finditer(r"^## (\d+)\. (.*?)\n(.*?)(?=^## |\Z)", text, re.S | re.M):
        blocks = re.findall(r"^```sql\n(.*?)^```", m.group(3), re.S | re.M)
        if len(blocks) != 1:
            fail("section %s of docs/sql.md has %d sql blocks (one expected)" % (m.group(1), len(blocks)))
            continue
        found.append((int(m.group(1)), m.group(2), blocks[0]))
    all_blocks = len(re.findall(r"^```sql\n", text, re.M))
    if all_blocks != len(found):
        fail("docs/sql.md has %d sql blocks outside its numbered sections" % (all_blocks - len(found)))
    return found


def run(argv, env, what):
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("check-sql: %s failed (status %d): %s" % (what, r.returncode, r.stderr.strip()))
    return r


def make_run(build, tmp):
    """The pack of three runs made on the fake GPU stack; returns its path."""
    cutrace = os.path.join(build, "cutrace")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "fake"), CUTRACE_FAKE_GPUS="4",
               CUTRACE_FAKE_STATE=os.path.join(tmp, "gpu-state"))
    env.pop("CUTRACE_DIR", None)
    env.pop("CUTRACE_DISABLE", None)
    out = os.path.join(tmp, "trace")
    programs = [
        ([os.path.join(build, "examples", "tp_server_sim"), "--tp", "4", "--custom-ar"], "tp_server_sim", 1),
        ([os.path.join(build, "progs", "tp_collectives"), "4", "20"], "tp_collectives", 0),
        ([os.path.join(build, "progs", "rt_sequence"), os.path.join(tmp, "rt_sequence.expect")], "rt_sequence",
         3),
    ]
    for argv, name, status in programs:
        r = subprocess.run([cutrace, "run", "-o", out, "--"] + argv, env=env, capture_output=True, text=True)
        # each ends as it was written to: the custom all-reduce server with SGLang's "Not enough
        # memory" (1, as in the demo), rt_sequence with its number of failed steps
        if r.returncode != status or "cutrace: trace in" not in r.stderr:
            raise SystemExit("check-sql: cutrace run %s: status %d: %s" % (name, r.returncode, r.stderr.strip()))
    runs = sorted(os.path.join(out, d) for d in os.listdir(out))
    assert len(runs) == 3, runs
    pack = os.path.join(tmp, "run.cutrace")
    run([cutrace, "pack"] + runs + ["-o", pack], env, "cutrace pack")
    return pack


def check_rows(number, title, columns, rows):
    if not rows:
        fail("query %d (%s) returns no row" % (number, title))
        return
    every, some = CHECKS[number]
    for row in rows:
        r = dict(zip(columns, row))
        try:
            ok = every(r)
        except (KeyError, TypeError, ValueError) as e:
            ok = False
            fail("query %d (%s): row %r: %s: %s" % (number, title, r, type(e).__name__, e))
        if not ok:
            fail("query %d (%s): implausible row %r" % (number, title, r))
            return
    try:
        ok = some([dict(zip(columns, row)) for row in rows])
    except (KeyError, TypeError, ValueError) as e:
        ok = False
        fail("query %d (%s): %s: %s" % (number, title, type(e).__name__, e))
    if not ok:
        fail("query %d (%s): the rows miss what the run holds: %r" % (number, title, rows[:8]))


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    found = queries()
    numbers = [n for n, _, _ in found]
    if numbers != list(range(1, 11)):
        fail("docs/sql.md's sections are numbered %s, expected 1 to 10" % numbers)
    missing = set(numbers) - set(CHECKS)
    if missing:
        fail("no plausibility check for query %s: add one to CHECKS" % sorted(missing))
    cli = shutil.which("sqlite3")
    with tempfile.TemporaryDirectory(prefix="cutrace-sql-") as tmp:
        pack = make_run(build, tmp)
        before = hashlib.sha256(open(pack, "rb").read()).hexdigest()
        db = sqlite3.connect("file:%s?mode=ro" % pack, uri=True)
        for number, title, sql in found:
            if number not in CHECKS:
                continue
            try:
                cur = db.execute(sql)
                rows = cur.fetchall()
                columns = [d[0] for d in cur.description]
            except sqlite3.Error as e:
                fail("query %d (%s) fails: %s" % (number, title, e))
                continue
            check_rows(number, title, columns, rows)
            if cli:
                # as a user pastes it: the whole block on stdin, read-only
                r = subprocess.run([cli, "-bail", "-readonly", "-json", pack], input=sql, capture_output=True,
                                   text=True)
                if r.returncode != 0 or r.stderr.strip():
                    fail("sqlite3 %s < query %d: status %d: %s" % (os.path.basename(pack), number, r.returncode,
                                                                   r.stderr.strip()))
                elif len(json.loads(r.stdout or "[]")) != len(rows):
                    fail("sqlite3 gives query %d %d rows, Python's sqlite3 %d" % (number,
                         len(json.loads(r.stdout or "[]")), len(rows)))
            print("check-sql: %2d. %s: %d rows" % (number, title, len(rows)))
        db.close()
        if hashlib.sha256(open(pack, "rb").read()).hexdigest() != before:
            fail("the queries changed the pack")
    if not cli:
        print("check-sql: skipped: the sqlite3 command: not installed (Python's sqlite3 ran every query)")
    return problems.finish("docs/sql.md", "%d queries of docs/sql.md on a packed run%s"
                           % (len(found), ", also with sqlite3" if cli else ""))


if __name__ == "__main__":
    sys.exit(main())
