/*
 * test_inflight.c - calls that never returned, in the analyzer: entered
 * marks of a killed process's ring folded into `inflight` rows (and the
 * marks that must not be), the model's calls in flight and the end they
 * are dated against, and `cutrace collectives` grouping ranks stuck in an
 * init and naming the rank that never entered the collective the others
 * are inside.
 */
#include "model/gpumodel.h"
#include "model/traceset.h"
#include "test_support.h"
#include "trace_fixture.h"

#include "cutrace/ring.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOST     "node1"
#define START_NS INT64_C(1736071872345000000)
#define HASH     UINT64_C(0xac3660ad478b5010)
#define T0       INT64_C(1000000000)
#define SECOND   INT64_C(1000000000)

static struct ct_record blocking_record(uint64_t seq, enum ct_api api, int64_t t_ns)
{
    struct ct_record r;
    memset(&r, 0, sizeof(r));
    r.seq = seq;
    r.t_ns = (uint64_t)t_ns;
    r.tid = 1000;
    r.api = (uint16_t)api;
    r.device = -1;
    return r;
}

static char *trace_of(const char *dir, int64_t pid, int calls, const char *end_state)
{
    char *path = fixture_trace_path(dir, HOST, pid, START_NS + pid);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid,
                                .host = HOST,
                                .cmdline = "python3 train.py",
                                .start_wall_ns = START_NS + pid,
                                .start_mono_ns = 500000000};
    fixture_process(f, &p);
    fixture_meta(f, "end_state", end_state);
    fixture_set_clock(f, T0);
    for (int i = 0; i < calls; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000 + (int64_t)i * 4096, 4096, 0);
    fixture_close(f);
    return path;
}

static int64_t query_int(const char *path, const char *sql)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s;
    ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

START_TEST(test_marks_fold_into_inflight_rows)
{
    char *dir = scratch_dir();
    char *db = trace_of(dir, 1000, 3, "running");
    /* The ring of the process, killed inside ncclCommInitRank (seq 5): its
     * mark, one of a call that returned (seq 3, in events), and one naming
     * an api the trace does not list. */
    size_t bytes = ct_ring_bytes(16);
    void *mem = calloc(1, bytes);
    const char *name = strrchr(db, '/') + 1;
    struct ct_ring_owner owner = {1000, (uint64_t)(START_NS + 1000), 500000000, name, "boot-1"};
    ct_ring_format(mem, 16, &owner);
    struct ct_ring ring;
    ck_assert(ct_ring_attach(&ring, mem, bytes));
    struct ct_record init = blocking_record(5, CT_API_ncclCommInitRank, T0 + SECOND);
    init.arg[1] = 9;
    init.arg[2] = 2;
    init.arg[3] = HASH;
    ck_assert_ptr_nonnull(ct_ring_mark_enter(&ring, &init));
    struct ct_record returned = blocking_record(3, CT_API_cudaStreamSynchronize, T0);
    ck_assert_ptr_nonnull(ct_ring_mark_enter(&ring, &returned));
    struct ct_record foreign = blocking_record(6, CT_API_ncclAllReduce, T0);
    foreign.api = 999;
    ck_assert_ptr_nonnull(ct_ring_mark_enter(&ring, &foreign));
    /* A mark taken and freed is no call in flight. */
    struct ct_record left = blocking_record(4, CT_API_ncclAllReduce, T0);
    ct_ring_mark_leave(ct_ring_mark_enter(&ring, &left));
    ct_ring_note_alive(&ring, (uint64_t)(T0 + 42 * SECOND));
    char *ring_path = NULL;
    ck_assert_int_ge(asprintf(&ring_path, "%.*s.ring", (int)(strlen(db) - 3), db), 0);
    write_file(ring_path, mem, bytes);
    free(mem);

    const char *args[] = {"recover", dir, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, ", 1 call it never returned from (process 1000, ended: killed)"),
                  "%s", r.out);
    proc_result_free(&r);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM inflight_calls"), 1);
    ck_assert_int_eq(query_int(db, "SELECT seq FROM inflight_calls WHERE api = 'ncclCommInitRank'"
                                   " AND role = 'comm_init' AND arg1 = 9 AND arg2 = 2"),
                     5);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM calls"), 3);
    ck_assert_int_eq(query_int(db, "SELECT value FROM meta WHERE key = 'alive_mono_ns'"),
                     T0 + 42 * SECOND);

    /* The model: one call in flight, dated from the heartbeat. */
    struct trace_set set;
    struct gm_model m;
    ck_assert_int_eq(gm_open_run(&m, &set, (const char *const[]){dir}, 1, 0), 0);
    ck_assert_uint_eq(m.procs[0].ninflight, 1);
    const struct gm_inflight *c = gm_stuck_call(&m.procs[0]);
    ck_assert_ptr_nonnull(c);
    ck_assert(c->init && !c->live);
    ck_assert_int_eq(c->nranks, 9);
    ck_assert_uint_eq(c->hash, HASH);
    char text[256];
    ck_assert_str_eq(gm_inflight_text(text, sizeof(text), &m, &m.procs[0], c),
                     "died inside ncclCommInitRank, entered 41.0 s before the end");
    gm_free(&m);
    trace_set_close(&set);
    free(ring_path);
    free(db);
    scratch_remove(dir);
}
END_TEST

