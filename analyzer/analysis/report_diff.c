/*
 * report_diff.c - `cutrace diff A B --html FILE` (report.h): per GPU pair,
 * both runs' traced bytes on one axis of aligned milestones (the steps of
 * analysis/diff_analysis.h: a milestone of A, of B or of both, in the
 * order the alignment found), so the phases line up whatever their
 * durations; the steps that diverge past --threshold shaded; the program's
 * NVTX ranges as bands from the step where one begins to the step where it
 * ends (the steps are aligned by the ranges' names); then the
 * milestones table of each pair and the allocation groups that differ;
 * with --framework, the two runs' budgets side by side (report_budget's
 * waterfalls, their numbers keyed "A.jobs..." and "B.jobs...").
 */
#include "analysis/report.h"

#include "cli.h"
#include "out/html.h"
#include "out/svg.h"
#include "out/units.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define CHART_W        960
#define CHART_H        320
#define PAD_L          76
#define PAD_R          16
#define PAD_T          12
#define PAD_B          24
#define DIFF_LABELS    40 /* steps labelled per chart; past it every n-th */
#define DIFF_MAX_PAIRS 16 /* charts drawn; the tables list every pair */
/* Rows of the tables: a 10^6-event run has 10^5 allocation groups that
 * differ; the rest are in `cutrace diff --csv=allocations` and --json. */
#define DIFF_MAX_ALLOC_ROWS 200
#define DIFF_MAX_STEP_ROWS  500

static int64_t step_traced(const struct diff *d, const struct diff_pair *p,
                           const struct diff_step *s, int side, bool *has)
{
    const struct diff_milestone *ms = diff_step_ms(d, p, s, side);
    *has = ms != NULL;
    return ms ? diff_ms_traced(ms) : 0;
}

/* An NVTX range on a pair's chart: the steps where it begins and ends. */
struct step_band {
    size_t begin, end;
    uint32_t sub; /* its message (diff_string) */
    bool open;
    int depth;
};

/* The pair's ranges in begin order: an end closes the latest open begin
 * of its message, as NVTX pairs a pop with its push. */
static struct step_band *step_bands(const struct diff *d, const struct diff_pair *p, size_t *count)
{
    struct step_band *b = NULL;
    size_t n = 0, cap = 0, open = 0;
    for (size_t i = 0; i < p->nsteps; i++) {
        const struct diff_row *row = &d->rows[p->steps[i].row];
        if (row->kind == MS_NVTX_BEGIN) {
            b = xgrow(b, &cap, n + 1, sizeof(*b));
            b[n++] = (struct step_band){i, p->nsteps - 1, row->sub, true,
                                        (int)(open < REPORT_BAND_MAX ? open : REPORT_BAND_MAX - 1)};
            open++;
        } else if (row->kind == MS_NVTX_END) {
            for (size_t k = n; k > 0; k--)
                if (b[k - 1].open && b[k - 1].sub == row->sub) {
                    b[k - 1].open = false;
                    b[k - 1].end = i;
                    open--;
                    break;
                }
        }
    }
    *count = n;
    return b;
}

/* A pair's times on each side, in s from its first milestone there: what
 * the bands' titles say. */
struct pair_clock {
    int64_t t0[2];  /* the first milestone's time, per side */
    double last[2]; /* the last milestone's, from t0 */
    bool any[2];    /* the side has a milestone on the pair */
};

/* The time of step's milestone on side, from t0; false when the side has
 * no milestone at that step. */
static bool step_time(const struct diff *d, const struct diff_pair *p, const struct pair_clock *c,
                      size_t step, int side, double *seconds)
{
    const struct diff_milestone *at = diff_step_ms(d, p, &p->steps[step], side);
    if (!at)
        return false;
    const struct gm_model *m = &d->run[side].m;
    *seconds = (double)(m->procs[at->proc].events[at->event].t_ns - c->t0[side]) / 1e9;
    return true;
}

static struct pair_clock pair_clock_of(const struct diff *d, const struct diff_pair *p)
{
    struct pair_clock c = {{0, 0}, {0, 0}, {false, false}};
    for (int side = 0; side < 2; side++) {
        const struct gm_model *m = &d->run[side].m;
        for (size_t i = 0; i < p->nsteps && !c.any[side]; i++) {
            const struct diff_milestone *ms = diff_step_ms(d, p, &p->steps[i], side);
            if (ms) {
                c.t0[side] = m->procs[ms->proc].events[ms->event].t_ns;
                c.any[side] = true;
            }
        }
        for (size_t i = p->nsteps; c.any[side] && i > 0; i--)
            if (step_time(d, p, &c, i - 1, side, &c.last[side]))
                break;
    }
    return c;
}

