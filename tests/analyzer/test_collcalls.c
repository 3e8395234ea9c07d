/*
 * test_collcalls.c - the run model's NCCL calls (model/collcalls.h, loaded
 * by gm_load) agree with the public `collectives` view: per trace,
 * communicator and op, the same calls, bytes, failed, captured and grouped
 * counts, on the four-rank NCCL scenario and its variants (scenarios.h) and
 * on a trace of reused handles, calls on no communicator and NULLs.
 */
#include "model/gpumodel.h"
#include "model/traceset.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Suite *collcalls_suite(void); /* registered in test_main.c */

/* One (communicator, op) of a trace, summed. */
struct comm_op {
    bool has_comm;
    int64_t comm_id;
    const char *op;
    int64_t calls, bytes, failed, captured, in_group;
};

/* The model's cells of a process summed per (communicator, op). */
static size_t model_totals(const struct gm_model *m, const struct gm_process *p,
                           struct comm_op *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nccl_calls.ncells; i++) {
        const struct cc_cell *c = &p->nccl_calls.cells[i];
        const char *op = gm_api_name(m, c->op);
        struct comm_op *t = NULL;
        for (size_t k = 0; k < n && !t; k++)
            if (out[k].has_comm == c->has_comm && out[k].comm_id == c->comm_id &&
                strcmp(out[k].op, op) == 0)
                t = &out[k];
        if (!t) {
            ck_assert_uint_lt(n, cap);
            t = &out[n++];
            *t = (struct comm_op){.has_comm = c->has_comm, .comm_id = c->comm_id, .op = op};
        }
        t->calls = gm_add(t->calls, c->calls);
        t->bytes = gm_add(t->bytes, c->bytes); /* the view's sum saturates too */
        t->failed = gm_add(t->failed, c->failed);
        t->captured = gm_add(t->captured, c->captured);
        t->in_group = gm_add(t->in_group, c->in_group);
    }
    return n;
}

/* Checks every trace of dir; returns the number of (communicator, op) rows compared. */
static size_t check_dir(const char *dir)
{
    struct trace_set set;
    ck_assert_int_eq(trace_set_open(&set, dir), 0);
    struct gm_model m;
    ck_assert_int_eq(gm_load(&m, &set), 0);
    size_t compared = 0;
    for (size_t pi = 0; pi < m.nprocs; pi++) {
        const struct gm_process *p = &m.procs[pi];
        struct trace *t = (struct trace *)p->trace;
        struct comm_op model[64];
        size_t n = model_totals(&m, p, model, 64);
        sqlite3_stmt *stmt = trace_query(
            t,
            "SELECT comm_id, op, count(*), " TRACE_SUM_FUNCTION "(bytes), sum(result <> 0),"
            " sum(captured = 1), sum(in_group > 0) FROM collectives GROUP BY comm_id, op",
            "");
        ck_assert_msg(stmt != NULL, "%s", t->error);
        size_t rows = 0;
        while (trace_step(t, stmt) == 1) {
            rows++;
            bool has_comm = !col_is_null(stmt, 0);
            int64_t comm_id = has_comm ? col_int(stmt, 0, 0) : 0;
            const char *op = (const char *)sqlite3_column_text(stmt, 1);
            const struct comm_op *found = NULL;
            for (size_t k = 0; k < n && !found; k++)
                if (model[k].has_comm == has_comm && model[k].comm_id == comm_id &&
                    strcmp(model[k].op, op) == 0)
                    found = &model[k];
            ck_assert_msg(found, "%s: comm %" PRId64 " %s: in the view, not in the model", t->file,
                          comm_id, op);
            int64_t view[5];
            for (int c = 0; c < 5; c++)
                view[c] = col_int(stmt, 2 + c, 0);
            const int64_t got[5] = {found->calls, found->bytes, found->failed, found->captured,
                                    found->in_group};
            static const char *const what[5] = {"calls", "bytes", "failed", "captured", "in_group"};
            for (int c = 0; c < 5; c++)
                ck_assert_msg(got[c] == view[c],
                              "%s: comm %" PRId64 " %s: %s: model %" PRId64 ", view %" PRId64,
                              t->file, comm_id, op, what[c], got[c], view[c]);
        }
        sqlite3_finalize(stmt);
        ck_assert_uint_eq(rows, n);
        compared += rows;
    }
    gm_free(&m);
    trace_set_close(&set);
    return compared;
}

