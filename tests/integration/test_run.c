/*
 * test_run.c - `cutrace run` with the real libcutrace.so in front of servers
 * that start workers (tests/progs/run_workers.py on the fake GPU stack): a
 * torchrun-like launcher (subprocess.Popen with RANK/WORLD_SIZE), Python
 * multiprocessing's "spawn", a shell wrapper that execs the worker. Each
 * worker must leave its own trace and the launchers none; the program's
 * stdout and exit status (128+N for signal N) must be what they are without
 * cutrace; the closing line on stderr must say where the traces are. The
 * analyzer suite (tests/analyzer/test_run.c) covers the option parsing and
 * the environment with a stand-in library.
 *
 * Each run writes into a directory of its own inside -o DIR (DIR/run-...,
 * with its manifest.json): the tests run `cutrace run -o ROOT/runs` and
 * then look at that run's directory as the world's trace directory. Two
 * runs in one DIR stay apart, a report on DIR refuses to mix them, the
 * manifest says how the command ended (also when it died with cutrace), and
 * the launched command's flags reach `cutrace budget` through it.
 */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "suites.h"

#define MIB (1 << 20)

static const char *workers_script(void)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/tests/progs/run_workers.py", getenv("CUTRACE_TEST_SRC"));
    return path;
}

/* The -o DIR of the world's runs: ROOT/runs (malloc'd). */
static char *runs_dir(const struct world *w)
{
    char *dir = NULL;
    ck_assert_int_ge(asprintf(&dir, "%s/runs", w->root), 0);
    return dir;
}

static int run_entry(const struct dirent *e)
{
    return strncmp(e->d_name, "run-", 4) == 0;
}

/* The runs in DIR (DIR/run-..., by name: start order); returns their number. */
static size_t list_runs(const char *dir, char ***runs)
{
    struct dirent **entries;
    int count = scandir(dir, &entries, run_entry, alphasort);
    size_t n = count > 0 ? (size_t)count : 0;
    *runs = calloc(n + 1, sizeof(**runs));
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_ge(asprintf(&(*runs)[i], "%s/%s", dir, entries[i]->d_name), 0);
        free(entries[i]);
    }
    if (count >= 0)
        free(entries);
    return n;
}

/* The run in dir that is not in before[0..nbefore): there is exactly one. */
static char *new_run(const char *dir, char **before, size_t nbefore)
{
    char **after;
    size_t nafter = list_runs(dir, &after);
    char *found = NULL;
    for (size_t i = 0; i < nafter; i++) {
        bool old = false;
        for (size_t j = 0; j < nbefore; j++)
            old |= strcmp(after[i], before[j]) == 0;
        if (!old) {
            ck_assert_msg(!found, "two new runs in %s", dir);
            found = strdup(after[i]);
        }
    }
    ck_assert_msg(found, "no new run in %s", dir);
    free_list(after, nafter);
    return found;
}

/* `cutrace run -o ROOT/runs -- ARGV...`, as a user types it; the world's
 * trace directory is that run's own afterwards. */
static struct run cutrace_run(struct world *w, const char *const argv[], int timeout_s)
{
    char *dir = runs_dir(w);
    const char *full[32] = {build_path("cutrace"), "run", "-o", dir, "--"};
    size_t n = 5;
    for (size_t i = 0; argv[i]; i++) {
        ck_assert_uint_lt(n, 31);
        full[n++] = argv[i];
    }
    full[n] = NULL;
    char **before;
    size_t nbefore = list_runs(dir, &before);
    struct run r = run_prog(w, false, full, timeout_s);
    free(w->trace_dir);
    w->trace_dir = new_run(dir, before, nbefore);
    free_list(before, nbefore);
    free(dir);
    return r;
}

/* The line cutrace prints when the command ends, for `files` new traces. */
static void assert_closing_line(const struct world *w, const struct run *r, size_t files)
{
    char expected[8192];
    snprintf(expected, sizeof expected,
             "cutrace: trace in %s (%zu file%s); next: cutrace summary %s\n", w->trace_dir, files,
             files == 1 ? "" : "s", w->trace_dir);
    size_t len = strlen(expected);
    ck_assert_msg(r->err_len >= len && strcmp(r->err + r->err_len - len, expected) == 0,
                  "stderr does not end with the trace line: %s", r->err);
}

