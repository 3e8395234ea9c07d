/*
 * test_ancestry.c - the ancestor walk (preload/core/ancestry.c) over a /proc
 * tree the test writes itself, so that every way the walk ends is met on
 * purpose, and the ancestors table the store writes from it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../preload/core/ancestry.h"
#include "cutrace/store.h"
#include "suites.h"
#include "testutil.h"

static const char IN_RUN[] = "HOME=/root\0CUTRACE_DIR=/traces\0";
static const char OUTSIDE[] = "HOME=/root\0NOT_CUTRACE_DIR=/x\0CUTRACE_DIRECTORY=/y\0";

static void write_bytes(const char *path, const char *bytes, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

/* <root>/<pid>/{stat,cmdline,environ}; environ NULL leaves it out. */
static void fake_process(const char *root, int pid, int ppid, const char *comm, const char *argv,
                         size_t argv_len, const char *environ_bytes, size_t environ_len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%d", root, pid);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    char stat_line[512];
    /* Fields 3 to 22 as the kernel writes them; starttime = 1000 + pid. */
    int n = snprintf(stat_line, sizeof stat_line,
                     "%d (%s) S %d %d %d 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %d 1000 50\n", pid,
                     comm, ppid, pid, pid, 1000 + pid);
    snprintf(path, sizeof path, "%s/%d/stat", root, pid);
    write_bytes(path, stat_line, (size_t)n);
    snprintf(path, sizeof path, "%s/%d/cmdline", root, pid);
    write_bytes(path, argv, argv_len);
    if (environ_bytes) {
        snprintf(path, sizeof path, "%s/%d/environ", root, pid);
        write_bytes(path, environ_bytes, environ_len);
    }
}

#define PROC(root, pid, ppid, comm, argv, env)                                                     \
    fake_process(root, pid, ppid, comm, argv, sizeof(argv) - 1, env, sizeof(env) - 1)

START_TEST(test_walk_stops_before_the_process_that_set_the_run)
{
    char *root = tu_tmpdir();
    PROC(root, 10, 5, "bash", "-bash\0", OUTSIDE);
    PROC(root, 20, 10, "python3", "python3\0server.py\0--tp\0002\0--api-key\0K\0", IN_RUN);
    PROC(root, 30, 20, "python3 (fork) x)", "python3\0-c\0from m import f; f()\0", IN_RUN);
    struct ct_ancestor got[CT_ANCESTORS_MAX];
    size_t n = ct_ancestry_walk(root, 30, got, CT_ANCESTORS_MAX);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(got[0].pid, 30);
    ck_assert_int_eq(got[0].start_ticks, 1030);
    ck_assert_str_eq(got[0].cmdline, "python3 -c 'from m import f; f()'");
    ck_assert_int_eq(got[1].pid, 20);
    ck_assert_int_eq(got[1].start_ticks, 1020);
    ck_assert_str_eq(got[1].cmdline, "python3 server.py --tp 2 --api-key '<redacted>'");
    ct_ancestry_free(got, n);
    /* A walk that starts outside the run records nothing. */
    ck_assert_uint_eq(ct_ancestry_walk(root, 10, got, CT_ANCESTORS_MAX), 0);
    tsql_rmtree(root);
    free(root);
}
END_TEST

