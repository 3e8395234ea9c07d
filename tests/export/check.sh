#!/usr/bin/env bash
# check.sh - `make export-check`: `cutrace export` on the demo's two runs
# (scripts/demo.sh: 8 ranks, NCCL, the custom all-reduce's IPC handles) and
# on a synthetic run of 10^6 events (bench/genrun), in both formats, each
# file decoded packet by packet by check_export.py with the counts the run
# must give: one slice per call, the flows of every IPC open, nine counter
# tracks per GPU; and on real NVTX ranges (tests/progs/nvtx_app): one slice
# per range of the nvtx view. The demo's JSON files are also loaded in a real Chromium
# page by tests/browser/load_json.sh when that script exists (it skips
# visibly where Chromium cannot be had).
#
#   tests/export/check.sh [BUILD_DIR] [EVENTS]     (EVENTS: default 1000000)
set -euo pipefail

build=${1:-build}
events=${2:-1000000}
cutrace="$build/cutrace"
genrun="$build/bench/genrun"
checker=tests/export/check_export.py
browser=tests/browser/load_json.sh
out="$build/export-check"
for f in "$cutrace" "$genrun" "$build/progs/nvtx_app"; do
    [[ -x $f ]] || { echo "export-check: $f is missing: run 'make' first" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out"
export_args=() # options check() gives `cutrace export` before the run

# The demo's runs, made here unless `make demo` left them.
if [[ ! -d $build/demo/baseline || ! -d $build/demo/custom-ar ]]; then
    scripts/demo.sh "$build" >"$out/demo.log" 2>&1 ||
        { echo "export-check: scripts/demo.sh failed; see $out/demo.log" >&2; exit 1; }
fi

# count_of DIR SQL: SQL's count summed over a run's traces.
count_of() {
    python3 - "$1" "$2" <<'PY'
import glob, os, sqlite3, sys
total = 0
for db in sorted(glob.glob(os.path.join(sys.argv[1], "**", "*.db"), recursive=True)):
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % db, uri=True)
    total += con.execute(sys.argv[2]).fetchone()[0]
    con.close()
print(total)
PY
}

# The number of calls in a run's traces: the slices its export must have.
calls_of() {
    count_of "$1" "SELECT count(*) FROM calls"
}

failures=0
# check NAME DIR EXPECT...: exports DIR both ways and decodes each file.
check() {
    local name=$1 dir=$2
    shift 2
    local calls expects=()
    # A thread_slices= of the caller's (a filtered export) replaces the run's calls.
    if [[ " $* " != *" thread_slices="* ]]; then
        calls=$(calls_of "$dir")
        expects=(--expect "thread_slices=$calls")
    fi
    for e in "$@"; do expects+=(--expect "$e"); done
    for format in proto json; do
        local file="$out/$name.$format"
        if ! "$cutrace" export "${export_args[@]}" "$dir" -o "$file" --format "$format" \
            2>"$out/$name.$format.err"; then
            echo "export-check: cutrace export $dir --format $format failed:" >&2
            cat "$out/$name.$format.err" >&2
            failures=$((failures + 1))
            continue
        fi
        if counts=$(python3 "$checker" --format "$format" "${expects[@]}" "$file"); then
            echo "export-check: $name ($format, $(du -h "$file" | cut -f1)): $counts"
        else
            failures=$((failures + 1))
        fi
        # The 10^6-event JSON (450 MB) is past what a browser tab parses
        # (docs/export.md: use the proto there); the demo's are loaded.
        if [[ $format == json && -x $browser && $name != genrun ]]; then
            local rc=0
            "$browser" "$file" || rc=$?
            if ((rc == 77)); then
                echo "export-check: $name.json in Chromium: skipped (see above)"
            elif ((rc != 0)); then
                echo "export-check: $name.json failed to load in Chromium" >&2
                failures=$((failures + 1))
            fi
        fi
    done
}

