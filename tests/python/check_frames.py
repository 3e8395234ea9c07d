"""check_frames.py - checks that every Python frame in a directory of cutrace
traces names a real function of an expected source file, at a line of that
function: the pyframes suite's check of tests/python/stress.py runs
(tests/integration/test_pyframes.c).

    python3.X check_frames.py TRACE_DIR SOURCE... [--min-traces N]

SOURCE: a source file path, or stdlib:NAME for that module's file in the
interpreter running this script (stdlib:threading). For each file, the
code objects of its compiled source give, per function name, the lines its
instructions are on (co_lines) and its first line; a frame of the stacks
view (kind 'python') passes when its file is one of the sources and its
line is one of its function's. A frame without names (code id 0: the
tracer could not name it that once) is counted, not failed: it claims
nothing. Every trace must have Python frames and say it read them without
the GIL (meta python_frames).

stdout: one line per trace and a total; exit status 1 on any failure.
"""
import importlib
import os
import sqlite3
import sys
import types


def lines_by_function(path):
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    lines = {}

    def walk(co):
        got = lines.setdefault(co.co_name, set())
        got.add(co.co_firstlineno)
        for _, _, line in co.co_lines():
            if line is not None:
                got.add(line)
        for const in co.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    walk(code)
    return lines


def main(argv):
    args = argv[1:]
    min_traces = 1
    if "--min-traces" in args:
        i = args.index("--min-traces")
        min_traces = int(args[i + 1])
        del args[i:i + 2]
    trace_dir, sources = args[0], args[1:]
    known = {}
    for src in sources:
        if src.startswith("stdlib:"):
            src = importlib.import_module(src[len("stdlib:"):]).__file__
        src = os.path.realpath(src)
        known[src] = lines_by_function(src)
    traces = sorted(n for n in os.listdir(trace_dir) if n.endswith(".db"))
    failures = []
    total = 0
    for name in traces:
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(trace_dir, name), uri=True)
        rows = db.execute("SELECT stack_id, depth, file, line, symbol FROM stacks"
                          " WHERE kind = 'python' ORDER BY stack_id, depth").fetchall()
        meta = db.execute("SELECT value FROM meta WHERE key = 'python_frames'").fetchall()
        calls = db.execute("SELECT count(*) FROM calls WHERE NOT nested AND api IN"
                           " ('cudaMalloc', 'cudaFree', 'cudaMemGetInfo')").fetchone()[0]
        bare = db.execute("SELECT count(*) FROM calls c WHERE NOT nested AND api IN"
                          " ('cudaMalloc', 'cudaFree', 'cudaMemGetInfo') AND NOT EXISTS"
                          " (SELECT 1 FROM stacks s WHERE s.stack_id = c.stack_id"
                          " AND s.kind = 'python')").fetchone()[0]
        db.close()
        unnamed = 0
        for stack_id, depth, file, line, symbol in rows:
            if file is None and symbol is None:
                unnamed += 1
                continue
            where = "%s: stack %d depth %d: %s:%s %s" % (name, stack_id, depth, file, line, symbol)
            lines = known.get(os.path.realpath(file)) if file else None
            if lines is None:
                failures.append(where + ": not one of the sources")
            elif symbol not in lines:
                failures.append(where + ": no such function in that file")
            elif line not in lines[symbol]:
                failures.append(where + ": not a line of that function")
        total += len(rows)
        how = meta[0][0] if meta else None
        print("%s: %d python frames (%d unnamed), %d calls, %d without python frames,"
              " python_frames: %s" % (name, len(rows), unnamed, calls, bare, how))
        if not rows:
            failures.append(name + ": no python frames")
        if not how or not how.startswith("without the GIL"):
            failures.append("%s: python_frames is %r" % (name, how))
    if len(traces) < min_traces:
        failures.append("%d traces in %s, expected at least %d" % (len(traces), trace_dir,
                                                                 min_traces))
    for f in failures[:30]:
        print("FAIL " + f)
    if len(failures) > 30:
        print("FAIL ... and %d more" % (len(failures) - 30))
    print("checked %d python frames in %d traces: %s"
          % (total, len(traces), "ok" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