START_TEST(test_model_agrees_with_collectives_view_on_scenarios)
{
    static const unsigned variants[] = {
        NCCL_SCENARIO_DEFAULT,   NCCL_SCENARIO_SHORT_RANK,  NCCL_SCENARIO_NO_RANK_2,
        NCCL_SCENARIO_UNMATCHED, NCCL_SCENARIO_FAILED_CALL, NCCL_SCENARIO_FAILED_INIT,
    };
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        char *dir = scratch_dir();
        scenario_nccl(dir, variants[i]);
        ck_assert_uint_gt(check_dir(dir), 4);
        scratch_remove(dir);
    }
}
END_TEST

/*
 * Handle 0x10 initialised, used, destroyed and initialised again (its calls
 * go to the second communicator); handle 0x20's init failed (its calls are
 * on no communicator); handle 0x30 was never initialised; calls with NULL
 * size, result, group depth and capture status, and with odd values.
 */
START_TEST(test_model_agrees_with_collectives_view_on_odd_calls)
{
    char *dir = scratch_dir();
    char *path = fixture_trace_path(dir, "node1", 7, 7);
    struct fixture *f = fixture_create(path, FIXTURE_NULLABLE);
    struct fixture_process proc = {.pid = 7,
                                   .host = "node1",
                                   .start_wall_ns = 7,
                                   .start_mono_ns = 1000,
                                   .nccl_version = 22809};
    fixture_process(f, &proc);
    struct fixture_nccl_init init = {.comm = 0x10, .nranks = 2, .rank = 0, .hash = 1};
    fixture_nccl_init(f, &init);
    fixture_nccl_collective(f, CT_API_ncclAllReduce, 0x10, NCCL_FLOAT32, 4096, 1, 0);
    fixture_nccl_collective(f, CT_API_ncclAllReduce, 0x10, NCCL_FLOAT32, 4096, 0, 1);
    fixture_nccl_end(f, CT_API_ncclCommDestroy, 0x10);
    init.hash = 2;
    fixture_nccl_init(f, &init);
    fixture_nccl_collective(f, CT_API_ncclAllReduce, 0x10, NCCL_BFLOAT16, 1 << 20, 2, 1);
    fixture_nccl_p2p(f, CT_API_ncclSend, 0x10, 1, 64, 1);
    struct fixture_nccl_init failed = {
        .comm = 0x20, .nranks = 2, .rank = 1, .hash = 3, .result = 5};
    fixture_nccl_init(f, &failed);
    fixture_nccl_collective(f, CT_API_ncclBroadcast, 0x20, NCCL_INT8, 8, 0, 0);
    fixture_nccl_collective(f, CT_API_ncclAllGather, 0x30, NCCL_INT8, 8, 0, 0);
    struct fixture_nccl_call odd = {.api = CT_API_ncclAllReduce,
                                    .comm = 0x10,
                                    .datatype = 99,
                                    .peer = FIXTURE_NCCL_NONE,
                                    .bytes = -5,
                                    .group_depth = -3,
                                    .captured = 2,
                                    .dur_ns = -1000,
                                    .result = 3};
    fixture_nccl_call(f, &odd);
    int64_t nulls = fixture_nccl_call(f, &odd);
    fixture_exec_int(f,
                     "UPDATE events SET size = NULL, result = NULL, arg6 = NULL, arg7 = NULL,"
                     " arg2 = NULL WHERE seq = ?",
                     nulls);
    odd.bytes = INT64_MAX;
    odd.result = 0;
    fixture_nccl_call(f, &odd);
    fixture_nccl_call(f, &odd);
    fixture_close(f);

    ck_assert_uint_eq(check_dir(dir), 5);
    free(path);
    scratch_remove(dir);
}
END_TEST

Suite *collcalls_suite(void)
{
    Suite *s = suite_create("collcalls");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_model_agrees_with_collectives_view_on_scenarios);
    tcase_add_test(tc, test_model_agrees_with_collectives_view_on_odd_calls);
    suite_add_tcase(s, tc);
    return s;
}
