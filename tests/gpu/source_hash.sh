#!/usr/bin/env bash
# source_hash.sh - one SHA-256 over the sources libcutrace.so and cutrace are
# built from, so that a build carried to another machine can be told apart
# from a stale one.
#
#   bash tests/gpu/source_hash.sh            prints the hash of this tree
#   bash tests/gpu/source_hash.sh --write F  writes it to F (the build does
#                                            this: $(BUILD)/source-hash)
#
# The files are found by name, not through git: the device machine gets a
# copy of the working tree without .git (tracked and untracked files alike),
# and this must give the same answer there as here.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

hash=$(find preload analyzer include -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.mk' -o -name '*.map' -o -name '*.S' \) -print |
    LC_ALL=C sort | { cat; echo Makefile; } | xargs sha256sum | sha256sum | cut -d' ' -f1)

if [[ ${1:-} == --write ]]; then
    out=${2:?usage: source_hash.sh --write FILE}
    printf '%s\n' "$hash" >"$out.tmp"
    mv "$out.tmp" "$out"
else
    printf '%s\n' "$hash"
fi
