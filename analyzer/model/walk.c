/*
 * walk.c - reading the GPU model (gpumodel.h) after it is loaded: a walk
 * over one GPU's stream with the live bytes per category at every event,
 * where an allocation ends in that stream, and the GPU a report's --gpu
 * names.
 */
#include "cli.h"
#include "model/gpumodel.h"

#include <assert.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- walking a GPU's stream ---- */

void gm_walk_init(struct gm_walk *w, const struct gm_model *m, uint32_t gpu)
{
    assert(gpu < m->ngpus);
    memset(w, 0, sizeof(*w));
    w->m = m;
    w->gpu = gpu;
    w->proc_live = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*w->proc_live));
}

void gm_walk_free(struct gm_walk *w)
{
    free(w->proc_live);
    memset(w, 0, sizeof(*w));
}

static void live_sub(int64_t *live, int64_t size)
{
    *live = gm_sub(*live, size);
    if (*live < 0) /* only through saturation on garbage sizes */
        *live = 0;
}

const struct gm_ref *gm_walk_step(struct gm_walk *w)
{
    const struct gm_gpu *g = &w->m->gpus[w->gpu];
    if (w->next >= g->nstream)
        return NULL;
    const struct gm_ref *ref = &g->stream[w->next++];
    const struct gm_process *p = &w->m->procs[ref->proc];
    const struct gm_event *e = &p->events[ref->event];
    int64_t *mine = w->proc_live[ref->proc];
    switch (e->type) {
    case GM_EV_ALLOC:
    case GM_EV_FREE: {
        assert(e->a >= 0 && (size_t)e->a < p->nallocs);
        const struct gm_alloc *a = &p->allocs[e->a];
        if (a->category >= GM_CATEGORIES || a->gpu != w->gpu)
            break;
        if (e->type == GM_EV_ALLOC) {
            w->live[a->category] = gm_add(w->live[a->category], a->size);
            mine[a->category] = gm_add(mine[a->category], a->size);
        } else {
            live_sub(&w->live[a->category], a->size);
            live_sub(&mine[a->category], a->size);
        }
        break;
    }
    case GM_EV_END:
        /* The driver frees what an exiting process still held. */
        if (e->a)
            for (int c = 0; c < GM_CATEGORIES; c++) {
                live_sub(&w->live[c], mine[c]);
                mine[c] = 0;
            }
        break;
    default:
        break;
    }
    return ref;
}

uint64_t gm_alloc_end_pos(const struct gm_process *p, const struct gm_alloc *a)
{
    if (a->end_event == GM_NONE)
        return UINT64_MAX;
    assert(a->end_event < p->nevents);
    return p->events[a->end_event].pos;
}

/* ---- --gpu ---- */

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

bool gm_gpu_matches(const struct gm_gpu *g, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncasecmp(g->key, prefix, n) == 0)
        return true;
    return g->uuid && strncasecmp(g->uuid, "GPU-", 4) == 0 &&
           strncasecmp(g->uuid + 4, prefix, n) == 0;
}

int64_t gm_select_gpu(const struct gm_model *m, const char *arg, const char *cmd)
{
    if (all_digits(arg)) {
        char *end;
        unsigned long long index = strtoull(arg, &end, 10);
        if (*end == '\0' && index < m->ngpus)
            return (int64_t)index;
        cli_usage_error(cmd, "--gpu %s: the traces show %zu GPU%s (index 0 to %zu)", arg, m->ngpus,
                        m->ngpus == 1 ? "" : "s", m->ngpus ? m->ngpus - 1 : 0);
        return -1;
    }
    int64_t found = -1;
    size_t matches = 0;
    for (size_t i = 0; i < m->ngpus; i++)
        if (gm_gpu_matches(&m->gpus[i], arg)) {
            if (found < 0)
                found = (int64_t)i;
            matches++;
        }
    if (matches == 1)
        return found;
    if (matches == 0)
        cli_usage_error(cmd, "--gpu %s: no GPU of these traces has that uuid", arg);
    else
        cli_usage_error(cmd, "--gpu %s: %zu GPUs match; give more of the uuid", arg, matches);
    return -1;
}
