/*
 * test_nccl.c - NCCL under the tracer: communicators and collectives of every
 * rank of a multi-process job on the fake stack, joined across traces.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

enum { ITERS = 5 };

static int64_t count_where(sqlite3 *db, const char *where)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM collectives WHERE %s", where);
    return tsql_int(db, sql);
}

/* Runs tp_collectives with `nranks` ranks; returns the sorted trace paths. */
static size_t run_job(struct world *w, int nranks, const char *short_rank, char ***files)
{
    char ranks[16], iters[16];
    snprintf(ranks, sizeof ranks, "%d", nranks);
    snprintf(iters, sizeof iters, "%d", ITERS);
    w->extra_env[0] = "CUTRACE_FAKE_GPUS=8";
    const char *argv[] = {build_path("progs/tp_collectives"), ranks, iters, short_rank, NULL};
    struct run r = run_prog(w, true, argv, 120);
    ck_assert_msg(r.status == 0, "tp_collectives failed: %s", r.err);
    run_free(&r);
    size_t n = list_traces(w, files);
    ck_assert_uint_eq(n, (size_t)nranks); /* the launcher itself never touches CUDA */
    return n;
}

static void check_job(int nranks)
{
    struct world w;
    world_init(&w);
    char **files;
    size_t n = run_job(&w, nranks, NULL, &files);
    char world_hash[32] = "", half_hash[2][32] = {"", ""};
    int seen_rank[64] = {0};
    for (size_t i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        int rank =
            (int)tsql_int(db, "SELECT rank FROM communicators WHERE api = 'ncclCommInitRank'");
        ck_assert(rank >= 0 && rank < nranks && !seen_rank[rank]);
        seen_rank[rank] = 1;
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM communicators"), 2);
        ck_assert_int_eq(
            tsql_int(db, "SELECT nranks FROM communicators WHERE api = 'ncclCommInitRank'"),
            nranks);
        ck_assert_int_eq(
            tsql_int(db, "SELECT device FROM communicators WHERE api = 'ncclCommInitRank'"), rank);
        const char *h = tsql_text(
            db, "SELECT unique_id_hash FROM communicators WHERE api = 'ncclCommInitRank'");
        if (!world_hash[0])
            snprintf(world_hash, sizeof world_hash, "%s", h);
        ck_assert_str_eq(h, world_hash);
        /* The split: same hash within a color, parent = the world communicator. */
        h = tsql_text(db, "SELECT unique_id_hash FROM communicators WHERE api = 'ncclCommSplit'");
        if (!half_hash[rank % 2][0])
            snprintf(half_hash[rank % 2], sizeof half_hash[0], "%s", h);
        ck_assert_str_eq(h, half_hash[rank % 2]);
        ck_assert_int_eq(
            tsql_int(db, "SELECT color FROM communicators WHERE api = 'ncclCommSplit'"), rank % 2);
        ck_assert_int_eq(tsql_int(db, "SELECT rank FROM communicators WHERE api = 'ncclCommSplit'"),
                         rank / 2);
        ck_assert_int_eq(
            tsql_int(db, "SELECT nranks FROM communicators WHERE api = 'ncclCommSplit'"),
            nranks / 2 + (rank % 2 == 0 ? nranks % 2 : 0));
        ck_assert_int_eq(tsql_int(db, "SELECT s.parent_comm_id = w.comm_id FROM communicators s,"
                                      " communicators w WHERE s.api = 'ncclCommSplit'"
                                      " AND w.api = 'ncclCommInitRank'"),
                         1);
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM communicators"
                                      " WHERE t_destroy_ns IS NULL OR init_result != 0"),
                         0);
        /* Exact counts of what the program made. */
        ck_assert_int_eq(count_where(db, "op = 'ncclAllReduce'"), 3 * ITERS);
        ck_assert_int_eq(count_where(db, "op = 'ncclAllReduce' AND captured"), ITERS);
        ck_assert_int_eq(count_where(db, "op = 'ncclAllReduce' AND comm_id ="
                                         " (SELECT comm_id FROM communicators"
                                         " WHERE api = 'ncclCommSplit')"),
                         ITERS);
        ck_assert_int_eq(count_where(db, "op = 'ncclAllGather' AND in_group = 1"), ITERS);
        ck_assert_int_eq(count_where(db, "op = 'ncclReduceScatter' AND in_group = 1"), ITERS);
        ck_assert_int_eq(count_where(db, "op = 'ncclSend' AND peer = "
                                         "(SELECT (rank + 1) % nranks"
                                         " FROM communicators WHERE api = 'ncclCommInitRank')"),
                         ITERS);
        ck_assert_int_eq(count_where(db, "op = 'ncclRecv' AND in_group = 1"), ITERS);
        ck_assert_int_eq(count_where(db, "in_group = 0 AND NOT captured"), 2 * ITERS);
        ck_assert_int_eq(count_where(db, "op = 'ncclAllReduce' AND captured AND datatype ="
                                         " 'float16' AND redop = 'max' AND bytes = 2048"),
                         ITERS);
        ck_assert_int_eq(
            count_where(db, "op = 'ncclAllGather' AND bytes = 524288 AND redop IS NULL"), ITERS);
        ck_assert_int_eq(count_where(db, "result != 0 OR comm_id IS NULL"), 0);
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'ncclGroupStart'"),
                         2 * ITERS);
        ck_assert_int_eq(tsql_int(db, "SELECT nccl_version FROM process"), 22809);
        /* NCCL's own memory is an allocation; its registration names the buffer. */
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE api = 'ncclMemAlloc'"
                                      " AND kind = 'device' AND size = 4194304"
                                      " AND free_api = 'ncclMemFree'"),
                         1);
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls r, allocations a"
                                      " WHERE r.api = 'ncclCommRegister' AND r.result = 0"
                                      " AND r.ptr = a.ptr AND r.size = a.size"
                                      " AND a.api = 'ncclMemAlloc'"),
                         1);
        sqlite3_close(db);
    }
    ck_assert_str_ne(half_hash[0], half_hash[1]);
    ck_assert_str_ne(half_hash[0], world_hash);

    const char *report[] = {build_path("cutrace"), "collectives", w.trace_dir, NULL};
    struct run r = run_prog(&w, false, report, 60);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, world_hash));
    ck_assert_ptr_nonnull(strstr(r.out, "ncclAllReduce"));
    run_free(&r);
    free_list(files, n);
    world_free(&w);
}

