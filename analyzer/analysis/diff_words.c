/*
 * diff_words.c - the wording `cutrace diff`'s text and JSON share: sides, phases,
 * the pair shown and how the others compare with it, what each phase
 * adds up to, the budget's effects side by side.
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

/* ---- shared wording ---- */

const char *diff_side_name(int side)
{
    return side == DIFF_A ? "A" : "B";
}

/* Prints a sentence wrapped at blanks to table_width() columns;
 * continuation lines are indented 4 more. Trace text is made safe. */
void diff_emit(FILE *out, size_t indent, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    va_end(ap);
    if (!text)
        return;
    const char *p = text;
    bool first = true;
    while (*p) {
        size_t ind = first ? indent : indent + 4;
        size_t limit = table_width();
        size_t room = limit > ind + 20 ? limit - ind : 20;
        /* the longest run of whole words that fits */
        size_t len = strlen(p), cut = 0;
        for (size_t i = 0; i <= len; i++) {
            if (p[i] != ' ' && p[i] != '\0')
                continue;
            char *chunk = xstrndup(p, i);
            size_t w = text_width(chunk);
            free(chunk);
            if (w > room)
                break;
            cut = i;
        }
        if (cut == 0) /* one word longer than the line: cut it */
            cut = strcspn(p, " ");
        char *chunk = xstrndup(p, cut);
        fprintf(out, "%*s", (int)ind, "");
        text_print(out, chunk, room, 0);
        fputc('\n', out);
        free(chunk);
        p += cut;
        while (*p == ' ')
            p++;
        first = false;
    }
    free(text);
}

int64_t diff_sat_mul_bytes(int64_t count, int64_t size)
{
    int64_t r;
    if (__builtin_mul_overflow(count, size, &r))
        return (count < 0) != (size < 0) ? INT64_MIN : INT64_MAX;
    return r;
}

char *diff_signed_count(int64_t n)
{
    return xasprintf("%s%" PRId64, n > 0 ? "+" : "", n);
}

/* A count delta over pairs: "+1", or "0..+2" when they differ. */
char *diff_count_range(int64_t lo, int64_t hi)
{
    if (lo == hi)
        return diff_signed_count(lo);
    char *a = diff_signed_count(lo), *b = diff_signed_count(hi);
    char *out = xasprintf("%s..%s", a, b);
    free(a);
    free(b);
    return out;
}

const char *diff_category_key(uint8_t category)
{
    return gm_category_key((enum gm_category)category);
}

/* "ipc_exported +512.0 MiB, runtime +20.0 MiB" for live deltas; "" none. */
char *diff_live_changes(const int64_t *a, const int64_t *b)
{
    char *out = xstrdup("");
    for (int c = 0; c < GM_CATEGORIES; c++) {
        int64_t delta = gm_sub(b[c], a[c]);
        if (delta == 0)
            continue;
        char buf[DIFF_SIZE_BUF];
        char *joined =
            xasprintf("%s%s%s %s", out, *out ? ", " : "", gm_category_key((enum gm_category)c),
                      diff_signed_size(buf, sizeof(buf), delta));
        free(out);
        out = joined;
    }
    return out;
}

/* "NCCL init 2 -> measurement 2 (pre)": a phase of the allocations. */
char *diff_phase_text(const struct diff *d, int64_t phase, int64_t end)
{
    if (phase < 0)
        return end >= 0 ? xasprintf("before %s", d->rows[end].label)
                        : xstrdup("before any common milestone");
    if (end < 0)
        return xasprintf("after %s", d->rows[phase].label);
    return xasprintf("%s -> %s", d->rows[phase].label, d->rows[end].label);
}

const char *diff_end_word(const struct gm_process *p)
{
    if (p->exited)
        return "exited";
    if (p->end_state && strcmp(p->end_state, "killed") == 0)
        return "killed";
    return "running or killed";
}

/* The last milestone (not its end) of a process on its GPU, NULL if none. */
const struct diff_milestone *diff_last_milestone(const struct diff_run *r, uint32_t proc)
{
    const struct diff_milestone *last = NULL;
    for (size_t g = 0; g < r->ngpus; g++) {
        if (r->gpus[g].proc != proc)
            continue;
        for (size_t i = 0; i < r->gpus[g].nms; i++)
            if (r->gpus[g].ms[i].proc == proc && r->gpus[g].ms[i].kind != MS_END)
                last = &r->gpus[g].ms[i];
    }
    return last;
}

