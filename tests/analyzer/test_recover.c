/*
 * test_recover.c - crash recovery end to end: `cutrace recover` and the
 * folding every report does first, on rings built here with the tracer's
 * own ring code (ct_ring_format/ct_ring_push, as a killed process leaves
 * them) beside traces built with trace_fixture.h. Covers the good path
 * (records folded exactly once, end_state, writer_error, a trace made from
 * the header), the rings that must be left alone (locked by a live process,
 * read-only directory) and every kind of hostile ring, each of which must
 * be refused with one line and leave ring and trace untouched.
 */
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include "cutrace/ring.h"
#include "cutrace/apis.h"
#include "cutrace/format.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PID       4242
#define HOST      "node1"
#define START_NS  1000
#define DB_NAME   HOST "-4242-1000.db"
#define RING_NAME HOST "-4242-1000.ring"
#define MIB       (1 << 20)
#define NOBODY    65534

/* A ring as a killed process leaves it: records first..first+count-1 were
 * pushed, the writer committed and released the first `released`. */
struct ring_spec {
    uint64_t capacity; /* 0: 16 */
    const char *db_name;
    const char *end_state;    /* NULL: none recorded */
    const char *writer_error; /* NULL: the writer did not give up */
    uint64_t stopped_after;
    uint64_t first, count, released;
    /* The process the header names; 0 or NULL: PID, START_NS, 500000000, "boot-1". */
    int64_t pid;
    uint64_t start_wall_ns, start_mono_ns;
    const char *boot_id;
    uint64_t dropped;   /* records the process counted as not taken */
    uint32_t version;   /* 0: CT_RING_VERSION; older ones have no ret_seq (left 0) */
    uint64_t ret_ahead; /* records return when seq + ret_ahead calls had started */
};

static char *join(const char *dir, const char *name)
{
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
    return path;
}

/* Record seq s: cudaMalloc of 1 MiB on device 0, as the fixture lays events
 * out in time (1 us apart from 1 s). */
static struct ct_record record(uint64_t seq)
{
    struct ct_record r;
    memset(&r, 0, sizeof(r));
    r.seq = seq;
    r.t_ns = 1000000000 + (seq - 1) * 1000;
    r.dur_ns = 100;
    r.tid = PID;
    r.api = CT_API_cudaMalloc;
    r.ptr = 0x7f0000000000 + seq * MIB;
    r.size = MIB;
    return r;
}

static bool alive(void)
{
    return true;
}

static void write_ring(const char *path, const struct ring_spec *spec)
{
    uint64_t capacity = spec->capacity ? spec->capacity : 16;
    size_t bytes = ct_ring_bytes(capacity);
    void *mem = calloc(1, bytes);
    ck_assert_ptr_nonnull(mem);
    struct ct_ring_owner owner = {
        spec->pid ? spec->pid : PID, spec->start_wall_ns ? spec->start_wall_ns : START_NS,
        spec->start_mono_ns ? spec->start_mono_ns : 500000000,
        spec->db_name ? spec->db_name : DB_NAME, spec->boot_id ? spec->boot_id : "boot-1"};
    ct_ring_format(mem, capacity, &owner);
    struct ct_ring ring;
    ck_assert(ct_ring_attach(&ring, mem, bytes));
    ck_assert_uint_le(spec->count, capacity);
    for (uint64_t i = 0; i < spec->count; i++) {
        struct ct_record r = record(spec->first + i);
        if (!spec->version)
            r.ret_seq = r.seq + spec->ret_ahead;
        ct_ring_push(&ring, &r, alive);
    }
    uint64_t cursor = 0;
    for (uint64_t i = 0; i < spec->released; i++)
        ck_assert_ptr_nonnull(ct_ring_peek(&ring, &cursor));
    ct_ring_release(&ring, cursor);
    if (spec->end_state)
        ct_ring_note_end(&ring, spec->end_state);
    if (spec->writer_error)
        ct_ring_note_writer_failure(&ring, spec->stopped_after, spec->writer_error);
    if (spec->dropped)
        ct_ring_count_dropped(&ring, spec->dropped);
    if (spec->version)
        ((struct ct_ring_header *)mem)->version = spec->version;
    write_file(path, mem, bytes);
    free(mem);
}

/* A trace as the tracer publishes it before its ring: this host's process
 * row, end_state as given (NULL: none), `calls` cudaMalloc calls. */
static char *make_published(const char *dir, const char *host, int64_t pid, uint64_t wall,
                            uint64_t mono, const char *boot_id, const char *end_state, int calls)
{
    char *path = fixture_trace_path(dir, host, pid, (int64_t)wall);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid,
                                .ppid = 1,
                                .host = host,
                                .cmdline = "python3 serve.py",
                                .exe = "/usr/bin/python3",
                                .start_wall_ns = (int64_t)wall,
                                .start_mono_ns = (int64_t)mono};
    fixture_process(f, &p);
    if (end_state)
        fixture_meta(f, "end_state", end_state);
    for (int i = 1; i <= calls; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, (int64_t)(0x7f0000000000 + (uint64_t)i * MIB), MIB,
                     0);
    fixture_close(f);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    /* The fixture says 'exit' unless told otherwise; NULL: say nothing. */
    char *sql = sqlite3_mprintf("UPDATE process SET boot_id = %Q;%s", boot_id,
                                end_state ? "" : "DELETE FROM meta WHERE key = 'end_state'");
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(sql);
    sqlite3_close(db);
    return path;
}

/* A trace with events 1..n (cudaMalloc, 1 MiB) of a process still running. */
static char *make_trace(const char *dir, int n)
{
    return make_published(dir, HOST, PID, START_NS, 500000000, "boot-test", "running", n);
}

/* The usual case: trace 1..5, ring 1..10 with 1..3 released (4..10 left,
 * of which 4 and 5 were committed just before the kill). */
static void make_killed(const char *dir, char **db, char **ring)
{
    *db = make_trace(dir, 5);
    *ring = join(dir, RING_NAME);
    struct ring_spec spec = {.first = 1, .count = 10, .released = 3};
    write_ring(*ring, &spec);
}

static int64_t query_int(const char *db_path, const char *sql)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *stmt;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    int64_t value = -1;
    if (sqlite3_step(stmt) == SQLITE_ROW)
        value = sqlite3_column_type(stmt, 0) == SQLITE_NULL ? -2 : sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return value;
}

/* meta's value as text, "" if missing (malloc'd). */
static char *meta(const char *db_path, const char *key)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *stmt;
    ck_assert_int_eq(
        sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?", -1, &stmt, NULL), SQLITE_OK);
    sqlite3_bind_text(stmt, 1, key, -1, SQLITE_STATIC);
    const char *text = "";
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0))
        text = (const char *)sqlite3_column_text(stmt, 0);
    char *copy = strdup(text);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return copy;
}

