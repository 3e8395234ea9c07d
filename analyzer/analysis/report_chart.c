/*
 * report_chart.c - a GPU's memory over time for the HTML report (report.h):
 * the traced categories stacked, the used memory (total - free) each
 * measurement saw, the unexplained memory (used - traced) there, every
 * milestone as a labelled vertical line with its exact values, failed calls
 * as red marks, and one hover column per sample. The program's NVTX ranges
 * (model/nvtx.c: not NCCL's own) are shaded bands behind it, each with a
 * labelled strip at the bottom that hovering names with its duration.
 *
 * The GPU's stream is walked once (gm_walk). Each of REPORT_COLUMNS time
 * columns keeps the sample with its highest traced bytes, so no peak is
 * lost however many events a run has; the timeline's rows (the
 * milestones) are added as exact samples, so the values at milestones are
 * the ones `cutrace timeline` prints.
 */
#include "analysis/report.h"

#include "cli.h"
#include "model/milestones.h"
#include "out/html.h"
#include "out/svg.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define CHART_W  960
#define CHART_H  340
#define MARGIN_L 76
#define MARGIN_R 34
#define MARGIN_T 12
#define MARGIN_B 34
#define BAND_H   12 /* an NVTX range's strip; nested ones stack upwards */

struct sample {
    int64_t t_ns;
    uint64_t pos;
    int64_t live[GM_CATEGORIES];
    bool has;
};

const char *report_size(char *buf, size_t size, int64_t bytes)
{
    return format_size(buf, size, bytes);
}

