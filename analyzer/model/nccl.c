/*
 * nccl.c - loading a trace's communicators and NCCL version, and the size
 * buckets and version text both NCCL reports use (see nccl.h).
 */
#include "model/nccl.h"

#include "cli.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COLUMNS 20

/* Counts from traces are untrusted: sums saturate. */
static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* What the NCCL reports read, checked before any of it is trusted so that a
 * damaged or half-written schema is named instead of failing mid-report. */
static const struct {
    const char *object;
    const char *columns[MAX_COLUMNS];
} nccl_columns[] = {
    {"communicators",
     {"comm_id", "unique_id_hash", "rank", "nranks", "device", "parent_comm_id", "t_init_ns",
      "t_destroy_ns", "init_result", "api", "comm", "color", "key", "t_finalize_ns"}},
    {"collectives",
     {"seq", "t_ns", "dur_ns", "op", "comm_id", "count", "datatype", "bytes", "redop", "peer",
      "stream", "in_group", "captured", "result", "sendbuff", "recvbuff", "tid", "device"}},
    {"process", {"nccl_version"}},
    {"calls", {"arg0"}},
};

/* 1 when the schema has a table or view of that name, 0 if not, -1 on error. */
static int has_object(struct trace *t, const char *name)
{
    sqlite3_stmt *stmt = trace_query(
        t, "SELECT 1 FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ?", "t", name);
    if (!stmt)
        return -1;
    int rc = trace_step(t, stmt);
    sqlite3_finalize(stmt);
    return rc;
}

/* Replaces the error of a failed compile with what it means for the user,
 * unless the file itself is damaged (then SQLite's words are kept). */
static int unusable(struct trace *t, const char *object)
{
    int code = sqlite3_extended_errcode(t->db) & 0xff;
    if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB || code == SQLITE_IOERR ||
        code == SQLITE_NOMEM)
        return -1;
    char detail[256];
    snprintf(detail, sizeof(detail), "%s", sqlite3_errmsg(t->db));
    t->error[0] = '\0';
    return trace_fail(t, "incomplete cutrace trace: '%s' is unusable (sqlite: %s)", object, detail);
}

static int check_columns(struct trace *t, const char *object, const char *const *wanted)
{
    sqlite3_stmt *stmt = trace_query(t, "SELECT name FROM pragma_table_info(?)", "t", object);
    if (!stmt)
        return unusable(t, object);
    char **names = NULL;
    size_t count = 0, cap = 0;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        char *name = col_text(stmt, 0);
        if (!name)
            continue;
        names = xgrow(names, &cap, count + 1, sizeof(*names));
        names[count++] = name;
    }
    sqlite3_finalize(stmt);
    if (rc < 0)
        rc = unusable(t, object);
    else if (count == 0) {
        /* pragma_table_info hides why a view does not compile: compiling it
         * directly tells. The name is one of ours, never the trace's. */
        char *sql = sqlite3_mprintf("SELECT * FROM \"%w\" LIMIT 0", object);
        stmt = sql ? trace_query(t, sql, "") : NULL;
        sqlite3_free(sql);
        if (!stmt)
            rc = unusable(t, object);
        else
            rc = trace_fail(t, "incomplete cutrace trace: '%s' is unusable (no columns)", object);
        sqlite3_finalize(stmt);
    }
    for (size_t c = 0; rc == 0 && c < MAX_COLUMNS && wanted[c]; c++) {
        bool found = false;
        for (size_t i = 0; i < count && !found; i++)
            found = strcmp(names[i], wanted[c]) == 0;
        if (!found)
            rc = trace_fail(t, "incomplete cutrace trace: '%s' has no column '%s'", object,
                            wanted[c]);
    }
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* 1: the NCCL views are there and usable; 0: neither view exists (a trace
 * from before NCCL was recorded); -1: t->error set. */
static int check_schema(struct trace *t, bool required)
{
    int communicators = has_object(t, "communicators");
    int collectives = has_object(t, "collectives");
    if (communicators < 0 || collectives < 0)
        return -1;
    if (!communicators && !collectives && !required)
        return 0;
    if (!communicators || !collectives)
        return trace_fail(t,
                          "incomplete cutrace trace: no table or view '%s' (written by a cutrace "
                          "that did not record NCCL calls)",
                          communicators ? "collectives" : "communicators");
    for (size_t i = 0; i < sizeof(nccl_columns) / sizeof(nccl_columns[0]); i++)
        if (check_columns(t, nccl_columns[i].object, nccl_columns[i].columns) != 0)
            return -1;
    return 1;
}

static int load_version(struct trace *t, struct nccl_info *info)
{
    sqlite3_stmt *stmt = trace_query(t, "SELECT nccl_version FROM process LIMIT 1", "");
    if (!stmt)
        return -1;
    int rc = trace_step(t, stmt);
    if (rc == 1 && sqlite3_column_type(stmt, 0) == SQLITE_INTEGER) {
        info->version = sqlite3_column_int64(stmt, 0);
        info->has_version = info->version > 0;
    }
    sqlite3_finalize(stmt);
    return rc < 0 ? -1 : 0;
}