/* "NVTX load_weights: 1.234 s (0.100000 s to 1.334000 s) in A; 1.300 s
 * (...) in B", as the report titles a range, once per side; a side whose
 * range never ended runs to its last milestone; a side without it last. */
static char *step_band_title(const struct diff *d, const struct diff_pair *p,
                             const struct pair_clock *c, const struct step_band *b)
{
    static const char *const names[2] = {"A", "B"};
    char *parts[2];
    bool begins[2];
    for (int side = 0; side < 2; side++) {
        double t0, t1 = 0;
        begins[side] = step_time(d, p, c, b->begin, side, &t0);
        if (!begins[side]) {
            parts[side] = xasprintf("not in %s", names[side]);
            continue;
        }
        bool ended = !b->open && step_time(d, p, c, b->end, side, &t1);
        if (!ended)
            t1 = c->last[side];
        char dur[32];
        parts[side] = xasprintf("%s (%.6f s to %.6f s%s) in %s",
                                report_duration(dur, sizeof(dur), (int64_t)((t1 - t0) * 1e9)), t0,
                                t1, ended ? "" : ", never ended", names[side]);
    }
    int first = begins[DIFF_A] || !begins[DIFF_B] ? DIFF_A : DIFF_B;
    char *title =
        xasprintf("NVTX %s: %s; %s", diff_string(d, b->sub), parts[first], parts[1 - first]);
    free(parts[0]);
    free(parts[1]);
    return title;
}

static void pair_chart(FILE *out, const struct diff *d, size_t pi)
{
    const struct diff_pair *p = &d->pairs[pi];
    if (p->nsteps == 0) {
        html_elem(out, "p", "note", "no milestones on this pair");
        return;
    }
    int64_t ymax = 1;
    for (size_t i = 0; i < p->nsteps; i++)
        for (int side = 0; side < 2; side++) {
            bool has;
            int64_t v = step_traced(d, p, &p->steps[i], side, &has);
            ymax = has && v > ymax ? v : ymax;
        }
    ymax += ymax / 20;
    struct svg_scale xs = {0, p->nsteps > 1 ? (double)(p->nsteps - 1) : 1, PAD_L + 8,
                           CHART_W - PAD_R - 8};
    struct svg_scale ys = {0, (double)ymax, CHART_H - PAD_B, PAD_T};
    char id[32], b[UNITS_BUF];
    snprintf(id, sizeof(id), "diff-%zu", pi);
    svg_begin(out, id, "chart", CHART_W, CHART_H, "traced memory of both runs by milestone");
    size_t nbands;
    struct step_band *bands = step_bands(d, p, &nbands);
    size_t drawn = nbands < REPORT_BAND_CAP ? nbands : REPORT_BAND_CAP;
    char **titles = xcalloc(drawn ? drawn : 1, sizeof(*titles));
    struct pair_clock clock = pair_clock_of(d, p);
    for (size_t i = 0; i < drawn; i++) {
        titles[i] = step_band_title(d, p, &clock, &bands[i]);
        report_nvtx_band(out, svg_map(&xs, (double)bands[i].begin),
                         svg_map(&xs, (double)bands[i].end), PAD_T, CHART_H - PAD_B, titles[i]);
    }
    for (int i = 0; i <= 4; i++) {
        double v = (double)ymax * i / 4;
        svg_line(out, PAD_L, svg_map(&ys, v), CHART_W - PAD_R, svg_map(&ys, v), i ? "grid" : "axis",
                 NULL);
        svg_text(out, PAD_L - 4, svg_map(&ys, v) + 4, "end", 0,
                 report_size(b, sizeof(b), (int64_t)v));
    }
    size_t every = p->nsteps > DIFF_LABELS ? (p->nsteps + DIFF_LABELS - 1) / DIFF_LABELS : 1;
    double slot = p->nsteps > 1 ? (xs.r1 - xs.r0) / (double)(p->nsteps - 1) : 10;
    for (size_t i = 0; i < p->nsteps; i++) {
        const struct diff_step *s = &p->steps[i];
        double x = svg_map(&xs, (double)i);
        const char *label = d->rows[s->row].label;
        bool has_a, has_b;
        int64_t a = step_traced(d, p, s, DIFF_A, &has_a), bb = step_traced(d, p, s, DIFF_B, &has_b);
        char ta[UNITS_BUF], tb[UNITS_BUF], dt[DIFF_SIZE_BUF];
        char *title = xasprintf("%s: A %s, B %s, B - A %s", label,
                                has_a ? report_size(ta, sizeof(ta), a) : "-",
                                has_b ? report_size(tb, sizeof(tb), bb) : "-",
                                has_a && has_b ? diff_signed_size(dt, sizeof(dt), bb - a) : "-");
        bool diverged = has_a && has_b && diff_step_diverges(d, p, s);
        svg_rect(out, x - slot / 2, PAD_T, slot, CHART_H - PAD_T - PAD_B,
                 diverged ? "hover diverged" : "hover", title, title);
        svg_line(out, x, PAD_T, x, CHART_H - PAD_B, "ms", NULL);
        if (i % every == 0)
            svg_text(out, x + 3, PAD_T + 4, "start", 90, label);
        free(title);
    }
    for (int side = 0; side < 2; side++) {
        struct svg_path path;
        bool any = false;
        for (size_t i = 0; i < p->nsteps; i++) {
            bool has;
            int64_t v = step_traced(d, p, &p->steps[i], side, &has);
            if (!has)
                continue;
            if (!any)
                svg_path_begin(&path, out, side == DIFF_A ? "la" : "lb");
            any = true;
            svg_path_point(&path, svg_map(&xs, (double)i), svg_map(&ys, (double)v));
        }
        if (any)
            svg_path_end(&path, side == DIFF_A ? "A: traced GPU bytes" : "B: traced GPU bytes");
    }
    for (size_t i = 0; i < drawn; i++) {
        report_nvtx_strip(out, svg_map(&xs, (double)bands[i].begin),
                          svg_map(&xs, (double)bands[i].end), CHART_H - PAD_B, bands[i].depth,
                          titles[i], diff_string(d, bands[i].sub));
        free(titles[i]);
    }
    free(titles);
    svg_end(out);
    fprintf(out, "<div class=\"readout\" id=\"%s-readout\"></div>\n", id);
    if (nbands)
        fputs("<div class=\"legend\"><span><i class=\"kn\"></i>NVTX ranges, from the step "
              "where one begins to the step where it ends (hover a strip for its durations "
              "in A and B)</span></div>\n",
              out);
    if (nbands > drawn)
        html_textf(out, "%zu more NVTX ranges are in `cutrace diff`'s milestones, not drawn here.",
                   nbands - drawn);
    free(bands);
}