static int compare_samples(const void *a, const void *b)
{
    const struct sample *x = a, *y = b;
    if (x->t_ns != y->t_ns)
        return x->t_ns < y->t_ns ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static const struct gm_event *ref_event(const struct gm_model *m, const struct gm_ref *r)
{
    return &m->procs[r->proc].events[r->event];
}

/* The samples to draw, in time order: the columns' highest and the rows. */
static struct sample *collect(const struct gm_model *m, const struct gpu_report *g, int64_t t0,
                              int64_t t1, size_t *count)
{
    struct sample *cols = xcalloc(REPORT_COLUMNS, sizeof(*cols));
    struct gm_walk w;
    gm_walk_init(&w, m, g->gpu);
    const struct gm_ref *ref;
    double span = t1 > t0 ? (double)(t1 - t0) : 1.0;
    while ((ref = gm_walk_step(&w)) != NULL) {
        const struct gm_event *e = ref_event(m, ref);
        double f = ((double)e->t_ns - (double)t0) / span;
        size_t c = f <= 0 ? 0 : f >= 1 ? REPORT_COLUMNS - 1 : (size_t)(f * REPORT_COLUMNS);
        if (c >= REPORT_COLUMNS)
            c = REPORT_COLUMNS - 1;
        if (!cols[c].has || gm_traced(w.live) > gm_traced(cols[c].live)) {
            cols[c].has = true;
            cols[c].t_ns = e->t_ns;
            cols[c].pos = e->pos;
            memcpy(cols[c].live, w.live, sizeof(w.live));
        }
    }
    gm_walk_free(&w);
    struct sample *all = xcalloc(REPORT_COLUMNS + g->nrows + 1, sizeof(*all));
    size_t n = 0;
    for (size_t c = 0; c < REPORT_COLUMNS; c++)
        if (cols[c].has)
            all[n++] = cols[c];
    for (size_t i = 0; i < g->nrows; i++) {
        const struct row *r = &g->rows[i];
        const struct gm_event *e = timeline_row_event(m, r);
        all[n].has = true;
        all[n].t_ns = e->t_ns;
        all[n].pos = r->pos;
        memcpy(all[n].live, r->live, sizeof(r->live));
        n++;
    }
    free(cols);
    qsort(all, n, sizeof(*all), compare_samples);
    *count = n;
    return all;
}

static int64_t stacked(const int64_t live[GM_CATEGORIES], int upto)
{
    int64_t sum = 0;
    for (int c = 0; c < upto; c++)
        sum = gm_add(sum, live[c] > 0 ? live[c] : 0);
    return sum;
}

/* "0.123 s: traced 1.50 GiB (NCCL buffers 20.0 MiB, ...)" */
static char *sample_text(const struct sample *s, int64_t t0)
{
    char b[UNITS_BUF];
    char *text = xasprintf("%.3f s: traced %s", (double)(s->t_ns - t0) / 1e9,
                           report_size(b, sizeof(b), gm_traced(s->live)));
    for (int c = 0; c < GM_GPU_CATEGORIES; c++) {
        if (s->live[c] == 0)
            continue;
        char *more =
            xasprintf("%s%s %s %s", text, c ? "," : "", gm_category_key((enum gm_category)c),
                      report_size(b, sizeof(b), s->live[c]));
        free(text);
        text = more;
    }
    return text;
}

static char *row_title(const struct gm_model *m, const struct row *r, int64_t t0)
{
    const struct gm_event *e = timeline_row_event(m, r);
    const struct gm_process *p = &m->procs[r->proc];
    char *name = ms_name(r->kind, r->n, r->kind == MS_FAILED ? gm_api_name(m, e->api) : NULL);
    char who[64], b[UNITS_BUF], u[UNITS_BUF], x[UNITS_BUF];
    gm_process_name(who, sizeof(who), p);
    char *text;
    if (r->kind == MS_MEASUREMENT) {
        int64_t used = gm_sub(e->b, e->a);
        text = xasprintf(
            "%s%s%s, %s, %.3f s: traced %s, used %s, unexplained %s", name, r->tag ? " " : "",
            ms_tag_key((enum ms_tag)r->tag), who, (double)(e->t_ns - t0) / 1e9,
            report_size(b, sizeof(b), gm_traced(r->live)), report_size(u, sizeof(u), used),
            report_size(x, sizeof(x), gm_sub(used, gm_traced(r->live))));
    } else if (r->kind == MS_FAILED) {
        text = xasprintf("%s, %s, %.3f s: result %" PRId64 ", size %s", name, who,
                         (double)(e->t_ns - t0) / 1e9, e->a, report_size(b, sizeof(b), e->b));
    } else {
        text = xasprintf("%s, %s, %.3f s: traced %s", name, who, (double)(e->t_ns - t0) / 1e9,
                         report_size(b, sizeof(b), gm_traced(r->live)));
    }
    free(name);
    return text;
}

/* A short label for the line, or NULL for lines left unlabelled (plain
 * measurements: there are often dozens). */
static char *row_label(const struct gm_model *m, const struct row *r)
{
    if (r->kind == MS_MEASUREMENT && r->tag == MS_TAG_NONE)
        return NULL;
    if (r->kind == MS_MEASUREMENT)
        return xstrdup(ms_tag_key((enum ms_tag)r->tag));
    if (r->kind == MS_FAILED)
        return NULL;
    (void)m;
    return ms_name(r->kind, r->n, NULL);
}

static void axes(FILE *out, const struct svg_scale *xs, const struct svg_scale *ys, int64_t t0,
                 int64_t t1, int64_t ymax)
{
    char b[UNITS_BUF];
    for (int i = 0; i <= 4; i++) {
        double v = (double)ymax * i / 4;
        double y = svg_map(ys, v);
        svg_line(out, MARGIN_L, y, CHART_W - MARGIN_R, y, i ? "grid" : "axis", NULL);
        svg_text(out, MARGIN_L - 4, y + 4, "end", 0, report_size(b, sizeof(b), (int64_t)v));
    }
    for (int i = 0; i <= 5; i++) {
        double t = (double)t0 + (double)(t1 - t0) * i / 5;
        double x = svg_map(xs, t);
        char text[32];
        snprintf(text, sizeof(text), "%.3f s", (t - (double)t0) / 1e9);
        svg_line(out, x, CHART_H - MARGIN_B, x, CHART_H - MARGIN_B + 4, "axis", NULL);
        svg_text(out, x, CHART_H - MARGIN_B + 16, "middle", 0, text);
    }
}

/* One NVTX range on the GPU: its begin and end events (the end, or the
 * GPU's last event for a range never ended), nested `depth` ranges deep. */
struct band {
    int64_t t0, t1;
    uint32_t proc, text;
    int64_t level;
    bool open;
    int depth;
};

/* The GPU's NVTX ranges, in begin order: an end closes the latest open
 * begin of its process with its message and level (model/nvtx.c paired
 * them already; the events carry the message and the push level). */
static struct band *collect_bands(const struct gm_model *m, const struct gm_gpu *gpu, int64_t t_end,
                                  size_t *count)
{
    struct band *b = NULL;
    size_t n = 0, cap = 0, open = 0;
    for (size_t i = 0; i < gpu->nstream; i++) {
        const struct gm_event *e = ref_event(m, &gpu->stream[i]);
        uint32_t proc = gpu->stream[i].proc;
        if (e->type == GM_EV_NVTX_BEGIN) {
            b = xgrow(b, &cap, n + 1, sizeof(*b));
            b[n++] = (struct band){e->t_ns,
                                   t_end,
                                   proc,
                                   (uint32_t)e->a,
                                   e->b,
                                   true,
                                   (int)(open < REPORT_BAND_MAX ? open : REPORT_BAND_MAX - 1)};
            open++;
        } else if (e->type == GM_EV_NVTX_END) {
            for (size_t k = n; k > 0; k--) {
                struct band *r = &b[k - 1];
                if (!r->open || r->proc != proc || r->text != (uint32_t)e->a || r->level != e->b)
                    continue;
                r->open = false;
                r->t1 = e->t_ns;
                assert(open > 0);
                open--;
                break;
            }
        }
    }
    *count = n;
    return b;
}

const char *report_duration(char *buf, size_t size, int64_t ns)
{
    if (ns >= 1000000000)
        snprintf(buf, size, "%.3f s", (double)ns / 1e9);
    else if (ns >= 1000000)
        snprintf(buf, size, "%.3f ms", (double)ns / 1e6);
    else
        snprintf(buf, size, "%.1f us", (double)ns / 1e3);
    return buf;
}

/* "NVTX load_weights: 1.234 s (0.100 s to 1.334 s), pid 7 (rank 0)" */
static char *band_title(const struct gm_model *m, const struct band *b, int64_t t0)
{
    char d[32], who[64];
    gm_process_name(who, sizeof(who), &m->procs[b->proc]);
    return xasprintf("NVTX %s: %s (%.6f s to %.6f s%s), %s", gm_text(m, b->text),
                     report_duration(d, sizeof(d), b->t1 - b->t0), (double)(b->t0 - t0) / 1e9,
                     (double)(b->t1 - t0) / 1e9, b->open ? ", never ended" : "", who);
}

void report_nvtx_band(FILE *out, double x0, double x1, double top, double bottom, const char *title)
{
    svg_rect(out, x0, top, x1 - x0 < 1 ? 1 : x1 - x0, bottom - top, "nvtx", title, NULL);
}

void report_nvtx_strip(FILE *out, double x0, double x1, double bottom, int depth, const char *title,
                       const char *label)
{
    assert(depth >= 0 && depth < REPORT_BAND_MAX);
    double w = x1 - x0 < 2 ? 2 : x1 - x0;
    double y = bottom - BAND_H * (depth + 1);
    svg_rect(out, x0, y, w, BAND_H - 1, "nvtxbar", title, title);
    size_t fits = (size_t)(w / 6.5); /* characters of 11px text */
    if (fits < 3)
        return;
    char text[72];
    snprintf(text, sizeof(text), "%s", label);
    if (strlen(text) > fits)
        text[fits] = '\0';
    /* not svg_text: the label lets the pointer through to its strip */
    fprintf(out, "<text class=\"nvtxlabel\" x=\"%.1f\" y=\"%.1f\">", x0 + 2, y + BAND_H - 3);
    html_text(out, text);
    fputs("</text>\n", out);
}

/* Behind everything: the shaded band of each range. */
static void draw_bands(FILE *out, const struct gm_model *m, const struct band *b, size_t n,
                       const struct svg_scale *xs, int64_t t0)
{
    for (size_t i = 0; i < n; i++) {
        char *title = band_title(m, &b[i], t0);
        report_nvtx_band(out, svg_map(xs, (double)b[i].t0), svg_map(xs, (double)b[i].t1), MARGIN_T,
                         CHART_H - MARGIN_B, title);
        free(title);
    }
}

/* On top of the hover columns: each range's strip. */
static void draw_band_strips(FILE *out, const struct gm_model *m, const struct band *b, size_t n,
                             const struct svg_scale *xs, int64_t t0)
{
    for (size_t i = 0; i < n; i++) {
        char *title = band_title(m, &b[i], t0);
        report_nvtx_strip(out, svg_map(xs, (double)b[i].t0), svg_map(xs, (double)b[i].t1),
                          CHART_H - MARGIN_B, b[i].depth, title, gm_text(m, b[i].text));
        free(title);
    }
}

void report_memory_chart(FILE *out, const struct gm_model *m, const struct gpu_report *g,
                         const char *id)
{
    const struct gm_gpu *gpu = &m->gpus[g->gpu];
    if (gpu->nstream == 0) {
        html_elem(out, "p", "note", "no events on this GPU");
        return;
    }
    int64_t t0 = ref_event(m, &gpu->stream[0])->t_ns;
    int64_t t1 = ref_event(m, &gpu->stream[gpu->nstream - 1])->t_ns;
    if (t1 <= t0)
        t1 = t0 + 1;
    size_t n;
    struct sample *s = collect(m, g, t0, t1, &n);
    assert(n > 0);
    int64_t ymax = 0;
    for (size_t i = 0; i < n; i++)
        if (stacked(s[i].live, GM_GPU_CATEGORIES) > ymax)
            ymax = stacked(s[i].live, GM_GPU_CATEGORIES);
    for (size_t i = 0; i < g->nrows; i++) {
        const struct gm_event *e = timeline_row_event(m, &g->rows[i]);
        if (g->rows[i].kind == MS_MEASUREMENT && gm_sub(e->b, e->a) > ymax)
            ymax = gm_sub(e->b, e->a);
    }
    ymax = ymax > 0 ? ymax + ymax / 20 : 1;
    struct svg_scale xs = {(double)t0, (double)t1, MARGIN_L, CHART_W - MARGIN_R};
    struct svg_scale ys = {0, (double)ymax, CHART_H - MARGIN_B, MARGIN_T};

    char label[256];
    snprintf(label, sizeof(label), "memory over time on GPU %" PRIu32, g->gpu);
    svg_begin(out, id, "chart", CHART_W, CHART_H, label);
    axes(out, &xs, &ys, t0, t1, ymax);
    size_t nbands;
    struct band *bands = collect_bands(m, gpu, t1, &nbands);
    size_t bands_drawn = nbands < REPORT_BAND_CAP ? nbands : REPORT_BAND_CAP;
    draw_bands(out, m, bands, bands_drawn, &xs, t0);
    /* the categories, bottom up: each band between its sum and the one below */
    for (int c = 0; c < GM_GPU_CATEGORIES; c++) {
        bool any = false;
        for (size_t i = 0; i < n && !any; i++)
            any = s[i].live[c] > 0;
        if (!any)
            continue;
        char cls[8];
        snprintf(cls, sizeof(cls), "c%d", c);
        struct svg_path p;
        svg_path_begin(&p, out, cls);
        /* steps: memory stays as it is until the next sample changes it */
        for (size_t i = 0; i < n; i++) {
            double x = svg_map(&xs, (double)s[i].t_ns);
            if (i > 0)
                svg_path_point(&p, x, svg_map(&ys, (double)stacked(s[i - 1].live, c + 1)));
            svg_path_point(&p, x, svg_map(&ys, (double)stacked(s[i].live, c + 1)));
        }
        for (size_t i = n; i-- > 0;) {
            double x = svg_map(&xs, (double)s[i].t_ns);
            svg_path_point(&p, x, svg_map(&ys, (double)stacked(s[i].live, c)));
            if (i > 0)
                svg_path_point(&p, x, svg_map(&ys, (double)stacked(s[i - 1].live, c)));
        }
        svg_path_close(&p);
        svg_path_end(&p, gm_category_label((enum gm_category)c));
    }
    /* used and unexplained, at the measurements */
    size_t measured = 0;
    for (size_t i = 0; i < g->nrows; i++)
        measured += g->rows[i].kind == MS_MEASUREMENT;
    if (measured > 0) {
        for (int which = 0; which < 2; which++) {
            struct svg_path p;
            svg_path_begin(&p, out, which ? "unexpl" : "used");
            double last_y = 0;
            for (size_t i = 0; i < g->nrows; i++) {
                const struct row *r = &g->rows[i];
                if (r->kind != MS_MEASUREMENT)
                    continue;
                const struct gm_event *e = timeline_row_event(m, r);
                int64_t used = gm_sub(e->b, e->a);
                int64_t v = which ? gm_sub(used, gm_traced(r->live)) : used;
                double x = svg_map(&xs, (double)e->t_ns);
                double y = svg_map(&ys, (double)(v > 0 ? v : 0));
                /* what a measurement saw holds until the next one says otherwise */
                if (p.points > 0)
                    svg_path_point(&p, x, last_y);
                svg_path_point(&p, x, y);
                last_y = y;
            }
            svg_path_end(&p, which ? "unexplained: used - traced, at each measurement"
                                   : "used: total - free, at each measurement");
        }
    }
    /* milestones and failures, with their exact values */
    size_t drawn = 0, failed_hidden = 0;
    double last_label = -1e9; /* labels closer than a line of text would overprint */
    for (size_t i = 0; i < g->nrows; i++) {
        const struct row *r = &g->rows[i];
        if (drawn >= REPORT_MAX_MILESTONES) {
            failed_hidden++;
            continue;
        }
        drawn++;
        const struct gm_event *e = timeline_row_event(m, r);
        double x = svg_map(&xs, (double)e->t_ns);
        char *title = row_title(m, r, t0);
        if (r->kind == MS_FAILED) {
            svg_rect(out, x - 3, MARGIN_T, 6, 8, "fail", title, title);
        } else {
            svg_line(out, x, MARGIN_T, x, CHART_H - MARGIN_B, "ms", title);
            char *text = row_label(m, r);
            if (text && x - last_label >= 12) {
                svg_text(out, x + 3, MARGIN_T + 4, "start", 90, text);
                last_label = x;
            }
            free(text);
        }
        free(title);
    }
    /* hover columns: one per sample, as wide as the gap to the next */
    for (size_t i = 0; i < n; i++) {
        double x = svg_map(&xs, (double)s[i].t_ns);
        double next = i + 1 < n ? svg_map(&xs, (double)s[i + 1].t_ns) : CHART_W - MARGIN_R;
        if (i + 1 < n && s[i + 1].t_ns == s[i].t_ns)
            continue; /* the later sample of the same instant says the state after it */
        char *text = sample_text(&s[i], t0);
        svg_rect(out, x, MARGIN_T, next - x < 1 ? 1 : next - x, CHART_H - MARGIN_T - MARGIN_B,
                 "hover", text, text);
        free(text);
    }
    draw_band_strips(out, m, bands, bands_drawn, &xs, t0);
    svg_end(out);
    fprintf(out, "<div class=\"readout\" id=\"");
    html_text(out, id);
    fputs("-readout\"></div>\n<div class=\"legend\">", out);
    for (int c = 0; c < GM_GPU_CATEGORIES; c++) {
        fprintf(out, "<span><i class=\"k%d\"></i>", c);
        html_text(out, gm_category_label((enum gm_category)c));
        fputs("</span>", out);
    }
    fputs("<span>black line: used (total - free) at each cudaMemGetInfo</span>"
          "<span>red dashes: unexplained (used - traced)</span>"
          "<span>red marks: failed calls</span>",
          out);
    if (nbands)
        fputs("<span><i class=\"kn\"></i>NVTX ranges (hover a strip for its name and "
              "duration)</span>",
              out);
    fputs("</div>\n", out);
    if (failed_hidden)
        html_textf(out, "%zu more milestones are in `cutrace timeline`, not drawn here.",
                   failed_hidden);
    if (nbands > bands_drawn)
        html_textf(out, "%zu more NVTX ranges are in `cutrace timeline`, not drawn here.",
                   nbands - bands_drawn);
    free(bands);
    free(s);
}
