/*
 * export_nvtx.c - the NVTX ranges and marks of `cutrace export`
 * (export.h): push/pop ranges and marks on a track per thread and domain,
 * nested as the program nested them; start/end ranges, which may cross
 * threads and overlap, on as few tracks per domain as keep them apart.
 * NCCL's own domain is drawn too: here every call is on the picture.
 */
#include "analysis/export_walk.h"

#include "cli.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define NVTX_COLUMNS                                                                               \
    "seq, t_ns, tid, kind, domain_id, domain, message, range_id, level, category, color, "         \
    "payload_type, payload, nccl_comm_hash, nccl_bytes"

/* A start/end range: they may cross threads and overlap without nesting. */
struct nvtx_range {
    int64_t domain, id, begin, end, seq, end_seq, tid;
    char *domain_name, *message, *comm_hash;
    int64_t nccl_bytes;
    bool ended;
    size_t lane;
};

static bool has_view(struct trace *t, const char *name)
{
    sqlite3_stmt *st = trace_query(
        t, "SELECT count(*) FROM sqlite_master WHERE type = 'view' AND name = ?1", "t", name);
    bool has = st && trace_step(t, st) == 1 && col_int(st, 0, 0) == 1;
    sqlite3_finalize(st);
    t->error[0] = '\0'; /* a trace without it is simply older */
    return has;
}

static const char *message_or_none(const char *m)
{
    return m && m[0] ? m : "(no message)";
}

/* The arguments of a push, start or mark row (NVTX_COLUMNS) into args. */
static size_t nvtx_args(sqlite3_stmt *st, struct ex_arg *args)
{
    size_t n = 0;
    export_arg_int(args, &n, "seq", col_int(st, 0, 0), true);
    export_arg_int(args, &n, "tid", col_int(st, 2, 0), true);
    const char *domain = (const char *)sqlite3_column_text(st, 5);
    args[n++] = (struct ex_arg){"domain", EX_ARG_STRING, 0, domain ? domain : "(default)"};
    if (!col_is_null(st, 7))
        export_arg_int(args, &n, "range_id", col_int(st, 7, 0), true);
    if (!col_is_null(st, 8))
        export_arg_int(args, &n, "level", col_int(st, 8, 0), true);
    export_arg_int(args, &n, "category", col_int(st, 9, 0), false);
    if (!col_is_null(st, 10))
        export_arg_int(args, &n, "color", col_int(st, 10, 0), true);
    if (col_int(st, 11, 0) != 0) {
        export_arg_int(args, &n, "payload_type", col_int(st, 11, 0), true);
        export_arg_int(args, &n, "payload", col_int(st, 12, 0), true);
    }
    const char *hash = (const char *)sqlite3_column_text(st, 13);
    if (hash)
        args[n++] = (struct ex_arg){"nccl_comm_hash", EX_ARG_STRING, 0, hash};
    if (!col_is_null(st, 14))
        export_arg_int(args, &n, "nccl_bytes", col_int(st, 14, 0), true);
    assert(n <= EX_MAX_ARGS);
    return n;
}

/* Push/pop ranges and marks: one stream and track per thread and domain,
 * where a pop ends the thread's latest push in its domain, so the slices
 * nest as the program nested them. A push never popped ends with the
 * process; a pop with nothing pushed is left out. */
