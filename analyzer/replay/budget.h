/*
 * budget.h - the arithmetic with which inference servers size their KV
 * cache at startup, replayed exactly (docs/budget.md), one file per server:
 * sglang.c, vllm.c. Pure functions, so that the tests can compare them bit
 * for bit with what a simulated server computed itself; `cutrace budget`
 * (cmd/budget.c, through analysis/budget_analysis.c) finds the inputs in
 * the traces. This header holds what the replays share and brings in each
 * server's own. A new server's replay is one more file here.
 */
#ifndef CUTRACE_ANALYZER_BUDGET_H
#define CUTRACE_ANALYZER_BUDGET_H

/* KV bytes per token when the user gives none: DeepSeek-V3 / Kimi-K2 MLA in bf16. */
#define BUDGET_CELL_SIZE 70272

#include "replay/sglang.h"
#include "replay/vllm.h"

#endif
