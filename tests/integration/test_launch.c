/*
 * test_launch.c - the `launch` suite: runs shaped like real servers under a
 * bare LD_PRELOAD + CUTRACE_DIR, where the flags are on a launcher that never
 * touches CUDA. tests/python/spawn_server.py starts one worker per rank with
 * multiprocessing's spawn, forkserver or fork method; each worker's trace
 * must hold the launcher's (redacted) command line among its ancestors, with
 * the forkserver between them for that method, so that `cutrace budget
 * --framework sglang` finds --mem-fraction-static on the launcher and says
 * so, and `cutrace diff` names the --enable-custom-all-reduce only the
 * launcher of run B had. The same runs then give the rest of issue 17 on
 * each start method: `cutrace ls` lists each worker with its rank and how it
 * ended, --rank picks one, the traces split over two directories read as
 * the run; the run packed and the pack copied elsewhere reads as the
 * directory, the launcher's flag still the launcher's. On each method too: a
 * run whose workers hang in ncclCommInitRank, killed whole with SIGKILL, in
 * which `cutrace collectives` and `timeline` say each worker died inside
 * it; and a run of each method under `cutrace run` into one -o DIR, where
 * the runs stay apart, each with its manifest. Every method on one
 * interpreter, spawn on every CPython pythons.sh finds (an absent one is
 * said "skipped"). Then the walk's end: a chain of three shells whose top
 * one lacks CUTRACE_DIR.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "harness.h"
#include "pythons.h"
#include "suites.h"

#define MAX_PYTHONS 8
#define TP          2
#define SECRET      "sk-launch-secret-0042"

static struct python pythons[MAX_PYTHONS];
static size_t npythons;
static char pythons_note[4096];

/* The interpreter every start method runs on: 3.12 when there, else the newest. */
static const struct python *main_python(void)
{
    for (size_t i = 0; i < npythons; i++)
        if (strcmp(pythons[i].version, "3.12") == 0)
            return &pythons[i];
    return npythons ? &pythons[npythons - 1] : NULL;
}

/* main_python(), or NULL said to be a skip. */
static const struct python *main_python_or_skip(void)
{
    const struct python *py = main_python();
    if (!py)
        fprintf(stderr, "launch: skipped: no CPython 3.10 or later\n");
    return py;
}

static void launch_world(struct world *w)
{
    world_init(w);
    w->extra_env[0] = "CUTRACE_FAKE_NCCL_TIMEOUT=30"; /* a rank that died fails the others soon */
}

/* The launcher's command line: argv[] (at least 12 slots) ends with `last`
 * (a switch, or NULL for none). */
static void server_argv(const char *argv[], const struct python *py, const char *method,
                        const char *last)
{
    const char *words[] = {py->path,
                           source_path("tests/python/spawn_server.py"),
                           "--method",
                           method,
                           "--tp",
                           "2",
                           "--mem-fraction-static",
                           "0.7",
                           "--api-key",
                           SECRET,
                           last,
                           NULL};
    memcpy(argv, words, sizeof words);
}

/* Runs the launcher traced; fails the test unless it and every worker succeeded. */
static void run_server(struct world *w, const struct python *py, const char *method,
                       bool custom_all_reduce)
{
    const char *argv[12];
    server_argv(argv, py, method, custom_all_reduce ? "--enable-custom-all-reduce" : NULL);
    struct run r = run_prog(w, true, argv, 120);
    ck_assert_msg(r.status == 0, "CPython %s, %s: launcher exited %d: %s", py->version, method,
                  r.status, r.err);
    ck_assert_uint_eq(count_lines(r.out), TP);
    run_free(&r);
}

/* What one worker's trace says about where it came from. */
struct lineage {
    char own[4096];
    int64_t ppid;
    int64_t depth_of_launcher; /* 0: no ancestor is the launcher */
    int64_t launcher_pid;
    int64_t ancestors;
    char first[4096], launcher[4096];
};

