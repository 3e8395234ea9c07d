/*
 * test_roads.c - every road into CUDA and NCCL is traced: ctypes (dlsym on a
 * library handle), cuGetProcAddress from a static runtime,
 * cudaGetDriverEntryPointByVersion (expandable segments), the runtime's own
 * driver calls (nested, counted once), other preload shims chained before
 * and after cutrace, and the toolkit's real runtime finding a driver.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

static int64_t top_level(sqlite3 *db, const char *api)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM calls WHERE NOT nested AND api = '%s' AND result = 0", api);
    return tsql_int(db, sql);
}

/* SGLang's CudaRTLibrary and pynccl: everything through ctypes. */
START_TEST(test_ctypes_callers_are_fully_recorded)
{
    struct world w;
    world_init(&w);
    char script[4096];
    snprintf(script, sizeof script, "%s/tests/progs/ctypes_roads.py", getenv("CUTRACE_TEST_SRC"));
    const char *argv[] = {"/usr/bin/env", "python3", script, w.root, NULL};
    struct run r = run_prog(&w, true, argv, 120);
    ck_assert_msg(r.status == 0, "%s", r.err);
    char **files;
    size_t n = list_traces(&w, &files);
    ck_assert_uint_eq(n, 2); /* the launcher never touches CUDA */
    char exported[2][160], opened[2][160];
    for (int rank = 0; rank < 2; rank++) {
        sqlite3 *db = tsql_open(files[rank], SQLITE_OPEN_READONLY);
        int rk = (int)tsql_int(db, "SELECT rank FROM communicators");
        ck_assert(rk == 0 || rk == 1);
        const char *apis[] = {
            "cudaSetDevice",         "cudaMalloc", "cudaIpcGetMemHandle", "cudaIpcOpenMemHandle",
            "cudaIpcCloseMemHandle", "cudaFree",   "ncclCommInitRank",    "ncclAllReduce",
            "ncclCommDestroy"};
        for (size_t i = 0; i < sizeof apis / sizeof *apis; i++)
            ck_assert_msg(top_level(db, apis[i]) == 1, "rank %d: %s", rk, apis[i]);
        ck_assert_int_eq(top_level(db, "ncclGetUniqueId"), rk == 0);
        ck_assert_int_eq(tsql_int(db, "SELECT size FROM allocations WHERE api = 'cudaMalloc'"),
                         8 << 20);
        ck_assert_int_eq(tsql_int(db, "SELECT device FROM calls WHERE api = 'cudaMalloc'"), rk);
        snprintf(exported[rk], sizeof exported[rk], "%s",
                 tsql_text(db, "SELECT handle_hex FROM ipc WHERE api = 'cudaIpcGetMemHandle'"));
        snprintf(opened[rk], sizeof opened[rk], "%s",
                 tsql_text(db, "SELECT handle_hex FROM ipc WHERE api = 'cudaIpcOpenMemHandle'"));
        ck_assert_str_eq(tsql_text(db, "SELECT free_api FROM allocations WHERE kind = 'ipc'"),
                         "cudaIpcCloseMemHandle");
        /* NCCL's own buffers: through the driver, issued by libnccl, one peer's worth. */
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE kind = 'vmm'"
                                      " AND module LIKE '%libnccl.so.2' AND size = 10485760"),
                         1);
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE kind = 'vmm_host'"
                                      " AND module LIKE '%libnccl.so.2'"),
                         1);
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE layer = 'driver'"
                                      " AND api = 'cuMemCreate' AND parent_seq = (SELECT seq"
                                      " FROM calls WHERE api = 'ncclCommInitRank')"),
                         2);
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM collectives"), 1);
        sqlite3_close(db);
    }
    /* Each rank opened the handle the other exported. */
    ck_assert_uint_eq(strlen(exported[0]), 128);
    ck_assert_str_eq(opened[0], exported[1]);
    ck_assert_str_eq(opened[1], exported[0]);
    free_list(files, n);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* A static-runtime user (cuGetProcAddress) and expandable segments (cudaGetDriverEntryPoint). */
