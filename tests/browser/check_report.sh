#!/usr/bin/env bash
# check_report.sh - `make browser-check`: the HTML pages of `cutrace report`
# and `cutrace diff --html` rendered by a real browser (Debian's chromium,
# headless), on the demo's two runs (scripts/demo.sh). For each page, a copy
# with the probe scripts inserted (probe_head.html, probe_tail.html) is
# loaded and its DOM dumped; check_page.py then checks that no script
# failed, that every chart's paths are non-empty and drawn, that hovering
# a chart shows its values (the page's script works), that nothing
# reaches outside the page, and that every number the report page shows
# equals `cutrace budget --json`'s; a run with NVTX ranges has them as
# bands, laid out, and the demo's pages none. Then the same on a 10^6-event run (two,
# for the diff) from bench/genrun, whose pages must stay under 8 MiB: the
# charts are downsampled, the tables capped. Screenshots are kept in BUILD/browser/
# for people to look at. Without chromium it prints "skipped: chromium:
# WHY" and exits 0: skipped, visibly, never passed.
#
#   tests/browser/check_report.sh [BUILD_DIR]
set -euo pipefail

build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/browser/chromium.sh
. "$here/chromium.sh"
browser_find || exit 0

cutrace="$build/cutrace"
out="$build/browser"
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [[ ! -d $build/demo/custom-ar || ! -d $build/demo/baseline ]]; then
    scripts/demo.sh "$build" >"$out/demo.log" 2>&1 ||
        { echo "browser: scripts/demo.sh failed: $out/demo.log" >&2; exit 1; }
fi

# A copy of page $1 with the probes around its own scripts, as $2.
probe_copy() {
    python3 - "$1" "$2" "$here" <<'PY'
import sys
page, copy, here = sys.argv[1:]
text = open(page, encoding="utf-8").read()
head = open(here + "/probe_head.html", encoding="utf-8").read()
tail = open(here + "/probe_tail.html", encoding="utf-8").read()
assert text.count("<head>") == 1 and text.count("</body>") == 1, "not one page"
text = text.replace("<head>", "<head>\n" + head, 1).replace("</body>", tail + "</body>", 1)
open(copy, "w", encoding="utf-8").write(text)
PY
}

failures=0
# Renders page $1 (name $2), checks it with check_page.py's further
# arguments, keeps a screenshot.
check_page() {
    local page=$1 name=$2
    shift 2
    probe_copy "$page" "$out/$name.probe.html"
    if ! browser_run "$out/profile" --dump-dom "file://$out/$name.probe.html" \
        >"$out/$name.dom" 2>"$out/$name.chromium.log"; then
        echo "browser: $name: chromium failed to render the page: $out/$name.chromium.log" >&2
        failures=$((failures + 1))
        return
    fi
    python3 "$here/check_page.py" --dom "$out/$name.dom" --log "$out/$name.chromium.log" \
        --name "$name" "$@" || failures=$((failures + 1))
    browser_run "$out/profile" --hide-scrollbars --window-size=1200,5000 \
        --screenshot="$out/$name.png" "file://$page" >/dev/null 2>&1 || true
    if [[ ! -s $out/$name.png ]]; then
        echo "browser: $name: no screenshot was made" >&2
        failures=$((failures + 1))
    fi
}

for run in baseline custom-ar; do
    "$cutrace" report "$build/demo/$run" --framework sglang -o "$out/report-$run.html"
    # exit 0 whether or not the budget fits: it says so in the JSON
    "$cutrace" budget "$build/demo/$run" --framework sglang --json >"$out/budget-$run.json"
    # 8 GPUs: 8 memory charts, 8 waterfalls, flame graphs; per rank at least
    # its waterfall's six numbers, and the job's four
    check_page "$out/report-$run.html" "report-$run" --charts 16 \
        --budget "$out/budget-$run.json" --min-numbers 52 --nvtx 0
done
# The filters: ranks 0 and 3 only, two memory charts, flame graphs and
# waterfalls of eight, every number still the unfiltered `cutrace budget
# --json`'s.
"$cutrace" report "$build/demo/custom-ar" --framework sglang --rank 0,3 \
    -o "$out/report-ranks03.html"
check_page "$out/report-ranks03.html" report-ranks03 --charts 6 --max-charts 6 \
    --budget "$out/budget-custom-ar.json" --min-numbers 16 --nvtx 0
# NVTX ranges (tests/progs/nvtx_app, recorded by libcutrace.so as NVTX's
# injection library): one band and strip per range of the nvtx view that is
# not NCCL's own, laid out, hovering naming it.
progs=$(cd "$build/progs" && pwd)
fake=$(cd "$build/fake" && pwd)
LD_LIBRARY_PATH="$fake:$progs" "$cutrace" run -o "$out/nvtx" -- "$progs/nvtx_app" \
    >"$out/nvtx.log" 2>&1 || { echo "browser: nvtx_app failed: $out/nvtx.log" >&2; exit 1; }
