/*
 * test_reliability.c - the promises of docs/reliability.md, each tested on
 * real processes: SIGKILL and crashes lose nothing, threads and fork are
 * safe, memory stays bounded, a trace that cannot be written never hurts
 * the program, and setuid programs are not traced.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Runs `cutrace recover` on the world's trace directory; returns its status. */
static int recover(struct world *w)
{
    const char *argv[] = {build_path("cutrace"), "recover", w->trace_dir, NULL};
    struct run r = run_prog(w, false, argv, 60);
    int status = r.status;
    ck_assert_msg(status == 0, "cutrace recover failed: %s", r.err);
    run_free(&r);
    return status;
}

/* The one trace of a single-process run, opened read-only. */
static sqlite3 *only_trace(struct world *w)
{
    char **files;
    ck_assert_uint_eq(list_traces(w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    free_list(files, 1);
    return db;
}

/*
 * The trace is a complete prefix: no sequence number is missing up to the
 * last top-level call (the driver calls a call in flight had made may be
 * there without it). Returns the number of top-level calls - the program's.
 */
static int64_t complete_prefix_length(sqlite3 *db)
{
    int64_t last = tsql_int(db, "SELECT coalesce(max(seq), 0) FROM calls WHERE NOT nested");
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM calls WHERE seq <= %lld", (long long)last);
    ck_assert_int_eq(tsql_int(db, sql), last);
    return tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested");
}

static int count_rings(struct world *w)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls %s/*.ring 2>/dev/null | wc -l", w->trace_dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    ck_assert_int_eq(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

static void wait_for_trace_file(struct world *w)
{
    for (int i = 0; i < 2000; i++) {
        char **files;
        size_t n = list_traces(w, &files);
        free_list(files, n);
        if (n > 0)
            return;
        sleep_ms(5);
    }
    ck_abort_msg("no trace file appeared");
}

/*
 * Promise 1. 24 runs killed at random moments, half of them in heavy bursts
 * with a small ring (the writer is behind and the program waits): the
 * trace, after recovery, never holds fewer calls than returned.
 */
START_TEST(test_sigkill_loses_nothing)
{
    unsigned seed = (unsigned)time(NULL);
    srand(seed);
    for (int run = 0; run < 24; run++) {
        bool burst = run % 2 == 1;
        struct world w;
        world_init(&w);
        if (burst)
            w.extra_env[0] = "CUTRACE_BUFFER_MB=1";
        char counter_path[4096];
        snprintf(counter_path, sizeof counter_path, "%s/counter", w.root);
        int fd = open(counter_path, O_RDWR | O_CREAT, 0600);
        ck_assert_int_eq(ftruncate(fd, 8), 0);
        volatile uint64_t *counter = mmap(NULL, 8, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        const char *argv[] = {build_path("progs/rt_counter"), counter_path, burst ? "0" : "200",
                              NULL};
        pid_t pid = spawn_prog(&w, true, argv);
        /* Killed at a random point after its first call returned: on a loaded
         * machine the program may take longer than the sleep to get there. */
        for (int waited = 0; *counter == 0 && waited < 10000; waited++)
            sleep_ms(1);
        sleep_ms(20 + rand() % 230);
        kill(pid, SIGKILL);
        ck_assert_int_eq(wait_prog(pid, 30), 128 + SIGKILL);
        uint64_t returned = *counter;
        munmap((void *)counter, 8);

        recover(&w);
        ck_assert_int_eq(count_rings(&w), 0);
        sqlite3 *db = only_trace(&w);
        int64_t traced = complete_prefix_length(db);
        ck_assert_msg((uint64_t)traced >= returned && (uint64_t)traced <= returned + 1,
                      "run %d (seed %u, %s): %lld calls traced, %llu returned", run, seed,
                      burst ? "burst" : "paced", (long long)traced, (unsigned long long)returned);
        ck_assert_uint_gt(returned, 0);
        ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "killed");
        sqlite3_close(db);
        world_free(&w);
    }
}
END_TEST

/* Promise 1: analyzer commands fold a killed process's ring themselves. */
START_TEST(test_summary_recovers_before_reporting)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "CUTRACE_BUFFER_MB=1";
    char counter_path[4096];
    snprintf(counter_path, sizeof counter_path, "%s/counter", w.root);
    int fd = open(counter_path, O_RDWR | O_CREAT, 0600);
    ck_assert_int_eq(ftruncate(fd, 8), 0);
    close(fd);
    const char *argv[] = {build_path("progs/rt_counter"), counter_path, "0", NULL};
    pid_t pid = spawn_prog(&w, true, argv);
    sleep_ms(150);
    kill(pid, SIGKILL);
    wait_prog(pid, 30);
    ck_assert_int_eq(count_rings(&w), 1);
    const char *summary[] = {build_path("cutrace"), "summary", "--json", w.trace_dir, NULL};
    struct run r = run_prog(&w, false, summary, 60);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(count_rings(&w), 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\"end_state\": \"killed\""));
    sqlite3 *db = only_trace(&w);
    complete_prefix_length(db);
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* Promises 2 and 7: crashes and signals lose nothing and change nothing. */
START_TEST(test_crashes_and_uncaught_signals_lose_nothing)
{
    const char *modes[] = {"abort", "segv", "sigterm", "sigint"};
    const int signals[] = {SIGABRT, SIGSEGV, SIGTERM, SIGINT};
    for (int i = 0; i < 4; i++) {
        struct world w;
        world_init(&w);
        const char *argv[] = {build_path("progs/rt_signals"), modes[i], "40", NULL};
        struct run plain = run_prog(&w, false, argv, 30);
        struct run traced = run_prog(&w, true, argv, 30);
        ck_assert_int_eq(plain.status, 128 + signals[i]);
        ck_assert_int_eq(traced.status, plain.status);
        ck_assert_str_eq(traced.out, plain.out);
        ck_assert_uint_eq(traced.err_len, 0);
        recover(&w);
        sqlite3 *db = only_trace(&w);
        ck_assert_int_eq(complete_prefix_length(db), 40);
        ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "killed");
        sqlite3_close(db);
        run_free(&plain);
        run_free(&traced);
        world_free(&w);
    }
}
END_TEST

