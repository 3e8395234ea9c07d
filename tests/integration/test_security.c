/*
 * test_security.c - the suite `security`: another local user never reads a
 * trace, a symlink on the way to the trace directory does not stop tracing,
 * and no secret of the environment or command line reaches a trace.
 *
 * Another user is uid 65534 (nobody), played by a forked child that drops to
 * it; those tests need root (as CI runs them) and print "skipped: ..."
 * otherwise. The other user's attack is the one of issue 14: watch the trace
 * directory (inotify), and the moment a trace's hidden file appears, create
 * the -wal SQLite will open beside it (the hidden name's and the final
 * name's) and hold it open, so that whatever SQLite writes there can be read.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

#define NOBODY 65534

static bool need_root(const char *test, const char *what)
{
    if (geteuid() == 0)
        return true;
    printf("skipped: %s: %s needs root (to act as another user)\n", test, what);
    return false;
}

/* Makes w->root traversable by the other user (mkdtemp made it 0700). */
static void open_root(struct world *w)
{
    ck_assert_int_eq(chmod(w->root, 0755), 0);
}

static void make_dir(const char *path, mode_t mode, uid_t owner)
{
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_int_eq(chmod(path, mode), 0);
    if (owner != geteuid())
        ck_assert_int_eq(chown(path, owner, owner), 0);
}

/* Entries of dir other than "." and "..", or -1 if it cannot be read. */
static int entries(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1)
        n = -1;
    if (p)
        pclose(p);
    return n;
}

/* The program's run, traced, against its untraced run: the same but for one warning. */
static void expect_one_warning(struct world *w, const char *const argv[], const char *says)
{
    struct run plain = run_prog(w, false, argv, 30);
    struct run traced = run_prog(w, true, argv, 30);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_msg(count_lines(traced.err) == 1 && strncmp(traced.err, "cutrace: ", 9) == 0,
                  "stderr: %s", traced.err);
    ck_assert_msg(strstr(traced.err, says), "stderr: %s (expected \"%s\")", traced.err, says);
    ck_assert_ptr_nonnull(strstr(traced.err, "not tracing"));
    run_free(&plain);
    run_free(&traced);
}

/* The other user, in a child process: plants -wal files in dir as traces appear. */
struct attacker {
    pid_t pid;
    int stop_w;   /* closed to stop it */
    int result_r; /* it writes: files planted, bytes found in them */
};

static void plant(int dir, const char *name, int *held, size_t *n)
{
    if (*n >= 64)
        return;
    int fd = openat(dir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0)
        return;
    fchmod(fd, 0666);
    held[(*n)++] = fd;
}

/* For a trace's ".B.db.tmp": ".B.db.tmp-wal" and "B.db-wal". */
static void plant_beside(int dir, const char *name, int *held, size_t *n)
{
    size_t len = strlen(name);
    char side[512];
    if (name[0] == '.' && len > 8 && strcmp(name + len - 7, ".db.tmp") == 0 && len < 400) {
        snprintf(side, sizeof side, "%s-wal", name);
        plant(dir, side, held, n);
        snprintf(side, sizeof side, "%.*s-wal", (int)(len - 5), name + 1);
        plant(dir, side, held, n);
    } else if (len > 3 && strcmp(name + len - 3, ".db") == 0 && len < 400) {
        snprintf(side, sizeof side, "%s-wal", name);
        plant(dir, side, held, n);
    }
}

