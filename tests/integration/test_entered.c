/*
 * test_entered.c - calls that never returned: ranks killed with SIGKILL
 * while inside a blocking NCCL call leave their "entered" marks in their
 * rings, which folding turns into inflight rows; `cutrace collectives` and
 * `cutrace timeline` say which call each rank died inside, group the ranks
 * of a communicator whose init never finished, and name the rank that
 * never entered the collective the others wait in.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

enum { NRANKS = 8, SKIP_RANK = 3 };

/* hang_ranks MODE under the tracer, until `inside` ranks are seen inside
 * their call by `cutrace collectives` (read from the live rings); then
 * every rank and the launcher are killed with SIGKILL. */
static void run_until_stuck(struct world *w, const char *mode, size_t inside)
{
    char pidfile[4096], ranks[16], skip[16];
    snprintf(pidfile, sizeof pidfile, "%s/pids", w->root);
    snprintf(ranks, sizeof ranks, "%d", NRANKS);
    snprintf(skip, sizeof skip, "%d", SKIP_RANK);
    const char *argv[] = {build_path("progs/hang_ranks"), mode, ranks, pidfile, skip, NULL};
    pid_t launcher = spawn_prog(w, true, argv);
    const char *report[] = {"collectives", w->trace_dir, NULL};
    size_t seen = 0;
    /* Polled, not timed: the bound only ends a test whose ranks never get there. */
    for (int attempt = 0; attempt < 600 && seen < inside; attempt++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        struct run r = harness_cutrace(w, report);
        /* One line per process inside a call: "pid N: inside ... (still running)". */
        seen = r.status == 0 ? count_occurrences(r.out, "(still running)") : 0;
        run_free(&r);
    }
    ck_assert_msg(seen >= inside, "only %zu of %zu ranks seen inside their call", seen, inside);
    FILE *f = fopen(pidfile, "r");
    ck_assert_ptr_nonnull(f);
    int pid;
    while (fscanf(f, "%d", &pid) == 1)
        kill(pid, SIGKILL);
    fclose(f);
    kill(launcher, SIGKILL);
    ck_assert_int_eq(wait_prog(launcher, 60), 128 + SIGKILL);
    /* A rank is gone, and its ring free to fold, only once the kernel has
     * ended it, a little after kill() returned. */
    for (int attempt = 0; attempt < 600 && seen > 0; attempt++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        struct run r = harness_cutrace(w, report);
        seen = r.status == 0 ? count_occurrences(r.out, "(still running)") : seen;
        run_free(&r);
    }
    ck_assert_uint_eq(seen, 0);
}

static struct run cutrace2(struct world *w, const char *cmd, const char *format)
{
    const char *args[] = {cmd, format, w->trace_dir, NULL};
    if (!format[0]) {
        args[1] = w->trace_dir;
        args[2] = NULL;
    }
    struct run r = harness_cutrace(w, args);
    ck_assert_msg(r.status == 0, "cutrace %s %s: %s", cmd, format, r.err);
    return r;
}

START_TEST(eight_ranks_killed_in_init)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "CUTRACE_FAKE_GPUS=8";
    w.extra_env[1] = "CUTRACE_FAKE_NCCL_TIMEOUT=600";
    run_until_stuck(&w, "init", NRANKS);

    /* The text report: the eight ranks, one communicator that never finished. */
    struct run r = cutrace2(&w, "collectives", "");
    ck_assert_msg(!strstr(r.out, "no NCCL communicators or calls"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "never finished its init: 8 ranks inside ncclCommInitRank"), "%s",
                  r.out);
    ck_assert_msg(strstr(r.out, "(9 ranks)"), "%s", r.out);
    ck_assert_uint_eq(count_occurrences(r.out, "died inside ncclCommInitRank, entered "), NRANKS);
    ck_assert_msg(strstr(r.out, "1 rank never entered it"), "%s", r.out);
    run_free(&r);

    /* JSON: folded now, so no rank is still running. */
    r = cutrace2(&w, "collectives", "--json");
    ck_assert_int_eq(report_json_int(r.out, "$.in_flight.unfinished_inits[0].ranks_inside"),
                     NRANKS);
    ck_assert_int_eq(report_json_int(r.out, "$.in_flight.unfinished_inits[0].nranks"), NRANKS + 1);
    ck_assert_uint_eq(count_occurrences(r.out, "\"still_running\": true"), 0);
    run_free(&r);

    r = cutrace2(&w, "timeline", "");
    ck_assert_uint_eq(count_occurrences(r.out, "died inside ncclCommInitRank"), NRANKS);
    run_free(&r);
    r = cutrace2(&w, "timeline", "--json");
    ck_assert_uint_eq(count_occurrences(r.out, "\"api\": \"ncclCommInitRank\""), NRANKS);
    run_free(&r);

    /* Each trace: one inflight row, the init, and no completed call of it. */
    char **files;
    size_t n = list_traces(&w, &files);
    ck_assert_uint_eq(n, NRANKS);
    for (size_t i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM inflight_calls"), 1);
        ck_assert_str_eq(tsql_text(db, "SELECT api FROM inflight_calls"), "ncclCommInitRank");
        ck_assert_int_eq(tsql_int(db, "SELECT arg1 FROM inflight_calls"), NRANKS + 1);
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'ncclCommInitRank'"),
                         0);
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM communicators"), 0);
        /* The writer's last heartbeat, kept by the fold (it may precede the
         * entry by up to a commit interval: a rank killed just after entering). */
        ck_assert_int_gt(tsql_int(db, "SELECT value FROM meta WHERE key = 'alive_mono_ns'"), 0);
        sqlite3_close(db);
    }
    free_list(files, n);
    world_free(&w);
}
END_TEST