START_TEST(test_walk_ends_at_init_at_the_cap_and_at_the_unreadable)
{
    char *root = tu_tmpdir();
    /* A container whose init is the launcher: part of the run, the last. */
    PROC(root, 1, 0, "python3", "python3\0launch.py\0", IN_RUN);
    PROC(root, 7, 1, "python3", "python3\0worker\0", IN_RUN);
    struct ct_ancestor got[CT_ANCESTORS_MAX];
    size_t n = ct_ancestry_walk(root, 7, got, CT_ANCESTORS_MAX);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(got[1].pid, 1);
    ct_ancestry_free(got, n);

    /* A chain deeper than the cap: 100 <- 101 <- ... <- 119. */
    for (int pid = 100; pid < 120; pid++)
        PROC(root, pid, pid == 100 ? 1 : pid - 1, "sh", "sh\0", IN_RUN);
    n = ct_ancestry_walk(root, 119, got, CT_ANCESTORS_MAX);
    ck_assert_uint_eq(n, CT_ANCESTORS_MAX);
    ck_assert_int_eq(got[CT_ANCESTORS_MAX - 1].pid, 119 - CT_ANCESTORS_MAX + 1);
    ct_ancestry_free(got, n);
    ck_assert_uint_eq(ct_ancestry_walk(root, 119, got, 3), 3);
    ct_ancestry_free(got, 3);

    /* Another user's process (its environ unreadable: here, absent) ends it
     * quietly; so does a pid with nothing in /proc. */
    fake_process(root, 200, 100, "sudo", "sudo", 4, NULL, 0);
    PROC(root, 201, 200, "python3", "python3\0w\0", IN_RUN);
    ck_assert_uint_eq(ct_ancestry_walk(root, 201, got, CT_ANCESTORS_MAX), 1);
    ct_ancestry_free(got, 1);
    ck_assert_uint_eq(ct_ancestry_walk(root, 4242, got, CT_ANCESTORS_MAX), 0);
    tsql_rmtree(root);
    free(root);
}
END_TEST

/* The environment is read in pieces: an entry cut by a piece's end still
 * counts, and a long value that merely contains the name does not. */
START_TEST(test_environ_read_across_pieces)
{
    char *root = tu_tmpdir();
    for (size_t filler = 4090; filler < 4100; filler++) {
        size_t len = filler + 64;
        char *env = malloc(len);
        memset(env, 'x', filler);
        memcpy(env, "A=", 2);
        env[filler - 1] = '\0';
        memcpy(env + filler, "CUTRACE_DIR=/t", 15); /* with its NUL */
        int pid = (int)filler;
        fake_process(root, pid, 0, "w", "w\0", 2, env, filler + 15);
        struct ct_ancestor got[1];
        ck_assert_uint_eq(ct_ancestry_walk(root, pid, got, 1), 1);
        ct_ancestry_free(got, 1);
        /* The same bytes inside a value: not the variable. */
        memcpy(env + filler - 20, "Y_CUTRACE_DIR=/t", 16);
        env[filler - 1] = 'x';
        memcpy(env + filler, "B=1", 4);
        fake_process(root, pid + 100, 0, "w", "w\0", 2, env, filler + 4);
        ck_assert_uint_eq(ct_ancestry_walk(root, pid + 100, got, 1), 0);
        free(env);
    }
    tsql_rmtree(root);
    free(root);
}
END_TEST

START_TEST(test_store_writes_ancestors_parent_first)
{
    char *dir = tu_tmpdir();
    char *path = tu_empty_file(dir, "t.db");
    char err[256];
    struct ct_store *st = ct_store_create(path, err, sizeof err);
    ck_assert_msg(st != NULL, "%s", err);
    struct ct_process_info p = {.pid = 30, .ppid = 20, .cmdline = "python3 -c x"};
    p.ancestors[0] = (struct ct_ancestor){20, 1020, "python3 server.py --tp 2"};
    p.ancestors[1] = (struct ct_ancestor){10, 1010, "sh run.sh"};
    p.nancestors = 2;
    ck_assert_int_eq(ct_store_write_process(st, &p), 0);
    ct_store_close(st);
    sqlite3 *db = tsql_open(path, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM ancestors"), 2);
    ck_assert_int_eq(tsql_int(db, "SELECT pid FROM ancestors WHERE depth = 1"), 20);
    ck_assert_int_eq(tsql_int(db, "SELECT start_ticks FROM ancestors WHERE depth = 1"), 1020);
    ck_assert_str_eq(tsql_text(db, "SELECT cmdline FROM ancestors WHERE depth = 2"), "sh run.sh");
    sqlite3_close(db);
    tsql_rmtree(dir);
    free(dir);
    free(path);
}
END_TEST

Suite *ancestry_suite(void)
{
    Suite *s = suite_create("ancestry");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_walk_stops_before_the_process_that_set_the_run);
    tcase_add_test(tc, test_walk_ends_at_init_at_the_cap_and_at_the_unreadable);
    tcase_add_test(tc, test_environ_read_across_pieces);
    tcase_add_test(tc, test_store_writes_ancestors_parent_first);
    suite_add_tcase(s, tc);
    return s;
}
