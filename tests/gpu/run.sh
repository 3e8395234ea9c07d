#!/usr/bin/env bash
# run.sh - cutrace on a real NVIDIA GPU: builds the tracer and
# examples/real_gpu/, runs the CUDA program and the PyTorch script untraced
# and under `cutrace run`, and checks the traces against what the programs
# did. Not part of `make test` (no GPU there); `make gpu-test` runs it, and
# tests/gpu/README.md says how to run it on a device machine in one call.
#
#   bash tests/gpu/run.sh [OUTDIR]
#
# OUTDIR (default: a new temporary directory) receives run.log (every
# command's output), summary.txt (the table) and work.tar.gz (programs'
# outputs, cutrace reports and the traces, the traces left out when too big).
# The table comes last on stdout, closed by "N passed, N failed, N skipped";
# exit status 0 when nothing failed, 1 otherwise.
#
# Without a GPU (no /dev/nvidia0, or nvidia-smi missing or failing) it prints
# "skipped: no GPU" and exits 0. Without torch (or a torch that sees no GPU)
# the PyTorch checks are reported as skipped and the CUDA checks still run.
#
# Environment:
#   BUILD       cutrace's build directory (default build); when `make` cannot
#               build there (a GPU machine without libsqlite3-dev) but it holds
#               libcutrace.so and cutrace built elsewhere, those are used
#   PYTHON      the python with torch (default python3)
#   GPU_TEST_RUNS    runs of each kind for the overhead (default 3, best of)
#   GPU_TEST_BUDGET  seconds the whole test may take (default 270; each
#               program also has its own timeout of at most 120 s)
#   CUTRACE_GPU_TEST_FORCE=1   run even without a GPU (to test this script's
#               own plumbing: the checks then fail)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

# ---- is there a GPU? ----

no_gpu_reason() {
    if [[ ! -e /dev/nvidia0 ]]; then
        echo "no /dev/nvidia0"
    elif ! command -v nvidia-smi >/dev/null 2>&1; then
        echo "no nvidia-smi"
    elif ! timeout 60 nvidia-smi -L >/dev/null 2>&1; then
        echo "nvidia-smi -L failed"
    fi
}
reason=$(no_gpu_reason)
if [[ -n $reason && ${CUTRACE_GPU_TEST_FORCE:-0} != 1 ]]; then
    echo "skipped: no GPU"
    echo "run.sh: $reason" >&2
    exit 0
fi

# ---- set-up ----

