/*
 * sglang.c - SGLang's KV-cache arithmetic at startup, replayed (sglang.h).
 * Every operation is written as SGLang writes it, in the same precision and
 * order: these numbers are compared bit for bit.
 */
#include "replay/sglang.h"
#include "cli.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double budget_sglang_gib(uint64_t min_free_bytes, int ranks)
{
    double bytes = ranks > 1 ? (double)(float)min_free_bytes : (double)min_free_bytes;
    return bytes / BUDGET_GIB;
}

double budget_sglang_rest(double post_gib, double pre_gib, double fraction)
{
    return post_gib - pre_gib * (1.0 - fraction);
}

double budget_sglang_rest_reserved(double post_gib, double pre_gib, double fraction,
                                   double reserve_gib)
{
    return post_gib - pre_gib * (1.0 - fraction) - reserve_gib;
}

/* A double to int64 as Python's int() does (towards zero), saturated. */
static int64_t saturating_trunc(double v)
{
    if (!(v < 9223372036854775807.0))
        return isnan(v) ? 0 : INT64_MAX;
    if (!(v > -9223372036854775808.0))
        return INT64_MIN;
    return (int64_t)v;
}

int64_t budget_sglang_available_bytes(double rest_gib)
{
    return saturating_trunc(rest_gib * BUDGET_GIB);
}

int64_t budget_sglang_spec_cell_size(int64_t cell_size, int64_t layers, int64_t draft_layers)
{
    assert(cell_size > 0 && layers > 0 && draft_layers >= 0);
    return saturating_trunc((double)cell_size * (1.0 + (double)draft_layers / (double)layers));
}

char *budget_python_float_repr(double v, char *buf, size_t size)
{
    assert(size >= 32);
    if (isnan(v))
        return strcpy(buf, "nan");
    if (isinf(v))
        return strcpy(buf, v > 0 ? "inf" : "-inf");
    /* repr is the shortest decimal that reads back as the same double... */
    int digits = 1;
    for (; digits < 17; digits++) {
        snprintf(buf, size, "%.*e", digits - 1, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    snprintf(buf, size, "%.*e", digits - 1, v);
    int exponent = atoi(strchr(buf, 'e') + 1);
    /* ...written without an exponent from 1e-4 up to 1e16, always with a
     * point there; with one outside, two digits at least ("1e-05") */
    if (exponent < -4 || exponent >= 16) {
        snprintf(buf, size, "%.*e", digits - 1, v);
        return buf;
    }
    int decimals = digits - 1 - exponent;
    snprintf(buf, size, "%.*f", decimals > 0 ? decimals : 0, v);
    if (decimals <= 0)
        strcat(buf, ".0");
    return buf;
}

char *budget_sglang_value_error(double fraction, double post_gib, double pre_gib)
{
    double minimum = 1.0 - post_gib / pre_gib;
    double suggested = ceil(minimum * 1000.0) / 1000.0;
    char f[40];
    return xasprintf("%s under --mem-fraction-static=%s. Raise --mem-fraction-static above %.3f "
                     "(minimum viable = 1 - available/pre = %.4f). If using speculative "
                     "decoding, draft weights are now counted.",
                     BUDGET_SGLANG_VALUE_ERR_START,
                     budget_python_float_repr(fraction, f, sizeof(f)), suggested, minimum);
}

bool budget_sglang_pool_matches(int64_t tokens, int64_t page_size, int64_t count, int64_t size,
                                int64_t cell_size)
{
    if (tokens <= 0 || page_size <= 0 || count <= 0 || size <= 0 || cell_size <= 0)
        return false;
    __int128 seen = (__int128)count * size, made = ((__int128)tokens + page_size) * cell_size;
    return seen == made;
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
    double rest = budget_sglang_rest_reserved(post_gib, pre_gib, fraction, pool->reserve_gib);
    int64_t tokens;
    if (pool->int_bytes) {
        if (!(rest > 0))
            return false;
        tokens = budget_sglang_available_bytes(rest) / pool->cell_size;
    } else {
        tokens = budget_sglang_tokens(rest, pool->cell_size);
    }
    return budget_sglang_pool_tokens(tokens, pool->page_size, pool->max_total_tokens) > 0;
}

double budget_sglang_pool_f_min(double post_gib, double pre_gib,
                                const struct budget_sglang_pool *pool)
{
    if (!(pre_gib > 0))
        return NAN;
    return 1.0 - (post_gib - pool->reserve_gib -
                  (double)pool->page_size * (double)pool->cell_size / BUDGET_GIB) /
                     pre_gib;
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
    struct budget_sglang_pool pool = {cell_size, 1, 0, 0, false};
    return budget_sglang_pool_fits(post_gib, pre_gib, fraction, &pool);
}

double budget_sglang_f_min(double post_gib, double pre_gib, int64_t cell_size)
{
    struct budget_sglang_pool pool = {cell_size, 1, 0, 0, false};
    return budget_sglang_pool_f_min(post_gib, pre_gib, &pool);
}

bool budget_sglang_f_min_rounded(double post_gib, double pre_gib, int64_t cell_size,
                                 double *fraction)
{
    struct budget_sglang_pool pool = {cell_size, 1, 0, 0, false};
    return budget_sglang_pool_f_min_rounded(post_gib, pre_gib, &pool, fraction);
}
