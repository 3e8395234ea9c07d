"""model_runner.py - SGLang about 0.4.x's ModelRunner as sglang_sim.py runs
it (python/sglang/srt/model_executor/model_runner.py in those releases):
init_torch_distributed measures min_per_gpu_memory (the MIN over the ranks
at TP > 1: pre), then local_gpu_memory for the TP balance check; load_model
measures before and after the weights; init_memory_pool calls
profile_max_num_token (post; rest = post - pre * (1 - F); tokens =
int(rest * 2^30 // cell)), caps the tokens by --max-total-tokens, floors
them to the page (the releases with --page-size), raises SGLang's
RuntimeError at <= 0, then makes the pools.
"""
from sim_support import (NOT_ENOUGH_MEMORY, allocate_kv_buffers, allocate_req_to_token_pool,
                         cell_size, get_available_gpu_memory, init_distributed_environment,
                         load_weights, max_num_reqs_for, record, report, take_gpu)


class ModelRunner:
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
        record(total_gpu_memory, available_gpu_memory, 0.0, rest_memory)  # no reserve there
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