START_TEST(test_four_ranks_joined_exactly)
{
    check_job(4);
}
END_TEST

START_TEST(test_eight_ranks_joined_exactly)
{
    check_job(8);
}
END_TEST

START_TEST(test_rank_that_exits_early_is_flagged)
{
    struct world w;
    world_init(&w);
    char **files;
    size_t n = run_job(&w, 4, "2", &files);
    const char *report[] = {build_path("cutrace"), "collectives", w.trace_dir, NULL};
    struct run r = run_prog(&w, false, report, 60);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "rank 2 made 9 ncclAllReduce") != NULL, "%s", r.out);
    const char *json[] = {build_path("cutrace"), "collectives", "--json", w.trace_dir, NULL};
    struct run j = run_prog(&w, false, json, 60);
    ck_assert_int_eq(j.status, 0);
    ck_assert_ptr_nonnull(strstr(j.out, "\"ranks_agree\": false"));
    run_free(&j);
    run_free(&r);
    free_list(files, n);
    world_free(&w);
}
END_TEST

/* A function the loaded NCCL lacks (here: no NCCL at all) is recorded, not a crash. */
START_TEST(test_function_missing_from_nccl_is_recorded)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/nccl_missing"), NULL};
    struct run r = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "ncclCommWindowRegister returned 5\n");
    ck_assert_uint_eq(count_lines(r.err), 1); /* "cannot find the real ncclCommWindowRegister" */
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_str_eq(tsql_text(db, "SELECT api || ' ' || layer || ' ' || result FROM calls"),
                     "ncclCommWindowRegister nccl 5");
    sqlite3_close(db);
    free_list(files, 1);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* The int after `"key":` in text, from `from` on. */
static int64_t json_int_after(const char *from, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *at = strstr(from, pattern);
    ck_assert_msg(at != NULL, "no %s in %.2000s", key, from);
    return strtoll(at + strlen(pattern), NULL, 10);
}

/* A two-host job made from one: ranks 2 and 3 of a four-rank job moved to
 * host nodeB, whose clock reads 3 s ahead. The fake NCCL's inits are a real
 * rendezvous, so the barrier bound must hold the true offset. */
START_TEST(test_two_hosts_aligned)
{
    const int64_t offset = 3000000000ll;
    struct world w;
    world_init(&w);
    char **files;
    size_t n = run_job(&w, 4, NULL, &files);
    for (size_t i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READWRITE);
        if (tsql_int(db, "SELECT rank FROM communicators WHERE api = 'ncclCommInitRank'") >= 2) {
            char sql[256];
            snprintf(sql, sizeof sql,
                     "UPDATE events SET t_ns = t_ns + %lld; UPDATE process SET host = 'nodeB',"
                     " start_mono_ns = start_mono_ns + %lld",
                     (long long)offset, (long long)offset);
            ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
        }
        sqlite3_close(db);
    }
    const char *report[] = {build_path("cutrace"), "timeline", "--json", w.trace_dir, NULL};
    struct run r = run_prog(&w, false, report, 60);
    ck_assert_int_eq(r.status, 0);
    const char *host = strstr(r.out, "\"host\": \"nodeB\"");
    ck_assert_msg(host != NULL, "%.3000s", r.out);
    ck_assert_ptr_nonnull(strstr(host, "\"state\": \"aligned\""));
    int64_t estimate = json_int_after(host, "offset_ns"), error = json_int_after(host, "error_ns");
    int64_t miss = estimate - offset;
    ck_assert_msg(miss <= error && -miss <= error, "offset %lld +/- %lld", (long long)estimate,
                  (long long)error);
    ck_assert_int_lt(error, 1000000000ll); /* far tighter than the offset itself */
    run_free(&r);
    free_list(files, n);
    world_free(&w);
}
END_TEST

Suite *nccl_suite(void)
{
    Suite *s = suite_create("nccl");
    TCase *tc = tcase_create("nccl");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_four_ranks_joined_exactly);
    tcase_add_test(tc, test_eight_ranks_joined_exactly);
    tcase_add_test(tc, test_rank_that_exits_early_is_flagged);
    tcase_add_test(tc, test_function_missing_from_nccl_is_recorded);
    tcase_add_test(tc, test_two_hosts_aligned);
    suite_add_tcase(s, tc);
    return s;
}
