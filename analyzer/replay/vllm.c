/*
 * vllm.c - vLLM's KV-cache arithmetic at startup, replayed (vllm.h): the
 * bytes requested of the GPU on either code path, the early failure and the
 * max_model_len check with their messages in vLLM's own formatting, the
 * blocks, and the utilizations that fit.
 */
#include "replay/vllm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB_BYTES 1073741824.0

static int64_t whole_bytes(double v)
{
    if (!(v < 9223372036854775807.0))
        return INT64_MAX;
    if (!(v > 0))
        return 0;
    return (int64_t)v;
}

int64_t budget_vllm_requested(int64_t total_bytes, double utilization)
{
    return whole_bytes((double)total_bytes * utilization);
}

int64_t budget_vllm_requested_ceil(int64_t total_bytes, double utilization)
{
    return whole_bytes(ceil((double)total_bytes * utilization));
}

int64_t budget_vllm_requested_on(bool ceil_path, int64_t total_bytes, double utilization)
{
    return ceil_path ? budget_vllm_requested_ceil(total_bytes, utilization)
                     : budget_vllm_requested(total_bytes, utilization);
}

bool budget_vllm_early_failure(bool ceil_path, int64_t free_bytes, int64_t total_bytes,
                               double utilization)
{
    if (ceil_path)
        return free_bytes < budget_vllm_requested_ceil(total_bytes, utilization);
    /* free < total * U as Python compares an int with a float: exactly (a
     * free count below 2^53 is a double without rounding). */
    return (double)free_bytes < (double)total_bytes * utilization;
}

char *budget_vllm_py_repr(double v, char *buf, size_t size)
{
    /* repr: the fewest significant digits that read back as the same
     * double, positional for decimal exponents -4 to 15, ".0" when whole */
    int digits = 17;
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*e", prec - 1, v);
        if (strtod(buf, NULL) == v) {
            digits = prec;
            break;
        }
    }
    snprintf(buf, size, "%.*e", digits - 1, v);
    const char *e = strchr(buf, 'e');
    int exponent = e ? atoi(e + 1) : 0;
    if (!isfinite(v) || exponent < -4 || exponent >= 16)
        return buf;
    int decimals = digits - 1 - exponent;
    snprintf(buf, size, "%.*f", decimals > 0 ? decimals : 0, v);
    if (!strchr(buf, '.') && strlen(buf) + 2 < size)
        strcat(buf, ".0");
    return buf;
}

double budget_vllm_format_gib(double bytes)
{
    /* round(x, 2) is the double nearest the decimal x correctly rounded to
     * two places, which is what %.2f writes (half-even on the exact value) */
    char text[64];
    snprintf(text, sizeof(text), "%.2f", bytes / GIB_BYTES);
    return strtod(text, NULL);
}

char *budget_vllm_early_message(bool ceil_path, int64_t ordinal, int64_t free_bytes,
                                int64_t total_bytes, double utilization, char *buf, size_t size)
{
    char f[40], t[40], u[40], r[40], device[40] = "";
    double requested = ceil_path ? (double)budget_vllm_requested_ceil(total_bytes, utilization)
                                 : (double)total_bytes * utilization;
    budget_vllm_py_repr(budget_vllm_format_gib((double)free_bytes), f, sizeof(f));
    budget_vllm_py_repr(budget_vllm_format_gib((double)total_bytes), t, sizeof(t));
    budget_vllm_py_repr(utilization, u, sizeof(u));
    budget_vllm_py_repr(budget_vllm_format_gib(requested), r, sizeof(r));
    if (ceil_path && ordinal >= 0)
        snprintf(device, sizeof(device), " cuda:%lld", (long long)ordinal);
    else if (ceil_path)
        snprintf(device, sizeof(device), " cuda:?");
    snprintf(buf, size,
             "Free memory on device%s (%s/%s GiB) on startup is less than desired GPU memory "
             "utilization (%s, %s GiB). Decrease GPU memory utilization or reduce GPU memory "
             "used by other processes.",
             device, f, t, u, r);
    return buf;
}

int64_t budget_vllm_blocks(int64_t available, int64_t page_size_bytes, int64_t num_layers)
{
    if (available <= 0 || page_size_bytes <= 0 || num_layers <= 0)
        return 0;
    return available / page_size_bytes / num_layers;
}

int64_t budget_vllm_needed_bytes(int64_t max_model_len, int64_t block_size, int64_t page_size_bytes,
                                 int64_t num_layers)
{
    if (max_model_len <= 0 || block_size <= 0 || page_size_bytes <= 0 || num_layers <= 0)
        return 0;
    int64_t blocks = (max_model_len + block_size - 1) / block_size;
    if (blocks > INT64_MAX / page_size_bytes || blocks * page_size_bytes > INT64_MAX / num_layers)
        return INT64_MAX;
    return blocks * page_size_bytes * num_layers;
}

int64_t budget_vllm_estimated_max_len(int64_t available, int64_t max_model_len, int64_t block_size,
                                      int64_t page_size_bytes, int64_t num_layers)
{
    /* estimate_max_model_len's binary search over 1..max_model_len has this
     * closed form: the needed bytes grow in whole blocks */
    if (budget_vllm_needed_bytes(1, block_size, page_size_bytes, num_layers) > available ||
        available <= 0)
        return 0;
    int64_t per_block = page_size_bytes * num_layers;
    int64_t blocks = available / per_block;
    if (blocks > max_model_len / block_size + 1)
        return max_model_len;
    int64_t len = blocks * block_size;
    return len < max_model_len ? len : max_model_len;
}

char *budget_vllm_max_len_message(int64_t max_model_len, int64_t needed, int64_t available,
                                  int64_t estimated_max_len, char *buf, size_t size)
{
    char estimated[128] = "";
    if (estimated_max_len > 0)
        snprintf(estimated, sizeof(estimated),
                 "Based on the available memory, the estimated maximum model length is %lld.",
                 (long long)estimated_max_len);
    snprintf(buf, size,
             "To serve at least one request with the models's max seq len (%lld), (%.2f GiB KV "
             "cache is needed, which is larger than the available KV cache memory (%.2f GiB). "
             "%s Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
             "initializing the engine.",
             (long long)max_model_len, (double)needed / GIB_BYTES, (double)available / GIB_BYTES,
             estimated);
    return buf;
}

bool budget_vllm_u_min_on(bool ceil_path, int64_t total_bytes, int64_t need_bytes,
                          double *utilization)
{
    for (int k = 1; k <= 1000; k++)
        if (budget_vllm_requested_on(ceil_path, total_bytes, k / 1000.0) > need_bytes) {
            *utilization = k / 1000.0;
            return true;
        }
    return false;
}

bool budget_vllm_u_max_on(bool ceil_path, int64_t total_bytes, int64_t free_bytes,
                          double *utilization)
{
    for (int k = 1000; k >= 1; k--)
        if (!budget_vllm_early_failure(ceil_path, free_bytes, total_bytes, k / 1000.0)) {
            *utilization = k / 1000.0;
            return true;
        }
    return false;
}

bool budget_vllm_u_min(int64_t total_bytes, int64_t need_bytes, double *utilization)
{
    return budget_vllm_u_min_on(false, total_bytes, need_bytes, utilization);
}

bool budget_vllm_u_max(int64_t total_bytes, int64_t free_bytes, double *utilization)
{
    for (int k = 1000; k >= 1; k--)
        if (budget_vllm_requested(total_bytes, k / 1000.0) <= free_bytes) {
            *utilization = k / 1000.0;
            return true;
        }
    return false;
}
