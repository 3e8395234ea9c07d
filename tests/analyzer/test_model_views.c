/*
 * test_model_views.c - the run model (model/gpumodel.h) and the public SQL
 * views agree on what `cutrace summary` reports: calls per device and API
 * (`calls`), bytes allocated and freed and live at the end by kind
 * (`allocations`), and each device's last cudaMemGetInfo with the GPU
 * memory live when it took effect (`meminfo`, `allocations` by effect
 * order). summary reads only the model; the views are the users' contract.
 * Run on the canned scenarios (scenarios.h), loaded in this process.
 */
#include "analysis/summary.h"
#include "model/gpumodel.h"
#include "model/traceset.h"
#include "scenarios.h"
#include "test_support.h"

#include <dirent.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *stmt;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    return stmt;
}

static const struct api_stats *find_api(const struct device_report *d, const char *api,
                                        const char *layer)
{
    for (size_t i = 0; i < d->napis; i++)
        if (strcmp(d->apis[i].api, api) == 0 && strcmp(d->apis[i].layer, layer) == 0)
            return &d->apis[i];
    return NULL;
}

static const struct device_report *find_device(const struct process_report *p, int64_t ordinal)
{
    for (size_t i = 0; i < p->ndevices; i++)
        if (p->devices[i].ordinal == ordinal)
            return &p->devices[i];
    ck_abort_msg("device %" PRId64 " not in the report", ordinal);
    return NULL;
}

/* calls: every group of the view is a row of the report, and the report
 * has no more calls than the view. */
static int64_t check_calls(sqlite3 *db, const struct process_report *p)
{
    sqlite3_stmt *q =
        prepare(db, "SELECT coalesce(device, -1), api, layer, count(*),"
                    " sum(result <> 0), sum(nested <> 0), sum(coalesce(nested, 0) = 0)"
                    " FROM calls GROUP BY 1, 2, 3");
    int64_t total = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        const struct device_report *d = find_device(p, sqlite3_column_int64(q, 0));
        const char *api = (const char *)sqlite3_column_text(q, 1);
        const struct api_stats *a = find_api(d, api, (const char *)sqlite3_column_text(q, 2));
        ck_assert_msg(a, "%s on device %" PRId64 " missing", api, d->ordinal);
        ck_assert_int_eq(a->calls, sqlite3_column_int64(q, 3));
        ck_assert_int_eq(a->failed, sqlite3_column_int64(q, 4));
        ck_assert_int_eq(a->nested, sqlite3_column_int64(q, 5));
        ck_assert_int_eq(a->top_calls, sqlite3_column_int64(q, 6));
        total += a->calls;
    }
    sqlite3_finalize(q);
    ck_assert_int_eq(total, p->calls);
    return total;
}

static enum mem_kind kind_of(const char *text)
{
    for (int k = 0; k < KIND_COUNT; k++)
        if (text && strcmp(text, summary_kind_key((enum mem_kind)k)) == 0)
            return (enum mem_kind)k;
    return KIND_OTHER;
}

/* allocations: counts and bytes by device and kind, and what is live at the end. */
static int64_t check_allocations(sqlite3 *db, const struct process_report *p)
{
    sqlite3_stmt *q = prepare(
        db, "SELECT coalesce(device, -1), kind, count(*), total(size), count(free_seq),"
            " total(CASE WHEN free_seq IS NOT NULL THEN size END),"
            " total(CASE WHEN free_seq IS NULL THEN size END) FROM allocations GROUP BY 1, 2");
    int64_t allocs = 0;
    int64_t seen[KIND_COUNT] = {0};
    while (sqlite3_step(q) == SQLITE_ROW) {
        const struct device_report *d = find_device(p, sqlite3_column_int64(q, 0));
        enum mem_kind k = kind_of((const char *)sqlite3_column_text(q, 1));
        const struct mem_stats *m = &d->mem[k];
        ck_assert_int_eq(m->allocs, sqlite3_column_int64(q, 2));
        ck_assert_int_eq(m->allocated_bytes, (int64_t)sqlite3_column_double(q, 3));
        ck_assert_int_eq(m->frees, sqlite3_column_int64(q, 4));
        ck_assert_int_eq(m->freed_bytes, (int64_t)sqlite3_column_double(q, 5));
        ck_assert_int_eq(m->live_bytes, (int64_t)sqlite3_column_double(q, 6));
        allocs += m->allocs;
        seen[k] += m->allocs;
    }
    sqlite3_finalize(q);
    int64_t reported = 0;
    for (size_t i = 0; i < p->ndevices; i++)
        for (int k = 0; k < KIND_COUNT; k++)
            reported += p->devices[i].mem[k].allocs;
    ck_assert_int_eq(reported, allocs);
    return allocs;
}

