"""sglang_fraction.py - SGLang's default --mem-fraction-static, computed the
way python/sglang/srt/server_args.py (_handle_gpu_memory_settings) computes
it, in Python floats and Python's round(), for test_budget_detect.c to
compare bit for bit with analyzer/replay/sglang_fraction.c.

One case a line on stdin, space-separated (None: not given):
  gpu_mem_mib tp pp dp chunked_prefill_size max_prefill_tokens
  cuda_graph_max_bs cuda_graph_bs_max enable_dp_attention(0/1)
  enable_piecewise_cuda_graph(0/1) piecewise_max_tokens use_mla(0/1)
  speculative_algorithm
One line out per case: float.hex(F) of the reserve rule, then the reserve
itself in MiB (repr), or "fallback" when gpu_mem is None.
"""
import sys


def value(text, kind=int):
    return None if text == "None" else kind(text)


def capture_token_count(max_tokens):
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1024 + 1, 64))
        + list(range(1280, 4096 + 1, 256))
        + list(range(4608, max_tokens + 1, 512))
    )
    return len([s for s in sizes if s <= max_tokens])


def capacity(gpu_mem, tp):
    """(chunked_prefill_size, cuda_graph_max_bs) SGLang picks by GPU size."""
    if gpu_mem is None:
        return 4096, 160
    if gpu_mem < 20 * 1024:
        return 2048, 8
    if gpu_mem < 35 * 1024:
        return 2048, 24 if tp < 4 else 80
    if gpu_mem < 60 * 1024:
        return 4096, 32 if tp < 4 else 160
    if gpu_mem < 160 * 1024:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def fraction(fields):
    gpu_mem = value(fields[0], float)
    tp, pp, dp = int(fields[1]), int(fields[2]), int(fields[3])
    chunked, max_prefill = value(fields[4]), int(fields[5])
    max_bs, bs_max = value(fields[6]), value(fields[7])
    dp_attention, piecewise = fields[8] == "1", fields[9] == "1"
    piecewise_max, mla = value(fields[10]), fields[11] == "1"
    spec = None if fields[12] == "None" else fields[12]

    default_chunked, default_bs = capacity(gpu_mem, tp)
    if chunked is None:
        chunked = default_chunked
    if max_bs is None:
        max_bs = default_bs
    if bs_max is not None:
        max_bs = bs_max
    if piecewise_max is None:
        piecewise_max = 2048 if mla else chunked

    reserved_mem = 512
    if chunked > 0:
        reserved_mem += max(chunked, 2048) * 1.5
    else:
        reserved_mem += max(max_prefill, 2048) * 1.5
    reserved_mem += max_bs * 2
    reserved_mem += tp * pp / 8 * 1024
    if dp_attention:
        reserved_mem += max_bs * dp * 3
        if max_bs > 300:
            reserved_mem += max_bs * dp * 1.5
    if piecewise:
        reserved_mem += capture_token_count(piecewise_max) * 8
    if gpu_mem is not None and gpu_mem > 60 * 1024:
        reserved_mem = max(reserved_mem, 10 * 1024)
    if spec is not None:
        if spec == "STANDALONE":
            reserved_mem += 6 * 1024
        elif spec != "NGRAM":
            reserved_mem += 2 * 1024
    if gpu_mem is None:
        return "fallback"
    f = round((gpu_mem - reserved_mem) / gpu_mem, 3)
    return "%s %r" % (f.hex(), float(reserved_mem))


for line in sys.stdin:
    if line.strip():
        print(fraction(line.split()))