START_TEST(test_static_runtime_and_expandable_segments)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/roads_static"), NULL};
    struct run plain = run_prog(&w, false, argv, 60);
    struct run traced = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_int_eq(traced.status, 0);
    ck_assert_str_eq(traced.out, plain.out);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    /* The static user: driver calls, top level, from its own module. */
    const char *su = "module LIKE '%libfake_static_user.so'";
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM allocations WHERE %s AND ((api = 'cuMemAlloc_v2' AND kind ="
             " 'device' AND size = 3145728) OR (api = 'cuMemCreate' AND kind = 'vmm' AND size ="
             " 4194304) OR (api = 'cuMemCreate' AND kind = 'vmm_host') OR (api ="
             " 'cuMemAddressReserve' AND kind = 'reserve')) AND free_seq IS NOT NULL",
             su);
    ck_assert_int_eq(tsql_int(db, sql), 4);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE layer = 'driver' AND nested"
                                  " AND module LIKE '%libfake_static_user.so'"),
                     0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM meminfo"), 1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM driver_lookups WHERE wrapped"
                                  " AND symbol = 'cuMemCreate'"),
                     2);
    /* Expandable segments: two 20 MiB chunks mapped into one reservation, one released early. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE api = 'cuMemCreate'"
                                  " AND size = 20971520 AND module LIKE '%libfake_expandable.so'"),
                     2);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'cuMemMap'"
                                  " AND module LIKE '%libfake_expandable.so'"),
                     2);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM driver_lookups"
                                  " WHERE api = 'cudaGetDriverEntryPointByVersion'"),
                     8);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE free_seq IS NULL"), 0);
    sqlite3_close(db);
    free_list(files, 1);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* One call, one record: the runtime's own driver calls are nested and not counted again. */
START_TEST(test_runtime_malloc_counts_once)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_exit"), "return", "7", NULL};
    struct run r = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(r.status, 0);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls c JOIN calls p ON p.seq ="
                                  " c.parent_seq WHERE c.api = 'cuMemAlloc_v2'"
                                  " AND p.api = 'cudaMalloc' AND c.module LIKE '%libcudart.so.12'"),
                     7);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations"), 7);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE api = 'cudaMalloc'"), 7);
    sqlite3_close(db);
    free_list(files, 1);
    run_free(&r);
    world_free(&w);
}
END_TEST

static int shim_count(struct world *w)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/shim-count", w->root);
    FILE *f = fopen(path, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        fclose(f);
    }
    remove(path);
    return n;
}

/* Runs rt_exit (5 cudaMalloc) with LD_PRELOAD = `preload` verbatim. */
static void run_with_preload(struct world *w, const char *preload, int *shim, int *traced)
{
    char env_preload[8400], env_count[4200];
    snprintf(env_preload, sizeof env_preload, "LD_PRELOAD=%s", preload);
    snprintf(env_count, sizeof env_count, "SHIM_COUNT_FILE=%s/shim-count", w->root);
    w->extra_env[0] = env_preload;
    w->extra_env[1] = env_count;
    const char *argv[] = {build_path("progs/rt_exit"), "return", "5", NULL};
    struct run r = run_prog(w, false, argv, 30);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_eq(r.err_len, 0);
    *shim = shim_count(w);
    char **files;
    size_t n = list_traces(w, &files);
    *traced = -1;
    if (n == 1) {
        sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
        *traced = (int)top_level(db, "cudaMalloc");
        sqlite3_close(db);
        remove(files[0]);
    }
    free_list(files, n);
    run_free(&r);
}

