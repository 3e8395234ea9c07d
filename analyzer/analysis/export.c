/*
 * export.c - the walk of `cutrace export` (export.h): the model gives the
 * processes, GPUs, live memory and milestones; the calls, collectives and
 * IPC handles are read from each trace's public views, one query each,
 * streamed, so a 10^6-call run never sits in memory twice. The NVTX
 * ranges are export_nvtx.c's; the walk's state and the primitives both
 * use are export_walk.h's.
 */
#include "analysis/export.h"

#include "analysis/export_walk.h"

#include "analysis/timeline.h"
#include "cli.h"
#include "model/errnames.h"
#include "model/milestones.h"
#include "model/trace.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PID_SPAN (1ll << 22) /* the kernel's PID_MAX_LIMIT: no pid or tid reaches it */

bool export_ok(const struct walk *w)
{
    return w->status == 0;
}

static void fail_write(struct walk *w, int rc)
{
    if (rc != 0 && w->status == 0)
        w->status = EXPORT_WRITE_FAILED;
}

int export_fail_read(struct walk *w, struct trace *t)
{
    trace_report_error(t);
    if (w->status == 0)
        w->status = EXPORT_READ_FAILED;
    return -1;
}

void export_stream_begin(struct walk *w)
{
    w->last_ts = 0;
    w->nends = 0;
    if (export_ok(w))
        fail_write(w, w->s->stream_begin(w->s->state));
}

uint64_t export_track(struct walk *w, enum ex_track_kind kind, uint64_t parent, const char *name,
                      int64_t pid, int64_t tid)
{
    struct ex_track t = {++w->next_uuid, parent, kind, name, pid, tid};
    if (export_ok(w))
        fail_write(w, w->s->track(w->s->state, &t));
    return t.uuid;
}

/* Emits e at no earlier than the stream's last time (export.h says why). */
void export_emit(struct walk *w, struct ex_event *e)
{
    if (e->ts < w->last_ts)
        e->ts = w->last_ts;
    w->last_ts = e->ts;
    if (export_ok(w))
        fail_write(w, w->s->event(w->s->state, e));
}

/* A time of process p on the run's axis, never negative. */
int64_t export_axis(const struct walk *w, const struct gm_process *p, int64_t t)
{
    const struct gm_clock *c = &w->m->clocks[p->clock];
    if (c->aligned)
        t = gm_sub(t, c->offset_ns);
    return t < 0 ? 0 : t;
}

struct trace *export_trace_of(struct walk *w, uint32_t proc)
{
    for (size_t i = 0; i < w->set->count; i++)
        if (&w->set->traces[i] == w->m->procs[proc].trace)
            return &w->set->traces[i];
    assert(!"every process of the model comes from the set");
    return NULL;
}

/* ---- slices that nest (one track of one stream) ---- */

static void close_until(struct walk *w, uint64_t on, int64_t t)
{
    while (w->nends && w->ends[w->nends - 1] <= t) {
        struct ex_event e = {.type = EX_END, .track = on, .ts = w->ends[--w->nends]};
        export_emit(w, &e);
    }
}

/* Opens slice e (its ts set) ending at end, cut at the enclosing one's end. */
static void open_slice(struct walk *w, struct ex_event *e, int64_t end)
{
    close_until(w, e->track, e->ts);
    if (e->ts < w->last_ts)
        e->ts = w->last_ts;
    if (end < e->ts)
        end = e->ts;
    if (w->nends && end > w->ends[w->nends - 1])
        end = w->ends[w->nends - 1];
    export_emit(w, e);
    w->ends = xgrow(w->ends, &w->ends_cap, w->nends + 1, sizeof(*w->ends));
    w->ends[w->nends++] = end;
}

static void close_all(struct walk *w, uint64_t on)
{
    close_until(w, on, INT64_MAX);
}

/* ---- processes ---- */

static void declare_processes(struct walk *w)
{
    const struct gm_model *m = w->m;
    export_stream_begin(w);
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        int64_t same = 0;
        for (size_t k = 0; k < i; k++)
            same += m->procs[k].pid == p->pid;
        /* Counted over every process, so that a pid is shown the same
         * whether or not a filter leaves its twin out. */
        w->pid_shift[i] = same * PID_SPAN;
        if (!gm_filter_proc(w->f, (uint32_t)i))
            continue;
        char name[96];
        gm_process_name(name, sizeof(name), p);
        char *label = xasprintf("%s on %s", name, p->host[0] ? p->host : "unknown host");
        w->proc_uuid[i] = export_track(w, EX_TRACK_PROCESS, 0, label, p->pid + w->pid_shift[i], 0);
        free(label);
    }
}

