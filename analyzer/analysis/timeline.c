/*
 * timeline.c - the rows of `cutrace timeline` (timeline.h). Rows are
 * collected per GPU while walking its stream once, then sorted by their
 * position in it (a capture group's end row is only known later). Besides
 * the milestones of the model's events, bursts are found here: the weight
 * burst (docs/budget.md, --burst-min's default) and any other burst of at
 * least BURST_MIN_COUNT consecutive top-level GPU allocations (no free or
 * measurement between) totalling BURST_MIN_BYTES, its first and last one;
 * and free bursts, FREE_BURST_MIN consecutive frees of GPU memory with no
 * allocation between (PyTorch's empty_cache), one row at the last.
 */
#include "analysis/timeline.h"
#include "cli.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define BURST_MIN_COUNT 16
#define BURST_MIN_BYTES (256ll << 20)
#define FREE_BURST_MIN  8

/* A burst mark on an event of a process: begin or end of a burst. */
struct mark {
    uint32_t event;
    enum ms_kind kind;
    int64_t count, bytes, first_seq, last_seq;
};

struct proc_state {
    struct mark *marks; /* by event */
    size_t nmarks, next_mark;
    bool capture_open, has_pending;
    struct row pending_end;
    uint32_t pre, post; /* the measurements around the weight burst, GM_NONE */
};

/* ---- bursts ---- */

static void add_mark(struct mark **marks, size_t *n, size_t *cap, struct mark m)
{
    *marks = xgrow(*marks, cap, *n + 1, sizeof(**marks));
    (*marks)[(*n)++] = m;
}

static int compare_marks(const void *a, const void *b)
{
    const struct mark *x = a, *y = b;
    if (x->event != y->event)
        return x->event < y->event ? -1 : 1;
    return (x->kind > y->kind) - (x->kind < y->kind);
}

static bool is_gpu_alloc(const struct gm_alloc *a)
{
    return a->kind == GM_KIND_DEVICE || a->kind == GM_KIND_MANAGED || a->kind == GM_KIND_VMM;
}

/* Weight burst, other allocation bursts and free bursts of one process on one GPU. */
static void find_marks(const struct gm_model *m, uint32_t proc, uint32_t gpu, struct proc_state *st)
{
    const struct gm_process *p = &m->procs[proc];
    size_t cap = 0;
    struct gm_burst wb;
    bool has_wb = gm_weight_burst(m, proc, gpu, GM_BURST_MIN_DEFAULT, &wb);
    st->pre = has_wb ? wb.before : GM_NONE;
    st->post = has_wb ? wb.after : GM_NONE;
    if (has_wb) {
        struct mark mk = {wb.first, MS_WEIGHT_BEGIN,         wb.count,
                          wb.bytes, p->events[wb.first].seq, p->events[wb.last].seq};
        add_mark(&st->marks, &st->nmarks, &cap, mk);
        mk.event = wb.last;
        mk.kind = MS_WEIGHT_END;
        add_mark(&st->marks, &st->nmarks, &cap, mk);
    }
    /* Runs of top-level GPU allocations, broken by a free of GPU memory or
     * a measurement; runs of frees, broken by an allocation. */
    struct {
        int64_t count, bytes;
        uint32_t first, last;
    } run = {0}, frees = {0};
    for (size_t i = 0; i <= p->nevents; i++) {
        const struct gm_event *e = i < p->nevents ? &p->events[i] : NULL;
        bool on_gpu = e && e->gpu == gpu;
        const struct gm_alloc *a =
            on_gpu && (e->type == GM_EV_ALLOC || e->type == GM_EV_FREE) ? &p->allocs[e->a] : NULL;
        bool alloc = a && e->type == GM_EV_ALLOC && a->top && is_gpu_alloc(a);
        bool gpu_free = a && e->type == GM_EV_FREE && e->b == 0 && is_gpu_alloc(a);
        bool breaks_run = !e || gpu_free || (on_gpu && e->type == GM_EV_MEASURE);
        if (breaks_run && run.count > 0) {
            bool overlaps = has_wb && run.first <= wb.last && run.last >= wb.first;
            if (run.count >= BURST_MIN_COUNT && run.bytes >= BURST_MIN_BYTES && !overlaps) {
                struct mark mk = {run.first, MS_BURST_BEGIN,           run.count,
                                  run.bytes, p->events[run.first].seq, p->events[run.last].seq};
                add_mark(&st->marks, &st->nmarks, &cap, mk);
                mk.event = run.last;
                mk.kind = MS_BURST_END;
                add_mark(&st->marks, &st->nmarks, &cap, mk);
            }
            run.count = 0;
            run.bytes = 0;
        }
        bool breaks_frees = !e || (a && e->type == GM_EV_ALLOC && is_gpu_alloc(a));
        if (breaks_frees && frees.count > 0) {
            if (frees.count >= FREE_BURST_MIN) {
                struct mark mk = {frees.last,
                                  MS_FREE_BURST,
                                  frees.count,
                                  frees.bytes,
                                  p->events[frees.first].seq,
                                  p->events[frees.last].seq};
                add_mark(&st->marks, &st->nmarks, &cap, mk);
            }
            frees.count = 0;
            frees.bytes = 0;
        }
        if (alloc) {
            if (run.count == 0)
                run.first = (uint32_t)i;
            run.last = (uint32_t)i;
            run.count++;
            run.bytes = gm_add(run.bytes, a->size);
        }
        if (gpu_free) {
            if (frees.count == 0)
                frees.first = (uint32_t)i;
            frees.last = (uint32_t)i;
            frees.count++;
            frees.bytes = gm_add(frees.bytes, a->size);
        }
    }
    if (st->nmarks > 1)
        qsort(st->marks, st->nmarks, sizeof(*st->marks), compare_marks);
}