static struct lineage read_lineage(const char *trace, const char *method)
{
    struct lineage l = {0};
    sqlite3 *db = tsql_open(trace, SQLITE_OPEN_READONLY);
    snprintf(l.own, sizeof l.own, "%s", tsql_text(db, "SELECT cmdline FROM process"));
    l.ppid = tsql_int(db, "SELECT ppid FROM process");
    l.ancestors = tsql_int(db, "SELECT count(*) FROM ancestors");
    snprintf(l.first, sizeof l.first, "%s",
             tsql_text(db, "SELECT cmdline FROM ancestors WHERE depth = 1"));
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT depth FROM ancestors WHERE cmdline LIKE '%%spawn_server.py --method %s %%'"
             " ORDER BY depth LIMIT 1",
             method);
    l.depth_of_launcher = tsql_int(db, sql);
    if (l.depth_of_launcher == INT64_MIN)
        l.depth_of_launcher = 0;
    snprintf(sql, sizeof sql, "SELECT pid FROM ancestors WHERE depth = %lld",
             (long long)l.depth_of_launcher);
    l.launcher_pid = tsql_int(db, sql);
    snprintf(sql, sizeof sql, "SELECT cmdline FROM ancestors WHERE depth = %lld",
             (long long)l.depth_of_launcher);
    snprintf(l.launcher, sizeof l.launcher, "%s", tsql_text(db, sql));
    ck_assert_int_eq(tsql_int(db, "SELECT pid FROM ancestors WHERE depth = 1"), l.ppid);
    sqlite3_close(db);
    return l;
}

/*
 * The launcher left no trace, and each worker's names it: its own line as
 * the start method makes it, the launcher's redacted line at the depth the
 * method puts it (the forkserver between them), nothing above the launcher
 * (the test program that started it lacks CUTRACE_DIR). Returns the
 * launcher's pid and whether a worker's own line holds the flags (fork).
 */
static int64_t check_lineage(struct world *w, const struct python *py, const char *method)
{
    char **files;
    size_t n = list_traces(w, &files);
    ck_assert_msg(n == TP, "CPython %s, %s: %zu traces, expected one per worker", py->version,
                  method, n);
    int64_t depth = strcmp(method, "forkserver") == 0 ? 2 : 1, launcher = 0;
    for (size_t i = 0; i < n; i++) {
        struct lineage l = read_lineage(files[i], method);
        ck_assert_msg(l.depth_of_launcher == depth,
                      "CPython %s, %s: launcher at depth %lld, expected %lld (own %s; parent %s)",
                      py->version, method, (long long)l.depth_of_launcher, (long long)depth, l.own,
                      l.first);
        ck_assert_msg(l.ancestors == depth || getenv("CUTRACE_DIR"),
                      "%s: %lld ancestors recorded, the launcher is the top", method,
                      (long long)l.ancestors);
        ck_assert_ptr_nonnull(strstr(l.launcher, "--api-key '<redacted>'"));
        ck_assert_ptr_null(strstr(l.launcher, SECRET));
        ck_assert_ptr_nonnull(strstr(l.launcher, "--mem-fraction-static 0.7"));
        if (strcmp(method, "spawn") == 0) {
            ck_assert_ptr_nonnull(strstr(l.own, "from multiprocessing.spawn import spawn_main"));
            ck_assert_ptr_nonnull(strstr(l.own, "--multiprocessing-fork"));
        } else if (strcmp(method, "forkserver") == 0) {
            ck_assert_ptr_nonnull(strstr(l.first, "multiprocessing.forkserver"));
        } else {
            ck_assert_str_eq(l.own, l.launcher); /* a forked launcher */
        }
        ck_assert_ptr_null(strstr(l.own, SECRET));
        ck_assert(launcher == 0 || launcher == l.launcher_pid);
        launcher = l.launcher_pid;
    }
    free_list(files, n);
    return launcher;
}

/* `cutrace budget --framework sglang` with no --mem-fraction-static: the
 * launcher's value, said to be the launcher's (a forked worker's own line
 * is the launcher's and comes first). */
