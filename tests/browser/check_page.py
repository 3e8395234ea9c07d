#!/usr/bin/env python3
"""check_page.py - checks what chromium rendered of a cutrace HTML page.

Reads the DOM chromium dumped (--dump-dom) of a copy of the page with
probe_head.html and probe_tail.html inserted, takes the probe's JSON from
<pre id="cutrace-probe">, and checks: no script error (from the probe and
from chromium's console log), every chart has paths and each path has a
non-empty d the browser drew (length > 0), hovering a chart shows its
values (the page's script ran), nothing reaches outside the page,
with --nvtx N that the charts have N NVTX ranges, each a band and a strip
laid out (non-zero size) whose title names it with its duration, and that
hovering a strip shows that range; and, with --budget, every number carrying a data-key equals the value at
that path of `cutrace budget --json` and is shown as that value.

  check_page.py --dom DOM --log CHROMIUM_STDERR --name NAME
                [--budget [PREFIX=]BUDGET_JSON ... --min-numbers N] [--charts N] [--max-charts N]
                [--nvtx N]

Exit 0 when the page passes, 1 with one line per problem otherwise.
"""
import argparse
import html
import json
import re
import sys

GIB = float(1 << 30)


def probe_of(dom):
    found = re.findall(r'<pre id="cutrace-probe">(.*?)</pre>', dom, re.S)
    if not found:
        return None
    return json.loads(html.unescape(found[-1]))


def lookup(doc, key):
    node = doc
    for part in key.split("."):
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise KeyError(key)
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(key)
    return node


def shown_number(text):
    """The number a cell shows, and the unit it is shown in."""
    m = re.match(r"\s*(-?[0-9]+(?:\.[0-9]+)?)\s*(GiB)?\s*$", text)
    if not m:
        return None, None
    return float(m.group(1)), m.group(2)


def check_numbers(probe, budgets, problems):
    """budgets: {prefix: budget --json}; a page of two runs keys A's numbers
    "A.jobs..." (prefix "A"), a page of one has the prefix ""."""
    checked = 0
    for n in probe["numbers"]:
        key, unit = n["key"], n["unit"]
        prefix, _, rest = key.partition(".")
        budget, path = (budgets[prefix], rest) if prefix in budgets else (budgets.get(""), key)
        try:
            if budget is None:
                raise KeyError(key)
            want = lookup(budget, path)
        except KeyError:
            problems.append(f"{key}: not in cutrace budget --json")
            continue
        if not isinstance(want, (int, float)) or isinstance(want, bool):
            problems.append(f"{key}: budget --json has {want!r}, not a number")
            continue
        value = float(n["value"])
        if unit in ("bytes", "count"):
            if int(n["value"]) != want:
                problems.append(f"{key}: page {n['value']}, budget --json {want}")
                continue
        elif abs(value - want) > 1e-9 * max(1.0, abs(want)):
            problems.append(f"{key}: page {n['value']}, budget --json {want!r}")
            continue
        shown, shown_unit = shown_number(n["text"])
        if shown is None:
            problems.append(f"{key}: the page shows {n['text']!r}, not a number")
            continue
        expect = want / GIB if unit == "bytes" else want
        # shown with 6 decimals in GiB, whole for counts
        tolerance = 0.5 if unit == "count" else 0.5e-6 + 1e-12 * abs(expect)
        if unit != "count" and shown_unit != "GiB":
            problems.append(f"{key}: shown as {n['text']!r}, expected GiB")
        elif abs(shown - expect) > tolerance:
            problems.append(f"{key}: shown as {n['text']!r}, budget --json says {expect!r}")
        checked += 1
    return checked


BAND_TITLE = re.compile(r"^NVTX .+: [0-9]+\.[0-9]+ (s|ms|us) \([0-9.]+ s to [0-9.]+ s")