/* torch_memory_saver and the like: another shim finding cudaMalloc with RTLD_NEXT. */
START_TEST(test_other_preload_shims_keep_working_in_either_order)
{
    struct world w;
    world_init(&w);
    char shim[4096], cutrace[4096], both[8400];
    snprintf(shim, sizeof shim, "%s", build_path("progs/libshim_count.so"));
    snprintf(cutrace, sizeof cutrace, "%s", build_path("libcutrace.so"));
    int shim_calls, traced_calls;

    run_with_preload(&w, shim, &shim_calls, &traced_calls);
    ck_assert_int_eq(shim_calls, 5);
    ck_assert_int_eq(traced_calls, -1);

    snprintf(both, sizeof both, "%s:%s", shim, cutrace);
    run_with_preload(&w, both, &shim_calls, &traced_calls);
    ck_assert_int_eq(shim_calls, 5);
    ck_assert_int_eq(traced_calls, 5);

    snprintf(both, sizeof both, "%s:%s", cutrace, shim);
    run_with_preload(&w, both, &shim_calls, &traced_calls);
    ck_assert_int_eq(shim_calls, 5);
    ck_assert_int_eq(traced_calls, 5);
    world_free(&w);
}
END_TEST

/* The toolkit's libcudart.so.13 finds a driver (the fake) with dlsym, then cuGetProcAddress. */
START_TEST(test_real_runtime_reaches_its_driver_through_the_hooks)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "CUTRACE_FAKE_GPUS=1";
    const char *argv[] = {build_path("progs/real_toolkit"), NULL};
    struct run plain = run_prog(&w, false, argv, 60);
    struct run traced = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_str_eq(traced.err, plain.err);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    /* It asked the hooked cuGetProcAddress_v2 for cuGetProcAddress itself, and got the hook. */
    ck_assert_int_ge(tsql_int(db, "SELECT count(*) FROM driver_lookups"
                                  " WHERE symbol = 'cuGetProcAddress' AND wrapped"),
                     1);
    ck_assert_int_gt(tsql_int(db, "SELECT count(*) FROM driver_lookups WHERE wrapped"), 10);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'cudaMalloc'"
                                  " AND module LIKE '%real_toolkit'"),
                     1);
    sqlite3_close(db);
    free_list(files, 1);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* Road 1 for the driver: a program that links libcuda and calls it by name. */
START_TEST(test_direct_driver_calls_and_ptsz_lookup)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/drv_direct"), NULL};
    struct run plain = run_prog(&w, false, argv, 30);
    struct run traced = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_int_eq(traced.status, 0);
    ck_assert_str_eq(plain.out, "missing symbol: NULL\n");
    ck_assert_str_eq(traced.out, plain.out);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_str_eq(tsql_text(db, "SELECT group_concat(api, ',') FROM (SELECT api FROM calls"
                                   " WHERE NOT nested ORDER BY seq)"),
                     "cuDevicePrimaryCtxRetain,cuMemAlloc_v2,cuMemGetInfo_v2,cuGetProcAddress_v2,"
                     "cuMemAllocAsync_ptsz,cuMemFreeAsync,cuMemFree_v2,"
                     "cuDevicePrimaryCtxRelease_v2");
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE layer = 'driver'"
                                  " AND device = 0 AND module LIKE '%drv_direct'"),
                     8);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE free_seq IS NULL"), 0);
    ck_assert_int_eq(
        tsql_int(db, "SELECT size FROM allocations WHERE api = 'cuMemAllocAsync_ptsz'"), 2 << 20);
    ck_assert_int_eq(tsql_int(db, "SELECT wrapped FROM driver_lookups"), 1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM meminfo"), 1);
    sqlite3_close(db);
    free_list(files, 1);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

Suite *roads_suite(void)
{
    Suite *s = suite_create("roads");
    TCase *tc = tcase_create("roads");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_ctypes_callers_are_fully_recorded);
    tcase_add_test(tc, test_static_runtime_and_expandable_segments);
    tcase_add_test(tc, test_runtime_malloc_counts_once);
    tcase_add_test(tc, test_other_preload_shims_keep_working_in_either_order);
    tcase_add_test(tc, test_real_runtime_reaches_its_driver_through_the_hooks);
    tcase_add_test(tc, test_direct_driver_calls_and_ptsz_lookup);
    suite_add_tcase(s, tc);
    return s;
}