/* A killed rank's trace: an init of (HASH, nranks) done or in flight, then
 * `done` allreduces, then the call it died inside (0: none). */
static void rank_trace(const char *dir, int64_t rank, int64_t nranks, bool init_done, int done,
                       enum ct_api inside)
{
    char *path = fixture_trace_path(dir, HOST, 2000 + rank, START_NS + rank);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 2000 + rank,
                                .host = HOST,
                                .start_wall_ns = START_NS + rank,
                                .start_mono_ns = 500000000,
                                .nccl_version = 22809};
    fixture_process(f, &p);
    fixture_meta(f, "end_state", "killed");
    fixture_meta_int(f, "alive_mono_ns", T0 + 10 * SECOND);
    fixture_set_clock(f, T0);
    int64_t comm = 0x5000 + rank;
    int64_t next = 1;
    if (init_done) {
        struct fixture_nccl_init init = {
            .comm = comm, .nranks = nranks, .rank = rank, .hash = HASH, .device = rank};
        next = fixture_nccl_init(f, &init) + 1;
        for (int i = 0; i < done; i++)
            next =
                fixture_nccl_collective(f, CT_API_ncclAllReduce, comm, NCCL_FLOAT32, 4096, 0, 0) +
                1;
    }
    if (inside || !init_done) {
        enum ct_api api = init_done ? inside : CT_API_ncclCommInitRank;
        char *sql = sqlite3_mprintf(
            "INSERT INTO inflight VALUES (%lld, NULL, %lld, %lld, %d, -1, 0, 0, 0, 0, 0, %lld,"
            " %lld, %lld, %lld, -1, 0, 0, 0, 0)",
            (long long)next, (long long)(T0 + 4 * SECOND), (long long)(2000 + rank), (int)api,
            (long long)(init_done ? comm : 0), (long long)(init_done ? 1024 : nranks),
            (long long)(init_done ? NCCL_FLOAT32 : rank),
            (long long)(init_done ? 0 : (int64_t)HASH));
        fixture_exec(f, sql);
        sqlite3_free(sql);
    }
    fixture_close(f);
    free(path);
}

