/*
 * sglang.h - SGLang's KV-cache sizing at startup as pure functions
 * (docs/budget.md): the float32 MIN of free memory across ranks, the rest
 * after the static fraction, the tokens it buys, and the smallest fraction
 * that fits. analysis/budget_analysis.c finds the inputs in the traces.
 */
#ifndef CUTRACE_ANALYZER_REPLAY_SGLANG_H
#define CUTRACE_ANALYZER_REPLAY_SGLANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BUDGET_GIB        1073741824.0 /* SGLang's "GB" is 2^30 bytes */
#define BUDGET_SGLANG_ERR "Not enough memory. Please try to increase --mem-fraction-static."

/*
 * The MIN over ranks of a measurement's free bytes, in GiB as SGLang has
 * it: with more than one rank the value went through a float32 tensor (an
 * all-reduce with MIN over the gloo group), with one it stays an integer.
 */
double budget_sglang_gib(uint64_t min_free_bytes, int ranks);

/* rest = post - pre * (1 - F), in double. */
double budget_sglang_rest(double post_gib, double pre_gib, double fraction);

/* floor(rest * 2^30 / cell_size) as Python's int(x // c); saturates at the
 * int64 range for values no server could see. */
int64_t budget_sglang_tokens(double rest_gib, int64_t cell_size);

/*
 * The KV pool's size in tokens, as SGLang settles it: the profiled tokens
 * capped by --max-total-tokens (0: no cap), then floored to whole pages
 * with Python's `//` (towards minus infinity). The older model_runner caps
 * then floors; the newer pool_configurator floors, caps and floors again:
 * the same number. Saturates at INT64_MIN.
 */
int64_t budget_sglang_pool_tokens(int64_t tokens, int64_t page_size, int64_t max_total_tokens);

/*
 * The current path (KVCacheConfigurator._profile_available_bytes, SGLang
 * about 0.5.16 and later): rest = post - pre * (1 - F) - reserve, the
 * reserve being the multimodal caches' GiB (0 for a text model); the older
 * path is the same with a reserve of 0 (x - 0.0 is x).
 */
double budget_sglang_rest_reserved(double post_gib, double pre_gib, double fraction,
                                   double reserve_gib);

/* int(rest * 2^30): the KV budget in bytes the current path hands the pool
 * configurator (truncated towards zero); saturates like the tokens. */
int64_t budget_sglang_available_bytes(double rest_gib);

/* int(cell * (1 + draft_layers / layers)): the bytes per token of the
 * target's pool when an EAGLE or STANDALONE draft model shares it. */
int64_t budget_sglang_spec_cell_size(int64_t cell_size, int64_t layers, int64_t draft_layers);

/*
 * The ValueError the current path raises when rest <= 0, as SGLang words
 * it: F as Python's str(float), then ceil(F_min * 1000) / 1000 with three
 * decimals and F_min = 1 - post / pre with four (malloc'd).
 */
#define BUDGET_SGLANG_VALUE_ERR_START "Loaded weights leave no GPU memory for the KV cache"
char *budget_sglang_value_error(double fraction, double post_gib, double pre_gib);

/* Python's repr() of a double ("0.55", "1.0", "1e-05") into buf. */
char *budget_python_float_repr(double v, char *buf, size_t size);

/*
 * Whether a KV pool of `count` equal buffers of `size` bytes is the one
 * SGLang makes for `tokens` tokens at this cell size: every buffer holds
 * (tokens + page_size) tokens of one layer's K, V or MLA latent, so
 * count x size = (tokens + page_size) x cell_size. The sizes alone cannot
 * give the cell size (a buffer's bytes factor into tokens x bytes per token
 * in many ways that the same budget floors to): this only confirms one.
 */
bool budget_sglang_pool_matches(int64_t tokens, int64_t page_size, int64_t count, int64_t size,
                                int64_t cell_size);

/*
 * What sizes the pool besides rest: bytes per token, page, cap (0: none);
 * for the current path also the reserve subtracted from rest and its
 * rounding (int_bytes: rest > 0 is required, then int(rest * 2^30) //
 * cell; else floor(rest * 2^30 / cell)). Zero for both is the older path.
 */
struct budget_sglang_pool {
    int64_t cell_size, page_size, max_total_tokens;
    double reserve_gib;
    bool int_bytes;
};

/* Whether SGLang goes on with this F: the pool's tokens > 0. */
bool budget_sglang_pool_fits(double post_gib, double pre_gib, double fraction,
                             const struct budget_sglang_pool *pool);

/* F_min = 1 - (post - reserve - page * c) / pre: the F at which one page
 * fits; NaN when pre is not positive. */
double budget_sglang_pool_f_min(double post_gib, double pre_gib,
                                const struct budget_sglang_pool *pool);

/* The smallest F of the form k/1000 that fits this pool (as below). */
bool budget_sglang_pool_f_min_rounded(double post_gib, double pre_gib,
                                      const struct budget_sglang_pool *pool, double *fraction);

/* The same with page size 1 and no cap. Whether SGLang goes on: tokens > 0. */
bool budget_sglang_fits(double post_gib, double pre_gib, double fraction, int64_t cell_size);

/* F_min = 1 - (post - c) / pre, c = cell_size / 2^30: the F at which one
 * token fits. NaN when pre is not positive. */
double budget_sglang_f_min(double post_gib, double pre_gib, int64_t cell_size);

/*
 * The smallest F of the form k/1000 (0 < k <= 1000) that fits, checked
 * with the formula itself, so that decimal rounding can never print an F
 * that does not fit. Returns false when even 1.000 does not fit.
 */
bool budget_sglang_f_min_rounded(double post_gib, double pre_gib, int64_t cell_size,
                                 double *fraction);

#endif
