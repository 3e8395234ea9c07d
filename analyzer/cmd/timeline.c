/*
 * cmd_timeline.c - `cutrace timeline DIR [--gpu UUID|INDEX] [--json]`: per
 * physical GPU, one row at each milestone of every process using it, with
 * the live bytes per category (docs/budget.md) at that moment and, at each
 * cudaMemGetInfo, what the GPU said was free and how much of the used
 * memory the traces do not explain.
 *
 * Milestones, derived from the model (gpumodel.h) without any hint from
 * the user:
 *   - the first call of each process on the GPU;
 *   - every NCCL communicator init (hash, rank/nranks, result);
 *   - IPC setup: each process's first handle export and first open;
 *   - every measurement (top-level cudaMemGetInfo / cuMemGetInfo_v2);
 *   - the weight burst (docs/budget.md, --burst-min's default) and any other
 *     burst of >= 16 consecutive top-level GPU allocations (no free or
 *     measurement between) totalling >= 256 MiB: its first and last one;
 *   - free bursts: >= 8 consecutive frees of GPU memory with no allocation
 *     between (PyTorch's empty_cache), one row at the last;
 *   - CUDA-graph capture: back-to-back captures with no other milestone of
 *     the process between are one begin row and one end row (N graphs);
 *   - each process's first NCCL collective or p2p call;
 *   - every failed call (text lists the first 50 per GPU, JSON all);
 *   - the last event of each process, and whether it exited or was killed.
 *
 * Rows are collected per GPU while walking its stream once, then sorted
 * by their position in it (a capture group's end row is only known later).
 */
#include "replay/budget.h"
#include "cli.h"
#include "model/errnames.h"
#include "model/filter.h"
#include "model/gpumodel.h"
#include "out/csv.h"
#include "out/json.h"
#include "out/table.h"
#include "model/trace.h"
#include "model/traceset.h"
#include "out/units.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BURST_MIN_COUNT  16
#define BURST_MIN_BYTES  (256ll << 20)
#define FREE_BURST_MIN   8
#define TEXT_FAILED_ROWS 50
#define MILESTONE_MIN_W  30
#define COLUMN_W         10

static const char usage[] =
    "usage: cutrace timeline [options] DIR\n"
    "\n"
    "Per physical GPU, every process's milestones in time order (first call,\n"
    "NCCL inits, IPC setup, cudaMemGetInfo, weight and other allocation bursts,\n"
    "free bursts, CUDA-graph capture, first collective, failed calls, end), with\n"
    "the live bytes per category at each (runtime, vmm, nccl, ipc_exported,\n"
    "managed; peer and host apart) and, at each cudaMemGetInfo, free, used and\n"
    "the memory the traces do not explain.\n"
    "\n"
    "options:\n" CLI_FILTER_HELP CLI_FORMAT_HELP CLI_HELP_HELP "\n"
    "Filters list the processes' milestones; live bytes stay the whole GPU's.\n"
    "Tables for --csv: milestones (one row per milestone).\n"
    "\n" CLI_EXIT_HELP("a failed call, or a free of memory never allocated or\n"
                       "     already freed, among the processes listed");

static const char *const csv_tables[] = {"milestones", NULL};

enum row_kind {
    ROW_FIRST_CALL,
    ROW_COMM_INIT,
    ROW_IPC_EXPORT,
    ROW_IPC_OPEN,
    ROW_MEASUREMENT,
    ROW_WEIGHT_BEGIN,
    ROW_WEIGHT_END,
    ROW_BURST_BEGIN,
    ROW_BURST_END,
    ROW_FREE_BURST,
    ROW_CAPTURE_BEGIN,
    ROW_CAPTURE_END,
    ROW_COLLECTIVE,
    ROW_FAILED,
    ROW_END,
};

static const char *const row_keys[] = {
    "first_call",         "comm_init",        "ipc_export",       "ipc_open",    "measurement",
    "weight_burst_begin", "weight_burst_end", "burst_begin",      "burst_end",   "free_burst",
    "capture_begin",      "capture_end",      "first_collective", "failed_call", "process_end",
};

struct row {
    enum row_kind kind;
    uint32_t proc, event;
    uint64_t pos;
    int order; /* within one event: burst begins, the event, burst ends */
    int64_t live[GM_CATEGORIES];
    int64_t count, bytes, first_seq, last_seq; /* bursts; count = graphs for captures */
};

/* A burst mark on an event of a process: begin or end of a burst. */
struct mark {
    uint32_t event;
    enum row_kind kind;
    int64_t count, bytes, first_seq, last_seq;
};

