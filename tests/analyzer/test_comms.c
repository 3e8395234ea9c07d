/*
 * test_comms.c - the run model's communicators (gm_process.communicators,
 * built in the model's pass by model/comms.c) agree with the public
 * `communicators` view, every column the reports read, NULLs apart, and
 * `aborted` with the ncclCommAbort calls of the `calls` view; and the
 * copy summary gets (GM_LOAD_NCCL) is the same. On the four-rank NCCL
 * scenario and its variants (scenarios.h) and on a trace of reused
 * handles, failed and handle-less inits, splits, aborts and NULLs.
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

Suite *comms_suite(void); /* registered in test_main.c */

/* The view's rows as the reports used to read them (col_int's defaults),
 * with `aborted` as the old loader told it apart, in SQL. */
static const char *const view_sql =
    "SELECT comm_id, unique_id_hash, rank, nranks, device, parent_comm_id, t_init_ns,"
    " t_destroy_ns, init_result, api, comm, color, key, t_finalize_ns,"
    " (t_destroy_ns IS NOT NULL AND EXISTS (SELECT 1 FROM calls k"
    " WHERE k.api = 'ncclCommAbort' AND k.result = 0 AND coalesce(k.arg0, 0) = coalesce(c.comm, 0)"
    " AND coalesce(k.t_ns, 0) = c.t_destroy_ns AND k.seq > c.comm_id))"
    " FROM communicators c ORDER BY comm_id";

static void check_int(const char *file, int64_t comm_id, const char *what, int64_t model,
                      int64_t view)
{
    ck_assert_msg(model == view, "%s: comm %" PRId64 ": %s: model %" PRId64 ", view %" PRId64, file,
                  comm_id, what, model, view);
}

static void check_comm(const char *file, const struct nccl_comm *c, sqlite3_stmt *row)
{
    int64_t id = col_int(row, 0, -1);
    check_int(file, id, "comm_id", c->comm_id, id);
    const char *hash = (const char *)sqlite3_column_text(row, 1);
    ck_assert_msg(hash && strcmp(c->hash, hash) == 0, "%s: comm %" PRId64 ": hash %s, view %s",
                  file, id, c->hash, hash ? hash : "NULL");
    static const char *const what[] = {"rank",      "nranks",       "device",      "parent_comm_id",
                                       "t_init_ns", "t_destroy_ns", "init_result", "api",
                                       "comm",      "color",        "key",         "t_finalize_ns",
                                       "aborted"};
    /* -1: the struct has no flag, the reports read NULL as if_null. */
    const int has[] = {
        c->has_rank, c->has_nranks, -1,         c->has_parent, -1, c->destroyed, -1, -1,
        -1,          c->has_color,  c->has_key, c->finalized,  -1};
    const int64_t value[] = {c->rank,      c->nranks,       c->device,      c->parent_comm_id,
                             c->t_init_ns, c->t_destroy_ns, c->init_result, 0,
                             c->handle,    c->color,        c->key,         c->t_finalize_ns,
                             c->aborted};
    const int64_t if_null[] = {-1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k < 13; k++) {
        int col = 2 + k;
        if (k == 7) { /* api: text */
            const char *api = (const char *)sqlite3_column_text(row, col);
            ck_assert_msg((!api && !c->api) || (api && c->api && strcmp(api, c->api) == 0),
                          "%s: comm %" PRId64 ": api %s, view %s", file, id,
                          c->api ? c->api : "NULL", api ? api : "NULL");
            continue;
        }
        bool view_has = !col_is_null(row, col);
        ck_assert_msg(has[k] < 0 || (has[k] != 0) == view_has,
                      "%s: comm %" PRId64 ": %s: model %s, view %s", file, id, what[k],
                      has[k] > 0 ? "set" : "NULL", view_has ? "set" : "NULL");
        check_int(file, id, what[k], value[k], col_int(row, col, if_null[k]));
    }
}