static void check_budget(struct world *w, const char *method, int64_t launcher)
{
    const char *json_args[] = {"budget", "--framework", "sglang", "--json", w->trace_dir, NULL};
    struct run r = harness_cutrace(w, json_args);
    ck_assert_msg(r.status == 0, "%s: budget exited %d: %s", method, r.status, r.err);
    char *source = report_json_text(r.out, "$.parameters.mem_fraction_static_source");
    ck_assert_str_eq(source, "cmdline");
    free(source);
    bool forked = strcmp(method, "fork") == 0;
    char *whose = report_json_text(r.out, "$.parameters.source_process");
    ck_assert_str_eq(whose, forked ? "own" : "launcher");
    free(whose);
    if (!forked)
        ck_assert_int_eq(report_json_int(r.out, "$.parameters.source_pid"), launcher);
    ck_assert_int_eq(report_json_int(r.out, "$.jobs[0].ranks_analysed"), TP);
    run_free(&r);

    const char *text_args[] = {"budget", "--framework", "sglang", w->trace_dir, NULL};
    r = harness_cutrace(w, text_args);
    ck_assert_int_eq(r.status, 0);
    char want[128];
    snprintf(want, sizeof want, "--mem-fraction-static 0.7 (from launcher pid %lld's command line)",
             (long long)launcher);
    ck_assert_msg(forked || strstr(r.out, want), "%s: no \"%s\" in:\n%s", method, want, r.out);
    run_free(&r);
}

/* Runs a shell script untraced, "$1".. being args (NULL-ended, at most 4); it must succeed. */
static void shell(struct world *w, const char *script, const char *const args[])
{
    const char *argv[8] = {"/bin/sh", "-c", script, "sh"};
    for (size_t i = 0; args[i]; i++) {
        ck_assert_uint_lt(i, 4);
        argv[4 + i] = args[i];
    }
    struct run r = run_prog(w, false, argv, 60);
    ck_assert_msg(r.status == 0, "%s: %s", script, r.err);
    run_free(&r);
}

/* "$.processes[i].field" of an ls --json report. */
static int64_t ls_int(const char *json, size_t i, const char *field)
{
    char path[128];
    snprintf(path, sizeof path, "$.processes[%zu].%s", i, field);
    return report_json_int(json, path);
}

static char *ls_text(const char *json, size_t i, const char *field)
{
    char path[128];
    snprintf(path, sizeof path, "$.processes[%zu].%s", i, field);
    return report_json_text(json, path);
}

/*
 * `cutrace ls` of a run: one line per worker, each with the RANK and
 * LOCAL_RANK its launcher gave it (and, when its init returned, the same
 * NCCL rank) and how it ended: exit status 0, or killed.
 */
static void check_ls_lines(struct world *w, const char *method, bool killed)
{
    const char *text_args[] = {"ls", w->trace_dir, NULL};
    struct run r = harness_cutrace(w, text_args);
    ck_assert_msg(r.status == 0, "%s: ls: %s", method, r.err);
    ck_assert_uint_eq(count_lines(r.out), TP + 1); /* the header and one line per worker */
    ck_assert_msg(count_occurrences(r.out, killed ? " killed " : " exited 0") == TP,
                  "%s: ls said:\n%s", method, r.out);
    run_free(&r);

    const char *json_args[] = {"ls", "--json", w->trace_dir, NULL};
    r = harness_cutrace(w, json_args);
    ck_assert_int_eq(r.status, 0);
    unsigned seen = 0;
    for (size_t i = 0; i < TP; i++) {
        int64_t rank = ls_int(r.out, i, "env_rank");
        ck_assert_msg(rank >= 0 && rank < TP && !(seen & 1u << rank), "%s: env_rank %lld", method,
                      (long long)rank);
        seen |= 1u << rank;
        ck_assert_int_eq(ls_int(r.out, i, "local_rank"), rank);
        ck_assert_int_eq(ls_int(r.out, i, "world_size"), TP);
        char *ended = ls_text(r.out, i, "end_state");
        ck_assert_str_eq(ended, killed                         ? "killed"
                                : strcmp(method, "spawn") == 0 ? "exit"
                                                               : "_exit");
        free(ended);
        if (!killed) {
            ck_assert_int_eq(ls_int(r.out, i, "rank"), rank); /* NCCL's agrees */
            ck_assert_int_eq(ls_int(r.out, i, "exit_status"), 0);
        }
    }
    run_free(&r);
}

