#!/usr/bin/env python3
# pylines_dump.py - the ground truth for preload/core/pylines.c: what this
# interpreter's own PyCode_Addr2Line() says for every instruction offset of
# many code objects, printed for tests/python/pylines_check.c to compare.
#
# Usage: pythonX.Y pylines_dump.py > dump.txt
#
# The code objects: every one (through co_consts) of a fixed set of stdlib
# modules, compiled from this interpreter's own sources, and of generated
# sources that reach what the stdlib rarely does (huge line jumps, lines past
# 65535 and 2**20, negative deltas, long lines, no-line ranges), plus copies
# with co_firstlineno near 2**30 and copies whose co_linetable is cut at an
# entry boundary (CPython decodes those itself: the exact answer for a cut
# table). Output, one record a line:
#   V <version> <format>                      format: 310 or 311 (format.h)
#   F|P <first> <neg> <nbytes> <hex|-> <runs>  F: a whole table, P: a cut one
#       first = co_firstlineno, neg = PyCode_Addr2Line(co, -2), nbytes = the
#       bytecode's length; runs = "line*count,..." for offsets 0, 2, 4, ...,
#       nbytes + 2 * (EXTRA - 1) (past the end too), -1 written as -1
#   S <key>=<value> ...                       what the tables hold, for the report
import collections
import ctypes
import os
import sys
import sysconfig

EXTRA = 3  # offsets past the bytecode's end: CPython says -1 there

# Sizeable, varied stdlib modules; a name missing from a version is skipped
# (re/_parser is sre_parse before 3.11).
MODULES = [
    "argparse", "ast", "asyncio/base_events", "asyncio/tasks", "collections/__init__",
    "dataclasses", "difflib", "email/_header_value_parser", "enum", "functools", "inspect",
    "json/decoder", "json/encoder", "logging/__init__", "pathlib", "pickle", "pprint",
    "re/_parser", "re/_compiler", "sre_parse", "shutil", "socket", "subprocess", "tarfile",
    "textwrap", "threading", "typing", "unittest/case", "urllib/parse", "zipfile",
    "tokenize", "traceback", "statistics", "fractions", "decimal", "_pydecimal", "calendar",
]
MODULES_TOTAL_BUDGET = 1_600_000  # offsets, to keep every version's run short
# PyCode_Addr2Line walks the table from its start on every call: a code object
# costs offsets x table bytes, and the largest are not copied or cut.
CUT_COST = 20_000_000


def cost(co):
    return len(co.co_code) // 2 * len(co.co_linetable)


