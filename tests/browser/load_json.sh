#!/usr/bin/env bash
# load_json.sh - loads a Chrome trace-event JSON file (`cutrace export
# --format json`) in a real Chromium page, headless, the way chrome://tracing
# and Perfetto's legacy importer read it: the page reads the file, JSON.parses
# it and checks that traceEvents is a non-empty array whose every event has
# ph (a string), pid and ts (numbers; a metadata event, ph "M", may leave ts
# out, as the format allows). What the page found is written into its DOM,
# which chromium dumps.
#
#   tests/browser/load_json.sh FILE
#
# Exit 0: loaded and well-formed; 1: it failed (one line says why); 77:
# skipped, with a visible "skipped: chromium: WHY" line (no chromium, and it
# cannot be installed here).
set -euo pipefail

if (($# != 1)); then
    echo "usage: tests/browser/load_json.sh FILE" >&2
    exit 2
fi
file=$1
if [[ ! -r $file ]]; then
    echo "load_json: $file: cannot be read" >&2
    exit 1
fi
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/browser/chromium.sh
. "$here/chromium.sh"
browser_find || exit 77

work=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-load-json.XXXXXX")
trap 'rm -rf "$work"' EXIT
abs=$(cd "$(dirname "$file")" && pwd)/$(basename "$file")
url="file://$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$abs")"

# The page: a synchronous read (the DOM is dumped once the page has loaded,
# so the check must be done by then), the parse and the checks.
cat >"$work/load.html" <<HTML
<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>load_json</title></head><body>
<pre id="result">not run</pre>
<script>
(function () {
  var say = function (text) { document.getElementById('result').textContent = text; };
  try {
    var xhr = new XMLHttpRequest();
    xhr.open('GET', $(python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$url"), false);
    xhr.send(null);
    if (!xhr.responseText) { say('FAIL: the file could not be read by the page'); return; }
    var doc = JSON.parse(xhr.responseText);
    var events = doc && doc.traceEvents;
    if (!Array.isArray(events)) { say('FAIL: traceEvents is not an array'); return; }
    if (events.length === 0) { say('FAIL: traceEvents is empty'); return; }
    for (var i = 0; i < events.length; i++) {
      var e = events[i];
      if (!e || typeof e !== 'object') { say('FAIL: event ' + i + ' is not an object'); return; }
      if (typeof e.ph !== 'string' || e.ph.length === 0) {
        say('FAIL: event ' + i + ' has no ph'); return;
      }
      if (typeof e.pid !== 'number') { say('FAIL: event ' + i + ' has no numeric pid'); return; }
      if (typeof e.ts !== 'number' && !(e.ph === 'M' && e.ts === undefined)) {
        say('FAIL: event ' + i + ' (ph ' + e.ph + ') has no numeric ts'); return;
      }
    }
    say('OK: ' + events.length + ' events');
  } catch (err) {
    say('FAIL: ' + err);
  }
})();
</script>
</body></html>
HTML

if ! browser_run "$work/profile" --dump-dom "file://$work/load.html" >"$work/dom" \
    2>"$work/log"; then
    echo "load_json: $file: chromium failed: $(tail -n 1 "$work/log")" >&2
    exit 1
fi
result=$(python3 -c '
import html, re, sys
m = re.search(r"<pre id=\"result\">(.*?)</pre>", open(sys.argv[1], encoding="utf-8").read(), re.S)
print(html.unescape(m.group(1)) if m else "FAIL: the page did not run")' "$work/dom")
case $result in
OK:*)
    echo "load_json: $file: ${result#OK: } parsed by chromium"
    ;;
*)
    echo "load_json: $file: ${result#FAIL: }" >&2
    exit 1
    ;;
esac