/* meminfo: each device's last one, and the GPU memory live when it took effect. */
static int64_t check_meminfo(sqlite3 *db, const struct process_report *p)
{
    sqlite3_stmt *q = prepare(db, "SELECT coalesce(device, -1), max(seq), free_bytes, total_bytes"
                                  " FROM meminfo GROUP BY 1");
    sqlite3_stmt *live = prepare(
        db, "SELECT total(size) FROM allocations, (SELECT effect_order AS at FROM calls"
            " WHERE seq = ?1) WHERE coalesce(device, -1) = ?2 AND kind IN ('device', 'managed',"
            " 'vmm') AND effect_order < at AND (free_effect_order IS NULL"
            " OR free_effect_order > at)");
    int64_t n = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        const struct device_report *d = find_device(p, sqlite3_column_int64(q, 0));
        ck_assert(d->has_meminfo);
        ck_assert_int_eq(d->meminfo_seq, sqlite3_column_int64(q, 1));
        ck_assert_int_eq(d->meminfo_free, sqlite3_column_int64(q, 2));
        ck_assert_int_eq(d->meminfo_total, sqlite3_column_int64(q, 3));
        sqlite3_bind_int64(live, 1, d->meminfo_seq);
        sqlite3_bind_int64(live, 2, d->ordinal);
        ck_assert_int_eq(sqlite3_step(live), SQLITE_ROW);
        ck_assert_int_eq(d->own_probe.live_bytes, (int64_t)sqlite3_column_double(live, 0));
        sqlite3_reset(live);
        n++;
    }
    sqlite3_finalize(q);
    sqlite3_finalize(live);
    size_t with = 0;
    for (size_t i = 0; i < p->ndevices; i++)
        with += p->devices[i].has_meminfo;
    ck_assert_int_eq((int64_t)with, n);
    return n;
}

struct seen {
    int64_t calls, allocs, meminfos;
};

/* Loads the directory as summary does and checks every process against its file. */
static struct seen check_directory(const char *dir)
{
    struct trace_set set;
    ck_assert_int_eq(trace_set_open(&set, dir), 0);
    struct gm_model m;
    ck_assert_int_eq(gm_load_with(&m, &set, GM_LOAD_NCCL), 0);
    struct summary_report r;
    summary_build(&r, &m, dir);
    struct seen seen = {0};
    for (size_t i = 0; i < r.nprocesses; i++) {
        sqlite3 *db;
        ck_assert_int_eq(
            sqlite3_open_v2(r.processes[i].trace->path, &db, SQLITE_OPEN_READONLY, NULL),
            SQLITE_OK);
        seen.calls += check_calls(db, &r.processes[i]);
        seen.allocs += check_allocations(db, &r.processes[i]);
        seen.meminfos += check_meminfo(db, &r.processes[i]);
        sqlite3_close(db);
    }
    summary_free(&r);
    gm_free(&m);
    trace_set_close(&set);
    return seen;
}

START_TEST(test_views_agree_normal)
{
    char *dir = scratch_dir();
    free(scenario_normal(dir));
    struct seen s = check_directory(dir);
    ck_assert_int_eq(s.calls, 13);
    ck_assert_int_gt(s.allocs, 4);
    ck_assert_int_gt(s.meminfos, 0);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_views_agree_reuse_crossing_driver)
{
    char *(*make[])(const char *) = {scenario_pointer_reuse, scenario_crossing, scenario_driver};
    for (size_t i = 0; i < sizeof(make) / sizeof(make[0]); i++) {
        char *dir = scratch_dir();
        free(make[i](dir));
        struct seen s = check_directory(dir);
        ck_assert_int_gt(s.calls, 0);
        ck_assert_int_gt(s.allocs, 0);
        scratch_remove(dir);
    }
}
END_TEST

START_TEST(test_views_agree_shared_gpu_and_nccl)
{
    char *dir = scratch_dir();
    free(scenario_shared_gpu_first(dir, 1));
    free(scenario_shared_gpu_second(dir));
    struct seen s = check_directory(dir);
    ck_assert_int_gt(s.meminfos, 1);
    scratch_remove(dir);
    dir = scratch_dir();
    scenario_nccl(dir, NCCL_SCENARIO_DEFAULT);
    s = check_directory(dir);
    ck_assert_int_gt(s.calls, 0);
    scratch_remove(dir);
}
END_TEST

Suite *model_views_suite(void); /* registered in test_main.c */
Suite *model_views_suite(void)
{
    Suite *s = suite_create("model_views");
    TCase *tc = tcase_create("agree");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_views_agree_normal);
    tcase_add_test(tc, test_views_agree_reuse_crossing_driver);
    tcase_add_test(tc, test_views_agree_shared_gpu_and_nccl);
    suite_add_tcase(s, tc);
    return s;
}
