/*
 * report.h - the sections of the HTML reports (`cutrace report`, `cutrace
 * diff --html`), each written as HTML with inline SVG onto one page
 * (out/html.h): a GPU's memory over time, the budget as a waterfall per
 * rank, the live memory at a GPU's peak as a flame graph of call sites, the
 * collectives table, and a diff's charts aligned by milestone.
 *
 * The numbers a reader compares with the text reports carry data-key and
 * data-value attributes: data-key is the path of the same number in
 * `cutrace budget --json` ("jobs.0.ranks.3.rest_gib_own"), data-value its
 * exact value, so the browser test (tests/browser/) checks the page
 * against the JSON. Charts are downsampled to REPORT_COLUMNS columns (each
 * keeps the highest traced bytes of its stretch), and milestones are drawn
 * at their exact values, so a 10^6-event run makes a page of the same size
 * as a small one.
 */
#ifndef CUTRACE_ANALYZER_REPORT_H
#define CUTRACE_ANALYZER_REPORT_H

#include "analysis/budget_analysis.h"
#include "analysis/coll_listing.h"
#include "analysis/coll_report.h"
#include "analysis/diff_analysis.h"
#include "analysis/timeline.h"
#include "model/filter.h"
#include "model/gpumodel.h"

#include <stdio.h>

#define REPORT_COLUMNS 600
/* Milestone lines drawn per chart (failed calls are counted, not drawn, past it). */
#define REPORT_MAX_MILESTONES 300

/* GPU g->gpu's memory over time: stacked traced categories, used memory at
 * each measurement, unexplained, milestones, failures. id names the SVG. */
void report_memory_chart(FILE *out, const struct gm_model *m, const struct gpu_report *g,
                         const char *id);

/* Every job of an analysed budget that has a rank f passes (f NULL: every
 * job and rank): verdict, table, and the waterfall of each rank f passes.
 * The analysis itself is over every rank, as `cutrace budget`'s. side
 * names the run on a page of two ("A", "B"; NULL for one): its numbers'
 * data-keys become "A.jobs.0...." and its charts' ids its own. */
void report_budget(FILE *out, const struct budget_analysis *r, const struct gm_filter *f,
                   const char *side);

/* The GPU memory live at each GPU f passes at that GPU's peak, by call
 * stack, as an icicle flame graph (outermost frame on top): the
 * allocations of the processes f passes (as `cutrace sites` counts them).
 * -1 after the one-line error of a trace whose stacks cannot be read. */
int report_flame(FILE *out, const struct gm_model *m, const struct gm_filter *f);

/* The communicators ls lists with their calls per op, and the problems it
 * lists; problems highlighted. */
void report_collectives(FILE *out, const struct coll_listing *ls);

/* A diff: per GPU pair, both runs' traced bytes on one axis of aligned
 * milestones, and the difference tables (milestones, allocations). */
void report_diff(FILE *out, const struct diff *d);

/* NVTX ranges on a chart (both reports): a shaded band from x0 to x1
 * between top and bottom, behind the chart, titled; and on top of its
 * hover columns a strip at the bottom, stacked by depth (at most
 * REPORT_BAND_MAX), whose hover shows title in the chart's readout,
 * labelled where it is wide enough. At most REPORT_BAND_CAP per chart. */
#define REPORT_BAND_MAX 4
#define REPORT_BAND_CAP 300
void report_nvtx_band(FILE *out, double x0, double x1, double top, double bottom,
                      const char *title);
void report_nvtx_strip(FILE *out, double x0, double x1, double bottom, int depth, const char *title,
                       const char *label);
/* "1.234 s", "12.500 ms", "80.0 us": an NVTX range's duration in a title. */
const char *report_duration(char *buf, size_t size, int64_t ns);

/* "1.50 GiB", for the pages (out/units.h's format_size). */
const char *report_size(char *buf, size_t size, int64_t bytes);

#endif