static void assert_meta(const char *db_path, const char *key, const char *expected)
{
    char *value = meta(db_path, key);
    ck_assert_msg(strcmp(value, expected) == 0, "meta %s is '%s', expected '%s'", key, value,
                  expected);
    free(value);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static struct proc_result run2(const char *a, const char *b, const char *c)
{
    const char *args[] = {a, b, c, NULL};
    return run_cutrace(args, NULL);
}

static void assert_ok(const struct proc_result *r)
{
    ck_assert_msg(!r->signaled && r->status == 0, "exit %d; stderr:\n%.1500s", r->status, r->err);
    ck_assert_msg(r->err_len == 0, "stderr not empty:\n%.1500s", r->err);
}

/* Writes `spec` as the directory's ring and folds it, quietly and successfully. */
static void fold_ring(const char *dir, const char *ring, const struct ring_spec *spec)
{
    write_ring(ring, spec);
    struct proc_result r = run2("recover", dir, NULL);
    assert_ok(&r);
    proc_result_free(&r);
}

/* ---- the good path ---- */

START_TEST(test_recover_folds_exactly_once)
{
    char *dir = scratch_dir(), *db, *ring;
    make_killed(dir, &db, &ring);

    struct proc_result r = run2("recover", dir, NULL);
    assert_ok(&r);
    ck_assert_str_eq(r.out, "recovered " DB_NAME ": 5 records from its ring, 2 already in it "
                            "(process 4242, ended: killed)\n");
    proc_result_free(&r);
    ck_assert(!exists(ring));
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 10);
    ck_assert_int_eq(query_int(db, "SELECT count(DISTINCT seq) FROM events"), 10);
    ck_assert_int_eq(query_int(db, "SELECT min(seq) + max(seq) FROM events"), 11);
    /* The committed copies of 4 and 5 were kept, and the ring's 6..10 are exact. */
    ck_assert_int_eq(query_int(db, "SELECT sum(size) FROM events WHERE seq > 5"), 5 * MIB);
    ck_assert_int_eq(query_int(db, "SELECT t_ns FROM events WHERE seq = 10"), 1000009000);
    assert_meta(db, "end_state", "killed");
    ck_assert_int_eq(query_int(db, "SELECT value FROM meta WHERE key = 'recovered_records'"), 5);
    ck_assert_int_eq(query_int(db, "SELECT typeof(value) = 'integer' FROM meta"
                                   " WHERE key = 'recovered_records'"),
                     1);

    /* Again: nothing left to do, nothing changes. */
    r = run2("recover", dir, NULL);
    assert_ok(&r);
    assert_contains(r.out, "nothing to recover");
    proc_result_free(&r);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 10);
    ck_assert_int_eq(query_int(db, "SELECT value FROM meta WHERE key = 'recovered_records'"), 5);

    /* The report says what happened. */
    r = run2("summary", dir, NULL);
    assert_ok(&r);
    assert_contains(r.out, "ended      killed (no clean exit; 5 records recovered from its ring)");
    assert_contains(r.out, "calls      10 (0 failed, 0 nested)");
    ck_assert_ptr_null(strstr(r.out, "stopped"));
    proc_result_free(&r);
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_replayed_ring_adds_nothing)
{
    /* A ring every record of which is already committed (a fold that was
     * killed after its commit, before deleting the ring). */
    char *dir = scratch_dir();
    char *db = make_trace(dir, 5), *ring = join(dir, RING_NAME);
    struct ring_spec spec = {.first = 1, .count = 5};
    write_ring(ring, &spec);
    struct proc_result r = run2("recover", dir, NULL);
    assert_ok(&r);
    ck_assert_str_eq(r.out, "recovered " DB_NAME ": 0 records from its ring, 5 already in it "
                            "(process 4242, ended: killed)\n");
    proc_result_free(&r);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 5);
    ck_assert_int_eq(query_int(db, "SELECT value FROM meta WHERE key = 'recovered_records'"), 0);
    /* recovered_records adds up over folds instead of being overwritten. */
    spec = (struct ring_spec){.first = 4, .count = 4};
    fold_ring(dir, ring, &spec);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 7);
    ck_assert_int_eq(query_int(db, "SELECT value FROM meta WHERE key = 'recovered_records'"), 2);
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

/* Rings and traces from before ret_seq (ring 5, format 5) still fold: a
 * ring-5 record's effect is placed at its seq, a format-5 trace takes
 * records as it had them; a ring-6 record keeps its ret_seq. */
START_TEST(test_rings_and_traces_before_ret_seq)
{
    for (int old_trace = 0; old_trace <= 1; old_trace++) {
        char *dir = scratch_dir();
        char *db = make_trace(dir, 5), *ring = join(dir, RING_NAME);
        if (old_trace)
            fixture_downgrade(db, 5);
        struct ring_spec spec = {.first = 4, .count = 4, .version = 5};
        write_ring(ring, &spec);
        struct proc_result r = run2("recover", dir, NULL);
        assert_ok(&r);
        proc_result_free(&r);
        ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 7);
        if (!old_trace) {
            ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events WHERE ret_seq = seq"), 7);
            spec = (struct ring_spec){.first = 8, .count = 2, .ret_ahead = 3};
            write_ring(ring, &spec);
            r = run2("recover", dir, NULL);
            assert_ok(&r);
            proc_result_free(&r);
            ck_assert_int_eq(query_int(db, "SELECT ret_seq FROM events WHERE seq = 9"), 12);
            ck_assert_int_eq(query_int(db, "SELECT effect_order FROM calls WHERE seq = 9"), 25);
        } else {
            ck_assert_int_eq(query_int(db, "SELECT value FROM meta WHERE key = 'format_version'"),
                             5);
        }
        r = run2("summary", dir, NULL);
        assert_ok(&r);
        assert_contains(r.out, old_trace ? "calls      7 (0 failed, 0 nested)"
                                         : "calls      9 (0 failed, 0 nested)");
        proc_result_free(&r);
        free(db);
        free(ring);
        scratch_remove(dir);
    }
}
END_TEST

START_TEST(test_recover_json)
{
    char *dir = scratch_dir(), *db, *ring;
    make_killed(dir, &db, &ring);
    struct proc_result r = run2("recover", "--json", dir);
    assert_ok(&r);
    ck_assert_msg(json_valid(r.out), "invalid JSON:\n%s", r.out);
    char *j = compact(r.out);
    assert_contains(j, "{\"cutrace_version\":\"" CUTRACE_VERSION "\",\"report\":\"recover\"");
    assert_contains(j, "\"rings\":[{\"ring\":\"" RING_NAME "\",\"db\":\"" DB_NAME "\","
                       "\"status\":\"recovered\",\"error\":null,\"error_file\":null,"
                       "\"pid\":4242,\"start_wall_ns\":1000,\"start_mono_ns\":500000000,"
                       "\"boot_id\":\"boot-1\",\"created_db\":false,\"ring_records\":7,"
                       "\"new_records\":5,\"already_in_trace\":2,\"recovered_records\":5,"
                       "\"end_state_before\":\"running\",\"end_state\":\"killed\","
                       "\"writer_error\":null,\"writer_stopped_after\":null,"
                       "\"ring_deleted\":true}]");
    assert_contains(j, "\"totals\":{\"rings\":1,\"recovered\":1,\"live\":0,\"failed\":0,"
                       "\"new_records\":5}");
    free(j);
    proc_result_free(&r);

    r = run2("summary", "--json", dir);
    assert_ok(&r);
    j = compact(r.out);
    assert_contains(j, "\"end_state\":\"killed\",\"recovered_records\":5,\"writer_error\":null,"
                       "\"writer_stopped_after\":null,\"pid\":4242");
    free(j);
    proc_result_free(&r);
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_summary_folds_silently)
{
    for (int json = 0; json <= 1; json++) {
        char *dir = scratch_dir(), *db, *ring;
        make_killed(dir, &db, &ring);
        struct proc_result r = run2("summary", dir, json ? "--json" : NULL);
        assert_ok(&r);
        ck_assert(!exists(ring));
        if (json) {
            char *j = compact(r.out);
            assert_contains(j, "\"end_state\":\"killed\",\"recovered_records\":5");
            assert_contains(j, "\"calls\":10,");
            free(j);
        } else {
            assert_contains(r.out, "killed (no clean exit; 5 records recovered from its ring)");
            assert_contains(r.out, "calls      10 (0 failed, 0 nested)");
        }
        proc_result_free(&r);
        ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 10);
        free(db);
        free(ring);
        scratch_remove(dir);
    }
}
END_TEST