/* ---- the pair shown, and how the others compare with it ---- */

struct diff_row_sig *diff_pair_sigs(const struct diff *d, uint32_t pair)
{
    const struct diff_pair *p = &d->pairs[pair];
    struct diff_row_sig *sigs = xcalloc(d->nrows ? d->nrows : 1, sizeof(*sigs));
    for (size_t s = 0; s < p->nsteps; s++) {
        const struct diff_step *st = &p->steps[s];
        struct diff_row_sig *sig = &sigs[st->row];
        const struct diff_milestone *ms[2] = {diff_step_ms(d, p, st, DIFF_A),
                                              diff_step_ms(d, p, st, DIFF_B)};
        for (int side = 0; side < 2; side++)
            if (ms[side]) {
                sig->has[side] = true;
                sig->end[side] = ms[side]->kind == MS_END ? ms[side]->detail : 0;
            }
        if (!ms[0] || !ms[1])
            continue;
        for (int c = 0; c < GM_CATEGORIES; c++)
            sig->dlive[c] = gm_sub(ms[1]->live[c], ms[0]->live[c]);
        sig->measured = ms[0]->measured && ms[1]->measured;
        if (sig->measured)
            sig->dfree = gm_sub(ms[1]->free_bytes, ms[0]->free_bytes);
    }
    return sigs;
}

bool diff_sig_equal(const struct diff_row_sig *a, const struct diff_row_sig *b)
{
    if (a->has[0] != b->has[0] || a->has[1] != b->has[1] || a->measured != b->measured ||
        a->dfree != b->dfree || a->end[0] != b->end[0] || a->end[1] != b->end[1])
        return false;
    return memcmp(a->dlive, b->dlive, sizeof(a->dlive)) == 0;
}

/* The pair whose milestones are shown: where the runs first diverge, else
 * the first with a milestone of one run only, else the first. */
uint32_t diff_shown_pair(const struct diff *d)
{
    if (d->first_div_row >= 0)
        return d->first_div_pair;
    for (uint32_t p = 0; p < d->npairs; p++)
        for (size_t s = 0; s < d->pairs[p].nsteps; s++)
            if (d->pairs[p].steps[s].ms[0] < 0 || d->pairs[p].steps[s].ms[1] < 0)
                return p;
    return 0;
}

/* How pair q's row differs from the shown pair's, in words (malloc'd). */
char *diff_sig_difference(const struct diff_row_sig *mine, const struct diff_row_sig *shown)
{
    if (mine->has[0] != shown->has[0] || mine->has[1] != shown->has[1]) {
        if (!mine->has[0] && !mine->has[1])
            return xstrdup("not reached in either run");
        if (mine->has[0] && mine->has[1])
            return xstrdup("in both runs");
        return xasprintf("only in %s", mine->has[0] ? "A" : "B");
    }
    if (mine->end[0] != shown->end[0] || mine->end[1] != shown->end[1])
        return xasprintf("processes end %s in A, %s in B", mine->end[0] ? "exited" : "killed",
                         mine->end[1] ? "exited" : "killed");
    char t[DIFF_SIZE_BUF], f[DIFF_SIZE_BUF];
    return xasprintf("traced %s%s%s", diff_signed_size(t, sizeof(t), gm_traced(mine->dlive)),
                     mine->measured ? ", free " : "",
                     mine->measured ? diff_signed_size(f, sizeof(f), mine->dfree) : "");
}

/* ---- per phase: what the allocation groups add up to ---- */

static int ps_kind(uint8_t category)
{
    return category < GM_GPU_CATEGORIES ? PS_GPU : category == GM_CAT_PEER ? PS_PEER : PS_HOST;
}

