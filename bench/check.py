"""check.py - `make bench-check`: the shape of `make bench`'s output, on
whatever configuration it ran (the tiny one in `make test`).

    python3 bench/check.py TABLE_OUTPUT RESULTS_JSON

results.json must parse and hold every row of issue 19's table (the ids
below, the analyzer's at each size it was run at), each with a verdict
(ok, GAP, a writer-bound hot-path row, "-" where there is no target, n/a
where a tool is missing) and no FAILED one; every row must be a line of the
printed table, with its verdict; the table ends with its count of targets.
Exits 1 saying what is missing.
"""
import json
import sys

ROWS = (["hot_none", "hot_native32"] + [f"threads_{t}" for t in (1, 2, 4, 16)]
        + [f"py_{g}_{d}" for g in ("held", "released") for d in (10, 16, 30)]
        + ["writer", "bytes_per_event", "wait_1", "wait_16", "burst_100k", "first_call",
           "startup_8rank", "ltrace"])
REPORTS = ("scan", "summary", "collectives", "timeline", "budget", "diff", "sites")
VERDICTS = {"ok", "GAP", "writer-bound", "-", "n/a"}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench/check.py TABLE_OUTPUT RESULTS_JSON")
    with open(sys.argv[1], encoding="utf-8") as fh:
        table = fh.read().splitlines()
    try:
        with open(sys.argv[2], encoding="utf-8") as fh:
            res = json.load(fh)
    except (OSError, ValueError) as e:
        sys.exit(f"bench-check: results.json: {e}")
    errors = []
    rows = {r["id"]: r for r in res.get("rows", [])}
    sizes = res.get("configuration", {}).get("analyzer_sizes", [])
    if not sizes:
        errors.append("results.json gives no analyzer sizes")
    want = ROWS + [f"analyzer_{r}_{n}" for n in sizes for r in REPORTS]
    for rid in want:
        r = rows.get(rid)
        if r is None:
            errors.append(f"no row {rid}")
            continue
        if r["verdict"] not in VERDICTS:
            errors.append(f"row {rid}: verdict {r['verdict']!r}: {r['value']}")
        if not all(isinstance(r.get(k), str) and r[k] for k in ("what", "value", "target")):
            errors.append(f"row {rid}: an empty field")
        line = [t for t in table if t.startswith("  " + r["what"] + " ")]
        if not line or not line[0].rstrip().endswith(r["verdict"]):
            errors.append(f"row {rid} ({r['what']}): not in the printed table with its verdict")
    if rows.get("ltrace") and "not installed" not in rows["ltrace"]["value"] \
            and rows["ltrace"]["verdict"] == "n/a":
        errors.append("row ltrace: n/a without saying why")
    if not any(t.startswith("targets: ") for t in table):
        errors.append("the table has no count of targets")
    for e in errors:
        print("bench-check:", e)
    if errors:
        return 1
    print(f"bench-check: {len(want)} rows in the table and in results.json, each with its verdict")
    return 0


if __name__ == "__main__":
    sys.exit(main())
