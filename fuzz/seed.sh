#!/bin/sh
# seed.sh - real inputs for the fuzzers' seed corpora (run by `make fuzz`).
#
#   fuzz/seed.sh BUILD CORPUS
#
# Traces the way users make them: libcutrace.so preloaded into programs on
# the fake GPU stack (tests/fake). Writes
#   CORPUS/trace/seed-rt_sequence.db   a clean run of build/progs/rt_sequence
#   CORPUS/trace/seed-nccl.db          one rank of build/progs/tp_collectives
#   CORPUS/ring/seed-killed.ring       the ring a SIGKILLed process left
#                                      (build/bench/hotpath, killed mid-run)
#   CORPUS/ring/seed-killed-16.ring    the same, shrunk to 16 slots
#   CORPUS/trace/seed-killed.db        a trace folded from the shrunk ring
#                                      by `cutrace recover` (end_state killed)
set -eu

build=$1
corpus=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$corpus/trace" "$corpus/ring"

# traced DIR CMD...: CMD on the fake GPU stack with the tracer, writing to DIR,
# as tests/integration runs programs. It execs, so call it in a subshell (or
# in the background, where $! is then the traced process itself).
traced() {
    dir=$1
    shift
    exec env LD_LIBRARY_PATH="$build/fake" CUTRACE_FAKE_STATE="$tmp/state" CUTRACE_FAKE_GPUS=2 \
        CUTRACE_DIR="$dir" LD_PRELOAD="$build/libcutrace.so" "$@"
}

# A normal run. rt_sequence's own exit status says how its calls went, which
# is beside the point here.
(traced "$tmp/clean" "$build/progs/rt_sequence") >/dev/null || true
set -- "$tmp"/clean/*.db
[ -f "$1" ] || { echo "seed.sh: rt_sequence left no trace" >&2; exit 1; }
cp "$1" "$corpus/trace/seed-rt_sequence.db"

# One rank of a two-rank NCCL job: communicators, a split, collectives.
(traced "$tmp/nccl" "$build/progs/tp_collectives" 2 2) >/dev/null || true
set -- "$tmp"/nccl/*.db
[ -f "$1" ] || { echo "seed.sh: tp_collectives left no trace" >&2; exit 1; }
cp "$1" "$corpus/trace/seed-nccl.db"

# A killed run: the ring is left behind with what the writer had not
# committed. The smallest buffer keeps the seed small; a slow start may need
# a longer wait before the kill.
ring=
for wait in 0.05 0.1 0.2 0.4 0.8; do
    rm -rf "$tmp/killed"
    traced "$tmp/killed" env CUTRACE_BUFFER_MB=1 "$build/bench/hotpath" sustained 1 300000 \
        >/dev/null 2>&1 &
    pid=$!
    sleep "$wait"
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for f in "$tmp"/killed/*.ring; do
        [ -f "$f" ] && ring=$f
    done
    [ -n "$ring" ] && break
done
[ -n "$ring" ] || { echo "seed.sh: no killed run left a ring" >&2; exit 1; }
cp "$ring" "$corpus/ring/seed-killed.ring"
"$build/fuzz/shrink_ring" "$ring" "$corpus/ring/seed-killed-16.ring" 16

# The shrunk ring alone in a directory: recover makes its trace from the header.
mkdir "$tmp/folded"
cp "$corpus/ring/seed-killed-16.ring" "$tmp/folded/"
"$build/cutrace" recover "$tmp/folded"
set -- "$tmp"/folded/*.db
cp "$1" "$corpus/trace/seed-killed.db"