struct diff_phase_sum *diff_phase_sums(const struct diff *d, size_t *count)
{
    struct diff_phase_sum *sums = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < d->nallocs; i++) {
        const struct diff_alloc_row *row = &d->allocs[i];
        size_t k = 0;
        while (k < n && sums[k].phase != row->phase)
            k++;
        if (k == n) {
            sums = xgrow(sums, &cap, n + 1, sizeof(*sums));
            sums[n] = (struct diff_phase_sum){.phase = row->phase, .end = row->phase_end};
            sums[n].v = xcalloc(d->npairs ? d->npairs : 1, sizeof(*sums[n].v));
            n++;
        } else if (sums[k].end != row->phase_end) {
            sums[k].end = -1; /* pairs disagree on where it ends: "after ..." */
        }
        int kind = ps_kind(row->category);
        for (size_t j = 0; j < row->nper; j++) {
            const struct diff_alloc_pair *pp = &row->per_pair[j];
            int64_t delta = gm_sub(pp->count[1], pp->count[0]);
            int64_t(*v)[3] = sums[k].v[pp->pair];
            if (delta > 0)
                v[kind][PS_ADDED] = gm_add(v[kind][PS_ADDED], delta);
            else
                v[kind][PS_REMOVED] = gm_sub(v[kind][PS_REMOVED], delta);
            v[kind][PS_BYTES] =
                gm_add(v[kind][PS_BYTES], gm_sub(diff_sat_mul_bytes(pp->count[1], row->size),
                                                 diff_sat_mul_bytes(pp->count[0], row->size)));
        }
    }
    /* in the order of the milestones */
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && sums[k].phase < sums[k - 1].phase; k--) {
            struct diff_phase_sum t = sums[k];
            sums[k] = sums[k - 1];
            sums[k - 1] = t;
        }
    *count = n;
    return sums;
}

bool diff_phase_uniform(const struct diff *d, const struct diff_phase_sum *s)
{
    for (size_t p = 1; p < d->npairs; p++)
        if (memcmp(s->v[p], s->v[0], sizeof(s->v[0])) != 0)
            return false;
    return true;
}

/* The pairs where a phase changed anything, and whether they changed the
 * same; returns how many (*pairs malloc'd). */
size_t diff_phase_pairs(const struct diff *d, const struct diff_phase_sum *s, uint32_t **pairs,
                        bool *alike)
{
    static const int64_t zero[PS_KINDS][3];
    *pairs = xcalloc(d->npairs ? d->npairs : 1, sizeof(**pairs));
    size_t n = 0;
    *alike = true;
    for (uint32_t p = 0; p < d->npairs; p++) {
        if (memcmp(s->v[p], zero, sizeof(zero)) == 0)
            continue;
        if (n > 0 && memcmp(s->v[p], s->v[(*pairs)[0]], sizeof(zero)) != 0)
            *alike = false;
        (*pairs)[n++] = p;
    }
    return n;
}

/* "+3 allocations (+532.0 MiB)", "+61 -61 allocations (+183.0 KiB)". */
char *diff_alloc_phrase(const int64_t v[3], const char *what)
{
    char b[DIFF_SIZE_BUF];
    char *counts;
    if (v[PS_ADDED] && v[PS_REMOVED])
        counts = xasprintf("+%" PRId64 " -%" PRId64, v[PS_ADDED], v[PS_REMOVED]);
    else if (v[PS_ADDED])
        counts = xasprintf("+%" PRId64, v[PS_ADDED]);
    else
        counts = xasprintf("-%" PRId64, v[PS_REMOVED]);
    int64_t n = v[PS_ADDED] + v[PS_REMOVED];
    char *out = xasprintf("%s %s%s (%s)", counts, what, n == 1 ? "" : "s",
                          diff_signed_size(b, sizeof(b), v[PS_BYTES]));
    assert(n > 0);
    free(counts);
    return out;
}

/* ---- budget ---- */

/* The parts of rest on the binding rank of each side, joined by part and category. */
struct diff_effect *diff_effects(const struct budget_rank *a, const struct budget_rank *b,
                                 size_t *n)
{
    size_t cap = a->nrows + b->nrows;
    struct diff_effect *out = xcalloc(cap ? cap : 1, sizeof(*out));
    size_t count = 0;
    const struct budget_rank *rk[2] = {a, b};
    for (int side = 0; side < 2; side++)
        for (size_t i = 0; i < rk[side]->nrows; i++) {
            const struct budget_row *row = &rk[side]->rows[i];
            size_t k = 0;
            while (k < count && !(out[k].part == row->part && out[k].category == row->category))
                k++;
            if (k == count) {
                assert(count < cap);
                out[count++] = (struct diff_effect){.part = row->part, .category = row->category};
            }
            out[k].bytes[side] = row->bytes;
            out[k].cost[side] = row->cost_gib;
        }
    /* largest effect first */
    for (size_t i = 1; i < count; i++)
        for (size_t k = i; k > 0; k--) {
            double x = fabs(out[k].cost[1] - out[k].cost[0]);
            double y = fabs(out[k - 1].cost[1] - out[k - 1].cost[0]);
            if (x <= y)
                break;
            struct diff_effect t = out[k];
            out[k] = out[k - 1];
            out[k - 1] = t;
        }
    *n = count;
    return out;
}