static void attacker_main(const char *dir_path, int ready_w, int stop_r, int result_w)
{
    if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
        _exit(2);
    int dir = open(dir_path, O_RDONLY | O_DIRECTORY);
    int in = inotify_init1(IN_CLOEXEC);
    if (dir < 0 || in < 0 || inotify_add_watch(in, dir_path, IN_CREATE | IN_MOVED_TO) < 0)
        _exit(3);
    if (write(ready_w, "r", 1) != 1)
        _exit(4);
    int held[64];
    size_t n = 0;
    for (;;) {
        struct pollfd p[2] = {{in, POLLIN, 0}, {stop_r, POLLIN, 0}};
        if (poll(p, 2, -1) < 0)
            continue;
        if (p[0].revents & POLLIN) {
            char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
            ssize_t got = read(in, buf, sizeof buf);
            for (ssize_t off = 0; got > 0 && off < got;) {
                const struct inotify_event *e = (const struct inotify_event *)(buf + off);
                if (e->len)
                    plant_beside(dir, e->name, held, &n);
                off += (ssize_t)(sizeof *e + e->len);
            }
            continue;
        }
        if (p[1].revents)
            break;
    }
    uint64_t report[2] = {n, 0};
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (fstat(held[i], &st) == 0)
            report[1] += (uint64_t)st.st_size;
    }
    if (write(result_w, report, sizeof report) != (ssize_t)sizeof report)
        _exit(5);
    _exit(0);
}

static struct attacker start_attacker(const char *dir)
{
    int ready[2], stop[2], result[2];
    ck_assert(pipe(ready) == 0 && pipe(stop) == 0 && pipe(result) == 0);
    struct attacker a;
    a.pid = fork();
    ck_assert_int_ge(a.pid, 0);
    if (a.pid == 0) {
        close(ready[0]);
        close(stop[1]);
        close(result[0]);
        attacker_main(dir, ready[1], stop[0], result[1]);
    }
    close(ready[1]);
    close(stop[0]);
    close(result[1]);
    char c;
    ck_assert_msg(read(ready[0], &c, 1) == 1, "the other user's process did not start");
    close(ready[0]);
    a.stop_w = stop[1];
    a.result_r = result[0];
    return a;
}

/* Stops it; *planted = files it made, returns the bytes of trace it got. */
static uint64_t stop_attacker(struct attacker *a, uint64_t *planted)
{
    close(a->stop_w);
    uint64_t report[2] = {0, 0};
    ck_assert_int_eq(read(a->result_r, report, sizeof report), (ssize_t)sizeof report);
    close(a->result_r);
    int status;
    ck_assert_int_eq(waitpid(a->pid, &status, 0), a->pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    *planted = report[0];
    return report[1];
}

/*
 * The other user attacks w's trace directory while the program runs traced:
 * it gets no byte of the trace, the program runs as untraced, with one
 * warning (saying `says`, if not NULL).
 */
static void check_planted_wal_gets_nothing(struct world *w, const char *says)
{
    struct attacker a = start_attacker(w->trace_dir);
    const char *argv[] = {build_path("progs/rt_sequence"), "/dev/null", NULL};
    struct run plain = run_prog(w, false, argv, 30);
    struct run traced = run_prog(w, true, argv, 30);
    uint64_t planted;
    uint64_t stolen = stop_attacker(&a, &planted);
    ck_assert_msg(stolen == 0, "the other user read %llu bytes of trace from %llu planted files",
                  (unsigned long long)stolen, (unsigned long long)planted);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_msg(count_lines(traced.err) == 1 && strncmp(traced.err, "cutrace: ", 9) == 0,
                  "stderr: %s", traced.err);
    ck_assert_msg(!says || strstr(traced.err, says), "stderr: %s", traced.err);
    /* Where the directory is accepted, the attack did take place. */
    ck_assert_msg(says || planted >= 1, "the other user planted nothing: the test did not attack");
    run_free(&plain);
    run_free(&traced);
}

START_TEST(test_trace_dir_owned_by_another_user_is_refused)
{
    if (!need_root("test_trace_dir_owned_by_another_user_is_refused", "another user's directory"))
        return;
    struct world w;
    world_init(&w);
    open_root(&w);
    make_dir(w.trace_dir, 0755, NOBODY);
    const char *argv[] = {build_path("progs/rt_sequence"), "/dev/null", NULL};
    expect_one_warning(&w, argv, "is owned by uid 65534, not by this user (uid 0)");
    ck_assert_int_eq(entries(w.trace_dir), 0);
    world_free(&w);
}
END_TEST

START_TEST(test_trace_dir_writable_by_others_without_sticky_bit_is_refused)
{
    const mode_t modes[] = {0777, 0770, 0722};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        struct world w;
        world_init(&w);
        make_dir(w.trace_dir, modes[i], geteuid());
        const char *argv[] = {build_path("progs/rt_sequence"), "/dev/null", NULL};
        expect_one_warning(&w, argv, "writable by others without the sticky bit");
        ck_assert_int_eq(entries(w.trace_dir), 0);
        world_free(&w);
    }
}
END_TEST

