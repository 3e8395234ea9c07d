/*
 * bursts.c - the stretches of a process's allocations between its
 * measurements (cudaMemGetInfo) on one GPU, read from the loaded model
 * (gpumodel.h): the weight burst (docs/budget.md), a burst between two
 * given measurements, the KV cache pool as the largest set of equal
 * allocations, and the GPU a process used most.
 */
#include "cli.h"
#include "model/gpumodel.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ll << 20)

/* ---- bursts and measurements ---- */

uint32_t *gm_measurements(const struct gm_model *m, uint32_t proc, uint32_t gpu, size_t *count)
{
    const struct gm_process *p = &m->procs[proc];
    uint32_t *out = xcalloc(p->nevents ? p->nevents : 1, sizeof(*out));
    size_t n = 0;
    for (size_t i = 0; i < p->nevents; i++)
        if (p->events[i].type == GM_EV_MEASURE && p->events[i].gpu == gpu)
            out[n++] = (uint32_t)i;
    *count = n;
    return out;
}

/* A top-level allocation of GPU memory on that GPU, for bursts. */
static const struct gm_alloc *burst_alloc(const struct gm_process *p, const struct gm_event *e,
                                          uint32_t gpu)
{
    if (e->type != GM_EV_ALLOC || e->gpu != gpu)
        return NULL;
    const struct gm_alloc *a = &p->allocs[e->a];
    return a->top && gm_is_gpu_kind((enum gm_kind)a->kind) ? a : NULL;
}

/* Adds the allocation of event i to burst b. */
static void burst_add(struct gm_burst *b, size_t i, const struct gm_alloc *a)
{
    if (b->count == 0)
        b->first = (uint32_t)i;
    b->last = (uint32_t)i;
    b->count++;
    b->bytes = gm_add(b->bytes, a->size);
}

/* The stretches of a process on a GPU between its measurements there. */
static struct gm_burst *stretches(const struct gm_model *m, uint32_t proc, uint32_t gpu,
                                  size_t *count)
{
    const struct gm_process *p = &m->procs[proc];
    struct gm_burst *out = NULL;
    size_t n = 0, cap = 0;
    struct gm_burst cur = {.proc = proc, .gpu = gpu, .before = GM_NONE, .after = GM_NONE};
    for (size_t i = 0; i < p->nevents; i++) {
        const struct gm_event *e = &p->events[i];
        if (e->type == GM_EV_MEASURE && e->gpu == gpu) {
            cur.after = (uint32_t)i;
            out = xgrow(out, &cap, n + 1, sizeof(*out));
            out[n++] = cur;
            cur = (struct gm_burst){
                .proc = proc, .gpu = gpu, .before = (uint32_t)i, .after = GM_NONE};
            continue;
        }
        const struct gm_alloc *a = burst_alloc(p, e, gpu);
        if (a)
            burst_add(&cur, i, a);
    }
    out = xgrow(out, &cap, n + 1, sizeof(*out));
    out[n++] = cur;
    *count = n;
    return out;
}

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The largest set of >= 2 equal sizes of >= 1 MiB among sizes[] (sorted
 * here): its bytes, count and size. */
static int64_t largest_equal_set(int64_t *sizes, size_t n, int64_t *count, int64_t *size)
{
    if (n > 1)
        qsort(sizes, n, sizeof(*sizes), compare_int64);
    int64_t best = 0;
    *count = 0;
    *size = 0;
    for (size_t i = 0; i < n;) {
        size_t k = i;
        while (k < n && sizes[k] == sizes[i])
            k++;
        int64_t c = (int64_t)(k - i);
        int64_t bytes = c > INT64_MAX / (sizes[i] ? sizes[i] : 1) ? INT64_MAX : c * sizes[i];
        if (sizes[i] >= MIB && c >= 2 && bytes >= best) {
            best = bytes;
            *count = c;
            *size = sizes[i];
        }
        i = k;
    }
    return best;
}

/* A KV cache pool: nine tenths or more one set of equal allocations. */
static bool kv_like(const struct gm_model *m, const struct gm_burst *b)
{
    const struct gm_process *p = &m->procs[b->proc];
    int64_t *sizes = xcalloc((size_t)b->count ? (size_t)b->count : 1, sizeof(*sizes));
    size_t n = 0;
    for (uint32_t i = b->first; i <= b->last && i < p->nevents && n < (size_t)b->count; i++) {
        const struct gm_alloc *a = burst_alloc(p, &p->events[i], b->gpu);
        if (a)
            sizes[n++] = a->size;
    }
    int64_t count, size;
    int64_t set = largest_equal_set(sizes, n, &count, &size);
    free(sizes);
    /* set * 10 >= bytes * 9, without overflow */
    return b->bytes > 0 && (double)set >= 0.9 * (double)b->bytes;
}

/* The end of the NVTX range that begins at event i: the next end of the
 * same message and level (model/nvtx.c pairs them), SIZE_MAX if none. */
static size_t range_end(const struct gm_process *p, size_t i)
{
    const struct gm_event *b = &p->events[i];
    for (size_t k = i + 1; k < p->nevents; k++)
        if (p->events[k].type == GM_EV_NVTX_END && p->events[k].a == b->a && p->events[k].b == b->b)
            return k;
    return SIZE_MAX;
}

static bool mentions_weights(const char *message)
{
    return message && strcasestr(message, "weight");
}