/* ---- rows ---- */

static struct row *add_row(struct gpu_report *g, enum ms_kind kind, const struct gm_ref *ref,
                           const struct gm_event *e, int order, const int64_t *live)
{
    g->rows = xgrow(g->rows, &g->cap, g->nrows + 1, sizeof(*g->rows));
    struct row *r = &g->rows[g->nrows++];
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->proc = ref->proc;
    r->event = ref->event;
    r->pos = e->pos;
    r->order = order;
    memcpy(r->live, live, sizeof(r->live));
    return r;
}

static void flush_capture(struct gpu_report *g, struct proc_state *st)
{
    if (st->has_pending) {
        g->rows = xgrow(g->rows, &g->cap, g->nrows + 1, sizeof(*g->rows));
        g->rows[g->nrows++] = st->pending_end;
    }
    st->has_pending = false;
    st->capture_open = false;
}

static int compare_rows(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    return (x->kind > y->kind) - (x->kind < y->kind);
}

static enum ms_kind kind_of_event(enum gm_event_type type, bool *milestone)
{
    *milestone = true;
    switch (type) {
    case GM_EV_FIRST_CALL:
        return MS_FIRST_CALL;
    case GM_EV_COMM_INIT:
        return MS_COMM_INIT;
    case GM_EV_IPC_EXPORT:
        return MS_IPC_EXPORT;
    case GM_EV_IPC_OPEN:
        return MS_IPC_OPEN;
    case GM_EV_MEASURE:
        return MS_MEASUREMENT;
    case GM_EV_COLLECTIVE:
        return MS_COLLECTIVE;
    case GM_EV_FAILED:
        return MS_FAILED;
    case GM_EV_END:
        return MS_END;
    case GM_EV_CAPTURE_BEGIN:
        return MS_CAPTURE_BEGIN;
    case GM_EV_CAPTURE_END:
        return MS_CAPTURE_END;
    case GM_EV_NVTX_MARK:
        return MS_NVTX_MARK;
    case GM_EV_NVTX_BEGIN:
        return MS_NVTX_BEGIN;
    case GM_EV_NVTX_END:
        return MS_NVTX_END;
    default:
        *milestone = false;
        return MS_FIRST_CALL;
    }
}

const struct gm_event *timeline_row_event(const struct gm_model *m, const struct row *r)
{
    return &m->procs[r->proc].events[r->event];
}

const char *timeline_row_sub(const struct gm_model *m, const struct row *r)
{
    const struct gm_event *e = timeline_row_event(m, r);
    if (r->kind == MS_FAILED)
        return gm_api_name(m, e->api);
    if (ms_has_sub(r->kind))
        return e->a >= 0 && (size_t)e->a < m->ntexts ? m->texts[e->a] : "";
    return NULL;
}

