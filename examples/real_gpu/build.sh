#!/usr/bin/env bash
# build.sh - compiles real_gpu_check.cu with nvcc against the shared CUDA
# runtime and NCCL, for an H200 (sm_90) or any GPU that runs its PTX.
#
#   examples/real_gpu/build.sh OUTPUT
#
# Finds nvcc in $NVCC, $CUDA_HOME/bin (default /usr/local/cuda) or PATH, and
# NCCL (nccl.h and libnccl.so.2) in $NCCL_HOME, the CUDA toolkit, the system
# directories, or the nvidia-nccl Python wheel that PyTorch installs (a GPU
# machine may have NCCL only there). Prints the libraries it chose on stderr.
#
# -cudart shared: nvcc links the runtime statically by default, and calls
# into a static runtime never reach the dynamic linker, so cutrace would see
# only their driver calls. The rpaths let the program start without
# LD_LIBRARY_PATH; --enable-new-dtags makes them DT_RUNPATH, which
# LD_LIBRARY_PATH beats (DT_RPATH would beat it), so the GPU test's dry run
# can put the fake libcudart.so.13 and libnccl.so.2 first.
set -euo pipefail

out=${1:?usage: build.sh OUTPUT}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cuda_home=${CUDA_HOME:-/usr/local/cuda}

nvcc=${NVCC:-}
if [[ -z $nvcc ]]; then
    if [[ -x $cuda_home/bin/nvcc ]]; then
        nvcc=$cuda_home/bin/nvcc
    else
        nvcc=$(command -v nvcc || true)
    fi
fi
if [[ -z $nvcc || ! -x $nvcc ]]; then
    echo "build.sh: nvcc not found (set NVCC or CUDA_HOME)" >&2
    exit 1
fi
# The toolkit that nvcc belongs to, when CUDA_HOME does not name one.
if [[ ! -d $cuda_home/include ]]; then
    cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
fi

# The first directory pair (include, lib) that holds both nccl.h and libnccl.so.2.
nccl_inc='' nccl_lib=''
candidates=()
if [[ -n ${NCCL_HOME:-} ]]; then
    candidates+=("$NCCL_HOME/include:$NCCL_HOME/lib" "$NCCL_HOME/include:$NCCL_HOME/lib64")
fi
candidates+=("$cuda_home/include:$cuda_home/lib64" "$cuda_home/include:$cuda_home/lib"
    "/usr/include:/usr/lib/x86_64-linux-gnu" "/usr/local/include:/usr/local/lib")
python=${PYTHON:-python3}
if command -v "$python" >/dev/null 2>&1; then
    # nvidia-nccl-cu12/cu13 wheels: site-packages/nvidia/nccl/{include,lib}
    # (or wherever under nvidia/ a later layout puts them).
    wheel=$("$python" - <<'EOF' 2>/dev/null || true
import importlib.util, os
spec = importlib.util.find_spec("nvidia")
for top in (spec.submodule_search_locations or []) if spec else []:
    headers, libraries = [], []
    for dirpath, _, files in os.walk(top):
        if dirpath[len(top):].count(os.sep) > 3:
            continue
        if "nccl.h" in files:
            headers.append(dirpath)
        if "libnccl.so.2" in files:
            libraries.append(dirpath)
    for inc in headers:
        for lib in libraries:
            print(f"{inc}:{lib}")
EOF
    )
    while IFS= read -r pair; do
        [[ -n $pair ]] && candidates+=("$pair")
    done <<<"$wheel"
fi
for pair in "${candidates[@]}"; do
    inc=${pair%%:*} lib=${pair#*:}
    if [[ -f $inc/nccl.h && -e $lib/libnccl.so.2 ]]; then
        nccl_inc=$inc nccl_lib=$lib
        break
    fi
done
if [[ -z $nccl_inc ]]; then
    echo "build.sh: NCCL not found (nccl.h and libnccl.so.2; set NCCL_HOME)" >&2
    exit 1
fi

cudart_lib=$cuda_home/lib64
[[ -d $cudart_lib ]] || cudart_lib=$cuda_home/lib
echo "build.sh: $nvcc, NCCL from $nccl_lib, runtime from $cudart_lib" >&2

mkdir -p "$(dirname "$out")"
# -isystem for NCCL: a wheel's nccl.h must not trip -Werror.
"$nvcc" -O2 -std=c++17 -gencode arch=compute_90,code='[sm_90,compute_90]' -cudart shared \
    -Xcompiler -Wall,-Wextra,-Werror -isystem "$nccl_inc" \
    -o "$out" "$here/real_gpu_check.cu" \
    -L"$cudart_lib" -L"$nccl_lib" -l:libnccl.so.2 \
    -Xlinker --enable-new-dtags -Xlinker -rpath,"$nccl_lib" -Xlinker -rpath,"$cudart_lib"