static struct proc_result collectives(const char *dir, bool json)
{
    const char *args[] = {"collectives", json ? "--json" : dir, json ? dir : NULL, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    return r;
}

START_TEST(test_ranks_stuck_in_init_are_grouped)
{
    char *dir = scratch_dir();
    for (int64_t rank = 0; rank < 3; rank++)
        rank_trace(dir, rank, 4, false, 0, 0);
    struct proc_result r = collectives(dir, false);
    ck_assert_ptr_null(strstr(r.out, "no NCCL communicators or calls"));
    ck_assert_msg(strstr(r.out, "Communicator ac3660ad478b5010 (4 ranks) never finished its init:"
                                " 3 ranks inside ncclCommInitRank"),
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "  rank 1 (pid 2001): entered 6.0 s before the end\n"), "%s",
                  r.out);
    ck_assert_msg(strstr(r.out, "1 rank never entered it (or is not traced)"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "pid 2002: died inside ncclCommInitRank, entered 6.0 s before the"
                                " end"),
                  "%s", r.out);
    proc_result_free(&r);
    r = collectives(dir, true);
    ck_assert_msg(strstr(r.out, "\"ranks_inside\": 3"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"unique_id_hash\": \"ac3660ad478b5010\""), "%s", r.out);
    proc_result_free(&r);
    /* --fail-on-problem: a call that never returned is one. */
    const char *args[] = {"collectives", "--fail-on-problem", dir, NULL};
    r = run_cutrace(args, NULL);
    ck_assert_int_eq(r.status, 3);
    proc_result_free(&r);
    /* A rank that died inside its init is still that rank: --rank finds it,
     * and ls shows it with the communicator's size (gm_process_rank). */
    const char *ls[] = {"ls", "--rank", "1", "--json", dir, NULL};
    r = run_cutrace(ls, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "\"pid\": 2001") && !strstr(r.out, "\"pid\": 2000") &&
                      !strstr(r.out, "\"pid\": 2002"),
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"rank\": 1,"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"world_size\": 4,"), "%s", r.out);
    proc_result_free(&r);
    const char *one[] = {"collectives", "--rank", "2", dir, NULL};
    r = run_cutrace(one, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "pid 2002: died inside ncclCommInitRank"), "%s", r.out);
    ck_assert_ptr_null(strstr(r.out, "pid 2001: died inside"));
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_rank_that_never_entered_is_named)
{
    char *dir = scratch_dir();
    rank_trace(dir, 0, 3, true, 2, CT_API_ncclAllReduce);
    rank_trace(dir, 1, 3, true, 2, CT_API_ncclAllReduce);
    rank_trace(dir, 2, 3, true, 2, CT_API_cudaStreamSynchronize);
    struct proc_result r = collectives(dir, false);
    ck_assert_msg(strstr(r.out, ": 2 of 3 traced ranks inside ncclAllReduce #3; ranks that never"
                                " entered it:"),
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "rank 2 (pid 2002) never entered it; last seen: died inside"
                                " cudaStreamSynchronize, entered 6.0 s before the end"),
                  "%s", r.out);
    /* The calls in flight are not counted as calls. */
    ck_assert_msg(strstr(r.out, "  calls      6 collective,"), "%s", r.out);
    proc_result_free(&r);
    r = collectives(dir, true);
    ck_assert_msg(strstr(r.out, "\"never_entered\": [\n"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"nth\": 3"), "%s", r.out);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

/* A trace of an older format has no inflight table: nothing in flight, no error. */
START_TEST(test_trace_without_inflight_table)
{
    char *dir = scratch_dir();
    rank_trace(dir, 0, 3, true, 2, CT_API_ncclAllReduce);
    char *path = fixture_trace_path(dir, HOST, 2000, START_NS);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_exec(db, "DROP VIEW inflight_calls; DROP TABLE inflight;", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    struct proc_result r = collectives(dir, false);
    ck_assert_ptr_null(strstr(r.out, "never returned"));
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

Suite *inflight_suite(void);
Suite *inflight_suite(void)
{
    Suite *s = suite_create("inflight");
    TCase *tc = tcase_create("calls that never returned");
    tcase_add_test(tc, test_marks_fold_into_inflight_rows);
    tcase_add_test(tc, test_ranks_stuck_in_init_are_grouped);
    tcase_add_test(tc, test_rank_that_never_entered_is_named);
    tcase_add_test(tc, test_trace_without_inflight_table);
    suite_add_tcase(s, tc);
    return s;
}