/* `--rank 1` picks one worker; the traces split over two directories given
 * together are the run (the same ls, one 2-rank job for budget). */
static void check_ls_filters_and_paths(struct world *w, const char *method)
{
    const char *rank_args[] = {"ls", "--rank", "1", "--json", w->trace_dir, NULL};
    struct run r = harness_cutrace(w, rank_args);
    ck_assert_msg(r.status == 0, "%s: ls --rank 1: %s", method, r.err);
    ck_assert_int_eq(ls_int(r.out, 0, "rank"), 1);
    ck_assert_uint_eq(count_occurrences(r.out, "\"file\": "), 1);
    run_free(&r);

    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/a", w->root);
    snprintf(b, sizeof b, "%s/b", w->root);
    const char *dirs[] = {w->trace_dir, a, b, NULL};
    shell(w,
          "cd \"$1\" && set -- *.db \"$2\" \"$3\" && mkdir \"$3\" \"$4\" && cp \"$1\" \"$3\""
          " && cp \"$2\" \"$4\"",
          dirs);
    const char *ls_whole[] = {"ls", w->trace_dir, NULL}, *ls_both[] = {"ls", a, b, NULL};
    struct run whole = harness_cutrace(w, ls_whole), both = harness_cutrace(w, ls_both);
    ck_assert_msg(both.status == 0, "%s: ls A B: %s", method, both.err);
    ck_assert_str_eq(both.out, whole.out);
    run_free(&whole);
    run_free(&both);
    const char *budget_both[] = {"budget", "--framework", "sglang", "--json", a, b, NULL};
    r = harness_cutrace(w, budget_both);
    ck_assert_msg(r.status == 0, "%s: budget A B: %s", method, r.err);
    ck_assert_int_eq(report_json_int(r.out, "$.jobs[0].ranks_analysed"), TP);
    ck_assert_uint_eq(count_occurrences(r.out, "\"ranks_traced\": "), 1); /* one job */
    run_free(&r);
}

/*
 * The run packed, the pack copied to another directory: summary and budget
 * read there as from the directory (their spellings of the paths aside),
 * and the launcher's flag still comes from the launcher, whose line the
 * pack kept among each worker's ancestors.
 */
