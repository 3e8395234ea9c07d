/*
 * budget_sglang_out.h - the SGLang part of `cutrace budget`'s report, text
 * and JSON (cmd/budget.c prints the rest and calls these in its SGLang
 * branches).
 */
#ifndef CUTRACE_ANALYZER_CMD_BUDGET_SGLANG_OUT_H
#define CUTRACE_ANALYZER_CMD_BUDGET_SGLANG_OUT_H

#include "analysis/budget_analysis.h"
#include "out/json.h"

#include <stdbool.h>
#include <stdio.h>

/* The pool's inputs, the draft, the reserve, F's derivation and the code
 * path replayed, each with where it came from. */
void budget_sglang_print_header(const struct budget_analysis *r, FILE *out);
/* The job's arithmetic step by step, the verdict, the smallest F that fits
 * and the decomposition of rest with its conclusion. */
void budget_sglang_print_job(const struct budget_analysis *r, const struct budget_job *g,
                             FILE *out);
/* The job's keys for the replayed path's steps (before its "ranks"), its
 * arithmetic and verdict (after them; any: a rank was analysed), and
 * F's derivation (docs/cli.md). */
void budget_sglang_json_inputs(struct json_writer *w, const struct budget_job *g);
void budget_sglang_json_job(struct json_writer *w, const struct budget_analysis *r,
                            const struct budget_job *g, bool any);
void budget_sglang_json_derivation(struct json_writer *w,
                                   const struct budget_fraction_derivation *d);

#endif