/* The same command untraced and under cutrace: same stdout and status. */
static struct run traced_like_untraced(struct world *w, const char *const argv[], int status)
{
    struct run plain = run_prog(w, false, argv, 120);
    ck_assert_msg(plain.status == status, "untraced: status %d, stderr %s", plain.status,
                  plain.err);
    char **files;
    ck_assert_uint_eq(list_traces(w, &files), 0); /* untraced: no trace at all */
    free_list(files, 0);
    struct run traced = cutrace_run(w, argv, 120);
    ck_assert_msg(traced.status == status, "traced: status %d, stderr %s", traced.status,
                  traced.err);
    ck_assert_str_eq(traced.out, plain.out);
    run_free(&plain);
    return traced;
}

/*
 * The traces of n workers: one each, made by the worker (its command line
 * contains `marker`), each with one cudaMalloc of (rank+1) MiB on device
 * rank % 2 (the sizes tell the ranks apart), all children of one parent,
 * ended as `end_state`. Returns the parent's pid.
 */
static int64_t assert_worker_traces(struct world *w, int n, const char *marker,
                                    const char *end_state)
{
    char **files;
    ck_assert_uint_eq(list_traces(w, &files), (size_t)n);
    bool seen[16] = {false};
    int64_t parent = -1;
    char expected_preload[PATH_MAX];
    snprintf(expected_preload, sizeof expected_preload, "%s", build_path("libcutrace.so"));
    char *real_preload = realpath(expected_preload, NULL);
    char *real_dir = realpath(w->trace_dir, NULL);
    ck_assert_ptr_nonnull(real_preload);
    ck_assert_ptr_nonnull(real_dir);
    for (int i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        ck_assert_msg(strstr(tsql_text(db, "SELECT cmdline FROM process"), marker),
                      "%s: cmdline %s", files[i], tsql_text(db, "SELECT cmdline FROM process"));
        int64_t size = tsql_int(db, "SELECT size FROM allocations WHERE api = 'cudaMalloc'");
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations"), 1);
        ck_assert_int_eq(size % MIB, 0);
        int rank = (int)(size / MIB) - 1;
        ck_assert_msg(rank >= 0 && rank < n && !seen[rank], "%s: size %lld", files[i],
                      (long long)size);
        seen[rank] = true;
        ck_assert_int_eq(tsql_int(db, "SELECT device FROM allocations"), rank % 2);
        ck_assert_str_eq(tsql_text(db, "SELECT free_api FROM allocations"), "cudaFree");
        ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM meminfo"), 1);
        int64_t ppid = tsql_int(db, "SELECT ppid FROM process");
        ck_assert(parent == -1 || ppid == parent);
        parent = ppid;
        /* What cutrace run set, as the worker saw it. */
        ck_assert_str_eq(tsql_text(db, "SELECT value FROM env WHERE name = 'LD_PRELOAD'"),
                         real_preload);
        ck_assert_str_eq(tsql_text(db, "SELECT value FROM env WHERE name = 'CUTRACE_DIR'"),
                         real_dir);
        ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"),
                         end_state);
        sqlite3_close(db);
    }
    free(real_preload);
    free(real_dir);
    free_list(files, (size_t)n);
    return parent;
}

START_TEST(test_torchrun_like_launcher_each_worker_traced)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {"/usr/bin/env", "python3", workers_script(), "torchrun", "4", NULL};
    struct run r = traced_like_untraced(&w, argv, 0);
    ck_assert_str_eq(r.out, "rank 0 of 4: allocated 1 MiB on device 0\n"
                            "rank 1 of 4: allocated 2 MiB on device 1\n"
                            "rank 2 of 4: allocated 3 MiB on device 0\n"
                            "rank 3 of 4: allocated 4 MiB on device 1\n");
    assert_closing_line(&w, &r, 4);
    /* The launcher made no CUDA call: four traces, the workers', one parent. */
    assert_worker_traces(&w, 4, "run_workers.py worker", "exit");
    run_free(&r);
    world_free(&w);
}
END_TEST