void timeline_build_gpu(const struct gm_model *m, struct gpu_report *g)
{
    const struct gm_gpu *gpu = &m->gpus[g->gpu];
    struct proc_state *states = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*states));
    for (size_t k = 0; k < gpu->nprocs; k++)
        find_marks(m, gpu->procs[k], g->gpu, &states[gpu->procs[k]]);
    if (gpu->nstream > 0) {
        const struct gm_ref *first = &gpu->stream[0];
        g->first_t_ns = m->procs[first->proc].events[first->event].t_ns;
    }

    struct gm_walk w;
    gm_walk_init(&w, m, g->gpu);
    const struct gm_ref *ref;
    while ((ref = gm_walk_step(&w)) != NULL) {
        const struct gm_process *p = &m->procs[ref->proc];
        const struct gm_event *e = &p->events[ref->event];
        struct proc_state *st = &states[ref->proc];
        bool milestone;
        enum ms_kind kind = kind_of_event((enum gm_event_type)e->type, &milestone);
        bool has_marks = st->next_mark < st->nmarks && st->marks[st->next_mark].event == ref->event;
        bool capture = milestone && (kind == MS_CAPTURE_BEGIN || kind == MS_CAPTURE_END);
        if ((milestone && !capture) || has_marks)
            flush_capture(g, st);
        /* Burst begins come before the event's own row, ends after it. */
        for (; st->next_mark < st->nmarks && st->marks[st->next_mark].event == ref->event;
             st->next_mark++) {
            const struct mark *mk = &st->marks[st->next_mark];
            bool end =
                mk->kind == MS_WEIGHT_END || mk->kind == MS_BURST_END || mk->kind == MS_FREE_BURST;
            struct row *r = add_row(g, mk->kind, ref, e, end ? 2 : 0, w.live);
            r->count = mk->count;
            r->bytes = mk->bytes;
            r->first_seq = mk->first_seq;
            r->last_seq = mk->last_seq;
        }
        if (!milestone)
            continue;
        if (kind == MS_CAPTURE_BEGIN) {
            if (!st->capture_open)
                add_row(g, kind, ref, e, 1, w.live);
            st->capture_open = true;
        } else if (kind == MS_CAPTURE_END) {
            int64_t graphs = st->has_pending ? st->pending_end.count + 1 : 1;
            memset(&st->pending_end, 0, sizeof(st->pending_end));
            st->pending_end = (struct row){.kind = kind,
                                           .proc = ref->proc,
                                           .event = ref->event,
                                           .pos = e->pos,
                                           .order = 1,
                                           .count = graphs};
            memcpy(st->pending_end.live, w.live, sizeof(w.live));
            st->has_pending = true;
            st->capture_open = true;
        } else {
            struct row *r = add_row(g, kind, ref, e, 1, w.live);
            if (kind == MS_MEASUREMENT && ref->event == st->pre)
                r->tag = MS_TAG_PRE;
            else if (kind == MS_MEASUREMENT && ref->event == st->post)
                r->tag = MS_TAG_POST;
        }
    }
    for (size_t k = 0; k < gpu->nprocs; k++)
        flush_capture(g, &states[gpu->procs[k]]);
    gm_walk_free(&w);
    for (size_t i = 0; i < m->nprocs; i++)
        free(states[i].marks);
    free(states);
    if (g->nrows > 1)
        qsort(g->rows, g->nrows, sizeof(*g->rows), compare_rows);
    /* Numbered as milestones.h says: failed calls also among their api's,
     * NVTX milestones among their message's, as `cutrace diff` names them. */
    uint32_t seen[MS_KINDS] = {0};
    uint32_t *failed = xcalloc(m->napis + 1, sizeof(*failed));
    uint32_t *nvtx[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < g->nrows; i++) {
        struct row *r = &g->rows[i];
        r->n = ++seen[r->kind];
        if (r->kind == MS_FAILED) {
            uint32_t api = timeline_row_event(m, r)->api;
            r->n_api = ++failed[api < m->napis ? api : m->napis];
        } else if (ms_has_sub(r->kind)) {
            int k = r->kind - MS_NVTX_MARK;
            assert(k >= 0 && k < 3);
            if (!nvtx[k])
                nvtx[k] = xcalloc(m->ntexts + 1, sizeof(*nvtx[k]));
            int64_t text = timeline_row_event(m, r)->a;
            r->n_api = ++nvtx[k][text >= 0 && (size_t)text < m->ntexts ? (size_t)text : m->ntexts];
        }
    }
    free(failed);
    for (int k = 0; k < 3; k++)
        free(nvtx[k]);
    for (size_t i = 0; i < g->nrows; i++)
        for (int c = 0; c < GM_CATEGORIES; c++)
            if (g->rows[i].live[c] > g->peak[c])
                g->peak[c] = g->rows[i].live[c];
}

void timeline_keep_listed(struct gpu_report *g, const struct gm_filter *f)
{
    size_t kept = 0;
    for (size_t i = 0; i < g->nrows; i++)
        if (gm_filter_proc(f, g->rows[i].proc))
            g->rows[kept++] = g->rows[i];
    g->nrows = kept;
}
