"""check_includes.py - the layout's rules, checked (`make layout-check`, part
of `make test`):

1. No include circles. A module is a .c file with its .h in the same folder;
   module A depends on B when A.c or A.h includes B.h (a quoted #include,
   resolved as the compiler does: beside the including file, then the tree's
   own include root, then include/). The analyzer is one graph across its
   folders, the preload another: a circle means neither side can be read,
   tested or replaced without the other, which is what the folders are meant
   to prevent.
2. The analyzer reaches the preload's code only through include/: no
   analyzer source includes a header under preload/ (the code both sides
   share declares itself in include/cutrace/).
3. No source file over LIMIT lines, unless it is one idea and listed in LONG
   with why.

    python3 tests/layout/check_includes.py [ROOT]

Prints each problem found and exits 1, or prints one line and exits 0. The
exceptions still known (KNOWN circles, LONG files) are listed with their
reason; one that is gone must be taken off its list (so the lists only
shrink), and a new one fails.
"""
import os
import re
import sys

# Each tree: its folders (every .c/.h directly in them is a module) and the
# include root its compiler flags name (-Ianalyzer), besides include/.
TREES = {
    "analyzer": {"root": "analyzer", "folders": None},  # None: the folder and every subfolder
    "preload": {"root": None, "folders": ["preload/core", "preload/hooks"]},
}

# The circles still there, each as its sorted module paths, with why.
KNOWN = {
    ("preload/core/pyframes", "preload/core/pywalk", "preload/core/session", "preload/core/stacks"):
        "stack and Python-frame records go to the trace through ct_session_append, and the "
        "session asks the stacks module how it is configured; breaking it means handing the "
        "recorders a record sink before the first event, which the hot path has to get right",
}

LIMIT = 1000
LONG = {
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def tree_folders(root, tree):
    if tree["folders"] is not None:
        return tree["folders"]
    base = tree["root"]
    out = []
    for dirpath, dirnames, _ in os.walk(os.path.join(root, base)):
        dirnames.sort()
        out.append(os.path.relpath(dirpath, root))
    return sorted(out)


def sources(root, folders):
    for folder in folders:
        for name in sorted(os.listdir(os.path.join(root, folder))):
            if os.path.splitext(name)[1] in (".c", ".h"):
                yield folder, name


def resolve(root, folder, inc, tree):
    """The repository-relative path an include names, or None if outside."""
    candidates = [os.path.join(folder, inc)]
    if tree["root"]:
        candidates.append(os.path.join(tree["root"], inc))
    candidates.append(os.path.join("include", inc))
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.exists(os.path.join(root, c)):
            return c
    return None


def graph(root, tree, problems):
    folders = tree_folders(root, tree)
    modules = {}
    for folder, name in sources(root, folders):
        modules.setdefault(os.path.join(folder, os.path.splitext(name)[0]), set())
    for stem in modules:
        folder = os.path.dirname(stem)
        for ext in (".c", ".h"):
            path = stem + ext
            full = os.path.join(root, path)
            if not os.path.exists(full):
                continue
            with open(full, encoding="utf-8") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                target = resolve(root, folder, inc, tree)
                if target is None:
                    continue
                if tree["root"] == "analyzer" and target.startswith("preload" + os.sep):
                    problems.append(f"{path}: includes {inc}: the analyzer reaches the preload "
                                    "only through include/")
                other = os.path.splitext(target)[0]
                if other != stem and other in modules:
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


def long_files(root, folders):
    for folder, name in sources(root, folders):
        path = os.path.join(folder, name)
        with open(os.path.join(root, path), encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > LIMIT:
            yield path, n


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    found, problems, long_found = set(), [], set()
    for name, tree in TREES.items():
        for c in circles(graph(root, tree, problems)):
            found.add(c)
            if c not in KNOWN:
                problems.append(f"{name}: {' -> '.join(c)} include each other around a circle")
        for path, n in long_files(root, tree_folders(root, tree)):
            long_found.add(path)
            if path not in LONG:
                problems.append(f"{path}: {n} lines, over {LIMIT}: split it by idea, or list it "
                                "in LONG with why it is one")
    for key in sorted(set(KNOWN) - found):
        problems.append(f"{', '.join(key)} no longer a circle: take it off KNOWN")
    for path in sorted(set(LONG) - long_found):
        problems.append(f"{path}: no longer over {LIMIT} lines: take it off LONG")
    if problems:
        for p in problems:
            print(f"check_includes: {p}")
        return 1
    print(f"check_includes: ok: no include circle in {', '.join(TREES)} but the {len(KNOWN)} "
          f"known one(s); the analyzer includes the preload only through include/; no file over "
          f"{LIMIT} lines but the {len(LONG)} listed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
