/*
 * test_order.c - the order of what calls did, across threads and signal
 * handlers: frees of addresses another thread's cudaMalloc was about to get
 * end the allocation they freed (effect order, docs/schema.md), in the
 * views and in the memory model; and a signal handler's allocations in the
 * middle of the program's CUDA calls are the program's own top-level calls,
 * every one counted.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

#define MIB (1ll << 20)

/* The integer `sql` computes from the JSON document ?1 (json_each and
 * friends), with SQLite's JSON functions. */
static int64_t json_query_int(const char *json, const char *sql)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    sqlite3_bind_text(q, 1, json, -1, SQLITE_STATIC);
    ck_assert_msg(sqlite3_step(q) == SQLITE_ROW, "%s: no row in:\n%.2000s", sql, json);
    ck_assert_msg(sqlite3_column_type(q, 0) == SQLITE_INTEGER, "%s: not an integer in:\n%.2000s",
                  sql, json);
    int64_t v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

/* A field of device 0's `device` memory in `cutrace summary --json`. */
static int64_t summary_device(const char *json, const char *field)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT json_extract(value, '$.memory.device.%s') FROM"
             " json_each(?1, '$.processes[0].devices') WHERE json_extract(value, '$.device') = 0",
             field);
    return json_query_int(json, sql);
}

/* Runtime memory live at the process's last measurement, in the model's
 * timeline. */
static int64_t timeline_live_at_measurement(const char *json)
{
    return json_query_int(json, "SELECT json_extract(value, '$.live.runtime') FROM"
                                " json_each(?1, '$.gpus[0].milestones')"
                                " WHERE json_extract(value, '$.kind') = 'measurement'"
                                " ORDER BY json_extract(value, '$.seq') DESC LIMIT 1");
}

/* Checks the summary and the timeline of the world's traces against what
 * was live at the end and at the peak, and that the model met no free it
 * could not pair. */
static void check_reports(struct world *w, int64_t live, int64_t peak, int64_t allocations)
{
    const char *summary_args[] = {"summary", "--json", w->trace_dir, NULL};
    struct run s = harness_cutrace(w, summary_args);
    ck_assert_msg(s.status == 0, "%s", s.err);
    ck_assert_int_eq(summary_device(s.out, "allocs"), allocations);
    ck_assert_int_eq(summary_device(s.out, "live_bytes"), live);
    ck_assert_int_eq(summary_device(s.out, "peak_bytes"), peak);
    run_free(&s);

    const char *timeline_args[] = {"timeline", "--json", w->trace_dir, NULL};
    struct run t = harness_cutrace(w, timeline_args);
    ck_assert_msg(t.status == 0, "%s", t.err);
    ck_assert_int_eq(timeline_live_at_measurement(t.out), live);
    ck_assert_msg(strstr(t.out, "already freed") == NULL, "%s", t.out);
    ck_assert_msg(strstr(t.out, "never saw allocated") == NULL, "%s", t.out);
    run_free(&t);
}

/* Threads reusing each other's addresses: every free ends its own thread's
 * last allocation, and nothing is ended by anything else. */
START_TEST(test_frees_pair_with_what_they_freed_across_threads)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_reuse"), "8", "2000", NULL};
    struct run plain = run_prog(&w, false, argv, 120);
    struct run traced = run_prog(&w, true, argv, 120);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_int_eq(traced.status, 0);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_str_eq(traced.err, plain.err);
    int allocations, frees;
    long long live, peak;
    ck_assert_int_eq(sscanf(traced.out, "allocations %d frees %d live_bytes %lld peak_bytes %lld",
                            &allocations, &frees, &live, &peak),
                     4);

    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    /* The run did what it is for: cudaMallocs that returned an address
     * another thread's cudaFree, started after them, gave back. */
    int64_t crossings = tsql_int(db, "SELECT count(*) FROM calls m JOIN calls f ON f.ptr = m.ptr"
                                     " AND f.api = 'cudaFree' AND f.tid != m.tid"
                                     " AND f.seq > m.seq AND f.seq <= m.ret_seq"
                                     " WHERE m.api = 'cudaMalloc'");
    ck_assert_int_gt(crossings, 0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE api = 'cudaMalloc'"),
                     allocations);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE free_api = 'cudaFree'"),
                     frees);
    /* What ends an allocation is the next call of its thread when that is
     * a cudaFree; when it is another cudaMalloc, nothing does. */
    int64_t wrong = tsql_int(db, "SELECT count(*) FROM allocations a JOIN calls c ON c.seq = a.seq"
                                 " WHERE a.free_seq IS NOT (SELECT CASE WHEN n.api = 'cudaFree'"
                                 " THEN n.seq END FROM calls n WHERE n.tid = c.tid"
                                 " AND n.seq > c.seq AND NOT n.nested ORDER BY n.seq LIMIT 1)");
    ck_assert_msg(wrong == 0,
                  "%" PRId64 " allocations ended by another free (%" PRId64 " crossings)", wrong,
                  crossings);
    ck_assert_int_eq(tsql_int(db, "SELECT coalesce(sum(size), 0) FROM allocations"
                                  " WHERE free_seq IS NULL"),
                     live);
    sqlite3_close(db);
    free_list(files, 1);
    check_reports(&w, live, peak, allocations);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* Reads rt_sigalloc's ground truth: the main thread's allocations, the
 * handler's and the bytes left live (and the peak). */
