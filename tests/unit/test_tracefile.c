/*
 * test_tracefile.c - trace file names and creation: planted symlinks are
 * never followed, nothing existing is overwritten, files are 0600.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../preload/core/tracefile.h"
#include "suites.h"
#include "testutil.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(test_planted_symlink_is_skipped_not_followed)
{
    char *dir = tu_tmpdir();
    char victim[PATH_MAX], planted[PATH_MAX], dangling[PATH_MAX];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    write_file(victim, "precious");
    snprintf(planted, sizeof planted, "%s/node1-42-1000.db", dir);
    ck_assert_int_eq(symlink(victim, planted), 0);
    snprintf(dangling, sizeof dangling, "%s/node1-42-1000-1.db", dir);
    ck_assert_int_eq(symlink("/nonexistent/target", dangling), 0);

    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create(dir, "node1", 42, 1000, &tf), 0);
    ck_assert_str_eq(tf.db_name, "node1-42-1000-2.db");
    struct stat st;
    ck_assert_int_eq(lstat(tf.db_tmp_path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(st.st_size, 0);
    ck_assert_int_ne(access(tf.db_path, F_OK), 0);
    ck_assert_ptr_nonnull(strstr(tf.db_tmp_path, "/.node1-42-1000-2.db.tmp"));
    ck_assert_int_eq(ct_tracefile_publish(tf.db_tmp_path, tf.db_path), 0);
    ck_assert_int_eq(lstat(tf.db_path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_int_eq(stat(victim, &st), 0);
    ck_assert_int_eq(st.st_size, 8);
    ck_assert_int_ne(access("/nonexistent/target", F_OK), 0);
    char want_ring[PATH_MAX];
    snprintf(want_ring, sizeof want_ring, "%s/node1-42-1000-2.ring", dir);
    ck_assert_str_eq(tf.ring_path, want_ring);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_taken_ring_name_moves_the_pair)
{
    char *dir = tu_tmpdir();
    char ring[PATH_MAX];
    snprintf(ring, sizeof ring, "%s/h-7-5.ring", dir);
    write_file(ring, "someone else's");
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create(dir, "h", 7, 5, &tf), 0);
    ck_assert_str_eq(tf.db_name, "h-7-5-1.db");
    char old_tmp[PATH_MAX];
    snprintf(old_tmp, sizeof old_tmp, "%s/.h-7-5.db.tmp", dir);
    ck_assert_int_ne(access(old_tmp, F_OK), 0);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_publish_never_replaces)
{
    char *dir = tu_tmpdir();
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create(dir, "h", 8, 9, &tf), 0);
    /* Someone plants a symlink at the final name after the names were chosen. */
    char victim[PATH_MAX];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    write_file(victim, "precious");
    ck_assert_int_eq(symlink(victim, tf.db_path), 0);
    ck_assert_int_eq(ct_tracefile_publish(tf.db_tmp_path, tf.db_path), -1);
    ck_assert_int_eq(errno, EEXIST);
    struct stat st;
    ck_assert_int_eq(lstat(tf.db_path, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(stat(victim, &st), 0);
    ck_assert_int_eq(st.st_size, 8);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_host_names_become_safe_file_names)
{
    char *dir = tu_tmpdir();
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create(dir, "../a/b c", 1, 2, &tf), 0);
    ck_assert_str_eq(tf.db_name, ".._a_b_c-1-2.db");
    ck_assert_int_eq(ct_tracefile_create(dir, "", 1, 2, &tf), 0);
    ck_assert_str_eq(tf.db_name, "host-1-2.db");
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_mkdir_creates_nested_private_dirs_and_refuses_files)
{
    char *dir = tu_tmpdir();
    char nested[PATH_MAX], file[PATH_MAX], under_file[PATH_MAX];
    snprintf(nested, sizeof nested, "%s/a/b/c", dir);
    ck_assert_int_eq(ct_tracefile_mkdir(nested), 0);
    ck_assert_int_eq(ct_tracefile_mkdir(nested), 0);
    struct stat st;
    ck_assert_int_eq(stat(nested, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    snprintf(file, sizeof file, "%s/plain", dir);
    write_file(file, "x");
    ck_assert_int_eq(ct_tracefile_mkdir(file), -1);
    ck_assert_int_eq(errno, ENOTDIR);
    snprintf(under_file, sizeof under_file, "%s/plain/sub", dir);
    ck_assert_int_eq(ct_tracefile_mkdir(under_file), -1);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_too_long_names_fail_cleanly)
{
    char longdir[PATH_MAX];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[0] = '/';
    longdir[sizeof longdir - 1] = '\0';
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create(longdir, "h", 1, 1, &tf), -1);
    ck_assert_int_eq(errno, ENAMETOOLONG);
    ck_assert_int_eq(ct_tracefile_mkdir(longdir), -1);
}
END_TEST

Suite *tracefile_suite(void)
{
    Suite *s = suite_create("tracefile");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_planted_symlink_is_skipped_not_followed);
    tcase_add_test(tc, test_taken_ring_name_moves_the_pair);
    tcase_add_test(tc, test_publish_never_replaces);
    tcase_add_test(tc, test_host_names_become_safe_file_names);
    tcase_add_test(tc, test_mkdir_creates_nested_private_dirs_and_refuses_files);
    tcase_add_test(tc, test_too_long_names_fail_cleanly);
    suite_add_tcase(s, tc);
    return s;
}
