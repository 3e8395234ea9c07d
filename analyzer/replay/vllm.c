/*
 * vllm.c - vLLM's KV-cache arithmetic at startup, replayed (vllm.h): the
 * bytes requested of the GPU as vLLM computes them, in double, truncated.
 */
#include "replay/vllm.h"

int64_t budget_vllm_requested(int64_t total_bytes, double utilization)
{
    double requested = (double)total_bytes * utilization;
    if (!(requested < 9223372036854775807.0))
        return INT64_MAX;
    if (!(requested > 0))
        return 0;
    return (int64_t)requested;
}

bool budget_vllm_u_min(int64_t total_bytes, int64_t need_bytes, double *utilization)
{
    for (int k = 1; k <= 1000; k++)
        if (budget_vllm_requested(total_bytes, k / 1000.0) > need_bytes) {
            *utilization = k / 1000.0;
            return true;
        }
    return false;
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