static int load_comms(struct trace *t, struct nccl_info *info)
{
    sqlite3_stmt *stmt = trace_query(
        t,
        "SELECT comm_id, unique_id_hash, rank, nranks, device, parent_comm_id, t_init_ns,"
        " t_destroy_ns, init_result, api, comm, color, key, t_finalize_ns"
        " FROM communicators ORDER BY comm_id",
        "");
    if (!stmt)
        return -1;
    size_t cap = 0;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        info->comms = xgrow(info->comms, &cap, info->ncomms + 1, sizeof(*info->comms));
        struct nccl_comm *c = &info->comms[info->ncomms++];
        memset(c, 0, sizeof(*c));
        c->comm_id = col_int(stmt, 0, -1);
        c->hash = col_text(stmt, 1);
        if (!c->hash || c->hash[0] == '\0') {
            free(c->hash);
            c->hash = xstrdup("?");
        }
        c->has_rank = !col_is_null(stmt, 2);
        c->rank = col_int(stmt, 2, -1);
        c->has_nranks = !col_is_null(stmt, 3);
        c->nranks = col_int(stmt, 3, -1);
        c->device = col_int(stmt, 4, -1);
        c->has_parent = !col_is_null(stmt, 5);
        c->parent_comm_id = col_int(stmt, 5, -1);
        c->t_init_ns = col_int(stmt, 6, 0);
        c->destroyed = !col_is_null(stmt, 7);
        c->t_destroy_ns = col_int(stmt, 7, 0);
        c->init_result = col_int(stmt, 8, 0);
        c->api = col_text(stmt, 9);
        c->handle = col_int(stmt, 10, 0);
        c->has_color = !col_is_null(stmt, 11);
        c->color = col_int(stmt, 11, 0);
        c->has_key = !col_is_null(stmt, 12);
        c->key = col_int(stmt, 12, 0);
        c->finalized = !col_is_null(stmt, 13);
        c->t_finalize_ns = col_int(stmt, 13, 0);
    }
    sqlite3_finalize(stmt);
    return rc;
}

static int compare_comm_ids(const void *key, const void *elem)
{
    int64_t id = *(const int64_t *)key, other = ((const struct nccl_comm *)elem)->comm_id;
    return (id > other) - (id < other);
}

const struct nccl_comm *nccl_find_comm(const struct nccl_info *info, int64_t comm_id)
{
    if (info->ncomms == 0)
        return NULL;
    return bsearch(&comm_id, info->comms, info->ncomms, sizeof(*info->comms), compare_comm_ids);
}

struct abort_call {
    int64_t handle, t_ns, seq;
};

static int compare_aborts(const void *a, const void *b)
{
    const struct abort_call *x = a, *y = b;
    if (x->handle != y->handle)
        return x->handle < y->handle ? -1 : 1;
    if (x->t_ns != y->t_ns)
        return x->t_ns < y->t_ns ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/*
 * The view says when a communicator was destroyed, not by which call:
 * ncclCommAbort (the error path) is told apart here. An abort ended a
 * communicator when it names its handle, comes after its init and happened
 * at the moment the view gives. Sorted lookups keep a hostile trace with
 * many of both from taking quadratic time.
 */
static int mark_aborts(struct trace *t, struct nccl_info *info)
{
    sqlite3_stmt *stmt = trace_query(t,
                                     "SELECT arg0, t_ns, seq FROM calls"
                                     " WHERE api = ? AND result = 0",
                                     "t", "ncclCommAbort");
    if (!stmt)
        return -1;
    struct abort_call *aborts = NULL;
    size_t count = 0, cap = 0;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        aborts = xgrow(aborts, &cap, count + 1, sizeof(*aborts));
        aborts[count++] =
            (struct abort_call){col_int(stmt, 0, 0), col_int(stmt, 1, 0), col_int(stmt, 2, -1)};
    }
    sqlite3_finalize(stmt);
    if (count > 1)
        qsort(aborts, count, sizeof(*aborts), compare_aborts);
    for (size_t i = 0; rc == 0 && count > 0 && i < info->ncomms; i++) {
        struct nccl_comm *c = &info->comms[i];
        if (!c->destroyed)
            continue;
        /* The last abort of this handle at that moment has the largest seq. */
        struct abort_call key = {c->handle, c->t_destroy_ns, INT64_MAX};
        size_t lo = 0, hi = count;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (compare_aborts(&aborts[mid], &key) <= 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        const struct abort_call *last = lo > 0 ? &aborts[lo - 1] : NULL;
        c->aborted = last && last->handle == c->handle && last->t_ns == c->t_destroy_ns &&
                     last->seq > c->comm_id;
    }
    free(aborts);
    return rc;
}

static int load_call_counts(struct trace *t, struct nccl_info *info)
{
    sqlite3_stmt *stmt = trace_query(t,
                                     "SELECT comm_id, count(*), sum(result <> 0) FROM collectives"
                                     " GROUP BY comm_id ORDER BY comm_id",
                                     "");
    if (!stmt)
        return -1;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        int64_t calls = col_int(stmt, 1, 0), failed = col_int(stmt, 2, 0);
        info->calls = sat_add(info->calls, calls);
        info->failed_calls = sat_add(info->failed_calls, failed);
        struct nccl_comm *c = col_is_null(stmt, 0)
                                  ? NULL
                                  : (struct nccl_comm *)nccl_find_comm(info, col_int(stmt, 0, -1));
        if (c) {
            c->calls = calls;
            c->failed_calls = failed;
        } else {
            info->unattributed_calls = sat_add(info->unattributed_calls, calls);
        }
    }
    sqlite3_finalize(stmt);
    return rc;
}