/* Checks every trace of dir; returns the number of communicators compared. */
static size_t check_dir(const char *dir)
{
    struct trace_set set;
    ck_assert_int_eq(trace_set_open(&set, dir), 0);
    struct gm_model m;
    ck_assert_int_eq(gm_load_with(&m, &set, GM_LOAD_NCCL), 0);
    size_t compared = 0;
    for (size_t pi = 0; pi < m.nprocs; pi++) {
        const struct gm_process *p = &m.procs[pi];
        struct trace *t = (struct trace *)p->trace;
        const struct nccl_comms *cs = &p->communicators;
        ck_assert_ptr_null(cs->index);
        sqlite3_stmt *stmt = trace_query(t, view_sql, "");
        ck_assert_msg(stmt != NULL, "%s", t->error);
        size_t rows = 0;
        while (trace_step(t, stmt) == 1) {
            ck_assert_msg(rows < cs->ncomms, "%s: comm %" PRId64 ": in the view, not in the model",
                          t->file, col_int(stmt, 0, -1));
            check_comm(t->file, &cs->comms[rows], stmt);
            rows++;
        }
        sqlite3_finalize(stmt);
        ck_assert_uint_eq(rows, cs->ncomms);
        /* What summary reads: the same communicators. */
        ck_assert_ptr_nonnull(p->nccl);
        ck_assert(p->nccl->present);
        ck_assert_uint_eq(p->nccl->ncomms, cs->ncomms);
        for (size_t i = 0; i < cs->ncomms; i++) {
            const struct nccl_comm *a = &p->nccl->comms[i], *b = &cs->comms[i];
            ck_assert_int_eq(a->comm_id, b->comm_id);
            ck_assert_str_eq(a->hash, b->hash);
            ck_assert_int_eq(a->aborted, b->aborted);
            ck_assert_int_eq(a->t_destroy_ns, b->t_destroy_ns);
        }
        compared += rows;
    }
    gm_free(&m);
    trace_set_close(&set);
    return compared;
}

START_TEST(test_model_agrees_with_communicators_view_on_scenarios)
{
    static const unsigned variants[] = {
        NCCL_SCENARIO_DEFAULT,   NCCL_SCENARIO_SHORT_RANK,  NCCL_SCENARIO_NO_RANK_2,
        NCCL_SCENARIO_UNMATCHED, NCCL_SCENARIO_FAILED_CALL, NCCL_SCENARIO_FAILED_INIT,
    };
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        char *dir = scratch_dir();
        scenario_nccl(dir, variants[i]);
        ck_assert_uint_ge(check_dir(dir), 5);
        scratch_remove(dir);
    }
}
END_TEST

/* An event's columns set to NULL (FIXTURE_NULLABLE). */
static void set_null(struct fixture *f, const char *columns, int64_t seq)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "UPDATE events SET %s WHERE seq = ?", columns);
    fixture_exec_int(f, sql, seq);
}

/*
 * Handle 0x10 initialised, destroyed and initialised again, then finalized
 * and destroyed twice (the earlier t_ns counts); a failed init (0x20) and
 * its destroy; a "successful" init of handle 0 and one of a NULL handle
 * (neither a communicator) with a destroy of each; an init with a NULL
 * result, one of handle 0 with a NULL result (none), and one failed with NULL handle, hash, rank,
 * nranks and device; splits of a known parent, of an unknown one, with a NULL color, and with a
 * NULL parent; an aborted communicator, one destroyed before a later abort, one whose abort has a
 * NULL t_ns; destroys with a NULL result or t_ns; a negative hash.
 */
