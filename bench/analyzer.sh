#!/bin/sh
# analyzer.sh - the analyzer's speed and peak memory on synthetic runs, with
# the targets of issue 16 checked and every miss printed as a GAP.
#
#   bench/analyzer.sh BUILD_DIR [EVENTS...]     (default: 100000 1000000 10000000)
#
# For each size, bench/genrun writes a run of 8 ranks (a TP=8 SGLang server's
# traces, EVENTS events rows in all) and its variant (bigger custom
# all-reduce buffers), then every report reads it with its output thrown
# away: summary, collectives, timeline, budget --framework sglang, diff of
# the run against the variant (it reads both: 2 x EVENTS), sites. Each is
# timed by bench/measure (wall seconds and the child's peak RSS). The
# baseline, measured in the same invocation: bench/scan, plain SQLite
# reading every column of every events row of the run; "x scan" is a
# report's time over the scan's.
#
# Targets (issue 16, point 4):
#   rate    at least 1,000,000 events/s at 10^6 events
#   growth  time at 10^7 over time at 10^6 at most 11x
#   peak    at most 150 bytes of peak RSS per event read, from 10^6 on
#           (below, the binary's fixed few MiB are most of it)
# A size below 10^6 is measured and not judged. Rates, ratios and growth
# are by CPU time (user + system of the report's process): the machines this
# runs on are shared, and the wall clock, also printed, counts the others'
# work too. Each figure is the best of BENCH_REPEAT runs (default 3; 1 at
# 10^7 and above); a report still running after BENCH_TIMEOUT seconds
# (default 900) is killed and its row says so.
# BENCH_RESULTS=FILE: the raw figures also go there, one line per report and
# size, "NAME EVENTS WALL CPU RSS_KIB STATUS" (bench/bench.py's input).
# Exits 1 when a report failed (not for a GAP), 2 on usage.
set -eu
if [ $# -lt 1 ]; then
    echo "usage: bench/analyzer.sh BUILD_DIR [EVENTS...]" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
shift
sizes=${*:-100000 1000000 10000000}
repeat=${BENCH_REPEAT:-3}
timeout=${BENCH_TIMEOUT:-900}
reports="summary collectives timeline budget diff sites"
work=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-abench-XXXXXX")
trap 'rm -rf "$work"' EXIT
results=$work/results # report events seconds rss_kib status
: >"$results"
failed=0

# measure_one NAME EVENTS TIMES CMD...: the best of TIMES runs (by CPU
# time) into $results as "NAME EVENTS WALL CPU RSS_KIB STATUS"
measure_one() {
    name=$1 events=$2 times=$3
    shift 3
    best="" best_wall=0 best_rss=0 status=0
    i=0
    while [ "$i" -lt "$times" ]; do
        i=$((i + 1))
        "$build/bench/measure" -t "$timeout" "$work/m" "$@" >/dev/null 2>"$work/err"
        read -r wall cpu rss st <"$work/m"
        if [ "$st" != 0 ]; then
            status=$st best=$cpu best_wall=$wall best_rss=$rss
            if [ "$st" = timeout ]; then
                echo "analyzer bench: $name on $events events: still running after $timeout s, killed" >&2
            else
                echo "analyzer bench: $name on $events events: exit status $st" >&2
                head -5 "$work/err" >&2
                failed=1
            fi
            break
        fi
        if [ -z "$best" ] || awk -v a="$cpu" -v b="$best" 'BEGIN { exit !(a < b) }'; then
            best=$cpu best_wall=$wall
        fi
        if [ "$rss" -gt "$best_rss" ]; then best_rss=$rss; fi
    done
    echo "$name $events $best_wall $best $best_rss $status" >>"$results"
}

echo "analyzer: every report on synthetic runs of 8 ranks (bench/genrun), outputs to /dev/null"
for n in $sizes; do
    rm -rf "$work/a" "$work/b"
    t0=$(date +%s.%N)
    "$build/bench/genrun" -s 1 "$n" "$work/a"
    "$build/bench/genrun" -s 1 -v "$n" "$work/b"
    t1=$(date +%s.%N)
    mb=$(du -sm "$work/a" | awk '{print $1}')
    awk -v n="$n" -v t0="$t0" -v t1="$t1" -v mb="$mb" 'BEGIN {
        printf "  generated %d events (and the variant) in %.1f s: %d MB of traces per run\n", n, t1 - t0, mb }'
    times=$repeat
    [ "$n" -ge 10000000 ] && times=1
    measure_one scan "$n" "$times" "$build/bench/scan" "$work/a"
    for r in $reports; do
        case $r in
        budget) set -- budget --framework sglang --mem-fraction-static 0.85 "$work/a" ;;
        diff) set -- diff --framework sglang "$work/a" "$work/b" ;;
        *) set -- "$r" "$work/a" ;;
        esac
        events=$n
        [ "$r" = diff ] && events=$((2 * n))
        measure_one "$r" "$events" "$times" "$build/cutrace" "$@"
    done
