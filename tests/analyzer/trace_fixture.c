/*
 * trace_fixture.c - writes synthetic trace files the way libcutrace does,
 * for the analyzer's tests (see trace_fixture.h).
 */
#include "trace_fixture.h"

#include "cutrace/format.h"
#include "cutrace/schema.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_SPACING_NS   1000
#define EVENT_HEAD_COLUMNS 14 /* seq .. stream, before arg0 */

struct fixture {
    sqlite3 *db;
    char *path;
    int64_t next_seq;
    int64_t next_t_ns;
    sqlite3_stmt *insert_event;
    bool stacks_format4; /* fixture_stacks_format4: stack_frames without instr, entry */
};

static void die(struct fixture *f, const char *what)
{
    fprintf(stderr, "trace_fixture: %s: %s: %s\n", f->path, what,
            f->db ? sqlite3_errmsg(f->db) : "no database");
    abort();
}

void fixture_exec(struct fixture *f, const char *sql)
{
    char *message = NULL;
    if (sqlite3_exec(f->db, sql, NULL, NULL, &message) != SQLITE_OK) {
        fprintf(stderr, "trace_fixture: %s: %s\n  in: %s\n", f->path, message, sql);
        abort();
    }
}

static sqlite3_stmt *prepare(struct fixture *f, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(f->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        die(f, sql);
    return stmt;
}

static void run(struct fixture *f, sqlite3_stmt *stmt)
{
    if (sqlite3_step(stmt) != SQLITE_DONE)
        die(f, sqlite3_sql(stmt));
    sqlite3_finalize(stmt);
}

void fixture_exec_int(struct fixture *f, const char *sql, int64_t value)
{
    sqlite3_stmt *stmt = prepare(f, sql);
    sqlite3_bind_int64(stmt, 1, value);
    run(f, stmt);
}

/* CT_SCHEMA_SQL without the NOT NULL column constraints (those followed by
 * ',' or ')'; the views' "IS NOT NULL" tests stay). */
static char *nullable_schema(void)
{
    const char *schema = CT_SCHEMA_SQL;
    char *copy = malloc(strlen(schema) + 1);
    if (!copy)
        abort();
    char *out = copy;
    for (const char *p = schema; *p;) {
        if (strncmp(p, " NOT NULL", 9) == 0 && (p[9] == ',' || p[9] == ')'))
            p += 9;
        else
            *out++ = *p++;
    }
    *out = '\0';
    return copy;
}

/* The events insert, with one argN column per CT_RECORD_ARGS, so the
 * fixture follows the record layout of the build it is compiled with. */
static sqlite3_stmt *prepare_event_insert(struct fixture *f)
{
    char sql[1024];
    size_t len = (size_t)snprintf(sql, sizeof(sql),
                                  "INSERT INTO events(seq, parent_seq, t_ns, dur_ns, wait_ns, tid,"
                                  " api_id, device, result, depth, ptr, size, flags, stream");
    for (int i = 0; i < CT_RECORD_ARGS; i++)
        len += (size_t)snprintf(sql + len, sizeof(sql) - len, ", arg%d", i);
    len += (size_t)snprintf(sql + len, sizeof(sql) - len,
                            ", caller, stack_id, handle, ret_seq) VALUES (?");
    for (int i = 1; i < EVENT_HEAD_COLUMNS + CT_RECORD_ARGS; i++)
        len += (size_t)snprintf(sql + len, sizeof(sql) - len, ", ?");
    len += (size_t)snprintf(sql + len, sizeof(sql) - len, ", ?, 0, ?, ?)");
    if (len >= sizeof(sql))
        abort();
    return prepare(f, sql);
}

struct fixture *fixture_create(const char *path, unsigned flags)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f)
        abort();
    f->path = strdup(path);
    f->next_seq = 1;
    f->next_t_ns = 1000000000;
    if (sqlite3_open_v2(path, &f->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK)
        die(f, "open");
    fixture_exec(f, "PRAGMA journal_mode = WAL");
    fixture_exec(f, "PRAGMA wal_autocheckpoint = 0");
    fixture_exec(f, "BEGIN");
    if (flags & FIXTURE_NULLABLE) {
        char *schema = nullable_schema();
        fixture_exec(f, schema);
        free(schema);
    } else {
        fixture_exec(f, CT_SCHEMA_SQL);
    }

    sqlite3_stmt *api = prepare(f, "INSERT INTO apis(api_id, name, layer, role, space, kind)"
                                   " VALUES (?, ?, ?, ?, ?, ?)");
    for (int id = 1; id < CT_API_COUNT; id++) {
        const struct ct_api_info *info = &ct_api_table[id];
        sqlite3_bind_int(api, 1, id);
        sqlite3_bind_text(api, 2, info->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(api, 3, info->layer, -1, SQLITE_STATIC);
        sqlite3_bind_text(api, 4, info->role, -1, SQLITE_STATIC);
        sqlite3_bind_text(api, 5, info->space, -1, SQLITE_STATIC);
        sqlite3_bind_text(api, 6, info->kind, -1, SQLITE_STATIC);
        if (sqlite3_step(api) != SQLITE_DONE)
            die(f, "insert api");
        sqlite3_reset(api);
    }
    sqlite3_finalize(api);

    if (!(flags & FIXTURE_NO_META)) {
        fixture_meta(f, "schema", CT_SCHEMA_NAME);
        fixture_meta_int(f, "format_version", CT_FORMAT_VERSION);
        fixture_meta(f, "producer", "libcutrace 0.1.0-test");
        fixture_meta(f, "end_state", "exit");
    }
    f->insert_event = prepare_event_insert(f);
    return f;
}

void fixture_flush(struct fixture *f)
{
    fixture_exec(f, "COMMIT");
    fixture_exec(f, "BEGIN");
}

void fixture_close(struct fixture *f)
{
    sqlite3_finalize(f->insert_event);
    fixture_exec(f, "COMMIT");
    if (sqlite3_wal_checkpoint_v2(f->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL) != SQLITE_OK)
        die(f, "checkpoint");
    if (sqlite3_close(f->db) != SQLITE_OK)
        die(f, "close");
    free(f->path);
    free(f);
}

sqlite3 *fixture_db(struct fixture *f)
{
    return f->db;
}

void fixture_meta(struct fixture *f, const char *key, const char *value)
{
    sqlite3_stmt *stmt = prepare(f, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)");
    sqlite3_bind_text(stmt, 1, key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 2, value, -1, SQLITE_TRANSIENT);
    run(f, stmt);
}

void fixture_meta_int(struct fixture *f, const char *key, int64_t value)
{
    sqlite3_stmt *stmt = prepare(f, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)");
    sqlite3_bind_text(stmt, 1, key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 2, value);
    run(f, stmt);
}

static void bind_text_or_null(sqlite3_stmt *stmt, int index, const char *text)
{
    if (text)
        sqlite3_bind_text(stmt, index, text, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(stmt, index);
}

void fixture_process(struct fixture *f, const struct fixture_process *p)
{
    sqlite3_stmt *stmt =
        prepare(f, "INSERT INTO process(pid, ppid, host, cmdline, start_wall_ns, start_mono_ns,"
                   " cuda_runtime_version, cuda_driver_version, exe, boot_id, uid,"
                   " nccl_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'boot-test', 1000, ?)");
    sqlite3_bind_int64(stmt, 1, p->pid);
    sqlite3_bind_int64(stmt, 2, p->ppid);
    bind_text_or_null(stmt, 3, p->host);
    bind_text_or_null(stmt, 4, p->cmdline);
    sqlite3_bind_int64(stmt, 5, p->start_wall_ns);
    sqlite3_bind_int64(stmt, 6, p->start_mono_ns);
    sqlite3_bind_int64(stmt, 7, p->cuda_runtime_version);
    sqlite3_bind_int64(stmt, 8, p->cuda_driver_version);
    bind_text_or_null(stmt, 9, p->exe);
    if (p->nccl_version > 0)
        sqlite3_bind_int64(stmt, 10, p->nccl_version);
    else
        sqlite3_bind_null(stmt, 10);
    run(f, stmt);
    /* Events follow the process start unless a test moves the clock. */
    if (f->next_seq == 1)
        f->next_t_ns = p->start_mono_ns + EVENT_SPACING_NS;
}

void fixture_device(struct fixture *f, int64_t device, const char *uuid, const char *name,
                    int64_t total_bytes)
{
    sqlite3_stmt *stmt = prepare(f, "INSERT INTO devices(device, uuid, pci_bus_id, name,"
                                    " total_bytes, first_seq) VALUES (?, ?, ?, ?, ?, 1)");
    char bus[32];
    snprintf(bus, sizeof(bus), "0000:%02" PRIx64 ":00.0", (uint64_t)device + 0x18);
    sqlite3_bind_int64(stmt, 1, device);
    bind_text_or_null(stmt, 2, uuid);
    sqlite3_bind_text(stmt, 3, bus, -1, SQLITE_TRANSIENT);
    bind_text_or_null(stmt, 4, name);
    sqlite3_bind_int64(stmt, 5, total_bytes);
    run(f, stmt);
}

void fixture_env(struct fixture *f, const char *name, const char *value)
{
    sqlite3_stmt *stmt = prepare(f, "INSERT INTO env(name, value) VALUES (?, ?)");
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_TRANSIENT);
    bind_text_or_null(stmt, 2, value);
    run(f, stmt);
}

int64_t fixture_event(struct fixture *f, const struct fixture_event *e)
{
    int64_t seq = e->seq ? e->seq : f->next_seq;
    int64_t t_ns = e->t_ns ? e->t_ns : f->next_t_ns;
    sqlite3_stmt *s = f->insert_event;
    sqlite3_bind_int64(s, 1, seq);
    if (e->parent_seq)
        sqlite3_bind_int64(s, 2, e->parent_seq);
    else
        sqlite3_bind_null(s, 2);
    sqlite3_bind_int64(s, 3, t_ns);
    sqlite3_bind_int64(s, 4, e->dur_ns);
    sqlite3_bind_int64(s, 5, e->wait_ns);
    sqlite3_bind_int64(s, 6, e->tid ? e->tid : 4242);
    sqlite3_bind_int64(s, 7, (int64_t)e->api);
    sqlite3_bind_int64(s, 8, e->device);
    sqlite3_bind_int64(s, 9, e->result);
    sqlite3_bind_int64(s, 10, e->depth);
    sqlite3_bind_int64(s, 11, e->ptr);
    sqlite3_bind_int64(s, 12, e->size);
    sqlite3_bind_int64(s, 13, e->flags);
    sqlite3_bind_int64(s, 14, e->stream);
    for (int i = 0; i < CT_RECORD_ARGS; i++)
        sqlite3_bind_int64(s, EVENT_HEAD_COLUMNS + 1 + i, e->arg[i]);
    sqlite3_bind_int64(s, EVENT_HEAD_COLUMNS + CT_RECORD_ARGS + 1, e->caller);
    int handle = EVENT_HEAD_COLUMNS + CT_RECORD_ARGS + 2;
    if (e->handle)
        sqlite3_bind_blob(s, handle, e->handle, (int)e->handle_len, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(s, handle);
    sqlite3_bind_int64(s, handle + 1, e->ret_seq ? e->ret_seq : seq);
    if (sqlite3_step(s) != SQLITE_DONE)
        die(f, "insert event");
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (seq >= f->next_seq)
        f->next_seq = seq + 1;
    if (t_ns + EVENT_SPACING_NS > f->next_t_ns)
        f->next_t_ns = t_ns + EVENT_SPACING_NS;
    return seq;
}

int64_t fixture_module(struct fixture *f, const char *path, int64_t start, int64_t end)
{
    sqlite3_stmt *stmt = prepare(f, "INSERT INTO modules(path, base, start_addr, end_addr)"
                                    " VALUES (?, ?, ?, ?)");
    bind_text_or_null(stmt, 1, path);
    sqlite3_bind_int64(stmt, 2, start);
    sqlite3_bind_int64(stmt, 3, start);
    sqlite3_bind_int64(stmt, 4, end);
    run(f, stmt);
    return sqlite3_last_insert_rowid(f->db);
}

int64_t fixture_lookup(struct fixture *f, enum ct_api api, const char *symbol, int wrapped,
                       int64_t result, int64_t parent_seq, int64_t caller)
{
    size_t len = strlen(symbol);
    struct fixture_event e = {.api = api,
                              .parent_seq = parent_seq,
                              .depth = parent_seq ? 1 : 0,
                              .device = 0,
                              .result = result,
                              .dur_ns = 200,
                              .ptr = result == 0 ? 0x7f4000010000 + (int64_t)len : 0,
                              .caller = caller,
                              .arg = {12000, wrapped, (int64_t)len},
                              .handle = symbol,
                              .handle_len = len};
    return fixture_event(f, &e);
}

/* The views of format 2 that format 3 changed (include/cutrace/schema.h
 * before the driver API): no module column, no vmm_host kind. */
static const char format2_views[] =
    "CREATE VIEW calls AS SELECT e.seq, e.t_ns, e.dur_ns, e.tid, a.name AS api, a.layer,"
    " e.device, e.ptr, e.size, e.result, (e.depth > 0) AS nested, e.parent_seq, e.flags,"
    " e.stream, e.arg0, e.arg1, e.arg2, e.arg3, e.wait_ns, e.arg4, e.arg5, e.arg6, e.arg7"
    " FROM events e JOIN apis a ON a.api_id = e.api_id;\n"
    "CREATE VIEW mem_events AS SELECT e.seq, e.t_ns, e.device, e.ptr, e.size, a.name AS api,"
    " a.role, a.space, a.kind FROM events e JOIN apis a ON a.api_id = e.api_id"
    " WHERE e.result = 0 AND a.role IN ('alloc', 'free', 'reset') AND NOT EXISTS"
    " (SELECT 1 FROM events p JOIN apis pa ON pa.api_id = p.api_id WHERE p.seq = e.parent_seq"
    " AND pa.role IN ('alloc', 'free', 'reset'));\n"
    "CREATE VIEW allocations AS WITH m AS (SELECT *, LEAD(role) OVER w AS next_role,"
    " LEAD(seq) OVER w AS next_seq, LEAD(t_ns) OVER w AS next_t_ns, LEAD(api) OVER w AS next_api"
    " FROM mem_events WHERE role IN ('alloc', 'free')"
    " WINDOW w AS (PARTITION BY space, ptr ORDER BY seq)),"
    " r AS (SELECT seq, t_ns, device, api FROM mem_events WHERE role = 'reset'),"
    " j AS (SELECT m.*, (SELECT MIN(r.seq) FROM r WHERE r.device = m.device AND r.seq > m.seq)"
    " AS reset_seq FROM m WHERE m.role = 'alloc')"
    " SELECT j.seq, j.api, j.device, j.ptr, j.size, j.kind, j.t_ns,"
    " CASE WHEN j.next_seq IS NOT NULL AND (j.reset_seq IS NULL OR j.next_seq < j.reset_seq)"
    " THEN j.next_seq ELSE j.reset_seq END AS free_seq,"
    " CASE WHEN j.next_seq IS NOT NULL AND (j.reset_seq IS NULL OR j.next_seq < j.reset_seq)"
    " THEN j.next_t_ns ELSE (SELECT r.t_ns FROM r WHERE r.seq = j.reset_seq) END AS free_t_ns,"
    " CASE WHEN j.next_seq IS NOT NULL AND (j.reset_seq IS NULL OR j.next_seq < j.reset_seq)"
    " THEN (CASE WHEN j.next_role = 'free' THEN j.next_api ELSE 'implicit' END)"
    " ELSE (SELECT r.api FROM r WHERE r.seq = j.reset_seq) END AS free_api FROM j;\n";

/* The views of format 5 that format 6 changed (include/cutrace/schema.h
 * before ret_seq and effect_order): frees paired by seq. */
static const char format5_views[] =
    "CREATE VIEW calls AS SELECT e.seq, e.t_ns, e.dur_ns, e.tid, a.name AS api, a.layer,"
    " e.device, e.ptr, e.size, e.result, (e.depth > 0) AS nested, e.parent_seq, e.flags,"
    " e.stream, e.arg0, e.arg1, e.arg2, e.arg3, e.wait_ns, e.arg4, e.arg5, e.arg6, e.arg7,"
    " (SELECT m.path FROM modules m WHERE e.caller >= m.start_addr AND e.caller < m.end_addr)"
    " AS module, e.caller, e.stack_id FROM events e JOIN apis a ON a.api_id = e.api_id;\n"
    "CREATE VIEW logical_events AS SELECT e.*, a.name AS api, a.layer, a.role, a.space,"
    " a.kind AS api_kind FROM events e JOIN apis a ON a.api_id = e.api_id"
    " LEFT JOIN events p ON p.seq = e.parent_seq LEFT JOIN apis pa ON pa.api_id = p.api_id"
    " WHERE pa.role IS NULL OR NOT (pa.role = a.role OR (pa.role IN ('alloc', 'free', 'reset')"
    " AND a.role IN ('alloc', 'free', 'reset')));\n"
    "CREATE VIEW mem_events AS SELECT seq, t_ns, device, ptr, size, api, role, space,"
    " CASE WHEN api_kind = 'vmm' AND arg1 != 1 THEN 'vmm_host' ELSE api_kind END AS kind,"
    " caller FROM logical_events WHERE result = 0 AND role IN ('alloc', 'free', 'reset');\n"
    "CREATE VIEW allocations AS WITH m AS (SELECT *, LEAD(role) OVER w AS next_role,"
    " LEAD(seq) OVER w AS next_seq, LEAD(t_ns) OVER w AS next_t_ns, LEAD(api) OVER w AS next_api"
    " FROM mem_events WHERE role IN ('alloc', 'free')"
    " WINDOW w AS (PARTITION BY space, ptr ORDER BY seq)),"
    " r AS (SELECT seq, t_ns, device, api FROM mem_events WHERE role = 'reset'),"
    " j AS (SELECT m.*, (SELECT MIN(r.seq) FROM r WHERE r.device = m.device AND r.seq > m.seq"
    " AND m.space IN ('device', 'host', 'ipc')) AS reset_seq FROM m WHERE m.role = 'alloc')"
    " SELECT j.seq, j.api, j.device, j.ptr, j.size, j.kind, j.t_ns,"
    " CASE WHEN j.next_seq IS NOT NULL AND (j.reset_seq IS NULL OR j.next_seq < j.reset_seq)"
    " THEN j.next_seq ELSE j.reset_seq END AS free_seq,"
    " CASE WHEN j.next_seq IS NOT NULL AND (j.reset_seq IS NULL OR j.next_seq < j.reset_seq)"
    " THEN j.next_t_ns ELSE (SELECT r.t_ns FROM r WHERE r.seq = j.reset_seq) END AS free_t_ns,"
    " CASE WHEN j.next_seq IS NOT NULL AND (j.reset_seq IS NULL OR j.next_seq < j.reset_seq)"
    " THEN (CASE WHEN j.next_role = 'free' THEN j.next_api ELSE 'implicit' END)"
    " ELSE (SELECT r.api FROM r WHERE r.seq = j.reset_seq) END AS free_api,"
    " (SELECT md.path FROM modules md WHERE j.caller >= md.start_addr AND j.caller < md.end_addr)"
    " AS module FROM j;\n";

void fixture_downgrade(const char *path, int format)
{
    if (format < 1 || (format > 2 && format != 5 && format != 6))
        abort();
    struct fixture f = {.path = strdup(path)};
    if (sqlite3_open_v2(path, &f.db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        die(&f, "open");
    /* Every format before 7: no ancestors. */
    fixture_exec(&f, "BEGIN; DROP TABLE ancestors");
    /* Every format before 6: no ret_seq, no effect orders. */
    if (format < 6) {
        fixture_exec(&f, "DROP VIEW allocations; DROP VIEW mem_events; DROP VIEW calls;"
                         " DROP VIEW logical_events");
        fixture_exec(&f, format5_views);
        fixture_exec(&f, "ALTER TABLE events DROP COLUMN ret_seq");
    }
    /* The events table keeps its eight argument columns (format 1 had
     * four): no report reads them. */
    if (format <= 2) {
        fixture_exec(&f, "DROP VIEW driver_lookups; DROP VIEW allocations;"
                         " DROP VIEW mem_events; DROP VIEW calls; DROP TABLE modules");
        fixture_exec(&f, format2_views);
    }
    if (format == 1)
        fixture_exec(&f, "DROP VIEW collectives; DROP VIEW communicators; DROP VIEW nccl_events;"
                         " ALTER TABLE process DROP COLUMN nccl_version");
    fixture_meta_int(&f, "format_version", format);
    fixture_exec(&f, "COMMIT");
    if (sqlite3_close(f.db) != SQLITE_OK)
        die(&f, "close");
    free(f.path);
}

int64_t fixture_call(struct fixture *f, enum ct_api api, int64_t device, int64_t ptr, int64_t size,
                     int64_t result)
{
    struct fixture_event e = {
        .api = api, .device = device, .ptr = ptr, .size = size, .result = result, .dur_ns = 100};
    return fixture_event(f, &e);
}

int64_t fixture_meminfo(struct fixture *f, int64_t device, int64_t free_bytes, int64_t total_bytes)
{
    struct fixture_event e = {.api = CT_API_cudaMemGetInfo,
                              .device = device,
                              .dur_ns = 100,
                              .arg = {free_bytes, total_bytes}};
    return fixture_event(f, &e);
}

int64_t fixture_nvtx(struct fixture *f, enum ct_api api, int64_t tid, int64_t domain, int64_t arg1,
                     const char *message)
{
    struct fixture_event e = {.api = api, .device = 0, .tid = tid};
    e.arg[0] = domain;
    e.arg[1] = arg1;
    if (message) {
        e.handle = message;
        e.handle_len = strlen(message);
        e.arg[2] = (int64_t)e.handle_len;
    }
    return fixture_event(f, &e);
}

int64_t fixture_nccl_init(struct fixture *f, const struct fixture_nccl_init *init)
{
    enum ct_api api = init->api;
    if (api == CT_API_NONE)
        api = init->parent ? CT_API_ncclCommSplit : CT_API_ncclCommInitRank;
    struct fixture_event e = {.api = api,
                              .t_ns = init->t_ns,
                              .device = init->device,
                              .result = init->result,
                              .dur_ns = init->dur_ns ? init->dur_ns : 50000,
                              .ptr = init->comm,
                              .caller = init->caller,
                              .arg = {init->comm, init->nranks, init->rank, (int64_t)init->hash,
                                      init->parent, init->color, init->key}};
    return fixture_event(f, &e);
}

int64_t fixture_nccl_call(struct fixture *f, const struct fixture_nccl_call *c)
{
    struct fixture_event e = {.api = c->api,
                              .device = c->device,
                              .result = c->result,
                              .dur_ns = c->dur_ns,
                              .stream = c->stream,
                              .ptr = c->sendbuff,
                              .size = c->bytes,
                              .arg = {c->comm, c->count, c->datatype, c->redop, c->peer,
                                      c->recvbuff, c->group_depth, c->captured ? 1 : 0}};
    return fixture_event(f, &e);
}

static int64_t type_size(int64_t datatype)
{
    switch (datatype) {
    case NCCL_INT32:
    case NCCL_FLOAT32:
        return 4;
    case NCCL_FLOAT16:
    case NCCL_BFLOAT16:
        return 2;
    default:
        return 1;
    }
}

int64_t fixture_nccl_collective(struct fixture *f, enum ct_api op, int64_t comm, int64_t datatype,
                                int64_t bytes, int64_t group_depth, int captured)
{
    bool reduces =
        op == CT_API_ncclAllReduce || op == CT_API_ncclReduce || op == CT_API_ncclReduceScatter;
    bool rooted = op == CT_API_ncclBroadcast || op == CT_API_ncclBcast || op == CT_API_ncclReduce ||
                  op == CT_API_ncclGather || op == CT_API_ncclScatter;
    struct fixture_nccl_call c = {.api = op,
                                  .comm = comm,
                                  .count = bytes / type_size(datatype),
                                  .datatype = datatype,
                                  .redop = reduces ? 0 : FIXTURE_NCCL_NONE,
                                  .peer = rooted ? 0 : FIXTURE_NCCL_NONE,
                                  .bytes = bytes,
                                  .group_depth = group_depth,
                                  .captured = captured,
                                  .dur_ns = 2000,
                                  .stream = 0x5000,
                                  .sendbuff = 0x7f5000000000,
                                  .recvbuff = 0x7f6000000000};
    return fixture_nccl_call(f, &c);
}

int64_t fixture_nccl_p2p(struct fixture *f, enum ct_api op, int64_t comm, int64_t peer,
                         int64_t bytes, int64_t group_depth)
{
    struct fixture_nccl_call c = {.api = op,
                                  .comm = comm,
                                  .count = bytes,
                                  .datatype = NCCL_INT8,
                                  .redop = FIXTURE_NCCL_NONE,
                                  .peer = peer,
                                  .bytes = bytes,
                                  .group_depth = group_depth,
                                  .dur_ns = 1000,
                                  .stream = 0x5000,
                                  .sendbuff = op == CT_API_ncclSend ? 0x7f5000000000 : 0,
                                  .recvbuff = op == CT_API_ncclRecv ? 0x7f6000000000 : 0};
    return fixture_nccl_call(f, &c);
}

int64_t fixture_nccl_end(struct fixture *f, enum ct_api api, int64_t comm)
{
    struct fixture_event e = {.api = api, .dur_ns = 10000, .arg = {comm}};
    return fixture_event(f, &e);
}

int64_t fixture_nccl_group(struct fixture *f, enum ct_api api)
{
    struct fixture_event e = {.api = api, .dur_ns = 100};
    return fixture_event(f, &e);
}

int64_t fixture_next_t(const struct fixture *f)
{
    return f->next_t_ns;
}

void fixture_set_clock(struct fixture *f, int64_t next_t_ns)
{
    f->next_t_ns = next_t_ns;
}

char *fixture_trace_path(const char *dir, const char *host, int64_t pid, int64_t start_wall_ns)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s-%" PRId64 "-%" PRId64 ".db", dir, host, pid, start_wall_ns) < 0)
        abort();
    return path;
}

int64_t fixture_loaded_module(struct fixture *f, const char *path, const char *build_id,
                              int64_t start, int64_t end)
{
    sqlite3_stmt *stmt = prepare(f, "INSERT INTO loaded_modules(path, build_id, base, start_addr,"
                                    " end_addr, first_seq) VALUES (?, ?, ?, ?, ?, 0)");
    bind_text_or_null(stmt, 1, path);
    bind_text_or_null(stmt, 2, build_id);
    sqlite3_bind_int64(stmt, 3, start);
    sqlite3_bind_int64(stmt, 4, start);
    sqlite3_bind_int64(stmt, 5, end);
    run(f, stmt);
    return sqlite3_last_insert_rowid(f->db);
}

int64_t fixture_py_code(struct fixture *f, const char *function, const char *file)
{
    sqlite3_stmt *stmt = prepare(f, "SELECT code_id FROM py_code WHERE function = ? AND file = ?");
    sqlite3_bind_text(stmt, 1, function, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 2, file, -1, SQLITE_TRANSIENT);
    int64_t id = 0;
    if (sqlite3_step(stmt) == SQLITE_ROW)
        id = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    if (id)
        return id;
    /* Code ids start at 1 (0: a code object whose names were not sent). */
    stmt = prepare(f, "INSERT INTO py_code(code_id, function, file)"
                      " SELECT coalesce(max(code_id), 0) + 1, ?, ? FROM py_code");
    sqlite3_bind_text(stmt, 1, function, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 2, file, -1, SQLITE_TRANSIENT);
    run(f, stmt);
    return sqlite3_last_insert_rowid(f->db);
}

static void bind_int_or_null(sqlite3_stmt *stmt, int index, int64_t value)
{
    if (value == FIXTURE_NULL)
        sqlite3_bind_null(stmt, index);
    else
        sqlite3_bind_int64(stmt, index, value);
}

void fixture_stack(struct fixture *f, int64_t id, const struct fixture_frame *frames, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct fixture_frame *fr = &frames[i];
        int64_t value = fr->ip;
        if (fr->python)
            value = (int64_t)((uint64_t)fixture_py_code(f, fr->symbol ? fr->symbol : "?",
                                                        fr->file ? fr->file : "?")
                                  << 32 |
                              ((uint64_t)fr->line & 0xffffffffu));
        else if (fr->symbol) {
            sqlite3_stmt *name =
                prepare(f, "INSERT OR REPLACE INTO symbols(ip, symbol) VALUES (?, ?)");
            sqlite3_bind_int64(name, 1, fr->ip);
            sqlite3_bind_text(name, 2, fr->symbol, -1, SQLITE_TRANSIENT);
            run(f, name);
        }
        sqlite3_stmt *stmt =
            prepare(f, f->stacks_format4
                           ? "INSERT INTO stack_frames(stack_id, depth, kind, value)"
                             " VALUES (?, ?, ?, ?)"
                           : "INSERT INTO stack_frames(stack_id, depth, kind, value, instr, entry)"
                             " VALUES (?, ?, ?, ?, ?, ?)");
        sqlite3_bind_int64(stmt, 1, id);
        sqlite3_bind_int64(stmt, 2, (int64_t)i);
        sqlite3_bind_int64(stmt, 3, fr->python ? 1 : 0);
        sqlite3_bind_int64(stmt, 4, value);
        if (!f->stacks_format4) {
            bind_int_or_null(stmt, 5, fr->python ? fr->instr : FIXTURE_NULL);
            bind_int_or_null(stmt, 6, fr->python ? fr->entry : FIXTURE_NULL);
        }
        run(f, stmt);
    }
}

void fixture_call_stack(struct fixture *f, int64_t seq, int64_t stack_id)
{
    sqlite3_stmt *stmt = prepare(f, "UPDATE events SET stack_id = ? WHERE seq = ?");
    sqlite3_bind_int64(stmt, 1, stack_id);
    sqlite3_bind_int64(stmt, 2, seq);
    run(f, stmt);
}

void fixture_linetable(struct fixture *f, int64_t code_id, int64_t format, int64_t first_line,
                       const void *bytes, size_t len)
{
    sqlite3_stmt *stmt = prepare(f, "INSERT OR REPLACE INTO py_linetables(code_id, format,"
                                    " first_line, size, bytes) VALUES (?, ?, ?, ?, ?)");
    sqlite3_bind_int64(stmt, 1, code_id);
    sqlite3_bind_int64(stmt, 2, format);
    sqlite3_bind_int64(stmt, 3, first_line);
    sqlite3_bind_int64(stmt, 4, (int64_t)len);
    sqlite3_bind_blob(stmt, 5, len ? bytes : "", (int)len, SQLITE_TRANSIENT);
    run(f, stmt);
}

/* Format 4's stack_frames and stacks view (include/cutrace/schema.h before
 * instr and entry). */
static const char format4_stacks[] =
    "CREATE TABLE stack_frames(stack_id INTEGER NOT NULL, depth INTEGER NOT NULL,"
    " kind INTEGER NOT NULL, value INTEGER NOT NULL, PRIMARY KEY (stack_id, depth))"
    " WITHOUT ROWID;\n"
    "CREATE VIEW stacks AS SELECT f.stack_id, f.depth, m.path AS module,"
    " CASE WHEN f.kind = 0 THEN s.symbol ELSE c.function END AS symbol,"
    " CASE WHEN f.kind = 0 THEN f.value - m.base END AS offset, c.file,"
    " CASE WHEN f.kind = 1 THEN nullif(f.value & 4294967295, 0) END AS line,"
    " CASE WHEN f.kind = 0 THEN 'native' ELSE 'python' END AS kind,"
    " CASE WHEN f.kind = 0 THEN f.value END AS ip FROM stack_frames f"
    " LEFT JOIN loaded_modules m ON f.kind = 0 AND m.load_id = (SELECT x.load_id"
    " FROM loaded_modules x WHERE f.value >= x.start_addr AND f.value < x.end_addr"
    " ORDER BY x.load_id DESC LIMIT 1)"
    " LEFT JOIN py_code c ON f.kind = 1 AND c.code_id = (f.value >> 32)"
    " LEFT JOIN symbols s ON f.kind = 0 AND s.ip = f.value;\n";

void fixture_stacks_format4(struct fixture *f)
{
    fixture_exec(f, "DROP VIEW stacks; DROP TABLE stack_frames; DROP TABLE py_linetables");
    fixture_exec(f, format4_stacks);
    fixture_meta_int(f, "format_version", 4);
    f->stacks_format4 = true;
}
