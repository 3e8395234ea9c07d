/*
 * diff_ipc.c - IPC lineage of a run: which process exported the buffers that which
 * processes opened, compared by ranks, never pids (step 6 of diff_run.c).
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

/* ---- IPC lineage ---- */

/* "rank 3" or "pid 4242" */
static char *proc_who(const struct gm_process *p)
{
    return p->has_rank ? xasprintf("rank %" PRId64, p->rank) : xasprintf("pid %" PRId64, p->pid);
}

/* A sorted id list as ranges: "1-3, 5" (ids < 0 are -pid - 1: "pid 7"). */
static char *ranges_text(const int64_t *ids, size_t n)
{
    char *out = xstrdup("");
    for (size_t i = 0; i < n;) {
        size_t k = i;
        while (ids[i] >= 0 && k + 1 < n && ids[k + 1] == ids[k] + 1)
            k++;
        char *part;
        if (ids[i] < 0)
            part = xasprintf("pid %" PRId64, -(ids[i] + 1));
        else if (k > i)
            part = xasprintf("%" PRId64 "-%" PRId64, ids[i], ids[k]);
        else
            part = xasprintf("%" PRId64, ids[i]);
        char *joined = xasprintf("%s%s%s", out, *out ? ", " : "", part);
        free(out);
        free(part);
        out = joined;
        i = k + 1;
    }
    return out;
}

static int compare_i64(const void *x, const void *y)
{
    return diff_cmp64(*(const int64_t *)x, *(const int64_t *)y);
}

/* Distinct ids, sorted, counted: "ranks 1-3" / "rank 2" / "pid 7, pid 9". */
char *diff_ids_text(int64_t *ids, size_t n, size_t *distinct)
{
    if (n > 1)
        qsort(ids, n, sizeof(*ids), compare_i64);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || ids[k - 1] != ids[i])
            ids[k++] = ids[i];
    *distinct = k;
    char *list = ranges_text(ids, k);
    bool ranks = k > 0 && ids[0] >= 0;
    char *out = xasprintf("%s%s", ranks ? (k > 1 ? "ranks " : "rank ") : "", list);
    free(list);
    return out;
}

static int64_t proc_id(const struct gm_process *p)
{
    return p->has_rank ? p->rank : -(p->pid > 0 ? p->pid : 0) - 1;
}

static int compare_links(const void *x, const void *y)
{
    const struct gm_ipc_link *a = x, *b = y;
    int c = diff_cmp64(a->exporter_proc, b->exporter_proc);
    if (!c)
        c = diff_cmp64(a->exporter_alloc, b->exporter_alloc);
    if (!c)
        c = diff_cmp64(a->opener_proc, b->opener_proc);
    if (!c)
        c = diff_cmp64(a->opener_alloc, b->opener_alloc);
    return c;
}

static int compare_buffers(const void *x, const void *y, void *arg)
{
    const struct gm_model *m = arg;
    const struct diff_ipc_buffer *a = x, *b = y;
    const struct gm_process *p = &m->procs[a->proc], *q = &m->procs[b->proc];
    if (p->has_rank != q->has_rank)
        return p->has_rank ? -1 : 1;
    int c = p->has_rank ? diff_cmp64(p->rank, q->rank) : 0;
    if (!c)
        c = diff_cmp64(p->allocs[a->alloc].seq, q->allocs[b->alloc].seq);
    if (!c)
        c = diff_cmp64(a->proc, b->proc);
    return c;
}

