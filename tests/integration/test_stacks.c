/*
 * test_stacks.c - call stacks (docs/stacks.md) on real processes: native
 * frames named offline, a dlopen'ed library included; Python frames (file,
 * line, function) of calls made with the GIL held; `cutrace sites` and its
 * folded stacks; the configuration variables; stacks kept by a killed
 * process's ring; `cutrace budget` naming the Python functions of its
 * measurements; and no deadlock or crash under signals and forks.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static sqlite3 *only_trace(struct world *w)
{
    char **files;
    ck_assert_uint_eq(list_traces(w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    free_list(files, 1);
    return db;
}

/* The path of the one trace of a single-process run (static buffer). */
static const char *only_trace_path(struct world *w)
{
    static char path[4096];
    char **files;
    ck_assert_uint_eq(list_traces(w, &files), 1);
    snprintf(path, sizeof path, "%s", files[0]);
    free_list(files, 1);
    return path;
}

/* A whole file (malloc'd), for checking that a report left it as it was. */
static char *read_whole(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n == cap)
            ck_assert_ptr_nonnull(buf = realloc(buf, cap = cap ? cap * 2 : 65536));
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *size = n;
    return buf;
}

/* The names cache beside a trace: DIR/<base>.db -> DIR/<base>.symbols (static buffer). */
static const char *cache_path_of(const char *trace)
{
    static char path[4096];
    snprintf(path, sizeof path, "%.*s.symbols", (int)(strlen(trace) - 3), trace);
    return path;
}

static struct run cutrace(struct world *w, const char *const *args)
{
    const char *argv[12] = {build_path("cutrace")};
    for (int i = 0; args[i] && i < 10; i++)
        argv[i + 1] = args[i];
    return run_prog(w, false, argv, 120);
}

static void assert_contains(const char *text, const char *part)
{
    ck_assert_msg(strstr(text, part) != NULL, "expected \"%s\" in:\n%s", part, text);
}

/* The line of `marker` in a test program's source (1-based). */
static int line_of(const char *file, const char *marker)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/progs/%s", getenv("CUTRACE_TEST_SRC"), file);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    int n = 0, found = -1;
    while (fgets(line, sizeof line, f)) {
        n++;
        if (found < 0 && strstr(line, marker))
            found = n;
    }
    fclose(f);
    ck_assert_int_gt(found, 0);
    return found;
}

static const char *py_script(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/tests/progs/%s", getenv("CUTRACE_TEST_SRC"), name);
    return path;
}

/* Every stack a call names was stored. */
static void assert_stacks_complete(sqlite3 *db)
{
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls c WHERE c.stack_id != 0 AND NOT"
                                  " EXISTS (SELECT 1 FROM stacks s WHERE s.stack_id = c.stack_id)"),
                     0);
}