START_TEST(test_model_agrees_with_communicators_view_on_odd_inits)
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
    fixture_nccl_end(f, CT_API_ncclCommDestroy, 0x10);
    init.hash = 2;
    fixture_nccl_init(f, &init);
    fixture_nccl_end(f, CT_API_ncclCommFinalize, 0x10);
    fixture_nccl_end(f, CT_API_ncclCommDestroy, 0x10);
    int64_t earlier = fixture_nccl_end(f, CT_API_ncclCommDestroy, 0x10);
    fixture_exec_int(f, "UPDATE events SET t_ns = t_ns - 1000000 WHERE seq = ?", earlier);

    struct fixture_nccl_init failed = {.comm = 0x20, .nranks = 2, .hash = 3, .result = 5};
    fixture_nccl_init(f, &failed);
    fixture_nccl_end(f, CT_API_ncclCommDestroy, 0x20);
    struct fixture_nccl_init no_handle = {.comm = 0, .nranks = 2, .hash = 4};
    fixture_nccl_init(f, &no_handle);
    fixture_nccl_end(f, CT_API_ncclCommDestroy, 0);
    int64_t null_handle = fixture_nccl_init(f, &no_handle);
    set_null(f, "arg0 = NULL", null_handle);
    set_null(f, "arg0 = NULL", fixture_nccl_end(f, CT_API_ncclCommDestroy, 0));
    struct fixture_nccl_init null_result = {.comm = 0x40, .nranks = 2, .hash = 5};
    set_null(f, "result = NULL", fixture_nccl_init(f, &null_result));
    fixture_nccl_end(f, CT_API_ncclCommDestroy, 0x40);
    null_result.comm = 0; /* NOT (NULL AND TRUE) is NULL: no communicator */
    set_null(f, "result = NULL", fixture_nccl_init(f, &null_result));
    struct fixture_nccl_init bare = {.comm = 0x41, .result = 3};
    set_null(f, "arg0 = NULL, arg1 = NULL, arg2 = NULL, arg3 = NULL, device = NULL, t_ns = NULL",
             fixture_nccl_init(f, &bare));

    struct fixture_nccl_init split = {
        .comm = 0x50, .nranks = 1, .rank = 0, .hash = 6, .parent = 0x10, .color = 1, .key = 2};
    fixture_nccl_init(f, &split);
    split.comm = 0x51, split.parent = 0x99, split.hash = (uint64_t)-1;
    fixture_nccl_init(f, &split);
    split.comm = 0x52, split.parent = 0x50;
    set_null(f, "arg5 = NULL", fixture_nccl_init(f, &split));
    split.comm = 0x53;
    set_null(f, "arg4 = NULL", fixture_nccl_init(f, &split));

    init.comm = 0x60, init.hash = 7;
    fixture_nccl_init(f, &init);
    fixture_nccl_end(f, CT_API_ncclCommAbort, 0x60);
    init.comm = 0x70, init.hash = 8;
    fixture_nccl_init(f, &init);
    fixture_nccl_end(f, CT_API_ncclCommDestroy, 0x70);
    fixture_nccl_end(f, CT_API_ncclCommAbort, 0x70);
    init.comm = 0x80, init.hash = 9;
    fixture_nccl_init(f, &init);
    set_null(f, "t_ns = NULL", fixture_nccl_end(f, CT_API_ncclCommAbort, 0x80));
    init.comm = 0x90, init.hash = 10;
    fixture_nccl_init(f, &init);
    set_null(f, "result = NULL", fixture_nccl_end(f, CT_API_ncclCommDestroy, 0x90));
    set_null(f, "t_ns = NULL", fixture_nccl_end(f, CT_API_ncclCommFinalize, 0x90));
    fixture_nccl_collective(f, CT_API_ncclAllReduce, 0x10, NCCL_FLOAT32, 4096, 0, 0);
    fixture_close(f);

    ck_assert_uint_eq(check_dir(dir), 13);
    free(path);
    scratch_remove(dir);
}
END_TEST

Suite *comms_suite(void)
{
    Suite *s = suite_create("comms");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_model_agrees_with_communicators_view_on_scenarios);
    tcase_add_test(tc, test_model_agrees_with_communicators_view_on_odd_inits);
    suite_add_tcase(s, tc);
    return s;
}
