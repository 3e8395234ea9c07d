/*
 * test_startfinish.c - the first and the last moments of a traced process:
 * creating the trace under a file-size limit or on a full disk, an exec
 * that fails or starts an untraced image, and calls made after the tracer's
 * own destructor. In each the program behaves as untraced, and the trace
 * neither loses calls nor says anything untrue.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY);
    ck_assert_msg(in >= 0, "%s: %s", from, strerror(errno));
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ck_assert_msg(out >= 0, "%s: %s", to, strerror(errno));
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        ck_assert_int_eq(write(out, buf, (size_t)n), n);
    ck_assert_int_eq(n, 0);
    close(in);
    close(out);
}

/* Every plain file of `from` (a trace directory) into the new directory `to`. */
static void copy_dir(const char *from, const char *to)
{
    ck_assert_int_eq(mkdir(to, 0700), 0);
    DIR *d = opendir(from);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_type != DT_REG)
            continue;
        char src[8400], dst[8400];
        snprintf(src, sizeof src, "%s/%s", from, e->d_name);
        snprintf(dst, sizeof dst, "%s/%s", to, e->d_name);
        copy_file(src, dst);
    }
    closedir(d);
}

static size_t count_cutrace_lines(const char *err)
{
    size_t n = 0;
    for (const char *p = err; (p = strstr(p, "cutrace:")); p++)
        n++;
    return n;
}

/* The one trace of the world, opened read-only (the harness asserts there is one). */
static sqlite3 *the_trace(struct world *w)
{
    char **files;
    ck_assert_uint_eq(list_traces(w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    free_list(files, 1);
    return db;
}

static const char *end_state(sqlite3 *db)
{
    return tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'");
}

static int64_t mallocs(sqlite3 *db)
{
    return tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'cudaMalloc'");
}

static void recover(struct world *w)
{
    const char *args[] = {"recover", w->trace_dir, NULL};
    struct run r = harness_cutrace(w, args);
    ck_assert_msg(r.status == 0, "cutrace recover: %s", r.err);
    run_free(&r);
}

/* Names in the trace directory beginning with prefix (rings, exec markers). */
static int count_named(struct world *w, const char *prefix, const char *suffix)
{
    DIR *d = opendir(w->trace_dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name), slen = strlen(suffix);
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0 && len >= slen &&
             strcmp(e->d_name + len - slen, suffix) == 0;
    }
    closedir(d);
    return n;
}

/*
 * Traced runs of w preload libsf_fail.so after libcutrace.so, failing `fn`
 * (see tests/progs/sf_fail.c); buf holds the LD_PRELOAD entry.
 */
static void fail_in_tracer(struct world *w, char *buf, size_t cap, const char *fn)
{
    snprintf(buf, cap, "LD_PRELOAD=%s:%s", build_path("libcutrace.so"),
             build_path("progs/libsf_fail.so"));
    w->extra_env[0] = buf;
    w->extra_env[1] =
        strcmp(fn, "posix_fallocate") == 0 ? "SF_FAIL=posix_fallocate" : "SF_FAIL=lock";
}

/* Runs argv untraced, then traced: the same exit status and stdout. */
static struct run same_as_untraced(struct world *w, const char *const argv[], int expect_status)
{
    /* Untraced means without any preload, the failing one too. */
    const char *env[8];
    memcpy(env, w->extra_env, sizeof env);
    bool failing = w->extra_env[0] && strncmp(w->extra_env[0], "LD_PRELOAD=", 11) == 0;
    if (failing)
        memset(w->extra_env, 0, sizeof w->extra_env);
    struct run plain = run_prog(w, false, argv, 60);
    memcpy(w->extra_env, env, sizeof env);
    struct run traced = run_prog(w, true, argv, 60);
    ck_assert_int_eq(plain.status, expect_status);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    run_free(&plain);
    return traced;
}

/* The same, for a program that must not hear from the tracer at all. */
static void quietly_as_untraced(struct world *w, const char *const argv[], int expect_status)
{
    struct run r = same_as_untraced(w, argv, expect_status);
    ck_assert_msg(r.err_len == 0, "%s", r.err);
    run_free(&r);
}

/* The world's one trace holds `calls` cudaMalloc calls and says it ended `state`. */
static void expect_trace(struct world *w, int64_t calls, const char *state)
{
    sqlite3 *db = the_trace(w);
    ck_assert_int_eq(mallocs(db), calls);
    ck_assert_str_eq(end_state(db), state);
    sqlite3_close(db);
}

/* The fake driver's own state file must exist before a file-size limit applies. */
static void make_fake_state(struct world *w, const char *const argv[])
{
    struct run warm = run_prog(w, false, argv, 60);
    ck_assert_int_eq(warm.status, 0);
    run_free(&warm);
}

/*
 * Item 2 of issue 14: under a file-size limit too small for the trace, the
 * program was killed by SIGXFSZ (status 153) because the trace was created
 * on its own thread. Now every trace write happens on a thread that blocks
 * all signals: the program exits as untraced, with at most one warning.
 */
START_TEST(test_file_size_limits_never_kill_the_program)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/sf_life"), "plain", "25", NULL};
    make_fake_state(&w, argv);
    static const long kib[] = {4, 8, 16, 32, 48, 64, 72, 80, 88, 96, 128};
    for (size_t i = 0; i < sizeof kib / sizeof kib[0]; i++) {
        w.fsize_limit = kib[i] * 1024;
        struct run traced = same_as_untraced(&w, argv, 0);
        ck_assert_msg(count_cutrace_lines(traced.err) <= 1, "%ld KiB: %s", kib[i], traced.err);
        ck_assert_uint_eq(count_lines(traced.err), count_cutrace_lines(traced.err));
        run_free(&traced);
    }
    w.fsize_limit = 0;
    world_free(&w);
}
END_TEST

