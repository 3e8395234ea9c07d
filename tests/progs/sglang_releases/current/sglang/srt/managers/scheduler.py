"""scheduler.py - SGLang about 0.5.16 and later's Scheduler, with its target
and draft workers, as sglang_sim.py runs it
(python/sglang/srt/managers/scheduler.py, tp_worker.py,
speculative/eagle_worker.py): the target worker, the draft worker (with
--speculative-algorithm), and only then init_memory_pools.
"""
from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
from sglang.srt.model_executor.model_runner import ModelRunner


class TpModelWorker:
    def __init__(self, args, rank, cpu_group, is_draft_worker):
        self.model_runner = ModelRunner(args, rank, cpu_group, is_draft_worker)


class EAGLEWorker(TpModelWorker):
    def __init__(self, args, rank, cpu_group):
        super().__init__(args, rank, cpu_group, is_draft_worker=True)


class Scheduler:
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
