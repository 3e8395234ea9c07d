/*
 * vllm.h - vLLM's KV-cache sizing at startup as pure functions
 * (docs/budget.md, "vLLM"): the bytes requested for --gpu-memory-utilization
 * on each code path, the early failure and its message, the bytes available
 * for the KV cache, the blocks they buy, the max_model_len check and the
 * utilizations that fit. analysis/budget_vllm.c finds the inputs.
 *
 * Two code paths (enum budget_path in analysis/budget_analysis.h):
 *   older   (V1 workers up to about 0.17): U 0.9 by default, requested is
 *           total * U in double, compared and subtracted as a float and the
 *           result truncated (here: truncated first, the same bytes for any
 *           positive result and the same verdict for any);
 *   current (request_memory in vllm/v1/worker/utils.py): U 0.92 by default,
 *           requested = math.ceil(total * U), whole bytes throughout.
 */
#ifndef CUTRACE_ANALYZER_REPLAY_VLLM_H
#define CUTRACE_ANALYZER_REPLAY_VLLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BUDGET_VLLM_UTIL         0.9  /* --gpu-memory-utilization default, older path */
#define BUDGET_VLLM_UTIL_CURRENT 0.92 /* and in current releases (vllm/config/cache.py) */
/* check_enough_kv_cache_memory's ValueError (vllm/v1/core/kv_cache_utils.py) */
#define BUDGET_VLLM_ERR                                                                            \
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "      \
    "initializing the engine."

/* older: requested = total * U in double, truncated to whole bytes. */
int64_t budget_vllm_requested(int64_t total_bytes, double utilization);
/* current: requested = math.ceil(total * U). */
int64_t budget_vllm_requested_ceil(int64_t total_bytes, double utilization);
/* requested on the path: ceil when current, else truncated. */
int64_t budget_vllm_requested_on(bool ceil_path, int64_t total_bytes, double utilization);

/* The early failure of init_device: free memory at S0 below requested, the
 * comparison Python makes (an int against the float product on the older
 * path, exact; against the ceil on the current one). */
bool budget_vllm_early_failure(bool ceil_path, int64_t free_bytes, int64_t total_bytes,
                               double utilization);

/* Python's repr of a float ("0.9", "79.4", "80.0"), into buf. Returns buf. */
char *budget_vllm_py_repr(double v, char *buf, size_t size);
/* Python's round(b / 2^30, 2): vLLM's format_gib (and the older GiB lambda). */
double budget_vllm_format_gib(double bytes);

/*
 * The early failure's ValueError text, as vLLM formats it: the current path
 * names the device ("on device cuda:0"; ordinal < 0: unknown, "cuda:?"),
 * the older one does not. Into buf (BUDGET_VLLM_MESSAGE bytes do); returns buf.
 */
#define BUDGET_VLLM_MESSAGE 512
char *budget_vllm_early_message(bool ceil_path, int64_t ordinal, int64_t free_bytes,
                                int64_t total_bytes, double utilization, char *buf, size_t size);

/* The KV cache's blocks: available // page_size // num_layers, never < 0
 * (get_num_blocks); 0 when an input is not positive. */
int64_t budget_vllm_blocks(int64_t available, int64_t page_size_bytes, int64_t num_layers);

/*
 * The max_model_len check (check_enough_kv_cache_memory): the bytes one
 * request of max_model_len tokens needs, num_layers * cdiv(len, block_size)
 * * page_size_bytes (full attention, one spec per layer), and the longest
 * len <= max_model_len that fits (estimate_max_model_len; 0 when not even
 * one token does). INT64_MAX when it overflows.
 */
int64_t budget_vllm_needed_bytes(int64_t max_model_len, int64_t block_size, int64_t page_size_bytes,
                                 int64_t num_layers);
int64_t budget_vllm_estimated_max_len(int64_t available, int64_t max_model_len, int64_t block_size,
                                      int64_t page_size_bytes, int64_t num_layers);
/* Its ValueError text, into buf; returns buf. */
char *budget_vllm_max_len_message(int64_t max_model_len, int64_t needed, int64_t available,
                                  int64_t estimated_max_len, char *buf, size_t size);

/* The smallest U = k/1000 with requested - need > 0, false if none <= 1;
 * and the largest U = k/1000 whose requested fits in free (false if none).
 * Truncated requested (older path); the _on forms take the path. */
bool budget_vllm_u_min(int64_t total_bytes, int64_t need_bytes, double *utilization);
bool budget_vllm_u_max(int64_t total_bytes, int64_t free_bytes, double *utilization);
bool budget_vllm_u_min_on(bool ceil_path, int64_t total_bytes, int64_t need_bytes,
                          double *utilization);
bool budget_vllm_u_max_on(bool ceil_path, int64_t total_bytes, int64_t free_bytes,
                          double *utilization);

#endif