/* Allocations from named functions, one in a dlopen'ed library, named offline. */
START_TEST(test_native_stacks_name_each_function)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/stk_native"), build_path("progs/libstk_plugin.so"),
                          NULL};
    struct run plain = run_prog(&w, false, argv, 60);
    struct run traced = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_uint_eq(traced.err_len, 0);

    sqlite3 *db = only_trace(&w);
    /* Every top-level memory call has a stack; nested ones share their caller's. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested AND stack_id = 0"
                                  " AND api IN ('cudaMalloc', 'cudaFree', 'cudaMemGetInfo')"),
                     0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE nested AND stack_id != 0"), 0);
    /* load_weights' four calls share one stack, stored once. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(DISTINCT stack_id) FROM calls WHERE NOT nested"
                                  " AND api = 'cudaMalloc' AND size = 8388608"),
                     1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM (SELECT stack_id, depth FROM stacks"
                                  " GROUP BY stack_id, depth HAVING count(*) > 1)"),
                     0);
    assert_stacks_complete(db);
    /* Frames are native, innermost first, each in a recorded module. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM stacks WHERE kind != 'native'"), 0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM stacks WHERE module IS NULL"), 0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM stacks WHERE depth = 0 AND module LIKE"
                                  " '%libcutrace%'"),
                     0);
    /* The library opened later was recorded, with its build id. */
    ck_assert_int_ge(tsql_int(db, "SELECT count(*) FROM loaded_modules WHERE path LIKE"
                                  " '%libstk_plugin.so' AND length(build_id) >= 16"),
                     1);
    ck_assert_int_gt(tsql_int(db, "SELECT max(first_seq) FROM loaded_modules WHERE path LIKE"
                                  " '%libstk_plugin.so'"),
                     0);
    ck_assert_ptr_nonnull(
        strstr(tsql_text(db, "SELECT value FROM meta WHERE key = 'stacks'"), "native=libunwind"));
    sqlite3_close(db);

    /* Reports never write into a trace: the same bytes and mtime after them. */
    char trace[4096];
    snprintf(trace, sizeof trace, "%s", only_trace_path(&w));
    struct stat before_st, after_st;
    ck_assert_int_eq(stat(trace, &before_st), 0);
    size_t before_n, after_n;
    char *before = read_whole(trace, &before_n);
    ck_assert_int_eq(access(cache_path_of(trace), F_OK), -1);

    /* Offline: each allocation's site names its function. */
    const char *json_args[] = {"sites", "--json", w.trace_dir, NULL};
    struct run r = cutrace(&w, json_args);
    ck_assert_msg(r.status == 0, "%s", r.err);
    assert_contains(r.out, "\"site\": \"make_kv_cache (stk_native)\"");
    assert_contains(r.out, "\"site\": \"load_weights (stk_native)\"");
    assert_contains(r.out, "\"site\": \"plugin_alloc_workspace (libstk_plugin.so)\"");
    run_free(&r);

    const char *text_args[] = {"sites", w.trace_dir, NULL};
    r = cutrace(&w, text_args);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "64.00 MiB  57.1%       1  make_kv_cache (stk_native)");
    assert_contains(r.out, "32.00 MiB  28.6%       4  load_weights (stk_native)");
    assert_contains(r.out, "16.00 MiB  14.3%       1  plugin_alloc_workspace (libstk_plugin.so)");
    run_free(&r);

    /* At the second measurement the plugin's workspace is freed. */
    const char *at_args[] = {"sites", "--at", "measurement:2", w.trace_dir, NULL};
    r = cutrace(&w, at_args);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "at measurement:2");
    ck_assert_ptr_null(strstr(r.out, "plugin_alloc_workspace"));
    run_free(&r);

    /* Folded stacks: the whole chain, outermost first, weighted by bytes. */
    const char *folded_args[] = {"sites", "--folded", w.trace_dir, NULL};
    r = cutrace(&w, folded_args);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, ";main;load_weights;cudaMalloc 33554432\n");
    assert_contains(r.out, ";main;make_kv_cache;cudaMalloc 67108864\n");
    assert_contains(r.out, ";main;plugin_alloc_workspace;cudaMalloc 16777216\n");
    ck_assert_int_eq(strncmp(r.out, "gpu0;pid ", 9), 0);
    ck_assert_uint_eq(count_lines(r.out), 3);
    run_free(&r);

    /* The names given offline are stored: SQL users see them in the stacks
     * view joined with the cache beside the trace (docs/stacks.md). */
    db = only_trace(&w);
    char *attach = sqlite3_mprintf("ATTACH %Q AS names", cache_path_of(trace));
    ck_assert_int_eq(sqlite3_exec(db, attach, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(attach);
#define NAMED_STACKS                                                                               \
    "SELECT count(*) FROM stacks s LEFT JOIN names.symbols n ON s.kind = 'native' AND"             \
    " n.ip = s.ip WHERE coalesce(s.symbol, n.symbol) = "
    ck_assert_int_ge(tsql_int(db, NAMED_STACKS "'make_kv_cache' AND depth = 0"), 1);
    ck_assert_int_ge(tsql_int(db, NAMED_STACKS "'plugin_alloc_workspace'"), 1);
#undef NAMED_STACKS
    /* ... and not in the trace, which sites left byte for byte as it was. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM main.symbols"), 0);
    sqlite3_close(db);
    ck_assert_int_eq(stat(trace, &after_st), 0);
    ck_assert_int_eq(after_st.st_size, before_st.st_size);
    ck_assert_int_eq(after_st.st_mtim.tv_sec, before_st.st_mtim.tv_sec);
    ck_assert_int_eq(after_st.st_mtim.tv_nsec, before_st.st_mtim.tv_nsec);
    char *after = read_whole(trace, &after_n);
    ck_assert_uint_eq(after_n, before_n);
    ck_assert_msg(memcmp(before, after, before_n) == 0, "cutrace sites changed %s", trace);
    free(before);
    free(after);
    /* A cache that is not valid for the trace is not read: the names come
     * from the modules again, the same. */
    db = tsql_open(cache_path_of(trace), SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(sqlite3_exec(db,
                                  "UPDATE symbols SET symbol = 'stale_name';"
                                  " UPDATE meta SET value = 'another build' WHERE key = 'key'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    r = cutrace(&w, text_args);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "make_kv_cache (stk_native)");
    ck_assert_ptr_null(strstr(r.out, "stale_name"));
    run_free(&r);
    /* A valid one is: its names are used as they are. */
    db = tsql_open(cache_path_of(trace), SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(sqlite3_exec(db,
                                  "UPDATE symbols SET symbol = 'cached_' || symbol"
                                  " WHERE symbol = 'make_kv_cache'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    r = cutrace(&w, text_args);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "cached_make_kv_cache (stk_native)");
    run_free(&r);
    ck_assert_int_eq(unlink(cache_path_of(trace)), 0);

    /* --at names the moments of milestones.h; a timeline row that is no moment is refused. */
    const char *row_args[] = {"sites", "--at", "burst_begin", w.trace_dir, NULL};
    r = cutrace(&w, row_args);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "--at burst_begin: a row of `cutrace timeline`, not a moment");
    run_free(&r);

    const char *bad_args[] = {"sites", "--at", "nonsense", w.trace_dir, NULL};
    r = cutrace(&w, bad_args);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "--at nonsense");
    run_free(&r);
    const char *none_args[] = {"sites", "--at", "comm_init", w.trace_dir, NULL};
    r = cutrace(&w, none_args);
    ck_assert_int_eq(r.status, 2);
    run_free(&r);

    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* The sites report on damaged stack rows and hostile module paths: notes, never a crash. */
START_TEST(test_sites_survive_hostile_stacks)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/stk_native"), build_path("progs/libstk_plugin.so"),
                          NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(r.status, 0);
    run_free(&r);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    char fifo[4096];
    snprintf(fifo, sizeof fifo, "%s/module.fifo", w.root);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READWRITE);
    char sql[8192];
    snprintf(sql, sizeof sql,
             "UPDATE loaded_modules SET path = '/dev/zero' WHERE path LIKE '%%/stk_native';"
             "INSERT INTO loaded_modules(path, build_id, base, start_addr, end_addr, first_seq)"
             " SELECT '%s', 'ffff', base, start_addr, end_addr, 9 FROM loaded_modules"
             " WHERE path LIKE '%%libstk_plugin.so';"
             "INSERT INTO loaded_modules(path, build_id, base, start_addr, end_addr, first_seq)"
             " SELECT '/proc/self/mem', NULL, base, start_addr, end_addr, 9 FROM loaded_modules"
             " WHERE path LIKE '%%libc.so%%';"
             "INSERT INTO stack_frames(stack_id, depth, kind, value) SELECT stack_id,"
             " depth + 1000, 7, -5 FROM stack_frames;"
             "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 700)"
             " INSERT INTO stack_frames(stack_id, depth, kind, value) SELECT (SELECT"
             " max(stack_id) FROM stack_frames), 2000 + i, i %% 2, 1 << 62 FROM n;"
             "UPDATE stack_frames SET instr = -7, entry = 'x' WHERE kind = 1;"
             "INSERT INTO py_code VALUES(0, 'zero', x'00ff41');"
             "UPDATE events SET stack_id = 0, parent_seq = seq WHERE api_id = (SELECT api_id"
             " FROM apis WHERE name = 'cudaFree');"
             "UPDATE events SET stack_id = -3 WHERE seq = (SELECT min(seq) FROM events"
             " WHERE stack_id != 0);",
             fifo);
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    free_list(files, 1);

    const char *variants[][6] = {
        {"sites", w.trace_dir, NULL},
        {"sites", "--json", "--top", "0", w.trace_dir, NULL},
        {"sites", "--folded", w.trace_dir, NULL},
        {"sites", "--at", "end", w.trace_dir, NULL},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        r = cutrace(&w, variants[v]);
        ck_assert_msg(r.status == 0, "%s: %s", variants[v][1], r.err);
        if (v == 0)
            assert_contains(r.out, "not a regular file");
        if (v == 2)
            assert_contains(r.out, ";zero+0x");
        run_free(&r);
    }
    /* The sanitizer build too, when it was built (make analyzer-tests). */
    if (access(build_path("asan/analyzer/cutrace"), X_OK) == 0) {
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            const char *asan[8] = {build_path("asan/analyzer/cutrace")};
            for (int i = 0; variants[v][i]; i++)
                asan[i + 1] = variants[v][i];
            w.extra_env[0] = "ASAN_OPTIONS=detect_leaks=1:exitcode=99";
            r = run_prog(&w, false, asan, 120);
            w.extra_env[0] = NULL;
            ck_assert_msg(r.status == 0, "asan %s: %s", variants[v][1], r.err);
            run_free(&r);
        }
    }

    /* A trace of format 3 has no stacks: the report says so and goes on. */
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    db = tsql_open(files[0], SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(sqlite3_exec(db, "UPDATE meta SET value = 3 WHERE key = 'format_version'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    r = cutrace(&w, variants[0]);
    ck_assert_msg(r.status == 0, "%s", r.err);
    assert_contains(r.out, "(no stack)");
    assert_contains(r.out, "(format 3) has no call stacks");
    run_free(&r);
    db = tsql_open(files[0], SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(sqlite3_exec(db, "UPDATE meta SET value = 4 WHERE key = 'format_version'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    free_list(files, 1);

    /* A format-4 trace without its stack view is damaged: one line, exit 1. */
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    db = tsql_open(files[0], SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(sqlite3_exec(db, "DROP VIEW stacks", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    free_list(files, 1);
    r = cutrace(&w, variants[0]);
    ck_assert_int_eq(r.status, 1);
    ck_assert_uint_eq(count_lines(r.err), 1);
    assert_contains(r.err, "without its stack tables");
    run_free(&r);
    world_free(&w);
}
END_TEST

/*
 * Python frames read through CPython's API (CUTRACE_PYFRAMES=api, the
 * fallback where the frame layout of a version is unknown or fails its
 * checks): calls made with the GIL held have them, calls made without it
 * none, and no harm. tests/integration/test_pyframes.c has the default,
 * which reads them on every road.
 */
START_TEST(test_python_frames_file_line_function)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "CUTRACE_PYFRAMES=api";
    const char *argv[] = {"/usr/bin/env", "python3", py_script("stk_python.py"), NULL};
    struct run plain = run_prog(&w, false, argv, 60);
    struct run traced = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_int_eq(traced.status, 0);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_str_eq(traced.err, plain.err); /* asked for: nothing to warn about */

    int alloc_line = line_of("stk_python.py", "# ALLOC_LINE");
    int measure_line = line_of("stk_python.py", "# MEASURE_LINE");
    sqlite3 *db = only_trace(&w);
    assert_stacks_complete(db);
    char sql[1024];
    /* The three PyDLL allocations: create_shared_buffer at its line, innermost. */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM calls c WHERE NOT nested AND api = 'cudaMalloc'"
             " AND (SELECT symbol || '|' || file || '|' || line FROM stacks s"
             " WHERE s.stack_id = c.stack_id AND kind = 'python' ORDER BY depth LIMIT 1)"
             " LIKE 'create_shared_buffer|%%/stk_python.py|%d'",
             alloc_line);
    ck_assert_int_eq(tsql_int(db, sql), 3);
    /* Their callers, outward. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(DISTINCT stack_id) FROM stacks WHERE kind ="
                                  " 'python' AND symbol = 'init_custom_all_reduce'"),
                     1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM stacks a JOIN stacks b ON a.stack_id ="
                                  " b.stack_id AND b.depth = a.depth + 1 WHERE a.symbol ="
                                  " '<lambda>' AND b.symbol = 'load_weights'"),
                     1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM stacks WHERE kind = 'python' AND symbol"
                                  " = '<module>' AND file LIKE '%/stk_python.py'"),
                     tsql_int(db, "SELECT count(DISTINCT stack_id) FROM stacks WHERE kind ="
                                  " 'python'"));
    /* Both measurements, from measure_free. */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM calls c WHERE NOT nested AND api = 'cudaMemGetInfo'"
             " AND EXISTS (SELECT 1 FROM stacks s WHERE s.stack_id = c.stack_id AND kind ="
             " 'python' AND symbol = 'measure_free' AND line = %d AND depth = (SELECT min(depth)"
             " FROM stacks t WHERE t.stack_id = c.stack_id AND t.kind = 'python'))",
             measure_line);
    ck_assert_int_eq(tsql_int(db, sql), 2);
    /* ctypes.CDLL released the GIL: native frames only. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls c WHERE NOT nested AND api ="
                                  " 'cudaMalloc' AND size = 1048576 AND NOT EXISTS (SELECT 1"
                                  " FROM stacks s WHERE s.stack_id = c.stack_id AND kind ="
                                  " 'python') AND EXISTS (SELECT 1 FROM stacks s WHERE"
                                  " s.stack_id = c.stack_id)"),
                     1);
    sqlite3_close(db);

    const char *args[] = {"sites", "--json", w.trace_dir, NULL};
    struct run r = cutrace(&w, args);
    ck_assert_msg(r.status == 0, "%s", r.err);
    snprintf(sql, sizeof sql, "\"site\": \"stk_python.py:%d create_shared_buffer\"", alloc_line);
    assert_contains(r.out, sql);
    assert_contains(r.out, "\"kind\": \"python\",\n          \"bytes\": 50331648,");
    run_free(&r);

    /* In the folded stacks the Python frames sit where the interpreter ran them. */
    const char *folded[] = {"sites", "--folded", w.trace_dir, NULL};
    r = cutrace(&w, folded);
    ck_assert_int_eq(r.status, 0);
    snprintf(sql, sizeof sql,
             ";<module> (stk_python.py:%d);main (stk_python.py:%d);init_custom_all_reduce"
             " (stk_python.py:%d);create_shared_buffer (stk_python.py:%d);",
             line_of("stk_python.py", "    main()"), line_of("stk_python.py", "    init_custom"),
             line_of("stk_python.py", "        create_shared_buffer(8"), alloc_line);
    assert_contains(r.out, sql);
    assert_contains(r.out, "PyEval_EvalCode;<module>");
    run_free(&r);

    /* Several eval loops (as after Python -> C -> Python): the inner ones get one
     * Python frame each, the outermost the rest. Two more frames are named as
     * eval loops in the trace's symbols table, which the analyzer trusts. */
    db = tsql_open(only_trace_path(&w), SQLITE_OPEN_READWRITE);
    /* Their ips are in the names cache the reports above kept beside the trace. */
    char *attach = sqlite3_mprintf("ATTACH %Q AS names", cache_path_of(only_trace_path(&w)));
    ck_assert_int_eq(sqlite3_exec(db, attach, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(attach);
    ck_assert_int_eq(sqlite3_exec(db,
                                  "INSERT OR REPLACE INTO main.symbols SELECT ip,"
                                  " '_PyEval_EvalFrameDefault' FROM names.symbols WHERE symbol IN"
                                  " ('_PyObject_MakeTpCall', 'PyEval_EvalCode')",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_ge(sqlite3_changes(db), 2);
    sqlite3_close(db);
    r = cutrace(&w, folded);
    ck_assert_int_eq(r.status, 0);
    snprintf(sql, sizeof sql,
             ";run_mod;<module> (stk_python.py:%d);main (stk_python.py:%d);init_custom_all_reduce"
             " (stk_python.py:%d);create_shared_buffer (stk_python.py:%d);PyCFuncPtr_call;",
             line_of("stk_python.py", "    main()"), line_of("stk_python.py", "    init_custom"),
             line_of("stk_python.py", "        create_shared_buffer(8"), alloc_line);
    assert_contains(r.out, sql);
    run_free(&r);

    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* CUTRACE_STACKS, CUTRACE_STACK_DEPTH, CUTRACE_STACK_COLLECTIVES. */
START_TEST(test_stack_settings)
{
    const char *argv[] = {build_path("progs/stk_native"), build_path("progs/libstk_plugin.so"),
                          NULL};
    struct world w;
    world_init(&w);
    w.extra_env[0] = "CUTRACE_STACKS=none";
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_eq(r.err_len, 0);
    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE stack_id != 0"), 0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM stacks"), 0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM loaded_modules"), 0);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'stacks'"),
                     "native=off python=off depth=32 on=memory");
    sqlite3_close(db);
    run_free(&r);
    const char *args[] = {"sites", w.trace_dir, NULL};
    r = cutrace(&w, args);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "(no stack)");
    assert_contains(r.out, "stacks were off");
    run_free(&r);
    world_free(&w);

    world_init(&w);
    w.extra_env[0] = "CUTRACE_STACK_DEPTH=3";
    r = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(r.status, 0);
    db = only_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT max(depth) FROM stacks"), 2);
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);

    /* A C program with Python frames only: nothing to record. */
    world_init(&w);
    w.extra_env[0] = "CUTRACE_STACKS=python";
    r = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(r.status, 0);
    db = only_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE stack_id != 0"), 0);
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);

    /* A bad value: one warning, the default, the program unchanged. */
    world_init(&w);
    w.extra_env[0] = "CUTRACE_STACKS=sometimes";
    w.extra_env[1] = "CUTRACE_STACK_DEPTH=1000";
    struct run plain = run_prog(&w, false, argv, 60);
    r = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, plain.out);
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_int_eq(strncmp(r.err, "cutrace: CUTRACE_STACKS=sometimes", 33), 0);
    db = only_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested AND stack_id = 0"
                                  " AND api = 'cudaMalloc'"),
                     0);
    sqlite3_close(db);
    run_free(&plain);
    run_free(&r);
    world_free(&w);

    /* Collectives get stacks only on request; communicator inits always. */
    for (int on = 0; on <= 1; on++) {
        world_init(&w);
        if (on)
            w.extra_env[0] = "CUTRACE_STACK_COLLECTIVES=1";
        const char *tp[] = {build_path("progs/tp_collectives"), "2", "1", NULL};
        r = run_prog(&w, true, tp, 60);
        ck_assert_int_eq(r.status, 0);
        char **files;
        size_t n = list_traces(&w, &files);
        ck_assert_uint_eq(n, 2);
        for (size_t i = 0; i < n; i++) {
            db = tsql_open(files[i], SQLITE_OPEN_READONLY);
            ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api ="
                                          " 'ncclCommInitRank' AND stack_id = 0"),
                             0);
            int64_t stacked = tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'ncclAllReduce'"
                                           " AND stack_id != 0");
            int64_t all = tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'ncclAllReduce'");
            ck_assert_int_gt(all, 0);
            ck_assert_int_eq(stacked, on ? all : 0);
            assert_stacks_complete(db);
            sqlite3_close(db);
        }
        free_list(files, n);
        run_free(&r);
        world_free(&w);
    }
}
END_TEST

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

/* The stacks of records the writer could not commit come back from the ring. */
START_TEST(test_ring_keeps_stacks_of_a_killed_process)
{
    struct world w;
    world_init(&w);
    char go[4096];
    snprintf(go, sizeof go, "%s/go", w.root);
    const char *argv[] = {build_path("progs/rt_pause"), go, "50", NULL};
    struct running p = start_prog(&w, true, argv);
    wait_for_trace_file(&w);
    sleep_ms(100);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *locker = tsql_open(files[0], SQLITE_OPEN_READWRITE);
    free_list(files, 1);
    /* the writer may still be in its first commits on a loaded machine */
    sqlite3_busy_timeout(locker, 10000);
    ck_assert_int_eq(sqlite3_exec(locker, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    FILE *f = fopen(go, "w");
    fclose(f);
    sleep_ms(300); /* the 50 pairs are made; their records wait in the ring */
    kill(p.pid, SIGKILL);
    struct run r = finish_prog(&p, 60);
    ck_assert_int_eq(r.status, 128 + SIGKILL);
    sqlite3_exec(locker, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(locker);
    run_free(&r);

    const char *args[] = {"recover", w.trace_dir, NULL};
    r = cutrace(&w, args);
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested"), 101);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested AND stack_id = 0"),
                     0);
    /* The first malloc's, the loop's free and malloc: all three stored. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(DISTINCT stack_id) FROM calls WHERE NOT nested"),
                     3);
    assert_stacks_complete(db);
    /* Only calls count as recovered records. */
    ck_assert_int_le(tsql_int(db, "SELECT value FROM meta WHERE key = 'recovered_records'"),
                     tsql_int(db, "SELECT count(*) FROM calls"));
    sqlite3_close(db);
    world_free(&w);
}
END_TEST

/* `cutrace budget` takes its measurements where SGLang's Python functions
 * made them, even where the weight burst alone would choose others. */
static void check_budget_by_names(bool progress_log)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {"/usr/bin/env", "python3", py_script("stk_budget.py"),
                          progress_log ? "--progress-log" : NULL, NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(r.status, 0);
    run_free(&r);
    const char *args[] = {"budget", "--framework", "sglang",    "--mem-fraction-static",
                          "0.5",    "--json",      w.trace_dir, NULL};
    r = cutrace(&w, args);
    ck_assert_msg(r.status == 0, "%s", r.err);
    char expected[256];
    snprintf(expected, sizeof expected,
             ", made in init_torch_distributed (stk_budget.py:%d), post = seq ",
             line_of("stk_budget.py", "        return get_available_gpu_memory()\n"));
    assert_contains(r.out, expected);
    snprintf(expected, sizeof expected,
             ", made in profile_max_num_token (stk_budget.py:%d): chosen by the Python stacks",
             line_of("stk_budget.py", "    def profile_max_num_token") + 1);
    assert_contains(r.out, expected);
    /* pre after the 16 MiB of buffers, post after all 48 x 64 MiB of weights */
    sqlite3 *db = only_trace(&w);
    int64_t pre_free = tsql_int(db, "SELECT free_bytes FROM meminfo ORDER BY seq LIMIT 1");
    int64_t post_free = tsql_int(db, "SELECT free_bytes FROM meminfo ORDER BY seq DESC LIMIT 1");
    sqlite3_close(db);
    char pre[64], post[64];
    snprintf(pre, sizeof pre, "\"min_pre_free_bytes\": %lld,", (long long)pre_free);
    snprintf(post, sizeof post, "\"min_post_free_bytes\": %lld,", (long long)post_free);
    ck_assert_int_eq(pre_free - post_free, 48ll << 26);
    assert_contains(r.out, pre);
    assert_contains(r.out, post);
    run_free(&r);
    world_free(&w);
}

START_TEST(test_budget_names_the_python_functions)
{
    check_budget_by_names(false);
    check_budget_by_names(true);
}
END_TEST

/* Threads unwinding under a storm of signals while the process forks. */
START_TEST(test_signals_and_forks_never_deadlock)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/stk_stress"), "4", "60", NULL};
    struct run plain = run_prog(&w, false, argv, 120);
    struct run traced = run_prog(&w, true, argv, 240);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_int_eq(traced.status, 0);
    ck_assert_str_eq(traced.out, "children failed: 0\n");
    ck_assert_uint_eq(traced.err_len, 0);
    char **files;
    size_t n = list_traces(&w, &files);
    ck_assert_uint_eq(n, 61);
    size_t children = 0;
    char child[4096] = "";
    for (size_t i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        assert_stacks_complete(db);
        if (tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested") == 1) {
            /* A child: its one allocation, with a stack sent into its own trace. */
            children++;
            ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE NOT nested AND"
                                          " stack_id != 0"),
                             1);
            snprintf(child, sizeof child, "%s", files[i]);
        } else {
            /* The workers' call chains of many depths: many stacks. */
            ck_assert_int_gt(tsql_int(db, "SELECT count(DISTINCT stack_id) FROM calls"), 30);
        }
        sqlite3_close(db);
    }
    ck_assert_uint_eq(children, 60);
    free_list(files, n);
    /* A child's allocation names child_alloc, offline. */
    const char *folded[] = {"sites", "--folded", child, NULL};
    struct run r = cutrace(&w, folded);
    ck_assert_msg(r.status == 0, "%s", r.err);
    assert_contains(r.out, ";main;child_alloc;cudaMalloc 1048576\n");
    run_free(&r);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

Suite *stacks_suite(void)
{
    Suite *s = suite_create("stacks");
    TCase *tc = tcase_create("stacks");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_native_stacks_name_each_function);
    tcase_add_test(tc, test_sites_survive_hostile_stacks);
    tcase_add_test(tc, test_python_frames_file_line_function);
    tcase_add_test(tc, test_stack_settings);
    tcase_add_test(tc, test_ring_keeps_stacks_of_a_killed_process);
    tcase_add_test(tc, test_budget_names_the_python_functions);
    tcase_add_test(tc, test_signals_and_forks_never_deadlock);
    suite_add_tcase(s, tc);
    return s;
}