/* The weight phase the program named, if any (gm_weight_burst). */
static bool named_weight_phase(const struct gm_model *m, uint32_t proc, uint32_t gpu,
                               struct gm_burst *out)
{
    const struct gm_process *p = &m->procs[proc];
    for (size_t i = 0; i < p->nevents; i++) {
        const struct gm_event *e = &p->events[i];
        if (e->type != GM_EV_NVTX_BEGIN || e->gpu != gpu || e->a < 0 || e->a > UINT32_MAX ||
            !mentions_weights(gm_text(m, (uint32_t)e->a)))
            continue;
        size_t end = range_end(p, i);
        if (end == SIZE_MAX)
            continue;
        struct gm_burst b = {.proc = proc,
                             .gpu = gpu,
                             .before = GM_NONE,
                             .after = GM_NONE,
                             .named = true,
                             .named_text = (uint32_t)e->a};
        for (size_t k = 0; k < p->nevents; k++) {
            const struct gm_event *x = &p->events[k];
            if (x->type == GM_EV_MEASURE && x->gpu == gpu) {
                if (k < i)
                    b.before = (uint32_t)k;
                else if (k > end && b.after == GM_NONE)
                    b.after = (uint32_t)k;
                continue;
            }
            const struct gm_alloc *a = k > i && k < end ? burst_alloc(p, x, gpu) : NULL;
            if (a)
                burst_add(&b, k, a);
        }
        if (b.before != GM_NONE && b.after != GM_NONE && b.count > 0) {
            *out = b;
            return true;
        }
    }
    return false;
}

bool gm_weight_burst(const struct gm_model *m, uint32_t proc, uint32_t gpu, int64_t burst_min,
                     struct gm_burst *out)
{
    if (named_weight_phase(m, proc, gpu, out))
        return true;
    size_t n;
    struct gm_burst *s = stretches(m, proc, gpu, &n);
    size_t best = SIZE_MAX, first = SIZE_MAX, largest = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (s[i].count > 0 && (largest == SIZE_MAX || s[i].bytes > s[largest].bytes))
            largest = i;
        bool bounded = s[i].before != GM_NONE && s[i].after != GM_NONE;
        if (!bounded || s[i].count == 0 || s[i].bytes < burst_min)
            continue;
        if (first == SIZE_MAX)
            first = i;
        if (best == SIZE_MAX || s[i].bytes > s[best].bytes)
            best = i;
    }
    bool found = best != SIZE_MAX;
    if (found && best != first && kv_like(m, &s[best])) {
        size_t earlier = SIZE_MAX;
        for (size_t i = first; i < best; i++) {
            bool bounded = s[i].before != GM_NONE && s[i].after != GM_NONE;
            if (bounded && s[i].count > 0 && s[i].bytes >= burst_min &&
                (earlier == SIZE_MAX || s[i].bytes > s[earlier].bytes))
                earlier = i;
        }
        assert(earlier != SIZE_MAX);
        int64_t skipped = s[best].bytes;
        best = earlier;
        s[best].kv_like_skipped = true;
        s[best].skipped_bytes = skipped;
    }
    if (found)
        *out = s[best];
    else if (largest != SIZE_MAX)
        *out = s[largest];
    else
        *out = (struct gm_burst){.proc = proc, .gpu = gpu, .before = GM_NONE, .after = GM_NONE};
    free(s);
    return found;
}

bool gm_burst_between(const struct gm_model *m, uint32_t proc, uint32_t gpu, uint32_t from,
                      uint32_t to, struct gm_burst *out)
{
    size_t n;
    struct gm_burst *s = stretches(m, proc, gpu, &n);
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (s[i].before == GM_NONE || s[i].after == GM_NONE || s[i].before < from ||
            s[i].after > to || s[i].count == 0)
            continue;
        if (best == SIZE_MAX || s[i].bytes > s[best].bytes)
            best = i;
    }
    if (best != SIZE_MAX)
        *out = s[best];
    free(s);
    return best != SIZE_MAX;
}

uint32_t gm_main_gpu(const struct gm_model *m, uint32_t proc)
{
    const struct gm_process *p = &m->procs[proc];
    uint32_t best = GM_NONE;
    int64_t best_meas = -1, best_bytes = -1;
    for (size_t k = 0; k < p->ngpus; k++) {
        uint32_t g = p->gpus[k];
        int64_t meas = 0, bytes = 0;
        for (size_t i = 0; i < p->nevents; i++)
            if (p->events[i].gpu == g && p->events[i].type == GM_EV_MEASURE)
                meas++;
        for (size_t i = 0; i < p->nallocs; i++)
            if (p->allocs[i].gpu == g && p->allocs[i].category < GM_GPU_CATEGORIES)
                bytes = gm_add(bytes, p->allocs[i].size);
        if (meas > best_meas || (meas == best_meas && bytes > best_bytes)) {
            best = g;
            best_meas = meas;
            best_bytes = bytes;
        }
    }
    return best;
}

bool gm_equal_set_after(const struct gm_model *m, uint32_t proc, uint32_t gpu, uint32_t after,
                        int64_t *count, int64_t *size)
{
    const struct gm_process *p = &m->procs[proc];
    int64_t *sizes = xcalloc(p->nallocs ? p->nallocs : 1, sizeof(*sizes));
    size_t n = 0;
    for (size_t i = 0; i < p->nallocs; i++) {
        const struct gm_alloc *a = &p->allocs[i];
        if (a->gpu == gpu && a->event > after && a->category < GM_GPU_CATEGORIES && a->size >= MIB)
            sizes[n++] = a->size;
    }
    int64_t bytes = largest_equal_set(sizes, n, count, size);
    free(sizes);
    return bytes > 0;
}
