/*
 * diff_allocs.c - the allocations of each pair grouped by phase x api x module x size x
 * category, and the groups whose counts differ (step 5 of diff_run.c).
 */
#include "analysis/diff_build.h"

#include "cli.h"
#include "model/nccl.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocations by phase ---- */

struct alloc_entry {
    int64_t phase;
    uint32_t api, module, site;
    int64_t size;
    uint8_t category;
    uint8_t side;
    uint32_t pair;
    int64_t count[2];
};

static int compare_alloc_keys(const struct alloc_entry *a, const struct alloc_entry *b)
{
    int c = diff_cmp64(a->phase, b->phase);
    if (!c)
        c = diff_cmp64(a->api, b->api);
    if (!c)
        c = diff_cmp64(a->module, b->module);
    if (!c)
        c = diff_cmp64(a->site, b->site);
    if (!c)
        c = diff_cmp64(a->size, b->size);
    if (!c)
        c = diff_cmp64(a->category, b->category);
    return c;
}

static int compare_entries(const void *x, const void *y)
{
    const struct alloc_entry *a = x, *b = y;
    int c = compare_alloc_keys(a, b);
    if (!c)
        c = diff_cmp64(a->pair, b->pair);
    if (!c)
        c = diff_cmp64(a->side, b->side);
    return c;
}

/* The position of a matched milestone on one side, for phases. */
struct boundary {
    uint64_t pos;
    uint8_t order;
    uint32_t row;
};

/* The row of the last boundary at or before an event at pos (order 1). */
static int64_t phase_of(const struct boundary *b, size_t n, uint64_t pos)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b[mid].pos < pos || (b[mid].pos == pos && b[mid].order <= 1))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? -1 : (int64_t)b[lo - 1].row;
}

/*
 * The call site of an allocation, a diff-wide string id (stacks.h: the
 * Python site where the trace has Python frames, else the native one; ""
 * for traces without stacks, format 3 and older), so that the groups split
 * by who made them. A process's stacks are loaded the first time one of
 * its allocations is grouped; a damaged stack table reads as no stacks.
 */
static uint32_t alloc_site(struct diff *d, int side, uint32_t proc, const struct gm_alloc *a)
{
    struct diff_run *r = &d->run[side];
    const struct gm_model *m = &r->m;
    const struct gm_process *p = &m->procs[proc];
    assert(r->stacks_loaded && r->stacks_loaded[proc] && "diff_load_stacks runs first");
    if (!d->sites_compared)
        return diff_string_id(d, "");
    enum site_kind kind;
    char *site = stacks_call_site(&r->stacks[proc], a->stack_id,
                                  gm_api_name(m, p->events[a->event].api), &kind, NULL);
    uint32_t id = diff_string_id(d, site ? site : "");
    free(site);
    return id;
}

/* The allocations of one side of a pair, one entry each. */
static void pair_side_entries(struct diff *d, uint32_t pi, int side, struct diff_id_map *map,
                              struct alloc_entry **entries, size_t *n, size_t *cap)
{
    const struct diff_pair *p = &d->pairs[pi];
    const struct diff_run *r = &d->run[side];
    const struct gm_model *m = &r->m;
    const struct diff_gpu *g = &r->gpus[p->gpu[side]];
    struct boundary *b = xcalloc(p->nsteps ? p->nsteps : 1, sizeof(*b));
    size_t nb = 0;
    for (size_t s = 0; s < p->nsteps; s++) {
        const struct diff_step *st = &p->steps[s];
        if (st->ms[0] < 0 || st->ms[1] < 0)
            continue;
        const struct diff_milestone *ms = diff_step_ms(d, p, st, side);
        b[nb++] = (struct boundary){ms->pos, ms->order, st->row};
    }
    const struct gm_gpu *gpu = &m->gpus[g->gpu];
    for (size_t k = 0; k < gpu->nprocs; k++) {
        const struct gm_process *q = &m->procs[gpu->procs[k]];
        for (size_t i = 0; i < q->nallocs; i++) {
            const struct gm_alloc *a = &q->allocs[i];
            if (a->gpu != g->gpu || a->category >= GM_CATEGORIES)
                continue;
            const struct gm_event *e = &q->events[a->event];
            *entries = xgrow(*entries, cap, *n + 1, sizeof(**entries));
            (*entries)[(*n)++] = (struct alloc_entry){
                .phase = phase_of(b, nb, e->pos),
                .api = diff_map_api(d, map, m, e->api),
                .module = diff_map_module(d, map, m, a->module),
                .site = alloc_site(d, side, gpu->procs[k], a),
                .size = a->size,
                .category = a->category,
                .side = (uint8_t)side,
                .pair = pi,
                .count = {side == DIFF_A, side == DIFF_B},
            };
        }
    }
    free(b);
}

/* The row of the first step after `row` (-1: from the start) that both
 * sides of the pair have; -1 when there is none. */
static int64_t next_common_row(const struct diff_pair *p, int64_t row)
{
    size_t s = 0;
    if (row >= 0) {
        while (s < p->nsteps && !((int64_t)p->steps[s].row == row && p->steps[s].ms[0] >= 0 &&
                                  p->steps[s].ms[1] >= 0))
            s++;
        s++;
    }
    for (; s < p->nsteps; s++)
        if (p->steps[s].ms[0] >= 0 && p->steps[s].ms[1] >= 0)
            return (int64_t)p->steps[s].row;
    return -1;
}

