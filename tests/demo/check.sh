#!/usr/bin/env bash
# check.sh - `make test`'s check of `make demo` (scripts/demo.sh): it runs in
# under a minute, each server ends as the story says, and the reports point
# at the custom all-reduce with numbers that add up. The numbers come from
# the fake GPU stack, which is deterministic: they are the demo's contract
# with the README, which shows this output.
#
#   tests/demo/check.sh [BUILD_DIR]
set -euo pipefail

build=${1:-build}
log="$build/demo-check.log"
start=$(date +%s)
if ! scripts/demo.sh "$build" >"$log" 2>&1; then
    echo "demo-check: scripts/demo.sh failed; its output is in $log" >&2
    exit 1
fi
elapsed=$(($(date +%s) - start))

failures=0
expect() {
    if ! grep -qF -- "$1" "$log"; then
        echo "demo-check: missing from the demo's output: $1" >&2
        failures=$((failures + 1))
    fi
}
expect "   exit status 0"
expect "   exit status 1"
expect "   8 RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
# budget: the baseline's and the failing run's own numbers, replayed
expect "rest   = post - pre * (1 - 0.55) = 0.157715 GiB"
expect "verdict: fits: 2409 tokens"
expect "rest   = post - pre * (1 - 0.55) = -0.108496 GiB"
expect "verdict: Not enough memory. Please try to increase --mem-fraction-static."
expect "custom all-reduce buffers (ipc_exported)             made before pre   512.00 MiB    281.60 MiB"
# diff: the cause, named with counts, sizes and the function that made it (the
# call stacks), and a budget delta that adds up
expect "first divergence > 16.0 MiB: measurement 2 (pre) on every rank"
expect "+1  256 MiB + 5 KiB  cudaMalloc            init_custom_ar      ipc_exported  after NCCL init 2          +256.0 MiB"
expect "+7          256 MiB  cudaIpcOpenMemHandle  init_custom_ar      peer"
expect "rest                   0.157715 GiB  -0.108496 GiB  -272.6 MiB"
expect "custom all-reduce buffers (ipc_exported)      made before pre           0  512.0 MiB  +512.0 MiB      -281.6 MiB"
expect "B adds: --custom-ar"
# the pictures: written, and what they are said to be
expect "== 6. The pictures"
for picture in diff.html custom-ar.html custom-ar.pftrace; do
    if [[ ! -s $build/demo/$picture ]]; then
        echo "demo-check: the demo wrote no $build/demo/$picture" >&2
        failures=$((failures + 1))
    fi
done
if ! grep -qF "<h2>The budgets, side by side</h2>" "$build/demo/diff.html" 2>/dev/null; then
    echo "demo-check: $build/demo/diff.html has no budgets side by side" >&2
    failures=$((failures + 1))
fi

if ((elapsed >= 60)); then
    echo "demo-check: the demo took ${elapsed} s (it must stay under a minute)" >&2
    failures=$((failures + 1))
fi
if ((failures)); then
    echo "demo-check: $failures problem(s); the demo's output is in $log" >&2
    exit 1
fi
echo "demo-check: ok (${elapsed} s; output in $log)"
