#!/usr/bin/env python3
"""check_man.py - make test's check that man/cutrace.1 cannot drift from the code.

    tests/docs/check_man.py [CC]

- every subcommand of analyzer/cutrace.c's dispatch table has its section
  (.SS "cutrace NAME ...") in the page, and every section names a command
  of the table (or `help`, which cutrace.c answers itself);
- every long option of a command (its getopt table, read from
  analyzer/cmd/NAME.c through the C preprocessor, so that the shared tables
  of analyzer/cli.h and analysis/budget_analysis.h are expanded exactly as
  the compiler sees them; plus cli_report_parse's table in analyzer/cli.c
  for the commands that parse with it) is named in the command's section,
  or, for the shared report options, the section says it takes "the filter
  options" / "the format options" and REPORT OPTIONS documents them;
- no section names a long option its command does not have;
- each command's --csv tables, as its section lists them, are its
  csv_tables[] in the code, in order (the first is the default);
- EXIT STATUS gives 0 to 3, run's section 125 to 127, and .TH says the
  Makefile's VERSION;
- the page renders without a warning: groff -man -ww (when groff is
  installed), and man -l (when man is).

The commands and options of issue 20 that other branches add (export,
report, diff --html) are documented here ahead of them: PENDING allows
each only while its code is absent, so the check turns strict by itself
once the code lands.
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAN = os.path.join(ROOT, "man", "cutrace.1")

# Documented before their code lands (issue 20): command -> options.
PENDING = {
    "export": {"output", "format", "help"},
    "report": {"output", "help"},
    "diff": {"html"},
}
FILTER_OPTIONS = {"rank", "pid", "host", "gpu"}
FORMAT_OPTIONS = {"json", "csv", "fail-on-problem"}
# A struct option initialiser after preprocessing: {"name", has_arg, flag, val}.
OPTION_RE = re.compile(
    r'\{\s*"([a-z][a-z0-9-]*)"\s*,\s*(?:[012]|no_argument|required_argument|optional_argument)'
    r"\s*,\s*(?:\(\(void \*\)0\)|NULL|0|&\w+)\s*,"
)

sys.dont_write_bytecode = True  # make test writes nothing into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from problems import Problems  # noqa: E402

problems = Problems("check-man")
fail = problems.fail


def table_commands():
    src = open(os.path.join(ROOT, "analyzer", "cutrace.c")).read()
    body = re.search(r"commands\[\]\s*=\s*\{(.*?)\n\};", src, re.S)
    assert body, "analyzer/cutrace.c: no commands[] table"
    names = re.findall(r'\{\s*"([a-z-]+)"\s*,\s*cmd_\w+\s*,', body.group(1))
    assert names, "analyzer/cutrace.c: commands[] has no entries"
    return names


def preprocess(cc, path):
    cmd = [cc, "-E", "-P", "-D_GNU_SOURCE", '-DCUTRACE_VERSION="0"', "-I" + os.path.join(ROOT, "include"),
           "-I" + os.path.join(ROOT, "analyzer"), path]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("check-man: %s failed:\n%s" % (" ".join(cmd), r.stderr))
    return r.stdout


def command_options(cc, name):
    path = os.path.join(ROOT, "analyzer", "cmd", name + ".c")
    if not os.path.exists(path):
        return None
    text = preprocess(cc, path)
    opts = set(OPTION_RE.findall(text))
    if re.search(r"=\s*cli_report_parse\s*\(", text):
        cli = preprocess(cc, os.path.join(ROOT, "analyzer", "cli.c"))
        opts |= set(OPTION_RE.findall(cli))
    return opts


def code_csv_tables(cc, name):
    """The --csv tables of command NAME, the default first: its csv_tables[] (or the
    X_csv_tables[] it names, defined elsewhere in the analyzer); None without one."""
    text = open(os.path.join(ROOT, "analyzer", "cmd", name + ".c")).read()
    m = re.search(r"\bcsv_tables\[\]\s*=\s*\{([^}]*)\}", text)
    if not m:
        used = re.search(r"\b(\w+_csv_tables)\b", text)
        if not used:
            return None
        for folder, _, files in os.walk(os.path.join(ROOT, "analyzer")):
            for f in files:
                if f.endswith(".c"):
                    m = m or re.search(r"\b%s\[\]\s*=\s*\{([^}]*)\}" % used.group(1),
                                       open(os.path.join(folder, f)).read())
        if not m:
            return None
    return re.findall(r'"([a-z_]+)"', m.group(1))


def man_csv_tables(text):
    """The tables a command's section lists: '.B \\-\\-csv' 'tables:' then '.BR name ,' lines."""
    m = re.search(r"^\.B \\-\\-csv\ntables?:\n((?:\.BR? [a-z_]+(?: [,.;])?\n)+)", text, re.M)
    return re.findall(r"^\.BR? ([a-z_]+)", m.group(1), re.M) if m else None


def man_sections(page):
    """.SS/.SH title -> text up to the next .SS/.SH."""
    sections = {}
    parts = re.split(r'^\.(S[SH]) (.*)$', page, flags=re.M)
    for i in range(1, len(parts), 3):
        title = parts[i + 1].strip().strip('"').replace("\\-", "-")
        sections[(parts[i], title)] = parts[i + 2]
    return sections


