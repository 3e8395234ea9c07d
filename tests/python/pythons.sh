#!/bin/sh
# pythons.sh - the CPython interpreters the Python-version tests run on: one
# per minor version from 3.10 to 3.14, the newest patch release found.
#
# Looks in $CUTRACE_PYTHONS_DIR (default ~/.pyenv/versions, where pyenv keeps
# them), then on PATH (python3.X). Prints one "VERSION PATH" line per
# interpreter on stdout; a version that is absent is said on stderr
# ("skipped: CPython 3.14 is not installed ..."), never silently left out.
set -u
dir=${CUTRACE_PYTHONS_DIR:-$HOME/.pyenv/versions}
for minor in 10 11 12 13 14; do
    found=
    for cand in $(ls -d "$dir"/3."$minor".* 2>/dev/null | sort -t. -k3,3n -r); do
        case $cand in *t) continue ;; esac # free-threaded builds are another ABI
        if [ -x "$cand/bin/python3.$minor" ]; then found=$cand/bin/python3.$minor; break; fi
    done
    if [ -z "$found" ]; then
        found=$(command -v "python3.$minor" 2>/dev/null || true)
    fi
    if [ -n "$found" ]; then
        echo "3.$minor $found"
    else
        echo "skipped: CPython 3.$minor is not installed (looked in $dir and on PATH)" >&2
    fi
done