/*
 * The same with three 100 KB CUDA_ variables under 256 KiB: their values
 * once made the trace larger than the limit. They are stored cut to
 * CT_ENV_VALUE_MAX (4096) bytes, so the process is traced in full.
 */
START_TEST(test_huge_environment_values_are_cut_and_traced)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/sf_life"), "plain", "25", NULL};
    make_fake_state(&w, argv);
    char *vars[3];
    for (int i = 0; i < 3; i++) {
        size_t n = 100 * 1000;
        vars[i] = malloc(n + 32);
        int head = snprintf(vars[i], 32, "CUDA_HUGE_%d=", i);
        memset(vars[i] + head, 'a' + i, n);
        vars[i][head + (int)n] = '\0';
        w.extra_env[i] = vars[i];
    }
    w.fsize_limit = 256 * 1024;
    quietly_as_untraced(&w, argv, 0);
    w.fsize_limit = 0;
    expect_trace(&w, 25, "exit");
    sqlite3 *db = the_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM env WHERE name LIKE 'CUDA_HUGE_%'"), 3);
    ck_assert_int_le(tsql_int(db, "SELECT max(length(value)) FROM env"), 4096 + 48);
    ck_assert_ptr_nonnull(strstr(tsql_text(db, "SELECT value FROM env WHERE name = 'CUDA_HUGE_1'"),
                                 "<cut: 100000 bytes>"));
    sqlite3_close(db);
    for (int i = 0; i < 3; i++)
        free(vars[i]);
    world_free(&w);
}
END_TEST

/*
 * Item 7: after a failed exec the ring file was already gone and the trace
 * said "exec": a later SIGKILL lost every call since, and the trace lied.
 * Now the ring stays until the exec has succeeded and the trace is told
 * "exec" only then (by the new image, or by `cutrace recover`).
 */
