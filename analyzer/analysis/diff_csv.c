/*
 * diff_csv.c - `cutrace diff --csv`: the diff's two tables as CSV
 * (out/csv.h: one header row, raw integers, empty fields for null):
 * milestones (each pair's aligned steps, both sides' traced, free and
 * unexplained bytes) and allocations (the groups that differ, in the
 * report's order).
 */
#include "analysis/diff_report.h"
#include "cli.h"
#include "out/csv.h"

#include <stdlib.h>

static void csv_side(struct csv_writer *w, const struct diff_milestone *ms)
{
    if (!ms) {
        for (int c = 0; c < 3; c++)
            csv_null(w);
        return;
    }
    csv_int(w, diff_ms_traced(ms));
    if (ms->measured) {
        csv_int(w, ms->free_bytes);
        csv_int(w, gm_sub(gm_sub(ms->total_bytes, ms->free_bytes), diff_ms_traced(ms)));
    } else {
        csv_null(w);
        csv_null(w);
    }
}

/* One row per step of each pair's alignment: traced, free and unexplained
 * bytes on both sides. */
void diff_print_csv_milestones(const struct diff *d, FILE *out)
{
    static const char *const head[] = {"pair",
                                       "row",
                                       "milestone",
                                       "kind",
                                       "baseline_traced_bytes",
                                       "baseline_free_bytes",
                                       "baseline_unexplained_bytes",
                                       "other_traced_bytes",
                                       "other_free_bytes",
                                       "other_unexplained_bytes",
                                       "delta_traced_bytes",
                                       "diverges"};
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    for (uint32_t p = 0; p < d->npairs; p++) {
        const struct diff_pair *pr = &d->pairs[p];
        char *name = diff_pair_name(d, p);
        for (size_t k = 0; k < pr->nsteps; k++) {
            const struct diff_step *st = &pr->steps[k];
            const struct diff_milestone *a = diff_step_ms(d, pr, st, DIFF_A);
            const struct diff_milestone *b = diff_step_ms(d, pr, st, DIFF_B);
            csv_string(&w, name);
            csv_uint(&w, st->row);
            csv_string(&w, d->rows[st->row].label);
            csv_string(&w, ms_key((enum ms_kind)d->rows[st->row].kind));
            csv_side(&w, a);
            csv_side(&w, b);
            if (a && b)
                csv_int(&w, gm_sub(diff_ms_traced(b), diff_ms_traced(a)));
            else
                csv_null(&w);
            csv_int(&w, diff_step_diverges(d, pr, st));
            csv_end_row(&w);
        }
        free(name);
    }
}

/* One row per allocation group that differs, in the report's order. */
void diff_print_csv_allocations(const struct diff *d, FILE *out)
{
    static const char *const head[] = {"phase",          "api",         "module",
                                       "site",           "size",        "category",
                                       "baseline_count", "other_count", "delta_count",
                                       "baseline_bytes", "other_bytes", "delta_bytes",
                                       "pairs_changed"};
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    for (size_t i = 0; i < d->nallocs; i++) {
        const struct diff_alloc_row *row = &d->allocs[i];
        csv_string(&w, row->phase >= 0 ? d->rows[row->phase].label : NULL);
        csv_string(&w, diff_string(d, row->api));
        csv_string(&w, diff_string(d, row->module));
        csv_string(&w, d->sites_compared ? diff_string(d, row->site) : NULL);
        csv_int(&w, row->size);
        csv_string(&w, gm_category_key((enum gm_category)row->category));
        csv_int(&w, row->count[DIFF_A]);
        csv_int(&w, row->count[DIFF_B]);
        csv_int(&w, row->count[DIFF_B] - row->count[DIFF_A]);
        csv_int(&w, row->bytes[DIFF_A]);
        csv_int(&w, row->bytes[DIFF_B]);
        csv_int(&w, gm_sub(row->bytes[DIFF_B], row->bytes[DIFF_A]));
        csv_uint(&w, row->changed);
        csv_end_row(&w);
    }
}
