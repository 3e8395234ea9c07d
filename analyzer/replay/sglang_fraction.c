/*
 * sglang_fraction.c - SGLang's own choice of --mem-fraction-static
 * (sglang_fraction.h). The arithmetic follows the order of the Python in
 * python/sglang/srt/server_args.py (_handle_gpu_memory_settings), term by
 * term: every term is a Python float or int, and adding them in another
 * order could change the last bit of a value that round() then sees.
 */
#include "replay/sglang_fraction.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB 1048576.0

const char *const sglang_fraction_assumed[] = {
    "use_mla_backend (false: the piecewise CUDA-graph token limit is the chunked-prefill size)",
};
const size_t sglang_fraction_nassumed =
    sizeof(sglang_fraction_assumed) / sizeof(sglang_fraction_assumed[0]);

void sglang_fraction_defaults(struct sglang_fraction_inputs *in)
{
    memset(in, 0, sizeof(*in));
    in->gpu_mem_mib = 0;
    in->tp_size = in->pp_size = in->dp_size = 1;
    in->chunked_prefill_size = SGLANG_F_UNSET;
    in->max_prefill_tokens = 16384;
    in->cuda_graph_max_bs = SGLANG_F_UNSET;
    in->cuda_graph_bs_max = SGLANG_F_UNSET;
    in->piecewise_cuda_graph_max_tokens = SGLANG_F_UNSET;
}

double sglang_round3(double x)
{
    /* CPython rounds with its correctly rounded dtoa (mode 3, half-even on
     * the exact binary value) and reads the digits back with strtod; glibc's
     * printf is correctly rounded in the same way under the default
     * rounding mode, and strtod is correctly rounded too. */
    if (!isfinite(x))
        return x;
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "%.3f", x);
    assert(n > 0 && (size_t)n < sizeof(buf));
    (void)n;
    return strtod(buf, NULL);
}

double sglang_gpu_mem_mib(int64_t total_bytes)
{
    return total_bytes > 0 ? (double)(total_bytes / (int64_t)MIB) : 0;
}

/* The capacity defaults by GPU size: chunked prefill and CUDA-graph batch. */
static void capacity_defaults(const struct sglang_fraction_inputs *in, int64_t *chunked,
                              int64_t *max_bs)
{
    double g = in->gpu_mem_mib;
    bool small_tp = in->tp_size < 4;
    int64_t c, bs;
    if (!(g > 0)) {
        c = 4096, bs = 160;
    } else if (g < 20 * 1024) {
        c = 2048, bs = 8;
    } else if (g < 35 * 1024) {
        c = 2048, bs = small_tp ? 24 : 80;
    } else if (g < 60 * 1024) {
        c = 4096, bs = small_tp ? 32 : 160;
    } else if (g < 160 * 1024) {
        c = 8192, bs = small_tp ? 256 : 512; /* the < 90 GiB and < 160 GiB steps agree */
    } else {
        c = 16384, bs = 512;
    }
    *chunked = in->chunked_prefill_size != SGLANG_F_UNSET ? in->chunked_prefill_size : c;
    *max_bs = in->cuda_graph_max_bs != SGLANG_F_UNSET ? in->cuda_graph_max_bs : bs;
    if (in->cuda_graph_bs_max != SGLANG_F_UNSET)
        *max_bs = in->cuda_graph_bs_max; /* max(cuda_graph_bs) overrides */
}

/* len(_generate_piecewise_cuda_graph_tokens()): the capture sizes up to max. */
static int64_t piecewise_token_count(int64_t max)
{
    static const struct {
        int64_t start, stop, step; /* range(start, stop, step); stop 0: max + 1 */
    } ranges[] = {{4, 33, 4},      {48, 257, 16},     {288, 513, 32},
                  {576, 1025, 64}, {1280, 4097, 256}, {4608, 0, 512}};
    int64_t n = 0;
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
        int64_t stop = ranges[i].stop ? ranges[i].stop : max + 1;
        for (int64_t v = ranges[i].start; v < stop; v += ranges[i].step)
            n += v <= max;
    }
    return n;
}

static bool by_tp(const struct sglang_fraction_inputs *in, double *f)
{
    int64_t tp = in->tp_size;
    *f = tp >= 16 ? 0.79 : tp >= 8 ? 0.81 : tp >= 4 ? 0.85 : tp >= 2 ? 0.87 : 0.88;
    return true;
}