def check_bands(charts, want, problems):
    """The NVTX bands: `want` ranges, each a band and a strip, laid out."""
    got = {"nvtx": 0, "nvtxbar": 0}
    for c in charts:
        for b in c.get("bands", []):
            got[b["cls"]] = got.get(b["cls"], 0) + 1
            if b["width"] <= 0 or b["height"] <= 0:
                problems.append(f"chart {c['id']}: an NVTX {b['cls']} not laid out "
                                f"({b['width']}x{b['height']})")
            if not BAND_TITLE.match(b["title"]):
                problems.append(f"chart {c['id']}: NVTX {b['cls']} titled {b['title']!r}, "
                                "not its name and duration")
        hover = c.get("band_hover")
        if hover and (not hover["want"] or hover["got"] != hover["want"]):
            problems.append(f"chart {c['id']}: hovering an NVTX strip shows {hover['got']!r}, "
                            f"not {hover['want']!r}")
        if any(b["cls"] == "nvtxbar" for b in c.get("bands", [])) and not hover:
            problems.append(f"chart {c['id']}: NVTX strips but no readout to hover into")
    for cls in ("nvtx", "nvtxbar"):
        if got.get(cls, 0) != want:
            problems.append(f"{got.get(cls, 0)} NVTX {cls} rects, expected {want}")
    return got["nvtxbar"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dom", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--budget", action="append", default=[],
                    help="[PREFIX=]FILE: budget --json of the numbers keyed PREFIX.")
    ap.add_argument("--min-numbers", type=int, default=1)
    ap.add_argument("--charts", type=int, default=1)
    ap.add_argument("--max-charts", type=int)
    ap.add_argument("--nvtx", type=int)
    a = ap.parse_args()
    problems = []
    with open(a.dom, encoding="utf-8", errors="replace") as f:
        probe = probe_of(f.read())
    if probe is None:
        print(f"browser: {a.name}: the probe wrote nothing: the page did not load or run")
        return 1
    problems += [f"script error: {e}" for e in probe["errors"]]
    with open(a.log, encoding="utf-8", errors="replace") as f:
        for line in f:
            if "CONSOLE" in line and ("Uncaught" in line or "Error" in line):
                problems.append("console: " + line.strip()[:300])
    problems += [f"reaches outside the page: {e}" for e in probe["external"]]
    charts = [c for c in probe["charts"] if "chart" in c["cls"].split() or c["cls"] == "waterfall"]
    if len(charts) < a.charts:
        problems.append(f"{len(charts)} charts, expected at least {a.charts}")
    if a.max_charts is not None and len(charts) > a.max_charts:
        problems.append(f"{len(charts)} charts, expected at most {a.max_charts}")
    for c in charts:
        if c["width"] <= 0 or c["height"] <= 0:
            problems.append(f"chart {c['id']}: not laid out ({c['width']}x{c['height']})")
        if "chart" in c["cls"].split():
            hover = c.get("hover")
            if not hover:
                problems.append(f"chart {c['id']}: no value to show on hover, or no readout")
            elif not hover["want"] or hover["got"] != hover["want"]:
                problems.append(f"chart {c['id']}: hovering shows {hover['got']!r}, "
                                f"not {hover['want']!r}")
        drawn = c["paths"] or c["rects"]
        if not drawn:
            problems.append(f"chart {c['id']}: nothing drawn")
        for p in c["paths"]:
            if not p["d"].strip():
                problems.append(f"chart {c['id']}: a {p['cls']} path with an empty d")
            elif p["length"] <= 0 and " L" in p["d"]:
                problems.append(f"chart {c['id']}: a {p['cls']} path the browser drew as nothing")
    bands = check_bands(charts, a.nvtx, problems) if a.nvtx is not None else 0
    checked = 0
    if a.budget:
        budgets = {}
        for spec in a.budget:
            prefix, eq, path = spec.partition("=")
            if not eq:
                prefix, path = "", spec
            with open(path, encoding="utf-8") as f:
                budgets[prefix] = json.load(f)
        checked = check_numbers(probe, budgets, problems)
        if checked < a.min_numbers:
            problems.append(f"{checked} numbers checked against budget --json, "
                            f"expected at least {a.min_numbers}")
    for p in problems:
        print(f"browser: {a.name}: {p}")
    if problems:
        return 1
    paths = sum(len(c["paths"]) for c in charts)
    print(f"browser: {a.name}: ok ({len(charts)} charts, {paths} paths, hover values, "
          f"{bands} NVTX bands, {checked} numbers equal budget --json, no script error)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
