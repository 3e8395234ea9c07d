#!/bin/sh
# run.sh - the cost of tracing, as ratios against untraced runs measured in
# the same invocation (machines differ; ratios travel).
#
#   bench/run.sh BUILD_DIR
#
# hot path:  time per call in each thread while the writer keeps up (bursts
#            that fit the ring): what an intercepted call costs the program.
# sustained: calls without pause. A traced run is then bound by the writer's
#            commit rate; the program waits rather than losing records.
# stacks:    the hot path with call stacks (the default, CUTRACE_STACKS=all)
#            against without (none), calls made 30 frames deep; and from
#            Python (ctypes.PyDLL, the GIL held: Python frames are read), 10
#            Python frames deep, untraced vs stacks none, native and all.
# Python frames: their cost alone (CUTRACE_STACKS=python minus none) with
#            the GIL released (ctypes.CDLL, as real servers call CUDA) and
#            held, 16 and 64 frames deep; in ns, and in instructions per
#            call from callgrind when valgrind is installed.
# entered marks: blocking calls (cudaStreamSynchronize, which takes an
#            entered mark for itself and its nested cuStreamSynchronize)
#            against calls of the same shape that take none (cudaMemGetInfo
#            over cuMemGetInfo_v2); the difference of their added costs is
#            what the two marks cost (1 thread). Calls that cannot block take no mark:
#            their path has no new instruction (the hook decides at compile
#            time, CT_TRACE_BLOCKING).
# Each figure is the median of 5 runs. Last, the trace size per call. On the
# fake stack, as with the real runtime, a runtime call makes a driver call
# that is recorded too (nested), so each call here writes two records.
set -eu
build=$(cd "$1" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT
export LD_LIBRARY_PATH="$build/fake" CUTRACE_FAKE_STATE="$work/gpu-state" CUTRACE_FAKE_GPUS=1
# The interpreter itself, not a launcher script (pyenv's shims are shell
# scripts, which valgrind would measure instead).
python=$(python3 -c 'import sys; print(sys.executable)')

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

stacks=all # CUTRACE_STACKS of traced runs
depth=0    # frames above the calls

run_many() { # mode traced(0/1) threads calls
    for _ in 1 2 3 4 5; do
        if [ "$2" = 1 ]; then
            rm -rf "$work/trace"
            CUTRACE_STACKS=$stacks CUTRACE_DIR="$work/trace" LD_PRELOAD="$build/libcutrace.so" \
                "$build/bench/hotpath" "$1" "$3" "$4" "$depth"
        else
            "$build/bench/hotpath" "$1" "$3" "$4" "$depth"
        fi
    done | awk '{print $1}' | median
}

row() { # label mode threads calls
    base=$(run_many "$2" 0 "$3" "$4")
    traced=$(run_many "$2" 1 "$3" "$4")
    awk -v l="$1" -v t="$3" -v b="$base" -v x="$traced" \
        'BEGIN { printf "%-10s %7s %13.1f %13.1f %7.2f %10.1f %14.0f\n", l, t, b, x, x / b, x - b, 1e9 / x }'
}

printf '%-10s %7s %13s %13s %7s %10s %14s\n' "" threads "untraced ns" "traced ns" ratio "added ns" "calls/s/thread"
for threads in 1 4 16; do row "hot path" burst "$threads" 30000; done
for threads in 1 4; do row sustained sustained "$threads" 300000; done

echo
echo "entered marks: blocking calls (2 marks each) vs calls of the same shape without (CUTRACE_STACKS=none)"
stacks=none
printf '%-10s %7s %13s %13s %7s %10s %14s\n' "" threads "untraced ns" "traced ns" ratio "added ns" "calls/s/thread"
# One thread: with more, the fake driver's shared state lock (which
# cudaMemGetInfo takes and a synchronisation does not) dominates the difference.
plain=$(row meminfo meminfo 1 30000)
marked=$(row sync sync 1 30000)
echo "$plain"
echo "$marked"
echo "$plain $marked" | awk '{ printf "%-10s %7s %51.1f ns for the 2 marks of a blocking call\n", "marks", $2, $13 - $6 }'
stacks=all

echo
echo "call stacks: hot path, calls made 30 frames deep (CUTRACE_STACKS of the traced run)"
printf '%-10s %7s %13s %13s %7s %10s %14s\n' "" threads "untraced ns" "traced ns" ratio "added ns" "calls/s/thread"
depth=30
for threads in 1 4; do
    for stacks in none all; do row "stk $stacks" burst "$threads" 30000; done
done
stacks=all
depth=0

py_many() { # stacks (untraced: -)
    for _ in 1 2 3 4 5; do
        if [ "$1" = - ]; then
            "$python" "$(dirname "$0")/pyhot.py" 9000 10
        else
            rm -rf "$work/trace"
            CUTRACE_STACKS=$1 CUTRACE_DIR="$work/trace" LD_PRELOAD="$build/libcutrace.so" \
                "$python" "$(dirname "$0")/pyhot.py" 9000 10
        fi
    done | awk '{print $1}' | median
}

echo
echo "call stacks from Python (ctypes.PyDLL, GIL held), 10 Python frames deep, 1 thread"
printf '%-10s %13s %13s %7s %10s\n' stacks "untraced ns" "traced ns" ratio "added ns"
pybase=$(py_many -)
for mode in none native python all; do
    traced=$(py_many "$mode")
    awk -v l="$mode" -v b="$pybase" -v x="$traced" \
        'BEGIN { printf "%-10s %13.1f %13.1f %7.2f %10.1f\n", l, b, x, x / b, x - b }'
done

# Python frames read with the GIL released (ctypes.CDLL, the road of real
# servers) against held (ctypes.PyDLL), DEPTH Python frames on the stack:
# the cost of the frames alone is CUTRACE_STACKS=python minus =none.
pyframes_many() { # released|held depth stacks
    for _ in 1 2 3 4 5; do
        rm -rf "$work/trace"
        CUTRACE_STACKS=$3 CUTRACE_STACK_DEPTH=64 CUTRACE_DIR="$work/trace" \
            LD_PRELOAD="$build/libcutrace.so" "$python" "$(dirname "$0")/pyhot.py" 9000 "$2" "$1"
    done | awk '{print $1}' | median
}
# The same in instructions (valgrind's callgrind: repeatable on a loaded
# machine, where the nanoseconds above are not), when valgrind is there.
pyframes_instructions() { # released|held depth stacks
    rm -rf "$work/trace"
    CUTRACE_STACKS=$3 CUTRACE_STACK_DEPTH=64 CUTRACE_DIR="$work/trace" \
        LD_PRELOAD="$build/libcutrace.so" valgrind --tool=callgrind \
        --callgrind-out-file="$work/cg.out" "$python" "$(dirname "$0")/pyhot.py" 1800 "$2" "$1" \
        2>&1 >/dev/null | awk '/refs:/ {gsub(",", "", $NF); print $NF}'
}
echo
echo "Python frames: GIL released (ctypes.CDLL) vs held (ctypes.PyDLL), 1 thread ($("$python" -c 'import sys; print(sys.version.split()[0])'))"
printf '%-10s %6s %14s %14s %12s\n' GIL depth "stacks=none ns" "=python ns" "frames add ns"
for gil in released held; do
    for depth in 16 64; do
        none=$(pyframes_many "$gil" "$depth" none)
        frames=$(pyframes_many "$gil" "$depth" python)
        awk -v g="$gil" -v d="$depth" -v n="$none" -v p="$frames" \
            'BEGIN { printf "%-10s %6d %14.1f %14.1f %12.1f\n", g, d, n, p, p - n }'
    done
done
if command -v valgrind >/dev/null 2>&1; then
    printf '%-10s %6s %24s\n' GIL depth "frames add instr/call"
    for gil in released held; do
        for depth in 16 64; do
            none=$(pyframes_instructions "$gil" "$depth" none)
            frames=$(pyframes_instructions "$gil" "$depth" python)
            awk -v g="$gil" -v d="$depth" -v n="$none" -v p="$frames" \
                'BEGIN { printf "%-10s %6d %24.0f\n", g, d, (p - n) / 1800 }'
        done
    done
else
    echo "(valgrind not installed: no instruction counts)"
fi

rm -rf "$work/trace"
CUTRACE_DIR="$work/trace" LD_PRELOAD="$build/libcutrace.so" "$build/bench/hotpath" sustained 1 300000 >/dev/null
bytes=$(du -b "$work"/trace/*.db | awk '{s += $1} END {print s}')
awk -v b="$bytes" 'BEGIN { printf "trace size: %.1f bytes per call (300000 calls)\n", b / 300000 }'
