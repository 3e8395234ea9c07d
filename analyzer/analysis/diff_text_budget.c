/*
 * diff_text_budget.c - the budget part of `cutrace diff`'s text report: the servers' KV-cache
 * budget of each side and what moved it (SGLang, vLLM).
 */
#include "analysis/diff_words.h"

#include "cli.h"
#include "out/json.h"
#include "out/table.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- budget ---- */

static char *gib_delta(double gib)
{
    char buf[DIFF_SIZE_BUF];
    return xstrdup(diff_signed_size(buf, sizeof(buf), (int64_t)llround(gib * BUDGET_GIB)));
}

static void print_sglang_job(const struct diff *d, const struct budget_job *x,
                             const struct budget_job *y, FILE *out)
{
    static const struct table_column cols[] = {
        {"", TABLE_LEFT, 0},
        {"A", TABLE_RIGHT, 0},
        {"B", TABLE_RIGHT, 0},
        {"B - A", TABLE_RIGHT, 0},
    };
    struct table *t = table_new(cols, sizeof(cols) / sizeof(cols[0]));
    char *delta;
    table_cell(t, "pre (MIN free)");
    table_cellf(t, "%.6f GiB", x->pre_gib);
    table_cellf(t, "%.6f GiB", y->pre_gib);
    delta = gib_delta(y->pre_gib - x->pre_gib);
    table_cell(t, delta);
    free(delta);
    table_cell(t, "post (MIN free)");
    table_cellf(t, "%.6f GiB", x->post_gib);
    table_cellf(t, "%.6f GiB", y->post_gib);
    delta = gib_delta(y->post_gib - x->post_gib);
    table_cell(t, delta);
    free(delta);
    table_cell(t, "rest");
    table_cellf(t, "%.6f GiB", x->rest);
    table_cellf(t, "%.6f GiB", y->rest);
    delta = gib_delta(y->rest - x->rest);
    table_cell(t, delta);
    free(delta);
    table_cell(t, "tokens");
    table_cellf(t, "%" PRId64, x->tokens);
    table_cellf(t, "%" PRId64, y->tokens);
    delta = diff_signed_count(gm_sub(y->tokens, x->tokens));
    table_cell(t, delta);
    free(delta);
    table_cell(t, "smallest F that fits");
    if (x->has_f_min)
        table_cellf(t, "%.3f", x->f_min_rounded);
    else
        table_cell(t, "none");
    if (y->has_f_min)
        table_cellf(t, "%.3f", y->f_min_rounded);
    else
        table_cell(t, "none");
    if (x->has_f_min && y->has_f_min)
        table_cellf(t, "%+.3f", y->f_min_rounded - x->f_min_rounded);
    else
        table_cell(t, NULL);
    table_print(t, out, 2);
    table_free(t);
    diff_emit(out, 2, "A: %s", x->verdict);
    diff_emit(out, 2, "B: %s", y->verdict);

    const struct budget_rank *ra = &x->ranks[x->post_rank], *rb = &y->ranks[y->post_rank];
    size_t n;
    struct diff_effect *e = diff_effects(ra, rb, &n);
    char who[2][64];
    gm_process_name(who[0], sizeof(who[0]), &d->run[DIFF_A].m.procs[ra->proc]);
    gm_process_name(who[1], sizeof(who[1]), &d->run[DIFF_B].m.procs[rb->proc]);
    diff_emit(out, 2, "what moved rest (on the rank with the smallest post: A %s, B %s):", who[0],
              who[1]);
    static const struct table_column ecols[] = {
        {"part", TABLE_LEFT, 0}, {"when", TABLE_LEFT, 0},   {"A", TABLE_RIGHT, 0},
        {"B", TABLE_RIGHT, 0},   {"B - A", TABLE_RIGHT, 0}, {"effect on rest", TABLE_RIGHT, 0},
    };
    t = table_new(ecols, sizeof(ecols) / sizeof(ecols[0]));
    char buf[DIFF_SIZE_BUF];
    double explained = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].bytes[0] == e[i].bytes[1])
            continue;
        struct budget_row row = {.part = e[i].part, .category = e[i].category};
        char *label = budget_part_label(&row);
        table_cell(t, label);
        free(label);
        table_cell(t, budget_part_when(e[i].part));
        table_cell(t, gm_format_size(buf, sizeof(buf), e[i].bytes[0]));
        table_cell(t, gm_format_size(buf, sizeof(buf), e[i].bytes[1]));
        table_cell(t, diff_signed_size(buf, sizeof(buf), gm_sub(e[i].bytes[1], e[i].bytes[0])));
        double effect = -(e[i].cost[1] - e[i].cost[0]);
        explained += effect;
        delta = gib_delta(effect);
        table_cell(t, delta);
        free(delta);
    }
    double other = (y->rest - x->rest) - explained;
    if (fabs(other) * BUDGET_GIB >= 64 * 1024) {
        table_cell(t, "float32, MIN over ranks and the rest");
        for (int i = 0; i < 4; i++)
            table_cell(t, "");
        delta = gib_delta(other);
        table_cell(t, delta);
        free(delta);
    }
    if (table_rows(t) > 0)
        table_print(t, out, 4);
    else
        diff_emit(out, 4, "no part of rest changed");
    table_free(t);
    free(e);
}