START_TEST(test_exec_is_recorded_only_once_it_happened)
{
    /* A failed exec, more calls, then SIGKILL: nothing lost, "killed". */
    struct world w;
    world_init(&w);
    const char *fail_kill[] = {build_path("progs/sf_life"), "exec-fail-kill", "8", NULL};
    quietly_as_untraced(&w, fail_kill, 128 + 9);
    sqlite3 *db = the_trace(&w);
    ck_assert_str_eq(end_state(db), "running");
    sqlite3_close(db);
    ck_assert_int_eq(count_named(&w, "", ".ring"), 1);
    recover(&w);
    expect_trace(&w, 16, "killed");
    ck_assert_int_eq(count_named(&w, ".exec-", ""), 0);
    world_free(&w);

    /* An exec into an image that is not traced: `cutrace recover` completes it. */
    world_init(&w);
    const char *untraced[] = {build_path("progs/sf_life"), "exec-untraced", "8", NULL};
    quietly_as_untraced(&w, untraced, 0);
    ck_assert_int_eq(count_named(&w, ".exec-", ""), 0); /* no marker for an untraced image */
    recover(&w);
    expect_trace(&w, 8, "exec");
    ck_assert_int_eq(count_named(&w, "", ".ring"), 0);
    world_free(&w);

    /* An exec into a traced image: it completes the trace itself (also
     * test_every_way_out_commits), leaving one sealed file. */
    world_init(&w);
    const char *traced[] = {build_path("progs/rt_exit"), "exec", "8", NULL};
    quietly_as_untraced(&w, traced, 0);
    expect_trace(&w, 8, "exec");
    db = the_trace(&w);
    ck_assert_str_eq(tsql_text(db, "PRAGMA journal_mode"), "delete");
    sqlite3_close(db);
    ck_assert_int_eq(count_named(&w, "", ".ring"), 0);
    ck_assert_int_eq(count_named(&w, "", "-wal"), 0);
    ck_assert_int_eq(count_named(&w, ".exec-", ""), 0);
    world_free(&w);

    /* No ring file (no locks on this file system): the trace is told "exec"
     * before the exec, and "running" again when it fails. */
    world_init(&w);
    char preload[8400];
    fail_in_tracer(&w, preload, sizeof preload, "lock");
    fail_kill[0] = build_path("progs/sf_life"); /* build_path's buffers are reused */
    struct run r = same_as_untraced(&w, fail_kill, 128 + 9);
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "cutrace: no crash-safe buffer"));
    run_free(&r);
    ck_assert_int_eq(count_named(&w, "", ".ring"), 0);
    db = the_trace(&w);
    ck_assert_int_ge(mallocs(db), 8);
    ck_assert_str_eq(end_state(db), "running");
    sqlite3_close(db);
    world_free(&w);
}
END_TEST

/*
 * Item 8: a library the program links has a destructor, run after
 * libcutrace's final flush, that makes CUDA calls. They were committed to
 * the -wal file only; now the finished trace is sealed (rollback journal)
 * and they land in the .db itself, which is complete when copied alone.
 */
START_TEST(test_calls_after_the_tracers_destructor_are_in_the_db_alone)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/sf_life"), "late", "5", NULL};
    quietly_as_untraced(&w, argv, 0);
    ck_assert_int_eq(count_named(&w, "", "-wal"), 0);
    ck_assert_int_eq(count_named(&w, "", "-shm"), 0);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    char alone[4400];
    snprintf(alone, sizeof alone, "%s/alone.db", w.root);
    copy_file(files[0], alone);
    free_list(files, 1);
    sqlite3 *db = tsql_open(alone, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(mallocs(db), 10);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api = 'cudaFree'"), 5);
    ck_assert_str_eq(end_state(db), "exit");
    sqlite3_close(db);
    world_free(&w);
}
END_TEST

/* A private mount namespace with a tmpfs of `size` as the trace directory; false to skip. */
static bool trace_dir_on_small_tmpfs(struct world *w, const char *size)
{
    char mnt[4200];
    snprintf(mnt, sizeof mnt, "%s/mnt", w->root);
    ck_assert_int_eq(mkdir(mnt, 0700), 0);
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s", size);
    /* Check runs each test in a process of its own: the namespace is the test's. */
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", mnt, "tmpfs", 0, opts) != 0) {
        fprintf(stderr, "skipped: cannot mount a tmpfs (%s); needs root\n", strerror(errno));
        return false;
    }
    free(w->trace_dir);
    ck_assert_int_ge(asprintf(&w->trace_dir, "%s/trace", mnt), 0);
    return true;
}

static void unmount_trace_dir(struct world *w)
{
    char mnt[4200];
    snprintf(mnt, sizeof mnt, "%s/mnt", w->root);
    ck_assert_int_eq(umount2(mnt, MNT_DETACH), 0);
}

/*
 * Item 9: the trace directory fills up right at the start. The ring asked
 * for (8 MiB) did not fit, so the trace had no crash buffer, its writer
 * stopped at the first commit, and the trace said only "still running, or
 * killed". Now the ring shrinks to fit, and holds the reason the writer
 * stopped: once the trace is where it can be written, every report says it.
 */