def generated_sources(fmt):
    """Sources written to reach the corners of both table formats."""
    out = []
    # Line jumps over 127 and 2**16 and 2**20, forward and (through a
    # multi-line expression that ends far below its start) backward.
    out.append(("jumps",
                "a = 1\n" + "\n" * 300 + "b = 2\n" + "\n" * 70000 + "def far():\n"
                "    return (a +\n" + "\n" * 5000 + "        b)\n" + "\n" * (1 << 20) +
                "c = far(\n" + "\n" * 400 + ")\n"))
    # Decorators: applied after the def line, so the line goes back up.
    out.append(("decorators",
                "def dec(*a):\n    return lambda f: f\n"
                "@dec(1,\n" + "\n" * 200 + "     2)\n@dec(3)\n" + "\n" * 3 +
                "def g(x,\n      y):\n    return x\n"
                "@dec\nclass K:\n    @property\n    def p(self):\n        return 1\n"
                "    @staticmethod\n    def s(\n" + "\n" * 150 + "    ):\n        pass\n"))
    # Multi-line expressions, chained calls, augmented assignment to a
    # subscript spread over lines, stores that come back to the first line.
    out.append(("multiline",
                "def m(o, d):\n"
                "    r = (o\n         .a\n         .b(\n             1,\n"
                "             2)\n         .c)\n"
                "    d[\n        o.k\n    ] += (\n        1\n    )\n"
                "    x, y = (\n        1,\n" + "\n" * 130 + "        2)\n"
                "    return [r,\n            x,\n            y]\n"))
    # Lambdas, comprehensions (inlined from 3.12), generators, async code.
    out.append(("functional",
                "f = lambda x: (x +\n    1)\n"
                "g = [i * j for i in range(3)\n     for j in range(4)\n     if i != j]\n"
                "h = {k: v for k, v in\n     zip('ab', 'cd')}\n"
                "s = {c\n     for c in 'xyz'}\n"
                "gen = (n\n       for n in range(5))\n"
                "def gen2(a):\n    yield a\n    yield from (\n        gen)\n"
                "    x = yield\n    return x\n"
                "async def co(a, b):\n    async with a as x:\n        await x\n"
                "    async for i in b:\n        await (\n            i)\n"
                "    return [j async for j in b]\n"
                "async def agen():\n    yield 1\n    await agen()\n"))
    # Control flow that leaves instructions without a line (3.10: -128,
    # 3.11+: code 15) and empty lines inside blocks.
    out.append(("flow",
                "def fl(a):\n    try:\n\n        a()\n    except (KeyError,\n"
                "            ValueError) as e:\n\n        return e\n    else:\n"
                "        pass\n    finally:\n        print('f')\n"
                "    while a:\n        if a > 1:\n            break\n        continue\n"
                "    else:\n        a = 2\n"
                "    for i in a:\n        try:\n            pass\n        finally:\n"
                "            continue\n"
                "    with open(a) as f1, \\\n         open(a) as f2:\n        pass\n"
                "    return a\n"))
    out.append(("match",
                "def mt(v):\n    match v:\n        case [1, *rest]:\n            return rest\n"
                "        case {'k': x,\n              **kw}:\n            return x\n"
                "        case str() | bytes():\n            return 0\n"
                "        case _:\n            return None\n"))
    # One line with more bytecode than a 3.10 pair (254 bytes) or a 3.11
    # entry (8 code units) can hold; a function body whose table is just
    # over CT_PYLINES_MAX (32 KiB), as the tracer cuts it (3.10 spends about
    # 6 bytes on each of these lines, 3.11 24, 3.12+ 19).
    names = ", ".join("v%d" % i for i in range(600))
    out.append(("longline",
                "def ll(" + names + "):\n    return [" + names + "]\n"
                "t = (" + ", ".join("str(%d)" % i for i in range(400)) + ")\n"))
    big_lines = {(3, 10): 5600, (3, 11): 1400}.get(sys.version_info[:2], 1800)
    body = "".join("    x%d = o.a%d(%d,\n            %d)\n" % (i, i, i, i) for i in range(big_lines))
    out.append(("bigtable", "def big(o):\n" + body + "    return 0\n"))
    out.append(("fstrings", "def fs(a, b):\n    return f'''{a!r:>{b}}\n{\n  a +\n b}'''\n"))
    out.append(("empty", ""))
    out.append(("comments", "# just a comment\n\n\n"))
    out.append(("pass", "\n\n\npass\n"))
    out.append(("deep",
                "class A:\n    class B:\n        def c(self):\n            def d():\n"
                "                return lambda: [x for x in\n                 ()]\n"
                "            return d\n"))
    return out


def walk(co, acc):
    acc.append(co)
    for c in co.co_consts:
        if isinstance(c, type(co)):
            walk(c, acc)


def count_entries(table, fmt, stats):
    """What kinds of entries the tables hold: proof that the corners are reached."""
    if fmt == 310:
        for i in range(0, len(table) - 1, 2):
            delta = table[i + 1] - 256 if table[i + 1] >= 128 else table[i + 1]
            stats["pairs"] += 1
            stats["pairs_no_line"] += delta == -128
            stats["pairs_empty"] += table[i] == 0
            stats["pairs_negative"] += -128 < delta < 0
            stats["pairs_127"] += abs(delta) == 127
        return
    kinds = ["short"] * 10 + ["one_line"] * 3 + ["no_column", "long", "none"]
    for i, b in enumerate(table):
        if not b & 128:
            continue
        code = (b >> 3) & 15
        stats["entries_" + kinds[code]] += 1
        if code in (13, 14):
            stats["entries_negative"] += table[i + 1] & 1
            stats["entries_multibyte_delta"] += bool(table[i + 1] & 64)