ranges=$(python3 - "$out/nvtx" <<'PY'
import glob, os, sqlite3, sys
total = 0
for db in glob.glob(os.path.join(sys.argv[1], "**", "*.db"), recursive=True):
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % db, uri=True)
    total += con.execute("SELECT count(*) FROM nvtx WHERE kind IN ('push', 'start')"
                         " AND coalesce(domain, '') <> 'NCCL'").fetchone()[0]
    con.close()
print(total)
PY
)
if ((ranges == 0)); then
    echo "browser: nvtx_app recorded no NVTX range" >&2
    failures=$((failures + 1))
fi
"$cutrace" report "$out/nvtx" -o "$out/report-nvtx.html"
check_page "$out/report-nvtx.html" report-nvtx --charts 1 --nvtx "$ranges"
# The same ranges on a diff page: a second run of nvtx_app, aligned by the
# ranges' names, one band and strip per range between its steps.
LD_LIBRARY_PATH="$fake:$progs" "$cutrace" run -o "$out/nvtx2" -- "$progs/nvtx_app" \
    >"$out/nvtx2.log" 2>&1 || { echo "browser: nvtx_app failed: $out/nvtx2.log" >&2; exit 1; }
"$cutrace" diff "$out/nvtx" "$out/nvtx2" --html "$out/diff-nvtx.html"
check_page "$out/diff-nvtx.html" diff-nvtx --charts 1 --max-charts 1 --nvtx "$ranges"
# vLLM's waterfall: the simulated server of the demo as vLLM starts (examples/README.md)
(
    export LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export CUTRACE_FAKE_GPUS=8 CUTRACE_FAKE_GPU_MEM=96G CUTRACE_FAKE_STATE="$out/vllm.gpu-state"
    "$cutrace" run -o "$out/vllm" -- "$build/examples/tp_server_sim" --framework vllm --tp 8 \
        >"$out/vllm.log" 2>&1
) || { echo "browser: the vLLM run failed: $out/vllm.log" >&2; exit 1; }
"$cutrace" report "$out/vllm" --framework vllm -o "$out/report-vllm.html"
"$cutrace" budget "$out/vllm" --framework vllm --json >"$out/budget-vllm.json"
# per rank its seven numbers, and the job's available bytes
check_page "$out/report-vllm.html" report-vllm --charts 16 --budget "$out/budget-vllm.json" \
    --min-numbers 57

"$cutrace" diff "$build/demo/baseline" "$build/demo/custom-ar" --framework sglang \
    --html "$out/diff.html"
# 8 GPU pairs' charts, and both runs' budgets side by side: 16 waterfalls
# whose numbers are each run's own `cutrace budget --json` (keyed A., B.)
check_page "$out/diff.html" diff --charts 24 --max-charts 24 \
    --budget "A=$out/budget-baseline.json" --budget "B=$out/budget-custom-ar.json" \
    --min-numbers 104

# A 10^6-event run and its variant (bench/genrun.c): the pages stay small
# and still render.
genrun="$build/bench/genrun"
if [[ -x $genrun ]]; then
    "$genrun" 1000000 "$out/big" >/dev/null
    "$genrun" -v 1000000 "$out/big-variant" >/dev/null
    "$cutrace" report "$out/big" --framework sglang -o "$out/report-big.html"
    "$cutrace" budget "$out/big" --framework sglang --json >"$out/budget-big.json"
    "$cutrace" diff "$out/big" "$out/big-variant" --framework sglang --html "$out/diff-big.html"
    for page in report-big diff-big; do
        size=$(stat -c %s "$out/$page.html")
        if ((size > 8 << 20)); then
            echo "browser: $page: $size bytes for a 10^6-event run (over 8 MiB)" >&2
            failures=$((failures + 1))
        fi
    done
    check_page "$out/report-big.html" report-big --charts 16 --budget "$out/budget-big.json" \
        --min-numbers 52
    "$cutrace" budget "$out/big-variant" --framework sglang --json >"$out/budget-big-variant.json"
    check_page "$out/diff-big.html" diff-big --charts 24 --budget "A=$out/budget-big.json" \
        --budget "B=$out/budget-big-variant.json" --min-numbers 104
    rm -rf "$out/big" "$out/big-variant"
else
    echo "browser: $genrun is not built: the 10^6-event pages are not checked" >&2
    failures=$((failures + 1))
fi

if ((failures)); then
    echo "browser: $failures page(s) failed; pages, DOMs and logs are in $out" >&2
    exit 1
fi
echo "browser: ok (screenshots in $out/*.png)"