START_TEST(test_programs_own_signal_handler_runs_first)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_signals"), "handler", "7", NULL};
    struct run plain = run_prog(&w, false, argv, 30);
    struct run traced = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_int_eq(traced.status, 0);
    ck_assert_str_eq(plain.out, "made 7 allocations\nhandled SIGTERM\n");
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_int_eq(count_rings(&w), 0);
    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(complete_prefix_length(db), 7);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "_exit");
    sqlite3_close(db);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* Promise 3: 32 threads at once; every call, each thread's in its order. */
START_TEST(test_32_threads_every_call_in_thread_order)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_threads"), "32", "2000", NULL};
    struct run r = run_prog(&w, true, argv, 120);
    ck_assert_int_eq(r.status, 0);
    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(complete_prefix_length(db), 32 * 2000 * 2);
    ck_assert_int_eq(tsql_int(db, "SELECT count(DISTINCT tid) FROM calls WHERE NOT nested"), 32);
    /* Within a thread, the i-th malloc (by seq) asked for 256 * (i + 1) bytes ... */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM (SELECT size, row_number() OVER"
                                  " (PARTITION BY tid ORDER BY seq) AS i FROM calls"
                                  " WHERE api = 'cudaMalloc' AND NOT nested)"
                                  " WHERE size != 256 * i"),
                     0);
    /* ... and calls alternate malloc, free, each free of the malloc before it. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM (SELECT api, ptr, LAG(api) OVER w AS pa,"
                                  " LAG(ptr) OVER w AS pp FROM calls WHERE NOT nested WINDOW w AS"
                                  " (PARTITION BY tid ORDER BY seq)) WHERE api = 'cudaFree'"
                                  " AND (pa IS NOT 'cudaMalloc' OR pp != ptr)"),
                     0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE free_seq IS NULL"), 0);
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* Promise 3: 200 forks while four threads are inside CUDA calls. */
START_TEST(test_fork_200_times_during_calls)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_forkstress"), "4", "200", NULL};
    struct run r = run_prog(&w, true, argv, 240);
    ck_assert_int_eq(r.status, 0);
    char **files;
    size_t n = list_traces(&w, &files);
    ck_assert_uint_eq(n, 201);
    int children = 0;
    for (size_t i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        int64_t calls = complete_prefix_length(db);
        if (strcmp(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "_exit") == 0) {
            ck_assert_int_eq(calls, 1);
            children++;
        }
        sqlite3_close(db);
    }
    ck_assert_int_eq(children, 200);
    free_list(files, n);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* Promise 3: posix_spawn, vfork and multiprocessing "spawn" children are traced. */