START_TEST(test_recover_one_file)
{
    char *dir = scratch_dir(), *db, *ring;
    make_killed(dir, &db, &ring);
    struct proc_result r = run2("recover", db, NULL);
    assert_ok(&r);
    assert_contains(r.out, "recovered " DB_NAME ": 5 records");
    proc_result_free(&r);
    ck_assert(!exists(ring));
    r = run2("recover", db, NULL);
    assert_ok(&r);
    assert_contains(r.out, "nothing to recover");
    proc_result_free(&r);

    /* A summary of the one file folds its ring too. */
    struct ring_spec spec = {.first = 11, .count = 2};
    write_ring(ring, &spec);
    r = run2("summary", db, NULL);
    assert_ok(&r);
    assert_contains(r.out, "calls      12 ");
    assert_contains(r.out, "7 records recovered");
    proc_result_free(&r);
    ck_assert(!exists(ring));
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

/* A process killed before its writer made the schema: the trace is missing,
 * empty, or an SQLite file with nothing in it. */
START_TEST(test_trace_made_from_header)
{
    for (int variant = 0; variant < 3; variant++) {
        char *dir = scratch_dir();
        char *db = join(dir, DB_NAME), *ring = join(dir, RING_NAME);
        if (variant == 1)
            write_file(db, "", 0);
        if (variant == 2) {
            sqlite3 *s;
            ck_assert_int_eq(sqlite3_open(db, &s), SQLITE_OK);
            ck_assert_int_eq(sqlite3_exec(s, "PRAGMA journal_mode=WAL", NULL, NULL, NULL),
                             SQLITE_OK);
            sqlite3_close(s);
            ck_assert_uint_gt(file_size(db), 0);
        }
        struct ring_spec spec = {.first = 1, .count = 3};
        write_ring(ring, &spec);
        struct proc_result r = run2("recover", dir, NULL);
        assert_ok(&r);
        ck_assert_str_eq(r.out, "recovered " DB_NAME ": 3 records from its ring, into a trace "
                                "made from the ring's header (process 4242, ended: killed)\n");
        proc_result_free(&r);
        ck_assert(!exists(ring));
        ck_assert_int_eq(query_int(db, "SELECT count(*) FROM calls"), 3);
        ck_assert_int_eq(query_int(db, "SELECT pid FROM process"), PID);
        ck_assert_int_eq(query_int(db, "SELECT start_mono_ns FROM process"), 500000000);
        ck_assert_int_eq(query_int(db, "SELECT ppid IS NULL AND uid IS NULL FROM process"), 1);

        r = run2("summary", dir, NULL);
        assert_ok(&r);
        assert_contains(r.out, "Process 4242\n");
        assert_contains(r.out, "command    unknown");
        assert_contains(r.out, "killed (no clean exit; 3 records recovered from its ring)");
        assert_contains(r.out, "calls      3 (0 failed, 0 nested)");
        proc_result_free(&r);
        r = run2("summary", "--json", dir);
        assert_ok(&r);
        char *j = compact(r.out);
        assert_contains(j, "\"pid\":4242,\"ppid\":null,\"host\":\"\",\"cmdline\":\"\"");
        free(j);
        proc_result_free(&r);
        free(db);
        free(ring);
        scratch_remove(dir);
    }
}
END_TEST

START_TEST(test_end_state_and_writer_error_from_ring)
{
    char *dir = scratch_dir();
    char *db = make_trace(dir, 5), *ring = join(dir, RING_NAME);
    struct ring_spec spec = {.first = 6,
                             .count = 3,
                             .end_state = "exit",
                             .writer_error = "database or disk is full",
                             .stopped_after = 5};
    write_ring(ring, &spec);
    struct proc_result r = run2("recover", dir, NULL);
    assert_ok(&r);
    ck_assert_str_eq(r.out, "recovered " DB_NAME ": 3 records from its ring (process 4242, "
                            "ended: exit); trace stopped early: database or disk is full, "
                            "after seq 5\n");
    proc_result_free(&r);
    assert_meta(db, "end_state", "exit");
    assert_meta(db, "writer_error", "database or disk is full");
    ck_assert_int_eq(query_int(db, "SELECT value FROM meta WHERE key = 'writer_stopped_after'"), 5);

    r = run2("summary", dir, NULL);
    assert_ok(&r);
    assert_contains(r.out, "ended      exited normally (exit); 3 records recovered from its ring");
    assert_contains(r.out, "stopped    trace stopped early: database or disk is full, after seq 5");
    proc_result_free(&r);
    r = run2("summary", "--json", dir);
    assert_ok(&r);
    char *j = compact(r.out);
    assert_contains(j, "\"end_state\":\"exit\",\"recovered_records\":3,"
                       "\"writer_error\":\"database or disk is full\",\"writer_stopped_after\":5");
    free(j);
    proc_result_free(&r);

    /* A trace that already says how it ended keeps it. */
    free(db);
    scratch_remove(dir);
    dir = scratch_dir();
    db = make_trace(dir, 2);
    free(ring);
    ring = join(dir, RING_NAME);
    sqlite3 *s;
    ck_assert_int_eq(sqlite3_open(db, &s), SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_exec(s, "UPDATE meta SET value = '_exit' WHERE key = 'end_state'", 0, 0, 0),
        SQLITE_OK);
    sqlite3_close(s);
    spec = (struct ring_spec){.first = 3, .count = 1};
    write_ring(ring, &spec);
    r = run2("recover", dir, NULL);
    assert_ok(&r);
    assert_contains(r.out, "ended: _exit)");
    proc_result_free(&r);
    assert_meta(db, "end_state", "_exit");
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

/* ---- rings to leave alone ---- */

/*
 * What the tracer does for its whole life: a POSIX record lock since ring 6
 * (no child inherits it, so a raw fork's child cannot keep a dead parent's
 * ring "alive"), flock before.
 */
static void check_locked_ring_is_left_alone(bool posix_lock)
{
    char *dir = scratch_dir(), *db, *ring;
    make_killed(dir, &db, &ring);
    int fd = open(ring, O_RDWR | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (posix_lock)
        ck_assert_int_eq(fcntl(fd, F_SETLK, &lock), 0);
    else
        ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);

    struct proc_result r = run2("recover", dir, NULL);
    assert_ok(&r);
    ck_assert_str_eq(r.out,
                     "skipped " RING_NAME ": process 4242 still running; its ring is left alone\n");
    proc_result_free(&r);
    r = run2("recover", "--json", dir);
    assert_ok(&r);
    char *j = compact(r.out);
    assert_contains(j, "\"status\":\"live\",\"error\":null,\"error_file\":null,\"pid\":4242");
    assert_contains(j, "\"live\":1,\"failed\":0");
    free(j);
    proc_result_free(&r);
    r = run2("summary", dir, NULL);
    assert_ok(&r);
    assert_contains(r.out, "calls      5 ");
    assert_contains(r.out, "still running, or killed");
    proc_result_free(&r);
    ck_assert(exists(ring));
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 5);
    assert_meta(db, "end_state", "running");

    /* Once the process is gone, the ring is folded. */
    close(fd);
    r = run2("recover", dir, NULL);
    assert_ok(&r);
    assert_contains(r.out, "recovered " DB_NAME ": 5 records");
    proc_result_free(&r);
    ck_assert(!exists(ring));
    free(db);
    free(ring);
    scratch_remove(dir);
}

START_TEST(test_locked_ring_is_left_alone)
{
    check_locked_ring_is_left_alone(false);
}
END_TEST

START_TEST(test_posix_locked_ring_is_left_alone)
{
    check_locked_ring_is_left_alone(true);
}
END_TEST

/*
 * Root ignores permission bits, so as root the commands run as `nobody`
 * against a directory of mode 0555: a real read-only directory for them,
 * with nothing mocked.
 */
START_TEST(test_read_only_directory)
{
    char *dir = scratch_dir(), *db, *ring;
    make_killed(dir, &db, &ring);
    ck_assert_int_eq(chmod(dir, 0555), 0);
    uid_t as = geteuid() == 0 ? NOBODY : (uid_t)-1;

    const char *summary_args[] = {"summary", dir, NULL};
    struct proc_result r = run_cutrace_as(summary_args, NULL, as);
    ck_assert_msg(r.status == 0, "exit %d; stderr:\n%.1500s", r.status, r.err);
    ck_assert_msg(count_lines(r.err) == 1, "stderr:\n%.1500s", r.err);
    char *expected = NULL;
    ck_assert_int_ge(asprintf(&expected,
                              "cutrace: %s: not folded (read-only): records of a killed process "
                              "may be missing; run cutrace recover where it is writable\n",
                              ring),
                     0);
    ck_assert_str_eq(r.err, expected);
    free(expected);
    assert_contains(r.out, "calls      5 ");
    assert_contains(r.out, "still running, or killed");
    proc_result_free(&r);

    const char *recover_args[] = {"recover", dir, NULL};
    r = run_cutrace_as(recover_args, NULL, as);
    assert_one_line_error(&r, ring, "not folded");
    proc_result_free(&r);

    ck_assert(exists(ring));
    ck_assert_int_eq(chmod(dir, 0700), 0);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 5);
    assert_meta(db, "end_state", "running");
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

/* ---- hostile rings ---- */

enum damage_kind {
    SET_U32,   /* a 32-bit header field */
    SET_U64,   /* a 64-bit header field */
    SET_BYTES, /* bytes at an offset */
    TRUNCATE,  /* the file cut at a size */
    SLOT_SEQ,  /* seq of the record in the first unreleased slot */
    SLOT_API,  /* api of the same */
};

struct damage {
    const char *name;
    enum damage_kind kind;
    size_t offset;
    uint64_t value;
    const char *bytes;
    size_t len;
    const char *needle;
};

#define HDR(field) offsetof(struct ct_ring_header, field)

static const struct damage damages[] = {
    {"shorter than its header", TRUNCATE, 0, 100, NULL, 0, "truncated ring (100 bytes, shorter"},
    {"empty", TRUNCATE, 0, 0, NULL, 0, "truncated ring (0 bytes"},
    {"shorter than its capacity", TRUNCATE, 0, CT_RING_HEADER_BYTES + 3 * sizeof(struct ct_slot),
     NULL, 0, "truncated ring (4864 bytes; its 16 slots need 8192)"},
    {"bad magic", SET_BYTES, HDR(magic), 0, "CTRINGX", 8, "not a cutrace ring (bad magic)"},
    {"newer version", SET_U32, HDR(version), CT_RING_VERSION + 1, NULL, 0,
     "ring written by a newer cutrace (ring format"},
    {"older version", SET_U32, HDR(version), CT_RING_VERSION_OLDEST - 1, NULL, 0,
     "ring written by an older cutrace"},
    {"slot size", SET_U32, HDR(slot_size), 128, NULL, 0, "slot size 128, expected 256"},
    {"capacity not a power of two", SET_U64, HDR(capacity), 12, NULL, 0,
     "capacity 12 is not a power of two"},
    {"capacity zero", SET_U64, HDR(capacity), 0, NULL, 0, "capacity 0 is not a power of two"},
    {"capacity one", SET_U64, HDR(capacity), 1, NULL, 0, "capacity 1 is not a power of two"},
    {"capacity larger than the file", SET_U64, HDR(capacity), 32, NULL, 0,
     "its 32 slots need 12288"},
    {"capacity huge", SET_U64, HDR(capacity), UINT64_C(1) << 62, NULL, 0,
     "slots is more than cutrace writes"},
    {"capacity not a power of two, huge", SET_U64, HDR(capacity), UINT64_MAX, NULL, 0,
     "is not a power of two"},
    {"db_name with a slash", SET_BYTES, HDR(db_name), 0, "../x.db", 8, "is not a file name"},
    {"db_name absolute", SET_BYTES, HDR(db_name), 0, "/etc/x.db", 10, "is not a file name"},
    {"db_name ..", SET_BYTES, HDR(db_name), 0, "..", 3, "is not a file name"},
    {"db_name .", SET_BYTES, HDR(db_name), 0, ".", 2, "is not a file name"},
    {"db_name empty", SET_BYTES, HDR(db_name), 0, "", 1, "is not a *.db file name"},
    {"db_name .db", SET_BYTES, HDR(db_name), 0, ".db", 4, "is not a *.db file name"},
    {"db_name not .db", SET_BYTES, HDR(db_name), 0, "trace.txt", 10, "is not a *.db file name"},
    {"db_name with a newline", SET_BYTES, HDR(db_name), 0, "a\nb.db", 7, "has control characters"},
    {"boot_id without NUL", SET_BYTES, HDR(boot_id), 0, "0123456789012345678901234567890123456789",
     40, "boot_id is not NUL-terminated"},
    {"end_state without NUL", SET_BYTES, HDR(end_state), 0, "0123456789abcdef", 16,
     "end_state is not NUL-terminated"},
    {"writer_error without NUL", TRUNCATE, 0, 0, NULL, 0, NULL}, /* filled in below */
    {"pid zero", SET_U64, HDR(pid), 0, NULL, 0, "pid 0 is not a process id"},
    {"pid negative", SET_U64, HDR(pid), (uint64_t)-5, NULL, 0, "pid -5 is not a process id"},
    {"pid too large", SET_U64, HDR(pid), UINT64_C(1) << 40, NULL, 0, "is not a process id"},
    {"dropped not a count", SET_U64, HDR(dropped), UINT64_MAX, NULL, 0,
     "dropped records is not a count"},
    {"record with seq 0", SLOT_SEQ, 0, 0, NULL, 0, "a record with seq 0"},
    {"record with seq over 2^63", SLOT_SEQ, 0, UINT64_C(1) << 63, NULL, 0,
     "a record with seq 9223372036854775808"},
    {"record with an unknown api", SLOT_API, 0, 999, NULL, 0, "names api id 999"},
};

static void pwrite_at(const char *path, size_t offset, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, data, len, (off_t)offset), (ssize_t)len);
    close(fd);
}