static void check_pack(struct world *w, const char *method, int64_t launcher)
{
    char pack[4200], elsewhere[4200], moved[4400];
    snprintf(pack, sizeof pack, "%s/run.cutrace", w->root);
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", w->root);
    snprintf(moved, sizeof moved, "%s/run.cutrace", elsewhere);
    const char *pack_args[] = {"pack", w->trace_dir, "-o", pack, NULL};
    struct run r = harness_cutrace(w, pack_args);
    ck_assert_msg(r.status == 0, "%s: pack: %s", method, r.err);
    run_free(&r);
    ck_assert_int_eq(mkdir(elsewhere, 0700), 0);
    const char *files[] = {pack, elsewhere, NULL};
    shell(w, "cp \"$1\" \"$2\"", files);

    char dir_prefix[4200], pack_prefix[4500];
    snprintf(dir_prefix, sizeof dir_prefix, "%s/", w->trace_dir);
    snprintf(pack_prefix, sizeof pack_prefix, "%s:", moved);
    static const char *const reports[][5] = {
        {"summary", "--json", NULL},
        {"budget", "--framework", "sglang", "--json", NULL},
    };
    for (size_t i = 0; i < sizeof reports / sizeof reports[0]; i++) {
        int status_dir, status_pack;
        char *from_dir = report_without_paths(w, reports[i], w->trace_dir, dir_prefix, &status_dir);
        char *from_pack = report_without_paths(w, reports[i], moved, pack_prefix, &status_pack);
        ck_assert_int_eq(status_dir, 0);
        ck_assert_int_eq(status_pack, 0);
        ck_assert_msg(strcmp(from_dir, from_pack) == 0, "%s: %s differs:\n%.1500s\n---\n%.1500s",
                      method, reports[i][0], from_dir, from_pack);
        free(from_dir);
        free(from_pack);
    }

    const char *budget_args[] = {"budget", "--framework", "sglang", "--json", moved, NULL};
    r = harness_cutrace(w, budget_args);
    ck_assert_int_eq(r.status, 0);
    char *whose = report_json_text(r.out, "$.parameters.source_process");
    ck_assert_str_eq(whose, strcmp(method, "fork") == 0 ? "own" : "launcher");
    free(whose);
    if (strcmp(method, "fork") != 0)
        ck_assert_int_eq(report_json_int(r.out, "$.parameters.source_pid"), launcher);
    run_free(&r);
    sqlite3 *db = tsql_open(moved, SQLITE_OPEN_READONLY);
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(DISTINCT process) FROM ancestors WHERE pid = %lld"
             " AND cmdline LIKE '%%spawn_server.py --method %s %%'",
             (long long)launcher, method);
    ck_assert_int_eq(tsql_int(db, sql), TP);
    sqlite3_close(db);
}