int nccl_load(struct trace *t, bool required, bool count_calls, struct nccl_info *info)
{
    memset(info, 0, sizeof(*info));
    int rc = check_schema(t, required);
    if (rc <= 0)
        return rc;
    info->present = true;
    if (load_version(t, info) != 0 || load_comms(t, info) != 0 || mark_aborts(t, info) != 0 ||
        (count_calls && load_call_counts(t, info) != 0))
        return -1;
    return 0;
}

int nccl_load_version(struct trace *t, bool required, struct nccl_info *info)
{
    memset(info, 0, sizeof(*info));
    int rc = check_schema(t, required);
    if (rc <= 0)
        return rc;
    info->present = true;
    return load_version(t, info) != 0 ? -1 : 0;
}

void nccl_info_free(struct nccl_info *info)
{
    for (size_t i = 0; i < info->ncomms; i++) {
        free(info->comms[i].hash);
        free(info->comms[i].api);
    }
    free(info->comms);
    memset(info, 0, sizeof(*info));
}

/* ct_size_bucket(): see nccl.h. */
static void bucket_function(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    assert(argc == 1);
    (void)argc;
    if (sqlite3_value_numeric_type(argv[0]) != SQLITE_INTEGER) {
        sqlite3_result_int64(ctx, -1);
        return;
    }
    sqlite3_result_int64(ctx, nccl_bucket_of(sqlite3_value_int64(argv[0])));
}

int64_t nccl_bucket_of(int64_t bytes)
{
    if (bytes <= 0)
        return bytes == 0 ? 0 : -1;
    /* 63 - clz is floor(log2) of a positive 64-bit value. */
    return 64 - __builtin_clzll((unsigned long long)bytes);
}

int nccl_register_functions(struct trace *t)
{
    int rc = sqlite3_create_function_v2(t->db, NCCL_BUCKET_FUNCTION, 1,
                                        SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                        bucket_function, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return trace_fail(t, "registering " NCCL_BUCKET_FUNCTION " failed (sqlite: %s)",
                          sqlite3_errstr(rc));
    return 0;
}

int64_t nccl_bucket_min(int64_t bucket)
{
    if (bucket <= 0 || bucket > 63)
        return 0;
    return INT64_C(1) << (bucket - 1);
}

int64_t nccl_bucket_max(int64_t bucket)
{
    if (bucket <= 0 || bucket > 63)
        return 0;
    return bucket == 63 ? INT64_MAX : INT64_C(1) << bucket;
}

static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

char *nccl_bucket_label(char *buf, size_t size, int64_t bucket)
{
    assert(buf && size > 0);
    if (bucket == 0) {
        snprintf(buf, size, "0 B");
        return buf;
    }
    if (bucket < 0 || bucket > 63) {
        snprintf(buf, size, "?");
        return buf;
    }
    /* [2^lo, 2^hi): each bound is a power of two of one unit. */
    int lo = (int)bucket - 1, hi = (int)bucket;
    unsigned long long lo_value = 1ull << (lo % 10), hi_value = 1ull << (hi % 10);
    const char *lo_unit = units[lo / 10], *hi_unit = units[hi / 10];
    if (lo / 10 == hi / 10)
        snprintf(buf, size, "%llu-%llu %s", lo_value, hi_value, hi_unit);
    else
        snprintf(buf, size, "%llu %s-%llu %s", lo_value, lo_unit, hi_value, hi_unit);
    return buf;
}

char *nccl_format_version(char *buf, size_t size, int64_t version)
{
    assert(buf && size > 0);
    if (version <= 0)
        snprintf(buf, size, "unknown");
    else if (version >= 10000) /* NCCL_VERSION_CODE since 2.9: X*10000 + Y*100 + Z */
        snprintf(buf, size, "%" PRId64 ".%" PRId64 ".%" PRId64, version / 10000,
                 version % 10000 / 100, version % 100);
    else /* before 2.9: X*1000 + Y*100 + Z */
        snprintf(buf, size, "%" PRId64 ".%" PRId64 ".%" PRId64, version / 1000,
                 version % 1000 / 100, version % 100);
    return buf;
}

const char *nccl_end_text(const struct nccl_comm *c)
{
    if (c->aborted)
        return "aborted";
    if (c->destroyed)
        return "destroyed";
    return c->finalized ? "finalized, not destroyed" : "not destroyed";
}
