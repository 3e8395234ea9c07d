#!/usr/bin/env bash
# shellcheck disable=SC2317 # the steps run through step(), which it cannot follow
# run.sh - cutrace on a real NVIDIA GPU. Runs the programs of examples/real_gpu
# (the roads of a server's memory story, a CUDA C program, a PyTorch script
# both allocator ways) untraced and under `cutrace run`, and checks each
# trace against the program's own ground truth (its facts file: what it held,
# what torch reserved, where its tensor lives) rather than against the
# tracer's own arithmetic. tests/gpu/README.md says how to run it on the
# project's device machine in one call; `make gpu-test` runs it here.
#
#   bash tests/gpu/run.sh [--gpu auto|required] [--budget SECONDS] [OUTDIR]
#
# A device machine gives a test one run, so this script is built to not waste
# it:
#   - the steps run in order of value (the story's roads first) and each one
#     starts only if its estimated time fits in what is left of --budget; a
#     step that does not fit is reported "not run", never cut in the middle;
#   - OUTDIR is filled as the run goes: summary.txt is rewritten after every
#     row, run.log is appended to, each step's files are packed into
#     OUTDIR/<step>.tar.gz as soon as it ends, and a trap (TERM, INT, HUP)
#     finishes the table before leaving: a kill at the time limit loses at
#     most the step in flight;
#   - at most GPU_TEST_MAX_FILES files (default 8) of at most GPU_TEST_FILE_MB
#     (16) MiB each: summary.txt, run.log, machine.txt, then one archive per
#     step, traces included while they fit (the largest left out first, each
#     one named in run.log);
#   - --gpu required (GPU=required) fails at once, saying why, when there is
#     no GPU, no working driver, no torch that sees the GPU, or no nvcc;
#     auto (the default) prints "skipped: no GPU" and exits 0 without a GPU.
#
# Exit status: 0 every row ok or skipped; 1 a row failed; 3 nothing failed
# but some steps did not fit in the budget; 2 usage.
#
# Environment:
#   BUILD       cutrace's build directory (default build). When it holds
#               libcutrace.so, cutrace and source-hash equal to this tree's
#               (tests/gpu/source_hash.sh), make is not run at all: that is a
#               build carried from another machine. Otherwise make builds
#               there, and a failed make falls back to the binaries found,
#               with a FAILED "stale build" row.
#   PYTHON      the python with torch (default /opt/torch/.venv/bin/python3
#               when it exists, else python3); used for every Python step
#   GPU_TEST_RUNS     torch runs each way for the overhead (default 3, best of)
#   GPU_TEST_MAX_FILES, GPU_TEST_FILE_MB   what OUTDIR may hold (see above)
#   GPU_TEST_KEEP=1   keep the work directory (it is printed)
#   CUDA_HOME, NVCC, NCCL_HOME   for examples/real_gpu/build.sh
#   CUTRACE_GPU_TEST_FAKE=1   the dry run: everything on the fake stack (the
#               fake driver, runtime and NCCL of build/fake, the fake
#               libcudart.so.13 for nvcc-built code, the fake torch of
#               tests/gpu/faketorch), so that every step and check runs here;
#               the numbers are not a GPU's, the code paths are the real ones;
#               CUTRACE_GPU_TEST_FAKES names the build directory holding the
#               fakes (default BUILD)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

usage() {
    echo "usage: run.sh [--gpu auto|required] [--budget SECONDS] [OUTDIR]" >&2
    exit 2
}

gpu_mode=${GPU:-auto}
budget_s=${GPU_TEST_BUDGET:-420}
outdir=''
while (($#)); do
    case $1 in
    --gpu) gpu_mode=${2:-}; shift 2 || usage ;;
    --gpu=*) gpu_mode=${1#*=}; shift ;;
    --budget) budget_s=${2:-}; shift 2 || usage ;;
    --budget=*) budget_s=${1#*=}; shift ;;
    -h | --help) usage ;;
    -*) echo "run.sh: unknown option $1" >&2; usage ;;
    *) [[ -z $outdir ]] || usage; outdir=$1; shift ;;
    esac
done
[[ $gpu_mode == auto || $gpu_mode == required ]] || {
    echo "run.sh: --gpu must be auto or required, not '$gpu_mode'" >&2
    usage
}
[[ $budget_s =~ ^[1-9][0-9]*$ ]] || {
    echo "run.sh: --budget must be a number of seconds, not '$budget_s'" >&2
    usage
}
runs=${GPU_TEST_RUNS:-3}
max_files=${GPU_TEST_MAX_FILES:-8}
file_mb=${GPU_TEST_FILE_MB:-16}
for v in runs max_files file_mb; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
        echo "run.sh: $v must be a positive number, not '${!v}'" >&2
        exit 2
    }
done
((max_files >= 3)) || { echo "run.sh: GPU_TEST_MAX_FILES must be at least 3" >&2; exit 2; }
fake=${CUTRACE_GPU_TEST_FAKE:-0}
deadline=$((SECONDS + budget_s))

