/*
 * sglang.c - SGLang's KV-cache arithmetic at startup, replayed (sglang.h).
 * Every operation is written as SGLang writes it, in the same precision and
 * order: these numbers are compared bit for bit.
 */
#include "replay/sglang.h"

#include <assert.h>
#include <math.h>

double budget_sglang_gib(uint64_t min_free_bytes, int ranks)
{
    double bytes = ranks > 1 ? (double)(float)min_free_bytes : (double)min_free_bytes;
    return bytes / BUDGET_GIB;
}

double budget_sglang_rest(double post_gib, double pre_gib, double fraction)
{
    return post_gib - pre_gib * (1.0 - fraction);
}

int64_t budget_sglang_tokens(double rest_gib, int64_t cell_size)
{
    assert(cell_size > 0);
    double tokens = floor(rest_gib * BUDGET_GIB / (double)cell_size);
    /* Converting a double outside the int64 range is undefined in C. */
    if (!(tokens < 9223372036854775807.0))
        return INT64_MAX;
    if (!(tokens > -9223372036854775808.0))
        return INT64_MIN;
    return (int64_t)tokens;
}

int64_t budget_sglang_pool_tokens(int64_t tokens, int64_t page_size, int64_t max_total_tokens)
{
    assert(page_size > 0 && max_total_tokens >= 0);
    if (max_total_tokens > 0 && max_total_tokens < tokens)
        tokens = max_total_tokens;
    int64_t pages = tokens / page_size;
    if (tokens % page_size != 0 && tokens < 0) {
        if (pages <= INT64_MIN / page_size)
            return INT64_MIN;
        pages--;
    }
    return pages * page_size;
}

bool budget_sglang_pool_fits(double post_gib, double pre_gib, double fraction,
                             const struct budget_sglang_pool *pool)
{
    double rest = budget_sglang_rest(post_gib, pre_gib, fraction);
    int64_t tokens = budget_sglang_tokens(rest, pool->cell_size);
    return budget_sglang_pool_tokens(tokens, pool->page_size, pool->max_total_tokens) > 0;
}

double budget_sglang_pool_f_min(double post_gib, double pre_gib,
                                const struct budget_sglang_pool *pool)
{
    if (!(pre_gib > 0))
        return NAN;
    return 1.0 -
           (post_gib - (double)pool->page_size * (double)pool->cell_size / BUDGET_GIB) / pre_gib;
}

bool budget_sglang_pool_f_min_rounded(double post_gib, double pre_gib,
                                      const struct budget_sglang_pool *pool, double *fraction)
{
    double exact = budget_sglang_pool_f_min(post_gib, pre_gib, pool);
    int k = 1;
    if (isfinite(exact) && exact > 0.001)
        k = exact >= 1.0 ? 1000 : (int)ceil(exact * 1000.0);
    if (k < 1)
        k = 1;
    /* The estimate is within one step; the formula decides. */
    while (k > 1 && budget_sglang_pool_fits(post_gib, pre_gib, (k - 1) / 1000.0, pool))
        k--;
    while (k <= 1000 && !budget_sglang_pool_fits(post_gib, pre_gib, k / 1000.0, pool))
        k++;
    if (k > 1000)
        return false;
    *fraction = k / 1000.0;
    return true;
}

bool budget_sglang_fits(double post_gib, double pre_gib, double fraction, int64_t cell_size)
{
    struct budget_sglang_pool pool = {cell_size, 1, 0};
    return budget_sglang_pool_fits(post_gib, pre_gib, fraction, &pool);
}

double budget_sglang_f_min(double post_gib, double pre_gib, int64_t cell_size)
{
    struct budget_sglang_pool pool = {cell_size, 1, 0};
    return budget_sglang_pool_f_min(post_gib, pre_gib, &pool);
}

bool budget_sglang_f_min_rounded(double post_gib, double pre_gib, int64_t cell_size,
                                 double *fraction)
{
    struct budget_sglang_pool pool = {cell_size, 1, 0};
    return budget_sglang_pool_f_min_rounded(post_gib, pre_gib, &pool, fraction);
}