done
rm -rf "$work/a" "$work/b"
# bench/bench.py reads the figures themselves, one line per report and size.
if [ -n "${BENCH_RESULTS:-}" ]; then cp "$results" "$BENCH_RESULTS"; fi

echo
awk -v timeout="$timeout" -v order="scan $reports" '
function rate_text(r) { return r >= 1e6 ? sprintf("%.2fM", r / 1e6) : sprintf("%.0fk", r / 1e3) }
function add(v) { verdict = verdict (verdict == "" ? "" : "; ") v }
{
    name[NR] = $1; ev[NR] = $2; wall[NR] = $3; cpu[NR] = $4; rss[NR] = $5; st[NR] = $6
    n = $1 == "diff" ? $2 / 2 : $2 # the size of the run
    size[NR] = n
    if ($1 == "scan") scan[n] = $4
    t[$1 " " n] = $4
}
END {
    split(order, names, " ")
    printf "%-12s %9s %8s %8s %9s %6s %7s %6s  %s\n", "report", "events", "wall s", "cpu s", \
        "events/s", "x scan", "B/event", "growth", "targets (rate >= 1M/s at 10^6, growth <= 11x, peak <= 150 B/event)"
    met = 0; gaps = 0
    for (o = 1; o in names; o++) for (i = 1; i <= NR; i++) {
        if (name[i] != names[o]) continue
        n = size[i]; verdict = ""
        if (st[i] == "timeout") {
            printf "%-12s %9d %8s %8s %9s %6s %7s %6s  GAP: still running after %d s (killed)\n", \
                name[i], ev[i], ">" timeout, "-", "-", "-", "-", "-", timeout
            gaps++
            continue
        }
        if (st[i] != 0) {
            printf "%-12s %9d %8s %8s %9s %6s %7s %6s  FAILED (exit status %s)\n", \
                name[i], ev[i], "-", "-", "-", "-", "-", "-", st[i]
            continue
        }
        rate = cpu[i] > 0 ? ev[i] / cpu[i] : 0
        bpe = rss[i] * 1024 / ev[i]
        ratio = scan[n] > 0 ? sprintf("%.1f", cpu[i] / scan[n]) : "-"
        growth = "-"
        if (n >= 10000000 && (name[i] " 1000000") in t && t[name[i] " 1000000"] > 0) {
            g = cpu[i] / t[name[i] " 1000000"]
            growth = sprintf("%.1fx", g)
        }
        if (name[i] == "scan") {
            verdict = "baseline: plain SQLite reads every column of every events row"
        } else {
            if (n == 1000000) {
                if (rate >= 1e6) { add("rate ok"); met++ }
                else { add(sprintf("GAP rate %s/s < 1M/s", rate_text(rate))); gaps++; rate_gaps++ }
            }
            if (growth != "-") {
                if (g <= 11) { add("growth ok"); met++ }
                else { add(sprintf("GAP growth %.1fx > 11x", g)); gaps++; growth_gaps++ }
            }
            if (n >= 1000000) {
                if (bpe <= 150) { add("peak ok"); met++ }
                else { add(sprintf("GAP peak %.0f B/event > 150", bpe)); gaps++ }
            }
            if (verdict == "") verdict = "-"
        }
        printf "%-12s %9d %8.2f %8.2f %9s %6s %7.0f %6s  %s\n", name[i], ev[i], wall[i], cpu[i], \
            rate_text(rate), ratio, bpe, growth, verdict
    }
    if (met + gaps > 0) printf "targets: %d met, %d GAP\n", met, gaps
    # Each kind of GAP with its cause, from the baseline measured here.
    if (rate_gaps && scan[1000000] > 0) {
        s = 1000000 / scan[1000000]
        if (s < 1e6)
            printf "cause of the rate GAPs: the plain scan itself reads %s events/s here, the\n" \
                   " ceiling for a report that reads every event through SQLite once; the work of a\n" \
                   " report itself is its x scan above 1.0\n", rate_text(s)
        else
            printf "cause of the rate GAPs: the scan reads %s events/s here; what keeps those\n" \
                   " reports under 1M/s is their own work, x scan above 1.0\n", rate_text(s)
    }
    if (growth_gaps && scan[10000000] > 0 && scan[1000000] > 0)
        printf "cause of the growth GAPs: the scan itself grew %.1fx; the rest is the work of the\n" \
               " reports on a model ten times larger (README, Analyzer speed: their instruction\n" \
               " counts grow linearly, their time with the caches they no longer fit)\n", \
               scan[10000000] / scan[1000000]
}' "$results"
echo "(events/s, x scan and growth by CPU time, user + system: on a shared machine the wall"
echo " clock also counts other processes. diff reads the run and its variant: its events"
echo " are both. Best of $repeat runs below 10^7 events, one run at 10^7.)"
exit "$failed"
