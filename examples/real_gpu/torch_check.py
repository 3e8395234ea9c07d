"""torch_check.py - PyTorch's GPU memory roads on a real GPU, for cutrace's GPU test.

    python3 torch_check.py [--transformers]

Sections, each independent (a failing one prints FAILED and the next runs):

  device        torch.cuda.mem_get_info right after the context is made
  caching       tensors through the caching allocator (2 GiB, 8 x 4 MiB, 100 small
                ones), mem_get_info while they live, torch.cuda.empty_cache
  distributed   torch.distributed, NCCL backend, world size 1 (a file:// store:
                no network), all_reduce
  graph         a CUDA graph whose capture holds a multiply and an all_reduce,
                replayed 3 times
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
prints. Exit status: 0 when every section passed, 1 when any failed, 2 when
torch or a GPU is missing.
"""
import argparse
import os
import sys
import tempfile

MIB = 1 << 20
GIB = 1 << 30
REPLAYS = 3

failures = []


def run_section(name, body):
    """Runs one section; an exception becomes one FAILED line (type and message head)."""
    try:
        line = body()
    except Exception as e:  # report every failure, go on with the next section
        message = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        print(f"{name}: FAILED {type(e).__name__}: {message}", flush=True)
        failures.append(name)
        return
    print(f"{name}: {line}", flush=True)


def yes_no(b):
    return "yes" if b else "no"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transformers", action="store_true",
                        help="also run a small transformers model built from a config")
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

    state = {}
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    print(f"allocator: {'expandable segments' if 'expandable_segments:True' in conf else 'default'}",
          flush=True)

    def device():
        torch.cuda.set_device(0)
        free, total = torch.cuda.mem_get_info()
        state["baseline_free"] = free
        props = torch.cuda.get_device_properties(0)
        return f"ok, total matches the device's memory: {yes_no(total == props.total_memory)}"

    def caching():
        big = torch.empty(2 * GIB, dtype=torch.uint8, device="cuda")
        big.fill_(1)
        mid = [torch.full((MIB,), float(i), device="cuda") for i in range(8)]  # 4 MiB each
        small = [torch.zeros(1000, device="cuda") for _ in range(100)]  # 4000 B each
        torch.cuda.synchronize()
        allocated = torch.cuda.memory_allocated()
        free, _ = torch.cuda.mem_get_info()
        dropped = state["baseline_free"] - free >= 2 * GIB
        del big, mid, small
        left = torch.cuda.memory_allocated()
        cached = torch.cuda.memory_reserved()
        torch.cuda.empty_cache()
        after = torch.cuda.memory_reserved()
        torch.cuda.mem_get_info()
        return (f"ok, allocated {allocated} B, free dropped by at least 2 GiB: {yes_no(dropped)}, "
                f"after del {left} B allocated and something cached: {yes_no(cached > 0)}, "
                f"reserved after empty_cache {after} B")

    def distributed():
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
        torch.cuda.mem_get_info()  # NCCL's buffers are live now
        if not torch.equal(x, torch.arange(MIB, dtype=torch.float32, device="cuda")):
            raise AssertionError("all_reduce over one rank changed the values")
        return f"ok, backend {dist.get_backend()}, all_reduce correct"

    def graph():
        if not dist.is_initialized():
            raise RuntimeError("needs the distributed section")
        static = torch.ones(MIB, device="cuda")
        # Warm up on a side stream, as torch.cuda.graph's documentation asks.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                y = static * 2
                dist.all_reduce(y)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        # thread_local: NCCL's watchdog thread may query events of earlier
        # work while this thread captures, which "global" mode forbids.
        try:
            capture = torch.cuda.graph(g, capture_error_mode="thread_local")
        except TypeError:  # a torch without capture_error_mode
            capture = torch.cuda.graph(g)
        with capture:
            y = static * 2
            dist.all_reduce(y)
        results = []
        for value in range(1, REPLAYS + 1):
            static.fill_(float(value))
            g.replay()
            torch.cuda.synchronize()
            results.append(bool(torch.all(y == 2 * value)))
        del g
        if not all(results):
            raise AssertionError(f"wrong values after the replays: {results}")
        return f"ok, graph with all_reduce replayed {REPLAYS} times, correct each time"

    def transformers_model():
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
        finite = bool(torch.isfinite(logits).all())
        shape = tuple(logits.shape)
        del model, logits
        if not finite:
            raise AssertionError("the logits are not all finite")
        return f"ok, GPT-2 (2 layers) logits {shape}, all finite"

    def end():
        if dist.is_initialized():
            dist.destroy_process_group()
        store = state.get("store")
        if store and os.path.exists(store):
            os.unlink(store)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.mem_get_info()
        return f"ok, allocated at the end {torch.cuda.memory_allocated()} B"

    sections = [("device", device), ("caching", caching), ("distributed", distributed),
                ("graph", graph)]
    if args.transformers:
        sections.append(("transformers", transformers_model))
    sections.append(("end", end))
    for name, body in sections:
        run_section(name, body)
    print(f"result: {len(sections) - len(failures)} of {len(sections)} sections ok", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
