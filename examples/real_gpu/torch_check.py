"""torch_check.py - PyTorch's GPU memory roads on a real GPU, for cutrace's GPU test.

    python3 torch_check.py [--transformers] [--facts PATH]

Sections, each independent (a failing one prints FAILED and the next runs):

  device        torch.cuda.mem_get_info right after the context is made
  caching       tensors through the caching allocator (2 GiB, 8 x 4 MiB, 100 small
                ones), mem_get_info while they live, torch.cuda.empty_cache; fails
                when free memory did not drop by at least 2 GiB
  pinned        pinned host memory (pin_memory=True), copied to the GPU and back
  distributed   torch.distributed, NCCL backend, world size 1 (a file:// store:
                no network), all_reduce
  graph         a CUDA graph captured in global mode (what SGLang and vLLM use)
                holding a multiply and an all_reduce, replayed 3 times
  transformers  (--transformers) a small GPT-2 built from a config, no download,
                one forward pass; skipped when transformers is not installed
  end           destroy_process_group, empty_cache, mem_get_info

Run it a second time with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to
take the caching allocator's other road (cuMemCreate/cuMemMap through
cudaGetDriverEntryPoint). The 2 GiB tensor is large on purpose: if the tracer
missed the allocator's road, gigabytes would show up as "unexplained" at the
next mem_get_info.

Output is deterministic (sizes, yes/no facts and results; no pointers, timings
or free-memory numbers), so a traced run prints exactly what an untraced one
prints. The numbers a checker needs go to the facts file instead (--facts PATH,
one JSON object per line, appended; see README.md). Exit status: 0 when every
section passed, 1 when any failed, 2 when torch or a GPU is missing.
"""
import argparse
import os
import sys
import tempfile

from sections import GIB, MIB, Facts, global_graph_with_all_reduce, run_section, yes_no

PINNED_BYTES = 64 * MIB
SCRIPT = os.path.basename(__file__)