/*
 * The other user owns the trace directory (so can add any name) and plants
 * the -wal of each trace as it appears: refused outright, nothing written.
 */
START_TEST(test_planted_wal_in_another_users_dir_gets_nothing)
{
    if (!need_root("test_planted_wal_in_another_users_dir_gets_nothing", "another user"))
        return;
    struct world w;
    world_init(&w);
    open_root(&w);
    make_dir(w.trace_dir, 0777, NOBODY);
    check_planted_wal_gets_nothing(&w, "is owned by uid 65534");
    world_free(&w);
}
END_TEST

/*
 * A sticky directory writable by all (the user's own drop box) is accepted:
 * the other user can add names there, and does, but SQLite never opens the
 * planted files; the program runs on unchanged, with one warning.
 */
START_TEST(test_planted_wal_in_sticky_dir_gets_nothing)
{
    if (!need_root("test_planted_wal_in_sticky_dir_gets_nothing", "another user"))
        return;
    struct world w;
    world_init(&w);
    open_root(&w);
    make_dir(w.trace_dir, 01777, geteuid());
    check_planted_wal_gets_nothing(&w, NULL);
    world_free(&w);
}
END_TEST

/* Clusters mount /home -> /mnt/home: CUTRACE_DIR through a symlink. */
START_TEST(test_trace_dir_through_symlink_is_traced_into_real_dir)
{
    struct world w;
    world_init(&w);
    char real_dir[4200], link[4200], via[4300], where[4300];
    snprintf(real_dir, sizeof real_dir, "%s/mnt-home", w.root);
    ck_assert_int_eq(mkdir(real_dir, 0755), 0);
    snprintf(link, sizeof link, "%s/home", w.root);
    ck_assert_int_eq(symlink("mnt-home", link), 0);
    snprintf(via, sizeof via, "%s/user/traces", link);
    free(w.trace_dir);
    w.trace_dir = strdup(via);
    const char *argv[] = {build_path("progs/rt_sequence"), "/dev/null", NULL};
    struct run plain = run_prog(&w, false, argv, 30);
    struct run traced = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_msg(traced.err_len == 0, "stderr: %s", traced.err);

    snprintf(where, sizeof where, "%s/user/traces", real_dir);
    free(w.trace_dir);
    w.trace_dir = strdup(where);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_int_gt(tsql_int(db, "SELECT count(*) FROM calls"), 30);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "exit");
    sqlite3_close(db);
    struct stat st;
    ck_assert_int_eq(lstat(where, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    free_list(files, 1);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/*
 * The default ./cutrace-trace, run from a directory everyone may write in
 * (as /tmp: here a 1777 directory of the test's own): made 0700 and used, or
 * refused when another user made it first.
 */
START_TEST(test_default_dir_in_world_writable_sticky_dir)
{
    struct world w;
    world_init(&w);
    open_root(&w);
    char shared[4200], dir[4300];
    snprintf(shared, sizeof shared, "%s/tmp", w.root);
    make_dir(shared, 01777, geteuid());
    snprintf(dir, sizeof dir, "%s/cutrace-trace", shared);
    free(w.cwd);
    w.cwd = strdup(shared);
    free(w.trace_dir);
    w.trace_dir = strdup(dir);
    w.extra_env[0] = "CUTRACE_DIR=";
    const char *argv[] = {build_path("progs/rt_sequence"), "/dev/null", NULL};

    if (need_root("test_default_dir_in_world_writable_sticky_dir",
                  "a ./cutrace-trace made by another user")) {
        make_dir(dir, 0755, NOBODY);
        expect_one_warning(&w, argv, "is owned by uid 65534");
        ck_assert_int_eq(entries(dir), 0);
        ck_assert_int_eq(rmdir(dir), 0);
    }

    struct run traced = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(traced.status, 3);
    ck_assert_msg(traced.err_len == 0, "stderr: %s", traced.err);
    struct stat st;
    ck_assert_int_eq(lstat(dir, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(st.st_uid, geteuid());
    ck_assert_int_eq(st.st_mode & 07777, 0700);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    free_list(files, 1);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* Every secret form of issue 14, end to end: the env and process tables, and the file's bytes. */
START_TEST(test_secrets_never_reach_the_trace)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "NCCL_IB_PASSWD=s3cret-a";
    w.extra_env[1] = "VLLM_DB_PASS=s3cret-b";
    w.extra_env[2] = "SGLANG_PWD=s3cret-c";
    w.extra_env[3] = "TORCH_HUB_AUTH=s3cret-d";
    w.extra_env[4] = "CUDA_CREDENTIALS=s3cret-e";
    w.extra_env[5] = "NCCL_PROXY_URL=https://bob:s3cret-f@proxy:3128/";
    w.extra_env[6] = "NCCL_DEBUG=INFO";
    const char *argv[] = {build_path("progs/rt_sequence"),
                          "/dev/null",
                          "--api-key",
                          "s3cret-g",
                          "--api-key=s3cret-h",
                          "--password=s3cret-i",
                          "--db=postgres://u:s3cret-j@h/d",
                          "--max-num-batched-tokens",
                          "8192",
                          NULL};
    struct run plain = run_prog(&w, false, argv, 30);
    struct run traced = run_prog(&w, true, argv, 30);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    ck_assert_msg(traced.err_len == 0, "stderr: %s", traced.err);

    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    const char *redacted[] = {"NCCL_IB_PASSWD", "VLLM_DB_PASS", "SGLANG_PWD", "TORCH_HUB_AUTH",
                              "CUDA_CREDENTIALS"};
    char sql[256];
    for (size_t i = 0; i < sizeof redacted / sizeof *redacted; i++) {
        snprintf(sql, sizeof sql, "SELECT value FROM env WHERE name = '%s'", redacted[i]);
        ck_assert_str_eq(tsql_text(db, sql), "<redacted>");
    }
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM env WHERE name = 'NCCL_PROXY_URL'"),
                     "https://bob:<redacted>@proxy:3128/");
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM env WHERE name = 'NCCL_DEBUG'"), "INFO");
    char want[8192];
    snprintf(want, sizeof want,
             "%s /dev/null --api-key '<redacted>' '--api-key=<redacted>' "
             "'--password=<redacted>' '--db=postgres://u:<redacted>@h/d' "
             "--max-num-batched-tokens 8192",
             build_path("progs/rt_sequence"));
    ck_assert_str_eq(tsql_text(db, "SELECT cmdline FROM process"), want);
    sqlite3_close(db);

    /* Not a byte of any secret anywhere in the file (free pages included). */
    FILE *f = fopen(files[0], "rb");
    ck_assert_ptr_nonnull(f);
    static char bytes[64 << 20];
    size_t n = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    ck_assert_uint_gt(n, 0);
    ck_assert_ptr_null(memmem(bytes, n, "s3cret", 6));
    free_list(files, 1);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

Suite *security_suite(void)
{
    Suite *s = suite_create("security");
    TCase *tc = tcase_create("security");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_trace_dir_owned_by_another_user_is_refused);
    tcase_add_test(tc, test_trace_dir_writable_by_others_without_sticky_bit_is_refused);
    tcase_add_test(tc, test_planted_wal_in_another_users_dir_gets_nothing);
    tcase_add_test(tc, test_planted_wal_in_sticky_dir_gets_nothing);
    tcase_add_test(tc, test_trace_dir_through_symlink_is_traced_into_real_dir);
    tcase_add_test(tc, test_default_dir_in_world_writable_sticky_dir);
    tcase_add_test(tc, test_secrets_never_reach_the_trace);
    suite_add_tcase(s, tc);
    return s;
}
