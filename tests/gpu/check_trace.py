"""check_trace.py - the trace checks of tests/gpu/run.sh, on a directory of cutrace traces.

Reads the trace files with Python's own sqlite3 module (read-only) and the
`cutrace timeline --json` report, so that the test needs no sqlite3 CLI.

    check_trace.py apis DIR PATTERN...        every pattern (SQL LIKE: ncclCommInit%) names an
                                              API with a successful call in some trace of DIR
    check_trace.py count DIR MIN SQL          the first column of SQL, summed over DIR's traces,
                                              is at least MIN
    check_trace.py ipc DIR                    every handle opened with cudaIpcOpenMemHandle was
                                              exported in another process's trace (at least one)
    check_trace.py timeline CUTRACE DIR LO_MIB HI_MIB
                                              at every memory query of `cutrace timeline --json`:
                                              traced live + unexplained = used, traced live is
                                              what the allocations views say was live then,
                                              and LO_MIB <= unexplained <= HI_MIB

Prints one line (the detail for run.sh's table) and exits 0 when the check
holds, 1 when it does not, 2 when it cannot be made (no traces, a bad file).
"""
import glob
import json
import os
import sqlite3
import subprocess
import sys
import urllib.parse

MIB = 1 << 20
# The timeline's categories that are this GPU's memory (docs/cli.md, timeline).
TRACED_CATEGORIES = ("nccl", "ipc_exported", "vmm", "runtime", "managed")


class CheckError(Exception):
    """The check cannot be made (exit 2)."""


def traces(directory):
    files = sorted(glob.glob(os.path.join(directory, "*.db")))
    if not files:
        raise CheckError(f"no traces in {directory}")
    return files


def connect(path):
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        return sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise CheckError(f"{path}: {e}") from e


def query(path, sql, params=()):
    db = connect(path)
    try:
        return db.execute(sql, params).fetchall()
    except sqlite3.Error as e:
        raise CheckError(f"{os.path.basename(path)}: {e}") from e
    finally:
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


def live_from_views(files_by_key, key, pid, seq, t_ns):
    """GPU memory live on GPU `key` at a query: the allocations views of every
    process on it (in the querying process by seq, in the others by time)."""
    total = 0
    for path, path_pid in files_by_key.get(key, []):
        ordinals = [row[0] for row in query(path, "SELECT device FROM devices WHERE uuid = ?",
                                            (key,))]
        if not ordinals:
            continue
        marks = ",".join("?" * len(ordinals))
        if path_pid == pid:
            sql = (f"SELECT sum(size) FROM allocations WHERE kind IN ('device', 'managed', 'vmm')"
                   f" AND device IN ({marks}) AND seq < ? AND (free_seq IS NULL OR free_seq > ?)")
            params = (*ordinals, seq, seq)
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

    problems, unexplained, count = [], [], 0
    for gpu in report["gpus"]:
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
            if gpu.get("identified_by") == "uuid":
                views = live_from_views(files_by_key, gpu["key"], m["pid"], m["seq"], m["t_ns"])
                if views != traced:
                    problems.append(f"{where}: timeline traced {traced}, allocations views {views}")
            u = meas["unexplained_bytes"]
            unexplained.append(u)
            if not lo_mib * MIB <= u <= hi_mib * MIB:
                problems.append(f"{where} ({m['api']}): unexplained {u / MIB:.1f} MiB outside "
                                f"[{lo_mib}, {hi_mib}] MiB")
    if count == 0:
        return False, "no memory queries in the timeline"
    span = f"{min(unexplained) / MIB:.1f}..{max(unexplained) / MIB:.1f} MiB"
    if problems:
        shown = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4
                                           else "")
        return False, f"{count} queries, unexplained {span}: {shown}"
    return True, f"{count} queries on {len(report['gpus'])} GPU(s), unexplained {span}"


def main(argv):
    usage = __doc__.split("\n\n")[2]
    try:
        if len(argv) >= 3 and argv[1] == "apis":
            ok, detail = check_apis(argv[2], argv[3:])
        elif len(argv) == 5 and argv[1] == "count":
            ok, detail = check_count(argv[2], int(argv[3]), argv[4])
        elif len(argv) == 3 and argv[1] == "ipc":
            ok, detail = check_ipc(argv[2])
        elif len(argv) == 6 and argv[1] == "timeline":
            ok, detail = check_timeline(argv[2], argv[3], float(argv[4]), float(argv[5]))
        else:
            print(usage, file=sys.stderr)
            return 2
    except CheckError as e:
        print(f"cannot check: {e}")
        return 2
    except (OSError, ValueError, KeyError, sqlite3.Error) as e:  # a report not as documented
        print(f"cannot check: {type(e).__name__}: {e}")
        return 2
    print(detail)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
