"""bootstrap.py - SGLang about 0.5.16 and later's init_torch_distributed as
sglang_sim.py runs it (python/sglang/srt/distributed/bootstrap.py):
before_avail_memory, then after the NCCL groups and custom all-reduce
buffers pre_model_load_memory (the MIN over the world group, unless its
size is 1 or this is a draft worker: pre), then local_gpu_memory for the TP
balance check.
"""
import sys

from sim_support import get_available_gpu_memory, init_distributed_environment, report


def init_torch_distributed(*, args, gpu_id, is_draft_worker, cpu_group):
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
