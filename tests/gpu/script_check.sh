#!/usr/bin/env bash
# script_check.sh - the real-GPU test, checked without a GPU (`make
# gpu-script-check`, part of `make test`). A device machine gives the test
# one run, so everything about it that does not need the GPU is proved here:
#
#   - the scripts parse (bash -n) and pass shellcheck when it is installed;
#     the Python scripts compile on every CPython 3.10-3.13 installed;
#   - the checkers' own tests pass (tests/gpu/test_check_trace.py: each check
#     catches the lie it exists for);
#   - without a GPU, run.sh skips (auto) or fails saying why (--gpu required);
#   - the road a GPU machine takes, on stand-ins (a device node, nvidia-smi,
#     the fake driver and torch): --gpu required gets past detection and
#     writes the machine's facts, and fails naming a driver it cannot load;
#   - the dry run: the whole of run.sh on the fake stack (CUTRACE_GPU_TEST_FAKE=1:
#     the fake driver, runtime and NCCL, the fake libcudart.so.13 under the
#     nvcc-built program, the fake torch), and every row it must produce is
#     there: each check was computed, and passed, except the rows whose truth
#     needs real hardware (the programs' own data checks: fake device memory
#     holds no bytes and runs no kernels; the overhead: a fake's timings);
#     OUTDIR holds at most 8 files of at most 16 MiB, traces included;
#   - a build whose source hash is not this tree's is reported stale, and a
#     budget too small for a step reports it "not run" (exit 3);
#   - a SIGTERM in the middle still leaves the table, with the interrupted
#     step named, and the archives of the steps that ended;
#   - when nvcc is installed, real_gpu_check run against the toolkit's real
#     libcudart and NCCL without a driver fails alike traced and untraced.
#
#   bash tests/gpu/script_check.sh BUILD_DIR      (absolute; holds cutrace)
set -euo pipefail

