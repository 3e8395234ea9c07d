/*
 * budget_vllm_out.h - the vLLM part of `cutrace budget`'s report, text and
 * JSON (cmd/budget.c prints the rest and calls these in its vLLM branches).
 */
#ifndef CUTRACE_ANALYZER_CMD_BUDGET_VLLM_OUT_H
#define CUTRACE_ANALYZER_CMD_BUDGET_VLLM_OUT_H

#include "analysis/budget_analysis.h"
#include "out/json.h"

#include <stdbool.h>
#include <stdio.h>

/* The code path replayed and why, and the KV cache's inputs (two lines). */
void budget_vllm_print_header(const struct budget_analysis *r, FILE *out);
/* Each listed rank's arithmetic, the blocks, the verdict and its range, the
 * inputs missing and the utilizations that fit. */
void budget_vllm_print_job(const struct budget_analysis *r, const struct budget_job *g,
                           bool (*listed)(const struct budget_rank *), FILE *out);
/* The keys a rank's and a job's replay add to the JSON (docs/cli.md). */
void budget_vllm_json_rank(struct json_writer *w, const struct budget_rank *rk);
void budget_vllm_json_job(struct json_writer *w, const struct budget_job *g);

#endif
