/*
 * vllm.h - vLLM's KV-cache sizing at startup as pure functions
 * (docs/budget.md): the bytes requested for --gpu-memory-utilization and
 * the utilizations that fit. analysis/budget_analysis.c finds the inputs.
 */
#ifndef CUTRACE_ANALYZER_REPLAY_VLLM_H
#define CUTRACE_ANALYZER_REPLAY_VLLM_H

#include <stdbool.h>
#include <stdint.h>

#define BUDGET_VLLM_UTIL 0.9 /* vLLM's --gpu-memory-utilization default */
#define BUDGET_VLLM_ERR  "No available memory for the cache blocks."

/* vLLM: requested = total * U in double, truncated to whole bytes. */
int64_t budget_vllm_requested(int64_t total_bytes, double utilization);

/* The smallest U = k/1000 with requested - need > 0, false if none <= 1;
 * and the largest U = k/1000 whose requested fits in free (false if none). */
bool budget_vllm_u_min(int64_t total_bytes, int64_t need_bytes, double *utilization);
bool budget_vllm_u_max(int64_t total_bytes, int64_t free_bytes, double *utilization);

#endif