build=${1:?usage: script_check.sh BUILD_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
python=${PYTHON:-python3}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-gpu-check.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

fail() {
    echo "gpu-script-check: FAILED: $*" >&2
    exit 1
}
ok() { echo "gpu-script-check: ok: $*"; }

# ---- the scripts themselves ----

scripts=(tests/gpu/run.sh tests/gpu/script_check.sh tests/gpu/source_hash.sh
    examples/real_gpu/build.sh)
for s in "${scripts[@]}"; do
    bash -n "$s" || fail "$s does not parse"
done
if command -v shellcheck >/dev/null 2>&1; then
    shellcheck "${scripts[@]}" || fail "shellcheck"
    ok "the scripts parse and pass shellcheck"
else
    ok "the scripts parse (shellcheck is not installed)"
fi

pys=(examples/real_gpu/torch_check.py examples/real_gpu/story_check.py examples/real_gpu/sections.py
    tests/gpu/check_trace.py
    tests/gpu/test_check_trace.py)
while IFS= read -r f; do pys+=("$f"); done < <(find tests/gpu/faketorch -name '*.py' | LC_ALL=C sort)
compiled=()
for v in 3.10 3.11 3.12 3.13; do
    interp=$(compgen -G "$HOME/.pyenv/versions/$v.*/bin/python3" | tail -n 1 || true)
    [[ -n $interp ]] || interp=$(command -v "python$v" || true)
    if [[ -z $interp ]]; then
        echo "gpu-script-check: skipped: CPython $v is not installed"
        continue
    fi
    for py in "${pys[@]}"; do
        PYTHONPYCACHEPREFIX=$scratch/pycache-$v "$interp" -m py_compile "$py" ||
            fail "$py does not compile with CPython $v"
    done
    compiled+=("$v")
done
((${#compiled[@]} > 0)) || fail "no CPython 3.10-3.13 to compile the scripts with"
ok "the Python scripts compile (CPython ${compiled[*]})"

PYTHONPYCACHEPREFIX=$scratch/pycache "$python" tests/gpu/test_check_trace.py -q \
    >"$scratch/unit.log" 2>&1 || fail "test_check_trace.py: $(tail -n 20 "$scratch/unit.log")"
ok "the checks catch what they exist for ($(grep -Eo 'Ran [0-9]+ tests' "$scratch/unit.log"))"

# ---- without a GPU ----

has_gpu=0
if [[ -e /dev/nvidia0 || -e /dev/nvidiactl ]]; then
    has_gpu=1
fi
if ((has_gpu)); then
    ok "a GPU is present, so the skip is not checked here: run make gpu-test"
else
    status=0
    out=$(env -u CUTRACE_GPU_TEST_FAKE -u GPU bash tests/gpu/run.sh 2>/dev/null) || status=$?
    [[ $status == 0 && $out == "skipped: no GPU" ]] ||
        fail "run.sh without a GPU: status $status, printed '$out'"
    status=0
    out=$(env -u CUTRACE_GPU_TEST_FAKE bash tests/gpu/run.sh --gpu required 2>/dev/null) || status=$?
    [[ $status == 1 && $out == "FAILED: no usable GPU: "* ]] ||
        fail "run.sh --gpu required without a GPU: status $status, printed '$out'"
    ok "without a GPU: auto skips (status 0), --gpu required fails saying why (status 1)"
fi

# ---- the real road, walked on the fake stack ----

# What a GPU machine answers (a device node, nvidia-smi, a driver that
# initialises, a torch that sees the GPU) given by stand-ins, so that run.sh's
# own detection, --gpu required and the machine's facts run here too.
stand_in=$scratch/stand-in
mkdir -p "$stand_in/bin"
: >"$stand_in/nvidia0"
cat >"$stand_in/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
-L) echo "GPU 0: NVIDIA H200 (stand-in) (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
--query-gpu=*) echo "NVIDIA H200 (stand-in), 580.00.00, 143771 MiB" ;;
*) echo "stand-in nvidia-smi: $*" ;;
esac
EOF
chmod +x "$stand_in/bin/nvidia-smi"
road() {
    env -u CUTRACE_GPU_TEST_FAKE PATH="$stand_in/bin:$PATH" GPU_TEST_DEVICE_NODES="$stand_in/nvidia0" \
        CUTRACE_FAKE_STATE="$stand_in/state" PYTHONPATH="$root/tests/gpu/faketorch" \
        CUTRACE_FAKETORCH_LIB="$build/gpu/faketorch/lib" "$@"
}
status=0
out=$(road LD_LIBRARY_PATH="$build/gpu/fake13:$build/fake" BUILD="$build" \
    bash tests/gpu/run.sh --gpu required --budget 30 "$scratch/road" 2>&1) || status=$?
[[ $status == 3 ]] || fail "the real road on stand-ins: status $status, not 3: $out"
grep -q "^machine: GPU, driver, torch, nvcc .* ok .*NVIDIA H200 (stand-in), 580.00.00.*; torch: ok" \
    "$scratch/road/summary.txt" || fail "the real road's machine row: $(cat "$scratch/road/summary.txt")"
grep -q "stand-in nvidia-smi" "$scratch/road/machine.txt" || fail "machine.txt lacks nvidia-smi's output"
status=0
# No libcuda.so.1 to be found: the driver check must say so.
out=$(road LD_LIBRARY_PATH="$scratch/nowhere" BUILD="$build" \
    bash tests/gpu/run.sh --gpu required "$scratch/road2" 2>/dev/null) || status=$?
[[ $status == 1 && $out == "FAILED: no usable GPU: the driver does not work: no libcuda.so.1"* ]] ||
    fail "a GPU without a working driver: status $status, printed '$out'"
ok "the real road on stand-ins: --gpu required passes detection (exit 3 on a 30 s budget), fails without a driver"

# ---- the dry run ----

# Rows that only real hardware can make true: fake device memory holds no
# bytes and runs no kernels (the programs' data checks), and a fake's
# timings say nothing about a GPU's.
may_fail_on_fake() {
    case $1 in
    *": the program's own checks" | *": the script's own checks" | "torch: tracing overhead under 5%") return 0 ;;
    # The fake NCCL models only the per-peer buffers (docs/fakes.md): a
    # one-rank communicator has none there, and some on a GPU.
    *": NCCL's own buffers (module libnccl)") return 0 ;;
    esac
    return 1
}