START_TEST(test_full_disk_at_start_trace_says_why)
{
    struct world w;
    world_init(&w);
    if (!trace_dir_on_small_tmpfs(&w, "256k")) {
        world_free(&w);
        return;
    }
    const char *argv[] = {build_path("progs/sf_life"), "plain", "2000", NULL};
    struct run r = same_as_untraced(&w, argv, 0);
    ck_assert_uint_eq(count_cutrace_lines(r.err), 1);
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "full"));
    run_free(&r);

    char roomy[4200];
    snprintf(roomy, sizeof roomy, "%s/roomy", w.root);
    copy_dir(w.trace_dir, roomy);
    unmount_trace_dir(&w);
    free(w.trace_dir);
    w.trace_dir = strdup(roomy);
    const char *summary[] = {"summary", roomy, NULL};
    r = harness_cutrace(&w, summary);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "trace stopped early: ") && strstr(r.out, "full"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "exited normally"), "%s", r.out);
    run_free(&r);
    sqlite3 *db = the_trace(&w);
    ck_assert_ptr_nonnull(
        strstr(tsql_text(db, "SELECT value FROM meta WHERE key = 'writer_error'"), "full"));
    /* Whatever it holds is a complete prefix of the calls. */
    int64_t calls = mallocs(db);
    ck_assert_int_gt(calls, 0);
    ck_assert_int_lt(calls, 2000);
    ck_assert_int_eq(tsql_int(db, "SELECT max(seq) FROM calls WHERE NOT nested") -
                         tsql_int(db, "SELECT count(*) FROM calls WHERE seq <= (SELECT max(seq) "
                                      "FROM calls WHERE NOT nested)"),
                     0);
    sqlite3_close(db);
    world_free(&w);
}
END_TEST

/*
 * Item 9, the rest: the database was made but no ring fits at any size
 * (posix_fallocate fails as on a full disk). The trace says why it holds
 * no calls instead of nothing, and the process runs on untraced.
 */
START_TEST(test_no_room_for_any_ring_trace_says_why)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/sf_life"), "plain", "25", NULL};
    char preload[8400];
    fail_in_tracer(&w, preload, sizeof preload, "posix_fallocate");
    struct run traced = same_as_untraced(&w, argv, 0);
    ck_assert_uint_eq(count_lines(traced.err), 1);
    ck_assert_ptr_nonnull(strstr(traced.err, "cutrace: "));
    ck_assert_ptr_nonnull(strstr(traced.err, "No space left on device"));
    sqlite3 *db = the_trace(&w);
    ck_assert_ptr_nonnull(strstr(tsql_text(db, "SELECT value FROM meta WHERE key = 'writer_error'"),
                                 "No space left on device"));
    ck_assert_int_eq(tsql_int(db, "SELECT value FROM meta WHERE key = 'writer_stopped_after'"), 0);
    ck_assert_int_eq(mallocs(db), 0);
    sqlite3_close(db);
    ck_assert_int_eq(count_named(&w, "", ".ring"), 0);
    const char *summary[] = {"summary", w.trace_dir, NULL};
    struct run s = harness_cutrace(&w, summary);
    ck_assert_msg(s.status == 0, "%s", s.err);
    ck_assert_msg(strstr(s.out, "trace stopped early: no room for the crash buffer"), "%s", s.out);
    run_free(&s);
    run_free(&traced);
    world_free(&w);
}
END_TEST

Suite *startfinish_suite(void)
{
    Suite *s = suite_create("startfinish");
    TCase *tc = tcase_create("startfinish");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_file_size_limits_never_kill_the_program);
    tcase_add_test(tc, test_huge_environment_values_are_cut_and_traced);
    tcase_add_test(tc, test_exec_is_recorded_only_once_it_happened);
    tcase_add_test(tc, test_calls_after_the_tracers_destructor_are_in_the_db_alone);
    tcase_add_test(tc, test_full_disk_at_start_trace_says_why);
    tcase_add_test(tc, test_no_room_for_any_ring_trace_says_why);
    suite_add_tcase(s, tc);
    return s;
}
