/*
 * test_runtime_trace.c - libcutrace.so in real processes on the fake GPU stack
 * and on the toolkit's real libcudart: what is recorded, and that the
 * program never notices.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

/* Compares the trace's calls, in seq order, with rt_sequence's expectation file. */
static void check_against_expectations(sqlite3 *db, const char *expect_path)
{
    FILE *f = fopen(expect_path, "r");
    ck_assert_ptr_nonnull(f);
    sqlite3_stmt *calls, *mem;
    ck_assert_int_eq(
        sqlite3_prepare_v2(db,
                           "SELECT api, result, size, ptr FROM calls WHERE NOT nested ORDER BY seq",
                           -1, &calls, NULL),
        SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT free_bytes, total_bytes FROM meminfo ORDER BY seq",
                                        -1, &mem, NULL),
                     SQLITE_OK);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char api[128];
        unsigned long long a1, a2, a3;
        if (sscanf(line, "meminfo %llu %llu", &a1, &a2) == 2) {
            ck_assert_int_eq(sqlite3_step(mem), SQLITE_ROW);
            ck_assert_uint_eq((unsigned long long)sqlite3_column_int64(mem, 0), a1);
            ck_assert_uint_eq((unsigned long long)sqlite3_column_int64(mem, 1), a2);
            continue;
        }
        int result;
        ck_assert_int_eq(sscanf(line, "%127s %d %llu %llx", api, &result, &a1, &a3), 4);
        ck_assert_msg(sqlite3_step(calls) == SQLITE_ROW, "trace ends before call %d (%s)", n, api);
        ck_assert_str_eq((const char *)sqlite3_column_text(calls, 0), api);
        ck_assert_int_eq(sqlite3_column_int(calls, 1), result);
        a2 = (unsigned long long)sqlite3_column_int64(calls, 2);
        ck_assert_msg(a2 == a1, "call %d (%s): size %llu, expected %llu", n, api, a2, a1);
        ck_assert_uint_eq((unsigned long long)sqlite3_column_int64(calls, 3), a3);
        n++;
    }
    ck_assert_msg(sqlite3_step(calls) == SQLITE_DONE, "trace has more calls than the program made");
    ck_assert_int_eq(sqlite3_step(mem), SQLITE_DONE);
    ck_assert_int_ge(n, 30);
    sqlite3_finalize(calls);
    sqlite3_finalize(mem);
    fclose(f);
}

