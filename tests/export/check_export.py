#!/usr/bin/env python3
"""check_export.py - the test's decoder of `cutrace export` output: parses
every packet of a Perfetto protobuf trace (or every event of a Chrome JSON
trace) with nothing but the standard library, and checks the structure the
viewers require:

  - every event's track declared before use, every track's parent before it;
  - timestamps present (clock 3, CLOCK_MONOTONIC) and never decreasing
    within a packet sequence (JSON: within a pid/tid, or a counter's pid/name);
  - counter tracks carry only counter events, other tracks none;
  - slices nest: each END closes an open BEGIN of its track, none left open;
  - every interned name, category, argument name and string value resolved
    within its sequence, which starts by clearing its incremental state;
  - every flow begins exactly once and ends exactly once.

Prints one line of counts as JSON (slices per track kind -- nvtx_* for a
process's NVTX tracks, apart from thread and other slices -- counters,
instants, flows, tracks) and exits 1 with each problem found (at most 20
shown), 0 otherwise. --expect KEY=N (repeatable) checks a count exactly,
--expect KEY>=N at least.

    check_export.py FILE [--format proto|json] [--expect thread_slices=120 ...]
"""
import json
import re
import sys

MAX_SHOWN = 20


class Problems:
    def __init__(self):
        self.items = []

    def add(self, text):
        self.items.append(text)

    def __bool__(self):
        return bool(self.items)


def varint(buf, i):
    b = buf[i]
    if b < 0x80:
        return b, i + 1
    shift = value = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def fields(buf):
    """One message as {field: [values]}: ints for varint/fixed, bytes for LEN."""
    i, n, out = 0, len(buf), {}
    while i < n:
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 2:
            size, i = varint(buf, i)
            if i + size > n:
                raise ValueError("length-delimited field past its message")
            value, i = buf[i:i + size], i + size
        elif wire == 1:
            if i + 8 > n:
                raise ValueError("truncated fixed64")
            value, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wire == 5:
            value, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError("wire type %d" % wire)
        if field in out:
            out[field].append(value)
        else:
            out[field] = [value]
    if i != n:
        raise ValueError("message overruns its length")
    return out


def one(fs, field, default=None):
    vals = fs.get(field)
    return vals[-1] if vals else default


def many(fs, field):
    return fs.get(field, ())


_annotations = {}


def annotation_refs(raw):
    """The interned ids a debug annotation names. The same few thousand
    annotations (a name and a value) recur across a run's calls: each is
    decoded once."""
    refs = _annotations.get(raw)
    if refs is None:
        af = fields(raw)
        refs = [("arg_name", one(af, 1))]
        if one(af, 17) is not None:
            refs.append(("string", one(af, 17)))
        if len(_annotations) < 1 << 20:
            _annotations[raw] = refs
    return refs


def new_counts():
    return {"packets": 0, "tracks": 0, "process_tracks": 0, "thread_tracks": 0,
            "counter_tracks": 0, "group_tracks": 0, "thread_slices": 0, "other_slices": 0,
            "instants": 0, "counters": 0, "flows": 0, "sequences": 0,
            "nvtx_tracks": 0, "nvtx_slices": 0, "nvtx_instants": 0}