static void say_pythons(void)
{
    for (const char *p = pythons_note; *p;) {
        size_t n = strcspn(p, "\n");
        fprintf(stderr, "launch: %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

static const char *const methods[] = {"spawn", "forkserver", "fork"};

/* Every start method on the main interpreter. */
START_TEST(test_start_methods)
{
    const struct python *py = main_python_or_skip();
    if (!py)
        return;
    struct world w;
    launch_world(&w);
    run_server(&w, py, methods[_i], false);
    int64_t launcher = check_lineage(&w, py, methods[_i]);
    check_budget(&w, methods[_i], launcher);
    check_ls_lines(&w, methods[_i], false);
    check_ls_filters_and_paths(&w, methods[_i]);
    check_pack(&w, methods[_i], launcher);
    world_free(&w);
}
END_TEST

static void sleep_100ms(void)
{
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* How many of the TP workers are blocked in their call, their pids in
 * blocked[], as the fake NCCL notes them in `note` (polled, not timed: the
 * bound only ends a test whose workers never get there). */
static size_t wait_blocked(const char *note, int blocked[TP])
{
    size_t n = 0;
    for (int attempt = 0; attempt < 600 && n < TP; attempt++) {
        sleep_100ms();
        FILE *f = fopen(note, "r");
        n = 0;
        while (f && n < TP && fscanf(f, "%d ncclCommInitRank\n", &blocked[n]) == 1)
            n++;
        if (f)
            fclose(f);
    }
    return n;
}

/* Once the kernel has ended the workers (a little after the launcher), no
 * trace is still running and each ring has been folded. */
static struct run collectives_when_folded(struct world *w)
{
    const char *args[] = {"collectives", w->trace_dir, NULL};
    struct run r = harness_cutrace(w, args);
    for (int attempt = 0; attempt < 600 && strstr(r.out, "(still running)"); attempt++) {
        sleep_100ms();
        run_free(&r);
        r = harness_cutrace(w, args);
    }
    ck_assert_msg(r.status == 0, "collectives: %s", r.err);
    ck_assert_msg(!strstr(r.out, "(still running)"), "%s", r.out);
    return r;
}

/*
 * The workers hang in ncclCommInitRank (as when a peer never comes); the
 * whole server, launcher, forkserver and workers, is killed with SIGKILL.
 * The launcher still leaves no trace; `cutrace collectives` groups the
 * workers as a communicator that never finished its init and says each
 * died inside ncclCommInitRank, `cutrace timeline` too; `cutrace ls` lists
 * them killed, with the ranks their launcher gave them.
 */
START_TEST(test_killed_inside_init)
{
    const struct python *py = main_python_or_skip();
    if (!py)
        return;
    const char *method = methods[_i];
    struct world w;
    launch_world(&w);
    char note[4096], note_env[4200];
    snprintf(note, sizeof note, "%s/blocked", w.root);
    snprintf(note_env, sizeof note_env, "CUTRACE_FAKE_BLOCK_NOTE=%s", note);
    w.extra_env[1] = "CUTRACE_FAKE_BLOCK=ncclCommInitRank";
    w.extra_env[2] = note_env;
    const char *argv[12];
    server_argv(argv, py, method, "--own-process-group");
    pid_t launcher = spawn_prog(&w, true, argv);
    int blocked[TP];
    size_t nblocked = wait_blocked(note, blocked);
    /* The whole group, whether or not they got there: nothing is left hanging. */
    ck_assert_int_eq(kill(-launcher, SIGKILL), 0); /* it set up its group at its start */
    ck_assert_int_eq(wait_prog(launcher, 60), 128 + SIGKILL);
    ck_assert_msg(nblocked == TP, "%s: only %zu of %d workers blocked in ncclCommInitRank", method,
                  nblocked, TP);

    struct run r = collectives_when_folded(&w);
    ck_assert_msg(!strstr(r.out, "no NCCL communicators or calls"), "%s", r.out);
    ck_assert_msg(
        strstr(r.out, "(2 ranks) never finished its init: 2 ranks inside ncclCommInitRank"),
        "%s: collectives said:\n%s", method, r.out);
    for (size_t i = 0; i < TP; i++) {
        char died[96];
        snprintf(died, sizeof died, "pid %d: died inside ncclCommInitRank, entered ", blocked[i]);
        ck_assert_msg(strstr(r.out, died), "%s: no \"%s\" in:\n%s", method, died, r.out);
    }
    run_free(&r);
    const char *json_args[] = {"collectives", "--json", w.trace_dir, NULL};
    r = harness_cutrace(&w, json_args);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(report_json_int(r.out, "$.in_flight.unfinished_inits[0].ranks_inside"), TP);
    ck_assert_int_eq(report_json_int(r.out, "$.in_flight.unfinished_inits[0].nranks"), TP);
    run_free(&r);

    const char *timeline_args[] = {"timeline", w.trace_dir, NULL};
    r = harness_cutrace(&w, timeline_args);
    ck_assert_int_eq(r.status, 0);
    for (size_t i = 0; i < TP; i++) {
        char died[96];
        snprintf(died, sizeof died, "pid %d, thread %d: died inside ncclCommInitRank", blocked[i],
                 blocked[i]);
        ck_assert_msg(strstr(r.out, died), "%s: no \"%s\" in:\n%s", method, died, r.out);
    }
    run_free(&r);

    /* Only the workers' traces: the launcher (and forkserver) made none. */
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), TP);
    for (size_t i = 0; i < TP; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        int64_t pid = tsql_int(db, "SELECT pid FROM process");
        ck_assert(pid == blocked[0] || pid == blocked[1]);
        ck_assert_str_eq(tsql_text(db, "SELECT api FROM inflight_calls"), "ncclCommInitRank");
        sqlite3_close(db);
    }
    free_list(files, TP);
    check_ls_lines(&w, method, true);
    world_free(&w);
}
END_TEST

/* The -o DIR of the world's `cutrace run`s: ROOT/runs (static). */
static const char *runs_dir(const struct world *w)
{
    static char dir[4200];
    snprintf(dir, sizeof dir, "%s/runs", w->root);
    return dir;
}

/*
 * One run of each start method under `cutrace run -o DIR`, into the same
 * DIR: each run its own directory with its manifest (the launched command
 * redacted, its exit status), its workers' traces as under a bare
 * LD_PRELOAD (the launcher's line among their ancestors, cutrace's not),
 * budget finding the flag there; DIR itself lists the three runs and a
 * report on it refuses to mix them.
 */
START_TEST(test_methods_under_cutrace_run)
{
    const struct python *py = main_python_or_skip();
    if (!py)
        return;
    struct world w;
    launch_world(&w);
    /* As a user starts it: cutrace run sets CUTRACE_DIR, nothing above it. */
    w.extra_env[1] = "CUTRACE_DIR=";
    const char *dir = runs_dir(&w);
    for (size_t m = 0; m < 3; m++) {
        const char *argv[5 + 12] = {build_path("cutrace"), "run", "-o", dir, "--"};
        server_argv(argv + 5, py, methods[m], NULL);
        struct run r = run_prog(&w, false, argv, 120);
        ck_assert_msg(r.status == 0, "cutrace run, %s: exited %d: %s", methods[m], r.status, r.err);
        ck_assert_uint_eq(count_lines(r.out), TP);
        run_free(&r);
    }

    const char *ls_runs[] = {"ls", "--json", dir, NULL};
    struct run runs = harness_cutrace(&w, ls_runs);
    ck_assert_msg(runs.status == 0, "ls DIR: %s", runs.err);
    char *run_dirs[3];
    for (size_t m = 0; m < 3; m++) {
        char path[64];
        snprintf(path, sizeof path, "$.runs[%zu].dir", m);
        run_dirs[m] = report_json_text(runs.out, path);
        snprintf(path, sizeof path, "$.runs[%zu].traces", m);
        ck_assert_int_eq(report_json_int(runs.out, path), TP);
        snprintf(path, sizeof path, "$.runs[%zu].exit_status", m);
        ck_assert_int_eq(report_json_int(runs.out, path), 0);
        snprintf(path, sizeof path, "$.runs[%zu].cmdline", m);
        char *cmdline = report_json_text(runs.out, path), want[64];
        snprintf(want, sizeof want, "--method %s ", methods[m]); /* in start order */
        ck_assert_msg(strstr(cmdline, want), "run %zu: %s", m, cmdline);
        ck_assert_ptr_nonnull(strstr(cmdline, "--api-key '<redacted>'"));
        ck_assert_ptr_null(strstr(cmdline, SECRET));
        free(cmdline);
    }
    run_free(&runs);
    const char *summary[] = {"summary", dir, NULL};
    struct run r = harness_cutrace(&w, summary);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "holds 3 runs; name one: "), "%s", r.err);
    run_free(&r);

    for (size_t m = 0; m < 3; m++) {
        char manifest[4400];
        snprintf(manifest, sizeof manifest, "%s/manifest.json", run_dirs[m]);
        FILE *f = fopen(manifest, "r");
        ck_assert_msg(f, "%s: no manifest", run_dirs[m]);
        char text[16384];
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = '\0';
        ck_assert_msg(strstr(text, "spawn_server.py") && strstr(text, "\"<redacted>\""), "%s",
                      text);
        ck_assert_ptr_null(strstr(text, SECRET));
        free(w.trace_dir);
        w.trace_dir = run_dirs[m];
        int64_t launcher = check_lineage(&w, py, methods[m]);
        check_budget(&w, methods[m], launcher);
    }
    world_free(&w);
}
END_TEST