static void print_vllm_job(const struct diff *d, const struct budget_job *x,
                           const struct budget_job *y, FILE *out)
{
    const struct budget_rank *ra = &x->ranks[x->available_rank], *rb = &y->ranks[y->available_rank];
    char who[2][64];
    gm_process_name(who[0], sizeof(who[0]), &d->run[DIFF_A].m.procs[ra->proc]);
    gm_process_name(who[1], sizeof(who[1]), &d->run[DIFF_B].m.procs[rb->proc]);
    diff_emit(out, 2, "on the rank with the least available (A %s, B %s):", who[0], who[1]);
    static const struct table_column cols[] = {
        {"", TABLE_LEFT, 0},
        {"A", TABLE_RIGHT, 0},
        {"B", TABLE_RIGHT, 0},
        {"B - A", TABLE_RIGHT, 0},
    };
    struct table *t = table_new(cols, sizeof(cols) / sizeof(cols[0]));
    const struct {
        const char *name;
        int64_t a, b;
    } rows[] = {
        {"requested (total x U)", ra->requested, rb->requested},
        {"weights", ra->weights, rb->weights},
        {"activation peak", ra->peak_activation, rb->peak_activation},
        {"non-torch increase", ra->non_torch_increase, rb->non_torch_increase},
        {"available for the KV cache", ra->available, rb->available},
    };
    char buf[DIFF_SIZE_BUF];
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        table_cell(t, rows[i].name);
        table_cell(t, gm_format_size(buf, sizeof(buf), rows[i].a));
        table_cell(t, gm_format_size(buf, sizeof(buf), rows[i].b));
        table_cell(t, diff_signed_size(buf, sizeof(buf), gm_sub(rows[i].b, rows[i].a)));
    }
    table_print(t, out, 4);
    table_free(t);
    diff_emit(out, 2, "A: %s", x->verdict);
    diff_emit(out, 2, "B: %s", y->verdict);
}

void diff_print_budget(const struct diff *d, FILE *out)
{
    const struct budget_options *oa = &d->run[DIFF_A].budget_options,
                                *ob = &d->run[DIFF_B].budget_options;
    bool sglang = oa->framework == BUDGET_SGLANG;
    char cell[UNITS_BUF];
    bool same = sglang ? oa->fraction == ob->fraction &&
                             strcmp(oa->fraction_source, ob->fraction_source) == 0
                       : oa->util == ob->util && strcmp(oa->util_source, ob->util_source) == 0;
    const char *flag = sglang ? "--mem-fraction-static" : "--gpu-memory-utilization";
    double va = sglang ? oa->fraction : oa->util, vb = sglang ? ob->fraction : ob->util;
    const char *sa = sglang ? oa->fraction_source : oa->util_source;
    const char *sb = sglang ? ob->fraction_source : ob->util_source;
    /* where the value came from: an option says nothing more; a command
     * line, whose (a worker's own or its launcher's) */
    char from_a[128] = "", from_b[128] = "", line[96];
    if (strcmp(sa, "option") != 0)
        snprintf(from_a, sizeof(from_a), " (%s%s)", strcmp(sa, "cmdline") == 0 ? "from " : "",
                 strcmp(sa, "cmdline") == 0 ? budget_source_text(oa, line, sizeof(line))
                                            : "the default");
    if (strcmp(sb, "option") != 0)
        snprintf(from_b, sizeof(from_b), " (%s%s)", strcmp(sb, "cmdline") == 0 ? "from " : "",
                 strcmp(sb, "cmdline") == 0 ? budget_source_text(ob, line, sizeof(line))
                                            : "the default");
    if (same)
        fprintf(out, "\nBudget (%s, %s %g%s, cell size %s)\n", sglang ? "sglang" : "vllm", flag, va,
                from_a, format_bytes(cell, sizeof(cell), (uint64_t)oa->cell_size));
    else
        fprintf(out, "\nBudget (%s, %s: A %g%s, B %g%s, cell size %s)\n",
                sglang ? "sglang" : "vllm", flag, va, from_a, vb, from_b,
                format_bytes(cell, sizeof(cell), (uint64_t)oa->cell_size));
    const struct budget_analysis *a = &d->run[DIFF_A].budget, *b = &d->run[DIFF_B].budget;
    size_t jobs = a->ngroups > b->ngroups ? a->ngroups : b->ngroups;
    if (a->ngroups != b->ngroups)
        diff_emit(out, 2, "A has %zu job%s, B %zu: jobs are compared in order", a->ngroups,
                  a->ngroups == 1 ? "" : "s", b->ngroups);
    if (jobs == 0)
        diff_emit(out, 2, "no rank of either run made a weight burst with measurements around it");
    for (size_t j = 0; j < jobs; j++) {
        const struct budget_job *x = j < a->ngroups ? &a->groups[j] : NULL;
        const struct budget_job *y = j < b->ngroups ? &b->groups[j] : NULL;
        diff_emit(out, 2, "job %zu: A %zu of %zu traced rank%s analysed, B %zu of %zu", j + 1,
                  x ? x->analysed : 0, x ? x->nranks : 0, x && x->nranks == 1 ? "" : "s",
                  y ? y->analysed : 0, y ? y->nranks : 0);
        if (!x || !y || !x->analysed || !y->analysed) {
            diff_emit(out, 2,
                      "not comparable: %s has no analysed rank in this job (see cutrace budget)",
                      !x || !x->analysed ? "A" : "B");
            continue;
        }
        if (sglang)
            print_sglang_job(d, x, y, out);
        else
            print_vllm_job(d, x, y, out);
    }
}
