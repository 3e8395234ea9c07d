"""check_includes.py - no two source files include each other, directly or
around a circle, within the analyzer or the preload (`make layout-check`,
part of `make test`).

A module is a .c file with its .h; module A depends on B when A.c or A.h
includes B.h (by a quoted #include). A circle means neither side can be read,
tested or replaced without the other, which is what the folders are meant to
prevent.

    python3 tests/layout/check_includes.py [ROOT]

Prints each circle found and exits 1, or prints one line and exits 0. The
circles still known are listed in KNOWN with the reason they remain; one that
is gone must be taken off the list (so the list only shrinks), and a new one
fails.
"""
import os
import re
import sys

FOLDERS = ["analyzer", "preload/core", "preload/hooks"]

# The circles still there, each as its sorted module names, with why.
KNOWN = {
    ("preload/core", ("pyframes", "pywalk", "session", "stacks")):
        "stack and Python-frame records go to the trace through ct_session_append, and the "
        "session asks the stacks module how it is configured; breaking it means handing the "
        "recorders a record sink before the first event, which the hot path has to get right",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def graph(folder):
    modules = {}
    for name in sorted(os.listdir(folder)):
        stem, ext = os.path.splitext(name)
        if ext in (".c", ".h"):
            modules.setdefault(stem, set())
    for stem in modules:
        for ext in (".c", ".h"):
            path = os.path.join(folder, stem + ext)
            if not os.path.exists(path):
                continue
            with open(path, encoding="utf-8") as f:
                for inc in INCLUDE.findall(f.read()):
                    other = os.path.splitext(os.path.basename(inc))[0]
                    same_folder = os.path.normpath(os.path.join(folder, os.path.dirname(inc))) == \
                        os.path.normpath(folder)
                    if other != stem and other in modules and same_folder:
                        modules[stem].add(other)
    return modules


def circles(g):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(tuple(sorted(component)))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    found, problems = set(), []
    for folder in FOLDERS:
        for c in circles(graph(os.path.join(root, folder))):
            found.add((folder, c))
            if (folder, c) not in KNOWN:
                problems.append(f"{folder}: {' -> '.join(c)} include each other around a circle")
    for key in sorted(set(KNOWN) - found):
        problems.append(f"{key[0]}: {', '.join(key[1])} no longer a circle: take it off KNOWN")
    if problems:
        for p in problems:
            print(f"check_includes: {p}")
        return 1
    print(f"check_includes: ok: no include circle in {', '.join(FOLDERS)} "
          f"but the {len(KNOWN)} known one(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