/* What each process was inside when its trace ended, and its end. */
static void process_instants(struct walk *w, uint32_t proc)
{
    const struct gm_process *p = &w->m->procs[proc];
    if (!p->has_calls && p->ninflight == 0)
        return;
    export_stream_begin(w);
    for (size_t k = 0; k < p->ninflight; k++) {
        const struct gm_inflight *c = &p->inflight[k];
        char what[320];
        gm_inflight_text(what, sizeof(what), w->m, p, c);
        struct ex_arg args[] = {
            {"seq", EX_ARG_INT, c->seq, NULL},
            {"tid", EX_ARG_INT, c->tid, NULL},
            {"api", EX_ARG_STRING, 0, gm_api_name(w->m, c->api)},
        };
        struct ex_event e = {.type = EX_INSTANT,
                             .track = w->proc_uuid[proc],
                             .ts = export_axis(w, p, c->t_ns),
                             .name = what,
                             .category = "end",
                             .args = args,
                             .nargs = 3};
        export_emit(w, &e);
    }
    const char *how = p->exited ? "exited" : p->end_state ? p->end_state : "end unknown";
    char *name = xasprintf("trace ends: %s", how);
    struct ex_arg args[] = {{"end_state", EX_ARG_STRING, 0, p->end_state ? p->end_state : ""}};
    struct ex_event e = {.type = EX_INSTANT,
                         .track = w->proc_uuid[proc],
                         .ts = export_axis(w, p, gm_process_end_ns(p)),
                         .name = name,
                         .category = "end",
                         .args = args,
                         .nargs = 1};
    export_emit(w, &e);
    free(name);
}

/* ---- IPC flows ---- */

struct handle_row {
    char *hex;
    uint32_t proc;
    int64_t seq;
    bool export;
};

static int by_handle(const void *a, const void *b)
{
    const struct handle_row *x = a, *y = b;
    int c = strcmp(x->hex, y->hex);
    if (c)
        return c;
    if (x->export != y->export)
        return x->export ? -1 : 1; /* exports first */
    return x->proc != y->proc ? (x->proc < y->proc ? -1 : 1)
                              : (x->seq > y->seq) - (x->seq < y->seq);
}