static void read_truth(const char *path, long *rounds, int *handled, long long *live)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%ld %d %lld", rounds, handled, live), 3);
    fclose(f);
}

/* A SIGALRM handler's cudaMallocs, made while the main thread was inside
 * cudaMalloc and cudaFree: all counted, none nested, each with its own
 * driver call nested in it. */
START_TEST(test_signal_handler_allocations_are_top_level)
{
    struct world w;
    world_init(&w);
    char truth[4096], untraced_preload[4200], traced_preload[8400];
    snprintf(truth, sizeof truth, "%s/truth", w.root);
    snprintf(untraced_preload, sizeof untraced_preload, "LD_PRELOAD=%s",
             build_path("progs/libsig_window.so"));
    snprintf(traced_preload, sizeof traced_preload, "LD_PRELOAD=%s:%s", build_path("libcutrace.so"),
             build_path("progs/libsig_window.so"));
    const char *argv[] = {build_path("progs/rt_sigalloc"), truth, NULL};

    w.extra_env[0] = untraced_preload;
    struct run plain = run_prog(&w, false, argv, 120);
    ck_assert_msg(plain.status == 0, "exit %d: %s", plain.status, plain.err);
    long rounds;
    int handled;
    long long live;
    read_truth(truth, &rounds, &handled, &live);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 0);

    w.extra_env[0] = traced_preload;
    struct run traced = run_prog(&w, false, argv, 120);
    ck_assert_msg(traced.status == 0, "exit %d: %s", traced.status, traced.err);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_str_eq(traced.err, plain.err);
    read_truth(truth, &rounds, &handled, &live);
    ck_assert_int_eq(handled, 429);
    ck_assert_int_eq(live, (429 * 2 + 64) * MIB);

    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    /* The handler did run inside the main thread's calls. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls h WHERE h.api = 'cudaMalloc'"
                                  " AND h.size = 2097152 AND (SELECT o.t_ns + o.dur_ns FROM calls o"
                                  " WHERE o.seq < h.seq AND NOT o.nested AND o.size != 2097152"
                                  " ORDER BY o.seq DESC LIMIT 1) > h.t_ns"),
                     handled);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'cudaMalloc' AND nested"),
                     0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'cudaFree' AND nested"),
                     0);
    ck_assert_int_eq(
        tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'cudaMalloc' AND parent_seq != 0"), 0);
    /* Device 0 for every one, the handler's inside the process's first call
     * too (the driver's current context says so once it succeeded). */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'cudaMalloc'"
                                  " AND device != 0"),
                     0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE seq = 2 AND api = 'cudaMalloc'"
                                  " AND size = 2097152 AND NOT nested"),
                     1);
    /* Each cudaMalloc's own driver call is nested in it, at depth 1. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls c JOIN calls p ON p.seq ="
                                  " c.parent_seq WHERE c.api = 'cuMemAlloc_v2' AND c.nested"
                                  " AND p.api = 'cudaMalloc' AND p.size = c.size"),
                     rounds + handled);
    ck_assert_int_eq(tsql_int(db, "SELECT max(depth) FROM events"), 1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations"), rounds + handled);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE size = 2097152"
                                  " AND free_seq IS NULL"),
                     handled);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE free_seq IS NULL"),
                     handled + 1);
    sqlite3_close(db);
    free_list(files, 1);
    check_reports(&w, live, live, rounds + handled);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

Suite *order_suite(void)
{
    Suite *s = suite_create("order");
    TCase *tc = tcase_create("order");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_frees_pair_with_what_they_freed_across_threads);
    tcase_add_test(tc, test_signal_handler_allocations_are_top_level);
    suite_add_tcase(s, tc);
    return s;
}