START_TEST(test_sequence_is_recorded_exactly)
{
    struct world w;
    world_init(&w);
    char expect[4096];
    snprintf(expect, sizeof expect, "%s/expect.txt", w.root);
    const char *argv[] = {build_path("progs/rt_sequence"), expect, NULL};
    /* As torchrun and the servers' spawners tell a worker which rank it is. */
    w.extra_env[0] = "RANK=3";
    w.extra_env[1] = "LOCAL_RANK=3";
    w.extra_env[2] = "WORLD_SIZE=8";
    struct run r = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(r.status, 3);
    ck_assert_uint_eq(r.err_len, 0);

    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    struct stat st;
    ck_assert_int_eq(stat(files[0], &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    check_against_expectations(db, expect);

    /* Device: learned without cudaSetDevice, then from it. */
    ck_assert_int_eq(tsql_int(db, "SELECT device FROM calls WHERE NOT nested ORDER BY seq"), 0);
    ck_assert_int_eq(tsql_int(db, "SELECT device FROM calls WHERE NOT nested ORDER BY seq"
                                  " LIMIT 1 OFFSET 5"),
                     1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM devices"), 2);
    ck_assert_int_eq(tsql_int(db, "SELECT total_bytes FROM devices WHERE device = 0"), 96ll << 30);
    ck_assert_int_eq(strncmp(tsql_text(db, "SELECT uuid FROM devices WHERE device = 1"), "GPU-", 4),
                     0);
    char uuid0[64];
    snprintf(uuid0, sizeof uuid0, "%s", tsql_text(db, "SELECT uuid FROM devices WHERE device = 0"));
    ck_assert_str_ne(uuid0, tsql_text(db, "SELECT uuid FROM devices WHERE device = 1"));
    ck_assert_uint_gt(strlen(tsql_text(db, "SELECT pci_bus_id FROM devices WHERE device = 1")), 6);

    /* The OOM failure and the frees: allocation accounting in the views. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE result = 2 AND NOT nested"), 1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE free_seq IS NULL"), 1);
    ck_assert_str_eq(tsql_text(db, "SELECT free_api FROM allocations WHERE size = 4194304 "
                                   "AND device = 1"),
                     "cudaDeviceReset");
    ck_assert_str_eq(tsql_text(db, "SELECT kind FROM allocations WHERE api = 'cudaMallocManaged'"),
                     "managed");
    ck_assert_int_eq(tsql_int(db, "SELECT length(handle_hex) FROM ipc"), 128);

    /* Per-process facts. */
    ck_assert_int_eq(tsql_int(db, "SELECT cuda_runtime_version FROM process"), 12080);
    ck_assert_ptr_nonnull(strstr(tsql_text(db, "SELECT cmdline FROM process"), "rt_sequence"));
    ck_assert_int_gt(tsql_int(db, "SELECT start_wall_ns FROM process"),
                     1600000000ll * 1000000000ll);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM env WHERE name = 'CUTRACE_FAKE_GPUS'"), "2");
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM env WHERE name = 'RANK'"), "3");
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM env WHERE name = 'LOCAL_RANK'"), "3");
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM env WHERE name = 'WORLD_SIZE'"), "8");
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "exit");
    /* The runtime's own driver calls are there, nested in the calls that made them. */
    ck_assert_int_gt(tsql_int(db, "SELECT count(*) FROM calls WHERE nested"), 0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE nested AND layer != 'driver'"),
                     0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls c WHERE api = 'cuMemAlloc_v2'"
                                  " AND (SELECT p.api FROM calls p WHERE p.seq = c.parent_seq)"
                                  " NOT IN ('cudaMalloc', 'cudaMallocAsync', 'cudaMalloc3D',"
                                  " 'cudaMallocPitch', 'cudaMallocFromPoolAsync')"),
                     0);
    ck_assert_int_eq(tsql_int(db, "SELECT min(seq) FROM calls"), 1);
    ck_assert_int_eq(tsql_int(db, "SELECT max(seq) - count(*) FROM calls"), 0);
    sqlite3_close(db);
    free_list(files, 1);
    run_free(&r);
    world_free(&w);
}
END_TEST

START_TEST(test_program_output_and_exit_code_unchanged)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_sequence"), "/dev/null", NULL};
    struct run plain = run_prog(&w, false, argv, 30);
    struct run traced = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(plain.status, 3);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_uint_eq(traced.out_len, plain.out_len);
    ck_assert_int_eq(memcmp(traced.out, plain.out, plain.out_len), 0);
    ck_assert_str_eq(traced.err, plain.err);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

START_TEST(test_process_without_cuda_leaves_no_file)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/no_cuda"), NULL};
    struct run r = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "hello without CUDA\n");
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 0);
    ck_assert_int_ne(access(w.trace_dir, F_OK), 0);
    run_free(&r);
    world_free(&w);
}
END_TEST

START_TEST(test_two_processes_two_files)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_sequence"), "/dev/null", NULL};
    struct run a = run_prog(&w, true, argv, 30);
    struct run b = run_prog(&w, true, argv, 30);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 2);
    ck_assert_str_ne(files[0], files[1]);
    sqlite3 *d0 = tsql_open(files[0], SQLITE_OPEN_READONLY),
            *d1 = tsql_open(files[1], SQLITE_OPEN_READONLY);
    ck_assert_int_ne(tsql_int(d0, "SELECT pid FROM process"),
                     tsql_int(d1, "SELECT pid FROM process"));
    ck_assert_int_eq(tsql_int(d0, "SELECT count(*) FROM calls WHERE NOT nested"),
                     tsql_int(d1, "SELECT count(*) FROM calls WHERE NOT nested"));
    sqlite3_close(d0);
    sqlite3_close(d1);
    free_list(files, 2);
    run_free(&a);
    run_free(&b);
    world_free(&w);
}
END_TEST

