"""sections.py - what torch_check.py and story_check.py share: the facts file,
sections that report every failure and go on, and the global-mode graph
capture with an all-reduce inside that both take.

Imported as a sibling module (both scripts run from this directory, and
multiprocessing's spawn children get the same sys.path).
"""
import json
import os

MIB = 1 << 20
GIB = 1 << 30
REPLAYS = 3


class Facts:
    """The facts file: one JSON object per line, appended with one write each.

    Opened with O_APPEND, so the lines of this process and of its children
    (each opens the file itself) never interleave; os.write is unbuffered, so
    every line is on disk at once. Without a path nothing is written."""

    def __init__(self, path, prog):
        self.path = path
        self.prog = prog
        self.fd = None
        if path:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def emit(self, event, section, **fields):
        if self.fd is None:
            return
        record = {"prog": self.prog, "pid": os.getpid(), "event": event, "section": section}
        record.update(fields)
        os.write(self.fd, (json.dumps(record) + "\n").encode())


class Section:
    """What one section body gets: its data checks and its facts."""

    def __init__(self, name, facts):
        self.name = name
        self.facts = facts
        self.failed = []

    def check(self, what, condition):
        """A data check: a failure is recorded, and the section goes on."""
        condition = bool(condition)
        if not condition:
            self.failed.append(what)
        return condition

    def fact(self, event, **fields):
        self.facts.emit(event, self.name, **fields)


def yes_no(b):
    return "yes" if b else "no"


def first_line(e):
    message = str(e).strip()
    message = message.splitlines()[0][:200] if message else ""
    return f"{type(e).__name__}: {message}"


def run_section(name, body, facts):
    """Runs one section and prints its line: "ok, ..." (or "skipped ...") when
    it passed; "FAILED" with the checks that failed, or the exception that
    stopped it, otherwise. Returns whether it passed."""
    sec = Section(name, facts)
    try:
        line = body(sec)
    except Exception as e:  # report every failure, go on with the next section
        detail = "; ".join([f"{what}: no" for what in sec.failed] + [first_line(e)])
        ok = False
    else:
        ok = not sec.failed
        if ok:
            detail = line if line.startswith("skipped") else f"ok, {line}"
        else:
            detail = "; ".join([f"{what}: no" for what in sec.failed] + [line])
    print(f"{name}: {detail}" if ok else f"{name}: FAILED {detail}", flush=True)
    facts.emit("section", name, name=name, ok=ok, detail=detail)
    return ok


def global_graph_with_all_reduce(torch, dist, sec, after_replays=None):
    """Captures a multiply and an all_reduce into a CUDA graph in global mode,
    replays it REPLAYS times and checks the values; returns the section line.

    Global mode is what the servers capture in: torch.cuda.graph's default
    capture_error_mode is "global" (torch/cuda/graphs.py), and SGLang's
    cuda_graph_runner.py and vLLM's model runners use torch.cuda.graph with that
    default. In global mode another thread's "unsafe" CUDA call during the
    capture, such as ProcessGroupNCCL's watchdog querying the end event of an
    earlier collective, would invalidate it. PyTorch prevents that itself:
    ProcessGroupNCCL counts every work it hands to the watchdog
    (CUDAGraph::inc_pending_event_queries) and hands none over while the
    current stream captures (ProcessGroupNCCL.cpp, collective()), and
    CUDAGraph::capture_begin waits until the watchdog has retired the earlier
    ones ("Waiting for pending NCCL work to finish before starting graph
    capture", aten/src/ATen/cuda/CUDAGraph.cpp); PyTorch's test_c10d_nccl.py
    (test_nccl_watchdog_cudagraph) captures all_reduce in this mode. What the
    servers add before capturing, and so does this: a warm-up on a side stream
    (torch.cuda.graph's documentation), every rank idle and together
    (torch.cuda.synchronize() then a barrier, as SGLang's CudaGraphRunner warms
    up), and the capture on a side stream that waited for the current one
    (torch.cuda.graph's own capture stream; vLLM's and SGLang's
    GroupCoordinator.graph_capture). Not TORCH_NCCL_BLOCKING_WAIT: with it the
    wait before a capture has been reported to hang.

    after_replays(sec), if given, runs while the graph (and its private memory
    pool) is still alive."""
    static = torch.ones(MIB, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            y = static * 2
            dist.all_reduce(y)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="global"):
        y = static * 2
        dist.all_reduce(y)
    results = []
    for value in range(1, REPLAYS + 1):
        static.fill_(float(value))
        g.replay()
        torch.cuda.synchronize()
        results.append(bool(torch.all(y == 2 * value)))
    sec.fact("graph", mode="global", replays=REPLAYS)
    if after_replays:
        after_replays(sec)
    del g
    correct = sec.check("correct after each replay", all(results))
    return (f"graph with all_reduce captured in global mode, replayed {REPLAYS} times, "
            f"correct each time: {yes_no(correct)}")
