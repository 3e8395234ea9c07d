/*
 * test_writer.c - the writer thread: everything pushed is committed, commits
 * happen without being asked, flush and end state, late records after the
 * file was sealed (in the .db alone, even with a reader on the WAL), device
 * identity once per device, and a writer that cannot write lets producers
 * go on.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../preload/core/writer.h"
#include "suites.h"
#include "testutil.h"

static int describe_calls;

static bool fake_describe(int device, struct ct_device_info *out)
{
    __atomic_add_fetch(&describe_calls, 1, __ATOMIC_RELAXED);
    memset(out, 0, sizeof *out);
    out->device = device;
    snprintf(out->uuid, sizeof out->uuid, "GPU-test-%d", device);
    out->total_bytes = 1000 + (uint64_t)device;
    return true;
}

static void fake_versions(struct ct_versions *v)
{
    v->runtime = 12080;
    v->driver = 13000;
    v->nccl = 22809;
}

struct harness {
    char *dir;
    char *db;
    void *ring_mem;
    struct ct_ring ring;
    struct ct_writer *w;
};

/* In place: the writer keeps a pointer to h->ring. */
static void start(struct harness *hp, unsigned interval_ms, uint64_t capacity)
{
    struct harness h;
    h.dir = tu_tmpdir();
    h.db = tu_empty_file(h.dir, "w.db");
    size_t bytes = ct_ring_bytes(capacity);
    h.ring_mem = calloc(1, bytes);
    struct ct_ring_owner owner = {getpid(), 1, 2, "w.db", "boot"};
    ct_ring_format(h.ring_mem, capacity, &owner);
    *hp = h;
    ck_assert(ct_ring_attach(&hp->ring, hp->ring_mem, bytes));
    /* The session makes the trace file; the writer only appends to it. */
    char err[256];
    struct ct_store *st = ct_store_create(hp->db, err, sizeof err);
    ck_assert_msg(st != NULL, "%s", err);
    struct ct_process_info proc;
    memset(&proc, 0, sizeof proc);
    proc.pid = getpid();
    proc.cmdline = "unit test";
    ck_assert_int_eq(ct_store_write_process(st, &proc), 0);
    ct_store_close(st);

    struct ct_writer_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.ring = &hp->ring;
    snprintf(cfg.db_path, sizeof cfg.db_path, "%s", hp->db);
    cfg.probes.describe_device = fake_describe;
    cfg.probes.versions = fake_versions;
    cfg.interval_ms = interval_ms;
    hp->w = ct_writer_start(&cfg, err, sizeof err);
    ck_assert_msg(hp->w != NULL, "%s", err);
    describe_calls = 0;
}

static void stop(struct harness *h)
{
    ct_writer_stop(h->w);
    free(h->ring_mem);
    tsql_rmtree(h->dir);
    free(h->dir);
    free(h->db);
}

static bool alive_true(void)
{
    return true;
}

static void push(struct harness *h, uint64_t seq, int device)
{
    struct ct_record r;
    memset(&r, 0, sizeof r);
    r.seq = seq;
    r.api = 1;
    r.device = device;
    r.size = seq;
    ct_ring_push(&h->ring, &r, alive_true);
}

