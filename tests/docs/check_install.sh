#!/usr/bin/env bash
# check_install.sh - make test's check of `make install` and `make uninstall`:
# into a scratch DESTDIR, install puts the tracer, the CLI, the man page, the
# bash completion and the docs where they belong; the installed cutrace finds
# its libcutrace.so (PREFIX/lib beside PREFIX/bin) and traces a program; man
# reads the installed page and bash loads the installed completion; uninstall
# then removes exactly those files: nothing of cutrace's is left, and a file
# of someone else's in the same directories stays.
#
#   tests/docs/check_install.sh [MAKE]      (docs.mk passes its $(MAKE))
set -euo pipefail

make_cmd=${1:-make}
prefix=/usr/local
scratch=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-install.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
dest="$scratch/dest"
root="$dest$prefix"
failures=0
problem() {
    echo "check-install: $*" >&2
    failures=$((failures + 1))
}

# Someone else's files in the shared directories: uninstall must leave them.
mkdir -p "$root/bin" "$root/share/man/man1"
echo other >"$root/bin/other-tool"
echo other >"$root/share/man/man1/other-tool.1"

$make_cmd --no-print-directory install DESTDIR="$dest" PREFIX="$prefix" >"$scratch/install.log" 2>&1 ||
    { cat "$scratch/install.log" >&2; echo "check-install: make install failed" >&2; exit 1; }

expected=(
    "$prefix/bin/cutrace"
    "$prefix/lib/libcutrace.so"
    "$prefix/share/man/man1/cutrace.1"
    "$prefix/share/bash-completion/completions/cutrace"
    "$prefix/share/doc/cutrace/README.md"
)
for f in docs/*.md; do
    expected+=("$prefix/share/doc/cutrace/${f#docs/}")
done
for f in "${expected[@]}"; do
    [[ -f $dest$f ]] || problem "make install did not install $f"
done
[[ -x $root/bin/cutrace ]] || problem "$prefix/bin/cutrace is not executable"
cmp -s man/cutrace.1 "$root/share/man/man1/cutrace.1" || problem "the installed man page differs from man/cutrace.1"
cmp -s completions/cutrace.bash "$root/share/bash-completion/completions/cutrace" ||
    problem "the installed completion differs from completions/cutrace.bash"

# What install wrote is exactly what the list says (plus the two files above).
installed=$(cd "$dest" && find . -type f | sed 's/^\.//' | sort)
want=$(printf '%s\n' "${expected[@]}" "$prefix/bin/other-tool" "$prefix/share/man/man1/other-tool.1" | sort)
if [[ $installed != "$want" ]]; then
    problem "make install wrote other files than expected:"
    diff <(echo "$want") <(echo "$installed") >&2 || true
fi

# The installed CLI runs and finds its library through ../lib.
version=$("$root/bin/cutrace" --version) || problem "the installed cutrace --version failed"
[[ $version == "cutrace "* ]] || problem "the installed cutrace --version says '$version'"
# (125 is `cutrace run`'s "library not found"; rt_sequence exits 3 by design)
if [[ -x build/progs/rt_sequence ]]; then
    status=0
    env -u CUTRACE_LIB LD_LIBRARY_PATH="$PWD/build/fake" CUTRACE_FAKE_STATE="$scratch/gpu-state" \
        "$root/bin/cutrace" run -o "$scratch/trace" -- build/progs/rt_sequence \
        >"$scratch/run.out" 2>"$scratch/run.err" || status=$?
    ((status == 3)) || problem "the installed cutrace run exits $status: $(cat "$scratch/run.err")"
    compgen -G "$scratch/trace/run-*/*.db" >/dev/null ||
        problem "the installed cutrace run left no trace: $(cat "$scratch/run.err")"
else
    problem "build/progs/rt_sequence is missing: run make first"
fi
if command -v man >/dev/null 2>&1; then
    MANWIDTH=80 man -l "$root/share/man/man1/cutrace.1" 2>"$scratch/man.err" | grep -q "cutrace run" ||
        problem "man -l cannot read the installed page: $(cat "$scratch/man.err")"
else
    echo "check-install: skipped: man: not installed (the installed page is not read)"
fi
complete_p=$(bash --norc --noprofile -c 'source "$1" && complete -p cutrace' bash \
    "$root/share/bash-completion/completions/cutrace" 2>&1) ||
    problem "bash cannot source the installed completion: $complete_p"
[[ $complete_p == *"-F _cutrace"* ]] || problem "the installed completion does not register: $complete_p"

$make_cmd --no-print-directory uninstall DESTDIR="$dest" PREFIX="$prefix" >"$scratch/uninstall.log" 2>&1 ||
    { cat "$scratch/uninstall.log" >&2; echo "check-install: make uninstall failed" >&2; exit 1; }
left=$(cd "$dest" && find . -type f | sed 's/^\.//' | sort)
others=$(printf '%s\n' "$prefix/bin/other-tool" "$prefix/share/man/man1/other-tool.1" | sort)
if [[ $left != "$others" ]]; then
    problem "after make uninstall, the files left are not exactly the others':"
    diff <(echo "$others") <(echo "$left") >&2 || true
fi
[[ ! -e $root/share/doc/cutrace ]] || problem "make uninstall left $prefix/share/doc/cutrace"
# Uninstalling again finds nothing to remove and is not an error.
$make_cmd --no-print-directory uninstall DESTDIR="$dest" PREFIX="$prefix" >"$scratch/uninstall2.log" 2>&1 ||
    problem "a second make uninstall failed: $(cat "$scratch/uninstall2.log")"

if ((failures)); then
    echo "check-install: $failures problem(s)" >&2
    exit 1
fi
echo "check-install: ok (${#expected[@]} files installed, all removed by uninstall; others' files kept)"