START_TEST(test_spawned_children_are_traced)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_spawn"), build_path("progs/rt_exit"), NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(r.status, 0);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 3);
    free_list(files, 3);
    run_free(&r);
    world_free(&w);

    world_init(&w);
    char script[4096];
    snprintf(script, sizeof script, "%s/tests/progs/mp_spawn.py", getenv("CUTRACE_TEST_SRC"));
    const char *py[] = {"/usr/bin/env", "python3", script, build_path("progs/libcuda_helper.so"),
                        NULL};
    r = run_prog(&w, true, py, 120);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "spawned child exited with 0\n");
    /* Only the spawned interpreter used CUDA. */
    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(complete_prefix_length(db), 10);
    ck_assert_ptr_nonnull(strstr(tsql_text(db, "SELECT cmdline FROM process"), "spawn_main"));
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);
}
END_TEST

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long v = -1;
    ck_assert_int_eq(fscanf(f, "%ld", &v), 1);
    fclose(f);
    return v;
}

/* Promise 4: a writer that falls behind makes the program wait, within a bounded memory. */
START_TEST(test_bounded_memory_waits_instead_of_dropping)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "CUTRACE_BUFFER_MB=1";
    char plain_hwm[4096], traced_hwm[4096];
    snprintf(plain_hwm, sizeof plain_hwm, "%s/plain.hwm", w.root);
    snprintf(traced_hwm, sizeof traced_hwm, "%s/traced.hwm", w.root);
    const char *plain_argv[] = {build_path("progs/rt_burst"), "400000", plain_hwm, NULL};
    const char *traced_argv[] = {build_path("progs/rt_burst"), "400000", traced_hwm, NULL};
    struct run plain = run_prog(&w, false, plain_argv, 120);
    struct run traced = run_prog(&w, true, traced_argv, 120);
    ck_assert_int_eq(traced.status, 0);
    ck_assert_str_eq(traced.out, plain.out);
    long extra_kib = read_long(traced_hwm) - read_long(plain_hwm);
    ck_assert_msg(extra_kib < 64 * 1024, "tracing took %ld KiB", extra_kib);

    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(complete_prefix_length(db), 400000);
    ck_assert_int_gt(tsql_int(db, "SELECT sum(wait_ns) FROM calls"), 0);
    sqlite3_close(db);
    const char *summary[] = {build_path("cutrace"), "summary", w.trace_dir, NULL};
    struct run s = run_prog(&w, false, summary, 60);
    ck_assert_int_eq(s.status, 0);
    ck_assert_ptr_nonnull(strstr(s.out, "wait"));
    run_free(&s);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* Promises 4 and 7: a trace that hits the file-size limit. */
START_TEST(test_file_size_limit_changes_nothing_and_trace_says_where_it_stops)
{
    struct world w;
    world_init(&w);
    char hwm[4096];
    snprintf(hwm, sizeof hwm, "%s/hwm", w.root);
    const char *argv[] = {build_path("progs/rt_burst"), "200000", hwm, NULL};
    /* The fake driver's shared state file is larger than the limit: make it first. */
    struct run warmup = run_prog(&w, false, argv, 120);
    ck_assert_int_eq(warmup.status, 0);
    run_free(&warmup);
    w.fsize_limit = 256 * 1024;
    struct run plain = run_prog(&w, false, argv, 120);
    struct run traced = run_prog(&w, true, argv, 120);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_int_eq(traced.status, 0);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_uint_eq(count_lines(traced.err), 1);
    ck_assert_int_eq(strncmp(traced.err, "cutrace: ", 9), 0);

    w.fsize_limit = 0;
    recover(&w);
    sqlite3 *db = only_trace(&w);
    int64_t calls = complete_prefix_length(db);
    ck_assert_int_gt(calls, 0);
    ck_assert_int_lt(calls, 200000);
    ck_assert_str_ne(tsql_text(db, "SELECT value FROM meta WHERE key = 'writer_error'"), "<none>");
    ck_assert_int_gt(tsql_int(db, "SELECT value FROM meta WHERE key = 'writer_stopped_after'"), 0);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "exit");
    sqlite3_close(db);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* Until the trace is made: its schema (the `events` table) and its
 * crash-safe ring. A fixed sleep was too short on a loaded machine, and the
 * meddling then hit a trace still being created (other warnings than the
 * one tested). */
