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

bool budget_sglang_fits(double post_gib, double pre_gib, double fraction, int64_t cell_size)
{
    return budget_sglang_tokens(budget_sglang_rest(post_gib, pre_gib, fraction), cell_size) > 0;
}

double budget_sglang_f_min(double post_gib, double pre_gib, int64_t cell_size)
{
    if (!(pre_gib > 0))
        return NAN;
    return 1.0 - (post_gib - (double)cell_size / BUDGET_GIB) / pre_gib;
}

bool budget_sglang_f_min_rounded(double post_gib, double pre_gib, int64_t cell_size,
                                 double *fraction)
{
    double exact = budget_sglang_f_min(post_gib, pre_gib, cell_size);
    int k = 1;
    if (isfinite(exact) && exact > 0.001)
        k = exact >= 1.0 ? 1000 : (int)ceil(exact * 1000.0);
    if (k < 1)
        k = 1;
    /* The estimate is within one step; the formula decides. */
    while (k > 1 && budget_sglang_fits(post_gib, pre_gib, (k - 1) / 1000.0, cell_size))
        k--;
    while (k <= 1000 && !budget_sglang_fits(post_gib, pre_gib, k / 1000.0, cell_size))
        k++;
    if (k > 1000)
        return false;
    *fraction = k / 1000.0;
    return true;
}
