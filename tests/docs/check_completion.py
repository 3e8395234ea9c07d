#!/usr/bin/env python3
"""check_completion.py - make test's check of completions/cutrace.bash.

    tests/docs/check_completion.py BUILD_DIR [CC]

Sources the script in a plain `bash --norc` (no bash-completion package:
the script must stand alone), checks `complete -p cutrace`, then simulates
readline: sets COMP_WORDS / COMP_CWORD / COMP_LINE / COMP_POINT, calls the
completion function and compares COMPREPLY with what the code says:
the commands of analyzer/cutrace.c's table, every long option of each
command's getopt table (read as tests/docs/check_man.py reads them), the
--csv tables, option values, paths and the command after `cutrace run`.
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # make test writes nothing into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_man  # noqa: E402
from problems import Problems  # noqa: E402

ROOT = check_man.ROOT
SCRIPT = os.path.join(ROOT, "completions", "cutrace.bash")
problems = Problems("check-completion")
fail = problems.fail


def complete(cutrace, words, cwd=None, prelude=""):
    """COMPREPLY for the command line `words` (the last one being completed)."""
    script = prelude + (
        'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
        'COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=(); _cutrace; '
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash", SCRIPT, cutrace] + words,
                       capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0 or r.stderr.strip():
        fail("completing %r: status %d, stderr: %s" % (words, r.returncode, r.stderr.strip()))
    return [w for w in r.stdout.split("\n") if w]


def expect_equal(words, got, want):
    if sorted(set(got)) != sorted(set(want)):
        fail("cutrace %s<TAB> offers %s; expected %s" % (" ".join(words), sorted(set(got)), sorted(set(want))))


def expect_includes(words, got, want):
    missing = set(want) - set(got)
    if missing:
        fail("cutrace %s<TAB> does not offer %s (offers %s)" % (" ".join(words), sorted(missing), sorted(got)))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    cc = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("CC", "cc")
    cutrace = os.path.abspath(os.path.join(build, "cutrace"))
    if not os.access(cutrace, os.X_OK):
        raise SystemExit("check-completion: %s is missing: run make first" % cutrace)

    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", 'source "$1" && complete -p cutrace', "bash",
                        SCRIPT], capture_output=True, text=True)
    if r.returncode != 0 or "-F _cutrace" not in r.stdout or r.stderr.strip():
        fail("source completions/cutrace.bash; complete -p cutrace: %r %r" % (r.stdout, r.stderr))

    table = check_man.table_commands()
    expect_equal([""], complete(cutrace, [""]), table + ["help"])
    expect_equal(["su"], complete(cutrace, ["su"]), [c for c in table + ["help"] if c.startswith("su")])
    expect_equal(["help", ""], complete(cutrace, ["help", ""]), table)
    expect_equal(["--"], complete(cutrace, ["--"]), ["--help", "--version"])

    checked = 0
    for name in table:
        opts = check_man.command_options(cc, name)
        if opts is None:
            fail("no analyzer/cmd/%s.c for command %s" % (name, name))
            continue
        got = complete(cutrace, [name, "--"])
        expect_includes([name, "--"], got, ["--" + o for o in opts])
        extra = {w for w in got if w.rstrip("=")[2:] not in opts}
        if extra:
            fail("cutrace %s --<TAB> offers options the code lacks: %s" % (name, sorted(extra)))
        checked += len(opts)

    expect_equal(["budget", "--framework", ""], complete(cutrace, ["budget", "--framework", ""]),
                 ["sglang", "vllm"])
    for name in table:
        tables = check_man.code_csv_tables(cc, name)
        if tables:
            expect_equal([name, "--csv="], complete(cutrace, [name, "--csv="]), ["--csv=" + t for t in tables])
    # readline splits "--csv=pa" at '=' by default (COMP_WORDBREAKS)
    expect_equal(["collectives", "--csv", "=", "p"], complete(cutrace, ["collectives", "--csv", "=", "p"]),
                 ["pairs", "problems"])
    expect_equal(["diff", "--csv", "="], complete(cutrace, ["diff", "--csv", "="]), ["milestones", "allocations"])
    expect_includes(["sites", "--at", ""], complete(cutrace, ["sites", "--at", ""]),
                    ["peak", "end", "pre", "post", "seq:", "first_call", "weight_burst_begin", "process_end"])
    expect_equal(["summary", "--rank", ""], complete(cutrace, ["summary", "--rank", ""]), [])
    if "export" in table:
        expect_equal(["export", "--format", ""], complete(cutrace, ["export", "--format", ""]), ["proto", "json"])

    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "trace"))
        for f in ("a.db", "run.cutrace", "notes.txt"):
            open(os.path.join(tmp, f), "w").close()
        expect_equal(["summary", ""], complete(cutrace, ["summary", ""], cwd=tmp),
                     ["trace", "a.db", "run.cutrace"])
        expect_equal(["run", "-o", ""], complete(cutrace, ["run", "-o", ""], cwd=tmp), ["trace"])
        expect_equal(["pack", "-o", ""], complete(cutrace, ["pack", "-o", ""], cwd=tmp),
                     ["trace", "a.db", "run.cutrace", "notes.txt"])
    if shutil.which("bash"):
        for words in (["run", "bas"], ["run", "-o", "t", "--", "bas"], ["run", "-o", "t", "bas"]):
            expect_includes(words, complete(cutrace, words), ["bash"])
        # after CMD the words are CMD's own: no cutrace option is offered
        got = complete(cutrace, ["run", "bash", "--"])
        if "--output" in got:
            fail("cutrace run bash --<TAB> offers cutrace's --output: %s" % got)
        # with bash-completion loaded, CMD's own completion takes over from CMD's word on
        # (COMP_WORDS[0] is cutrace: `run -o t bash` puts bash at 4)
        stub = '_command_offset() { COMPREPLY=("offset:$1"); }; '
        for words, at in ((["run", "bash", "-"], 2), (["run", "-o", "t", "bash", "x"], 4),
                          (["run", "--", "bash", "x"], 3), (["run", "-o", "t", "--", "bash", "-c", ""], 5)):
            expect_equal(words, complete(cutrace, words, prelude=stub), ["offset:%d" % at])
    expect_equal(["nosuch", "--"], complete(cutrace, ["nosuch", "--"]), [])

    return problems.finish("completions/cutrace.bash", "%d commands, %d options, values and paths"
                           % (len(table), checked))


if __name__ == "__main__":
    sys.exit(main())