static void apply_damage(const char *ring, const struct damage *d)
{
    /* Records 4..10 sit in slots 3..9 (ring of 16, 3 released). */
    size_t slot3 = CT_RING_HEADER_BYTES + 3 * sizeof(struct ct_slot);
    switch (d->kind) {
    case SET_U32: {
        uint32_t v = (uint32_t)d->value;
        pwrite_at(ring, d->offset, &v, sizeof(v));
        break;
    }
    case SET_U64:
        pwrite_at(ring, d->offset, &d->value, sizeof(d->value));
        break;
    case SET_BYTES:
        pwrite_at(ring, d->offset, d->bytes, d->len);
        break;
    case TRUNCATE:
        truncate_file(ring, (size_t)d->value);
        break;
    case SLOT_SEQ:
        pwrite_at(ring, slot3 + offsetof(struct ct_slot, rec.seq), &d->value, sizeof(d->value));
        break;
    case SLOT_API: {
        uint16_t api = (uint16_t)d->value;
        pwrite_at(ring, slot3 + offsetof(struct ct_slot, rec.api), &api, sizeof(api));
        break;
    }
    }
}

/* The ring and the trace must both be exactly as they were. */
static void expect_refused(const char *dir, const char *db, const char *ring, const char *needle,
                           const char *what)
{
    size_t ring_size = exists(ring) ? file_size(ring) : 0;
    const char *modes[][3] = {
        {"recover", dir, NULL},
        {"recover", "--json", dir},
        {"summary", dir, NULL},
        {"summary", "--json", dir},
    };
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        const char *args[] = {modes[m][0], modes[m][1], modes[m][2], NULL};
        struct proc_result r = run_cutrace(args, NULL);
        ck_assert_msg(!r.signaled, "%s: killed by signal", what);
        ck_assert_msg(r.status == 1, "%s: %s %s: exit %d; stderr:\n%s", what, args[0],
                      args[1] ? args[1] : "", r.status, r.err);
        ck_assert_msg(count_lines(r.err) == 1 && strstr(r.err, needle) &&
                          strncmp(r.err, "cutrace: ", 9) == 0,
                      "%s: %s: stderr lacks '%s':\n%s", what, args[0], needle, r.err);
        if (strcmp(args[0], "summary") == 0)
            ck_assert_msg(r.out_len == 0, "%s: summary printed:\n%.500s", what, r.out);
        else if (strcmp(args[1], "--json") == 0)
            ck_assert_msg(json_valid(r.out) && strstr(r.out, "\"status\": \"error\""),
                          "%s: recover --json:\n%.1500s", what, r.out);
        else
            ck_assert_msg(r.out_len == 0, "%s: recover printed:\n%.500s", what, r.out);
        proc_result_free(&r);
        ck_assert_msg(exists(ring), "%s: the ring was deleted", what);
        ck_assert_uint_eq(file_size(ring), ring_size);
        if (db && exists(db)) {
            ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 5);
            assert_meta(db, "end_state", "running");
        }
    }
}