START_TEST(test_flush_commits_everything_claimed)
{
    struct harness h;
    start(&h, 1000, 64);
    for (uint64_t s = 1; s <= 1000; s++)
        push(&h, s, 0);
    ck_assert(ct_writer_flush(h.w, NULL, 5000));
    sqlite3 *db = tsql_open(h.db, SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM events"), 1000);
    ck_assert_int_eq(tsql_int(db, "SELECT sum(size) FROM events"), 500500);
    ck_assert_str_eq(tsql_text(db, "SELECT cmdline FROM process"), "unit test");
    ck_assert_int_eq(tsql_int(db, "SELECT cuda_runtime_version FROM process"), 12080);
    ck_assert_uint_eq(ct_writer_committed(h.w), 1000);
    sqlite3_close(db);
    stop(&h);
}
END_TEST

START_TEST(test_commits_within_interval_without_flush)
{
    struct harness h;
    start(&h, 20, 64);
    push(&h, 1, 0);
    struct timespec ts = {0, 150 * 1000 * 1000};
    nanosleep(&ts, NULL);
    sqlite3 *db = tsql_open(h.db, SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM events"), 1);
    sqlite3_close(db);
    stop(&h);
}
END_TEST

START_TEST(test_end_state_closes_file_and_late_records_reopen_it)
{
    struct harness h;
    start(&h, 1000, 64);
    push(&h, 1, 0);
    ck_assert(ct_writer_flush(h.w, "exit", 5000));
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", h.db);
    ck_assert_int_ne(access(wal, F_OK), 0);
    sqlite3 *db = tsql_open(h.db, SQLITE_OPEN_READWRITE);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key='end_state'"), "exit");
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM events"), 1);
    sqlite3_close(db);

    push(&h, 2, 0);
    ck_assert(ct_writer_flush(h.w, NULL, 5000));
    db = tsql_open(h.db, SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM events"), 2);
    sqlite3_close(db);
    stop(&h);
}
END_TEST

static void copy_alone(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    ck_assert(in && out);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

/* Events in a copy of the .db alone, as a user who copies only it sees them. */
static int64_t events_in_db_alone(struct harness *h)
{
    char copy[4200];
    snprintf(copy, sizeof copy, "%s/alone.db", h->dir);
    unlink(copy);
    copy_alone(h->db, copy);
    sqlite3 *db = tsql_open(copy, SQLITE_OPEN_READONLY);
    int64_t n = tsql_int(db, "SELECT count(*) FROM events");
    sqlite3_close(db);
    return n;
}

static const char *journal_mode(struct harness *h)
{
    sqlite3 *db = tsql_open(h->db, SQLITE_OPEN_READONLY);
    static char mode[16];
    snprintf(mode, sizeof mode, "%s", tsql_text(db, "PRAGMA journal_mode"));
    sqlite3_close(db);
    return mode;
}

/* Records after the end state (another library's destructor) land in the .db itself. */
START_TEST(test_end_state_seals_the_file_for_late_records)
{
    struct harness h;
    start(&h, 1000, 64);
    push(&h, 1, 0);
    ck_assert(ct_writer_flush(h.w, "exit", 5000));
    ck_assert_str_eq(journal_mode(&h), "delete");
    push(&h, 2, 0);
    push(&h, 3, 0);
    ck_assert(ct_writer_flush(h.w, NULL, 5000));
    char side[4200];
    snprintf(side, sizeof side, "%s-wal", h.db);
    ck_assert_int_ne(access(side, F_OK), 0);
    snprintf(side, sizeof side, "%s-shm", h.db);
    ck_assert_int_ne(access(side, F_OK), 0);
    ck_assert_int_eq(events_in_db_alone(&h), 3);
    /* A failed exec: the process goes on, and its trace is a WAL trace again. */
    ck_assert(ct_writer_flush(h.w, "running", 5000));
    ck_assert_str_eq(journal_mode(&h), "wal");
    push(&h, 4, 0);
    ck_assert(ct_writer_flush(h.w, NULL, 5000));
    sqlite3 *db = tsql_open(h.db, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM events"), 4);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key='end_state'"), "running");
    sqlite3_close(db);
    stop(&h);
}
END_TEST

/* A reader that keeps the WAL in use: the switch waits for nobody, each later commit is
 * checkpointed instead, and the .db alone still holds every record. */
START_TEST(test_reader_keeping_the_wal_gets_late_records_checkpointed)
{
    struct harness h;
    start(&h, 1000, 64);
    push(&h, 1, 0);
    ck_assert(ct_writer_flush(h.w, NULL, 5000));
    sqlite3 *reader = tsql_open(h.db, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(reader, "SELECT count(*) FROM events"), 1);
    ck_assert(ct_writer_flush(h.w, "exit", 5000));
    ck_assert_str_eq(journal_mode(&h), "wal"); /* SQLite leaves WAL only with no other connection */
    push(&h, 2, 0);
    push(&h, 3, 0);
    ck_assert(ct_writer_flush(h.w, NULL, 5000));
    ck_assert_int_eq(events_in_db_alone(&h), 3);
    ck_assert_int_eq(tsql_int(reader, "SELECT count(*) FROM events"), 3);
    sqlite3_close(reader);
    stop(&h);
}
END_TEST

START_TEST(test_devices_described_once_after_success)
{
    struct harness h;
    start(&h, 1000, 64);
    struct ct_record failed;
    memset(&failed, 0, sizeof failed);
    failed.seq = 1;
    failed.api = 1;
    failed.device = 2;
    failed.result = 35;
    ct_ring_push(&h.ring, &failed, alive_true);
    push(&h, 2, 0);
    push(&h, 3, 0);
    push(&h, 4, 1);
    push(&h, 5, -1);
    ck_assert(ct_writer_flush(h.w, NULL, 5000));
    ck_assert_int_eq(describe_calls, 2);
    sqlite3 *db = tsql_open(h.db, SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM devices"), 2);
    ck_assert_str_eq(tsql_text(db, "SELECT uuid FROM devices WHERE device=1"), "GPU-test-1");
    ck_assert_int_eq(tsql_int(db, "SELECT first_seq FROM devices WHERE device=0"), 2);
    sqlite3_close(db);
    stop(&h);
}
END_TEST

START_TEST(test_unwritable_trace_kills_writer_not_program)
{
    struct ct_ring ring;
    size_t bytes = ct_ring_bytes(4);
    void *mem = calloc(1, bytes);
    struct ct_ring_owner owner = {1, 1, 1, "x.db", "boot"};
    ct_ring_format(mem, 4, &owner);
    ct_ring_attach(&ring, mem, bytes);
    struct ct_writer_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.ring = &ring;
    snprintf(cfg.db_path, sizeof cfg.db_path, "/nonexistent-dir/x.db");
    char err[256];
    struct ct_writer *w = ct_writer_start(&cfg, err, sizeof err);
    ck_assert_ptr_nonnull(w);
    for (int i = 0; i < 100 && ct_writer_alive(w); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert(!ct_writer_alive(w));
    ck_assert(!ct_writer_flush(w, "exit", 1000));
    /* The ring says why, for recovery to store later. */
    ck_assert_ptr_nonnull(strstr(ring.hdr->writer_error, "nonexistent-dir"));
    ck_assert_uint_eq(ring.hdr->writer_stopped_after, 0);
    ct_writer_stop(w);
    free(mem);
}
END_TEST

START_TEST(test_removed_trace_file_stops_writer_at_exit)
{
    struct harness h;
    start(&h, 1000, 64);
    push(&h, 1, 0);
    push(&h, 2, 0);
    ck_assert(ct_writer_flush(h.w, NULL, 5000));
    ck_assert_int_eq(unlink(h.db), 0);
    push(&h, 3, 0);
    ck_assert(!ct_writer_flush(h.w, "exit", 5000));
    ck_assert(!ct_writer_alive(h.w));
    ck_assert_ptr_nonnull(strstr(h.ring.hdr->writer_error, "removed"));
    ck_assert_uint_eq(h.ring.hdr->writer_stopped_after, 3);
    stop(&h);
}
END_TEST

struct producer_arg {
    struct harness *h;
    uint64_t *seq;
};

static void *producer(void *arg)
{
    struct producer_arg *a = arg;
    for (int i = 0; i < 5000; i++)
        push(a->h, __atomic_add_fetch(a->seq, 1, __ATOMIC_RELAXED), 0);
    return NULL;
}

START_TEST(test_concurrent_producers_small_ring)
{
    struct harness h;
    start(&h, 5, 128);
    uint64_t seq = 0;
    pthread_t t[8];
    struct producer_arg a = {&h, &seq};
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, producer, &a);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    ck_assert(ct_writer_flush(h.w, NULL, 10000));
    sqlite3 *db = tsql_open(h.db, SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM events"), 40000);
    ck_assert_int_eq(tsql_int(db, "SELECT max(seq) FROM events"), 40000);
    sqlite3_close(db);
    stop(&h);
}
END_TEST

Suite *writer_suite(void)
{
    Suite *s = suite_create("writer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_flush_commits_everything_claimed);
    tcase_add_test(tc, test_commits_within_interval_without_flush);
    tcase_add_test(tc, test_end_state_closes_file_and_late_records_reopen_it);
    tcase_add_test(tc, test_end_state_seals_the_file_for_late_records);
    tcase_add_test(tc, test_reader_keeping_the_wal_gets_late_records_checkpointed);
    tcase_add_test(tc, test_devices_described_once_after_success);
    tcase_add_test(tc, test_unwritable_trace_kills_writer_not_program);
    tcase_add_test(tc, test_removed_trace_file_stops_writer_at_exit);
    tcase_add_test(tc, test_concurrent_producers_small_ring);
    suite_add_tcase(s, tc);
    return s;
}