static void size_cell(FILE *out, bool has, int64_t v)
{
    char b[UNITS_BUF];
    fputs("<td class=\"n\">", out);
    html_text(out, has ? report_size(b, sizeof(b), v) : "-");
    fputs("</td>", out);
}

static void pair_table(FILE *out, const struct diff *d, size_t pi)
{
    const struct diff_pair *p = &d->pairs[pi];
    fputs("<table class=\"milestones\"><tr><th>milestone</th><th class=\"n\">A traced</th>"
          "<th class=\"n\">B traced</th><th class=\"n\">B - A</th><th class=\"n\">A free</th>"
          "<th class=\"n\">B free</th></tr>\n",
          out);
    size_t rows = p->nsteps < DIFF_MAX_STEP_ROWS ? p->nsteps : DIFF_MAX_STEP_ROWS;
    for (size_t i = 0; i < rows; i++) {
        const struct diff_step *s = &p->steps[i];
        const struct diff_milestone *a = diff_step_ms(d, p, s, DIFF_A);
        const struct diff_milestone *b = diff_step_ms(d, p, s, DIFF_B);
        bool diverged = a && b && diff_step_diverges(d, p, s);
        fprintf(out, "<tr%s><td>", diverged ? " class=\"diverged\"" : "");
        html_text(out, d->rows[s->row].label);
        fputs("</td>", out);
        size_cell(out, a != NULL, a ? diff_ms_traced(a) : 0);
        size_cell(out, b != NULL, b ? diff_ms_traced(b) : 0);
        char dt[DIFF_SIZE_BUF];
        fputs("<td class=\"n\">", out);
        html_text(out, a && b
                           ? diff_signed_size(dt, sizeof(dt), diff_ms_traced(b) - diff_ms_traced(a))
                       : a ? "A only"
                           : "B only");
        fputs("</td>", out);
        size_cell(out, a && a->measured, a ? a->free_bytes : 0);
        size_cell(out, b && b->measured, b ? b->free_bytes : 0);
        fputs("</tr>\n", out);
    }
    fputs("</table>\n", out);
    if (rows < p->nsteps)
        html_textf(out, "%zu more milestones: cutrace diff --csv=milestones lists them all.",
                   p->nsteps - rows);
}

