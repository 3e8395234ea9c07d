/*
 * diff_report.h - `cutrace diff`'s two renderings of a finished diff
 * (diff_analysis.h): the text report (diff_text.c, with
 * diff_text_budget.c), the JSON document (diff_json.c) and the CSV tables
 * (diff_csv.c: milestones, allocations). They live next
 * to the analysis, not in out/ (which holds the formats every report
 * uses: tables, JSON, units) nor in cmd/ (one file per subcommand: the
 * options and the call), because their words are the diff's own.
 */
#ifndef CUTRACE_ANALYZER_DIFF_REPORT_H
#define CUTRACE_ANALYZER_DIFF_REPORT_H

#include "analysis/diff_analysis.h"

#include <stdio.h>

void diff_print_text(const struct diff *d, FILE *out);
void diff_print_json(const struct diff *d, FILE *out);
void diff_print_csv_milestones(const struct diff *d, FILE *out);
void diff_print_csv_allocations(const struct diff *d, FILE *out);

#endif