def long_options_in(text):
    """The long options a piece of the page names (written \\-\\-name in roff)."""
    found = re.findall(r"\\-\\-([a-z][a-z0-9]*(?:\\-[a-z0-9]+)*)", text)
    return {o.replace("\\-", "-") for o in found}


def check_render():
    if shutil.which("groff"):
        r = subprocess.run(["groff", "-man", "-ww", "-z", "-Tutf8", MAN], capture_output=True, text=True)
        if r.returncode != 0 or r.stderr.strip():
            fail("groff -man -ww warns:\n" + r.stderr)
        else:
            print("check-man: groff -man -ww renders it without a warning")
    else:
        print("check-man: skipped: groff: not installed (render check)")
    if shutil.which("man"):
        env = dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0")
        r = subprocess.run(["man", "-l", MAN], capture_output=True, text=True, env=env)
        # a machine without the C.UTF-8 locale makes man say so: not the page's problem
        stderr = "\n".join(l for l in r.stderr.splitlines() if "locale" not in l)
        if r.returncode != 0 or stderr.strip() or "cutrace run" not in r.stdout:
            fail("man -l fails or warns (status %d):\n%s" % (r.returncode, r.stderr))
        else:
            print("check-man: man -l renders it (%d lines)" % r.stdout.count("\n"))
    else:
        print("check-man: skipped: man: not installed (man -l check)")


def main():
    cc = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CC", "cc")
    page = open(MAN).read()
    sections = man_sections(page)
    commands = {}
    for (kind, title), text in sections.items():
        m = re.match(r"cutrace ([a-z-]+)\b", title)
        if kind == "SS" and m:
            commands[m.group(1)] = text
    report = sections.get(("SH", "REPORT OPTIONS"), "") + "".join(
        t for (k, title), t in sections.items() if k == "SS" and title in ("Format options", "Filter options",
                                                                            "Every command"))
    shared_documented = long_options_in(report)
    for group in (FILTER_OPTIONS, FORMAT_OPTIONS, {"help"}):
        for o in sorted(group - shared_documented):
            fail("REPORT OPTIONS does not document --%s" % o)

    table = table_commands()
    for name in table:
        if name not in commands:
            fail("analyzer/cutrace.c's command %r has no section (.SS \"cutrace %s ...\")" % (name, name))
    checked = 0
    for name, text in sorted(commands.items()):
        if name == "help":
            continue
        opts = command_options(cc, name)
        if name not in table:
            if name in PENDING and opts is None:
                print("check-man: note: %s is documented ahead of analyzer/cmd/%s.c (issue 20)" % (name, name))
                continue
            fail("section 'cutrace %s' names no command of analyzer/cutrace.c's table" % name)
            continue
        if opts is None:
            fail("no analyzer/cmd/%s.c to read the options of %s from" % (name, name))
            continue
        named = long_options_in(text)
        flat = re.sub(r"\s+", " ", text)
        takes_filter = "filter options" in flat
        takes_format = "format options" in flat
        for o in sorted(opts):
            if o in named or o == "help":
                continue
            if o in FILTER_OPTIONS and takes_filter:
                continue
            if o in FORMAT_OPTIONS and takes_format:
                continue
            fail("--%s of cutrace %s (analyzer/cmd/%s.c) is not in its man page section" % (o, name, name))
        if takes_filter and not FILTER_OPTIONS <= opts:
            fail("cutrace %s's section says it takes the filter options; it lacks --%s"
                 % (name, ", --".join(sorted(FILTER_OPTIONS - opts))))
        if takes_format and not FORMAT_OPTIONS <= opts:
            fail("cutrace %s's section says it takes the format options; it lacks --%s"
                 % (name, ", --".join(sorted(FORMAT_OPTIONS - opts))))
        for o in sorted(named - opts):
            if o in PENDING.get(name, set()):
                print("check-man: note: cutrace %s --%s is documented ahead of its code (issue 20)" % (name, o))
                continue
            fail("the section of cutrace %s names --%s, which analyzer/cmd/%s.c does not take" % (name, o, name))
        checked += len(opts)
        tables, listed = code_csv_tables(cc, name), man_csv_tables(text)
        if tables != listed:
            fail("cutrace %s's --csv tables are %s in the code, %s in its section" % (name, tables, listed))

    for code in ("0", "1", "2", "3"):
        if not re.search(r"^\.SH EXIT STATUS$.*?^\.B %s$" % code, page, re.S | re.M):
            fail("EXIT STATUS does not list %s" % code)
    for code in ("125", "126", "127"):
        if code not in commands.get("run", ""):
            fail("cutrace run's section does not give exit status %s" % code)

    version = re.search(r"^VERSION\s*:=\s*(\S+)", open(os.path.join(ROOT, "Makefile")).read(), re.M)
    th = re.search(r"^\.TH .*$", page, re.M)
    if not version or not th or '"cutrace %s"' % version.group(1) not in th.group(0):
        fail("the .TH line (%s) does not say the Makefile's version (%s)"
             % (th and th.group(0), version and version.group(1)))

    check_render()
    return problems.finish("man/cutrace.1", "%d commands, %d long options checked against the code"
                           % (len(table), checked))


if __name__ == "__main__":
    sys.exit(main())
