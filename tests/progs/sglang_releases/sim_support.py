"""sim_support.py - what sglang_sim.py's two SGLang releases (older/ and
current/, laid out as SGLang's python/sglang/srt) take from below SGLang:
torch's CUDA calls (through cudart_calls.py), torch.distributed's CPU group
and NCCL communicator (over multiprocessing queues, nccl_calls.py), the
model's tensors, SGLang's utils get_available_gpu_memory, and the record of
what the start-up computed, printed as the rank's JSON line.
"""
import struct

import cudart_calls as cuda
import nccl_calls as nccl

MiB = 1 << 20
WEIGHT_TENSOR_BYTES = 64 * MiB  # weights arrive as tensors of at most this
CUSTOM_ALL_REDUCE_BYTES = 8 * MiB  # SGLang's default custom all-reduce buffer
NOT_ENOUGH_MEMORY = "Not enough memory. Please try to increase --mem-fraction-static."

# What this process's start-up computed, printed as its JSON line.
report = {}
communicators = []  # destroyed at the end, as at a server's shutdown


# ---- torch.distributed's CPU group ----


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


# ---- SGLang's utils (utils/common.py in current releases) ----


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


# ---- the GPU, the NCCL groups, the model's tensors ----


def take_gpu(rank, args):
    """torch.cuda.set_device; rank r > 0 finds r * --occupied-bytes-per-rank
    of its GPU taken (as by another process)."""
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
    """The model config's KV bytes per token: one buffer per layer (MLA) or
    two (MHA, K and V) of --kv-layer-bytes."""
    return args.kv_layer_bytes * (1 if args.attention == "mla" else 2) * layers


def allocate_kv_buffers(args, layers, tokens):
    """MLATokenToKVPool: one buffer per layer; MHATokenToKVPool: K and V per
    layer; each of (size + page_size) tokens."""
    for _ in range(layers * (1 if args.attention == "mla" else 2)):
        cuda.malloc((tokens + args.page_size) * args.kv_layer_bytes)


def allocate_req_to_token_pool(max_num_reqs, context_length):
    cuda.malloc((max_num_reqs + 1) * (context_length + 4) * 4)  # int32 locations


def max_num_reqs_for(tokens, context_length):
    estimated = int(tokens / context_length * 512)
    return min(max(min(estimated, 4096), 2048), tokens // 2)


def record(pre_gib, post_gib, mm_reserve_gib, rest_gib):
    report.update(pre_gib=pre_gib, post_gib=post_gib, mm_reserve_gib=mm_reserve_gib,
                  rest_gib=rest_gib)