START_TEST(test_forked_child_traces_into_its_own_file)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_fork"), NULL};
    struct run r = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "child ok\n");
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 2);
    sqlite3 *d0 = tsql_open(files[0], SQLITE_OPEN_READONLY),
            *d1 = tsql_open(files[1], SQLITE_OPEN_READONLY);
    sqlite3 *parent = tsql_int(d0, "SELECT count(*) FROM calls WHERE NOT nested") == 2 ? d0 : d1;
    sqlite3 *child = parent == d0 ? d1 : d0;
    ck_assert_int_eq(tsql_int(parent, "SELECT count(*) FROM calls WHERE NOT nested"), 2);
    ck_assert_int_eq(tsql_int(child, "SELECT count(*) FROM calls WHERE NOT nested"), 3);
    ck_assert_int_eq(tsql_int(child, "SELECT ppid FROM process"),
                     tsql_int(parent, "SELECT pid FROM process"));
    ck_assert_int_eq(tsql_int(child, "SELECT min(seq) FROM calls"), 1);
    ck_assert_str_eq(tsql_text(child, "SELECT group_concat(api, ',') FROM (SELECT api FROM calls "
                                      "WHERE NOT nested ORDER BY seq)"),
                     "cudaMalloc,cudaMemGetInfo,cudaFree");
    ck_assert_str_eq(tsql_text(parent, "SELECT group_concat(api, ',') FROM (SELECT api FROM calls "
                                       "WHERE NOT nested ORDER BY seq)"),
                     "cudaMalloc,cudaFree");
    sqlite3_close(d0);
    sqlite3_close(d1);
    free_list(files, 2);
    run_free(&r);
    world_free(&w);
}
END_TEST

START_TEST(test_ipc_handle_joins_exporter_and_importer)
{
    struct world w;
    world_init(&w);
    char handle_file[4096];
    snprintf(handle_file, sizeof handle_file, "%s/handle.bin", w.root);
    const char *exp[] = {build_path("progs/rt_ipc"), "export", handle_file, NULL};
    const char *imp[] = {build_path("progs/rt_ipc"), "import", handle_file, NULL};
    pid_t exporter = spawn_prog(&w, true, exp);
    struct run r = run_prog(&w, true, imp, 30);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(wait_prog(exporter, 30), 0);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 2);
    sqlite3 *d0 = tsql_open(files[0], SQLITE_OPEN_READONLY),
            *d1 = tsql_open(files[1], SQLITE_OPEN_READONLY);
    char h0[200], h1[200];
    snprintf(h0, sizeof h0, "%s", tsql_text(d0, "SELECT handle_hex FROM ipc WHERE result = 0"));
    snprintf(h1, sizeof h1, "%s", tsql_text(d1, "SELECT handle_hex FROM ipc WHERE result = 0"));
    ck_assert_uint_eq(strlen(h0), 128);
    ck_assert_str_eq(h0, h1);
    sqlite3 *importer =
        tsql_int(d0, "SELECT count(*) FROM ipc WHERE api = 'cudaIpcOpenMemHandle'") ? d0 : d1;
    ck_assert_str_eq(tsql_text(importer, "SELECT kind FROM allocations"), "ipc");
    ck_assert_str_eq(tsql_text(importer, "SELECT free_api FROM allocations"),
                     "cudaIpcCloseMemHandle");
    ck_assert_int_eq(tsql_int(importer, "SELECT device FROM ipc"), 1);
    sqlite3_close(d0);
    sqlite3_close(d1);
    free_list(files, 2);
    run_free(&r);
    world_free(&w);
}
END_TEST

static void check_exit_mode(const char *mode, const char *end_state, int calls)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_exit"), mode, "25", NULL};
    struct run r = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_eq(r.err_len, 0);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'cudaMalloc'"), calls);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), end_state);
    sqlite3_close(db);
    char ring[4200];
    snprintf(ring, sizeof ring, "%.*s.ring", (int)(strlen(files[0]) - 3), files[0]);
    ck_assert_msg(access(ring, F_OK) != 0, "%s left behind", ring);
    free_list(files, 1);
    run_free(&r);
    world_free(&w);
}