static int compare_alloc_rows(const void *x, const void *y, void *arg)
{
    const struct diff *d = arg;
    const struct diff_alloc_row *a = x, *b = y;
    bool ga = a->category < GM_GPU_CATEGORIES, gb = b->category < GM_GPU_CATEGORIES;
    if (ga != gb)
        return ga ? -1 : 1;
    int64_t ia = diff_abs64(gm_sub(a->bytes[1], a->bytes[0]));
    int64_t ib = diff_abs64(gm_sub(b->bytes[1], b->bytes[0]));
    if (ia != ib)
        return ia > ib ? -1 : 1;
    int c = diff_cmp64(a->phase, b->phase);
    if (!c)
        c = strcmp(diff_string(d, a->api), diff_string(d, b->api));
    if (!c)
        c = strcmp(diff_string(d, a->module), diff_string(d, b->module));
    if (!c)
        c = strcmp(diff_string(d, a->site), diff_string(d, b->site));
    if (!c)
        c = diff_cmp64(a->size, b->size);
    if (!c)
        c = diff_cmp64(a->category, b->category);
    return c;
}

void diff_compare_allocations(struct diff *d)
{
    struct diff_id_map maps[2];
    diff_id_map_init(&maps[0], &d->run[0].m);
    diff_id_map_init(&maps[1], &d->run[1].m);
    /* Per pair: one entry per allocation, reduced to counts per key. */
    struct alloc_entry *groups = NULL;
    size_t ngroups = 0, groups_cap = 0;
    struct alloc_entry *entries = NULL;
    size_t entries_cap = 0;
    for (uint32_t pi = 0; pi < d->npairs; pi++) {
        size_t n = 0;
        for (int side = 0; side < 2; side++)
            pair_side_entries(d, pi, side, &maps[side], &entries, &n, &entries_cap);
        if (n > 1)
            qsort(entries, n, sizeof(*entries), compare_entries);
        for (size_t i = 0; i < n;) {
            struct alloc_entry g = entries[i];
            g.count[0] = g.count[1] = 0;
            size_t k = i;
            for (; k < n && compare_alloc_keys(&entries[k], &entries[i]) == 0; k++)
                g.count[entries[k].side]++;
            if (g.count[0] != g.count[1]) {
                groups = xgrow(groups, &groups_cap, ngroups + 1, sizeof(*groups));
                groups[ngroups++] = g;
            }
            i = k;
        }
    }
    free(entries);
    diff_id_map_free(&maps[0]);
    diff_id_map_free(&maps[1]);
    if (ngroups > 1)
        qsort(groups, ngroups, sizeof(*groups), compare_entries);
    /* Over pairs: one row per key; a pair without the key changed nothing. */
    size_t cap = 0;
    for (size_t i = 0; i < ngroups;) {
        size_t k = i;
        while (k < ngroups && compare_alloc_keys(&groups[k], &groups[i]) == 0)
            k++;
        d->allocs = xgrow(d->allocs, &cap, d->nallocs + 1, sizeof(*d->allocs));
        struct diff_alloc_row *row = &d->allocs[d->nallocs++];
        *row = (struct diff_alloc_row){.phase = groups[i].phase,
                                       .phase_end = -1,
                                       .api = groups[i].api,
                                       .module = groups[i].module,
                                       .site = groups[i].site,
                                       .size = groups[i].size,
                                       .category = groups[i].category};
        row->per_pair = xcalloc(k - i, sizeof(*row->per_pair));
        bool first = true;
        for (size_t j = i; j < k; j++) {
            int64_t delta = gm_sub(groups[j].count[1], groups[j].count[0]);
            for (int s = 0; s < 2; s++) {
                row->count[s] = gm_add(row->count[s], groups[j].count[s]);
                row->bytes[s] = gm_add(row->bytes[s], diff_sat_mul(groups[j].count[s], row->size));
            }
            if (first || delta < row->dmin)
                row->dmin = delta;
            if (first || delta > row->dmax)
                row->dmax = delta;
            first = false;
            row->per_pair[row->nper++] =
                (struct diff_alloc_pair){groups[j].pair, {groups[j].count[0], groups[j].count[1]}};
        }
        row->changed = k - i;
        if (row->changed < d->npairs) {
            if (row->dmin > 0)
                row->dmin = 0;
            if (row->dmax < 0)
                row->dmax = 0;
        }
        /* The phase ends at the next milestone both runs share, when every
         * pair that differs here agrees on it. */
        for (size_t j = 0; j < row->nper; j++) {
            int64_t end = next_common_row(&d->pairs[row->per_pair[j].pair], row->phase);
            if (j == 0)
                row->phase_end = end;
            else if (end != row->phase_end)
                row->phase_end = -1;
        }
        i = k;
    }
    free(groups);
    if (d->nallocs > 1)
        qsort_r(d->allocs, d->nallocs, sizeof(*d->allocs), compare_alloc_rows, d);
    if (d->nallocs)
        d->differences |= 1u << DIFF_D_ALLOCATIONS;
}