build=${BUILD:-build}
[[ $build == /* ]] || build=$root/$build
python=${PYTHON:-python3}
runs=${GPU_TEST_RUNS:-3}
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
    echo "run.sh: GPU_TEST_RUNS must be a positive number, not '$runs'" >&2
    exit 2
fi
deadline=$((SECONDS + ${GPU_TEST_BUDGET:-270}))
outdir=${1:-$(mktemp -d "${TMPDIR:-/tmp}/cutrace-gpu-test.XXXXXX")}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
work=$outdir/work
rm -rf "$work"
mkdir -p "$work"
log=$outdir/run.log
: >"$log"
cutrace=$build/cutrace
checker=$root/tests/gpu/check_trace.py
# NCCL's debug lines go to stdout with pids and times in them, which would
# make a traced run's output differ from an untraced one's.
unset NCCL_DEBUG NCCL_DEBUG_SUBSYS

# Bounds on "unexplained" memory at a memory query (used - traced live).
# It is the CUDA context and what the driver keeps for it: on Hopper at least
# the local-memory reserve for the stack of every thread that can be resident
# (132 SMs x 2048 threads x 1 KiB default stack = 264 MiB) plus the device
# heap (8 MiB) and printf FIFO: so never below 200 MiB. A CUDA 12/13 context
# on an H100/H200 measures about 500-600 MiB with lazy module loading (the
# default), plus the kernels loaded lazily (NCCL's, PyTorch's, cuBLAS's: tens
# to a few hundred MiB) and small untraced driver allocations (graph
# instantiation, NCCL's host-mapped FIFOs). 1.5 GiB leaves room for all of it
# and is still below the 2 GiB that both programs allocate through each road
# they take (cudaMalloc, the pools, VMM, the caching allocator both ways), so
# a road the tracer missed cannot hide inside the bound.
lo_mib=200
hi_mib=1536

names=() statuses=() details=()
record() { names+=("$1") statuses+=("$2") details+=("$3"); }

say() { printf '%s\n' "$*" | tee -a "$log"; }
note() { printf '\n== %s\n' "$*" >>"$log"; }

# Seconds a program may still run: at most 120, never past the deadline.
budget() {
    local left=$((deadline - SECONDS))
    ((left > 120)) && left=120
    echo "$left"
}

# run OUTFILE CMD...: CMD with stdout to OUTFILE, stderr to the log, under
# the time budget; prints nothing, returns CMD's status (124: out of time).
run() {
    local out=$1 t
    shift
    t=$(budget)
    if ((t < 5)); then
        echo "(not run: out of time) $*" >>"$log"
        return 124
    fi
    note "$* (timeout ${t}s)"
    local rc=0
    timeout -k 10 "$t" "$@" >"$out" 2>>"$log" || rc=$?
    echo "(exit status $rc)" >>"$log"
    return "$rc"
}

# check NAME CMD...: one table row from a checker command (its last line is
# the detail; status 0 ok, else failed).
check() {
    local name=$1 out rc=0
    shift
    note "check: $name: $*"
    out=$("$@" 2>>"$log") || rc=$?
    printf '%s\n' "$out" >>"$log"
    if ((rc == 0)); then
        record "$name" ok "${out##*$'\n'}"
    else
        record "$name" FAILED "${out##*$'\n'}"
    fi
}

# same_output NAME UNTRACED_OUT UNTRACED_RC TRACED_OUT TRACED_RC
same_output() {
    if cmp -s "$2" "$4" && [[ $3 == "$5" ]]; then
        record "$1" ok "identical stdout, exit status $3"
    else
        record "$1" FAILED "stdout differs or status $5 != $3 (diff in run.log)"
        diff "$2" "$4" >>"$log" 2>&1 || true
    fi
}

# passes NAME OUTFILE RC: the program's own verdict, from its last line.
passes() {
    local last
    last=$(tail -n 1 "$2" 2>/dev/null || true)
    if [[ $3 == 0 ]]; then
        record "$1" ok "$last"
    else
        record "$1" FAILED "exit status $3: ${last:-no output} (see work/)"
    fi
}

# reports DIR NAME: cutrace summary and timeline of a trace directory into
# the work directory (summary first: it folds the rings of killed processes).
reports() {
    local rc=0
    note "cutrace summary $1"
    "$cutrace" summary "$1" >"$work/$2-summary.txt" 2>>"$log" || rc=$?
    "$cutrace" timeline "$1" >"$work/$2-timeline.txt" 2>>"$log" || rc=$?
    return "$rc"
}

ns() { date +%s%N; }

gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
    head -n 1 || true)
say "== cutrace GPU test: ${gpu:-no GPU (forced)}; logs in $outdir"

# ---- build ----

# Binaries built elsewhere (carried to a GPU machine that cannot build them)
# are kept aside first: a failed link deletes its output.
prebuilt=$work/prebuilt
if [[ -f $build/libcutrace.so && -x $build/cutrace ]]; then
    mkdir -p "$prebuilt"
    cp -p "$build/libcutrace.so" "$build/cutrace" "$prebuilt/"
fi
note "make $build/libcutrace.so $build/cutrace"
if make -C "$root" -j"$(nproc)" BUILD="$build" "$build/libcutrace.so" "$build/cutrace" \
    >>"$log" 2>&1; then
    record "build: libcutrace.so and cutrace (make)" ok "$build"
elif [[ -d $prebuilt ]]; then
    cp -p "$prebuilt/libcutrace.so" "$prebuilt/cutrace" "$build/"
    record "build: libcutrace.so and cutrace (make)" ok "make failed here; prebuilt $build used"
else
    record "build: libcutrace.so and cutrace (make)" FAILED "make failed (run.log)"
fi
rm -rf "$prebuilt"
# Binaries built on another machine may need a library this one lacks; the
# dynamic linker would then drop the preload with a one-line warning and
# every trace check would fail for a reason this row names.
for binary in "$build/libcutrace.so" "$cutrace"; do
    if [[ -e $binary ]] && missing=$(ldd "$binary" 2>&1 | grep 'not found'); then
        record "build: $(basename "$binary") loads here" FAILED "$(echo "$missing" | tr -s ' \t\n' ' ')"
    fi
done

prog=$work/real_gpu_check
note "examples/real_gpu/build.sh $prog"
if [[ ! -x $cutrace ]]; then
    record "build: real_gpu_check (nvcc)" skipped "no cutrace to run it with"
elif bash "$root/examples/real_gpu/build.sh" "$prog" >>"$log" 2>&1; then
    record "build: real_gpu_check (nvcc)" ok "sm_90, shared libcudart, NCCL"
else
    record "build: real_gpu_check (nvcc)" FAILED "nvcc failed (run.log)"
fi

# ---- the CUDA program ----

if [[ -x $prog ]]; then
    rc_u=0 rc_t=0
    (cd "$work" && run "$work/cuda.untraced.out" "$prog") || rc_u=$?
    (cd "$work" && run "$work/cuda.traced.out" "$cutrace" run -o "$work/cuda-trace" -- "$prog") ||
        rc_t=$?
    passes "cuda: the program's own checks (untraced)" "$work/cuda.untraced.out" "$rc_u"
    same_output "cuda: traced run = untraced run" "$work/cuda.untraced.out" "$rc_u" \
        "$work/cuda.traced.out" "$rc_t"
    d=$work/cuda-trace
    if compgen -G "$d/*.db" >/dev/null && reports "$d" cuda; then
        check "cuda: every API traced" "$python" "$checker" apis "$d" \
            cudaSetDevice cudaMalloc cudaFree cudaMemGetInfo cudaMallocAsync cudaFreeAsync \
            cudaMallocFromPoolAsync cudaGetDriverEntryPointByVersion cuMemCreate \
            cuMemAddressReserve cuMemMap cuMemSetAccess cuMemUnmap cuMemRelease cuMemAddressFree \
            cudaIpcGetMemHandle cudaIpcOpenMemHandle cudaIpcCloseMemHandle ncclGetVersion \
            ncclGetUniqueId ncclCommInitRank 'cudaStreamBeginCapture%' 'cudaStreamEndCapture%' \
            'cudaGraphInstantiate%' 'cudaGraphLaunch%' ncclAllReduce ncclCommFinalize \
            ncclCommDestroy
        check "cuda: the GiB allocations of the 4 roads" "$python" "$checker" count "$d" 4 \
            "SELECT count(DISTINCT api) FROM allocations WHERE size >= 1073741824 AND api IN
             ('cudaMalloc', 'cudaMallocAsync', 'cudaMallocFromPoolAsync', 'cuMemCreate')"
        check "cuda: VMM entry points handed out wrapped" "$python" "$checker" count "$d" 7 \
            "SELECT count(DISTINCT symbol) FROM driver_lookups WHERE wrapped = 1 AND symbol IN
             ('cuMemCreate', 'cuMemAddressReserve', 'cuMemMap', 'cuMemSetAccess', 'cuMemUnmap',
              'cuMemRelease', 'cuMemAddressFree')"
        check "cuda: IPC importer joins the exporter" "$python" "$checker" ipc "$d"
        check "cuda: NCCL's own buffers (module libnccl)" "$python" "$checker" count "$d" 1 \
            "SELECT count(*) FROM allocations WHERE module LIKE '%libnccl%'
             AND kind IN ('device', 'vmm')"
        check "cuda: allreduce eager and in a graph" "$python" "$checker" count "$d" 2 \
            "SELECT count(DISTINCT captured) FROM collectives WHERE result = 0
             AND op = 'ncclAllReduce'"
        check "cuda: live+unexplained=used, unexplained ok" "$python" "$checker" timeline \
            "$cutrace" "$d" "$lo_mib" "$hi_mib"
    else
        record "cuda: traces" FAILED "no readable trace in $d (run.log)"
    fi
fi

# ---- PyTorch ----

torch_script=$root/examples/real_gpu/torch_check.py
torch_state=$(timeout 120 "$python" -c '
import sys
try:
    import torch
except ImportError:
    print("torch is not installed"); sys.exit(0)
print("ok" if torch.cuda.is_available() else "torch sees no GPU")' 2>>"$log" ||
    echo "$python cannot run")

if [[ $torch_state != ok ]]; then
    record "torch: every check" skipped "$torch_state"
elif [[ ! -x $cutrace ]]; then
    record "torch: every check" skipped "no cutrace"
else
    # The default allocator, N times each way: the first pair is checked in
    # full, every pair compared, and the best times give the overhead.
    best_u='' best_t='' same=0 done_runs=0
    for ((i = 1; i <= runs; i++)); do
        rc_u=0 rc_t=0
        t0=$(ns)
        run "$work/torch.untraced.$i.out" "$python" "$torch_script" || rc_u=$?
        t1=$(ns)
        run "$work/torch.traced.$i.out" "$cutrace" run -o "$work/torch-trace-$i" -- \
            "$python" "$torch_script" || rc_t=$?
        t2=$(ns)
        if ((i == 1)); then
            passes "torch: the script's own checks (untraced)" "$work/torch.untraced.1.out" "$rc_u"
            first_rc_u=$rc_u first_rc_t=$rc_t
        fi
        if cmp -s "$work/torch.untraced.$i.out" "$work/torch.traced.$i.out" && [[ $rc_u == "$rc_t" ]]
        then
            same=$((same + 1))
        else
            diff "$work/torch.untraced.$i.out" "$work/torch.traced.$i.out" >>"$log" 2>&1 || true
        fi
        # Only the first pair's traces are checked; the others only timed.
        ((i == 1)) || rm -rf "$work/torch-trace-$i"
        ((rc_u == 124 || rc_t == 124)) && break
        done_runs=$i
        u=$((t1 - t0)) t=$((t2 - t1))
        [[ -z $best_u ]] || ((u < best_u)) || u=$best_u
        [[ -z $best_t ]] || ((t < best_t)) || t=$best_t
        best_u=$u best_t=$t
    done
    if ((same == runs)); then
        record "torch: traced runs = untraced runs" ok \
            "identical stdout in $runs of $runs pairs, exit status $first_rc_u"
    else
        record "torch: traced runs = untraced runs" FAILED \
            "$same of $runs pairs identical (first: status $first_rc_t vs $first_rc_u)"
    fi
    d=$work/torch-trace-1
    if compgen -G "$d/*.db" >/dev/null && reports "$d" torch; then
        check "torch: every API traced" "$python" "$checker" apis "$d" \
            cudaMalloc cudaFree cudaMemGetInfo 'ncclCommInit%' ncclAllReduce \
            'cudaStreamBeginCapture%' 'cudaStreamEndCapture%' 'cudaGraphInstantiate%' \
            'cudaGraphLaunch%'
        check "torch: the 2 GiB tensor's segment" "$python" "$checker" count "$d" 1 \
            "SELECT count(*) FROM allocations WHERE kind = 'device' AND size >= 2147483648"
        check "torch: NCCL's own buffers (module libnccl)" "$python" "$checker" count "$d" 1 \
            "SELECT count(*) FROM allocations WHERE module LIKE '%libnccl%'
             AND kind IN ('device', 'vmm')"
        check "torch: allreduce eager and in a graph" "$python" "$checker" count "$d" 2 \
            "SELECT count(DISTINCT captured) FROM collectives WHERE result = 0
             AND op = 'ncclAllReduce'"
        check "torch: live+unexplained=used, unexplained ok" "$python" "$checker" timeline \
            "$cutrace" "$d" "$lo_mib" "$hi_mib"
    else
        record "torch: traces" FAILED "no readable trace in $d (run.log)"
    fi
    if ((done_runs == runs)); then
        # Wall time of the whole script (interpreter, import torch, CUDA and
        # NCCL set-up included): what a user of `cutrace run` waits for.
        pct=$(awk -v u="$best_u" -v t="$best_t" 'BEGIN { printf "%+.1f", (t - u) * 100 / u }')
        detail=$(awk -v u="$best_u" -v t="$best_t" -v p="$pct" -v n="$runs" \
            'BEGIN { printf "%s%% (best of %d: %.2f s traced, %.2f s untraced)", p, n, t / 1e9, u / 1e9 }')
        if awk -v u="$best_u" -v t="$best_t" 'BEGIN { exit !((t - u) < 0.05 * u) }'; then
            record "torch: tracing overhead under 5%" ok "$detail"
        else
            record "torch: tracing overhead under 5%" FAILED "$detail"
        fi
    else
        record "torch: tracing overhead under 5%" FAILED "out of time after $done_runs runs"
    fi

    # The other road of the caching allocator, and a transformers model.
    export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    rc_u=0 rc_t=0
    run "$work/torch-expandable.untraced.out" "$python" "$torch_script" --transformers || rc_u=$?
    run "$work/torch-expandable.traced.out" "$cutrace" run -o "$work/torch-expandable-trace" -- \
        "$python" "$torch_script" --transformers || rc_t=$?
    unset PYTORCH_CUDA_ALLOC_CONF
    passes "torch expandable: the script's own checks" "$work/torch-expandable.untraced.out" \
        "$rc_u"
    same_output "torch expandable: traced run = untraced run" \
        "$work/torch-expandable.untraced.out" "$rc_u" "$work/torch-expandable.traced.out" "$rc_t"
    transformers_line=$(grep '^transformers: ' "$work/torch-expandable.untraced.out" || true)
    case $transformers_line in
    "transformers: ok"*) record "torch expandable: a transformers model" ok "${transformers_line#*: }" ;;
    "transformers: skipped"*) record "torch expandable: a transformers model" skipped "not installed" ;;
    *) record "torch expandable: a transformers model" FAILED "${transformers_line:-no result line}" ;;
    esac
    d=$work/torch-expandable-trace
    if compgen -G "$d/*.db" >/dev/null && reports "$d" torch-expandable; then
        check "torch expandable: every API traced" "$python" "$checker" apis "$d" \
            cuMemAddressReserve cuMemCreate cuMemMap cuMemSetAccess cuMemUnmap cuMemRelease \
            cudaMemGetInfo ncclAllReduce
        check "torch expandable: segments are VMM memory" "$python" "$checker" count "$d" 1 \
            "SELECT count(*) FROM allocations WHERE kind = 'vmm'
             AND coalesce(module, '') NOT LIKE '%libnccl%'"
        check "torch expandable: live+unexplained=used, ok" "$python" "$checker" timeline \
            "$cutrace" "$d" "$lo_mib" "$hi_mib"
    else
        record "torch expandable: traces" FAILED "no readable trace in $d (run.log)"
    fi
fi

# ---- what comes back ----

# One archive, so that a device machine's few returned files hold it all;
# the traces go in only while it stays under 15 MiB.
note "archiving $work"
if tar -czf "$outdir/work.tar.gz" -C "$outdir" work 2>>"$log" &&
    (($(stat -c %s "$outdir/work.tar.gz") > 15 * 1024 * 1024)); then
    tar -czf "$outdir/work.tar.gz" -C "$outdir" --exclude='*.db' --exclude='*.ring' \
        --exclude='*.db-wal' --exclude='*.db-shm' work 2>>"$log" || true
    echo "traces left out of work.tar.gz: over 15 MiB" >>"$log"
fi
rm -rf "$work"

passed=0 failed=0 skipped=0
{
    printf '%-50s %-8s %s\n' check result detail
    for i in "${!names[@]}"; do
        printf '%-50s %-8s %s\n' "${names[$i]}" "${statuses[$i]}" "${details[$i]}"
        case ${statuses[$i]} in
        ok) passed=$((passed + 1)) ;;
        skipped) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)) ;;
        esac
    done
    printf '%d passed, %d failed, %d skipped\n' "$passed" "$failed" "$skipped"
} >"$outdir/summary.txt"
tee -a "$log" <"$outdir/summary.txt"
((failed == 0))
