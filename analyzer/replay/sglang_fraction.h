/*
 * sglang_fraction.h - how SGLang chooses --mem-fraction-static itself when
 * the command line does not give it (server_args.py,
 * _handle_gpu_memory_settings), as pure functions, so that `cutrace budget`
 * can replay F from the GPU's memory and the launcher's flags, and the tests
 * can compare it bit for bit with the server's Python (docs/budget.md,
 * "Where F comes from").
 *
 * Two rules, by release:
 *   - by TP size (releases before sgl-project/sglang PR #10975, about 0.5.3):
 *     0.79 at TP >= 16, 0.81 at >= 8, 0.85 at >= 4, 0.87 at >= 2, else 0.88;
 *   - from a reserve (PR #10975 on): F = round((gpu_mem - reserved) /
 *     gpu_mem, 3), gpu_mem the smallest GPU's memory in MiB, reserved in MiB
 *     from the chunked-prefill size, the CUDA-graph batch size, TP x PP, DP
 *     attention, piecewise CUDA graphs and the speculative algorithm.
 * The inputs are filled from launch lines by sglang_fraction_from_flags;
 * what a trace cannot show (whether the model uses MLA) is a parameter with
 * SGLang's default, listed as assumed.
 */
#ifndef CUTRACE_ANALYZER_REPLAY_SGLANG_FRACTION_H
#define CUTRACE_ANALYZER_REPLAY_SGLANG_FRACTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sglang_fraction_rule {
    SGLANG_F_BY_TP,      /* the older table by TP size */
    SGLANG_F_BY_RESERVE, /* round((gpu_mem - reserved) / gpu_mem, 3) */
};

/* An input that SGLang takes from its arguments, or derives when it is
 * absent (None there). Not -1: a chunked-prefill size of -1 turns it off. */
#define SGLANG_F_UNSET INT64_MIN

struct sglang_fraction_inputs {
    /* get_device_memory_capacity(): MiB as a Python float (nvidia-smi's
     * memory.total, the smallest GPU's); <= 0 when unknown (None). */
    double gpu_mem_mib;
    int64_t tp_size, pp_size, dp_size;
    int64_t chunked_prefill_size; /* SGLANG_F_UNSET: chosen from gpu_mem */
    int64_t max_prefill_tokens;   /* used when chunked prefill is off (<= 0) */
    int64_t cuda_graph_max_bs;    /* SGLANG_F_UNSET: chosen from gpu_mem and TP */
    int64_t cuda_graph_bs_max;    /* the largest of --cuda-graph-bs, SGLANG_F_UNSET: none */
    bool enable_dp_attention;
    bool enable_piecewise_cuda_graph;
    int64_t piecewise_cuda_graph_max_tokens; /* SGLANG_F_UNSET: derived */
    bool use_mla_backend;                    /* a model property: assumed */
    char speculative_algorithm[32];          /* "" none; "EAGLE", "STANDALONE", "NGRAM", ... */
};

/* SGLang's defaults: TP/PP/DP 1, max_prefill_tokens 16384, everything else
 * derived, no MLA, no speculative decoding. gpu_mem unknown. */
void sglang_fraction_defaults(struct sglang_fraction_inputs *in);

/* What the reserve rule added up, in MiB, for the report. */
struct sglang_fraction_reserve {
    int64_t chunked_prefill_size, cuda_graph_max_bs; /* as used (derived or given) */
    int64_t piecewise_tokens;                        /* capture sizes, 0 when off */
    double base, activation, cuda_graph, parallel, dp_attention, piecewise;
    double floor_applied; /* added by the 10 GiB floor on GPUs over 60 GiB, 0 when not */
    double speculative;
    double total;
};

/*
 * F as SGLang derives it under rule. Returns false when SGLang would fall
 * back on its constant (gpu_mem unknown: 0.88), which *f then holds. r may
 * be NULL; with the TP rule it is zeroed.
 */
bool sglang_fraction_derive(enum sglang_fraction_rule rule, const struct sglang_fraction_inputs *in,
                            double *f, struct sglang_fraction_reserve *r);

/* Python's round(x, 3) on a double: the exact binary value rounded to three
 * decimals, ties to even, read back to the nearest double. */
double sglang_round3(double x);

/*
 * gpu_mem in MiB from a device's total bytes as a trace records it
 * (cudaMemGetInfo's total): total // 2^20, what SGLang's fallback
 * torch.cuda.mem_get_info()[1] // 1024 // 1024 computes. nvidia-smi's
 * memory.total, its first choice, can be larger by memory the driver
 * reserves: the report says so.
 */
double sglang_gpu_mem_mib(int64_t total_bytes);

/*
 * The inputs from launch lines. flag(ctx, name, &value) says whether a
 * flag ("--tp-size") is on the lines, with the text that follows it on its
 * line (after '=' or a space; NULL when nothing does), so that a list
 * (--cuda-graph-bs 1 2 4) can be read; a switch (--enable-dp-attention)
 * ignores it. Each input not found keeps what `in` had (call
 * sglang_fraction_defaults first) and its flag's name goes to
 * defaulted[] (up to max; *ndefaulted counts them all). Returns false
 * when a flag's value is not what SGLang accepts (*bad names it).
 */
typedef bool (*sglang_flag_lookup)(void *ctx, const char *name, const char **value);
bool sglang_fraction_from_flags(struct sglang_fraction_inputs *in, sglang_flag_lookup flag,
                                void *ctx, const char **defaulted, size_t max, size_t *ndefaulted,
                                const char **bad);

/* The inputs a trace cannot give, for an "assumed" line: "use_mla_backend
 * (false)". */
extern const char *const sglang_fraction_assumed[];
extern const size_t sglang_fraction_nassumed;

#endif
