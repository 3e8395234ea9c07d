/*
 * test_tracefile.c - the trace directory and the files in it: the directory
 * is resolved through symlinks and refused when another user controls it;
 * planted symlinks and other users' files are never followed or written,
 * by the tracer or by its SQLite; nothing existing is overwritten; files are
 * 0600; a descriptor the program closed is found again, never reused.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cutrace/store.h"
#include "../../preload/core/tracedir.h"
#include "../../preload/core/tracefile.h"
#include "suites.h"
#include "testutil.h"

#define NOBODY 65534

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* A fresh scratch directory, canonical, made the trace directory. */
static char *use_tmpdir(void)
{
    char *made = tu_tmpdir();
    char *dir = realpath(made, NULL);
    free(made);
    char why[512];
    ck_assert_msg(ct_tracedir_use(dir, why, sizeof why) == 0, "%s", why);
    ck_assert_str_eq(ct_tracedir_path(), dir);
    return dir;
}

START_TEST(test_planted_symlink_is_skipped_not_followed)
{
    char *dir = use_tmpdir();
    char victim[PATH_MAX], planted[PATH_MAX], dangling[PATH_MAX];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    write_file(victim, "precious");
    snprintf(planted, sizeof planted, "%s/node1-42-1000.db", dir);
    ck_assert_int_eq(symlink(victim, planted), 0);
    snprintf(dangling, sizeof dangling, "%s/node1-42-1000-1.db", dir);
    ck_assert_int_eq(symlink("/nonexistent/target", dangling), 0);

    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create("node1", 42, 1000, &tf), 0);
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
    char *dir = use_tmpdir();
    char ring[PATH_MAX];
    snprintf(ring, sizeof ring, "%s/h-7-5.ring", dir);
    write_file(ring, "someone else's");
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create("h", 7, 5, &tf), 0);
    ck_assert_str_eq(tf.db_name, "h-7-5-1.db");
    char old_tmp[PATH_MAX];
    snprintf(old_tmp, sizeof old_tmp, "%s/.h-7-5.db.tmp", dir);
    ck_assert_int_ne(access(old_tmp, F_OK), 0);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