def boundaries(table, fmt):
    """Cut points at which CPython itself decodes the prefix without reading past it."""
    if fmt == 310:
        # After a pair of some bytes: a prefix ending in empty pairs would
        # send 3.10's NextAddressRange past its end.
        return [p for p in range(2, len(table) + 1, 2) if table[p - 2] != 0]
    return [p for p in range(1, len(table)) if table[p] & 128]


def main():
    fmt = 310 if sys.version_info[:2] == (3, 10) else 311
    addr2line = ctypes.pythonapi.PyCode_Addr2Line
    addr2line.argtypes = [ctypes.py_object, ctypes.c_int]
    addr2line.restype = ctypes.c_int
    out = sys.stdout
    out.write("V %d.%d.%d %d\n" % (sys.version_info[:3] + (fmt,)))
    stats = {"code_objects": 0, "cut_tables": 0, "adaptive_mismatch": 0, "modules": 0,
             "modules_missing": 0, "max_line": 0, "max_table": 0}
    stats = collections.defaultdict(int, stats)

    def emit(kind, co):
        code_len = len(co.co_code)
        adaptive = getattr(co, "_co_code_adaptive", None)
        if adaptive is not None and len(adaptive) != code_len:
            # The interpreter's offsets index the adaptive copy: use its size.
            stats["adaptive_mismatch"] += 1
            code_len = len(adaptive)
        runs = []
        last, count = None, 0
        for off in range(0, code_len + 2 * EXTRA, 2):
            line = addr2line(co, off)
            if line == last:
                count += 1
            else:
                if count:
                    runs.append("%d*%d" % (last, count))
                last, count = line, 1
        runs.append("%d*%d" % (last, count))
        stats["max_line"] = max([stats["max_line"]] + [int(r.split("*")[0]) for r in runs])
        table = co.co_linetable
        if kind == "F":
            count_entries(table, fmt, stats)
        out.write("%s %d %d %d %s %s\n" % (kind, co.co_firstlineno, addr2line(co, -2), code_len,
                                           table.hex() or "-", ",".join(runs)))
        stats["max_table"] = max(stats["max_table"], len(table))

    codes = []
    stdlib = sysconfig.get_paths()["stdlib"]
    budget = MODULES_TOTAL_BUDGET
    for name in MODULES:
        path = os.path.join(stdlib, name + ".py")
        if not os.path.exists(path):
            stats["modules_missing"] += 1
            continue
        with open(path, encoding="utf-8") as f:
            acc = []
            walk(compile(f.read(), path, "exec", dont_inherit=True), acc)
        size = sum(len(c.co_code) // 2 for c in acc)
        if size > budget:
            continue
        budget -= size
        stats["modules"] += 1
        codes += acc
    for name, src in generated_sources(fmt):
        walk(compile(src, "<%s>" % name, "exec", dont_inherit=True), codes)
    # Lines near 2**30 through co_firstlineno: far past what blank lines reach cheaply.
    codes += [c.replace(co_firstlineno=(1 << 30) + i) for i, c in enumerate(codes[-40:])
              if cost(c) < CUT_COST]

    for co in codes:
        emit("F", co)
        stats["code_objects"] += 1
    # Cut tables: entry boundaries of every code object, decoded by CPython.
    for i, co in enumerate(codes):
        table = co.co_linetable
        cuts = boundaries(table, fmt)
        if not cuts or cost(co) >= CUT_COST:
            continue
        # One cut a code object, alternately its last entry boundary and any.
        p = cuts[-1] if i % 2 else cuts[(i * 7919) % len(cuts)]
        emit("P", co.replace(co_linetable=table[:p]))
        stats["cut_tables"] += 1
        if i % 50 == 0:
            emit("P", co.replace(co_linetable=b""))
            stats["cut_tables"] += 1
    out.write("S " + " ".join("%s=%d" % kv for kv in stats.items()) + "\n")


if __name__ == "__main__":
    main()