START_TEST(test_hostile_rings_are_refused)
{
    for (size_t i = 0; i < sizeof(damages) / sizeof(damages[0]); i++) {
        const struct damage *d = &damages[i];
        char *dir = scratch_dir(), *db, *ring;
        make_killed(dir, &db, &ring);
        const char *needle = d->needle;
        if (!needle) {
            /* writer_error: 200 bytes, none of them NUL. */
            char text[sizeof(((struct ct_ring_header *)0)->writer_error)];
            memset(text, 'e', sizeof(text));
            pwrite_at(ring, HDR(writer_error), text, sizeof(text));
            needle = "writer_error is not NUL-terminated";
        } else {
            apply_damage(ring, d);
        }
        expect_refused(dir, db, ring, needle, d->name);
        free(db);
        free(ring);
        scratch_remove(dir);
    }
}
END_TEST

/* The ring's count of calls it could not take goes into meta and the summary. */
START_TEST(test_dropped_records_from_ring)
{
    char *dir = scratch_dir();
    char *db = make_trace(dir, 5), *ring = join(dir, RING_NAME);
    struct ring_spec spec = {.first = 6, .count = 3, .dropped = 7};
    fold_ring(dir, ring, &spec);
    ck_assert_int_eq(query_int(db, "SELECT value FROM meta WHERE key = 'dropped_records'"), 7);
    struct proc_result r = run2("summary", dir, NULL);
    assert_ok(&r);
    assert_contains(r.out, "dropped    7 calls not recorded (");
    proc_result_free(&r);
    r = run2("summary", "--json", dir);
    assert_ok(&r);
    char *j = compact(r.out);
    assert_contains(j, "\"waited_calls\":0,\"dropped_records\":7,");
    free(j);
    proc_result_free(&r);

    /* The writer stored a later count than this ring's: the larger stays. */
    sqlite3 *s;
    ck_assert_int_eq(sqlite3_open(db, &s), SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_exec(s, "UPDATE meta SET value = 9 WHERE key = 'dropped_records'", 0, 0, 0),
        SQLITE_OK);
    sqlite3_close(s);
    spec = (struct ring_spec){.first = 9, .count = 1, .dropped = 8};
    fold_ring(dir, ring, &spec);
    ck_assert_int_eq(query_int(db, "SELECT value FROM meta WHERE key = 'dropped_records'"), 9);

    /* Ring 5 had no count: whatever its bytes there say is not one. */
    spec = (struct ring_spec){.first = 10, .count = 1, .dropped = 20};
    write_ring(ring, &spec);
    uint32_t v5 = 5;
    pwrite_at(ring, HDR(version), &v5, sizeof(v5));
    r = run2("recover", dir, NULL);
    assert_ok(&r);
    proc_result_free(&r);
    ck_assert_int_eq(query_int(db, "SELECT value FROM meta WHERE key = 'dropped_records'"), 9);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 10);
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_odd_files_named_ring)
{
    char *dir = scratch_dir();
    char *db = make_trace(dir, 5), *ring = join(dir, RING_NAME);
    /* A directory, a FIFO (must not block) and a symbolic link. */
    ck_assert_int_eq(mkdir(ring, 0700), 0);
    expect_refused(dir, db, ring, "not a regular file", "directory");
    ck_assert_int_eq(rmdir(ring), 0);
    ck_assert_int_eq(mkfifo(ring, 0600), 0);
    expect_refused(dir, db, ring, "not a regular file", "fifo");
    ck_assert_int_eq(unlink(ring), 0);
    char *real = join(dir, "elsewhere");
    struct ring_spec spec = {.first = 6, .count = 2};
    write_ring(real, &spec);
    ck_assert_int_eq(symlink(real, ring), 0);
    expect_refused(dir, db, ring, "a symbolic link", "symlink");
    free(real);
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_ring_whose_trace_is_unusable)
{
    static const struct {
        const char *sql; /* NULL: a text file */
        const char *needle;
    } cases[] = {
        {NULL, "not an SQLite database"},
        {"CREATE TABLE songs(title TEXT)", "not a cutrace trace"},
        {"CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
         "INSERT INTO meta VALUES ('schema', 'otherapp')",
         "meta schema is 'otherapp'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *dir = scratch_dir();
        char *db = join(dir, DB_NAME), *ring = join(dir, RING_NAME);
        if (cases[i].sql) {
            sqlite3 *s;
            ck_assert_int_eq(sqlite3_open(db, &s), SQLITE_OK);
            ck_assert_int_eq(sqlite3_exec(s, cases[i].sql, NULL, NULL, NULL), SQLITE_OK);
            sqlite3_close(s);
        } else {
            write_file(db, "not a database, a text file of some length\n", 43);
        }
        size_t db_size = file_size(db);
        struct ring_spec spec = {.first = 1, .count = 3};
        write_ring(ring, &spec);
        expect_refused(dir, NULL, ring, cases[i].needle, cases[i].needle);
        ck_assert_uint_eq(file_size(db), db_size);
        free(db);
        free(ring);
        scratch_remove(dir);
    }

    /* A trace with a trigger could make inserts do anything: refused. */
    char *dir = scratch_dir(), *db, *ring;
    make_killed(dir, &db, &ring);
    sqlite3 *s;
    ck_assert_int_eq(sqlite3_open(db, &s), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(s,
                                  "CREATE TRIGGER t AFTER INSERT ON events BEGIN"
                                  " DELETE FROM events WHERE seq = 1; END",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(s);
    expect_refused(dir, db, ring, "has triggers", "trigger");
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

/* A ring that names a trace of another process (another pid, or the same
 * pid reused later) must not give it calls it never made. */
START_TEST(test_ring_of_another_process_is_refused)
{
    for (int which = 0; which < 2; which++) {
        char *dir = scratch_dir(), *db, *ring;
        make_killed(dir, &db, &ring);
        int64_t pid = which == 0 ? PID + 1 : PID;
        uint64_t start = which == 0 ? START_NS : START_NS + 1;
        pwrite_at(ring, HDR(pid), &pid, sizeof(pid));
        pwrite_at(ring, HDR(start_wall_ns), &start, sizeof(start));
        expect_refused(dir, db, ring, "but ring " RING_NAME " is of process", "another process");
        free(db);
        free(ring);
        scratch_remove(dir);
    }
}
END_TEST

/* A ring folds into the trace its header names, whatever its own name. */
START_TEST(test_ring_names_its_trace)
{
    char *dir = scratch_dir();
    char *db = make_trace(dir, 5), *ring = join(dir, "renamed.ring");
    struct ring_spec spec = {.first = 6, .count = 2};
    write_ring(ring, &spec);
    struct proc_result r = run2("recover", dir, NULL);
    assert_ok(&r);
    assert_contains(r.out, "recovered " DB_NAME ": 2 records");
    proc_result_free(&r);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM events"), 7);
    ck_assert(!exists(ring));
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

/* What recovery writes is read back strictly: a count that is not one is
 * refused, never shown as a number. */
START_TEST(test_bad_recovery_meta_is_refused)
{
    static const char *const values[] = {"'abc'", "-3", "1.5", "NULL", "x'00'"};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        for (int key = 0; key < 2; key++) {
            char *dir = scratch_dir();
            char *db = make_trace(dir, 2);
            sqlite3 *s;
            ck_assert_int_eq(sqlite3_open(db, &s), SQLITE_OK);
            char *sql = NULL;
            ck_assert_int_ge(asprintf(&sql, "INSERT INTO meta VALUES ('%s', %s)",
                                      key ? "writer_stopped_after" : "recovered_records",
                                      values[i]),
                             0);
            ck_assert_int_eq(sqlite3_exec(s, sql, NULL, NULL, NULL), SQLITE_OK);
            free(sql);
            sqlite3_close(s);
            for (int json = 0; json <= 1; json++) {
                struct proc_result r = run2("summary", dir, json ? "--json" : NULL);
                assert_one_line_error(&r, DB_NAME, "(expected a count)");
                proc_result_free(&r);
            }
            free(db);
            scratch_remove(dir);
        }
    }
}
END_TEST

START_TEST(test_recover_usage)
{
    const char *none[] = {"recover", NULL};
    struct proc_result r = run_cutrace(none, NULL);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "missing trace directory");
    proc_result_free(&r);
    r = run2("recover", "a", "b");
    ck_assert_int_eq(r.status, 2);
    proc_result_free(&r);
    r = run2("recover", "--bogus", "a");
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "unknown option '--bogus'");
    proc_result_free(&r);
    r = run2("recover", "--help", NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "usage: cutrace recover");
    proc_result_free(&r);
    r = run2("help", "recover", NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "usage: cutrace recover");
    proc_result_free(&r);

    char *dir = scratch_dir();
    char *missing = join(dir, "nope"), *missing_db = join(dir, "nope.db");
    r = run2("recover", missing, NULL);
    assert_one_line_error(&r, missing, "no such file or directory");
    proc_result_free(&r);
    r = run2("recover", missing_db, NULL);
    assert_one_line_error(&r, missing_db, "no such file or directory");
    proc_result_free(&r);
    char *text = join(dir, "notes.txt");
    write_file(text, "x", 1);
    r = run2("recover", text, NULL);
    assert_one_line_error(&r, text, "not a trace directory or .db trace file");
    proc_result_free(&r);
    r = run2("recover", dir, NULL);
    assert_ok(&r);
    assert_contains(r.out, "nothing to recover in");
    proc_result_free(&r);
    r = run2("recover", "--json", dir);
    assert_ok(&r);
    ck_assert(json_valid(r.out));
    assert_contains(r.out, "\"rings\": []");
    proc_result_free(&r);
    free(missing);
    free(missing_db);
    free(text);
    scratch_remove(dir);
}
END_TEST

/* Good rings are folded even when another ring of the directory is bad;
 * the exit status tells about the bad one. */
START_TEST(test_recover_goes_on_after_a_bad_ring)
{
    char *dir = scratch_dir(), *db, *ring;
    make_killed(dir, &db, &ring);
    char *bad = join(dir, "a-first.ring");
    write_file(bad, "junk", 4);
    struct proc_result r = run2("recover", dir, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_int_eq(count_lines(r.err), 1);
    assert_contains(r.err, "a-first.ring: truncated ring");
    assert_contains(r.out, "recovered " DB_NAME ": 5 records");
    proc_result_free(&r);
    ck_assert(!exists(ring));
    ck_assert(exists(bad));
    free(bad);
    free(db);
    free(ring);
    scratch_remove(dir);
}
END_TEST

/* A killed process died at a moment its trace does not know: its memory
 * still counts on its GPU, as a running one's does (exit would not). */
START_TEST(test_killed_process_counts_on_its_gpu)
{
    char *dir = scratch_dir();
    char *first = scenario_shared_gpu_first(dir, 0), *second = scenario_shared_gpu_second(dir);
    sqlite3 *s;
    ck_assert_int_eq(sqlite3_open(first, &s), SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_exec(s, "UPDATE meta SET value = 'killed' WHERE key = 'end_state'", 0, 0, 0),
        SQLITE_OK);
    sqlite3_close(s);
    struct proc_result r = run2("summary", "--json", dir);
    assert_ok(&r);
    char *j = compact(r.out);
    char *gpus = strstr(j, "\"gpus\":[");
    ck_assert_ptr_nonnull(gpus);
    assert_contains(gpus,
                    "\"used_bytes\":5368709120,\"traced_live_bytes\":3221225472,"
                    "\"unexplained_bytes\":2147483648,"
                    "\"traced_live_by_kind\":{\"device\":3221225472,\"managed\":0,\"vmm\":0}}");
    free(j);
    proc_result_free(&r);
    r = run2("summary", dir, NULL);
    assert_ok(&r);
    assert_contains(r.out, "ended      killed (no clean exit)\n");
    proc_result_free(&r);
    free(first);
    free(second);
    scratch_remove(dir);
}
END_TEST

/* ---- what a process killed while creating its trace files leaves ---- */

/* This host's name as the tracer puts it in file names (tracefile.c). */
static const char *file_host(void)
{
    static char out[100];
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) != 0)
        strcpy(host, "unknown");
    size_t i = 0;
    for (; host[i] && i + 1 < sizeof(out); i++) {
        char c = host[i];
        bool kept = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.';
        out[i] = kept ? c : '_';
    }
    out[i] = '\0';
    return out;
}

static const char *this_host(void)
{
    static char host[256];
    if (gethostname(host, sizeof(host) - 1) != 0)
        strcpy(host, "unknown");
    return host;
}

static const char *this_boot(void)
{
    static char id[64];
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(id, sizeof(id), f));
    fclose(f);
    id[strcspn(id, "\n")] = '\0';
    return id;
}

