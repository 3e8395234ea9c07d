/*
 * report_budget.c - the budget section of the HTML report (report.h): per
 * job the server's verdict and arithmetic, and per rank a waterfall from
 * the GPU's total to what is left for the KV cache, with each part's cost.
 *
 * SGLang (docs/budget.md): total -> free at pre -> weights and the rest of
 * what was made between pre and post -> free at post -> the reserve
 * pre * (1 - F) -> rest. vLLM: total -> requested (total * U) -> weights,
 * non-torch increase, peak activation, CUDA graphs -> available. Every
 * number is the analysis's own (budget_analysis.h), the one `cutrace budget
 * --json` prints, and carries its JSON path as data-key.
 */
#include "analysis/report.h"

#include "cli.h"
#include "out/html.h"
#include "out/svg.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define FALL_W    720
#define FALL_H    260
#define FALL_L    76
#define FALL_T    14
#define FALL_B    70
#define MAX_STEPS 12

enum step_kind { STEP_LEVEL, STEP_DOWN };
enum unit { UNIT_BYTES, UNIT_GIB };

struct step {
    enum step_kind kind;
    const char *label;
    double bytes;    /* a level's value, a down step's size (negative: gives back) */
    const char *key; /* the rank's JSON field, NULL when the JSON has none */
    enum unit unit;
};

/* A number as the page shows it, with its JSON path and exact value. */
static void number_cell(FILE *out, const char *key, enum unit unit, double value, bool integer)
{
    fputs("<td class=\"n\"", out);
    if (key) {
        fputs(" data-key=\"", out);
        html_text(out, key);
        if (integer)
            fprintf(out, "\" data-value=\"%" PRId64 "\"", (int64_t)value);
        else
            fprintf(out, "\" data-value=\"%.17g\"", value);
        fprintf(out, " data-unit=\"%s\"", unit == UNIT_GIB ? "GiB" : "bytes");
    }
    fputc('>', out);
    double gib = unit == UNIT_GIB ? value : value / BUDGET_GIB;
    fprintf(out, "%.6f GiB</td>", gib);
}

static void count_cell(FILE *out, const char *key, int64_t value)
{
    fputs("<td class=\"n\" data-key=\"", out);
    html_text(out, key);
    fprintf(out, "\" data-value=\"%" PRId64 "\" data-unit=\"count\">%" PRId64 "</td>", value,
            value);
}

static size_t sglang_steps(const struct budget_analysis *r, const struct budget_rank *rk,
                           struct step *st)
{
    double f = r->o->fraction;
    size_t n = 0;
    double pre = (double)rk->pre_free, post = (double)rk->post_free;
    st[n++] =
        (struct step){STEP_LEVEL, "total", (double)rk->pre_total, "pre.total_bytes", UNIT_BYTES};
    st[n++] =
        (struct step){STEP_DOWN, "used at pre", (double)rk->pre_total - pre, NULL, UNIT_BYTES};
    st[n++] = (struct step){STEP_LEVEL, "free at pre", pre, "pre.free_bytes", UNIT_BYTES};
    st[n++] = (struct step){STEP_DOWN, "weights", (double)rk->weights_live,
                            "weights_live_at_post_bytes", UNIT_BYTES};
    st[n++] = (struct step){STEP_DOWN, "other, pre to post", pre - post - (double)rk->weights_live,
                            NULL, UNIT_BYTES};
    st[n++] = (struct step){STEP_LEVEL, "free at post", post, "post.free_bytes", UNIT_BYTES};
    st[n++] = (struct step){STEP_DOWN, "reserved: pre x (1 - F)", pre * (1 - f), NULL, UNIT_BYTES};
    if (r->o->mm_reserve_gib > 0)
        st[n++] = (struct step){STEP_DOWN, "multimodal reserve", r->o->mm_reserve_gib * BUDGET_GIB,
                                NULL, UNIT_BYTES};
    st[n++] = (struct step){STEP_LEVEL, "rest", rk->rest_own, "rest_gib_own", UNIT_GIB};
    assert(n <= MAX_STEPS);
    return n;
}

static size_t vllm_steps(const struct budget_rank *rk, struct step *st)
{
    size_t n = 0;
    st[n++] =
        (struct step){STEP_LEVEL, "total", (double)rk->pre_total, "pre.total_bytes", UNIT_BYTES};
    st[n++] = (struct step){STEP_DOWN, "not requested: total x (1 - U)",
                            (double)rk->pre_total - (double)rk->requested, NULL, UNIT_BYTES};
    st[n++] = (struct step){STEP_LEVEL, "requested", (double)rk->requested, "requested_bytes",
                            UNIT_BYTES};
    st[n++] = (struct step){STEP_DOWN, "weights", (double)rk->weights, "weights_bytes", UNIT_BYTES};
    st[n++] = (struct step){STEP_DOWN, "non-torch increase", (double)rk->non_torch_increase,
                            "non_torch_increase_bytes", UNIT_BYTES};
    st[n++] = (struct step){STEP_DOWN, "peak activation", (double)rk->peak_activation,
                            "peak_activation_bytes", UNIT_BYTES};
    st[n++] = (struct step){STEP_DOWN, "CUDA graphs", (double)rk->graph_applied,
                            "cuda_graph_estimate_bytes", UNIT_BYTES};
    st[n++] = (struct step){STEP_LEVEL, "available", (double)rk->available, "available_kv_bytes",
                            UNIT_BYTES};
    assert(n <= MAX_STEPS);
    return n;
}

