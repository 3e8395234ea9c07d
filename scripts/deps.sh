#!/bin/sh
# deps.sh - install the Debian packages cutrace builds against, if missing.
#
# Run as root it installs them with apt-get; otherwise it prints the exact
# command and fails, so `make demo` and `make test` never half-work on a fresh
# machine. The CUDA toolkit is not a Debian package here: it is checked, not
# installed. Debian's chromium, which only the browser tests use
# (tests/browser/), is tried last and may fail: those tests are then skipped
# with a line saying so (CUTRACE_NO_CHROMIUM_INSTALL=1 leaves it out).
set -eu

packages="libsqlite3-dev libunwind-dev check python3"
missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "deps: installing$missing"
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing >/dev/null ||
            { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing >/dev/null; }
    else
        echo "deps: missing packages:$missing" >&2
        echo "deps: run: sudo apt-get install -y$missing" >&2
        exit 1
    fi
fi

cuda_inc="${CUDA_HOME:-/usr/local/cuda}/include"
for h in cuda.h cuda_runtime_api.h nccl.h; do
    if [ ! -f "$cuda_inc/$h" ]; then
        echo "deps: $cuda_inc/$h not found: install the CUDA toolkit or set CUDA_HOME" >&2
        exit 1
    fi
done

# Optional: chromium for tests/browser/. Never fails deps.
if [ -z "${CUTRACE_NO_CHROMIUM_INSTALL:-}" ] && ! command -v chromium >/dev/null 2>&1 &&
    [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing chromium (optional: the browser tests)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null 2>&1 ||
        echo "deps: chromium could not be installed: the browser tests will be skipped"
fi
