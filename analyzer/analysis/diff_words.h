/*
 * diff_words.h - what `cutrace diff`'s printers share (diff_words.c):
 * the words for sides, phases and ends, the pair whose milestones are
 * shown and how each other pair compares with it (a signature per row),
 * what each phase adds up to, the budget's effects side by side. The
 * printers are diff_text.c, diff_text_budget.c and diff_json.c; reports
 * call them through diff_report.h.
 */
#ifndef CUTRACE_ANALYZER_DIFF_WORDS_H
#define CUTRACE_ANALYZER_DIFF_WORDS_H

#include "analysis/diff_analysis.h"
#include "analysis/diff_report.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* How a pair's step differs from the shown pair's at the same row. */
struct diff_row_sig {
    bool has[2], measured;
    int64_t dlive[GM_CATEGORIES];
    int64_t dfree;
    int64_t end[2];
};

/* What the allocation groups of a phase add up to: GPU memory, IPC
 * mappings of peers' memory, pinned host memory. */
enum { PS_GPU, PS_PEER, PS_HOST, PS_KINDS };
enum { PS_ADDED, PS_REMOVED, PS_BYTES };

struct diff_phase_sum {
    int64_t phase, end;
    int64_t (*v)[PS_KINDS][3]; /* per pair: added and removed allocations, bytes */
};

struct diff_effect {
    enum budget_part part;
    int category;
    int64_t bytes[2];
    double cost[2];
};

const char *diff_side_name(int side);
void diff_emit(FILE *out, size_t indent, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int64_t diff_sat_mul_bytes(int64_t count, int64_t size);
char *diff_signed_count(int64_t n);
char *diff_count_range(int64_t lo, int64_t hi);
const char *diff_category_key(uint8_t category);
char *diff_live_changes(const int64_t *a, const int64_t *b);
char *diff_phase_text(const struct diff *d, int64_t phase, int64_t end);
const char *diff_end_word(const struct gm_process *p);
const struct diff_milestone *diff_last_milestone(const struct diff_run *r, uint32_t proc);
struct diff_row_sig *diff_pair_sigs(const struct diff *d, uint32_t pair);
bool diff_sig_equal(const struct diff_row_sig *a, const struct diff_row_sig *b);
uint32_t diff_shown_pair(const struct diff *d);
char *diff_sig_difference(const struct diff_row_sig *mine, const struct diff_row_sig *shown);
struct diff_phase_sum *diff_phase_sums(const struct diff *d, size_t *count);
bool diff_phase_uniform(const struct diff *d, const struct diff_phase_sum *s);
size_t diff_phase_pairs(const struct diff *d, const struct diff_phase_sum *s, uint32_t **pairs,
                        bool *alike);
char *diff_alloc_phrase(const int64_t v[3], const char *what);
struct diff_effect *diff_effects(const struct budget_rank *a, const struct budget_rank *b,
                                 size_t *n);

/* The budget section of the text report (diff_text_budget.c). */
void diff_print_budget(const struct diff *d, FILE *out);

#endif