# summary_rows FILE: "name<TAB>result<TAB>detail" for each row of a table
# (run.sh prints the name in 56 columns, the result in 8).
summary_rows() {
    local line name result
    sed -n '2,$p' "$1" | sed '$d' | while IFS= read -r line; do
        name=${line:0:56} result=${line:57:8}
        printf '%s\t%s\t%s\n' "${name%"${name##*[! ]}"}" "${result%% *}" "${line:66}"
    done
}

# Without nvcc the CUDA program cannot be built here: its step is one skipped
# row, and the rest must still be complete.
nvcc=${NVCC:-$cuda_home/bin/nvcc}
[[ -x $nvcc ]] || nvcc=$(command -v nvcc || true)

dry=$scratch/dry
status=0
CUTRACE_GPU_TEST_FAKE=1 GPU_TEST_RUNS=2 bash tests/gpu/run.sh --budget 1500 "$dry" \
    >"$scratch/dry.out" 2>&1 || status=$?
[[ -s $dry/summary.txt ]] || fail "the dry run left no summary.txt: $(tail -n 20 "$scratch/dry.out")"
rows=0 bad=()
while IFS=$'\t' read -r name result detail; do
    rows=$((rows + 1))
    case $result in
    ok) ;;
    skipped)
        [[ $name == "torch expandable: a transformers model" ||
            ($name == "cuda: every check" && -z $nvcc) ]] || bad+=("$name: skipped: $detail")
        ;;
    FAILED) may_fail_on_fake "$name" || bad+=("$name: FAILED: $detail") ;;
    *) bad+=("$name: $result: $detail") ;;
    esac