build=${BUILD:-build}
[[ $build == /* ]] || build=$root/$build
if [[ -n ${PYTHON:-} ]]; then
    python=$PYTHON
elif [[ $fake != 1 && -x /opt/torch/.venv/bin/python3 ]]; then
    python=/opt/torch/.venv/bin/python3
else
    python=python3
fi
export PYTHON=$python # build.sh's NCCL-wheel search uses the same one
cutrace=$build/cutrace
checker=$root/tests/gpu/check_trace.py
examples=$root/examples/real_gpu

# ---- the fake stack (dry run) ----

if [[ $fake == 1 ]]; then
    # The fakes must win over the toolkit's libraries the program's rpath
    # names (build.sh links with DT_RUNPATH, below LD_LIBRARY_PATH).
    # The fakes come from CUTRACE_GPU_TEST_FAKES (a build directory; default
    # BUILD), so that a bare carried build can be dry-run too.
    fakes=${CUTRACE_GPU_TEST_FAKES:-$build}
    export LD_LIBRARY_PATH=$fakes/gpu/fake13:$fakes/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PYTHONPATH=$root/tests/gpu/faketorch${PYTHONPATH:+:$PYTHONPATH}
    export CUTRACE_FAKETORCH_LIB=$fakes/gpu/faketorch/lib
    export CUTRACE_FAKE_GPU_NAME='NVIDIA H200 (cutrace fake)' CUTRACE_FAKE_GPU_MEM=141G
    # Without them the toolkit's real libraries would answer, and every check
    # would fail for a reason that has nothing to do with the script.
    for f in "$fakes/fake/libcuda.so.1" "$fakes/gpu/fake13/libcudart.so.13" \
        "$CUTRACE_FAKETORCH_LIB/libc10_cuda.so" "$CUTRACE_FAKETORCH_LIB/libtorch_cuda.so"; do
        [[ -e $f ]] || {
            echo "FAILED: the dry run needs $f (make gpu-script-check builds it)"
            exit 1
        }
    done
fi

# ---- is there a GPU, a driver, torch, nvcc? ----

nvidia_smi=$(command -v nvidia-smi || true)
[[ -n $nvidia_smi || ! -x /usr/local/nvidia/bin/nvidia-smi ]] ||
    nvidia_smi=/usr/local/nvidia/bin/nvidia-smi

# The driver, asked directly (cuInit and cuDeviceGetCount through ctypes, in
# a process of its own): a device node or nvidia-smi alone proves nothing.
driver_state() {
    timeout 60 "$python" - <<'EOF' 2>/dev/null || echo "cannot ask the driver ($python)"
import ctypes
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print(f"no libcuda.so.1: {e}"); raise SystemExit
rc = cuda.cuInit(0)
n = ctypes.c_int(0)
if rc == 0:
    rc = cuda.cuDeviceGetCount(ctypes.byref(n))
print("ok" if rc == 0 and n.value > 0 else f"cuInit/cuDeviceGetCount: CUresult {rc}, {n.value} devices")
EOF
}

# GPU_TEST_DEVICE_NODES: only for script_check.sh, which walks this road on
# the fake stack with a stand-in node and nvidia-smi.
read -r -a device_nodes <<<"${GPU_TEST_DEVICE_NODES:-/dev/nvidia0 /dev/nvidiactl}"
no_gpu_reason() {
    local node found=''
    for node in "${device_nodes[@]}"; do
        [[ -e $node ]] && found=$node
    done
    if [[ -z $found ]]; then
        echo "no ${device_nodes[*]}"
    elif [[ -z $nvidia_smi ]]; then
        echo "no nvidia-smi on PATH or in /usr/local/nvidia/bin"
    elif ! timeout 60 "$nvidia_smi" -L >/dev/null 2>&1; then
        echo "nvidia-smi -L failed"
    fi
}

if [[ $fake != 1 ]]; then
    reason=$(no_gpu_reason)
    if [[ -z $reason ]]; then
        state=$(driver_state)
        # A driver mounted where the loader does not look (a container's
        # /usr/local/nvidia): tell the loader, once, for every step.
        if [[ $state != ok && -e /usr/local/nvidia/lib64/libcuda.so.1 ]]; then
            export LD_LIBRARY_PATH=/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
            state=$(driver_state)
        fi
        [[ $state == ok ]] || reason="the driver does not work: $state"
    fi
    if [[ -n $reason ]]; then
        if [[ $gpu_mode == required ]]; then
            echo "FAILED: no usable GPU: $reason (--gpu required)"
            echo "run.sh: $reason" >&2
            exit 1
        fi
        echo "skipped: no GPU"
        echo "run.sh: $reason" >&2
        exit 0
    fi
fi

# Work files live outside OUTDIR: a device machine returns only a few files
# from it, and a half-written trace there would be one of them.
work=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-gpu-work.XXXXXX")
export CUTRACE_FAKE_STATE=$work/fake-state
trap 'rm -rf "$work"' EXIT # until the table's own trap, below

torch_state=$(timeout 120 "$python" -c '
import sys
try:
    import torch
except ImportError:
    print("torch is not installed for " + sys.executable); sys.exit(0)
print("ok" if torch.cuda.is_available() else "torch sees no GPU")' 2>/dev/null ||
    echo "$python cannot run")
nvcc=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
[[ -x $nvcc ]] || nvcc=$(command -v nvcc || true)
if [[ $gpu_mode == required ]]; then
    [[ $torch_state == ok ]] || { echo "FAILED: $torch_state (--gpu required)"; exit 1; }
    [[ -n $nvcc ]] || { echo "FAILED: no nvcc (set NVCC or CUDA_HOME) (--gpu required)"; exit 1; }
fi

# ---- the output directory, the work directory, the table ----

outdir=${outdir:-$(mktemp -d "${TMPDIR:-/tmp}/cutrace-gpu-test.XXXXXX")}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
log=$outdir/run.log
summary=$outdir/summary.txt
: >"$log"
rm -f "$outdir"/*.tar.gz "$outdir/machine.txt" "$summary"
files_used=3 # summary.txt, run.log, machine.txt
# NCCL's warnings (what explains a failed init) go to a file per process, not
# stdout: NCCL_DEBUG without NCCL_DEBUG_FILE prints pids and times there.
unset NCCL_DEBUG_SUBSYS
export NCCL_DEBUG=WARN

names=() statuses=() details=()
write_summary() {
    local passed=0 failed=0 skipped=0 notrun=0 i
    {
        printf '%-56s %-8s %s\n' check result detail
        for i in "${!names[@]}"; do
            printf '%-56s %-8s %s\n' "${names[$i]}" "${statuses[$i]}" "${details[$i]}"
            case ${statuses[$i]} in
            ok) passed=$((passed + 1)) ;;
            skipped) skipped=$((skipped + 1)) ;;
            not-run) notrun=$((notrun + 1)) ;;
            *) failed=$((failed + 1)) ;;
            esac
        done
        printf '%d passed, %d failed, %d skipped, %d not run\n' "$passed" "$failed" "$skipped" \
            "$notrun"
    } >"$summary.tmp"
    mv "$summary.tmp" "$summary"
    summary_failed=$failed summary_notrun=$notrun
}
record() {
    # The table's columns are fixed (script_check.sh reads them so).
    ((${#1} <= 56)) || echo "run.sh: row name over 56 characters: $1" >>"$log"
    names+=("$1") statuses+=("$2") details+=("$3")
    write_summary
}

say() { printf '%s\n' "$*" | tee -a "$log"; }
note() { printf '\n== %s\n' "$*" >>"$log"; }
left() { echo $((deadline - SECONDS)); }

# ---- packing a step's files into OUTDIR ----

# pack NAME: work/NAME into OUTDIR/NAME.tar.gz, at most file_mb MiB. The
# outputs, facts and reports always go in; the traces (.db, .ring) go in
# smallest first while the archive stays under the limit.
pack() {
    local name=$1 dir=$work/$1 cap=$((file_mb * 1024 * 1024)) archive=$outdir/$1.tar.gz
    [[ -d $dir ]] && [[ -n $(find "$dir" -type f -print -quit) ]] || return 0
    if ((files_used >= max_files)); then
        echo "not packed: $name (GPU_TEST_MAX_FILES=$max_files reached)" >>"$log"
        return 0
    fi
    local others traces kept=() f left_out=()
    others=$(cd "$work" && find "$name" -type f ! -name '*.db' ! -name '*.ring' | LC_ALL=C sort)
    traces=$(cd "$work" && find "$name" -type f \( -name '*.db' -o -name '*.ring' \) -printf '%s %p\n' |
        sort -n | cut -d' ' -f2-)
    tar_of() { (cd "$work" && printf '%s\n' "$@" | grep -v '^$' |
        tar -czf "$archive.tmp" --no-recursion -T -); }
    # shellcheck disable=SC2086
    tar_of $others 2>>"$log" || true
    if (($(stat -c %s "$archive.tmp" 2>/dev/null || echo 0) > cap)); then
        echo "$name: its outputs alone are over ${file_mb} MiB; traces left out" >>"$log"
        traces=''
    fi
    for f in $traces; do
        # shellcheck disable=SC2086
        if tar_of $others "${kept[@]}" "$f" 2>>"$log" && (($(stat -c %s "$archive.tmp") <= cap)); then
            kept+=("$f")
        else
            left_out+=("$f")
        fi
    done
    # shellcheck disable=SC2086
    tar_of $others "${kept[@]}" 2>>"$log" || true
    mv "$archive.tmp" "$archive"
    files_used=$((files_used + 1))
    echo "packed $name.tar.gz: $(stat -c %s "$archive") bytes, ${#kept[@]} trace files" >>"$log"
    ((${#left_out[@]} == 0)) ||
        echo "$name: traces left out (over ${file_mb} MiB): ${left_out[*]}" >>"$log"
}

current_step='' child='' stopped_by=''
finish() {
    local rc=$?
    trap - EXIT TERM INT HUP
    if [[ -n $child ]]; then
        kill -TERM "$child" 2>/dev/null || true # timeout passes it on to the program
        wait "$child" 2>/dev/null || true
    fi
    if [[ -n $current_step ]]; then
        record "$current_step: interrupted" FAILED "stopped during this step (${stopped_by:-status $rc})"
        pack "$current_step" || true
    elif [[ -n $stopped_by ]]; then
        record "run: interrupted" FAILED "stopped between steps ($stopped_by)"
    fi
    write_summary
    tee -a "$log" <"$summary"
    if [[ ${GPU_TEST_KEEP:-0} == 1 ]]; then
        echo "work directory kept: $work" >>"$log"
    else
        rm -rf "$work"
    fi
    if ((summary_failed > 0)); then
        exit 1
    elif ((summary_notrun > 0)); then
        exit 3
    fi
    exit 0
}
on_signal() {
    stopped_by=SIG$1
    echo "run.sh: stopped by SIG$1" >>"$log"
    exit 1 # runs finish() through the EXIT trap
}
trap finish EXIT
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'on_signal HUP' HUP

# ---- running programs ----

# run OUT ERR CMD...: CMD with stdout to OUT and stderr to ERR (copied to the
# log), under a timeout of at most 150 s and never past the budget; returns
# CMD's status (124 or 137: it ran out of time).
run() {
    local out=$1 err=$2 t rc=0
    shift 2
    t=$(left)
    ((t > 150)) && t=150
    if ((t < 5)); then
        echo "(not run: out of time) $*" >>"$log"
        : >"$out"
        echo "not run: out of time" >"$err"
        return 124
    fi
    note "$* (timeout ${t}s)"
    # In the background, so that a signal reaches the trap at once (bash runs
    # traps only between foreground commands); finish() stops the child.
    timeout -k 10 "$t" "$@" >"$out" 2>"$err" &
    child=$!
    wait "$child" || rc=$?
    child=''
    cat "$err" >>"$log"
    echo "(exit status $rc)" >>"$log"
    return "$rc"
}
timed_out() { [[ $1 == 124 || $1 == 137 ]]; }

# pair STEP NAME CMD...: CMD untraced, then traced into work/STEP/NAME-trace,
# with NCCL's warnings in files of their own. Sets rc_u and rc_t, and ns_u
# and ns_t, the wall time of each.
pair() {
    local name=$2 d=$work/$1 t0 t1
    shift 2
    mkdir -p "$d/nccl"
    rc_u=0 rc_t=0
    t0=$(date +%s%N)
    NCCL_DEBUG_FILE=$d/nccl/$name-untraced.%h.%p.log \
        run "$d/$name.untraced.out" "$d/$name.untraced.err" "$@" \
        --facts "$d/$name.untraced.facts" || rc_u=$?
    t1=$(date +%s%N)
    NCCL_DEBUG_FILE=$d/nccl/$name-traced.%h.%p.log \
        run "$d/$name.traced.out" "$d/$name.traced.err" "$cutrace" run -o "$d/$name-trace" -- "$@" \
        --facts "$d/$name.traced.facts" || rc_t=$?
    ns_u=$((t1 - t0)) ns_t=$(($(date +%s%N) - t1))
}

# check NAME CMD...: one table row from a checker (its last line is the
# detail; status 0 ok, anything else failed).
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
ck() { check "$1" "$python" "$checker" "${@:2}"; }

# same_output NAME STEP PROG: traced and untraced stdout and status alike.
same_output() {
    local d=$work/$2
    if timed_out "$rc_u" || timed_out "$rc_t"; then
        record "$1" FAILED "out of time (status $rc_u untraced, $rc_t traced)"
    elif cmp -s "$d/$3.untraced.out" "$d/$3.traced.out" && [[ $rc_u == "$rc_t" ]]; then
        record "$1" ok "identical stdout, exit status $rc_u"
    else
        record "$1" FAILED "stdout differs or status $rc_t != $rc_u (diff in run.log)"
        diff "$d/$3.untraced.out" "$d/$3.traced.out" >>"$log" 2>&1 || true
    fi
}

# passes NAME OUTFILE RC: the program's own verdict, from its last line.
passes() {
    local last
    last=$(tail -n 1 "$2" 2>/dev/null || true)
    if [[ $3 == 0 ]]; then
        record "$1" ok "$last"
    elif timed_out "$3"; then
        record "$1" FAILED "out of time (status $3): ${last:-no output}"
    else
        record "$1" FAILED "exit status $3: ${last:-no output} ($(grep -c FAILED "$2" || true) FAILED lines)"
    fi
}

# trace_files DIR: the trace files of DIR, a `cutrace run -o DIR`: its own
# *.db, or those of the run directory (DIR/run-...) cutrace run made there.
trace_files() {
    compgen -G "$1/*.db" || compgen -G "$1/run-*/*.db"
}

# traces_rows PREFIX DIR: the rows every traced program gets. The reports are
# a row of their own: a failing report never hides the SQL checks.
traces_rows() {
    local p=$1 d=$2 rc=0
    if ! trace_files "$d" >/dev/null; then
        record "$p: traces" FAILED "no trace file in $d (run.log)"
        return 1
    fi
    note "cutrace summary/timeline $d"
    "$cutrace" summary "$d" >"$d.summary.txt" 2>>"$log" || rc=$?
    "$cutrace" timeline "$d" >"$d.timeline.txt" 2>>"$log" || rc=$?
    if ((rc == 0)); then
        record "$p: cutrace summary and timeline" ok "$(trace_files "$d" | wc -l) trace files"
    else
        record "$p: cutrace summary and timeline" FAILED "status $rc (run.log)"
    fi
    ck "$p: all exited, nothing lost" ends "$d"
    ck "$p: no cutrace warnings" warnings "$d/../$(basename "$d" -trace).traced.err"
    ck "$p: device and versions recorded" devices "$d"
    return 0
}

# step NAME SECONDS FUNCTION: FUNCTION, if its estimate fits in the budget.
step() {
    local name=$1 est=$2 fn=$3 t0=$SECONDS
    if (($(left) < est)); then
        record "$name" not-run "needs about ${est}s on an H200, $(left)s of the budget left"
        return 0
    fi
    current_step=$name
    mkdir -p "$work/$name"
    say "== $name (estimated ${est}s, $(left)s left)"
    "$fn" || record "$name: step" FAILED "the step's script failed (run.log)"
    current_step=''
    echo "step $name took $((SECONDS - t0))s (estimated ${est}s)" >>"$log"
    pack "$name"
}

# ---- machine facts ----

machine_facts() {
    {
        echo "date: $(date -u +%FT%TZ)"
        echo "uname: $(uname -a)"
        echo "mode: $([[ $fake == 1 ]] && echo 'dry run on the fake stack' || echo "real GPU, --gpu $gpu_mode")"
        echo "budget: ${budget_s}s; files: at most $max_files of ${file_mb} MiB"
        echo "python: $python ($("$python" -c 'import sys; print(sys.version.split()[0])' 2>&1))"
        echo "torch: $torch_state"
        "$python" -c 'import torch
print("torch version:", torch.__version__, "cuda", torch.version.cuda)
try:
    print("torch nccl:", torch.cuda.nccl.version())
except Exception as e:
    print("torch nccl: unknown:", e)' 2>&1 || true
        echo "nvcc: ${nvcc:-none} $([[ -n $nvcc ]] && "$nvcc" --version 2>&1 | tail -n 2 | tr '\n' ' ')"
        echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
        echo "build: $build"
        echo "source hash of this tree: $(bash "$root/tests/gpu/source_hash.sh")"
        echo "source hash of the build: $(cat "$build/source-hash" 2>/dev/null || echo none)"
        for binary in "$build/libcutrace.so" "$cutrace"; do
            echo "ldd $binary:"
            ldd "$binary" 2>&1 | sed 's/^/    /'
        done
        if [[ -n $nvidia_smi && $fake != 1 ]]; then
            echo "nvidia-smi:"
            timeout 60 "$nvidia_smi" 2>&1 | sed 's/^/    /'
            timeout 60 "$nvidia_smi" --query-gpu=name,uuid,driver_version,memory.total,memory.used \
                --format=csv 2>&1 | sed 's/^/    /'
        fi
    } >"$outdir/machine.txt" 2>&1
}

# ---- the build ----

step_build() {
    local want have
    want=$(bash "$root/tests/gpu/source_hash.sh")
    have=$(cat "$build/source-hash" 2>/dev/null || true)
    if [[ -f $build/libcutrace.so && -x $cutrace && $have == "$want" ]]; then
        record "build: libcutrace.so and cutrace match these sources" ok \
            "source hash ${want:0:12} (built elsewhere or before; make not run)"
    else
        # A failed link deletes its output: keep what was there aside.
        local keep=$work/build/prebuilt
        mkdir -p "$keep"
        cp -p "$build/libcutrace.so" "$cutrace" "$keep/" 2>/dev/null || true
        note "make gpu-build BUILD=$build"
        if make -C "$root" -j"$(nproc)" BUILD="$build" gpu-build >>"$log" 2>&1; then
            record "build: libcutrace.so and cutrace match these sources" ok \
                "built here (make), source hash ${want:0:12}"
        elif [[ -f $keep/libcutrace.so ]]; then
            cp -p "$keep/libcutrace.so" "$keep/cutrace" "$build/"
            record "build: libcutrace.so and cutrace match these sources" FAILED \
                "stale build: make failed here and the build's source hash is ${have:0:12}, not ${want:0:12}; rebuild with make BUILD=... gpu-build and carry it"
        else
            record "build: libcutrace.so and cutrace match these sources" FAILED "make failed (run.log)"
        fi
        rm -rf "$keep"
    fi
    # Binaries built on another machine may need a library this one lacks:
    # the dynamic linker would drop the preload with one line of warning.
    local binary missing
    for binary in "$build/libcutrace.so" "$cutrace"; do
        if [[ ! -e $binary ]]; then
            record "build: $(basename "$binary") loads here" FAILED "missing"
        elif missing=$(ldd "$binary" 2>&1 | grep 'not found'); then
            record "build: $(basename "$binary") loads here" FAILED "$(echo "$missing" | tr -s ' \t\n' ' ')"
        else
            record "build: $(basename "$binary") loads here" ok "ldd finds every library"
        fi
    done
}

# ---- the story's roads (examples/real_gpu/story_check.py) ----

step_story() {
    local d=$work/story t=$work/story/story-trace
    if [[ $torch_state != ok ]]; then
        record "story: every check" skipped "$torch_state"
        return 0
    fi
    pair story story "$python" "$examples/story_check.py"
    passes "story: the program's own checks" "$d/story.untraced.out" "$rc_u"
    same_output "story: traced run = untraced run" story story
    traces_rows story "$t" || return 0
    ck "story: ctypes runtime IPC, importer joins exporter" ipc-facts "$t" "$d/story.traced.facts"
    ck "story: every opened handle exported elsewhere" ipc "$t"
    ck "story: two roads opened (ctypes and torch)" count "$t" 2 \
        "SELECT count(*) FROM ipc WHERE api LIKE 'cudaIpcOpenMemHandle%' AND result = 0"
    ck "story: ncclMemAlloc of 1 GiB" nccl-mem "$t" "$d/story.traced.facts"
    ck "story: pinned host memory (torch and ctypes)" pinned "$t" "$d/story.traced.facts"
    ck "story: all-reduce in a global-mode graph" graph "$t" global
    ck "story: unexplained at each process's context" context "$cutrace" "$t" "$lo_mib" "$hi_mib"
}

# ---- the CUDA C program (examples/real_gpu/real_gpu_check.cu) ----

step_cuda() {
    local d=$work/cuda t=$work/cuda/cuda-trace prog=$work/cuda/real_gpu_check
    if [[ -z $nvcc ]]; then
        record "cuda: every check" skipped "no nvcc (set NVCC or CUDA_HOME)"
        return 0
    fi
    note "examples/real_gpu/build.sh $prog"
    if NVCC=$nvcc bash "$examples/build.sh" "$prog" >>"$log" 2>&1; then
        record "cuda: real_gpu_check builds (nvcc)" ok "sm_90, shared libcudart, NCCL"
    else
        record "cuda: real_gpu_check builds (nvcc)" FAILED "nvcc failed (run.log)"
        return 0
    fi
    pair cuda cuda "$prog"
    passes "cuda: the program's own checks" "$d/cuda.untraced.out" "$rc_u"
    same_output "cuda: traced run = untraced run" cuda cuda
    traces_rows cuda "$t" || return 0
    local f=$d/cuda.traced.facts
    ck "cuda: every API traced" apis "$t" \
        cudaSetDevice cudaMalloc cudaFree cudaMemGetInfo cudaMallocAsync cudaFreeAsync \
        cudaMallocFromPoolAsync cudaGetDriverEntryPointByVersion cuMemCreate \
        cuMemAddressReserve cuMemMap cuMemSetAccess cuMemUnmap cuMemRelease cuMemAddressFree \
        cudaIpcGetMemHandle cudaIpcOpenMemHandle cudaIpcCloseMemHandle cudaHostAlloc \
        cudaMallocHost cudaFreeHost ncclMemAlloc ncclMemFree ncclGetVersion ncclGetUniqueId \
        ncclCommInitRank 'cudaStreamBeginCapture%' 'cudaStreamEndCapture%' \
        'cudaGraphInstantiate%' 'cudaGraphLaunch%' ncclAllReduce ncclCommFinalize ncclCommDestroy
    ck "cuda: held by the program = traced, each query" holdings "$t" "$f"
    ck "cuda: the GiB allocations of the 4 roads" count "$t" 4 \
        "SELECT count(DISTINCT api) FROM allocations WHERE size >= 1073741824 AND api IN
         ('cudaMalloc', 'cudaMallocAsync', 'cudaMallocFromPoolAsync', 'cuMemCreate')"
    ck "cuda: VMM entry points handed out wrapped" count "$t" 7 \
        "SELECT count(DISTINCT symbol) FROM driver_lookups WHERE wrapped = 1 AND symbol IN
         ('cuMemCreate', 'cuMemAddressReserve', 'cuMemMap', 'cuMemSetAccess', 'cuMemUnmap',
          'cuMemRelease', 'cuMemAddressFree')"
    ck "cuda: IPC importer joins the exporter" ipc-facts "$t" "$f"
    ck "cuda: ncclMemAlloc of 1 GiB" nccl-mem "$t" "$f"
    ck "cuda: pinned host memory" pinned "$t" "$f"
    ck "cuda: NCCL's own buffers (module libnccl)" count "$t" 1 \
        "SELECT count(*) FROM allocations WHERE module LIKE '%libnccl%' AND kind IN ('device', 'vmm')
         AND api != 'ncclMemAlloc'"
    ck "cuda: allreduce eager and in a graph" count "$t" 2 \
        "SELECT count(DISTINCT captured) FROM collectives WHERE result = 0 AND op = 'ncclAllReduce'"
    ck "cuda: all-reduce in a global-mode graph" graph "$t" global
    ck "cuda: unexplained at the context, and its spread" context "$cutrace" "$t" "$lo_mib" "$hi_mib"
    ck "cuda: timeline = allocations views, by uuid" timeline "$cutrace" "$t" "$lo_mib" "$hi_mib"
}

# ---- PyTorch (examples/real_gpu/torch_check.py), both allocator roads ----

best_u='' best_t='' same_pairs=0 done_pairs=0
torch_times() { # a pair's wall times, for the overhead
    local u=$1 t=$2
    [[ -z $best_u ]] || ((u < best_u)) || u=$best_u
    [[ -z $best_t ]] || ((t < best_t)) || t=$best_t
    best_u=$u best_t=$t
}
torch_pair() { # NAME ARGS...: one timed pair of the torch script
    local name=$1 d=$work/$current_step
    shift
    pair "$current_step" "$name" "$python" "$examples/torch_check.py" "$@"
    if cmp -s "$d/$name.untraced.out" "$d/$name.traced.out" && [[ $rc_u == "$rc_t" ]]; then
        same_pairs=$((same_pairs + 1))
    else
        diff "$d/$name.untraced.out" "$d/$name.traced.out" >>"$log" 2>&1 || true
    fi
    if ! timed_out "$rc_u" && ! timed_out "$rc_t"; then
        done_pairs=$((done_pairs + 1))
        torch_times "$ns_u" "$ns_t"
    fi
}

step_torch() {
    local d=$work/torch t=$work/torch/torch-trace
    if [[ $torch_state != ok ]]; then
        record "torch: every check" skipped "$torch_state"
        return 0
    fi
    torch_pair torch
    passes "torch: the script's own checks" "$d/torch.untraced.out" "$rc_u"
    same_output "torch: traced run = untraced run" torch torch
    traces_rows torch "$t" || return 0
    local f=$d/torch.traced.facts
    ck "torch: every API traced" apis "$t" \
        cudaMalloc cudaFree cudaMemGetInfo cudaHostAlloc 'ncclCommInit%' ncclAllReduce \
        'cudaStreamBeginCapture%' 'cudaStreamEndCapture%' 'cudaGraphInstantiate%' 'cudaGraphLaunch%'
    ck "torch: reserved = traced, segments = cudaMalloc rows" reserved "$t" "$f"
    ck "torch: the 2 GiB tensor's Python and c10 frames" frames "$t" "$f" big
    ck "torch: the 2 GiB tensor's segment" count "$t" 1 \
        "SELECT count(*) FROM allocations WHERE kind = 'device' AND api = 'cudaMalloc'
         AND size >= 2147483648"
    ck "torch: pinned host memory" pinned "$t" "$f"
    ck "torch: NCCL's own buffers (module libnccl)" count "$t" 1 \
        "SELECT count(*) FROM allocations WHERE module LIKE '%libnccl%' AND kind IN ('device', 'vmm')"
    ck "torch: allreduce eager and in a graph" count "$t" 2 \
        "SELECT count(DISTINCT captured) FROM collectives WHERE result = 0 AND op = 'ncclAllReduce'"
    ck "torch: all-reduce in a global-mode graph" graph "$t" global
    ck "torch: unexplained at the context, and its spread" context "$cutrace" "$t" "$lo_mib" "$hi_mib"
    ck "torch: timeline = allocations views, by uuid" timeline "$cutrace" "$t" "$lo_mib" "$hi_mib"
}

step_expandable() {
    local d=$work/torch-expandable t=$work/torch-expandable/expandable-trace
    if [[ $torch_state != ok ]]; then
        record "torch expandable: every check" skipped "$torch_state"
        return 0
    fi
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True torch_pair expandable --transformers
    passes "torch expandable: the script's own checks" "$d/expandable.untraced.out" "$rc_u"
    same_output "torch expandable: traced run = untraced run" torch-expandable expandable
    local line
    line=$(grep '^transformers: ' "$d/expandable.untraced.out" || true)
    case $line in
    "transformers: ok"*) record "torch expandable: a transformers model" ok "${line#*: }" ;;
    "transformers: skipped"*) record "torch expandable: a transformers model" skipped "${line#*: }" ;;
    *) record "torch expandable: a transformers model" FAILED "${line:-no result line}" ;;
    esac
    traces_rows "torch expandable" "$t" || return 0
    local f=$d/expandable.traced.facts
    ck "torch expandable: every API traced" apis "$t" \
        cuMemAddressReserve cuMemCreate cuMemMap cuMemSetAccess cuMemUnmap cuMemRelease \
        cudaMemGetInfo ncclAllReduce
    ck "torch expandable: the 2 GiB tensor is VMM memory" vmm-cover "$t" "$f" big
    ck "torch expandable: the tensor's Python and c10 frames" frames "$t" "$f" big
    ck "torch expandable: reserved = traced at each query" reserved "$t" "$f"
    ck "torch expandable: unexplained at the context" context "$cutrace" "$t" "$lo_mib" "$hi_mib"
    ck "torch expandable: timeline = allocations views" timeline "$cutrace" "$t" "$lo_mib" "$hi_mib"
}