/* spawn, the method SGLang and vLLM use, on every other interpreter. */
START_TEST(test_spawn_on_every_python)
{
    const struct python *py = &pythons[_i];
    if (py == main_python())
        return; /* test_start_methods ran it */
    struct world w;
    launch_world(&w);
    run_server(&w, py, "spawn", false);
    check_lineage(&w, py, "spawn");
    world_free(&w);
}
END_TEST

/* Run B's launcher adds --enable-custom-all-reduce; the workers' own lines
 * are alike: diff must name the flag. */
START_TEST(test_diff_names_the_launchers_flag)
{
    const struct python *py = main_python_or_skip();
    if (!py)
        return;
    struct world a, b;
    launch_world(&a);
    launch_world(&b);
    run_server(&a, py, "spawn", false);
    run_server(&b, py, "spawn", true);
    const char *json_args[] = {"diff", "--json", a.trace_dir, b.trace_dir, NULL};
    struct run r = harness_cutrace(&a, json_args);
    ck_assert_msg(r.status == 0 || r.status == 1, "diff exited %d: %s", r.status, r.err);
    char *added = report_json_text(r.out, "$.config.cmdline.added[0]");
    ck_assert_str_eq(added, "--enable-custom-all-reduce");
    free(added);
    run_free(&r);
    const char *text_args[] = {"diff", a.trace_dir, b.trace_dir, NULL};
    r = harness_cutrace(&a, text_args);
    ck_assert_msg(strstr(r.out, "B adds: --enable-custom-all-reduce"), "diff said:\n%s", r.out);
    ck_assert_ptr_null(strstr(r.out, SECRET));
    run_free(&r);
    world_free(&a);
    world_free(&b);
}
END_TEST

