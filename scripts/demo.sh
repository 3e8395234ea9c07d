#!/usr/bin/env bash
# demo.sh - what `make demo` runs: the story cutrace exists for, replayed on
# the fake GPU stack. An 8-rank SGLang-like server (examples/tp_server_sim)
# starts once with NCCL's all-reduce and once with a custom all-reduce whose
# staging buffers are sized as PCIe-tuned forks size them; the second run
# dies with "Not enough memory". Both run under `cutrace run`, untouched; the
# traces alone then say why: `cutrace budget` for each, `cutrace diff`.
#
#   scripts/demo.sh [BUILD_DIR]     (make demo passes its $(BUILD))
set -euo pipefail

build=${1:-build}
cutrace="$build/cutrace"
sim="$build/examples/tp_server_sim"
out="$build/demo"
for f in "$cutrace" "$sim" "$build/fake/libcudart.so.12"; do
    [[ -e $f ]] || { echo "demo: $f is missing: run 'make' first" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out"

# Eight simulated 96 GiB GPUs (docs/fakes.md); each run gets its own state.
fake_libs=$(cd "$build/fake" && pwd)
export LD_LIBRARY_PATH="$fake_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUTRACE_FAKE_GPUS=8 CUTRACE_FAKE_GPU_MEM=96G

fraction=0.55
server_flags=(--tp 8 --mem-fraction-static "$fraction")
custom_ar_flags=(--custom-ar)

# Runs one server under `cutrace run`; keeps its output for the summary.
run_server() {
    local name=$1
    shift
    local status=0
    CUTRACE_FAKE_STATE="$out/$name.gpu-state" \
        "$cutrace" run -o "$out/$name" -- "$sim" "$@" >"$out/$name.out" 2>"$out/$name.err" ||
        status=$?
    echo "$status" >"$out/$name.status"
}

# The server's own words: rank 0's numbers (every rank computed the same
# MIN), its error lines once each, its exit status, and cutrace's last line.
show_server() {
    local name=$1
    awk '$1 == "rank" && $2 == "0" {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "   the server computed: pre %s GiB, post %s GiB, rest %s GiB -> %s tokens\n",
               v["pre_gib"], v["post_gib"], v["rest_gib"], v["tokens"]
    }' "$out/$name.out"
    grep -v '^cutrace:' "$out/$name.err" | sort | uniq -c | sed 's/^ */   /; s/^   1 /   /' || true
    echo "   exit status $(cat "$out/$name.status")"
    grep '^cutrace:' "$out/$name.err" | sed 's/^/   /'
}

run_server baseline "${server_flags[@]}"
run_server custom-ar "${server_flags[@]}" "${custom_ar_flags[@]}"

echo "== 1. The baseline: an 8-rank SGLang-like startup on 8 simulated 96 GiB GPUs (NCCL all-reduce),"
echo "   run untouched under 'cutrace run'. It fits:"
show_server baseline
echo
echo "== 2. The same server with custom all-reduce (--custom-ar: 256 MiB staging buffers, as the"
echo "   PCIe-tuned fork of the story sized them). It stops where SGLang stops:"
show_server custom-ar
echo
echo "== 3. cutrace budget $out/baseline --framework sglang"
echo "   The server's arithmetic replayed from the trace alone (F read from the traced command line):"
"$cutrace" budget "$out/baseline" --framework sglang
echo
echo "== 4. cutrace budget $out/custom-ar --framework sglang"
echo "   The same numbers the failing server computed, and what took its memory:"
"$cutrace" budget "$out/custom-ar" --framework sglang
echo
echo "== 5. cutrace diff $out/baseline $out/custom-ar --framework sglang"
echo "   What the second run does differently, aligned by phase, and what it costs:"
"$cutrace" diff "$out/baseline" "$out/custom-ar" --framework sglang --mem-fraction-static "$fraction"
echo
echo "== 6. The pictures: each opens from disk, with no network (docs/report.md, docs/export.md)"
"$cutrace" diff "$out/baseline" "$out/custom-ar" --framework sglang --mem-fraction-static "$fraction" \
    --html "$out/diff.html"
"$cutrace" report "$out/custom-ar" --framework sglang -o "$out/custom-ar.html"
"$cutrace" export "$out/custom-ar" -o "$out/custom-ar.pftrace"
echo "   $out/diff.html: both runs' memory aligned by phase, and the two budgets side by side"
echo "   $out/custom-ar.html: per GPU memory over time, the budget's waterfall per rank, the call sites"
echo "   $out/custom-ar.pftrace: every call, counter and collective, for ui.perfetto.dev"
echo
echo "== Read it: the custom all-reduce made 256 MiB + 5 KiB and 256 MiB per rank and exported them"
echo "   (ipc_exported), plus a 20 MiB segment, all before SGLang's first measurement. Memory made"
echo "   before 'pre' costs rest F x its size: 0.55 x 532 MiB = 292.6 MiB, less the 20 MiB the"
echo "   weights then reused, took rest from +161.5 MiB to -111.1 MiB: 'Not enough memory'."
echo "   No source edits, no debug prints. Traces: $out/baseline, $out/custom-ar (SQLite, docs/schema.md)."