bool sglang_fraction_derive(enum sglang_fraction_rule rule, const struct sglang_fraction_inputs *in,
                            double *f, struct sglang_fraction_reserve *r)
{
    struct sglang_fraction_reserve local;
    if (!r)
        r = &local;
    memset(r, 0, sizeof(*r));
    if (rule == SGLANG_F_BY_TP)
        return by_tp(in, f);
    assert(rule == SGLANG_F_BY_RESERVE);
    int64_t chunked, max_bs;
    capacity_defaults(in, &chunked, &max_bs);
    r->chunked_prefill_size = chunked;
    r->cuda_graph_max_bs = max_bs;

    double reserved = 512;
    r->base = 512;
    int64_t tokens = chunked > 0 ? chunked : in->max_prefill_tokens;
    r->activation = (double)(tokens > 2048 ? tokens : 2048) * 1.5;
    reserved += r->activation;
    r->cuda_graph = (double)(max_bs * 2);
    reserved += r->cuda_graph;
    r->parallel = (double)(in->tp_size * in->pp_size) / 8 * 1024;
    reserved += r->parallel;
    if (in->enable_dp_attention) {
        double pad = (double)(max_bs * in->dp_size * 3);
        reserved += pad;
        r->dp_attention = pad;
        if (max_bs > 300) {
            double more = (double)(max_bs * in->dp_size) * 1.5;
            reserved += more;
            r->dp_attention += more;
        }
    }
    if (in->enable_piecewise_cuda_graph) {
        int64_t max_tokens = in->piecewise_cuda_graph_max_tokens != SGLANG_F_UNSET
                                 ? in->piecewise_cuda_graph_max_tokens
                             : in->use_mla_backend ? 2048
                                                   : chunked;
        r->piecewise_tokens = piecewise_token_count(max_tokens);
        r->piecewise = (double)(r->piecewise_tokens * 8);
        reserved += r->piecewise;
    }
    bool known = in->gpu_mem_mib > 0;
    if (known && in->gpu_mem_mib > 60 * 1024 && reserved < 10 * 1024) {
        r->floor_applied = 10 * 1024 - reserved;
        reserved = 10 * 1024;
    }
    const char *spec = in->speculative_algorithm;
    if (spec[0]) {
        if (strcmp(spec, "STANDALONE") == 0)
            r->speculative = 6 * 1024;
        else if (strcmp(spec, "NGRAM") != 0)
            r->speculative = 2 * 1024;
        reserved += r->speculative;
    }
    r->total = reserved;
    if (!known) {
        *f = 0.88;
        return false;
    }
    *f = sglang_round3((in->gpu_mem_mib - reserved) / in->gpu_mem_mib);
    return true;
}

/* An integer at the start of text, as Python's int() reads a token; the
 * token must end at a space, a quote or the end. */
static bool leading_int(const char *text, int64_t *out)
{
    if (!text)
        return false;
    while (*text == '\'' || *text == '"')
        text++;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || (*end && *end != ' ' && *end != '\'' && *end != '"'))
        return false;
    *out = v;
    return true;
}

/* The first of names found on the lines, its value in *value. */
static bool find_flag(sglang_flag_lookup flag, void *ctx, const char *const *names,
                      const char **value)
{
    for (; *names; names++)
        if (flag(ctx, *names, value))
            return true;
    return false;
}

struct int_flag {
    const char *const *names;
    int64_t *target;
};

static void note_default(const char *name, const char **defaulted, size_t max, size_t *n)
{
    if (*n < max)
        defaulted[*n] = name;
    (*n)++;
}

bool sglang_fraction_from_flags(struct sglang_fraction_inputs *in, sglang_flag_lookup flag,
                                void *ctx, const char **defaulted, size_t max, size_t *ndefaulted,
                                const char **bad)
{
    static const char *const tp[] = {"--tp-size", "--tensor-parallel-size", "--tp", NULL};
    static const char *const pp[] = {"--pp-size", "--pipeline-parallel-size", "--pp", NULL};
    static const char *const dp[] = {"--dp-size", "--data-parallel-size", "--dp", NULL};
    static const char *const chunked[] = {"--chunked-prefill-size", NULL};
    static const char *const prefill[] = {"--max-prefill-tokens", NULL};
    static const char *const max_bs[] = {"--cuda-graph-max-bs", NULL};
    static const char *const pw_max[] = {"--piecewise-cuda-graph-max-tokens", NULL};
    const struct int_flag ints[] = {
        {tp, &in->tp_size},
        {pp, &in->pp_size},
        {dp, &in->dp_size},
        {chunked, &in->chunked_prefill_size},
        {prefill, &in->max_prefill_tokens},
        {max_bs, &in->cuda_graph_max_bs},
        {pw_max, &in->piecewise_cuda_graph_max_tokens},
    };
    *ndefaulted = 0;
    *bad = NULL;
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        const char *value = NULL;
        if (!find_flag(flag, ctx, ints[i].names, &value)) {
            note_default(ints[i].names[0], defaulted, max, ndefaulted);
            continue;
        }
        int64_t v;
        if (!leading_int(value, &v)) {
            *bad = ints[i].names[0];
            return false;
        }
        *ints[i].target = v;
    }

    /* --cuda-graph-bs 1 2 4 8: its largest. */
    const char *value = NULL;
    if (flag(ctx, "--cuda-graph-bs", &value)) {
        int64_t largest = SGLANG_F_UNSET, v;
        for (const char *at = value; leading_int(at, &v);) {
            largest = v > largest ? v : largest;
            at += strspn(at, "'\"");
            at += strcspn(at, " ");
            at += strspn(at, " ");
        }
        if (largest == SGLANG_F_UNSET) {
            *bad = "--cuda-graph-bs";
            return false;
        }
        in->cuda_graph_bs_max = largest;
    } else {
        note_default("--cuda-graph-bs", defaulted, max, ndefaulted);
    }

    const char *ignored;
    if (flag(ctx, "--enable-dp-attention", &ignored))
        in->enable_dp_attention = true;
    else
        note_default("--enable-dp-attention", defaulted, max, ndefaulted);
    if (flag(ctx, "--enable-piecewise-cuda-graph", &ignored))
        in->enable_piecewise_cuda_graph = true;
    else
        note_default("--enable-piecewise-cuda-graph", defaulted, max, ndefaulted);

    if (flag(ctx, "--speculative-algorithm", &value)) {
        value = value ? value + strspn(value, "'\"") : "";
        size_t len = strcspn(value, " '\"");
        if (len == 0 || len >= sizeof(in->speculative_algorithm)) {
            *bad = "--speculative-algorithm";
            return false;
        }
        memcpy(in->speculative_algorithm, value, len);
        in->speculative_algorithm[len] = '\0';
    } else {
        note_default("--speculative-algorithm", defaulted, max, ndefaulted);
    }
    return true;
}