/*
 * The walk's end: T (no CUTRACE_DIR) starts S2 with it, S2 starts S1, S1
 * the worker. The worker's ancestors are S1 then S2, and not T: the process
 * that set CUTRACE_DIR is not part of the run.
 */
START_TEST(test_walk_stops_at_the_shell_that_set_the_run)
{
    struct world w;
    world_init(&w);
    char dir_env[4200], inner[4200];
    snprintf(dir_env, sizeof dir_env, "LAUNCH_TRACE_DIR=%s", w.trace_dir);
    snprintf(inner, sizeof inner, "LAUNCH_INNER=python3 '%s' worker; exit $?",
             source_path("tests/progs/run_workers.py"));
    w.extra_env[0] = dir_env;
    w.extra_env[1] = inner;
    w.extra_env[2] = "LAUNCH_MID=/bin/sh -c \"$LAUNCH_INNER\" s1; exit $?";
    w.extra_env[3] = "CUTRACE_DIR="; /* T starts without it */
    const char *argv[] = {
        "/bin/sh", "-c", "CUTRACE_DIR=\"$LAUNCH_TRACE_DIR\" /bin/sh -c \"$LAUNCH_MID\" s2; exit $?",
        "top-shell", NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_msg(r.status == 0, "chain exited %d: %s", r.status, r.err);
    run_free(&r);
    char **files;
    size_t n = list_traces(&w, &files);
    ck_assert_uint_eq(n, 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM ancestors"), 2);
    ck_assert_int_eq(tsql_int(db, "SELECT pid FROM ancestors WHERE depth = 1"),
                     tsql_int(db, "SELECT ppid FROM process"));
    ck_assert_ptr_nonnull(
        strstr(tsql_text(db, "SELECT cmdline FROM ancestors WHERE depth = 1"), "run_workers.py"));
    ck_assert_ptr_nonnull(
        strstr(tsql_text(db, "SELECT cmdline FROM ancestors WHERE depth = 2"), "LAUNCH_INNER"));
    ck_assert_int_eq(
        tsql_int(db, "SELECT count(*) FROM ancestors WHERE cmdline LIKE '%top-shell%'"), 0);
    ck_assert_int_gt(tsql_int(db, "SELECT start_ticks FROM ancestors WHERE depth = 2"), 0);
    sqlite3_close(db);
    free_list(files, n);
    world_free(&w);
}
END_TEST

Suite *launch_suite(void)
{
    npythons = pythons_find(pythons, MAX_PYTHONS, pythons_note, sizeof pythons_note);
    say_pythons();
    Suite *s = suite_create("launch");
    TCase *tc = tcase_create("launch");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_start_methods, 0, 3);
    tcase_add_loop_test(tc, test_spawn_on_every_python, 0, (int)npythons);
    tcase_add_loop_test(tc, test_killed_inside_init, 0, 3);
    tcase_add_test(tc, test_methods_under_cutrace_run);
    tcase_add_test(tc, test_diff_names_the_launchers_flag);
    tcase_add_test(tc, test_walk_stops_at_the_shell_that_set_the_run);
    suite_add_tcase(s, tc);
    return s;
}