# The sanitizer build (make analyzer-tests builds it) must write the same
# bytes: memory errors surface, and the output depends on the traces alone.
same_under_asan() {
    local name=$1 dir=$2 asan="$build/asan/analyzer/cutrace"
    [[ -x $asan ]] || { echo "export-check: $asan not built: the sanitizer comparison skipped"; return 0; }
    for format in proto json; do
        if ! "$asan" export "$dir" -o "$out/$name.asan.$format" --format "$format" ||
            ! cmp -s "$out/$name.$format" "$out/$name.asan.$format"; then
            echo "export-check: $name.$format differs (or fails) under ASan+UBSan" >&2
            failures=$((failures + 1))
        fi
    done
}

# 8 ranks on 8 GPUs; the custom all-reduce run exports 2 buffers per rank,
# each opened by the 7 others: 112 flows.
check demo-baseline "$build/demo/baseline" process_tracks=8 counter_tracks=72 flows=0 'instants>=8'
check demo-custom-ar "$build/demo/custom-ar" process_tracks=8 counter_tracks=72 flows=112 'instants>=8'
# The reports' filters: ranks 0 and 1 are two processes on two GPUs, with
# the 4 flows between them (each opens the other's 2 buffers).
# (A process's rank is its rank in its largest communicator.)
calls01=$(count_of "$build/demo/custom-ar" "SELECT CASE WHEN (SELECT rank FROM communicators
    ORDER BY nranks DESC LIMIT 1) IN (0, 1) THEN (SELECT count(*) FROM calls) ELSE 0 END")
export_args=(--rank "0,1")
check demo-custom-ar-ranks01 "$build/demo/custom-ar" "thread_slices=$calls01" process_tracks=2 \
    counter_tracks=18 flows=4
export_args=()
same_under_asan demo-baseline "$build/demo/baseline"
same_under_asan demo-custom-ar "$build/demo/custom-ar"
# Real NVTX ranges: tests/progs/nvtx_app (and its 4 threads' nested ranges)
# on the fake stack, recorded by libcutrace.so as NVTX's injection library;
# one slice per range of the nvtx view (NCCL's domain too), one instant per
# mark, on the NVTX tracks.
for mode in plain threads; do
    rm -rf "$out/nvtx-$mode.runs"
    args=()
    [[ $mode == plain ]] || args=("$mode")
    if ! LD_LIBRARY_PATH="$build/fake:$build/progs" "$cutrace" run -o "$out/nvtx-$mode.runs" -- \
        "$build/progs/nvtx_app" "${args[@]}" >"$out/nvtx-$mode.log" 2>&1; then
        echo "export-check: nvtx_app $mode failed; see $out/nvtx-$mode.log" >&2
        failures=$((failures + 1))
        continue
    fi
    ranges=$(count_of "$out/nvtx-$mode.runs" "SELECT count(*) FROM nvtx WHERE kind IN ('push', 'start')")
    marks=$(count_of "$out/nvtx-$mode.runs" "SELECT count(*) FROM nvtx WHERE kind = 'mark'")
    if ((ranges == 0)); then
        echo "export-check: nvtx_app $mode recorded no NVTX range" >&2
        failures=$((failures + 1))
    fi
    check "nvtx-$mode" "$out/nvtx-$mode.runs" "nvtx_slices=$ranges" "nvtx_instants=$marks" 'nvtx_tracks>=1'
    same_under_asan "nvtx-$mode" "$out/nvtx-$mode.runs"
done
"$genrun" "$events" "$out/genrun" >/dev/null
check genrun "$out/genrun" process_tracks=8 counter_tracks=72 'flows>=1' 'other_slices>=1'
rm -rf "$out/genrun" "$out"/genrun.proto "$out"/genrun.json

if ((failures)); then
    echo "export-check: $failures problem(s); outputs in $out" >&2
    exit 1
fi
echo "export-check: ok"
