"""model_runner.py - SGLang about 0.5.16 and later's ModelRunner as
sglang_sim.py runs it (python/sglang/srt/model_executor/model_runner.py):
init_torch_distributed (bootstrap.py's), then load_model, which measures
twice before the weights and once after; a target runner then makes the
--alloc-after-load-mib buffer, after load_model's last measurement (as a
sampler's or graph runner's workspace would be). A draft worker's runner
has its own layers and weights.
"""
import cudart_calls as cuda
from sglang.srt.distributed.bootstrap import init_torch_distributed
from sim_support import MiB, get_available_gpu_memory, load_weights, take_gpu


class ModelRunner:
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
            cuda.malloc(self.args.alloc_after_load_mib * MiB)

    def load_model(self):
        get_available_gpu_memory("cuda", self.gpu_id)  # before_avail_memory
        get_available_gpu_memory("cuda", self.gpu_id)  # "Load weight begin. avail mem=..."
        load_weights(self.args.draft_weights_mib if self.is_draft_worker else self.args.weights_mib)
        get_available_gpu_memory("cuda", self.gpu_id)  # "Load weight end. ..."
