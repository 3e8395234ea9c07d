"""sglang_sim.py - SGLang's start-up as `python -m sglang.launch_server` runs it,
on the fake GPU stack, for `cutrace budget` (the `budget_paths` integration
suite; examples/README.md shows it run by hand).

The launcher holds the server's flags, never calls CUDA or NCCL (so it
leaves no trace) and starts one scheduler process per TP rank with
multiprocessing's spawn method, as SGLang does: a worker's own command line
is only `python -c "from multiprocessing.spawn import spawn_main; ..."
--multiprocessing-fork`, so a trace finds --mem-fraction-static and the rest
on its launcher's line. Each worker reaches CUDA and NCCL through ctypes.CDLL
(cudart_calls.py, nccl_calls.py), which releases the GIL around every call
as torch's calls do, and runs SGLang's start-up with its functions named and
nested as SGLang names them, since `cutrace budget` picks its measurements
by those names on the Python stacks (docs/budget.md, "How the measurements
are found"), in one of two code paths (--sim-sglang-path), each doing
SGLang's arithmetic as SGLang writes it (github.com/sgl-project/sglang):

  older (about 0.4.x, python/sglang/srt/model_executor/model_runner.py):
    ModelRunner.init_torch_distributed measures min_per_gpu_memory (the MIN
    over the ranks at TP > 1), then local_gpu_memory; load_model measures
    before and after the weights; init_memory_pool calls
    profile_max_num_token (post; rest = post - pre * (1 - F); tokens =
    int(rest * 2^30 // cell)), caps by --max-total-tokens, floors to the
    page (the releases with --page-size), raises RuntimeError("Not enough memory. ...") at <= 0, then
    allocates the pools.
  current (about 0.5.16 and later): ModelRunner.init_torch_distributed calls
    distributed/bootstrap.py's init_torch_distributed: before_avail_memory,
    then after the NCCL groups and custom all-reduce buffers
    pre_model_load_memory (the MIN over the world group, not for a draft
    worker), then local_gpu_memory; load_model measures twice before the
    weights and once after; with --speculative-algorithm EAGLE|STANDALONE
    a draft worker does both again (its own weights); then the scheduler's
    init_memory_pools -> KVCacheConfigurator.configure ->
    _resolve_memory_pool_config -> _profile_available_bytes (post; rest =
    post - pre * (1 - F) - the multimodal reserve; rest <= 0 raises
    SGLang's ValueError; else available_bytes = int(rest * 2^30)) and
    pool_configurator's DefaultPoolConfigurator (cell scaled by 1 + D / L
    with a draft; tokens = available_bytes // cell floored to the page, <= 0
    raises RuntimeError("Not enough memory. ..."); the --max-total-tokens cap,
    floored again), then the pools, the draft's too.

get_available_gpu_memory is utils/common.py's: one cudaMemGetInfo, and when
distributed torch.tensor(free, dtype=float32) all-reduced with MIN over the
CPU group (here: the ranks exchange their free bytes through multiprocessing
queues and round them to float32 with struct, as torch would), / 2^30. The
KV pool is allocated as SGLang's pools allocate it: one buffer per layer
(MLA) or two (MHA, K and V) of (tokens + page_size) tokens, the draft's
layers after the target's.

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
mm_reserve_gib and available_bytes (null on the older path, which has
neither), rest_gib, cell_size (the effective one),
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
import math
import multiprocessing
import os
import queue
import struct
import sys

import cudart_calls as cuda
import nccl_calls as nccl

MiB = 1 << 20
WEIGHT_TENSOR_BYTES = 64 * MiB  # weights arrive as tensors of at most this
CUSTOM_ALL_REDUCE_BYTES = 8 * MiB  # SGLang's default custom all-reduce buffer
NOT_ENOUGH_MEMORY = "Not enough memory. Please try to increase --mem-fraction-static."

# What this process's start-up computed, printed as its JSON line.
report = {}
communicators = []  # destroyed at the end, as at a server's shutdown


# ---- torch.distributed's CPU group, over multiprocessing queues ----


def float32(value):
    """value as torch.tensor(value, dtype=torch.float32).item() gives it back."""
    return struct.unpack("f", struct.pack("f", value))[0]


class CpuGroup:
    """The ranks' gloo group: one inbox per rank; every message carries the
    number of the collective it belongs to, so that a rank already in the
    next one never mixes its value into this one."""

    def __init__(self, rank, inboxes):
        self.rank, self.inboxes = rank, inboxes
        self.world_size = len(inboxes)
        self.calls = 0
        self.early = []  # messages of later collectives, read too soon

    def _exchange(self, value, senders):
        """Sends value to the others if this rank is among senders; returns
        {rank: value} of every sender."""
        call = self.calls
        self.calls += 1
        values = {}
        if self.rank in senders:
            values[self.rank] = value
            for peer, box in enumerate(self.inboxes):
                if peer != self.rank:
                    box.put((call, self.rank, value))
        got = [m for m in self.early if m[0] == call]
        self.early = [m for m in self.early if m[0] != call]
        while len(got) < len(senders) - len(values):
            message = self.inboxes[self.rank].get(timeout=60)
            (got if message[0] == call else self.early).append(message)
        values.update((sender, v) for _, sender, v in got)
        return values

    def broadcast_from_0(self, make):
        return self._exchange(make() if self.rank == 0 else None, senders=[0])[0]

    def all_gather(self, value):
        return list(self._exchange(value, senders=range(self.world_size)).values())


# ---- utils/common.py ----


def get_available_gpu_memory(device, gpu_id, distributed=False, cpu_group=None):
    free_gpu_memory, _ = cuda.mem_get_info()
    if distributed:
        # torch: each rank's free bytes in a float32 tensor, all-reduced with MIN.
        frees = cpu_group.all_gather(free_gpu_memory)
        free_bytes = min(frees)
        free_gpu_memory = min(float32(free) for free in frees)
    else:
        free_bytes = free_gpu_memory
    report["last_free_bytes"] = free_bytes
    return free_gpu_memory / (1 << 30)


# ---- what every path shares: the GPU, the NCCL groups, the weights ----


def take_gpu(rank, args):
    cuda.set_device(rank)
    if args.occupied_bytes_per_rank and rank > 0:
        cuda.malloc(rank * args.occupied_bytes_per_rank)


def init_distributed_environment(rank, args, cpu_group):
    """At TP > 1, the NCCL communicator (rank 0's unique id handed over the
    CPU group, as torch's store would) and custom all-reduce's buffer,
    exported to the peers; at TP 1 neither (none until a collective needs
    one)."""
    if args.tp == 1:
        return
    uid = cpu_group.broadcast_from_0(nccl.unique_id)
    communicators.append(nccl.init_rank(uid, args.tp, rank))
    cuda.ipc_export(cuda.malloc(CUSTOM_ALL_REDUCE_BYTES))


def load_weights(mib):
    left = mib * MiB
    while left > 0:
        cuda.malloc(min(left, WEIGHT_TENSOR_BYTES))
        left -= WEIGHT_TENSOR_BYTES


def cell_size(args, layers):
    per_layer = args.kv_layer_bytes * (1 if args.attention == "mla" else 2)
    return per_layer * layers


def allocate_kv_buffers(args, layers, tokens):
    """MLATokenToKVPool: one buffer per layer; MHATokenToKVPool: K and V per
    layer; each of (size + page_size) tokens."""
    for _ in range(layers * (1 if args.attention == "mla" else 2)):
        cuda.malloc((tokens + args.page_size) * args.kv_layer_bytes)


def allocate_req_to_token_pool(max_num_reqs, context_length):
    cuda.malloc((max_num_reqs + 1) * (context_length + 4) * 4)  # int32 locations


def record(pre_gib, post_gib, mm_reserve_gib, rest_gib):
    report.update(pre_gib=pre_gib, post_gib=post_gib, mm_reserve_gib=mm_reserve_gib,
                  rest_gib=rest_gib)


def max_num_reqs_for(tokens, context_length):
    estimated = int(tokens / context_length * 512)
    return min(max(min(estimated, 4096), 2048), tokens // 2)


# ---- the older path: model_runner.py about 0.4.x ----


class OlderModelRunner:
    """0.4.x's model_runner.ModelRunner."""

    def __init__(self, args, rank, cpu_group):
        self.args, self.gpu_id, self.tp_size = args, rank, args.tp
        self.cpu_group = cpu_group
        self.mem_fraction_static = args.mem_fraction_static
        min_per_gpu_memory = self.init_torch_distributed()
        self.load_model()
        self.init_memory_pool(min_per_gpu_memory, args.max_total_tokens)

    def init_torch_distributed(self):
        take_gpu(self.gpu_id, self.args)
        init_distributed_environment(self.gpu_id, self.args, self.cpu_group)
        min_per_gpu_memory = get_available_gpu_memory(
            "cuda", self.gpu_id, distributed=self.tp_size > 1, cpu_group=self.cpu_group)
        report["pre_free_bytes"] = report["last_free_bytes"]
        local_gpu_memory = get_available_gpu_memory("cuda", self.gpu_id)
        if self.tp_size > 1 and min_per_gpu_memory < local_gpu_memory * 0.9:
            raise ValueError("The memory capacity is unbalanced. Some GPUs may be occupied by "
                             "other processes.")
        return min_per_gpu_memory

    def load_model(self):
        get_available_gpu_memory("cuda", self.gpu_id)  # "Load weight begin. avail mem=..."
        load_weights(self.args.weights_mib)
        get_available_gpu_memory("cuda", self.gpu_id)  # "Load weight end. ..."

    def profile_max_num_token(self, total_gpu_memory):
        available_gpu_memory = get_available_gpu_memory(
            "cuda", self.gpu_id, distributed=self.tp_size > 1, cpu_group=self.cpu_group)
        report["post_free_bytes"] = report["last_free_bytes"]
        cell = cell_size(self.args, self.args.num_layers)
        rest_memory = available_gpu_memory - total_gpu_memory * (1 - self.mem_fraction_static)
        max_num_token = int(rest_memory * (1 << 30) // cell)
        record(total_gpu_memory, available_gpu_memory, None, rest_memory)  # no reserve there
        report.update(cell_size=cell, tokens_profiled=max_num_token)
        return max_num_token

    def init_memory_pool(self, total_gpu_memory, max_total_tokens=None):
        self.max_total_num_tokens = self.profile_max_num_token(total_gpu_memory)
        if max_total_tokens is not None:
            self.max_total_num_tokens = min(self.max_total_num_tokens, max_total_tokens)
        page_size = self.args.page_size
        self.max_total_num_tokens = self.max_total_num_tokens // page_size * page_size
        report["tokens"] = self.max_total_num_tokens
        if self.max_total_num_tokens <= 0:
            raise RuntimeError(NOT_ENOUGH_MEMORY)
        allocate_req_to_token_pool(
            max_num_reqs_for(self.max_total_num_tokens, self.args.context_length),
            self.args.context_length)
        allocate_kv_buffers(self.args, self.args.num_layers, self.max_total_num_tokens)
        get_available_gpu_memory("cuda", self.gpu_id)  # "Memory pool end. ..."


# ---- the current path: about 0.5.16 and later ----


def init_torch_distributed(*, args, gpu_id, is_draft_worker, cpu_group):
    """distributed/bootstrap.py's."""
    before_avail_memory = get_available_gpu_memory("cuda", gpu_id)
    if not is_draft_worker:
        init_distributed_environment(gpu_id, args, cpu_group)
    pre_model_load_memory = get_available_gpu_memory(
        "cuda", gpu_id, distributed=args.tp > 1 and not is_draft_worker, cpu_group=cpu_group)
    if not is_draft_worker:
        report["pre_free_bytes"] = report["last_free_bytes"]
    local_gpu_memory = get_available_gpu_memory("cuda", gpu_id)
    if args.tp > 1 and not is_draft_worker and pre_model_load_memory < local_gpu_memory * 0.9:
        print("The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
              file=sys.stderr)
    assert before_avail_memory >= local_gpu_memory
    return pre_model_load_memory


class ModelRunner:
    """model_executor/model_runner.py's."""

    def __init__(self, args, rank, cpu_group, is_draft_worker):
        self.args, self.gpu_id, self.cpu_group = args, rank, cpu_group
        self.is_draft_worker = is_draft_worker
        self.num_layers = args.speculative_draft_layers if is_draft_worker else args.num_layers
        self.init_torch_distributed()
        self.initialize()

    def init_torch_distributed(self):
        if not self.is_draft_worker:
            take_gpu(self.gpu_id, self.args)
        self.pre_model_load_memory = init_torch_distributed(
            args=self.args, gpu_id=self.gpu_id, is_draft_worker=self.is_draft_worker,
            cpu_group=self.cpu_group)

    def initialize(self):
        self.load_model()
        if not self.is_draft_worker and self.args.alloc_after_load_mib:
            cuda.malloc(self.args.alloc_after_load_mib * MiB)  # after load_model's last measurement

    def load_model(self):
        get_available_gpu_memory("cuda", self.gpu_id)  # before_avail_memory
        get_available_gpu_memory("cuda", self.gpu_id)  # "Load weight begin. avail mem=..."
        load_weights(self.args.draft_weights_mib if self.is_draft_worker else self.args.weights_mib)
        get_available_gpu_memory("cuda", self.gpu_id)  # "Load weight end. ..."


class TpModelWorker:
    def __init__(self, args, rank, cpu_group, is_draft_worker):
        self.model_runner = ModelRunner(args, rank, cpu_group, is_draft_worker)


class EAGLEWorker(TpModelWorker):
    def __init__(self, args, rank, cpu_group):
        super().__init__(args, rank, cpu_group, is_draft_worker=True)


class MemoryPoolConfig:
    """pool_configurator.py's: a pool of no tokens is SGLang's RuntimeError."""

    def __init__(self, max_total_num_tokens):
        self.max_total_num_tokens = max_total_num_tokens
        self.max_running_requests = None
        if self.max_total_num_tokens <= 0:
            raise RuntimeError(NOT_ENOUGH_MEMORY)


class DefaultPoolConfigurator:
    """pool_configurator.py's, for MHA and MLA models."""

    def __init__(self, kvc):
        args = kvc.args
        num_layers = kvc.runner.num_layers
        self._cell_size = cell_size(args, num_layers)
        if args.speculative_algorithm in ("EAGLE", "STANDALONE") and not kvc.is_draft_worker:
            eagle_draft_num_layers = args.speculative_draft_layers
            if eagle_draft_num_layers > 0 and num_layers > 0:
                self._cell_size = int(self._cell_size *
                                      (1 + int(eagle_draft_num_layers) / int(num_layers)))
        report["cell_size"] = self._cell_size

    def calculate_pool_sizes(self, available_bytes, page_size):
        max_total_num_tokens = available_bytes // self._cell_size
        report["tokens_profiled"] = max_total_num_tokens
        max_total_num_tokens = max_total_num_tokens // page_size * page_size
        report["tokens"] = max_total_num_tokens
        return MemoryPoolConfig(max_total_num_tokens=max_total_num_tokens)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens, page_size):
        max_total_num_tokens = max_total_num_tokens // page_size * page_size
        report["tokens"] = max_total_num_tokens
        return MemoryPoolConfig(max_total_num_tokens=max_total_num_tokens)


def mm_runtime_reservation_gb(*, is_multimodal):
    """kv_cache_configurator.py's (no GPU feature transport here)."""
    if not is_multimodal:
        return 0.0
    reserved_mb = int(os.environ.get("SGLANG_VLM_CACHE_SIZE_MB", "100"))
    return reserved_mb / 1024


class KVCacheConfigurator:
    """mem_cache/kv_cache_configurator.py's."""

    def __init__(self, args, runner, cpu_group, memory_pool_config=None):
        self.args, self.runner, self.cpu_group = args, runner, cpu_group
        self.is_draft_worker = runner.is_draft_worker
        self.memory_pool_config = memory_pool_config

    def configure(self, *, pre_model_load_memory):
        if self.args.speculative_algorithm and self.is_draft_worker:
            config = self.memory_pool_config
        else:
            config = self._resolve_memory_pool_config(pre_model_load_memory)
        self._init_pools(config)
        get_available_gpu_memory("cuda", self.runner.gpu_id)  # "Memory pool end. ..."
        return config

    def _profile_available_bytes(self, pre_model_load_memory):
        available_gpu_memory = get_available_gpu_memory(
            "cuda", self.runner.gpu_id, distributed=self.args.tp > 1, cpu_group=self.cpu_group)
        report["post_free_bytes"] = report["last_free_bytes"]
        slack_gb = pre_model_load_memory * (1 - self.args.mem_fraction_static)
        mm_reservation_gb = mm_runtime_reservation_gb(is_multimodal=self.args.multimodal_sim)
        rest_memory = available_gpu_memory - slack_gb - mm_reservation_gb
        record(pre_model_load_memory, available_gpu_memory, mm_reservation_gb, rest_memory)
        if rest_memory <= 0:
            minimum_mem_fraction_static = 1 - available_gpu_memory / pre_model_load_memory
            suggested_mem_fraction_static = math.ceil(minimum_mem_fraction_static * 1000) / 1000
            raise ValueError(
                f"Loaded weights leave no GPU memory for the KV cache under "
                f"--mem-fraction-static={self.args.mem_fraction_static}. "
                f"Raise --mem-fraction-static above "
                f"{suggested_mem_fraction_static:.3f} "
                f"(minimum viable = 1 - available/pre = "
                f"{minimum_mem_fraction_static:.4f}). If using speculative "
                f"decoding, draft weights are now counted.")
        report["available_bytes"] = int(rest_memory * (1 << 30))
        return report["available_bytes"]

    def _apply_token_constraints(self, token_capacity):
        if self.args.max_total_tokens is not None:
            token_capacity = min(token_capacity, self.args.max_total_tokens)
        return token_capacity

    def config_from_budget(self, budget_bytes):
        configurator = DefaultPoolConfigurator(self)
        config = configurator.calculate_pool_sizes(budget_bytes, self.args.page_size)
        max_tokens = self._apply_token_constraints(config.max_total_num_tokens)
        if max_tokens != config.max_total_num_tokens:
            config = configurator.calculate_pool_sizes_from_max_tokens(max_tokens,
                                                                       self.args.page_size)
        return config

    def _resolve_memory_pool_config(self, pre_model_load_memory):
        available_bytes = self._profile_available_bytes(pre_model_load_memory)
        config = self.config_from_budget(available_bytes)
        config.max_running_requests = max_num_reqs_for(config.max_total_num_tokens,
                                                       self.args.context_length)
        return config

    def _init_pools(self, config):
        if not self.is_draft_worker:
            allocate_req_to_token_pool(config.max_running_requests, self.args.context_length)
        allocate_kv_buffers(self.args, self.runner.num_layers, config.max_total_num_tokens)


class Scheduler:
    """managers/scheduler.py's: the target worker, the draft worker, then the pools."""

    def __init__(self, args, rank, cpu_group):
        self.args, self.cpu_group = args, cpu_group
        self.tp_worker = TpModelWorker(args, rank, cpu_group, is_draft_worker=False)
        self.draft_worker = None
        if args.speculative_algorithm:
            self.draft_worker = EAGLEWorker(args, rank, cpu_group)
        self.init_memory_pools()

    def init_memory_pools(self):
        target = self.tp_worker.model_runner
        config = KVCacheConfigurator(self.args, target, self.cpu_group).configure(
            pre_model_load_memory=target.pre_model_load_memory)
        if self.draft_worker:
            draft = self.draft_worker.model_runner
            KVCacheConfigurator(self.args, draft, self.cpu_group, config).configure(
                pre_model_load_memory=draft.pre_model_load_memory)


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
            OlderModelRunner(args, rank, cpu_group)
        else:
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