def check_proto(data, problems):
    counts = new_counts()
    tracks = {}  # uuid -> kind
    process_pids = set()
    seqs = {}  # sequence id -> {"ts": last, "interned": {(kind, iid)}, "cleared": bool}
    open_slices = {}  # track -> depth
    flow_begin, flow_end = {}, {}
    saw_clock = False
    INTERNED = {1: "category", 2: "name", 3: "arg_name", 29: "string"}
    top = fields(memoryview(data))
    if set(top) - {1} or not all(isinstance(p, memoryview) for p in top.get(1, ())):
        problems.add("the trace has top-level fields other than packets")
    for packet in top.get(1, ()):
        counts["packets"] += 1
        where = "packet %d" % counts["packets"]
        p = fields(packet)
        seq_id = one(p, 10)
        if seq_id is None:
            problems.add("%s: no trusted_packet_sequence_id" % where)
            continue
        flags = one(p, 13, 0)
        seq = seqs.get(seq_id)
        if seq is None:
            counts["sequences"] += 1
            seq = seqs[seq_id] = {"ts": None, "interned": set(), "cleared": False}
            if not flags & 1:
                problems.add("%s: sequence %d starts without clearing its incremental state"
                             % (where, seq_id))
        if flags & 1:
            seq["interned"] = set()
            seq["cleared"] = True
        if one(p, 6) is not None:
            snap = fields(one(p, 6))
            clocks = {one(fields(c), 1) for c in many(snap, 1)}
            saw_clock = saw_clock or (3 in clocks and one(snap, 2) == 3)
        interned = one(p, 12)
        if interned is not None:
            for f, entries in fields(interned).items():
                for entry in entries if f in INTERNED else ():
                    e = fields(entry)
                    iid = one(e, 1)
                    if not iid or one(e, 2) is None:
                        problems.add("%s: interned %s without iid or text" % (where, INTERNED[f]))
                    seq["interned"].add((INTERNED[f], iid))
        td = one(p, 60)
        if td is not None:
            d = fields(td)
            uuid, parent = one(d, 1), one(d, 5)
            if not uuid or uuid in tracks:
                problems.add("%s: track uuid %r missing or declared twice" % (where, uuid))
            if parent is not None and parent not in tracks:
                problems.add("%s: track %r's parent %r not declared before it"
                             % (where, uuid, parent))
            kind = ("process" if one(d, 3) is not None else "thread" if one(d, 4) is not None
                    else "counter" if one(d, 8) is not None else "group")
            name = one(d, 2)
            if kind == "group" and parent in tracks and tracks[parent] == "process":
                # A process's own slice tracks are NVTX's (docs/export.md).
                if not bytes(name or b"").startswith(b"NVTX "):
                    problems.add("%s: process slice track %r is not named NVTX ..."
                                 % (where, uuid))
                kind = "nvtx"
            if kind == "counter" and one(fields(one(d, 8)), 3) != 3:
                problems.add("%s: counter track %r not in bytes" % (where, uuid))
            if not one(d, 2):
                problems.add("%s: track %r has no name" % (where, uuid))
            if kind == "thread":
                pid = one(fields(one(d, 4)), 1)
                if pid not in process_pids:
                    problems.add("%s: thread track %r of pid %r, whose process track is not "
                                 "declared before it" % (where, uuid, pid))
            elif kind == "process":
                process_pids.add(one(fields(one(d, 3)), 1))
            tracks[uuid] = kind
            counts["tracks"] += 1
            counts[kind + "_tracks"] += 1
        te = one(p, 11)
        if te is None:
            continue
        e = fields(te)
        ts, clock = one(p, 8), one(p, 58)
        if ts is None or clock != 3:
            problems.add("%s: event without a CLOCK_MONOTONIC timestamp" % where)
            continue
        if seq["ts"] is not None and ts < seq["ts"]:
            problems.add("%s: timestamp %d before %d on sequence %d" % (where, ts, seq["ts"], seq_id))
        seq["ts"] = ts
        track, typ = one(e, 11), one(e, 9)
        if track not in tracks:
            problems.add("%s: event on track %r not declared before" % (where, track))
            continue
        kind = tracks[track]
        if (typ == 4) != (kind == "counter"):
            problems.add("%s: event of type %r on %s track %r" % (where, typ, kind, track))
        refs = [("name", one(e, 10))] if typ in (1, 3) else []
        refs += [("category", c) for c in many(e, 3)]
        for a in many(e, 4):
            refs.extend(annotation_refs(bytes(a)))
        for what, iid in refs:
            if (what, iid) not in seq["interned"]:
                problems.add("%s: %s iid %r not interned on sequence %d" % (where, what, iid, seq_id))
        if typ == 1:
            open_slices[track] = open_slices.get(track, 0) + 1
            counts["thread_slices" if kind == "thread" else
                   "nvtx_slices" if kind == "nvtx" else "other_slices"] += 1
        elif typ == 2:
            if open_slices.get(track, 0) == 0:
                problems.add("%s: slice end on track %r with no slice open" % (where, track))
            else:
                open_slices[track] -= 1
        elif typ == 3:
            counts["instants"] += 1
            counts["nvtx_instants"] += kind == "nvtx"
        elif typ == 4:
            counts["counters"] += 1
            if one(e, 30) is None:
                problems.add("%s: counter event without a value" % where)
        else:
            problems.add("%s: event type %r" % (where, typ))
        for fid in many(e, 47):
            flow_begin[fid] = flow_begin.get(fid, 0) + 1
        for fid in many(e, 48):
            flow_end[fid] = flow_end.get(fid, 0) + 1
    if not saw_clock:
        problems.add("no clock snapshot making CLOCK_MONOTONIC the trace's clock")
    for track, depth in open_slices.items():
        if depth:
            problems.add("track %r ends with %d slice(s) open" % (track, depth))
    check_flows(flow_begin, flow_end, problems)
    counts["flows"] = len(flow_begin)
    return counts


def check_flows(begin, end, problems):
    for fid in sorted(set(begin) | set(end)):
        if begin.get(fid, 0) != 1 or end.get(fid, 0) != 1:
            problems.add("flow %d begins %d time(s) and ends %d time(s)"
                         % (fid, begin.get(fid, 0), end.get(fid, 0)))