START_TEST(test_multiprocessing_spawn_and_forkserver_workers_traced)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {"/usr/bin/env", "python3", workers_script(), "mp", "3", NULL};
    struct run r = traced_like_untraced(&w, argv, 0);
    ck_assert_str_eq(r.out, "rank 0 of 3: allocated 1 MiB on device 0\n"
                            "rank 1 of 3: allocated 2 MiB on device 1\n"
                            "rank 2 of 3: allocated 3 MiB on device 0\n");
    assert_closing_line(&w, &r, 3);
    /* Fresh interpreters started by spawn_main; the parent and
     * multiprocessing's helper processes leave nothing. */
    assert_worker_traces(&w, 3, "spawn_main", "exit");
    run_free(&r);
    world_free(&w);

    /* Forked by a forkserver (itself a fresh interpreter): a forked child
     * traces into a file of its own, and leaves with os._exit. */
    world_init(&w);
    const char *forkserver[] = {"/usr/bin/env", "python3", workers_script(), "mp", "3", "--method",
                                "forkserver",   NULL};
    r = traced_like_untraced(&w, forkserver, 0);
    assert_closing_line(&w, &r, 3);
    assert_worker_traces(&w, 3, "forkserver", "_exit");
    run_free(&r);
    world_free(&w);
}
END_TEST

START_TEST(test_shell_wrapper_that_execs_the_worker)
{
    struct world w;
    world_init(&w);
    char script[3 * PATH_MAX];
    /* A worker run by the shell, then one the shell becomes with exec. */
    snprintf(script, sizeof script,
             "echo wrapper starting; export WORLD_SIZE=2; RANK=1 python3 %s worker; "
             "export RANK=0; exec python3 %s worker",
             workers_script(), workers_script());
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct run r = traced_like_untraced(&w, argv, 0);
    ck_assert_str_eq(r.out, "wrapper starting\n"
                            "rank 1 of 2: allocated 2 MiB on device 1\n"
                            "rank 0 of 2: allocated 1 MiB on device 0\n");
    assert_closing_line(&w, &r, 2);

    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 2);
    int64_t pid_of[2] = {0}, ppid_of[2] = {0};
    for (int i = 0; i < 2; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        int rank = (int)(tsql_int(db, "SELECT size FROM allocations") / MIB) - 1;
        ck_assert(rank == 0 || rank == 1);
        pid_of[rank] = tsql_int(db, "SELECT pid FROM process");
        ppid_of[rank] = tsql_int(db, "SELECT ppid FROM process");
        sqlite3_close(db);
    }
    /* The exec'd worker is the shell itself: the first worker's parent. */
    ck_assert_int_eq(ppid_of[1], pid_of[0]);
    free_list(files, 2);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* LD_PRELOAD entries already there stay, through the wrapper, in the worker. */