static double step_bytes(const struct step *s)
{
    return s->unit == UNIT_GIB ? s->bytes * BUDGET_GIB : s->bytes;
}

static void waterfall(FILE *out, const char *id, const struct step *st, size_t n)
{
    double lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        double v = step_bytes(&st[i]);
        if (st[i].kind == STEP_LEVEL) {
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    if (!(hi > lo))
        hi = lo + 1;
    struct svg_scale ys = {lo, hi, FALL_H - FALL_B, FALL_T};
    double slot = (double)(FALL_W - FALL_L - 10) / (double)n;
    svg_begin(out, id, "waterfall", FALL_W, FALL_H, "budget waterfall");
    svg_line(out, FALL_L, svg_map(&ys, 0), FALL_W - 10, svg_map(&ys, 0), "axis", NULL);
    char b[UNITS_BUF];
    for (int i = 0; i <= 4; i++) {
        double v = lo + (hi - lo) * i / 4;
        svg_text(out, FALL_L - 4, svg_map(&ys, v) + 4, "end", 0,
                 report_size(b, sizeof(b), (int64_t)llround(v)));
    }
    double level = 0;
    for (size_t i = 0; i < n; i++) {
        double v = step_bytes(&st[i]);
        double x = FALL_L + slot * (double)i + slot * 0.15, w = slot * 0.7;
        double top, bottom;
        const char *cls;
        if (st[i].kind == STEP_LEVEL) {
            top = v;
            bottom = 0;
            level = v;
            cls = v < 0 ? "neg" : "level";
        } else {
            top = level;
            bottom = level - v;
            level = bottom;
            cls = v >= 0 ? "up" : "down";
        }
        char *title = xasprintf("%s: %.6f GiB", st[i].label, v / BUDGET_GIB);
        double y0 = svg_map(&ys, top), y1 = svg_map(&ys, bottom);
        svg_rect(out, x, y0 < y1 ? y0 : y1, w, fabs(y1 - y0) < 1 ? 1 : fabs(y1 - y0), cls, title,
                 title);
        free(title);
        svg_text(out, x + w / 2, FALL_H - FALL_B + 10, "end", -35, st[i].label);
    }
    svg_end(out);
}

/* The data-key of a number of side (report_budget): "A." before the
 * budget --json path on a page of two runs. */
static void side_key(char *key, size_t size, const char *side, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void side_key(char *key, size_t size, const char *side, const char *fmt, ...)
{
    int n = side ? snprintf(key, size, "%s.", side) : 0;
    assert(n >= 0 && (size_t)n < size);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(key + n, size - (size_t)n, fmt, ap);
    va_end(ap);
}

static void rank_section(FILE *out, const struct budget_analysis *r, const char *side, size_t job,
                         size_t k, const struct budget_rank *rk)
{
    const struct gm_process *p = &r->m->procs[rk->proc];
    char who[64];
    gm_process_name(who, sizeof(who), p);
    fputs("<h4>", out);
    html_text(out, who);
    fputs("</h4>\n", out);
    if (!rk->analysed) {
        html_elem(out, "p", "problem", rk->problem ? rk->problem : "not analysed");
        return;
    }
    if (rk->choice)
        html_elem(out, "p", "note", rk->choice);
    struct step st[MAX_STEPS];
    size_t n = r->o->framework == BUDGET_SGLANG ? sglang_steps(r, rk, st) : vllm_steps(rk, st);
    char id[64];
    snprintf(id, sizeof(id), "budget-%s%s%zu-%zu", side ? side : "", side ? "-" : "", job, k);
    waterfall(out, id, st, n);
    fputs("<table class=\"steps\"><tr><th>step</th><th class=\"n\">GiB</th></tr>\n", out);
    for (size_t i = 0; i < n; i++) {
        fputs("<tr><td>", out);
        html_text(out, st[i].label);
        fputs("</td>", out);
        char key[128];
        if (st[i].key)
            side_key(key, sizeof(key), side, "jobs.%zu.ranks.%zu.%s", job, k, st[i].key);
        number_cell(out, st[i].key ? key : NULL, st[i].unit, st[i].bytes,
                    st[i].unit == UNIT_BYTES && st[i].key != NULL);
        fputs("</tr>\n", out);
    }
    fputs("</table>\n", out);
    if (r->o->framework != BUDGET_SGLANG || rk->nrows == 0)
        return;
    fputs("<table class=\"parts\"><tr><th>part</th><th>when</th><th class=\"n\">size</th>"
          "<th class=\"n\">cost to rest</th></tr>\n",
          out);
    for (size_t i = 0; i < rk->nrows; i++) {
        const struct budget_row *d = &rk->rows[i];
        char *label = budget_part_label(d);
        fputs("<tr><td>", out);
        html_text(out, label);
        fputs("</td><td>", out);
        html_text(out, budget_part_when(d->part));
        fputs("</td>", out);
        char key[128];
        side_key(key, sizeof(key), side, "jobs.%zu.ranks.%zu.decomposition.%zu.bytes", job, k, i);
        number_cell(out, key, UNIT_BYTES, (double)d->bytes, true);
        side_key(key, sizeof(key), side, "jobs.%zu.ranks.%zu.decomposition.%zu.cost_gib", job, k,
                 i);
        number_cell(out, key, UNIT_GIB, d->cost_gib, false);
        fputs("</tr>\n", out);
        free(label);
    }
    fputs("</table>\n", out);
}

static void job_summary(FILE *out, const struct budget_analysis *r, const char *side, size_t i,
                        const struct budget_job *g)
{
    char key[96];
    bool sglang = r->o->framework == BUDGET_SGLANG;
    fprintf(out, "<p class=\"%s\">verdict: ", g->fits ? "ok" : "problem");
    html_text(out, g->verdict ? g->verdict : "");
    fputs("</p>\n<table class=\"job\"><tr>", out);
    if (sglang)
        fputs("<th>F</th><th class=\"n\">pre (MIN)</th><th class=\"n\">post (MIN)</th>"
              "<th class=\"n\">rest</th>",
              out);
    else
        fputs("<th>U</th><th class=\"n\">available (MIN)</th>", out);
    fputs("<th class=\"n\">tokens</th></tr>\n<tr>", out);
    if (sglang) {
        fprintf(out, "<td class=\"n\">%g</td>", r->o->fraction);
        side_key(key, sizeof(key), side, "jobs.%zu.pre_gib", i);
        number_cell(out, key, UNIT_GIB, g->pre_gib, false);
        side_key(key, sizeof(key), side, "jobs.%zu.post_gib", i);
        number_cell(out, key, UNIT_GIB, g->post_gib, false);
        side_key(key, sizeof(key), side, "jobs.%zu.rest_gib", i);
        number_cell(out, key, UNIT_GIB, g->rest, false);
        side_key(key, sizeof(key), side, "jobs.%zu.tokens", i);
        count_cell(out, key, g->tokens);
    } else {
        fprintf(out, "<td class=\"n\">%g</td>", r->o->util);
        side_key(key, sizeof(key), side, "jobs.%zu.available_kv_bytes", i);
        number_cell(out, key, UNIT_BYTES, (double)g->available, true);
        if (g->fits) {
            side_key(key, sizeof(key), side, "jobs.%zu.tokens", i);
            count_cell(out, key, g->tokens);
        } else {
            fputs("<td class=\"n\">-</td>", out);
        }
    }
    fputs("</tr></table>\n", out);
    if (sglang && g->conclusion)
        html_elem(out, "p", NULL, g->conclusion);
}

/* A job is listed when a rank of it passes, or, unfiltered, always
 * (`cutrace budget`'s rule: a job with no rank traced is listed too). */
static bool job_listed(const struct budget_job *g, const struct gm_filter *f)
{
    if (!f)
        return true;
    for (size_t k = 0; k < g->nranks; k++)
        if (gm_filter_proc(f, g->ranks[k].proc))
            return true;
    return !f->gpus_filtered;
}

void report_budget(FILE *out, const struct budget_analysis *r, const struct gm_filter *f,
                   const char *side)
{
    fputs("<p class=\"note\">", out);
    html_textf(out, "%s, replayed as %s (%s)", r->o->framework == BUDGET_SGLANG ? "SGLang" : "vLLM",
               budget_path_name(r->server.path),
               r->server.path_source ? r->server.path_source : "");
    fputs("</p>\n", out);
    for (size_t i = 0; i < r->ngroups; i++) {
        const struct budget_job *g = &r->groups[i];
        if (!job_listed(g, f))
            continue;
        fputs("<h3>", out);
        if (g->has_hash)
            html_textf(out, "job %zu: communicator %016" PRIx64 ", %zu ranks traced", i + 1,
                       g->hash, g->nranks);
        else
            html_textf(out, "job %zu: %zu ranks traced", i + 1, g->nranks);
        fputs("</h3>\n", out);
        if (g->analysed > 0)
            job_summary(out, r, side, i, g);
        for (size_t k = 0; k < g->nranks; k++)
            if (!f || gm_filter_proc(f, g->ranks[k].proc))
                rank_section(out, r, side, i, k, &g->ranks[k]);
    }
    for (size_t i = 0; i < r->nnotes; i++)
        html_elem(out, "p", "note", r->notes[i]);
}
