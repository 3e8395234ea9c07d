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

/*
 * What the reports' queries on the views were, compiled and not run, so
 * that a view that is there but does not compile (a damaged trace) is
 * refused with SQLite's words as before: running them would sort every
 * NCCL event, and the model's pass already has their rows.
 */
static int check_compiles(struct trace *t)
{
    static const char *const queries[] = {
        "SELECT comm_id, unique_id_hash, rank, nranks, device, parent_comm_id, t_init_ns,"
        " t_destroy_ns, init_result, api, comm, color, key, t_finalize_ns"
        " FROM communicators ORDER BY comm_id",
        "SELECT arg0, t_ns, seq FROM calls WHERE api = 'ncclCommAbort' AND result = 0",
        "SELECT comm_id, op, count(*), sum(captured = 1), sum(result <> 0)"
        " FROM collectives GROUP BY comm_id, op",
    };
    for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
        sqlite3_stmt *stmt = trace_query(t, queries[i], "");
        if (!stmt)
            return -1;
        sqlite3_finalize(stmt);
    }
    return 0;
}

int nccl_check(struct trace *t, bool required, struct nccl_info *info)
{
    memset(info, 0, sizeof(*info));
    int rc = check_schema(t, required);
    if (rc <= 0)
        return rc;
    info->present = true;
    return check_compiles(t) != 0 || load_version(t, info) != 0 ? -1 : 0;
}

void nccl_add_comms(struct nccl_info *info, const struct nccl_comms *comms)
{
    assert(info->ncomms == 0 && !comms->index);
    if (comms->ncomms == 0)
        return;
    info->comms = xcalloc(comms->ncomms, sizeof(*info->comms));
    for (size_t i = 0; i < comms->ncomms; i++) {
        struct nccl_comm *c = &info->comms[i];
        *c = comms->comms[i];
        assert(i == 0 || c->comm_id > info->comms[i - 1].comm_id);
        c->hash = xstrdup(c->hash);
        c->api = c->api ? xstrdup(c->api) : NULL;
        c->calls = c->failed_calls = 0;
    }
    info->ncomms = comms->ncomms;
}

static void free_comms(struct nccl_comm *comms, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free(comms[i].hash);
        free(comms[i].api);
    }
    free(comms);
}

void nccl_comms_free(struct nccl_comms *comms)
{
    assert(!comms->index && "the pass frees its lookups when it ends");
    free_comms(comms->comms, comms->ncomms);
    memset(comms, 0, sizeof(*comms));
}

void nccl_info_free(struct nccl_info *info)
{
    free_comms(info->comms, info->ncomms);
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