START_TEST(test_every_way_out_commits)
{
    check_exit_mode("return", "exit", 25);
    check_exit_mode("exit", "exit", 25);
    check_exit_mode("_exit", "_exit", 25);
    check_exit_mode("_Exit", "_exit", 25);
    check_exit_mode("exec", "exec", 25);
    check_exit_mode("execl", "exec", 25);
    check_exit_mode("exec-fail", "exit", 26);
}
END_TEST

START_TEST(test_fork_while_threads_are_in_calls)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_forkstress"), "6", "60", NULL};
    struct run r = run_prog(&w, true, argv, 120);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "forks failed: 0\n");
    /* A child's exit waits at most 3 s for its writer; on a loaded machine
     * the rest stays in its ring, which every report folds in first. */
    const char *recover[] = {build_path("cutrace"), "recover", w.trace_dir, NULL};
    struct run rr = run_prog(&w, false, recover, 60);
    ck_assert_int_eq(rr.status, 0);
    run_free(&rr);
    char **files;
    size_t n = list_traces(&w, &files);
    ck_assert_uint_eq(n, 61);
    int children = 0;
    for (size_t i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        if (strcmp(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "_exit") == 0) {
            children++;
            ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested"), 1);
        } else {
            ck_assert_int_gt(tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested"), 1);
        }
        sqlite3_close(db);
    }
    ck_assert_int_eq(children, 60);
    free_list(files, n);
    run_free(&r);
    world_free(&w);
}
END_TEST

START_TEST(test_unwritable_trace_dir_warns_once_and_changes_nothing)
{
    struct world w;
    world_init(&w);
    char blocker[4096];
    snprintf(blocker, sizeof blocker, "%s/not-a-dir", w.root);
    FILE *f = fopen(blocker, "w");
    fclose(f);
    free(w.trace_dir);
    ck_assert_int_ge(asprintf(&w.trace_dir, "%s/sub", blocker), 0);
    const char *argv[] = {build_path("progs/rt_sequence"), "/dev/null", NULL};
    struct run plain = run_prog(&w, false, argv, 30);
    struct run traced = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_uint_eq(count_lines(traced.err), 1);
    ck_assert_int_eq(strncmp(traced.err, "cutrace: ", 9), 0);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

START_TEST(test_default_dir_is_shared_by_children_in_other_directories)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "CUTRACE_DIR=";
    char script[8192];
    snprintf(script, sizeof script,
             "%s /dev/null >/dev/null; cd / && %s /dev/null >/dev/null; exit 0",
             build_path("progs/rt_sequence"), build_path("progs/rt_sequence"));
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct run r = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(r.status, 0);
    free(w.trace_dir);
    ck_assert_int_ge(asprintf(&w.trace_dir, "%s/cutrace-trace", w.root), 0);
    char **files;
    /* Two files: the shell itself never touched CUDA. */
    ck_assert_uint_eq(list_traces(&w, &files), 2);
    free_list(files, 2);
    run_free(&r);
    world_free(&w);
}
END_TEST