static uint64_t clock_now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The pid of a process that has exited and been reaped. */
static int64_t gone_pid(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return pid;
}

/* DIR/.<host>-<pid>-<wall><suffix> (malloc'd): how the tracer names its temporaries. */
static char *temp_path(const char *dir, const char *host, int64_t pid, uint64_t wall,
                       const char *suffix)
{
    char *path = NULL;
    ck_assert_int_ge(
        asprintf(&path, "%s/.%s-%" PRId64 "-%" PRIu64 "%s", dir, host, pid, wall, suffix), 0);
    return path;
}

/* The lock the tracer holds on its ring, of either kind the liveness test
 * may read (flock or a POSIX record lock); held until fd is closed. */
static int hold_tracer_lock(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    ck_assert_int_eq(fcntl(fd, F_SETLK, &lock), 0);
    return fd;
}

static char *line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    ck_assert_int_ge(vasprintf(&text, fmt, ap), 0);
    va_end(ap);
    return text;
}

static void assert_line(const char *out, char *expected)
{
    assert_contains(out, expected);
    free(expected);
}

static const char *name_of(const char *path)
{
    return strrchr(path, '/') + 1;
}

/*
 * Every temporary a kill during creation can leave, of processes that are
 * gone (no such pid, a pid reused since, another boot) and of processes
 * that may live (this test's own pid with a start it can have had, a lock
 * held, another host's name): exactly the first are removed, each said in
 * one line, and a report afterwards reads the directory as before.
 */