failures = []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transformers", action="store_true",
                        help="also run a small transformers model built from a config")
    parser.add_argument("--facts", metavar="PATH",
                        help="append the program's ground truth to PATH, one JSON object a line")
    args = parser.parse_args()
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"torch_check: torch is not installed ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_check: torch sees no GPU", file=sys.stderr)
        return 2

    facts = Facts(args.facts, "torch")
    state = {}
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    allocator = "expandable" if "expandable_segments:True" in conf else "default"
    print(f"allocator: {'expandable segments' if allocator == 'expandable' else 'default'}",
          flush=True)

    def mem_get_info(sec):
        """torch.cuda.mem_get_info, and at once the caching allocator's view of it."""
        free, total = torch.cuda.mem_get_info()
        sec.fact("mem_get_info", free=free, total=total,
                 reserved=torch.cuda.memory_reserved(),
                 allocated=torch.cuda.memory_allocated(),
                 segments=torch.cuda.memory_stats().get("segment.all.current", 0),
                 allocator=allocator)
        return free, total

    def device(sec):
        torch.cuda.set_device(0)
        free, total = mem_get_info(sec)
        state["baseline_free"] = free
        props = torch.cuda.get_device_properties(0)
        same = sec.check("total matches the device's memory", total == props.total_memory)
        return f"total matches the device's memory: {yes_no(same)}"

    def caching(sec):
        big = torch.empty(2 * GIB, dtype=torch.uint8, device="cuda")
        sec.fact("tensor", name="big", ptr=big.data_ptr(),
                 size=big.numel() * big.element_size(), function="caching", file=SCRIPT)
        big.fill_(1)
        mid = [torch.full((MIB,), float(i), device="cuda") for i in range(8)]  # 4 MiB each
        small = [torch.zeros(1000, device="cuda") for _ in range(100)]  # 4000 B each
        torch.cuda.synchronize()
        allocated = torch.cuda.memory_allocated()
        free, _ = mem_get_info(sec)
        dropped = sec.check("free dropped by at least 2 GiB",
                            state["baseline_free"] - free >= 2 * GIB)
        del big, mid, small
        left = torch.cuda.memory_allocated()
        cached = torch.cuda.memory_reserved()
        torch.cuda.empty_cache()
        after = torch.cuda.memory_reserved()
        mem_get_info(sec)
        return (f"allocated {allocated} B, free dropped by at least 2 GiB: {yes_no(dropped)}, "
                f"after del {left} B allocated and something cached: {yes_no(cached > 0)}, "
                f"reserved after empty_cache {after} B")

    def pinned(sec):
        # The caching host allocator's road: cudaHostAlloc'd (pinned) memory,
        # host memory the GPU copies from and to directly.
        host = torch.empty(PINNED_BYTES, dtype=torch.uint8, device="cpu", pin_memory=True)
        sec.fact("pinned", ptr=host.data_ptr(), size=host.numel() * host.element_size())
        back = torch.empty(PINNED_BYTES, dtype=torch.uint8, device="cpu", pin_memory=True)
        sec.fact("pinned", ptr=back.data_ptr(), size=back.numel() * back.element_size())
        is_pinned = sec.check("both buffers pinned", host.is_pinned() and back.is_pinned())
        host.fill_(7)
        back.fill_(0)
        dev = host.to("cuda", non_blocking=True)
        back.copy_(dev, non_blocking=True)
        torch.cuda.synchronize()
        mem_get_info(sec)  # the pinned buffers are live: host memory, not device memory
        same = sec.check("the bytes came back", torch.equal(back, host))
        del host, back, dev
        return (f"{PINNED_BYTES // MIB} MiB twice with pin_memory=True, pinned: {yes_no(is_pinned)}, "
                f"copied to the GPU and back, same bytes: {yes_no(same)}")

    def distributed(sec):
        store = tempfile.NamedTemporaryFile(prefix="torch_check-store-", delete=False)
        store.close()
        os.unlink(store.name)  # the file store makes it; it must not exist yet
        state["store"] = store.name
        kwargs = dict(backend="nccl", init_method=f"file://{store.name}", rank=0, world_size=1)
        try:
            dist.init_process_group(device_id=torch.device("cuda", 0), **kwargs)
        except TypeError:  # a torch without device_id
            dist.init_process_group(**kwargs)
        x = torch.arange(MIB, dtype=torch.float32, device="cuda")
        dist.all_reduce(x)
        torch.cuda.synchronize()
        mem_get_info(sec)  # NCCL's buffers are live now
        same = sec.check("all_reduce over one rank keeps the values",
                         torch.equal(x, torch.arange(MIB, dtype=torch.float32, device="cuda")))
        return f"backend {dist.get_backend()}, all_reduce correct: {yes_no(same)}"

    def graph(sec):
        if not dist.is_initialized():
            raise RuntimeError("needs the distributed section")
        return global_graph_with_all_reduce(torch, dist, sec)

    def transformers_model(sec):
        try:
            import transformers
        except ImportError:
            return "skipped (transformers is not installed)"
        config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=1000,
                                         n_positions=64)
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(config).to("cuda").eval()
        ids = torch.randint(0, config.vocab_size, (2, 32), device="cuda")
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        torch.cuda.synchronize()
        finite = sec.check("the logits all finite", torch.isfinite(logits).all())
        shape = tuple(logits.shape)
        del model, logits
        return f"GPT-2 (2 layers) logits {shape}, all finite: {yes_no(finite)}"

    def end(sec):
        if dist.is_initialized():
            dist.destroy_process_group()
        store = state.get("store")
        if store and os.path.exists(store):
            os.unlink(store)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        mem_get_info(sec)
        return f"allocated at the end {torch.cuda.memory_allocated()} B"

    sections = [("device", device), ("caching", caching), ("pinned", pinned),
                ("distributed", distributed), ("graph", graph)]
    if args.transformers:
        sections.append(("transformers", transformers_model))
    sections.append(("end", end))
    for name, body in sections:
        if not run_section(name, body, facts):
            failures.append(name)
    print(f"result: {len(sections) - len(failures)} of {len(sections)} sections ok", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