START_TEST(test_real_toolkit_without_driver_returns_35_either_way)
{
    struct world w;
    world_init(&w);
    /* No fake driver on the library path: the real runtime finds no libcuda. */
    w.extra_env[0] = "LD_LIBRARY_PATH=";
    const char *argv[] = {build_path("progs/real_toolkit"), NULL};
    struct run plain = run_prog(&w, false, argv, 60);
    struct run traced = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(plain.status, 7);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_ptr_nonnull(strstr(plain.out, "cudaMalloc 35\ncudaMemGetInfo 35\n"));
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    /* NCCL answers without a driver, except to ncclCommInitRank (ncclUnhandledCudaError). */
    ck_assert_ptr_nonnull(
        strstr(plain.out, "nccl 0 22809\nncclGetUniqueId 0\nncclCommInitRank 1\n"));
    ck_assert_str_eq(tsql_text(db, "SELECT group_concat(api || '=' || result, ',') FROM "
                                   "(SELECT api, result FROM calls ORDER BY seq)"),
                     "ncclGetVersion=0,ncclGetUniqueId=0,ncclCommInitRank=1,cudaMalloc=35,"
                     "cudaMemGetInfo=35");
    ck_assert_int_eq(tsql_int(db, "SELECT arg0 FROM calls WHERE api = 'ncclGetVersion'"), 22809);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM communicators WHERE init_result = 1"), 1);
    ck_assert_str_eq(tsql_text(db, "SELECT unique_id_hash FROM communicators"),
                     tsql_text(db, "SELECT printf('%016x', arg3) FROM calls"
                                   " WHERE api = 'ncclGetUniqueId'"));
    ck_assert_int_eq(tsql_int(db, "SELECT nccl_version FROM process"), 22809);
    ck_assert_int_eq(tsql_int(db, "SELECT size FROM calls WHERE api = 'cudaMalloc'"), 1 << 20);
    ck_assert_int_eq(tsql_int(db, "SELECT device FROM calls WHERE api = 'cudaMalloc'"), -1);
    ck_assert_int_ge(tsql_int(db, "SELECT cuda_runtime_version FROM process"), 13000);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM devices"), 0);
    sqlite3_close(db);
    free_list(files, 1);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* Every ```sql example in docs/schema.md runs on a real trace (the doc cannot rot). */
START_TEST(test_schema_doc_examples_run_on_a_real_trace)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_sequence"), "/dev/null", NULL};
    struct run r = run_prog(&w, true, argv, 30);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    char attach[4200];
    snprintf(attach, sizeof attach, "ATTACH '%s' AS e", files[0]);
    ck_assert_int_eq(sqlite3_exec(db, attach, NULL, NULL, NULL), SQLITE_OK);

    char doc[4096];
    snprintf(doc, sizeof doc, "%s/docs/schema.md", getenv("CUTRACE_TEST_SRC"));
    FILE *f = fopen(doc, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024], block[8192] = "";
    bool in_sql = false;
    int examples = 0;
    while (fgets(line, sizeof line, f)) {
        if (!in_sql && strncmp(line, "```sql", 6) == 0) {
            in_sql = true;
            block[0] = '\0';
        } else if (in_sql && strncmp(line, "```", 3) == 0) {
            in_sql = false;
            char *err = NULL;
            int rc = sqlite3_exec(db, block, NULL, NULL, &err);
            ck_assert_msg(rc == SQLITE_OK, "docs/schema.md example fails: %s\n%s", err, block);
            examples++;
        } else if (in_sql) {
            strncat(block, line, sizeof block - strlen(block) - 1);
        }
    }
    fclose(f);
    ck_assert_int_ge(examples, 7);
    sqlite3_close(db);
    free_list(files, 1);
    run_free(&r);
    world_free(&w);
}
END_TEST

Suite *runtime_suite(void)
{
    Suite *s = suite_create("runtime");
    TCase *tc = tcase_create("runtime");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_sequence_is_recorded_exactly);
    tcase_add_test(tc, test_program_output_and_exit_code_unchanged);
    tcase_add_test(tc, test_process_without_cuda_leaves_no_file);
    tcase_add_test(tc, test_two_processes_two_files);
    tcase_add_test(tc, test_forked_child_traces_into_its_own_file);
    tcase_add_test(tc, test_ipc_handle_joins_exporter_and_importer);
    tcase_add_test(tc, test_every_way_out_commits);
    tcase_add_test(tc, test_fork_while_threads_are_in_calls);
    tcase_add_test(tc, test_unwritable_trace_dir_warns_once_and_changes_nothing);
    tcase_add_test(tc, test_default_dir_is_shared_by_children_in_other_directories);
    tcase_add_test(tc, test_real_toolkit_without_driver_returns_35_either_way);
    tcase_add_test(tc, test_schema_doc_examples_run_on_a_real_trace);
    suite_add_tcase(s, tc);
    return s;
}