static void wait_for_schema(struct world *w)
{
    for (int i = 0; i < 2000; i++) {
        char **files;
        size_t n = list_traces(w, &files);
        int64_t tables = 0;
        if (n > 0) {
            sqlite3 *db = NULL;
            if (sqlite3_open_v2(files[0], &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
                sqlite3_stmt *st = NULL;
                if (sqlite3_prepare_v2(db,
                                       "SELECT count(*) FROM sqlite_master WHERE name = 'events'",
                                       -1, &st, NULL) == SQLITE_OK &&
                    sqlite3_step(st) == SQLITE_ROW)
                    tables = sqlite3_column_int64(st, 0);
                sqlite3_finalize(st);
            }
            sqlite3_close(db);
        }
        free_list(files, n);
        if (tables > 0 && count_rings(w) > 0)
            return;
        sleep_ms(5);
    }
    ck_abort_msg("the trace's schema and ring never appeared");
}

/* Runs rt_pause traced; once its trace exists, `meddle` acts, then the program goes on. */
static struct run pause_and_meddle(struct world *w, void (*meddle)(struct world *, void *),
                                   void *arg)
{
    char go[4096];
    snprintf(go, sizeof go, "%s/go", w->root);
    const char *argv[] = {build_path("progs/rt_pause"), go, "50", NULL};
    struct running p = start_prog(w, true, argv);
    wait_for_trace_file(w);
    wait_for_schema(w);
    meddle(w, arg);
    FILE *f = fopen(go, "w");
    fclose(f);
    return finish_prog(&p, 60);
}

static void remove_trace_dir(struct world *w, void *arg)
{
    (void)arg;
    tsql_rmtree(w->trace_dir);
}

/* Promises 4 and 7: the trace directory removed under a running program. */
START_TEST(test_removed_trace_dir_warns_once_and_changes_nothing)
{
    struct world w;
    world_init(&w);
    struct run r = pause_and_meddle(&w, remove_trace_dir, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "done after 50 more pairs\n");
    ck_assert_msg(count_lines(r.err) == 1, "stderr:\n%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "cutrace: "));
    ck_assert_msg(strstr(r.err, "removed") != NULL, "stderr:\n%s", r.err);
    run_free(&r);
    world_free(&w);
}
END_TEST

static void lock_trace(struct world *w, void *arg)
{
    char **files;
    ck_assert_uint_eq(list_traces(w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READWRITE);
    /* the writer may be inside its first commits still: wait for it */
    sqlite3_busy_timeout(db, 10000);
    ck_assert_int_eq(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    *(sqlite3 **)arg = db;
    free_list(files, 1);
}

/* Promises 4 and 7: another process holds the trace file locked. */
START_TEST(test_locked_trace_file_warns_once_and_changes_nothing)
{
    struct world w;
    world_init(&w);
    sqlite3 *locker = NULL;
    struct run r = pause_and_meddle(&w, lock_trace, &locker);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "done after 50 more pairs\n");
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "cutrace: "));
    sqlite3_exec(locker, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(locker);

    /* Once the lock is gone, the ring gives the rest back and says why it stopped. */
    recover(&w);
    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(complete_prefix_length(db), 101);
    ck_assert_ptr_nonnull(
        strstr(tsql_text(db, "SELECT value FROM meta WHERE key = 'writer_error'"), "locked"));
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* Promise 5: setuid programs are not traced (the loader and the preload both refuse). */
START_TEST(test_setuid_program_is_not_traced)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: setuid test needs root to make a setuid binary\n");
        return;
    }
    struct world w;
    world_init(&w);
    char copy[4096];
    snprintf(copy, sizeof copy, "%s/rt_sequence_setuid", w.root);
    char *cmd;
    ck_assert_int_ge(asprintf(&cmd, "cp %s %s && chown nobody %s && chmod 4755 %s",
                              build_path("progs/rt_sequence"), copy, copy, copy),
                     0);
    ck_assert_int_eq(system(cmd), 0);
    free(cmd);
    chmod(w.root, 0755);
    const char *argv[] = {copy, "/dev/null", NULL};
    struct run plain = run_prog(&w, false, argv, 30);
    struct run traced = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 0);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

Suite *reliability_suite(void)
{
    Suite *s = suite_create("reliability");
    TCase *tc = tcase_create("reliability");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sigkill_loses_nothing);
    tcase_add_test(tc, test_summary_recovers_before_reporting);
    tcase_add_test(tc, test_crashes_and_uncaught_signals_lose_nothing);
    tcase_add_test(tc, test_programs_own_signal_handler_runs_first);
    tcase_add_test(tc, test_32_threads_every_call_in_thread_order);
    tcase_add_test(tc, test_fork_200_times_during_calls);
    tcase_add_test(tc, test_spawned_children_are_traced);
    tcase_add_test(tc, test_bounded_memory_waits_instead_of_dropping);
    tcase_add_test(tc, test_file_size_limit_changes_nothing_and_trace_says_where_it_stops);
    tcase_add_test(tc, test_removed_trace_dir_warns_once_and_changes_nothing);
    tcase_add_test(tc, test_locked_trace_file_warns_once_and_changes_nothing);
    tcase_add_test(tc, test_setuid_program_is_not_traced);
    suite_add_tcase(s, tc);
    return s;
}