static int nvtx_thread_tracks(struct walk *w, uint32_t proc, struct trace *t)
{
    const struct gm_process *p = &w->m->procs[proc];
    sqlite3_stmt *st = trace_query(t,
                                   "SELECT " NVTX_COLUMNS " FROM nvtx WHERE kind IN "
                                   "('push', 'pop', 'mark') ORDER BY tid, domain_id, seq",
                                   "");
    if (!st)
        return export_fail_read(w, t);
    bool open = false;
    int64_t tid = 0, domain = 0;
    size_t depth = 0;
    uint64_t on = 0;
    int64_t end = export_axis(w, p, gm_process_end_ns(p));
    int step = 0;
    while (export_ok(w) && (step = trace_step(t, st)) == 1) {
        int64_t row_tid = col_int(st, 2, 0), row_domain = col_int(st, 4, 0);
        if (!open || row_tid != tid || row_domain != domain) {
            for (; open && depth > 0; depth--) {
                struct ex_event e = {.type = EX_END, .track = on, .ts = end};
                export_emit(w, &e);
            }
            open = true;
            tid = row_tid;
            domain = row_domain;
            export_stream_begin(w);
            const char *dname = (const char *)sqlite3_column_text(st, 5);
            char *name =
                xasprintf("NVTX %s, thread %" PRId64, dname ? dname : "(default domain)", tid);
            on = export_track(w, EX_TRACK_SLICES, w->proc_uuid[proc], name, 0, 0);
            free(name);
        }
        const char *kind = (const char *)sqlite3_column_text(st, 3);
        int64_t ts = export_axis(w, p, col_int(st, 1, 0));
        if (kind && strcmp(kind, "pop") == 0) {
            if (depth == 0)
                continue;
            depth--;
            struct ex_event e = {.type = EX_END, .track = on, .ts = ts};
            export_emit(w, &e);
            continue;
        }
        bool mark = kind && strcmp(kind, "mark") == 0;
        struct ex_arg args[EX_MAX_ARGS];
        struct ex_event e = {.type = mark ? EX_INSTANT : EX_BEGIN,
                             .track = on,
                             .ts = ts,
                             .name = message_or_none((const char *)sqlite3_column_text(st, 6)),
                             .category = "nvtx",
                             .args = args,
                             .nargs = nvtx_args(st, args)};
        export_emit(w, &e);
        depth += !mark;
    }
    for (; open && depth > 0; depth--) {
        struct ex_event e = {.type = EX_END, .track = on, .ts = end};
        export_emit(w, &e);
    }
    sqlite3_finalize(st);
    if (export_ok(w) && step < 0)
        return export_fail_read(w, t);
    return 0;
}