void diff_build_ipc(struct diff *d, struct diff_run *r)
{
    const struct gm_model *m = &r->m;
    struct diff_ipc *ipc = &r->ipc;
    struct diff_id_map map;
    diff_id_map_init(&map, m);
    struct gm_ipc_link *links = xcalloc(m->nipc_links ? m->nipc_links : 1, sizeof(*links));
    if (m->nipc_links)
        memcpy(links, m->ipc_links, m->nipc_links * sizeof(*links));
    if (m->nipc_links > 1)
        qsort(links, m->nipc_links, sizeof(*links), compare_links);
    size_t cap = 0;
    for (size_t pi = 0; pi < m->nprocs; pi++) {
        const struct gm_process *p = &m->procs[pi];
        for (size_t i = 0; i < p->nallocs; i++) {
            const struct gm_alloc *a = &p->allocs[i];
            if (a->kind == GM_KIND_IPC)
                ipc->opens++;
            if (!a->exported)
                continue;
            ipc->buffers = xgrow(ipc->buffers, &cap, ipc->nbuffers + 1, sizeof(*ipc->buffers));
            ipc->buffers[ipc->nbuffers++] =
                (struct diff_ipc_buffer){.proc = (uint32_t)pi,
                                         .alloc = (uint32_t)i,
                                         .api = diff_map_api(d, &map, m, p->events[a->event].api),
                                         .module = diff_map_module(d, &map, m, a->module),
                                         .size = a->size};
        }
    }
    ipc->foreign_opens = gm_sub(ipc->opens, (int64_t)m->nipc_links);
    if (ipc->nbuffers > 1)
        qsort_r(ipc->buffers, ipc->nbuffers, sizeof(*ipc->buffers), compare_buffers, (void *)m);
    for (size_t bi = 0; bi < ipc->nbuffers; bi++) {
        struct diff_ipc_buffer *b = &ipc->buffers[bi];
        const struct gm_process *p = &m->procs[b->proc];
        b->exporter = proc_who(p);
        struct gm_ipc_link key = {(uint32_t)b->proc, (uint32_t)b->alloc, 0, 0};
        size_t lo = 0, hi = m->nipc_links;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (compare_links(&links[mid], &key) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t hi_link = lo;
        while (hi_link < m->nipc_links && links[hi_link].exporter_proc == b->proc &&
               links[hi_link].exporter_alloc == b->alloc)
            hi_link++;
        size_t n = 0;
        b->opener_ranks = xcalloc(hi_link - lo, sizeof(*b->opener_ranks));
        for (size_t k = lo; k < hi_link; k++)
            b->opener_ranks[n++] = proc_id(&m->procs[links[k].opener_proc]);
        size_t distinct;
        char *list = diff_ids_text(b->opener_ranks, n, &distinct);
        /* "every other rank": each rank of the exporter's job but itself */
        bool every =
            p->has_rank && p->world_nranks > 1 && distinct == (size_t)(p->world_nranks - 1);
        for (size_t k = 0; every && k < distinct; k++)
            every = b->opener_ranks[k] >= 0 && b->opener_ranks[k] < p->world_nranks &&
                    b->opener_ranks[k] != p->rank;
        if (n == 0)
            b->openers = xstrdup("nobody");
        else if (every)
            b->openers = xasprintf("every other rank (%zu)", distinct);
        else
            b->openers = xstrdup(list);
        b->nopeners = (int64_t)distinct;
        b->opens = (int64_t)n;
        free(list);
    }
    /* Text groups: buffers alike but for their exporter. */
    size_t gcap = 0;
    bool *done = xcalloc(ipc->nbuffers, sizeof(*done));
    int64_t *who = xcalloc(ipc->nbuffers, sizeof(*who));
    for (size_t bi = 0; bi < ipc->nbuffers; bi++) {
        if (done[bi])
            continue;
        const struct diff_ipc_buffer *b = &ipc->buffers[bi];
        size_t nwho = 0;
        struct diff_ipc_group g = {
            .api = b->api, .module = b->module, .size = b->size, .openers = b->openers};
        for (size_t k = bi; k < ipc->nbuffers; k++) {
            const struct diff_ipc_buffer *c = &ipc->buffers[k];
            if (done[k] || c->api != b->api || c->module != b->module || c->size != b->size ||
                strcmp(c->openers, b->openers) != 0)
                continue;
            done[k] = true;
            g.buffers++;
            g.opens = gm_add(g.opens, c->opens);
            who[nwho++] = proc_id(&m->procs[c->proc]);
        }
        size_t distinct;
        g.exporters = diff_ids_text(who, nwho, &distinct);
        ipc->groups = xgrow(ipc->groups, &gcap, ipc->ngroups + 1, sizeof(*ipc->groups));
        ipc->groups[ipc->ngroups++] = g;
    }
    free(done);
    free(who);
    free(links);
    diff_id_map_free(&map);
}

bool diff_ipc_equal(const struct diff_ipc *a, const struct diff_ipc *b)
{
    if (a->ngroups != b->ngroups || a->opens != b->opens || a->foreign_opens != b->foreign_opens)
        return false;
    for (size_t i = 0; i < a->ngroups; i++) {
        const struct diff_ipc_group *x = &a->groups[i], *y = &b->groups[i];
        if (x->api != y->api || x->module != y->module || x->size != y->size ||
            x->buffers != y->buffers || x->opens != y->opens ||
            strcmp(x->openers, y->openers) != 0 || strcmp(x->exporters, y->exporters) != 0)
            return false;
    }
    return true;
}
