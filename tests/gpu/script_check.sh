#!/usr/bin/env bash
# script_check.sh - what of the real-GPU test can be checked without a GPU
# (`make gpu-script-check`, part of `make test`):
#
#   - tests/gpu/run.sh and examples/real_gpu/build.sh parse (bash -n), and
#     pass the linter (shellcheck) when it is installed; the Python scripts
#     byte-compile;
#   - without a GPU, run.sh prints "skipped: no GPU" and exits 0;
#   - when nvcc is installed, the CUDA program compiles (sm_90), and without
#     a driver its traced run (cutrace run, the toolkit's real libcudart and
#     NCCL) prints the same and exits the same as its untraced run, and leaves
#     a trace of its failed calls.
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

scripts=(tests/gpu/run.sh tests/gpu/script_check.sh examples/real_gpu/build.sh)
for s in "${scripts[@]}"; do
    bash -n "$s" || fail "$s does not parse"
done
if command -v shellcheck >/dev/null 2>&1; then
    shellcheck "${scripts[@]}" || fail "shellcheck"
    ok "the scripts parse and pass shellcheck"
else
    ok "the scripts parse (shellcheck is not installed)"
fi

# Byte-compiled into the scratch directory, not beside the sources.
for py in examples/real_gpu/torch_check.py tests/gpu/check_trace.py; do
    PYTHONPYCACHEPREFIX=$scratch/pycache "$python" -m py_compile "$py" ||
        fail "$py does not compile"
done
ok "the Python scripts compile"

has_gpu=0
if [[ -e /dev/nvidia0 ]] && command -v nvidia-smi >/dev/null 2>&1 &&
    timeout 60 nvidia-smi -L >/dev/null 2>&1; then
    has_gpu=1
fi

if ((has_gpu)); then
    ok "a GPU is present, so the skip is not checked here: run make gpu-test"
else
    status=0
    out=$(env -u CUTRACE_GPU_TEST_FORCE bash tests/gpu/run.sh 2>/dev/null) || status=$?
    [[ $status == 0 ]] || fail "run.sh without a GPU exited $status"
    [[ $out == "skipped: no GPU" ]] || fail "run.sh without a GPU printed '$out'"
    ok "run.sh without a GPU: 'skipped: no GPU', status 0"
fi

nvcc=${NVCC:-$cuda_home/bin/nvcc}
if [[ ! -x $nvcc ]] && ! nvcc=$(command -v nvcc); then
    ok "nvcc is not installed: the CUDA program is not compiled here"
    exit 0
fi
prog=$build/gpu/real_gpu_check
NVCC=$nvcc bash examples/real_gpu/build.sh "$prog" 2>"$scratch/nvcc.log" ||
    fail "examples/real_gpu/build.sh: $(cat "$scratch/nvcc.log")"
ok "real_gpu_check compiles (nvcc, sm_90)"

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