static int by_lane(const void *a, const void *b)
{
    const struct nvtx_range *x = a, *y = b;
    if (x->domain != y->domain)
        return x->domain < y->domain ? -1 : 1;
    if (x->lane != y->lane)
        return x->lane < y->lane ? -1 : 1;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static int by_begin(const void *a, const void *b)
{
    const struct nvtx_range *x = a, *y = b;
    if (x->domain != y->domain)
        return x->domain < y->domain ? -1 : 1;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Start/end ranges of one process: an end ends the latest open start of
 * its domain with its id (model/nvtx.c pairs them the same way), from any
 * thread. Each domain's ranges go on as few tracks (lanes) as keep them
 * from overlapping: a range takes the first lane free at its begin. */
static int read_nvtx_ranges(struct walk *w, uint32_t proc, struct trace *t, struct nvtx_range **out,
                            size_t *count)
{
    const struct gm_process *p = &w->m->procs[proc];
    size_t cap = 0;
    *out = NULL;
    *count = 0;
    sqlite3_stmt *st = trace_query(
        t, "SELECT " NVTX_COLUMNS " FROM nvtx WHERE kind IN ('start', 'end') ORDER BY seq", "");
    if (!st)
        return export_fail_read(w, t);
    int step;
    while ((step = trace_step(t, st)) == 1) {
        const char *kind = (const char *)sqlite3_column_text(st, 3);
        int64_t domain = col_int(st, 4, 0), id = col_int(st, 7, 0);
        int64_t ts = export_axis(w, p, col_int(st, 1, 0));
        if (kind && strcmp(kind, "end") == 0) {
            for (size_t i = *count; i > 0; i--) {
                struct nvtx_range *r = &(*out)[i - 1];
                if (r->ended || r->domain != domain || r->id != id)
                    continue;
                r->ended = true;
                r->end = ts < r->begin ? r->begin : ts;
                r->end_seq = col_int(st, 0, 0);
                break;
            }
            continue;
        }
        *out = xgrow(*out, &cap, *count + 1, sizeof(**out));
        char *dname = col_text(st, 5), *hash = col_text(st, 13);
        (*out)[(*count)++] = (struct nvtx_range){
            .domain = domain,
            .id = id,
            .begin = ts,
            .end = INT64_MAX,
            .seq = col_int(st, 0, 0),
            .tid = col_int(st, 2, 0),
            .domain_name = dname ? dname : xstrdup("(default domain)"),
            .message = xstrdup(message_or_none((const char *)sqlite3_column_text(st, 6))),
            .comm_hash = hash,
            .nccl_bytes = col_int(st, 14, -1),
        };
    }
    sqlite3_finalize(st);
    if (step < 0)
        return export_fail_read(w, t);
    int64_t end = export_axis(w, p, gm_process_end_ns(p));
    for (size_t i = 0; i < *count; i++)
        if (!(*out)[i].ended)
            (*out)[i].end = end < (*out)[i].begin ? (*out)[i].begin : end;
    if (*count)
        qsort(*out, *count, sizeof(**out), by_begin);
    int64_t *lanes = NULL; /* each lane's last end, in the current domain */
    size_t nlanes = 0, lanes_cap = 0;
    for (size_t i = 0; i < *count; i++) {
        struct nvtx_range *r = &(*out)[i];
        if (i == 0 || r->domain != (*out)[i - 1].domain)
            nlanes = 0;
        size_t l = 0;
        while (l < nlanes && lanes[l] > r->begin)
            l++;
        if (l == nlanes) {
            lanes = xgrow(lanes, &lanes_cap, nlanes + 1, sizeof(*lanes));
            nlanes++;
        }
        lanes[l] = r->end;
        r->lane = l;
    }
    free(lanes);
    if (*count)
        qsort(*out, *count, sizeof(**out), by_lane);
    return 0;
}

static void nvtx_range_slices(struct walk *w, uint32_t proc, const struct nvtx_range *r, size_t n)
{
    uint64_t on = 0;
    for (size_t i = 0; export_ok(w) && i < n; i++) {
        if (i == 0 || r[i].domain != r[i - 1].domain || r[i].lane != r[i - 1].lane) {
            export_stream_begin(w);
            char *name =
                xasprintf("NVTX %s, start/end ranges %zu", r[i].domain_name, r[i].lane + 1);
            on = export_track(w, EX_TRACK_SLICES, w->proc_uuid[proc], name, 0, 0);
            free(name);
        }
        assert(i == 0 || r[i].domain != r[i - 1].domain || r[i].lane != r[i - 1].lane ||
               r[i].begin >= r[i - 1].end);
        struct ex_arg args[8];
        size_t k = 0;
        export_arg_int(args, &k, "seq", r[i].seq, true);
        export_arg_int(args, &k, "tid", r[i].tid, true);
        args[k++] = (struct ex_arg){"domain", EX_ARG_STRING, 0, r[i].domain_name};
        export_arg_int(args, &k, "range_id", r[i].id, true);
        if (r[i].ended)
            export_arg_int(args, &k, "end_seq", r[i].end_seq, true);
        else
            args[k++] =
                (struct ex_arg){"end", EX_ARG_STRING, 0, "never ended: closed at the process end"};
        if (r[i].comm_hash)
            args[k++] = (struct ex_arg){"nccl_comm_hash", EX_ARG_STRING, 0, r[i].comm_hash};
        if (r[i].nccl_bytes >= 0)
            export_arg_int(args, &k, "nccl_bytes", r[i].nccl_bytes, true);
        struct ex_event b = {.type = EX_BEGIN,
                             .track = on,
                             .ts = r[i].begin,
                             .name = r[i].message,
                             .category = "nvtx",
                             .args = args,
                             .nargs = k};
        export_emit(w, &b);
        struct ex_event e = {.type = EX_END, .track = on, .ts = r[i].end};
        export_emit(w, &e);
    }
}

int export_process_nvtx(struct walk *w, uint32_t proc)
{
    struct trace *t = export_trace_of(w, proc);
    if (!has_view(t, "nvtx"))
        return 0;
    if (nvtx_thread_tracks(w, proc, t) != 0 || !export_ok(w))
        return -1;
    struct nvtx_range *r;
    size_t n;
    int rc = read_nvtx_ranges(w, proc, t, &r, &n);
    if (rc == 0)
        nvtx_range_slices(w, proc, r, n);
    for (size_t i = 0; i < n; i++) {
        free(r[i].domain_name);
        free(r[i].message);
        free(r[i].comm_hash);
    }
    free(r);
    return rc;
}