/* A name SQLite would put beside the database, already there, moves the trace too. */
START_TEST(test_taken_sqlite_side_name_moves_the_pair)
{
    char *dir = use_tmpdir();
    char wal[PATH_MAX], shm[PATH_MAX];
    snprintf(wal, sizeof wal, "%s/h-7-5.db-wal", dir);
    write_file(wal, "");
    snprintf(shm, sizeof shm, "%s/.h-7-5-1.db.tmp-shm", dir);
    ck_assert_int_eq(symlink("/nonexistent", shm), 0);
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create("h", 7, 5, &tf), 0);
    ck_assert_str_eq(tf.db_name, "h-7-5-2.db");
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_publish_never_replaces)
{
    char *dir = use_tmpdir();
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create("h", 8, 9, &tf), 0);
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
    char *dir = use_tmpdir();
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create("../a/b c", 1, 2, &tf), 0);
    ck_assert_str_eq(tf.db_name, ".._a_b_c-1-2.db");
    ck_assert_int_eq(ct_tracefile_create("", 1, 2, &tf), 0);
    ck_assert_str_eq(tf.db_name, "host-1-2.db");
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_use_creates_nested_private_dirs_and_refuses_files)
{
    char *dir = use_tmpdir();
    char nested[PATH_MAX], file[PATH_MAX], under_file[PATH_MAX], why[512];
    snprintf(nested, sizeof nested, "%s/a/b/c", dir);
    ck_assert_int_eq(ct_tracedir_use(nested, why, sizeof why), 0);
    ck_assert_int_eq(ct_tracedir_use(nested, why, sizeof why), 0);
    struct stat st;
    ck_assert_int_eq(stat(nested, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    snprintf(file, sizeof file, "%s/plain", dir);
    write_file(file, "x");
    ck_assert_int_eq(ct_tracedir_use(file, why, sizeof why), -1);
    ck_assert_int_eq(errno, ENOTDIR);
    ck_assert_ptr_nonnull(strstr(why, "cannot create trace directory"));
    ck_assert_ptr_nonnull(strstr(why, file));
    snprintf(under_file, sizeof under_file, "%s/plain/sub", dir);
    ck_assert_int_eq(ct_tracedir_use(under_file, why, sizeof why), -1);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_too_long_names_fail_cleanly)
{
    char longdir[PATH_MAX], why[512];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[0] = '/';
    longdir[sizeof longdir - 1] = '\0';
    ck_assert_int_eq(ct_tracedir_use(longdir, why, sizeof why), -1);
    ck_assert_int_eq(errno, ENAMETOOLONG);

    /* A real directory whose path leaves no room for the trace's names. */
    char *dir = use_tmpdir();
    char deep[PATH_MAX];
    size_t used = (size_t)snprintf(deep, sizeof deep, "%s", dir);
    char comp[201];
    memset(comp, 'x', 200);
    comp[200] = '\0';
    while (used < PATH_MAX - 12) { /* "/.h-1-1.db.tmp" no longer fits */
        size_t len = PATH_MAX - 12 - used > 200 ? 200 : PATH_MAX - 12 - used;
        deep[used++] = '/';
        memcpy(deep + used, comp, len);
        used += len;
        deep[used] = '\0';
    }
    ck_assert_msg(ct_tracedir_use(deep, why, sizeof why) == 0, "%s", why);
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create("h", 1, 1, &tf), -1);
    ck_assert_int_eq(errno, ENAMETOOLONG);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

/* Clusters mount /home -> /mnt/home: the trace goes to the real directory. */
START_TEST(test_symlinks_on_the_way_are_resolved)
{
    char *dir = use_tmpdir();
    char real_dir[PATH_MAX], rel[PATH_MAX], abs_link[PATH_MAX], want[PATH_MAX], why[512];
    snprintf(real_dir, sizeof real_dir, "%s/real", dir);
    ck_assert_int_eq(mkdir(real_dir, 0755), 0);
    snprintf(rel, sizeof rel, "%s/rel", dir);
    ck_assert_int_eq(symlink("real", rel), 0);
    snprintf(abs_link, sizeof abs_link, "%s/abs", dir);
    ck_assert_int_eq(symlink(rel, abs_link), 0); /* a link to a link */

    char via[PATH_MAX];
    snprintf(via, sizeof via, "%s/abs/./traces", dir);
    ck_assert_msg(ct_tracedir_use(via, why, sizeof why) == 0, "%s", why);
    snprintf(want, sizeof want, "%s/real/traces", dir);
    ck_assert_str_eq(ct_tracedir_path(), want);
    struct stat st;
    ck_assert_int_eq(lstat(want, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(st.st_mode & 0777, 0700);

    /* ".." is the parent of the real directory, as the kernel has it. */
    snprintf(via, sizeof via, "%s/rel/../real/traces", dir);
    ck_assert_int_eq(ct_tracedir_use(via, why, sizeof why), 0);
    ck_assert_str_eq(ct_tracedir_path(), want);

    /* SQLite (which refuses any symlink in a path) opens the trace it is given. */
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create("h", 3, 4, &tf), 0);
    char err[512];
    struct ct_store *store = ct_store_create(tf.db_tmp_path, err, sizeof err);
    ck_assert_msg(store != NULL, "%s", err);
    ct_store_close(store);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

/* A dangling link (planted by whoever owns its directory) makes nothing where it points. */
START_TEST(test_dangling_symlink_target_is_not_created)
{
    char *dir = use_tmpdir();
    char link[PATH_MAX], target[PATH_MAX], why[512];
    snprintf(target, sizeof target, "%s/elsewhere/x", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    ck_assert_int_eq(symlink(target, link), 0);
    ck_assert_int_eq(ct_tracedir_use(link, why, sizeof why), -1);
    ck_assert_int_eq(errno, ENOENT);
    char elsewhere[PATH_MAX];
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", dir);
    ck_assert_int_ne(access(elsewhere, F_OK), 0);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

static void expect_refused(const char *dir, const char *reason)
{
    char why[512];
    ck_assert_int_eq(ct_tracedir_use(dir, why, sizeof why), -1);
    ck_assert_int_eq(errno, EPERM);
    ck_assert_msg(strstr(why, reason) && strstr(why, dir), "%s", why);
}

START_TEST(test_directories_others_control_are_refused)
{
    char *dir = use_tmpdir();
    char open_dir[PATH_MAX], group_dir[PATH_MAX], sticky[PATH_MAX], foreign[PATH_MAX], why[512];
    snprintf(open_dir, sizeof open_dir, "%s/open", dir);
    ck_assert_int_eq(mkdir(open_dir, 0700), 0);
    ck_assert_int_eq(chmod(open_dir, 0777), 0);
    expect_refused(open_dir, "writable by others without the sticky bit (mode 0777)");
    snprintf(group_dir, sizeof group_dir, "%s/group", dir);
    ck_assert_int_eq(mkdir(group_dir, 0700), 0);
    ck_assert_int_eq(chmod(group_dir, 0770), 0);
    expect_refused(group_dir, "writable by others");
    /* The refused one is not the trace directory: the last accepted one still is. */
    ck_assert_str_eq(ct_tracedir_path(), dir);

    snprintf(sticky, sizeof sticky, "%s/sticky", dir);
    ck_assert_int_eq(mkdir(sticky, 0700), 0);
    ck_assert_int_eq(chmod(sticky, 01777), 0);
    ck_assert_msg(ct_tracedir_use(sticky, why, sizeof why) == 0, "%s", why);

    if (geteuid() != 0) {
        printf("skipped: test_directories_others_control_are_refused, another user's "
               "directory (needs root)\n");
    } else {
        snprintf(foreign, sizeof foreign, "%s/foreign", dir);
        ck_assert_int_eq(mkdir(foreign, 0700), 0);
        ck_assert_int_eq(chown(foreign, NOBODY, NOBODY), 0);
        expect_refused(foreign, "is owned by uid 65534, not by this user (uid 0)");
        /* Reached through a symlink, the owner is still the real directory's. */
        char link[PATH_MAX];
        snprintf(link, sizeof link, "%s/to-foreign", dir);
        ck_assert_int_eq(symlink(foreign, link), 0);
        expect_refused(link, "is owned by uid 65534");
    }
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

static size_t file_size(const char *path)
{
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    return (size_t)st.st_size;
}

/*
 * In a sticky directory others may add names: a -wal or -shm another user
 * planted beside a trace, or a symlink there, is never opened for SQLite,
 * so not a byte of the trace reaches it.
 */
START_TEST(test_sqlite_never_adopts_planted_side_files)
{
    char *dir = use_tmpdir();
    ck_assert_int_eq(chmod(dir, 01777), 0);
    char why[512];
    char sticky[PATH_MAX];
    snprintf(sticky, sizeof sticky, "%s/sticky", dir);
    ck_assert_int_eq(mkdir(sticky, 0700), 0);
    ck_assert_int_eq(chmod(sticky, 01777), 0);
    ck_assert_msg(ct_tracedir_use(sticky, why, sizeof why) == 0, "%s", why);
    bool root = geteuid() == 0;
    if (!root)
        printf("skipped: test_sqlite_never_adopts_planted_side_files, another user's file "
               "(needs root); planted symlinks only\n");

    for (int round = 0; round < 2; round++) {
        struct ct_tracefile tf;
        ck_assert_int_eq(ct_tracefile_create("h", 10 + round, 1, &tf), 0);
        char planted[PATH_MAX + 16], decoy[PATH_MAX + 32];
        snprintf(planted, sizeof planted, "%s%s", tf.db_tmp_path, round ? "-shm" : "-wal");
        snprintf(decoy, sizeof decoy, "%s.decoy", planted);
        if (root) {
            int fd = open(planted, O_RDWR | O_CREAT | O_EXCL, 0666);
            ck_assert_int_ge(fd, 0);
            ck_assert_int_eq(fchown(fd, NOBODY, NOBODY), 0);
            ck_assert_int_eq(fchmod(fd, 0666), 0);
            close(fd);
        } else {
            write_file(decoy, "");
            ck_assert_int_eq(symlink(decoy, planted), 0);
        }
        const char *watched = root ? planted : decoy;
        char err[512];
        struct ct_store *store = ct_store_create(tf.db_tmp_path, err, sizeof err);
        ck_assert_msg(store == NULL, "SQLite wrote the trace through %s", watched);
        ck_assert_uint_eq(file_size(watched), 0);
    }

    /* With no plant, SQLite's own side files are made, the user's, 0600. */
    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create("h", 20, 1, &tf), 0);
    char err[512];
    struct ct_store *store = ct_store_create(tf.db_tmp_path, err, sizeof err);
    ck_assert_msg(store != NULL, "%s", err);
    char wal[PATH_MAX + 8];
    snprintf(wal, sizeof wal, "%s-wal", tf.db_tmp_path);
    struct stat st;
    ck_assert_int_eq(lstat(wal, &st), 0);
    ck_assert_int_eq(st.st_uid, geteuid());
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ct_store_close(store);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

/*
 * A program that closes every descriptor it did not open closes the trace
 * directory's too, and may get its number back for a directory of its own:
 * the tracer finds its directory again and never writes into the program's.
 */
START_TEST(test_closed_descriptor_is_found_again_not_reused)
{
    char *dir = use_tmpdir();
    char *other = tu_tmpdir();
    const char *name;
    int fd = ct_tracedir_at(dir, &name);
    ck_assert_int_ge(fd, 0);
    ck_assert_str_eq(name, ".");
    close(fd);
    int programs = open(other, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(programs, 0);
    if (programs != fd) { /* the program gets our number back */
        ck_assert_int_eq(dup2(programs, fd), fd);
        close(programs);
        programs = fd;
    }

    struct ct_tracefile tf;
    ck_assert_int_eq(ct_tracefile_create("h", 5, 6, &tf), 0);
    ck_assert_int_eq(access(tf.db_tmp_path, F_OK), 0);
    char in_other[PATH_MAX];
    snprintf(in_other, sizeof in_other, "%s/.h-5-6.db.tmp", other);
    ck_assert_int_ne(access(in_other, F_OK), 0);
    int again = ct_tracedir_at(tf.db_tmp_path, &name);
    ck_assert_int_ge(again, 0);
    ck_assert_int_ne(again, programs);
    ck_assert_int_eq(fcntl(programs, F_GETFD), 0); /* still the program's, still open */

    /* Another directory put at its path (the old one kept, so its inode is not reused). */
    close(again);
    char moved[PATH_MAX];
    snprintf(moved, sizeof moved, "%s.moved", dir);
    ck_assert_int_eq(rename(dir, moved), 0);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(ct_tracedir_at(tf.db_tmp_path, &name), -1);
    ck_assert_int_eq(errno, ESTALE);
    ck_assert_int_eq(ct_tracefile_create("h", 5, 7, &tf), -1);
    close(programs);
    tsql_rmtree(dir);
    tsql_rmtree(moved);
    tsql_rmtree(other);
    free(dir);
    free(other);
}
END_TEST

START_TEST(test_paths_elsewhere_are_not_the_directorys)
{
    char *dir = use_tmpdir();
    const char *name;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/x.db", dir);
    ck_assert_int_ge(ct_tracedir_at(path, &name), 0);
    ck_assert_str_eq(name, "x.db");
    const char *elsewhere[] = {"/etc/passwd", "relative.db", "", NULL};
    for (int i = 0; elsewhere[i]; i++) {
        ck_assert_int_eq(ct_tracedir_at(elsewhere[i], &name), -1);
        ck_assert_int_eq(errno, EXDEV);
    }
    const char *suffixes[] = {"x/y", "/x/y", "/..", "/.", "/", "x", NULL};
    for (int i = 0; suffixes[i]; i++) {
        snprintf(path, sizeof path, "%s%s", dir, suffixes[i]);
        ck_assert_msg(ct_tracedir_at(path, &name) == -1 && errno == EXDEV, "%s", path);
    }
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

Suite *tracefile_suite(void)
{
    Suite *s = suite_create("tracefile");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_planted_symlink_is_skipped_not_followed);
    tcase_add_test(tc, test_taken_ring_name_moves_the_pair);
    tcase_add_test(tc, test_taken_sqlite_side_name_moves_the_pair);
    tcase_add_test(tc, test_publish_never_replaces);
    tcase_add_test(tc, test_host_names_become_safe_file_names);
    tcase_add_test(tc, test_use_creates_nested_private_dirs_and_refuses_files);
    tcase_add_test(tc, test_too_long_names_fail_cleanly);
    tcase_add_test(tc, test_symlinks_on_the_way_are_resolved);
    tcase_add_test(tc, test_dangling_symlink_target_is_not_created);
    tcase_add_test(tc, test_directories_others_control_are_refused);
    tcase_add_test(tc, test_sqlite_never_adopts_planted_side_files);
    tcase_add_test(tc, test_closed_descriptor_is_found_again_not_reused);
    tcase_add_test(tc, test_paths_elsewhere_are_not_the_directorys);
    suite_add_tcase(s, tc);
    return s;
}