static void allocations(FILE *out, const struct diff *d)
{
    if (d->nallocs == 0) {
        html_elem(out, "p", "note", "no allocation group differs");
        return;
    }
    fputs("<table class=\"allocations\"><tr><th>phase from</th><th>api</th><th>module</th>"
          "<th class=\"n\">size</th><th>category</th><th class=\"n\">count A</th>"
          "<th class=\"n\">count B</th><th class=\"n\">bytes B - A</th></tr>\n",
          out);
    size_t rows = d->nallocs < DIFF_MAX_ALLOC_ROWS ? d->nallocs : DIFF_MAX_ALLOC_ROWS;
    for (size_t i = 0; i < rows; i++) {
        const struct diff_alloc_row *r = &d->allocs[i];
        char b[DIFF_SIZE_BUF], dt[DIFF_SIZE_BUF];
        fputs("<tr><td>", out);
        html_text(out, r->phase >= 0 && (size_t)r->phase < d->nrows ? d->rows[r->phase].label
                                                                    : "(start)");
        fputs("</td><td>", out);
        html_text(out, diff_string(d, r->api));
        fputs("</td><td>", out);
        html_text(out, diff_string(d, r->module));
        fputs("</td><td class=\"n\">", out);
        html_text(out, diff_exact_size(b, sizeof(b), r->size));
        fputs("</td><td>", out);
        html_text(out, gm_category_key((enum gm_category)r->category));
        fprintf(out, "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">%" PRId64 "</td>",
                r->count[DIFF_A], r->count[DIFF_B]);
        fputs("<td class=\"n\">", out);
        html_text(out,
                  diff_signed_size(dt, sizeof(dt), gm_sub(r->bytes[DIFF_B], r->bytes[DIFF_A])));
        fputs("</td></tr>\n", out);
    }
    fputs("</table>\n", out);
    if (rows < d->nallocs)
        html_textf(out,
                   "%zu more groups, each of less impact: cutrace diff --csv=allocations "
                   "lists them all.",
                   d->nallocs - rows);
}

void report_diff(FILE *out, const struct diff *d)
{
    fputs("<p>A (baseline): <span class=\"mono\">", out);
    html_text(out, d->run[DIFF_A].path);
    fputs("</span>, B (other): <span class=\"mono\">", out);
    html_text(out, d->run[DIFF_B].path);
    fputs("</span>. Deltas are B - A.</p>\n<div class=\"legend\"><span>blue: A</span>"
          "<span>red: B</span><span>shaded: diverges past the threshold</span></div>\n",
          out);
    if (d->npairs == 0)
        html_elem(out, "p", "note", "no GPU pair to compare");
    for (size_t i = 0; i < d->npairs; i++) {
        char *name = diff_pair_name(d, (uint32_t)i);
        fputs("<h3>", out);
        html_text(out, name);
        fputs("</h3>\n", out);
        free(name);
        if (i < DIFF_MAX_PAIRS)
            pair_chart(out, d, i);
        fputs("<details><summary>milestones</summary>\n", out);
        pair_table(out, d, i);
        fputs("</details>\n", out);
    }
    fputs("<h2>Allocation groups that differ</h2>\n", out);
    allocations(out, d);
    if (d->o->budget) {
        fputs("<h2>The budgets, side by side</h2>\n<div class=\"sides\">\n", out);
        static const char *const names[2] = {"A", "B"};
        for (int side = 0; side < 2; side++) {
            fputs("<div class=\"side\"><h3>", out);
            html_textf(out, "%s (%s): %s", names[side], side == DIFF_A ? "baseline" : "other",
                       d->run[side].path);
            fputs("</h3>\n", out);
            report_budget(out, &d->run[side].budget, NULL, names[side]);
            fputs("</div>\n", out);
        }
        fputs("</div>\n", out);
    }
    for (size_t i = 0; i < d->nnotes; i++)
        html_elem(out, "p", "note", d->notes[i]);
}
