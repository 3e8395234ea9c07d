/*
 * sglang.h - SGLang's KV-cache sizing at startup as pure functions
 * (docs/budget.md): the float32 MIN of free memory across ranks, the rest
 * after the static fraction, the tokens it buys, and the smallest fraction
 * that fits. analysis/budget_analysis.c finds the inputs in the traces.
 */
#ifndef CUTRACE_ANALYZER_REPLAY_SGLANG_H
#define CUTRACE_ANALYZER_REPLAY_SGLANG_H

#include <stdbool.h>
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

/* What sizes the pool besides rest: bytes per token, page, cap (0: none). */
struct budget_sglang_pool {
    int64_t cell_size, page_size, max_total_tokens;
};

/* Whether SGLang goes on with this F: the pool's tokens > 0. */
bool budget_sglang_pool_fits(double post_gib, double pre_gib, double fraction,
                             const struct budget_sglang_pool *pool);

/* F_min = 1 - (post - page * c) / pre: the F at which one page fits; NaN
 * when pre is not positive. */
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
