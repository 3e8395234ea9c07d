"""sglang_sim.py - SGLang's start-up as `python -m sglang.launch_server` runs it,
on the fake GPU stack, for `cutrace budget` (the `budget_paths` integration
suite; examples/README.md shows it run by hand).

The launcher holds the server's flags, never calls CUDA or NCCL (so it
leaves no trace) and starts one scheduler process per TP rank with
multiprocessing's spawn method, as SGLang does: a worker's own command line
is only `python -c "from multiprocessing.spawn import spawn_main; ..."
--multiprocessing-fork`, so a trace finds --mem-fraction-static and the rest
on its launcher's line. Each worker runs the start-up of one of two SGLang
releases (--sim-sglang-path), laid out in sglang_releases/ as SGLang's
python/sglang/srt is (github.com/sgl-project/sglang), so that the traced
Python stacks show SGLang's functions in SGLang's files: `cutrace budget`
picks its measurements and the code path by them (docs/budget.md, "How the
measurements are found", "Which server and code path"):

  older (about 0.4.x): sglang_releases/older/sglang/srt/model_executor/
    model_runner.py, profile_max_num_token's arithmetic;
  current (about 0.5.16 and later): sglang_releases/current/sglang/srt/
    distributed/bootstrap.py, model_executor/model_runner.py and
    pool_configurator.py, mem_cache/kv_cache_configurator.py,
    managers/scheduler.py: _profile_available_bytes' arithmetic, its
    ValueError, the multimodal reserve, the draft worker and its cell scale.

Each module's header says what it measures and computes, each as SGLang
writes it; sglang_releases/sim_support.py holds what is below SGLang: CUDA
and NCCL through ctypes.CDLL (cudart_calls.py, nccl_calls.py), which
releases the GIL around every call as torch's calls do, the MIN over the
ranks of get_available_gpu_memory (utils/common.py: torch.tensor(free,
dtype=float32) all-reduced over the CPU group; here the ranks exchange their
free bytes through multiprocessing queues and round them to float32 with
struct), and the KV pool allocated as SGLang's pools allocate it (one buffer
per layer, MLA, or two, MHA, of (tokens + page_size) tokens; the draft's
layers after the target's).

    sglang_sim.py --sim-sglang-path older|current --mem-fraction-static F
                  [--tp N] [--page-size N] [--max-total-tokens N]
                  [--speculative-algorithm EAGLE|STANDALONE]
                  [--speculative-draft-layers D] [--num-layers L]
                  [--attention mla|mha] [--kv-layer-bytes B]
                  [--weights-mib N] [--draft-weights-mib N]
                  [--alloc-after-load-mib N] [--occupied-bytes-per-rank N]
                  [--multimodal-sim] [--context-length N] [--model-path P]

--num-layers, --kv-layer-bytes and --attention stand for the model's config
(cell = L * B for MLA, 2 * L * B for MHA; `cutrace budget --cell-size`);
--speculative-draft-layers for the draft model's; --multimodal-sim makes the
model multimodal (the reserve is SGLANG_VLM_CACHE_SIZE_MB, default 100, /
1024 GiB; `cutrace budget --multimodal`); --alloc-after-load-mib makes a
buffer after load_model's last measurement (as a sampler's or a graph
runner's workspace would be); --occupied-bytes-per-rank N has rank r find r
* N bytes of its GPU taken before it starts (as by another process), so the
ranks' free memory differs and the MIN matters.

Each rank prints one JSON line with what SGLang computed: pre_gib, post_gib,
mm_reserve_gib (0 on the older path, which has no reserve), rest_gib,
available_bytes (null on the older path), cell_size (the effective one),
tokens_profiled (before the cap and the page floor), tokens, fits,
error_type ("ValueError", "RuntimeError" or null), message (the exception's
text or null), pre_free_bytes and post_free_bytes (the whole bytes before
float32, the MIN over the ranks when distributed), path, rank, tp. A rank
that fails prints its line, then raises as SGLang does (a traceback on
stderr, exit status 1). The launcher prints rank 0's line last, prefixed
"server: ", and exits 0 only when every rank started.
"""
import argparse
import json
import multiprocessing
import os
import queue
import sys

import cudart_calls as cuda
import nccl_calls as nccl

RELEASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sglang_releases")
sys.path.insert(0, RELEASES)  # sim_support; a release's sglang package comes in main()

from sim_support import CpuGroup, communicators, report  # noqa: E402


# ---- the processes ----