START_TEST(test_existing_preload_kept_in_workers)
{
    struct world w;
    world_init(&w);
    char preload[PATH_MAX + 16], shim[PATH_MAX];
    snprintf(shim, sizeof shim, "%s", build_path("progs/libshim_count.so"));
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", shim);
    w.extra_env[0] = preload;
    /* The count file is named only inside the wrapper: cutrace itself runs
     * with the shim loaded too, and would write its own 0 at exit. */
    char script[3 * PATH_MAX];
    snprintf(script, sizeof script, "export SHIM_COUNT_FILE=%s/count; exec %s return 4", w.root,
             build_path("progs/rt_exit"));
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct run r = cutrace_run(&w, argv, 60);
    ck_assert_msg(r.status == 0, "%s", r.err);
    assert_closing_line(&w, &r, 1);

    /* The other shim saw every cudaMalloc, and so did the tracer. */
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/count", w.root);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int counted = -1;
    ck_assert_int_eq(fscanf(f, "%d", &counted), 1);
    fclose(f);
    ck_assert_int_eq(counted, 4);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'cudaMalloc'"), 4);
    char *lib = realpath(build_path("libcutrace.so"), NULL);
    char expected[2 * PATH_MAX + 2];
    snprintf(expected, sizeof expected, "%s:%s", lib, shim);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM env WHERE name = 'LD_PRELOAD'"), expected);
    free(lib);
    sqlite3_close(db);
    free_list(files, 1);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* The trace of a run whose command is one worker; the checks of
 * assert_worker_traces after `cutrace summary` folded its ring if killed. */
static void assert_one_worker_trace(struct world *w, const char *end_state)
{
    const char *summary[] = {build_path("cutrace"), "summary", w->trace_dir, NULL};
    struct run s = run_prog(w, false, summary, 60);
    ck_assert_msg(s.status == 0, "%s", s.err);
    run_free(&s);
    assert_worker_traces(w, 1, "run_workers.py worker", end_state);
}

START_TEST(test_exit_status_passes_through)
{
    struct world w;
    world_init(&w);
    const char *direct[] = {
        "/usr/bin/env", "python3", workers_script(), "worker", "--exit-code", "5", NULL};
    struct run r = traced_like_untraced(&w, direct, 5);
    assert_closing_line(&w, &r, 1);
    assert_one_worker_trace(&w, "exit");
    run_free(&r);
    world_free(&w);

    /* Through a wrapper that execs the worker. */
    world_init(&w);
    char script[2 * PATH_MAX];
    snprintf(script, sizeof script, "exec python3 %s worker --exit-code 7", workers_script());
    const char *wrapped[] = {"/bin/sh", "-c", script, NULL};
    r = traced_like_untraced(&w, wrapped, 7);
    assert_closing_line(&w, &r, 1);
    assert_one_worker_trace(&w, "exit");
    run_free(&r);
    world_free(&w);

    /* A launcher whose worker failed exits 1, as torchrun does; every worker
     * still has its trace. */
    world_init(&w);
    const char *launcher[] = {
        "/usr/bin/env", "python3", workers_script(), "torchrun", "3", "--fail-rank", "1", NULL};
    r = traced_like_untraced(&w, launcher, 1);
    ck_assert_ptr_nonnull(strstr(r.out, "launcher: rank 1 exited with 3\n"));
    assert_closing_line(&w, &r, 3);
    assert_worker_traces(&w, 3, "run_workers.py worker", "exit");
    run_free(&r);
    world_free(&w);
}
END_TEST

START_TEST(test_signal_becomes_128_plus_n)
{
    static const struct {
        const char *name;
        int status;
    } deaths[] = {{"SIGKILL", 137}, {"SIGTERM", 143}, {"SIGSEGV", 139}};
    for (size_t i = 0; i < sizeof deaths / sizeof *deaths; i++) {
        struct world w;
        world_init(&w);
        const char *direct[] = {"/usr/bin/env", "python3", workers_script(), "worker", "--signal",
                                deaths[i].name, NULL};
        struct run r = traced_like_untraced(&w, direct, deaths[i].status);
        assert_closing_line(&w, &r, 1);
        /* Killed before its exit handlers: what the ring held is folded in. */
        assert_one_worker_trace(&w, "killed");
        run_free(&r);
        world_free(&w);
    }

    /* Through a wrapper, and for a C program that crashes. */
    struct world w;
    world_init(&w);
    char script[2 * PATH_MAX];
    snprintf(script, sizeof script, "exec python3 %s worker --signal SIGKILL", workers_script());
    const char *wrapped[] = {"/bin/sh", "-c", script, NULL};
    struct run r = traced_like_untraced(&w, wrapped, 137);
    assert_one_worker_trace(&w, "killed");
    run_free(&r);
    world_free(&w);

    world_init(&w);
    const char *crash[] = {build_path("progs/rt_signals"), "segv", "3", NULL};
    r = traced_like_untraced(&w, crash, 139);
    ck_assert_str_eq(r.out, "made 3 allocations\n");
    assert_closing_line(&w, &r, 1);
    const char *summary[] = {build_path("cutrace"), "summary", w.trace_dir, NULL};
    struct run s = run_prog(&w, false, summary, 60);
    ck_assert_int_eq(s.status, 0);
    run_free(&s);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE api = 'cudaMalloc'"), 3);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "killed");
    sqlite3_close(db);
    free_list(files, 1);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* A CUTRACE_DISABLE=1 left in the environment (to keep a preloaded tracer
 * quiet by default) does not stop the tracing cutrace run was asked for. */
START_TEST(test_inherited_disable_is_cleared)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "CUTRACE_DISABLE=1";
    const char *argv[] = {"/usr/bin/env", "python3", workers_script(), "torchrun", "2", NULL};
    struct run r = traced_like_untraced(&w, argv, 0);
    assert_closing_line(&w, &r, 2);
    assert_worker_traces(&w, 2, "run_workers.py worker", "exit");
    run_free(&r);

    /* Whereas a wrapper inside the run may still turn tracing off. */
    char script[2 * PATH_MAX];
    snprintf(script, sizeof script, "export CUTRACE_DISABLE=1; exec python3 %s worker",
             workers_script());
    const char *wrapped[] = {"/bin/sh", "-c", script, NULL};
    r = cutrace_run(&w, wrapped, 60);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.err, "no trace written to"));
    run_free(&r);
    world_free(&w);
}
END_TEST