static int by_call(const void *a, const void *b)
{
    const struct flow_end *x = a, *y = b;
    if (x->proc != y->proc)
        return x->proc < y->proc ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void add_flow_end(struct walk *w, uint32_t proc, int64_t seq, uint64_t id, bool terminating)
{
    w->flows = xgrow(w->flows, &w->flows_cap, w->nflows + 1, sizeof(*w->flows));
    w->flows[w->nflows++] = (struct flow_end){proc, seq, id, terminating};
}

/* Every handle's first successful export, flowing to each open of it by
 * another process (failed opens too: they tried). */
static int read_flows(struct walk *w)
{
    struct handle_row *rows = NULL;
    size_t nrows = 0, cap = 0;
    int rc = 0;
    for (uint32_t i = 0; i < w->m->nprocs && rc == 0; i++) {
        if (!gm_filter_proc(w->f, i))
            continue; /* a flow needs both its ends drawn */
        struct trace *t = export_trace_of(w, i);
        sqlite3_stmt *st = trace_query(t, "SELECT seq, api, handle_hex, result FROM ipc", "");
        if (!st) {
            rc = export_fail_read(w, t);
            break;
        }
        int step;
        while ((step = trace_step(t, st)) == 1) {
            char *hex = col_text(st, 2);
            const struct trace_api *api =
                trace_api_by_name(t, (const char *)sqlite3_column_text(st, 1));
            bool export = api && api->role && strcmp(api->role, "ipc_export") == 0;
            if (!hex || !hex[0] || (export && col_int(st, 3, -1) != 0)) {
                free(hex);
                continue;
            }
            rows = xgrow(rows, &cap, nrows + 1, sizeof(*rows));
            rows[nrows++] = (struct handle_row){hex, i, col_int(st, 0, 0), export};
        }
        sqlite3_finalize(st);
        if (step < 0)
            rc = export_fail_read(w, t);
    }
    if (nrows)
        qsort(rows, nrows, sizeof(*rows), by_handle);
    uint64_t next_id = 1;
    for (size_t a = 0; a < nrows;) {
        size_t b = a;
        while (b < nrows && strcmp(rows[b].hex, rows[a].hex) == 0)
            b++;
        if (rows[a].export)
            for (size_t k = a + 1; k < b; k++)
                if (!rows[k].export && rows[k].proc != rows[a].proc) {
                    add_flow_end(w, rows[a].proc, rows[a].seq, next_id, false);
                    add_flow_end(w, rows[k].proc, rows[k].seq, next_id, true);
                    next_id++;
                }
        a = b;
    }
    if (w->nflows)
        qsort(w->flows, w->nflows, sizeof(*w->flows), by_call);
    for (size_t k = 0; k < nrows; k++)
        free(rows[k].hex);
    free(rows);
    return rc;
}

/* The flows call (proc, seq) starts and ends, into w->starts and w->stops. */
static void flows_of(struct walk *w, uint32_t proc, int64_t seq, struct ex_event *e)
{
    size_t lo = 0, hi = w->nflows;
    struct flow_end key = {proc, seq, 0, false};
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (by_call(&w->flows[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t nstarts = 0, nstops = 0;
    for (; lo < w->nflows && w->flows[lo].proc == proc && w->flows[lo].seq == seq; lo++) {
        if (w->flows[lo].terminating) {
            w->stops = xgrow(w->stops, &w->stops_cap, nstops + 1, sizeof(*w->stops));
            w->stops[nstops++] = w->flows[lo].id;
        } else {
            w->starts = xgrow(w->starts, &w->starts_cap, nstarts + 1, sizeof(*w->starts));
            w->starts[nstarts++] = w->flows[lo].id;
        }
    }
    e->flows = w->starts;
    e->nflows = nstarts;
    e->terminating = w->stops;
    e->nterminating = nstops;
}

/* ---- calls, one stream per thread ---- */

void export_arg_int(struct ex_arg *args, size_t *n, const char *name, int64_t v, bool always)
{
    if (v != 0 || always)
        args[(*n)++] = (struct ex_arg){name, EX_ARG_INT, v, NULL};
}

static void arg_ptr(struct ex_arg *args, size_t *n, const char *name, int64_t v)
{
    if (v != 0)
        args[(*n)++] = (struct ex_arg){name, EX_ARG_POINTER, v, NULL};
}

static int process_calls(struct walk *w, uint32_t proc)
{
    const struct gm_process *p = &w->m->procs[proc];
    struct trace *t = export_trace_of(w, proc);
    sqlite3_stmt *st =
        trace_query(t,
                    "SELECT seq, t_ns, dur_ns, tid, api, layer, device, ptr, size, result, nested, "
                    "parent_seq, stream, flags, arg0, arg1, arg2, arg3, module FROM calls "
                    "ORDER BY tid, t_ns, seq",
                    "");
    if (!st)
        return export_fail_read(w, t);
    bool open = false;
    int64_t tid = 0;
    uint64_t on = 0;
    int step = 0;
    while (export_ok(w) && (step = trace_step(t, st)) == 1) {
        int64_t row_tid = col_int(st, 3, 0);
        if (!open || row_tid != tid) {
            if (open)
                close_all(w, on);
            open = true;
            tid = row_tid;
            export_stream_begin(w);
            char *name = tid == p->pid ? xasprintf("main thread %" PRId64, tid)
                                       : xasprintf("thread %" PRId64, tid);
            on = export_track(w, EX_TRACK_THREAD, w->proc_uuid[proc], name,
                              p->pid + w->pid_shift[proc], tid + w->pid_shift[proc]);
            free(name);
        }
        int64_t seq = col_int(st, 0, 0), result = col_int(st, 9, 0);
        const char *layer = (const char *)sqlite3_column_text(st, 5);
        char err[64];
        struct ex_arg args[EX_MAX_ARGS];
        size_t n = 0;
        export_arg_int(args, &n, "seq", seq, true);
        export_arg_int(args, &n, "result", result, true);
        if (result != 0)
            args[n++] = (struct ex_arg){
                "error", EX_ARG_STRING, 0,
                result_describe(err, sizeof(err), result_layer_from_name(layer), result)};
        export_arg_int(args, &n, "device", col_int(st, 6, -1), true);
        export_arg_int(args, &n, "size", col_int(st, 8, 0), false);
        arg_ptr(args, &n, "ptr", col_int(st, 7, 0));
        arg_ptr(args, &n, "stream", col_int(st, 12, 0));
        export_arg_int(args, &n, "flags", col_int(st, 13, 0), false);
        static const char *const argn[] = {"arg0", "arg1", "arg2", "arg3"};
        for (int k = 0; k < 4; k++)
            export_arg_int(args, &n, argn[k], col_int(st, 14 + k, 0), false);
        if (col_int(st, 10, 0))
            export_arg_int(args, &n, "parent_seq", col_int(st, 11, 0), true);
        const char *module = (const char *)sqlite3_column_text(st, 18);
        if (module)
            args[n++] = (struct ex_arg){"module", EX_ARG_STRING, 0, module};
        assert(n <= EX_MAX_ARGS);
        const char *api = (const char *)sqlite3_column_text(st, 4);
        int64_t dur = col_int(st, 2, 0);
        struct ex_event e = {.type = EX_BEGIN,
                             .track = on,
                             .ts = export_axis(w, p, col_int(st, 1, 0)),
                             .name = api ? api : "unknown api",
                             .category = layer ? layer : "",
                             .args = args,
                             .nargs = n};
        flows_of(w, proc, seq, &e);
        open_slice(w, &e, gm_add(e.ts, dur > 0 ? dur : 0));
    }
    if (open)
        close_all(w, on);
    sqlite3_finalize(st);
    if (export_ok(w) && step < 0)
        return export_fail_read(w, t);
    return 0;
}

/* ---- collectives, one stream per communicator of a process ---- */

struct comm_row {
    int64_t comm_id, rank, nranks;
    char *hash;
};

static uint64_t comm_group(struct walk *w, const char *hash, int64_t nranks)
{
    for (size_t i = 0; i < w->ngroups; i++)
        if (strcmp(w->groups[i].hash, hash) == 0)
            return w->groups[i].uuid;
    char *name = hash[0] ? xasprintf("NCCL communicator %s (%" PRId64 " ranks)", hash, nranks)
                         : xstrdup("NCCL communicator unknown");
    uint64_t uuid = export_track(w, EX_TRACK_GROUP, 0, name, 0, 0);
    free(name);
    w->groups = xgrow(w->groups, &w->groups_cap, w->ngroups + 1, sizeof(*w->groups));
    w->groups[w->ngroups++] = (struct comm_group){xstrdup(hash), uuid};
    return uuid;
}

static bool has_nccl_views(struct trace *t)
{
    sqlite3_stmt *st = trace_query(t,
                                   "SELECT count(*) FROM sqlite_master WHERE type = 'view' "
                                   "AND name IN ('collectives', 'communicators')",
                                   "");
    bool both = st && trace_step(t, st) == 1 && col_int(st, 0, 0) == 2;
    sqlite3_finalize(st);
    t->error[0] = '\0'; /* a trace without them is simply older */
    return both;
}

static int read_comms(struct walk *w, struct trace *t, struct comm_row **out, size_t *count)
{
    size_t cap = 0;
    *out = NULL;
    *count = 0;
    sqlite3_stmt *st = trace_query(
        t, "SELECT comm_id, unique_id_hash, rank, nranks FROM communicators ORDER BY comm_id", "");
    if (!st)
        return export_fail_read(w, t);
    int step;
    while ((step = trace_step(t, st)) == 1) {
        *out = xgrow(*out, &cap, *count + 1, sizeof(**out));
        char *hash = col_text(st, 1);
        (*out)[(*count)++] = (struct comm_row){col_int(st, 0, 0), col_int(st, 2, -1),
                                               col_int(st, 3, -1), hash ? hash : xstrdup("")};
    }
    sqlite3_finalize(st);
    return step < 0 ? export_fail_read(w, t) : 0;
}

static int process_collectives(struct walk *w, uint32_t proc)
{
    const struct gm_process *p = &w->m->procs[proc];
    struct trace *t = export_trace_of(w, proc);
    if (!has_nccl_views(t))
        return 0;
    struct comm_row *comms;
    size_t ncomms;
    if (read_comms(w, t, &comms, &ncomms) != 0)
        return -1;
    sqlite3_stmt *st = trace_query(t,
                                   "SELECT seq, t_ns, dur_ns, op, comm_id, count, datatype, "
                                   "bytes, redop, peer, result, captured, in_group "
                                   "FROM collectives ORDER BY comm_id, t_ns, seq",
                                   "");
    int rc = 0, step = 0;
    if (!st)
        rc = export_fail_read(w, t);
    bool open = false;
    int64_t comm_id = 0;
    uint64_t on = 0;
    while (st && export_ok(w) && (step = trace_step(t, st)) == 1) {
        int64_t row_comm = col_int(st, 4, -1);
        if (!open || row_comm != comm_id) {
            if (open)
                close_all(w, on);
            open = true;
            comm_id = row_comm;
            export_stream_begin(w);
            const struct comm_row *c = NULL;
            for (size_t k = 0; k < ncomms && !c; k++)
                if (comms[k].comm_id == comm_id)
                    c = &comms[k];
            uint64_t group = comm_group(w, c ? c->hash : "", c ? c->nranks : -1);
            char *name = xasprintf("rank %" PRId64 ", pid %" PRId64 " (comm_id %" PRId64 ")",
                                   c ? c->rank : -1, p->pid, comm_id);
            on = export_track(w, EX_TRACK_SLICES, group, name, 0, 0);
            free(name);
        }
        const char *op = (const char *)sqlite3_column_text(st, 3);
        const char *datatype = (const char *)sqlite3_column_text(st, 6);
        const char *redop = (const char *)sqlite3_column_text(st, 8);
        struct ex_arg args[EX_MAX_ARGS];
        size_t n = 0;
        export_arg_int(args, &n, "seq", col_int(st, 0, 0), true);
        export_arg_int(args, &n, "count", col_int(st, 5, 0), true);
        args[n++] = (struct ex_arg){"datatype", EX_ARG_STRING, 0, datatype ? datatype : ""};
        export_arg_int(args, &n, "bytes", col_int(st, 7, 0), true);
        if (redop)
            args[n++] = (struct ex_arg){"redop", EX_ARG_STRING, 0, redop};
        if (!col_is_null(st, 9))
            export_arg_int(args, &n, "peer", col_int(st, 9, 0), true);
        export_arg_int(args, &n, "result", col_int(st, 10, 0), true);
        export_arg_int(args, &n, "captured", col_int(st, 11, 0), false);
        export_arg_int(args, &n, "in_group", col_int(st, 12, 0), false);
        int64_t dur = col_int(st, 2, 0);
        struct ex_event e = {.type = EX_BEGIN,
                             .track = on,
                             .ts = export_axis(w, p, col_int(st, 1, 0)),
                             .name = op ? op : "unknown op",
                             .category = "collective",
                             .args = args,
                             .nargs = n};
        open_slice(w, &e, gm_add(e.ts, dur > 0 ? dur : 0));
    }
    if (open)
        close_all(w, on);
    if (st) {
        sqlite3_finalize(st);
        if (export_ok(w) && step < 0)
            rc = export_fail_read(w, t);
    }
    for (size_t k = 0; k < ncomms; k++)
        free(comms[k].hash);
    free(comms);
    return rc;
}

/* ---- GPUs: live memory as counters, milestones as instants ---- */

enum { CT_USED = GM_CATEGORIES, CT_UNEXPLAINED, CT_TRACKS };

static void milestone(struct walk *w, uint64_t on, const struct gpu_report *g, const struct row *r)
{
    const struct gm_model *m = w->m;
    const struct gm_process *p = &m->procs[r->proc];
    const struct gm_event *e = timeline_row_event(m, r);
    char *base = r->kind == MS_FAILED ? ms_name(r->kind, r->n_api, gm_api_name(m, e->api))
                                      : ms_name(r->kind, r->n, NULL);
    char who[96];
    gm_process_name(who, sizeof(who), p);
    const char *tag = ms_tag_key((enum ms_tag)r->tag);
    char *name = xasprintf("%s%s%s%s, %s", base, tag[0] ? " (" : "", tag, tag[0] ? ")" : "", who);
    struct ex_arg args[] = {
        {"kind", EX_ARG_STRING, 0, ms_key(r->kind)},
        {"pid", EX_ARG_INT, p->pid, NULL},
        {"seq", EX_ARG_INT, e->seq, NULL},
        {"traced_bytes", EX_ARG_INT, gm_traced(r->live), NULL},
        {"count", EX_ARG_INT, r->count, NULL},
        {"bytes", EX_ARG_INT, r->bytes, NULL},
    };
    bool burst = r->kind == MS_WEIGHT_BEGIN || r->kind == MS_WEIGHT_END ||
                 r->kind == MS_BURST_BEGIN || r->kind == MS_BURST_END || r->kind == MS_FREE_BURST ||
                 r->kind == MS_CAPTURE_END;
    struct ex_event ev = {.type = EX_INSTANT,
                          .track = on,
                          .ts = export_axis(w, p, e->t_ns),
                          .name = name,
                          .category = "milestone",
                          .args = args,
                          .nargs = burst ? 6 : 4};
    export_emit(w, &ev);
    (void)g;
    free(name);
    free(base);
}

static void counter(struct walk *w, uint64_t on, int64_t ts, int64_t value)
{
    struct ex_event e = {.type = EX_COUNTER, .track = on, .ts = ts, .value = value};
    export_emit(w, &e);
}

static void gpu_stream(struct walk *w, uint32_t gi)
{
    const struct gm_model *m = w->m;
    const struct gm_gpu *gpu = &m->gpus[gi];
    export_stream_begin(w);
    char *name = xasprintf("GPU %" PRIu32 ": %s%s%s on %s", gi, gpu->name[0] ? gpu->name : "",
                           gpu->name[0] ? ", " : "", gpu->key, m->clocks[gpu->clock].host);
    uint64_t group = export_track(w, EX_TRACK_GROUP, 0, name, 0, 0);
    free(name);
    uint64_t tracks[CT_TRACKS];
    for (int c = 0; c < CT_TRACKS; c++) {
        const char *what = c == CT_USED          ? "used (total - free, at each cudaMemGetInfo)"
                           : c == CT_UNEXPLAINED ? "unexplained (used - traced)"
                                                 : gm_category_label((enum gm_category)c);
        char *label = xasprintf("GPU %" PRIu32 " %s%s", gi, what,
                                c == GM_CAT_PEER || c == GM_CAT_HOST ? " (not GPU memory)" : "");
        tracks[c] = export_track(w, EX_TRACK_COUNTER, group, label, 0, 0);
        free(label);
    }
    char *ms = xasprintf("GPU %" PRIu32 " milestones", gi);
    uint64_t ms_track = export_track(w, EX_TRACK_SLICES, group, ms, 0, 0);
    free(ms);

    struct gpu_report g = {.gpu = gi};
    timeline_build_gpu(m, &g);
    timeline_keep_listed(&g, w->f);
    size_t next_row = 0;
    int64_t shown[GM_CATEGORIES];
    bool first = true;
    struct gm_walk walk;
    gm_walk_init(&walk, m, gi);
    const struct gm_ref *ref;
    while (export_ok(w) && (ref = gm_walk_step(&walk)) != NULL) {
        const struct gm_process *p = &m->procs[ref->proc];
        const struct gm_event *e = &p->events[ref->event];
        int64_t ts = export_axis(w, p, e->t_ns);
        for (int c = 0; c < GM_CATEGORIES; c++)
            if (first || shown[c] != walk.live[c]) {
                shown[c] = walk.live[c];
                counter(w, tracks[c], ts, shown[c]);
            }
        first = false;
        if (e->type == GM_EV_MEASURE) {
            int64_t used = gm_sub(e->b, e->a);
            counter(w, tracks[CT_USED], ts, used);
            counter(w, tracks[CT_UNEXPLAINED], ts, gm_sub(used, gm_traced(walk.live)));
        }
        for (; next_row < g.nrows && g.rows[next_row].pos <= e->pos; next_row++)
            milestone(w, ms_track, &g, &g.rows[next_row]);
    }
    for (; export_ok(w) && next_row < g.nrows; next_row++)
        milestone(w, ms_track, &g, &g.rows[next_row]);
    gm_walk_free(&walk);
    free(g.rows);
}

int export_run(const struct gm_model *m, struct trace_set *set, const struct gm_filter *f,
               const struct ex_sink *sink)
{
    struct walk w = {.m = m, .set = set, .f = f, .s = sink};
    w.proc_uuid = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*w.proc_uuid));
    w.pid_shift = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*w.pid_shift));
    declare_processes(&w);
    read_flows(&w);
    for (uint32_t i = 0; export_ok(&w) && i < m->nprocs; i++) {
        if (!gm_filter_proc(f, i))
            continue;
        process_calls(&w, i);
        if (export_ok(&w))
            process_instants(&w, i);
        if (export_ok(&w))
            process_collectives(&w, i);
        if (export_ok(&w))
            export_process_nvtx(&w, i);
    }
    for (uint32_t g = 0; export_ok(&w) && g < m->ngpus; g++)
        if (gm_filter_gpu(f, g))
            gpu_stream(&w, g);
    for (size_t i = 0; i < w.ngroups; i++)
        free(w.groups[i].hash);
    free(w.groups);
    free(w.flows);
    free(w.ends);
    free(w.starts);
    free(w.stops);
    free(w.proc_uuid);
    free(w.pid_shift);
    return w.status;
}