def report_line(args, rank):
    keys = ("path", "rank", "tp", "pre_gib", "post_gib", "mm_reserve_gib", "rest_gib",
            "available_bytes", "cell_size", "tokens_profiled", "tokens", "fits", "error_type",
            "message", "pre_free_bytes", "post_free_bytes")
    report.update(path=args.sim_sglang_path, rank=rank, tp=args.tp)
    return json.dumps({key: report.get(key) for key in keys})


def run_scheduler_process(rank, args, inboxes, results):
    """One TP rank: what SGLang's run_scheduler_process does up to the pools."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.tp),
                      LOCAL_WORLD_SIZE=str(args.tp))
    cuda.load(False)
    nccl.load()
    cpu_group = CpuGroup(rank, inboxes)
    report.update(fits=False, error_type=None, message=None)
    try:
        if args.sim_sglang_path == "older":
            from sglang.srt.model_executor.model_runner import ModelRunner
            ModelRunner(args, rank, cpu_group)
        else:
            from sglang.srt.managers.scheduler import Scheduler
            Scheduler(args, rank, cpu_group)
        report["fits"] = True
    except (ValueError, RuntimeError) as e:
        report.update(error_type=type(e).__name__, message=str(e))
        line = report_line(args, rank)
        print(line, flush=True)
        results.put((rank, line))
        raise
    line = report_line(args, rank)
    print(line, flush=True)
    results.put((rank, line))
    cuda.free_all()
    for comm in communicators:
        nccl.destroy(comm)


def parse_args():
    parser = argparse.ArgumentParser(description="SGLang's start-up on the fake GPU stack")
    add = parser.add_argument
    add("--sim-sglang-path", choices=["older", "current"], required=True,
        help="whose start-up: about 0.4.x or about 0.5.16 and later")
    add("--model-path", default="fake/model")
    add("--mem-fraction-static", type=float, required=True)
    add("--tp", "--tp-size", type=int, default=1)
    add("--page-size", type=int, default=1)
    add("--max-total-tokens", type=int)
    add("--context-length", type=int, default=4096)
    add("--speculative-algorithm", choices=["EAGLE", "STANDALONE"])
    add("--speculative-draft-layers", type=int, default=1)
    add("--num-layers", type=int, default=4)
    add("--attention", choices=["mla", "mha"], default="mla")
    add("--kv-layer-bytes", type=int, default=1152, help="one layer's buffer, bytes per token")
    add("--weights-mib", type=int, default=1280)
    add("--draft-weights-mib", type=int, default=256)
    add("--alloc-after-load-mib", type=int, default=0)
    add("--occupied-bytes-per-rank", type=int, default=0)
    add("--multimodal-sim", action="store_true")
    args = parser.parse_args()
    if args.sim_sglang_path == "older" and (args.speculative_algorithm or
                                            args.alloc_after_load_mib or args.multimodal_sim):
        parser.error("--speculative-algorithm, --alloc-after-load-mib and --multimodal-sim are"
                     " simulated on the current path only")
    if args.tp < 1 or args.page_size < 1:
        parser.error("--tp and --page-size are at least 1")
    return args


def wait_for_ranks(procs, results):
    """({rank: its JSON line}, how many ranks failed), once every rank has
    exited; a rank that died without a line (a crash, not SGLang's error)
    is not waited for."""
    lines = {}
    while len(lines) < len(procs):
        try:
            rank, line = results.get(timeout=1)
            lines[rank] = line
        except queue.Empty:
            missing = [proc for rank, proc in enumerate(procs) if rank not in lines]
            if all(proc.exitcode is not None for proc in missing):
                break  # a line put just before its sender exited is in the pipe by now
    while True:
        try:
            rank, line = results.get_nowait()
            lines[rank] = line
        except queue.Empty:
            break
    for proc in procs:
        proc.join()
    return lines, sum(1 for proc in procs if proc.exitcode != 0)


def main():
    args = parse_args()
    # The release's tree, which the spawned ranks inherit with sys.path.
    sys.path.insert(0, os.path.join(RELEASES, args.sim_sglang_path))
    context = multiprocessing.get_context("spawn")
    inboxes = [context.Queue() for _ in range(args.tp)]
    results = context.Queue()
    procs = [context.Process(target=run_scheduler_process, args=(rank, args, inboxes, results))
             for rank in range(args.tp)]
    for proc in procs:
        proc.start()
    lines, failed = wait_for_ranks(procs, results)
    if 0 in lines:
        print("server: " + lines[0])
    if failed or len(lines) != args.tp:
        print(f"launcher: {failed} of {args.tp} scheduler process(es) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