/* `cutrace ARGS...` on the world, expecting exit `status`; its stdout (malloc'd). */
static char *report(struct world *w, const char *const args[], int status)
{
    struct run r = harness_cutrace(w, args);
    ck_assert_msg(r.status == status, "cutrace %s: exit %d (want %d): %s", args[0], r.status,
                  status, r.err);
    char *out = strdup(r.out);
    run_free(&r);
    return out;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Two runs written to one -o DIR stay apart: each run's directory holds its
 * own processes, a report on DIR refuses to mix them, `cutrace ls DIR` lists
 * the runs. */
START_TEST(test_two_runs_in_one_dir_stay_apart)
{
    struct world w;
    world_init(&w);
    const char *two[] = {"/usr/bin/env", "python3", workers_script(), "torchrun", "2", NULL};
    const char *three[] = {"/usr/bin/env", "python3", workers_script(), "torchrun", "3", NULL};
    struct run r = cutrace_run(&w, two, 120);
    ck_assert_msg(r.status == 0, "%s", r.err);
    assert_closing_line(&w, &r, 2);
    run_free(&r);
    char *first = strdup(w.trace_dir);
    r = cutrace_run(&w, three, 120);
    ck_assert_msg(r.status == 0, "%s", r.err);
    assert_closing_line(&w, &r, 3);
    run_free(&r);
    char *second = strdup(w.trace_dir);
    ck_assert_str_ne(first, second);

    /* Each its own workers, all children of its own launcher. */
    int64_t launcher3 = assert_worker_traces(&w, 3, "run_workers.py worker", "exit");
    free(w.trace_dir);
    w.trace_dir = strdup(first);
    int64_t launcher2 = assert_worker_traces(&w, 2, "run_workers.py worker", "exit");
    ck_assert_int_ne(launcher2, launcher3);

    /* Reports read one run: given DIR they refuse, naming both runs. */
    char *dir = runs_dir(&w);
    const char *summary[] = {"summary", dir, NULL};
    struct run s = harness_cutrace(&w, summary);
    ck_assert_int_eq(s.status, 1);
    ck_assert_uint_eq(count_lines(s.err), 1);
    ck_assert_ptr_nonnull(strstr(s.err, "holds 2 runs; name one: "));
    ck_assert_ptr_nonnull(strstr(s.err, first));
    ck_assert_ptr_nonnull(strstr(s.err, second));
    run_free(&s);
    const char *ls_first[] = {"ls", "--json", first, NULL};
    char *out = report(&w, ls_first, 0);
    ck_assert_uint_eq(count_occurrences(out, "\"file\": "), 2);
    ck_assert_uint_eq(count_occurrences(out, "\"world_size\": 2,"), 2);
    free(out);
    const char *ls_second[] = {"ls", "--json", second, NULL};
    out = report(&w, ls_second, 0);
    ck_assert_uint_eq(count_occurrences(out, "\"world_size\": 3,"), 3);
    free(out);

    /* cutrace ls DIR: one line per run, oldest first. */
    const char *ls_dir[] = {"ls", dir, NULL};
    out = report(&w, ls_dir, 0);
    ck_assert_uint_eq(count_lines(out), 3);
    const char *a = strstr(out, base_name(first)), *z = strstr(out, base_name(second));
    ck_assert(a && z && a < z);
    ck_assert_ptr_nonnull(strstr(out, "exit 0"));
    free(out);
    const char *ls_json[] = {"ls", "--json", dir, NULL};
    out = report(&w, ls_json, 0);
    ck_assert_int_eq(report_json_int(out, "$.runs[0].traces"), 2);
    ck_assert_int_eq(report_json_int(out, "$.runs[1].traces"), 3);
    ck_assert_int_eq(report_json_int(out, "$.runs[1].exit_status"), 0);
    free(out);
    free(dir);
    free(first);
    free(second);
    world_free(&w);
}
END_TEST

/* The manifest after a normal exit, a nonzero exit and a death by signal,
 * as `cutrace ls` shows it for the run and for the process it launched; the
 * launched command redacted like a trace's. */
START_TEST(test_manifest_says_how_the_command_ended)
{
    struct world w;
    world_init(&w);
    const char *ok[] = {"/usr/bin/env", "python3", workers_script(), "worker", "--api-key",
                        "sk-12345",     NULL};
    const char *five[] = {
        "/usr/bin/env", "python3", workers_script(), "worker", "--exit-code", "5", NULL};
    const char *killed[] = {"/usr/bin/env", "python3", workers_script(), "worker", "--signal",
                            "SIGKILL",      NULL};
    struct run r = cutrace_run(&w, ok, 60);
    ck_assert_int_eq(r.status, 0);
    run_free(&r);
    char *manifest = NULL;
    ck_assert_int_ge(asprintf(&manifest, "%s/manifest.json", w.trace_dir), 0);
    FILE *f = fopen(manifest, "r");
    ck_assert_ptr_nonnull(f);
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    ck_assert_ptr_null(strstr(text, "sk-12345"));
    ck_assert_ptr_nonnull(strstr(text, "\"<redacted>\""));
    free(manifest);

    r = cutrace_run(&w, five, 60);
    ck_assert_int_eq(r.status, 5);
    run_free(&r);
    char *five_dir = strdup(w.trace_dir);
    /* The worker's own trace has it too: sys.exit(5) went through exit(). */
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT value FROM meta WHERE key = 'exit_status'"), 5);
    sqlite3_close(db);
    free_list(files, 1);

    r = cutrace_run(&w, killed, 60);
    ck_assert_int_eq(r.status, 137);
    run_free(&r);
    char *killed_dir = strdup(w.trace_dir);

    char *dir = runs_dir(&w);
    const char *ls_json[] = {"ls", "--json", dir, NULL};
    char *out = report(&w, ls_json, 0);
    char *cmd = report_json_text(out, "$.runs[0].cmdline");
    ck_assert_ptr_nonnull(strstr(cmd, "worker --api-key '<redacted>'"));
    free(cmd);
    ck_assert_int_eq(report_json_int(out, "$.runs[0].exit_status"), 0);
    ck_assert_int_eq(report_json_int(out, "$.runs[1].exit_status"), 5);
    ck_assert_ptr_null(report_json_text(out, "$.runs[2].exit_status"));
    ck_assert_int_eq(report_json_int(out, "$.runs[2].signal"), 9);
    ck_assert_int_gt(report_json_int(out, "$.runs[2].end_wall_ns"),
                     report_json_int(out, "$.runs[2].start_wall_ns") - 1);
    free(out);
    const char *ls_dir[] = {"ls", dir, NULL};
    out = report(&w, ls_dir, 0);
    ck_assert_ptr_nonnull(strstr(out, "exit 5"));
    ck_assert_ptr_nonnull(strstr(out, "killed by SIGKILL"));
    free(out);

    /* The process cutrace run launched ends as the manifest says. */
    const char *ls_five[] = {"ls", "--json", five_dir, NULL};
    out = report(&w, ls_five, 0);
    ck_assert_int_eq(report_json_int(out, "$.processes[0].exit_status"), 5);
    char *from = report_json_text(out, "$.processes[0].exit_from");
    ck_assert_str_eq(from, "manifest");
    free(from);
    free(out);
    const char *ls_killed[] = {"ls", killed_dir, NULL};
    out = report(&w, ls_killed, 0);
    ck_assert_ptr_nonnull(strstr(out, "killed by SIGKILL"));
    free(out);
    free(dir);
    free(five_dir);
    free(killed_dir);
    world_free(&w);
}
END_TEST

/* cutrace killed together with its command: the manifest written at the
 * start stays, and reads as "running or killed". */
START_TEST(test_run_killed_with_cutrace_keeps_start_manifest)
{
    struct world w;
    world_init(&w);
    char *dir = runs_dir(&w);
    /* The command says through a FIFO when its worker is done, and its pid. */
    char *fifo = NULL;
    ck_assert_int_ge(asprintf(&fifo, "%s/ready", w.root), 0);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    char script[3 * PATH_MAX];
    snprintf(script, sizeof script, "python3 %s worker; echo $$ > %s; exec sleep 120",
             workers_script(), fifo);
    const char *argv[] = {
        build_path("cutrace"), "run", "-o", dir, "--", "/bin/sh", "-c", script, NULL};
    struct running p = start_prog(&w, false, argv);
    FILE *ready = fopen(fifo, "r");
    ck_assert_ptr_nonnull(ready);
    long shell = 0;
    ck_assert_int_eq(fscanf(ready, "%ld", &shell), 1);
    fclose(ready);
    free(fifo);
    ck_assert_int_gt(shell, 0);
    ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
    ck_assert_int_eq(kill((pid_t)shell, SIGKILL), 0);
    struct run r = finish_prog(&p, 60);
    ck_assert_int_eq(r.status, 128 + SIGKILL);
    run_free(&r);

    /* One run: listed as a run with --csv=runs (dir,host,pid,start,end,...). */
    const char *ls_runs[] = {"ls", "--csv=runs", "--fail-on-problem", dir, NULL};
    char *out = report(&w, ls_runs, 3);
    char *row = strchr(out, '\n');
    ck_assert_ptr_nonnull(row);
    char pid_field[32];
    snprintf(pid_field, sizeof pid_field, ",%ld,", shell);
    ck_assert_ptr_nonnull(strstr(row, pid_field));
    /* start_wall_ns, then no end, no exit status, no signal; one trace. */
    char *after_pid = strstr(row, pid_field) + strlen(pid_field);
    char *fields = strchr(after_pid, ',');
    ck_assert_ptr_nonnull(fields);
    ck_assert_msg(strncmp(fields, ",,,,1,", 6) == 0, "row: %s", row);
    free(out);
    /* Its one run is what a report on DIR reads; the worker ended before. */
    const char *ls_dir[] = {"ls", dir, NULL};
    out = report(&w, ls_dir, 0);
    ck_assert_ptr_nonnull(strstr(out, "exited 0"));
    free(out);
    /* The run's own directory: the worker that finished before. */
    char **runs;
    ck_assert_uint_eq(list_runs(dir, &runs), 1);
    const char *ls_run[] = {"ls", runs[0], NULL};
    out = report(&w, ls_run, 0);
    ck_assert_ptr_nonnull(strstr(out, "exited 0"));
    free(out);
    free_list(runs, 1);
    free(dir);
    world_free(&w);
}
END_TEST

/* A wrapper script takes the server's flags and does not pass them on (a
 * real one hands them over through a config file or a variable): no traced
 * process's own command line, nor its launcher's, says
 * --mem-fraction-static; the launched command does, and `cutrace budget`
 * finds it there through the manifest (gm_launch_line). */
START_TEST(test_launcher_flags_reach_budget_through_manifest)
{
    struct world w;
    world_init(&w);
    /* As a user starts it: without CUTRACE_DIR of its own, cutrace is no
     * ancestor the tracer records (its line would hold the flag too). */
    w.extra_env[0] = "CUTRACE_DIR=";
    const char *argv[] = {"/bin/sh",
                          "-c",
                          "exec \"$0\" --framework sglang --tp 2",
                          build_path("examples/tp_server_sim"),
                          "--mem-fraction-static",
                          "0.55",
                          NULL};
    struct run r = cutrace_run(&w, argv, 120);
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 2);
    for (size_t i = 0; i < 2; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        ck_assert_ptr_null(strstr(tsql_text(db, "SELECT cmdline FROM process"), "--mem-fraction"));
        sqlite3_close(db);
    }
    free_list(files, 2);
    const char *budget[] = {"budget", "--framework", "sglang", "--json", w.trace_dir, NULL};
    char *out = report(&w, budget, 0);
    char *source = report_json_text(out, "$.parameters.mem_fraction_static_source");
    ck_assert_str_eq(source, "cmdline");
    free(source);
    source = report_json_text(out, "$.parameters.source_process");
    ck_assert_str_eq(source, "run"); /* the launched command's line */
    free(source);
    ck_assert_ptr_nonnull(strstr(out, "\"mem_fraction_static\": 0.55"));
    free(out);
    world_free(&w);
}
END_TEST

Suite *run_suite(void)
{
    Suite *s = suite_create("run");
    TCase *tc = tcase_create("run");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_torchrun_like_launcher_each_worker_traced);
    tcase_add_test(tc, test_multiprocessing_spawn_and_forkserver_workers_traced);
    tcase_add_test(tc, test_shell_wrapper_that_execs_the_worker);
    tcase_add_test(tc, test_existing_preload_kept_in_workers);
    tcase_add_test(tc, test_exit_status_passes_through);
    tcase_add_test(tc, test_signal_becomes_128_plus_n);
    tcase_add_test(tc, test_inherited_disable_is_cleared);
    tcase_add_test(tc, test_two_runs_in_one_dir_stay_apart);
    tcase_add_test(tc, test_manifest_says_how_the_command_ended);
    tcase_add_test(tc, test_run_killed_with_cutrace_keeps_start_manifest);
    tcase_add_test(tc, test_launcher_flags_reach_budget_through_manifest);
    suite_add_tcase(s, tc);
    return s;
}