START_TEST(seven_ranks_in_allreduce_one_never_entered)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "CUTRACE_FAKE_GPUS=8";
    w.extra_env[1] = "CUTRACE_FAKE_BLOCK=ncclAllReduce@3,cudaStreamSynchronize@3";
    run_until_stuck(&w, "coll", NRANKS);

    struct run r = cutrace2(&w, "collectives", "");
    ck_assert_msg(strstr(r.out, "7 of 8 traced ranks inside ncclAllReduce #3"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "rank 3 (pid "), "%s", r.out);
    ck_assert_msg(strstr(r.out, "never entered it; last seen: died inside cudaStreamSynchronize"),
                  "%s", r.out);
    ck_assert_uint_eq(count_occurrences(r.out, "died inside ncclAllReduce #3"), NRANKS - 1);
    run_free(&r);

    r = cutrace2(&w, "collectives", "--json");
    ck_assert_int_eq(report_json_int(r.out, "$.in_flight.hangs[0].nth"), 3);
    ck_assert_int_eq(report_json_int(r.out, "$.in_flight.hangs[0].never_entered[0].rank"),
                     SKIP_RANK);
    char *op = report_json_text(r.out, "$.in_flight.hangs[0].op");
    ck_assert_str_eq(op, "ncclAllReduce");
    free(op);
    /* Completed calls only: two allreduces on each rank. */
    ck_assert_int_eq(report_json_int(r.out, "$.totals.collective_calls"), 2 * NRANKS);
    run_free(&r);

    r = cutrace2(&w, "timeline", "");
    ck_assert_uint_eq(count_occurrences(r.out, "died inside ncclAllReduce #3"), NRANKS - 1);
    ck_assert_msg(strstr(r.out, "died inside cudaStreamSynchronize"), "%s", r.out);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* A process that exits while another of its threads is inside a blocking
 * call keeps its ring, and the trace learns the call from it. */
START_TEST(exit_while_a_thread_is_inside)
{
    struct world w;
    world_init(&w);
    char note[4096], pidfile[4096], env[4200];
    snprintf(note, sizeof note, "%s/blocked", w.root);
    snprintf(pidfile, sizeof pidfile, "%s/pids", w.root);
    snprintf(env, sizeof env, "CUTRACE_FAKE_BLOCK_NOTE=%s", note);
    w.extra_env[0] = "CUTRACE_FAKE_BLOCK=cudaStreamSynchronize";
    w.extra_env[1] = env;
    const char *argv[] = {build_path("progs/hang_ranks"), "exit", "1", pidfile, NULL};
    struct run r = run_prog(&w, true, argv, 120);
    ck_assert_msg(r.status == 0, "hang_ranks exit: %s", r.err);
    run_free(&r);

    r = cutrace2(&w, "timeline", "");
    ck_assert_msg(
        strstr(r.out, "still inside cudaStreamSynchronize when it ended (exit), entered "), "%s",
        r.out);
    run_free(&r);
    char **files;
    size_t n = list_traces(&w, &files);
    ck_assert_uint_eq(n, 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "exit");
    ck_assert_str_eq(tsql_text(db, "SELECT api FROM inflight_calls WHERE nested = 0"),
                     "cudaStreamSynchronize");
    sqlite3_close(db);
    free_list(files, n);
    world_free(&w);
}
END_TEST

Suite *entered_suite(void)
{
    Suite *s = suite_create("entered");
    TCase *tc = tcase_create("killed inside");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, eight_ranks_killed_in_init);
    tcase_add_test(tc, seven_ranks_in_allreduce_one_never_entered);
    tcase_add_test(tc, exit_while_a_thread_is_inside);
    suite_add_tcase(s, tc);
    return s;
}