START_TEST(test_creation_temporaries_of_gone_processes_are_removed)
{
    char *dir = scratch_dir();
    const char *host = file_host();
    uint64_t now = clock_now(CLOCK_REALTIME);
    int64_t me = getpid(), gone[5];
    for (int i = 0; i < 5; i++)
        gone[i] = gone_pid();
    char *db = make_trace(dir, 2); /* another host's trace, for the report */
    const char *summary_args[] = {"summary", dir, NULL};
    struct proc_result before = run_cutrace(summary_args, NULL);
    assert_ok(&before);

    /* Gone. Killed at once (empty), while SQLite wrote it, before the ring
     * was formatted, after; a pid since reused; a process of an earlier boot. */
    char *empty_db = temp_path(dir, host, gone[0], now, ".db.tmp");
    write_file(empty_db, "", 0);
    char *written_db = temp_path(dir, host, gone[1], now, ".db.tmp");
    write_file(written_db, "SQLite format 3", 16);
    char *wal = line("%s-wal", written_db), *shm = line("%s-shm", written_db);
    write_file(wal, "wal", 3);
    write_file(shm, "shm", 3);
    char *blank_ring = temp_path(dir, host, gone[2], now, ".ring.tmp");
    char zeros[8192] = {0};
    write_file(blank_ring, zeros, sizeof(zeros));
    char *formatted_ring = temp_path(dir, host, gone[3], now, "-1.ring.tmp");
    struct ring_spec spec = {.pid = gone[3], .start_wall_ns = now, .boot_id = this_boot()};
    write_ring(formatted_ring, &spec);
    char *reused_db = temp_path(dir, host, me, now - 600000000000ull, ".db.tmp");
    write_file(reused_db, "", 0);
    char *old_boot_ring = temp_path(dir, host, me, now, "-2.ring.tmp");
    spec = (struct ring_spec){.pid = me, .start_wall_ns = now, .boot_id = "boot-before"};
    write_ring(old_boot_ring, &spec);

    /* May live: this process, now; a lock held; another host's. */
    char *live_db = temp_path(dir, host, me, now, ".db.tmp");
    write_file(live_db, "", 0);
    char *live_ring = temp_path(dir, host, me, now, ".ring.tmp");
    spec = (struct ring_spec){.pid = me,
                              .start_wall_ns = now,
                              .start_mono_ns = clock_now(CLOCK_MONOTONIC),
                              .boot_id = this_boot()};
    write_ring(live_ring, &spec);
    char *locked_ring = temp_path(dir, host, gone[4], now, ".ring.tmp");
    spec = (struct ring_spec){.pid = gone[4], .start_wall_ns = now, .boot_id = this_boot()};
    write_ring(locked_ring, &spec);
    int lock_fd = hold_tracer_lock(locked_ring);
    char *foreign_db = temp_path(dir, "node1", gone[0], now, ".db.tmp");
    write_file(foreign_db, "", 0);
    /* Not a name cutrace writes: not even mentioned. */
    char *other = join(dir, ".notes.db.tmp");
    write_file(other, "", 0);

    struct proc_result r = run2("recover", dir, NULL);
    assert_ok(&r);
    const char *unfinished = "the unfinished";
    assert_line(r.out, line("removed %s: %s trace of process %" PRId64 ", which has exited\n",
                            name_of(empty_db), unfinished, gone[0]));
    assert_line(r.out, line("removed %s (and its -wal, -shm): %s trace of process %" PRId64
                            ", which has exited\n",
                            name_of(written_db), unfinished, gone[1]));
    assert_line(r.out,
                line("removed %s: %s crash buffer of process %" PRId64 ", which has exited\n",
                     name_of(blank_ring), unfinished, gone[2]));
    assert_line(r.out,
                line("removed %s: %s crash buffer of process %" PRId64 ", which has exited\n",
                     name_of(formatted_ring), unfinished, gone[3]));
    assert_line(r.out, line("removed %s: %s trace of process %" PRId64
                            ", which has exited (its pid now belongs to a later process)\n",
                            name_of(reused_db), unfinished, me));
    assert_line(r.out, line("removed %s: %s crash buffer of process %" PRId64
                            ", which ran before this host's last boot\n",
                            name_of(old_boot_ring), unfinished, me));
    assert_line(r.out, line("skipped %s: process %" PRId64 " may still be running; left alone\n",
                            name_of(live_db), me));
    assert_line(r.out, line("skipped %s: process %" PRId64 " may still be running; left alone\n",
                            name_of(live_ring), me));
    assert_line(r.out, line("skipped %s: process %" PRId64 " may still be running; left alone\n",
                            name_of(locked_ring), gone[4]));
    assert_line(r.out, line("skipped %s: made on another host, where its process may still run; "
                            "left alone\n",
                            name_of(foreign_db)));
    assert_contains(r.out, "skipped " DB_NAME ": made on host " HOST
                           ", where its process may still run; left alone\n");
    ck_assert_msg(count_lines(r.out) == 11, "stdout:\n%s", r.out);
    proc_result_free(&r);
    const char *removed[] = {empty_db,   written_db,     wal,       shm,
                             blank_ring, formatted_ring, reused_db, old_boot_ring};
    for (size_t i = 0; i < sizeof(removed) / sizeof(removed[0]); i++)
        ck_assert_msg(!exists(removed[i]), "%s is still there", removed[i]);
    const char *kept[] = {live_db, live_ring, locked_ring, foreign_db, other, db};
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
        ck_assert_msg(exists(kept[i]), "%s was removed", kept[i]);

    r = run2("recover", "--json", dir);
    assert_ok(&r);
    char *j = compact(r.out);
    char *entry = line("{\"file\":\"%s\",\"kind\":\"db_tmp\",\"status\":\"live\",\"error\":null,"
                       "\"pid\":%" PRId64 ",\"host\":null,\"why_gone\":null,"
                       "\"side_files_removed\":null,\"end_state\":null,\"end_note\":null}",
                       name_of(live_db), me);
    assert_contains(j, "\"leftovers\":[");
    assert_contains(j, entry);
    free(entry);
    free(j);
    proc_result_free(&r);

    /* Once its lock is free, the ring.tmp of a process that is gone goes too. */
    close(lock_fd);
    r = run2("recover", dir, NULL);
    assert_ok(&r);
    assert_line(r.out,
                line("removed %s: %s crash buffer of process %" PRId64 ", which has exited\n",
                     name_of(locked_ring), unfinished, gone[4]));
    proc_result_free(&r);
    ck_assert(!exists(locked_ring));

    /* A report cleans silently and says what it said before. */
    write_file(empty_db, "", 0);
    write_file(blank_ring, zeros, sizeof(zeros));
    r = run_cutrace(summary_args, NULL);
    assert_ok(&r);
    ck_assert_str_eq(r.out, before.out);
    proc_result_free(&r);
    ck_assert(!exists(empty_db) && !exists(blank_ring));
    ck_assert(exists(live_db) && exists(live_ring));

    proc_result_free(&before);
    char *paths[] = {empty_db,       written_db, wal,           shm,     blank_ring,
                     formatted_ring, reused_db,  old_boot_ring, live_db, live_ring,
                     locked_ring,    foreign_db, other,         db};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        free(paths[i]);
    scratch_remove(dir);
}
END_TEST