done < <(summary_rows "$dry/summary.txt")
((${#bad[@]} == 0)) || fail "the dry run's rows (run.log: $dry/run.log):$(printf '\n  %s' "${bad[@]}")"
# Every step ran: the rows that end each step's checks are all there.
musts=("story: all-reduce in a global-mode graph" "torch: timeline = allocations views, by uuid"
    "torch expandable: the 2 GiB tensor is VMM memory" "reports: sites, budget, diff, export on torch's"
    "torch: tracing overhead under 5%")
[[ -z $nvcc ]] || musts+=("cuda: timeline = allocations views, by uuid")
for must in "${musts[@]}"; do
    grep -qF "$must" "$dry/summary.txt" || fail "the dry run has no row '$must'"
done
[[ $status == 0 || $status == 1 ]] || fail "the dry run exited $status"
files=$(find "$dry" -type f | wc -l)
((files <= 8)) || fail "the dry run left $files files in OUTDIR (at most 8)"
big=$(find "$dry" -type f -size +16M)
[[ -z $big ]] || fail "files over 16 MiB in OUTDIR: $big"
[[ -s $dry/machine.txt ]] || fail "no machine.txt"
for a in story torch torch-expandable ${nvcc:+cuda}; do
    listing=$(tar -tzf "$dry/$a.tar.gz") || fail "$a.tar.gz is not a readable archive"
    grep -q '\.db$' <<<"$listing" || fail "$a.tar.gz holds no trace"
done
ok "the dry run: $rows rows, every check computed and passing where a fake can tell, $files files"

# ---- a stale build, a small budget ----

stale=$scratch/stale-build
mkdir -p "$stale"
cp -p "$build/libcutrace.so" "$build/cutrace" "$stale/"
echo 0000000000000000 >"$stale/source-hash"
status=0
# CC=false: make cannot rebuild, as on a machine without the build's packages.
CC=false BUILD=$stale CUTRACE_GPU_TEST_FAKES=$build CUTRACE_GPU_TEST_FAKE=1 bash tests/gpu/run.sh --budget 30 "$scratch/s1" \
    >/dev/null 2>&1 || status=$?
grep -q "FAILED.*stale build" "$scratch/s1/summary.txt" ||
    fail "a stale build was not reported: $(cat "$scratch/s1/summary.txt")"
grep -q "^story .*not-run" "$scratch/s1/summary.txt" ||
    fail "a budget too small for the story did not say 'not run': $(cat "$scratch/s1/summary.txt")"
[[ $status == 1 ]] || fail "a stale build: exit status $status, not 1"
status=0
CUTRACE_GPU_TEST_FAKE=1 bash tests/gpu/run.sh --budget 30 "$scratch/s2" >/dev/null 2>&1 || status=$?
[[ $status == 3 ]] || fail "a budget too small: exit status $status, not 3: $(cat "$scratch/s2/summary.txt")"
ok "a stale build is FAILED, a budget too small says 'not run' (exit 3)"

# ---- stopped in the middle ----

status=0
CUTRACE_GPU_TEST_FAKE=1 GPU_TEST_KEEP=0 bash tests/gpu/run.sh --budget 1500 "$scratch/k" \
    >/dev/null 2>&1 &
pid=$!
# Stopped once the first step's archive (story's) is written, inside the next.
for _ in $(seq 600); do
    [[ -e $scratch/k/story.tar.gz ]] && break
    sleep 0.2
done
kill -TERM "$pid"
wait "$pid" || status=$?
[[ $status == 1 ]] || fail "run.sh stopped by SIGTERM exited $status, not 1"
grep -q ": interrupted  *FAILED" "$scratch/k/summary.txt" ||
    fail "the table does not name the interrupted step: $(cat "$scratch/k/summary.txt")"
[[ -s $scratch/k/story.tar.gz && -s $scratch/k/run.log ]] || fail "the finished steps' files are gone"
tail -n 1 "$scratch/k/summary.txt" | grep -Eq '^[0-9]+ passed, [0-9]+ failed' ||
    fail "the table has no closing line"
ok "stopped by SIGTERM: the table names the interrupted step, finished steps' files are kept"

# ---- the CUDA program against the real toolkit, without a driver ----

if [[ -z $nvcc ]]; then
    ok "nvcc is not installed: the CUDA program is not compiled here"
    exit 0
fi
prog=$build/gpu/real_gpu_check
NVCC=$nvcc bash examples/real_gpu/build.sh "$prog" 2>"$scratch/nvcc.log" ||
    fail "examples/real_gpu/build.sh: $(cat "$scratch/nvcc.log")"
if ((has_gpu)); then
    exit 0
fi
# The real libraries only: the fake stack must not be on the library path.
status_u=0 status_t=0
env -u LD_LIBRARY_PATH -u LD_PRELOAD "$prog" >"$scratch/untraced.out" 2>/dev/null || status_u=$?
env -u LD_LIBRARY_PATH -u LD_PRELOAD "$build/cutrace" run -o "$scratch/trace" -- "$prog" \
    >"$scratch/traced.out" 2>"$scratch/traced.err" || status_t=$?
cmp -s "$scratch/untraced.out" "$scratch/traced.out" ||
    fail "real_gpu_check prints differently traced: $(diff "$scratch/untraced.out" "$scratch/traced.out")"
[[ $status_u == "$status_t" ]] || fail "real_gpu_check exits $status_t traced, $status_u untraced"
[[ $status_u != 0 ]] || fail "real_gpu_check passed without a GPU?"
grep -q "cutrace: trace in .* (1 file)" "$scratch/traced.err" ||
    fail "cutrace run said: $(cat "$scratch/traced.err")"
calls=$("$python" tests/gpu/check_trace.py count "$scratch/trace" 1 \
    "SELECT count(*) FROM calls WHERE api IN ('cudaSetDevice', 'cudaMalloc', 'ncclGetUniqueId')") ||
    fail "the trace lacks the program's calls: $calls"
ok "without a driver, real_gpu_check fails alike traced and untraced (status $status_u; calls in its trace: $calls)"