def check_json(data, problems):
    counts = new_counts()
    doc = json.loads(data)
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list) or not events:
        problems.add("traceEvents is not a non-empty array")
        return counts
    named_pids, named_threads, nvtx_threads = set(), set(), set()
    last = {}
    depth = {}
    counter_pids, counter_names, slice_keys = set(), set(), set()
    flow_begin, flow_end = {}, {}
    for n, ev in enumerate(events):
        where = "event %d" % n
        if not all(k in ev for k in ("ph", "ts", "pid")):
            problems.add("%s lacks ph, ts or pid" % where)
            continue
        ph, pid, tid, ts = ev["ph"], ev["pid"], ev.get("tid", 0), ev["ts"]
        if ph == "M":
            # Tracks as the proto has them: a group (pid >= 2^30) and its
            # slice tracks count as group tracks, as there.
            counts["tracks"] += 1
            group = pid >= 1 << 30
            if ev.get("name") == "process_name":
                named_pids.add(pid)
                counts["group_tracks" if group else "process_tracks"] += 1
            else:
                named_threads.add((pid, tid))
                # NVTX tracks: tids of a process above any Linux tid.
                nvtx = not group and tid >= 1 << 30
                if nvtx and not str(ev.get("args", {}).get("name", "")).startswith("NVTX "):
                    problems.add("%s: track %r/%r is not named NVTX ..." % (where, pid, tid))
                if nvtx:
                    nvtx_threads.add((pid, tid))
                counts["group_tracks" if group else "nvtx_tracks" if nvtx
                       else "thread_tracks"] += 1
            continue
        if pid not in named_pids:
            problems.add("%s: pid %r used before its process_name" % (where, pid))
        if ph in "BEi" and tid != 0 and (pid, tid) not in named_threads:
            problems.add("%s: thread %r/%r used before its thread_name" % (where, pid, tid))
        key = (pid, "counter", ev.get("name")) if ph == "C" else (pid, tid)
        if key in last and ts < last[key]:
            problems.add("%s: ts %r before %r on %r" % (where, ts, last[key], key))
        last[key] = ts
        if ph == "B":
            depth[key] = depth.get(key, 0) + 1
            slice_keys.add(key)
            counts["nvtx_slices" if key in nvtx_threads else
                   "thread_slices" if pid < (1 << 30) else "other_slices"] += 1
        elif ph == "E":
            if depth.get(key, 0) == 0:
                problems.add("%s: E with no B open on %r" % (where, key))
            else:
                depth[key] -= 1
        elif ph == "i":
            counts["instants"] += 1
            counts["nvtx_instants"] += key in nvtx_threads
        elif ph == "C":
            counts["counters"] += 1
            counter_pids.add(pid)
            counter_names.add((pid, ev.get("name")))
            if not isinstance(ev.get("args", {}).get("bytes"), int):
                problems.add("%s: counter without bytes" % where)
        elif ph == "s":
            flow_begin[ev["id"]] = flow_begin.get(ev["id"], 0) + 1
        elif ph == "f":
            flow_end[ev["id"]] = flow_end.get(ev["id"], 0) + 1
        else:
            problems.add("%s: phase %r" % (where, ph))
    for key, d in depth.items():
        if d:
            problems.add("%r ends with %d slice(s) open" % (key, d))
    for pid in counter_pids:
        if (pid, 0) in slice_keys:
            problems.add("counters of pid %r share its track 0 with slices" % pid)
    check_flows(flow_begin, flow_end, problems)
    counts["flows"] = len(flow_begin)
    counts["packets"] = len(events)
    counts["counter_tracks"] = len(counter_names)
    counts["tracks"] += len(counter_names)
    return counts


def main(argv):
    args, fmt, expects = [], "proto", []
    i = 1
    while i < len(argv):
        if argv[i] == "--format":
            fmt, i = argv[i + 1], i + 2
        elif argv[i] == "--expect":
            expects.append(argv[i + 1])
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 1 or fmt not in ("proto", "json"):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    with open(args[0], "rb") as f:
        data = f.read()
    problems = Problems()
    try:
        counts = check_proto(data, problems) if fmt == "proto" else check_json(data, problems)
    except ValueError as e:
        print("check_export: %s: cannot be parsed: %s" % (args[0], e), file=sys.stderr)
        return 1
    for spec in expects:
        m = re.fullmatch(r"(\w+)(>=|=)(\d+)", spec)
        if not m or m.group(1) not in counts:
            print("check_export: bad --expect %r" % spec, file=sys.stderr)
            return 2
        key, op, n = m.group(1), m.group(2), int(m.group(3))
        if (op == "=" and counts[key] != n) or (op == ">=" and counts[key] < n):
            problems.add("%s is %d, expected %s%d" % (key, counts[key], op, n))
    print(json.dumps(counts, sort_keys=True))
    if problems:
        for text in problems.items[:MAX_SHOWN]:
            print("check_export: %s: %s" % (args[0], text), file=sys.stderr)
        if len(problems.items) > MAX_SHOWN:
            print("check_export: ... and %d more" % (len(problems.items) - MAX_SHOWN),
                  file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