# ---- every report on the real traces ----

step_reports() {
    local a=$work/torch/torch-trace b=$work/torch-expandable/expandable-trace
    if ! trace_files "$a" >/dev/null || ! trace_files "$b" >/dev/null; then
        record "reports: on the torch traces" skipped "needs both torch steps' traces"
        return 0
    fi
    ck "reports: sites, budget, diff, export on torch's" reports "$cutrace" "$b" "$a"
    if trace_files "$work/cuda/cuda-trace" >/dev/null; then
        ck "reports: the same on the CUDA program's" reports "$cutrace" "$work/cuda/cuda-trace" "$a"
    fi
}

# ---- the overhead: more torch pairs, timed ----

step_overhead() {
    if [[ $torch_state != ok ]]; then
        record "torch: overhead" skipped "$torch_state"
        return 0
    fi
    local i
    for ((i = 2; i <= runs; i++)); do
        torch_pair "timing-$i"
        rm -rf "$work/overhead/timing-$i-trace" # only timed; the first pair's trace is checked
        if timed_out "$rc_u" || timed_out "$rc_t"; then
            break
        fi
    done
    if ((same_pairs == done_pairs && done_pairs > 0)); then
        record "torch: traced runs = untraced runs, every pair" ok "$same_pairs of $done_pairs pairs"
    else
        record "torch: traced runs = untraced runs, every pair" FAILED \
            "$same_pairs of $done_pairs pairs identical"
    fi
    if ((done_pairs < runs)); then
        record "torch: tracing overhead under 5%" FAILED "only $done_pairs of $runs pairs ran"
        return 0
    fi
    local detail
    detail=$(awk -v u="$best_u" -v t="$best_t" -v n="$runs" 'BEGIN {
        printf "%+.1f%% (best of %d: %.2f s traced, %.2f s untraced)", (t - u) * 100 / u, n, t / 1e9, u / 1e9 }')
    if awk -v u="$best_u" -v t="$best_t" 'BEGIN { exit !((t - u) < 0.05 * u) }'; then
        record "torch: tracing overhead under 5%" ok "$detail"
    else
        record "torch: tracing overhead under 5%" FAILED "$detail"
    fi
}