static const char note_in_creation[] =
    "killed while its trace was being created, before its first call was recorded";
static const char note_no_ring[] =
    "ended without recording how and left no crash buffer (.ring): records not yet written when "
    "it died are lost";

/*
 * Published traces without a ring that still say running: of a process that
 * is gone (killed before its ring existed, with or without its ring.tmp, or
 * one that ran with its ring in memory; another boot; a pid since reused)
 * they get end_state 'killed' and a note; of a process that may live, of
 * another host, or that says how it ended, they are left as they are.
 */
START_TEST(test_trace_without_ring_of_gone_process_is_marked_killed)
{
    char *dir = scratch_dir();
    const char *host = this_host(), *boot = this_boot();
    uint64_t now = clock_now(CLOCK_REALTIME), mono = clock_now(CLOCK_MONOTONIC);
    int64_t me = getpid(), gone[3];
    for (int i = 0; i < 3; i++)
        gone[i] = gone_pid();
    char *in_creation = make_published(dir, host, gone[0], now, mono, boot, "running", 0);
    char *ring_tmp = temp_path(dir, file_host(), gone[0], now, ".ring.tmp");
    char zeros[4096] = {0};
    write_file(ring_tmp, zeros, sizeof(zeros));
    char *memory_ring = make_published(dir, host, gone[1], now, mono, boot, NULL, 3);
    char *old_boot = make_published(dir, host, me, now + 1, mono, "boot-before", "running", 0);
    char *reused = make_published(dir, host, me, now + 2, 1, boot, "running", 0);
    char *live = make_published(dir, host, me, now + 3, mono, boot, "running", 2);
    char *foreign = make_published(dir, "node1", gone[2], now, mono, boot, "running", 0);
    char *ended = make_published(dir, host, gone[2], now, mono, boot, "exit", 1);

    struct proc_result r = run2("recover", dir, NULL);
    assert_ok(&r);
    assert_line(r.out, line("removed %s: the unfinished crash buffer of process %" PRId64
                            ", which has exited\n",
                            name_of(ring_tmp), gone[0]));
    assert_line(r.out, line("marked %s ended: killed (process %" PRId64
                            " has exited and left no ring: %s)\n",
                            name_of(in_creation), gone[0], note_in_creation));
    assert_line(r.out, line("marked %s ended: killed (process %" PRId64
                            " has exited and left no ring: %s)\n",
                            name_of(memory_ring), gone[1], note_no_ring));
    assert_line(r.out, line("marked %s ended: killed (process %" PRId64
                            " ran before this host's last boot and left no ring: %s)\n",
                            name_of(old_boot), me, note_in_creation));
    assert_line(r.out, line("marked %s ended: killed (process %" PRId64
                            " has exited (its pid now belongs to a later process) and left no "
                            "ring: %s)\n",
                            name_of(reused), me, note_in_creation));
    assert_line(r.out, line("skipped %s: process %" PRId64 " may still be running; left alone\n",
                            name_of(live), me));
    assert_line(r.out, line("skipped %s: made on host node1, where its process may still run; "
                            "left alone\n",
                            name_of(foreign)));
    ck_assert_msg(count_lines(r.out) == 7, "stdout:\n%s", r.out);
    proc_result_free(&r);
    ck_assert(!exists(ring_tmp));
    const char *marked[] = {in_creation, memory_ring, old_boot, reused};
    for (size_t i = 0; i < 4; i++) {
        assert_meta(marked[i], "end_state", "killed");
        assert_meta(marked[i], "end_note", i == 1 ? note_no_ring : note_in_creation);
    }
    assert_meta(live, "end_state", "running");
    assert_meta(foreign, "end_state", "running");
    assert_meta(ended, "end_state", "exit");
    assert_meta(live, "end_note", "");
    assert_meta(ended, "end_note", "");
    ck_assert_int_eq(query_int(memory_ring, "SELECT count(*) FROM events"), 3);

    /* Again: only what may live is mentioned; the marked traces read as killed. */
    r = run2("recover", dir, NULL);
    assert_ok(&r);
    ck_assert_msg(count_lines(r.out) == 2, "stdout:\n%s", r.out);
    proc_result_free(&r);
    r = run2("summary", "--json", dir);
    assert_ok(&r);
    char *j = compact(r.out);
    ck_assert_msg(strstr(j, "\"end_state\":\"killed\"") != NULL, "%s", j);
    free(j);
    proc_result_free(&r);

    char *paths[] = {in_creation, ring_tmp, memory_ring, old_boot, reused, live, foreign, ended};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        free(paths[i]);
    scratch_remove(dir);
}
END_TEST

/* A report marks by itself, silently: the trace of a process killed during
 * creation reads as killed, a live one's as running. */
START_TEST(test_summary_marks_trace_without_ring_silently)
{
    char *dir = scratch_dir();
    const char *host = this_host(), *boot = this_boot();
    uint64_t now = clock_now(CLOCK_REALTIME), mono = clock_now(CLOCK_MONOTONIC);
    char *killed = make_published(dir, host, gone_pid(), now, mono, boot, "running", 0);
    char *live = make_published(dir, host, getpid(), now + 1, mono, boot, "running", 1);
    const char *args[] = {"summary", dir, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    assert_ok(&r);
    assert_contains(r.out, "ended      killed (no clean exit)\n");
    assert_contains(r.out, "ended      still running, or killed (no clean exit was recorded)\n");
    proc_result_free(&r);
    assert_meta(killed, "end_state", "killed");
    assert_meta(live, "end_state", "running");
    free(killed);
    free(live);
    scratch_remove(dir);
}
END_TEST

Suite *recover_suite(void)
{
    Suite *s = suite_create("recover");
    TCase *tc = tcase_create("recover");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_recover_folds_exactly_once);
    tcase_add_test(tc, test_replayed_ring_adds_nothing);
    tcase_add_test(tc, test_rings_and_traces_before_ret_seq);
    tcase_add_test(tc, test_recover_json);
    tcase_add_test(tc, test_summary_folds_silently);
    tcase_add_test(tc, test_recover_one_file);
    tcase_add_test(tc, test_trace_made_from_header);
    tcase_add_test(tc, test_end_state_and_writer_error_from_ring);
    tcase_add_test(tc, test_locked_ring_is_left_alone);
    tcase_add_test(tc, test_posix_locked_ring_is_left_alone);
    tcase_add_test(tc, test_dropped_records_from_ring);
    tcase_add_test(tc, test_read_only_directory);
    tcase_add_test(tc, test_hostile_rings_are_refused);
    tcase_add_test(tc, test_odd_files_named_ring);
    tcase_add_test(tc, test_ring_whose_trace_is_unusable);
    tcase_add_test(tc, test_ring_names_its_trace);
    tcase_add_test(tc, test_ring_of_another_process_is_refused);
    tcase_add_test(tc, test_bad_recovery_meta_is_refused);
    tcase_add_test(tc, test_recover_usage);
    tcase_add_test(tc, test_recover_goes_on_after_a_bad_ring);
    tcase_add_test(tc, test_killed_process_counts_on_its_gpu);
    tcase_add_test(tc, test_creation_temporaries_of_gone_processes_are_removed);
    tcase_add_test(tc, test_trace_without_ring_of_gone_process_is_marked_killed);
    tcase_add_test(tc, test_summary_marks_trace_without_ring_silently);
    suite_add_tcase(s, tc);
    return s;
}