struct proc_state {
    struct mark *marks; /* by event */
    size_t nmarks, next_mark;
    bool capture_open, has_pending;
    struct row pending_end;
};

struct gpu_report {
    uint32_t gpu;
    struct row *rows;
    size_t nrows, cap;
    int64_t peak[GM_CATEGORIES]; /* over the rows */
    int64_t first_t_ns;
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
    if (has_wb) {
        struct mark mk = {wb.first, ROW_WEIGHT_BEGIN,        wb.count,
                          wb.bytes, p->events[wb.first].seq, p->events[wb.last].seq};
        add_mark(&st->marks, &st->nmarks, &cap, mk);
        mk.event = wb.last;
        mk.kind = ROW_WEIGHT_END;
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
                struct mark mk = {run.first, ROW_BURST_BEGIN,          run.count,
                                  run.bytes, p->events[run.first].seq, p->events[run.last].seq};
                add_mark(&st->marks, &st->nmarks, &cap, mk);
                mk.event = run.last;
                mk.kind = ROW_BURST_END;
                add_mark(&st->marks, &st->nmarks, &cap, mk);
            }
            run.count = 0;
            run.bytes = 0;
        }
        bool breaks_frees = !e || (a && e->type == GM_EV_ALLOC && is_gpu_alloc(a));
        if (breaks_frees && frees.count > 0) {
            if (frees.count >= FREE_BURST_MIN) {
                struct mark mk = {frees.last,
                                  ROW_FREE_BURST,
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

static struct row *add_row(struct gpu_report *g, enum row_kind kind, const struct gm_ref *ref,
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

static enum row_kind kind_of_event(enum gm_event_type type, bool *milestone)
{
    *milestone = true;
    switch (type) {
    case GM_EV_FIRST_CALL:
        return ROW_FIRST_CALL;
    case GM_EV_COMM_INIT:
        return ROW_COMM_INIT;
    case GM_EV_IPC_EXPORT:
        return ROW_IPC_EXPORT;
    case GM_EV_IPC_OPEN:
        return ROW_IPC_OPEN;
    case GM_EV_MEASURE:
        return ROW_MEASUREMENT;
    case GM_EV_COLLECTIVE:
        return ROW_COLLECTIVE;
    case GM_EV_FAILED:
        return ROW_FAILED;
    case GM_EV_END:
        return ROW_END;
    case GM_EV_CAPTURE_BEGIN:
        return ROW_CAPTURE_BEGIN;
    case GM_EV_CAPTURE_END:
        return ROW_CAPTURE_END;
    default:
        *milestone = false;
        return ROW_FIRST_CALL;
    }
}

static void build_gpu(const struct gm_model *m, struct gpu_report *g)
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
        enum row_kind kind = kind_of_event((enum gm_event_type)e->type, &milestone);
        bool has_marks = st->next_mark < st->nmarks && st->marks[st->next_mark].event == ref->event;
        bool capture = milestone && (kind == ROW_CAPTURE_BEGIN || kind == ROW_CAPTURE_END);
        if ((milestone && !capture) || has_marks)
            flush_capture(g, st);
        /* Burst begins come before the event's own row, ends after it. */
        for (; st->next_mark < st->nmarks && st->marks[st->next_mark].event == ref->event;
             st->next_mark++) {
            const struct mark *mk = &st->marks[st->next_mark];
            bool end = mk->kind == ROW_WEIGHT_END || mk->kind == ROW_BURST_END ||
                       mk->kind == ROW_FREE_BURST;
            struct row *r = add_row(g, mk->kind, ref, e, end ? 2 : 0, w.live);
            r->count = mk->count;
            r->bytes = mk->bytes;
            r->first_seq = mk->first_seq;
            r->last_seq = mk->last_seq;
        }
        if (!milestone)
            continue;
        if (kind == ROW_CAPTURE_BEGIN) {
            if (!st->capture_open)
                add_row(g, kind, ref, e, 1, w.live);
            st->capture_open = true;
        } else if (kind == ROW_CAPTURE_END) {
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
            add_row(g, kind, ref, e, 1, w.live);
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
    for (size_t i = 0; i < g->nrows; i++)
        for (int c = 0; c < GM_CATEGORIES; c++)
            if (g->rows[i].live[c] > g->peak[c])
                g->peak[c] = g->rows[i].live[c];
}

/* ---- shared wording ---- */

static const struct gm_event *row_event(const struct gm_model *m, const struct row *r)
{
    return &m->procs[r->proc].events[r->event];
}

static const char *end_text(const struct gm_process *p)
{
    if (p->exited)
        return "exited";
    if (p->end_state && strcmp(p->end_state, "killed") == 0)
        return "killed";
    return "still running or killed";
}

static char *hash_hex(char *buf, size_t size, uint64_t hash)
{
    snprintf(buf, size, "%016" PRIx64, hash);
    return buf;
}

/* The milestone's words, for the text report and JSON's "text". */
static char *row_text(const struct gm_model *m, const struct row *r)
{
    const struct gm_process *p = &m->procs[r->proc];
    const struct gm_event *e = row_event(m, r);
    const char *api = gm_api_name(m, e->api);
    char size[UNITS_BUF], hash[24], res[64];
    switch (r->kind) {
    case ROW_FIRST_CALL:
        return xasprintf("first call (%s)", api);
    case ROW_COMM_INIT: {
        const struct gm_comm *c = &p->comms[e->a];
        if (c->result != 0)
            return xasprintf("NCCL init %s rank %" PRId64 "/%" PRId64 " failed: %s",
                             hash_hex(hash, sizeof(hash), c->hash), c->rank, c->nranks,
                             result_describe(res, sizeof(res), LAYER_NCCL, c->result));
        return xasprintf("NCCL init %s rank %" PRId64 "/%" PRId64,
                         hash_hex(hash, sizeof(hash), c->hash), c->rank, c->nranks);
    }
    case ROW_IPC_EXPORT:
        return xasprintf("first IPC export (%s)", api);
    case ROW_IPC_OPEN:
        return xasprintf("first IPC open (%s)", api);
    case ROW_MEASUREMENT:
        return xasprintf("measurement (%s)", api);
    case ROW_WEIGHT_BEGIN:
        return xasprintf("weight burst begins: %" PRId64 " allocs, %s", r->count,
                         gm_format_size(size, sizeof(size), r->bytes));
    case ROW_WEIGHT_END:
        return xasprintf("weight burst ends");
    case ROW_BURST_BEGIN:
        return xasprintf("allocation burst begins: %" PRId64 " allocs, %s", r->count,
                         gm_format_size(size, sizeof(size), r->bytes));
    case ROW_BURST_END:
        return xasprintf("allocation burst ends");
    case ROW_FREE_BURST:
        return xasprintf("free burst (empty_cache): %" PRId64 " frees, %s", r->count,
                         gm_format_size(size, sizeof(size), r->bytes));
    case ROW_CAPTURE_BEGIN:
        return xasprintf("CUDA-graph capture begins");
    case ROW_CAPTURE_END:
        return xasprintf("CUDA-graph capture ends (%" PRId64 " graph%s)", r->count,
                         r->count == 1 ? "" : "s");
    case ROW_COLLECTIVE:
        return xasprintf("first collective (%s)", api);
    case ROW_FAILED:
        if (e->b > 0)
            return xasprintf("failed: %s %s: %s", api, gm_format_size(size, sizeof(size), e->b),
                             result_describe(res, sizeof(res), (enum result_layer)e->layer, e->a));
        return xasprintf("failed: %s: %s", api,
                         result_describe(res, sizeof(res), (enum result_layer)e->layer, e->a));
    case ROW_END:
        return xasprintf("last event: %s", end_text(p));
    }
    return xstrdup("?");
}

/* ---- choosing GPUs ---- */

/* ---- text ---- */

/* Display order of the GPU categories (the brief's), then peer and host. */
static const enum gm_category display_order[] = {GM_CAT_RUNTIME, GM_CAT_VMM, GM_CAT_NCCL,
                                                 GM_CAT_IPC_EXPORTED, GM_CAT_MANAGED};
static const char *const short_names[] = {"nccl",    "ipc_exp", "vmm", "runtime",
                                          "managed", "peer",    "host"};

struct column {
    const char *header;
    unsigned cats; /* bit per category summed in it; 0: traced (all GPU ones) */
    size_t width;
};

static int64_t column_value(const struct column *c, const int64_t *live)
{
    if (c->cats == 0)
        return gm_traced(live);
    int64_t sum = 0;
    for (int k = 0; k < GM_CATEGORIES; k++)
        if (c->cats & (1u << k))
            sum = gm_add(sum, live[k]);
    return sum;
}

static void print_gpu_text(const struct gm_model *m, const struct gpu_report *g, FILE *out)
{
    const struct gm_gpu *gpu = &m->gpus[g->gpu];
    char buf[UNITS_BUF], name[64];
    /* Names come from the traces: any length, wrapped to the report's width. */
    char total[UNITS_BUF + 2] = "";
    if (gpu->total >= 0)
        snprintf(total, sizeof(total), ", %s",
                 format_bytes(buf, sizeof(buf), (uint64_t)gpu->total));
    char *heading = xasprintf("GPU %" PRIu32 ": %s (%s%s) on %s", g->gpu, gpu->key,
                              gpu->name[0] ? gpu->name : "unknown GPU", total,
                              m->clocks[gpu->clock].host[0] ? m->clocks[gpu->clock].host : "?");
    fputc('\n', out);
    text_print_wrapped(out, heading, 0);
    free(heading);
    char *procs = xstrdup("processes:");
    for (size_t k = 0; k < gpu->nprocs; k++) {
        const struct gm_process *p = &m->procs[gpu->procs[k]];
        char *next;
        if (p->has_rank)
            next = xasprintf("%s%s %" PRId64 " (rank %" PRId64 ", %s)", procs, k ? "," : "", p->pid,
                             p->rank, end_text(p));
        else
            next = xasprintf("%s%s %" PRId64 " (%s)", procs, k ? "," : "", p->pid, end_text(p));
        free(procs);
        procs = next;
    }
    text_print_wrapped(out, procs, 2);
    free(procs);

    /* Columns: the categories seen, then what fits. */
    struct column cols[GM_CATEGORIES + 2];
    size_t ncols = 0;
    unsigned other = 0;
    size_t gpu_cats = 0;
    for (size_t i = 0; i < sizeof(display_order) / sizeof(display_order[0]); i++)
        if (g->peak[display_order[i]] > 0) {
            cols[ncols++] =
                (struct column){short_names[display_order[i]], 1u << display_order[i], COLUMN_W};
            gpu_cats++;
        }
    if (gpu_cats != 1)
        cols[ncols++] = (struct column){"traced", 0, COLUMN_W};
    bool peer = g->peak[GM_CAT_PEER] > 0, host = g->peak[GM_CAT_HOST] > 0;
    bool apart = false;
    if (peer)
        cols[ncols++] = (struct column){"peer", 1u << GM_CAT_PEER, COLUMN_W};
    if (host)
        cols[ncols++] = (struct column){"host", 1u << GM_CAT_HOST, COLUMN_W};

    size_t time_w = 4, pid_w = 8, text_w = 9;
    size_t shown_failed = 0;
    char **texts = xcalloc(g->nrows ? g->nrows : 1, sizeof(*texts));
    bool *shown = xcalloc(g->nrows ? g->nrows : 1, sizeof(*shown));
    size_t hidden_failed = 0;
    for (size_t i = 0; i < g->nrows; i++) {
        const struct row *r = &g->rows[i];
        if (r->kind == ROW_FAILED && shown_failed++ >= TEXT_FAILED_ROWS) {
            hidden_failed++;
            continue;
        }
        shown[i] = true;
        texts[i] = row_text(m, r);
        size_t w = text_width(texts[i]);
        if (w > text_w)
            text_w = w;
        const struct gm_event *e = row_event(m, r);
        w = strlen(format_offset(buf, sizeof(buf), e->t_ns - g->first_t_ns));
        if (w > time_w)
            time_w = w;
    }
    /* Fit in the report's width: peer and host go to a line of their own,
     * then the smallest categories share an "other" column. */
    size_t limit = table_width();
    for (;;) {
        size_t width = 2 + time_w + 2 + pid_w + 2 + MILESTONE_MIN_W;
        for (size_t c = 0; c < ncols; c++)
            width += 2 + cols[c].width;
        if (width <= limit)
            break;
        if (ncols > 0 && cols[ncols - 1].cats & ((1u << GM_CAT_PEER) | (1u << GM_CAT_HOST))) {
            ncols--;
            apart = true;
            continue;
        }
        /* merge the category column with the smallest peak into other */
        size_t smallest = SIZE_MAX;
        for (size_t c = 0; c < ncols; c++)
            if (cols[c].cats && !(cols[c].cats & other) &&
                (smallest == SIZE_MAX ||
                 column_value(&cols[c], g->peak) < column_value(&cols[smallest], g->peak)))
                smallest = c;
        if (smallest == SIZE_MAX || gpu_cats < 2)
            break;
        other |= cols[smallest].cats;
        memmove(&cols[smallest], &cols[smallest + 1], (ncols - smallest - 1) * sizeof(*cols));
        ncols--;
        gpu_cats--;
        bool has_other = false;
        for (size_t c = 0; c < ncols; c++)
            if (strcmp(cols[c].header, "other") == 0) {
                cols[c].cats = other;
                has_other = true;
            }
        if (!has_other) {
            /* before traced, which stays last of the GPU columns */
            size_t at = 0;
            while (at < ncols && cols[at].cats && cols[at].cats != (1u << GM_CAT_PEER) &&
                   cols[at].cats != (1u << GM_CAT_HOST))
                at++;
            memmove(&cols[at + 1], &cols[at], (ncols - at) * sizeof(*cols));
            cols[at] = (struct column){"other", other, COLUMN_W};
            ncols++;
        }
    }
    size_t used = 2 + time_w + 2 + pid_w + 2;
    for (size_t c = 0; c < ncols; c++)
        used += 2 + cols[c].width;
    size_t milestone_w = limit > used ? limit - used : MILESTONE_MIN_W;
    if (milestone_w < MILESTONE_MIN_W)
        milestone_w = MILESTONE_MIN_W;
    if (milestone_w > text_w)
        milestone_w = text_w;

    fprintf(out, "  %-*s  %-*s  ", (int)time_w, "time", (int)pid_w, "pid/rank");
    text_print(out, "milestone", milestone_w, milestone_w);
    for (size_t c = 0; c < ncols; c++)
        fprintf(out, "  %*s", (int)cols[c].width, cols[c].header);
    fputc('\n', out);
    for (size_t i = 0; i < g->nrows; i++) {
        if (!shown[i])
            continue;
        const struct row *r = &g->rows[i];
        const struct gm_process *p = &m->procs[r->proc];
        const struct gm_event *e = row_event(m, r);
        char who[48];
        if (p->has_rank)
            snprintf(who, sizeof(who), "%" PRId64 "/%" PRId64, p->pid, p->rank);
        else
            snprintf(who, sizeof(who), "%" PRId64 "/-", p->pid);
        fprintf(out, "  %-*s  %-*s  ", (int)time_w,
                format_offset(buf, sizeof(buf), e->t_ns - g->first_t_ns), (int)pid_w, who);
        /* A milestone's words carry numbers: too long, they wrap under it. */
        const char *rest = texts[i];
        size_t cut = text_break(rest, milestone_w);
        char *first = xstrndup(rest, cut);
        text_print(out, first, milestone_w, milestone_w);
        free(first);
        for (size_t c = 0; c < ncols; c++)
            fprintf(out, "  %*s", (int)cols[c].width,
                    format_size(buf, sizeof(buf), column_value(&cols[c], r->live)));
        fputc('\n', out);
        for (rest += cut; *rest;) {
            while (*rest == ' ')
                rest++;
            cut = text_break(rest, milestone_w - 2);
            char *line = xstrndup(rest, cut);
            fprintf(out, "  %*s    ", (int)(time_w + 2 + pid_w), "");
            text_print(out, line, milestone_w, 0);
            fputc('\n', out);
            free(line);
            rest += cut;
        }
        if (r->kind == ROW_MEASUREMENT) {
            char f[UNITS_BUF], t[UNITS_BUF], u[UNITS_BUF], x[UNITS_BUF];
            int64_t used_bytes = gm_sub(e->b, e->a);
            char *line =
                xasprintf("free %s of %s, used %s, unexplained %s", format_size(f, sizeof(f), e->a),
                          format_size(t, sizeof(t), e->b), format_size(u, sizeof(u), used_bytes),
                          format_size(x, sizeof(x), gm_sub(used_bytes, gm_traced(r->live))));
            text_print_wrapped(out, line, 2 + time_w + 2 + pid_w + 2);
            free(line);
        }
    }
    if (hidden_failed)
        fprintf(out, "  ... and %zu more failed call%s (--json lists every one)\n", hidden_failed,
                hidden_failed == 1 ? "" : "s");
    if (other) {
        fputs("  other:", out);
        for (int k = 0; k < GM_GPU_CATEGORIES; k++)
            if (other & (1u << k))
                fprintf(out, " %s", gm_category_key((enum gm_category)k));
        fputc('\n', out);
    }
    if (apart && (peer || host)) {
        fputs("  not GPU memory, shown apart:", out);
        if (peer)
            fprintf(out, " peer memory mapped here up to %s%s",
                    format_size(buf, sizeof(buf), g->peak[GM_CAT_PEER]), host ? "," : "");
        if (host)
            fprintf(out, " pinned host memory up to %s",
                    format_size(buf, sizeof(buf), g->peak[GM_CAT_HOST]));
        fputc('\n', out);
    }
    (void)name;
    for (size_t i = 0; i < g->nrows; i++)
        free(texts[i]);
    free(texts);
    free(shown);
}

static size_t count_hosts(const struct gm_model *m)
{
    size_t hosts = 0;
    for (size_t i = 0; i < m->nclocks; i++) {
        bool again = false;
        for (size_t k = 0; k < i; k++)
            again |= strcmp(m->clocks[k].host, m->clocks[i].host) == 0;
        hosts += !again;
    }
    return hosts;
}

static void print_text(const struct gm_model *m, const char *path, struct gpu_report *gpus,
                       size_t ngpus, FILE *out)
{
    size_t hosts = count_hosts(m);
    char *line;
    if (m->ngpus == 0)
        line = xasprintf("cutrace timeline of %s: no GPU events in %zu process%s", path, m->nprocs,
                         m->nprocs == 1 ? "" : "es");
    else
        line = xasprintf("cutrace timeline of %s: %zu GPU%s, %zu process%s, %zu host%s", path,
                         m->ngpus, m->ngpus == 1 ? "" : "s", m->nprocs, m->nprocs == 1 ? "" : "es",
                         hosts, hosts == 1 ? "" : "s");
    text_print_wrapped(out, line, 0);
    free(line);
    if (m->ngpus > 0)
        text_print_wrapped(out,
                           "time: since the GPU's first event; sizes: live bytes per category "
                           "after each milestone",
                           2);
    for (size_t i = 0; i < ngpus; i++)
        print_gpu_text(m, &gpus[i], out);
    if (m->nnotes)
        fputc('\n', out);
    for (size_t i = 0; i < m->nnotes; i++) {
        char *note = xasprintf("note: %s", m->notes[i]);
        text_print_wrapped(out, note, 0);
        free(note);
    }
}

/* ---- JSON ---- */

static void json_live(struct json_writer *w, const int64_t *live)
{
    json_key(w, "live");
    json_object_begin(w);
    for (int c = 0; c < GM_CATEGORIES; c++)
        json_kv_int(w, gm_category_key((enum gm_category)c), live[c]);
    json_object_end(w);
    json_kv_int(w, "traced_bytes", gm_traced(live));
}

static void print_row_json(struct json_writer *w, const struct gm_model *m,
                           const struct gpu_report *g, const struct row *r)
{
    const struct gm_process *p = &m->procs[r->proc];
    const struct gm_event *e = row_event(m, r);
    json_object_begin(w);
    json_kv_string(w, "kind", row_keys[r->kind]);
    json_kv_int(w, "seq", e->seq);
    json_kv_int(w, "pid", p->pid);
    json_kv_opt_int(w, "rank", p->has_rank, p->rank);
    json_kv_string(w, "file", p->trace->file);
    json_kv_int(w, "t_ns", e->t_ns);
    json_kv_int(w, "at_ns", gm_sub(e->t_ns, g->first_t_ns));
    json_kv_string(w, "api", e->type == GM_EV_END ? NULL : gm_api_name(m, e->api));
    char *text = row_text(m, r);
    json_kv_string(w, "text", text);
    free(text);
    char hash[24], res[64];
    switch (r->kind) {
    case ROW_COMM_INIT: {
        const struct gm_comm *c = &p->comms[e->a];
        json_key(w, "communicator");
        json_object_begin(w);
        json_kv_string(w, "unique_id_hash", hash_hex(hash, sizeof(hash), c->hash));
        json_kv_int(w, "rank", c->rank);
        json_kv_int(w, "nranks", c->nranks);
        json_kv_int(w, "result", c->result);
        json_kv_string(w, "result_name", result_name(LAYER_NCCL, c->result));
        json_object_end(w);
        break;
    }
    case ROW_WEIGHT_BEGIN:
    case ROW_WEIGHT_END:
    case ROW_BURST_BEGIN:
    case ROW_BURST_END:
    case ROW_FREE_BURST:
        json_key(w, "burst");
        json_object_begin(w);
        json_kv_int(w, r->kind == ROW_FREE_BURST ? "frees" : "allocations", r->count);
        json_kv_int(w, "bytes", r->bytes);
        json_kv_int(w, "first_seq", r->first_seq);
        json_kv_int(w, "last_seq", r->last_seq);
        json_object_end(w);
        break;
    case ROW_CAPTURE_END:
        json_kv_int(w, "graphs", r->count);
        break;
    case ROW_FAILED:
        json_kv_int(w, "result", e->a);
        json_kv_string(w, "result_name", result_name((enum result_layer)e->layer, e->a));
        json_kv_int(w, "size", e->b);
        break;
    case ROW_END:
        json_kv_string(w, "end_state", p->end_state);
        json_kv_bool(w, "exited", p->exited);
        break;
    default:
        break;
    }
    (void)res;
    json_live(w, r->live);
    json_key(w, "measurement");
    if (r->kind == ROW_MEASUREMENT) {
        int64_t used_bytes = gm_sub(e->b, e->a);
        json_object_begin(w);
        json_kv_int(w, "free_bytes", e->a);
        json_kv_int(w, "total_bytes", e->b);
        json_kv_int(w, "used_bytes", used_bytes);
        json_kv_int(w, "unexplained_bytes", gm_sub(used_bytes, gm_traced(r->live)));
        json_object_end(w);
    } else {
        json_null(w);
    }
    json_object_end(w);
}

static void print_json(const struct gm_model *m, const char *path, struct gpu_report *gpus,
                       size_t ngpus, FILE *out)
{
    struct json_writer w;
    json_init(&w, out);
    json_object_begin(&w);
    json_kv_string(&w, "cutrace_version", CUTRACE_VERSION);
    json_kv_string(&w, "report", "timeline");
    json_kv_string(&w, "path", path);
    json_key(&w, "gpus");
    json_array_begin(&w);
    for (size_t i = 0; i < ngpus; i++) {
        const struct gpu_report *g = &gpus[i];
        const struct gm_gpu *gpu = &m->gpus[g->gpu];
        json_object_begin(&w);
        json_kv_int(&w, "index", g->gpu);
        json_kv_string(&w, "uuid", gpu->uuid);
        json_kv_string(&w, "key", gpu->key);
        json_kv_string(&w, "identified_by", gpu->uuid ? "uuid" : "host_and_ordinal");
        json_kv_string(&w, "name", gpu->name[0] ? gpu->name : NULL);
        json_kv_opt_int(&w, "total_bytes", gpu->total >= 0, gpu->total);
        json_kv_string(&w, "host", m->clocks[gpu->clock].host);
        json_kv_string(&w, "boot_id", m->clocks[gpu->clock].boot_id);
        json_kv_int(&w, "first_t_ns", g->first_t_ns);
        json_key(&w, "processes");
        json_array_begin(&w);
        for (size_t k = 0; k < gpu->nprocs; k++) {
            const struct gm_process *p = &m->procs[gpu->procs[k]];
            json_object_begin(&w);
            json_kv_int(&w, "pid", p->pid);
            json_kv_opt_int(&w, "rank", p->has_rank, p->rank);
            json_kv_string(&w, "file", p->trace->file);
            json_kv_string(&w, "end_state", p->end_state);
            json_kv_bool(&w, "exited", p->exited);
            json_object_end(&w);
        }
        json_array_end(&w);
        json_key(&w, "peak_live");
        json_object_begin(&w);
        for (int c = 0; c < GM_CATEGORIES; c++)
            json_kv_int(&w, gm_category_key((enum gm_category)c), g->peak[c]);
        json_object_end(&w);
        json_key(&w, "milestones");
        json_array_begin(&w);
        for (size_t r = 0; r < g->nrows; r++)
            print_row_json(&w, m, g, &g->rows[r]);
        json_array_end(&w);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_key(&w, "notes");
    json_array_begin(&w);
    for (size_t i = 0; i < m->nnotes; i++)
        json_string(&w, m->notes[i]);
    json_array_end(&w);
    json_key(&w, "totals");
    json_object_begin(&w);
    json_kv_uint(&w, "processes", m->nprocs);
    json_kv_uint(&w, "gpus", m->ngpus);
    json_kv_uint(&w, "hosts", count_hosts(m));
    json_object_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

/* ---- CSV: one row per milestone ---- */

static void print_csv(const struct gm_model *m, struct gpu_report *gpus, size_t ngpus, FILE *out)
{
    static const char *const head[] = {"gpu",        "gpu_uuid",      "pid",
                                       "rank",       "kind",          "seq",
                                       "t_ns",       "at_ns",         "api",
                                       "text",       "nccl_bytes",    "ipc_exported_bytes",
                                       "vmm_bytes",  "runtime_bytes", "managed_bytes",
                                       "peer_bytes", "host_bytes",    "traced_bytes",
                                       "free_bytes", "total_bytes",   "unexplained_bytes"};
    static_assert(GM_CATEGORIES == 7, "one CSV column per category");
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    for (size_t i = 0; i < ngpus; i++) {
        const struct gpu_report *g = &gpus[i];
        for (size_t k = 0; k < g->nrows; k++) {
            const struct row *r = &g->rows[k];
            const struct gm_process *p = &m->procs[r->proc];
            const struct gm_event *e = row_event(m, r);
            csv_uint(&w, g->gpu);
            csv_string(&w, m->gpus[g->gpu].uuid);
            csv_int(&w, p->pid);
            csv_opt_int(&w, p->has_rank, p->rank);
            csv_string(&w, row_keys[r->kind]);
            csv_int(&w, e->seq);
            csv_int(&w, e->t_ns);
            csv_int(&w, gm_sub(e->t_ns, g->first_t_ns));
            csv_string(&w, e->type == GM_EV_END ? NULL : gm_api_name(m, e->api));
            char *text = row_text(m, r);
            csv_string(&w, text);
            free(text);
            for (int c = 0; c < GM_CATEGORIES; c++)
                csv_int(&w, r->live[c]);
            csv_int(&w, gm_traced(r->live));
            bool measured = r->kind == ROW_MEASUREMENT;
            csv_opt_int(&w, measured, e->a);
            csv_opt_int(&w, measured, e->b);
            csv_opt_int(&w, measured, gm_sub(gm_sub(e->b, e->a), gm_traced(r->live)));
            csv_end_row(&w);
        }
    }
}

/* --fail-on-problem: a failed call, an unknown or a double free among the
 * processes listed. */
static bool found_problem(const struct gm_model *m, const struct gm_filter *f,
                          const struct gpu_report *gpus, size_t ngpus)
{
    bool found = false;
    for (size_t i = 0; i < ngpus; i++)
        for (size_t k = 0; k < gpus[i].nrows; k++)
            found |= gpus[i].rows[k].kind == ROW_FAILED;
    for (size_t p = 0; p < m->nprocs; p++)
        found |= gm_filter_proc(f, (uint32_t)p) &&
                 (m->procs[p].unknown_frees > 0 || m->procs[p].double_frees > 0);
    return found;
}

int cmd_timeline(int argc, char **argv)
{
    static const struct option options[] = {
        CLI_FILTER_OPTIONS,
        CLI_FORMAT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct cli_report_opts o;
    cli_report_init(&o);
    int c;
    while ((c = cli_getopt(argc, argv, "h", options, usage)) != -1) {
        if (cli_report_option(&o, c, optarg))
            continue;
        if (c == 'h')
            return CLI_EXIT_OK;
        return CLI_EXIT_USAGE;
    }
    if (optind >= argc)
        return cli_usage_error(argv[0], "missing trace directory");
    if (argc - optind > 1)
        return cli_usage_error(argv[0], "one trace directory expected, got %d arguments",
                               argc - optind);
    const char *path = argv[optind];
    int finished = cli_report_finish(&o, argv[0], csv_tables);
    if (finished != CLI_PARSED)
        return finished;

    struct trace_set set;
    if (trace_set_open(&set, path) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct gm_model m;
    if (gm_load(&m, &set) != 0) {
        trace_set_close(&set);
        return CLI_EXIT_BAD_INPUT;
    }
    struct gm_filter f;
    int status = gm_filter_init(&f, &m, &o, "timeline");
    if (status == CLI_EXIT_OK) {
        struct gpu_report *gpus = xcalloc(m.ngpus ? m.ngpus : 1, sizeof(*gpus));
        size_t ngpus = 0;
        for (size_t i = 0; i < m.ngpus; i++) {
            if (!gm_filter_gpu(&f, (uint32_t)i))
                continue;
            gpus[ngpus].gpu = (uint32_t)i;
            struct gpu_report *g = &gpus[ngpus++];
            build_gpu(&m, g);
            /* The listed processes' rows; their live bytes stay the GPU's. */
            size_t kept = 0;
            for (size_t k = 0; k < g->nrows; k++)
                if (gm_filter_proc(&f, g->rows[k].proc))
                    g->rows[kept++] = g->rows[k];
            g->nrows = kept;
        }
        if (o.format == CLI_FORMAT_JSON)
            print_json(&m, path, gpus, ngpus, stdout);
        else if (o.format == CLI_FORMAT_CSV)
            print_csv(&m, gpus, ngpus, stdout);
        else
            print_text(&m, path, gpus, ngpus, stdout);
        if (o.fail_on_problem && found_problem(&m, &f, gpus, ngpus))
            status = CLI_EXIT_PROBLEM;
        for (size_t i = 0; i < ngpus; i++)
            free(gpus[i].rows);
        free(gpus);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            cli_error(NULL, "cannot write the report to standard output");
            status = CLI_EXIT_BAD_INPUT;
        }
    }
    gm_filter_free(&f);
    gm_free(&m);
    trace_set_close(&set);
    return status;
}