# Bounds on "unexplained" memory at a process's first memory query (used minus
# everything traced on the GPU): the CUDA context and what the driver keeps for
# it. On Hopper at least the local-memory reserve for the stack of every thread
# that can be resident (132 SMs x 2048 threads x 1 KiB default stack = 264 MiB)
# plus the device heap (8 MiB) and printf FIFO, so never below 200 MiB; a CUDA
# 12/13 context on an H100/H200 measures about 500-600 MiB with lazy module
# loading (the default), plus kernels loaded lazily (NCCL's, PyTorch's,
# cuBLAS's) and small untraced driver allocations. 1.5 GiB leaves room for all
# of it and is below the 2 GiB every road allocates, so a road the tracer
# missed cannot hide inside the bound. The fake charges 512 MiB per context.
lo_mib=200
hi_mib=1536

say "== cutrace GPU test ($([[ $fake == 1 ]] && echo 'dry run, fake stack' || echo real GPU)); budget ${budget_s}s; files in $outdir"
machine_facts
if [[ $fake == 1 ]]; then
    gpu_line='fake stack'
else
    gpu_line=$("$nvidia_smi" --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null |
        head -n 1 || true)
fi
record "machine: GPU, driver, torch, nvcc" ok "$gpu_line; torch: $torch_state; nvcc: ${nvcc:-none}"

# In order of value, with the time each took on ... (estimated for an H200:
# README.md's table; run.log says what each really took).
step build 20 step_build
if [[ ! -x $cutrace || ! -e $build/libcutrace.so ]]; then
    record "every other step" FAILED "no cutrace to run them with"
    exit 1
fi
step story 75 step_story
step cuda 60 step_cuda
step torch 45 step_torch
step torch-expandable 50 step_expandable
step reports 20 step_reports
step overhead $((40 * (runs - 1))) step_overhead
exit 0
