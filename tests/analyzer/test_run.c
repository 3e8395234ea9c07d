/*
 * test_run.c - `cutrace run`: exit statuses like a shell's, LD_PRELOAD and
 * CUTRACE_DIR as the child sees them, an untouched stdout, the closing line
 * on stderr, and signal handling. The preloaded library is the dummy
 * libcutrace.so from the test build, which writes one file per process.
 * Each run writes into a directory of its own inside -o DIR; the manifest
 * in it is test_manifest.c's.
 */
#include "test_support.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *lib_env(void)
{
    char *s = NULL;
    ck_assert_int_ge(asprintf(&s, "CUTRACE_LIB=%s", dummy_library()), 0);
    return s;
}

static char *trace_dir(const char *scratch)
{
    char *dir = NULL;
    ck_assert_int_ge(asprintf(&dir, "%s/trace", scratch), 0);
    return dir;
}

/* Runs `cutrace run -o DIR -- sh -c SCRIPT` with LD_PRELOAD set to preload
 * (NULL: unset). */
static struct proc_result run_script(const char *dir, const char *script, const char *preload)
{
    char *lib = lib_env(), *ld = NULL;
    if (preload)
        ck_assert_int_ge(asprintf(&ld, "LD_PRELOAD=%s", preload), 0);
    const char *env[] = {lib, ld ? ld : "LD_PRELOAD", NULL};
    const char *args[] = {"run", "-o", dir, "--", "/bin/sh", "-c", script, NULL};
    struct proc_result r = run_cutrace(args, env);
    free(lib);
    free(ld);
    return r;
}

static char *real(const char *path)
{
    char *resolved = realpath(path, NULL);
    ck_assert_msg(resolved != NULL, "realpath %s", path);
    return resolved;
}

START_TEST(test_exit_code_passes_through)
{
    char *scratch = scratch_dir(), *dir = trace_dir(scratch);
    struct proc_result r = run_script(dir, "exit 3", NULL);
    ck_assert_int_eq(r.status, 3);
    ck_assert_uint_eq(r.out_len, 0);
    char *first = only_run(dir);
    char expected[1024];
    snprintf(expected, sizeof(expected),
             "cutrace: trace in %s (1 file); next: cutrace summary %s\n", first, first);
    ck_assert_str_eq(r.err, expected);
    proc_result_free(&r);

    /* DIR again: a run of its own, which counts only its own files. */
    r = run_script(dir, "exit 0", NULL);
    ck_assert_int_eq(r.status, 0);
    char **runs;
    ck_assert_uint_eq(list_runs(dir, &runs), 2);
    const char *second = strcmp(runs[0], first) == 0 ? runs[1] : runs[0];
    snprintf(expected, sizeof(expected),
             "cutrace: trace in %s (1 file); next: cutrace summary %s\n", second, second);
    ck_assert_str_eq(r.err, expected);
    proc_result_free(&r);

    /* The directory, and each run's, is private. */
    struct stat st;
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(stat(runs[i], &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0700);
    }
    free_runs(runs, 2);
    free(first);
    free(dir);
    scratch_remove(scratch);
}
END_TEST

START_TEST(test_killed_by_signal)
{
    char *scratch = scratch_dir(), *dir = trace_dir(scratch);
    struct proc_result r = run_script(dir, "kill -TERM $$", NULL);
    ck_assert_int_eq(r.status, 143);
    ck_assert(!r.signaled); /* cutrace itself exits normally with 128+15 */
    proc_result_free(&r);
    r = run_script(dir, "kill -KILL $$", NULL);
    ck_assert_int_eq(r.status, 137);
    proc_result_free(&r);
    free(dir);
    scratch_remove(scratch);
}
END_TEST

START_TEST(test_parent_ignores_interrupt_forwards_term)
{
    char *scratch = scratch_dir(), *dir = trace_dir(scratch);
    /* SIGINT to cutrace alone (as if from `kill`): it keeps waiting. */
    struct proc_result r = run_script(dir, "kill -INT $PPID; sleep 0.2; exit 5", NULL);
    ck_assert_int_eq(r.status, 5);
    proc_result_free(&r);
    /* SIGTERM to cutrace reaches the program. */
    r = run_script(dir, "kill -TERM $PPID; sleep 2; exit 0", NULL);
    ck_assert_int_eq(r.status, 143);
    proc_result_free(&r);
    free(dir);
    scratch_remove(scratch);
}
END_TEST

START_TEST(test_command_not_found_or_not_executable)
{
    char *scratch = scratch_dir(), *dir = trace_dir(scratch);
    char *lib = lib_env();
    const char *env[] = {lib, NULL};

    const char *missing[] = {"run", "-o", dir, "--", "cutrace-no-such-command", NULL};
    struct proc_result r = run_cutrace(missing, env);
    ck_assert_int_eq(r.status, 127);
    ck_assert_uint_eq(r.out_len, 0);
    ck_assert_str_eq(r.err, "cutrace: cutrace-no-such-command: command not found\n");
    proc_result_free(&r);

    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/no/such/file", scratch), 0);
    const char *missing_path[] = {"run", "-o", dir, path, NULL};
    r = run_cutrace(missing_path, env);
    ck_assert_int_eq(r.status, 127);
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "No such file or directory"));
    proc_result_free(&r);
    free(path);

    ck_assert_int_ge(asprintf(&path, "%s/script.sh", scratch), 0);
    write_file(path, "#!/bin/sh\nexit 0\n", 17);
    chmod(path, 0644);
    const char *not_exec[] = {"run", "-o", dir, path, NULL};
    r = run_cutrace(not_exec, env);
    ck_assert_int_eq(r.status, 126);
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "Permission denied"));
    proc_result_free(&r);
    free(path);

    free(lib);
    free(dir);
    scratch_remove(scratch);
}
END_TEST

START_TEST(test_library_missing)
{
    char *scratch = scratch_dir(), *dir = trace_dir(scratch);
    const char *env[] = {"CUTRACE_LIB=/nonexistent/libcutrace.so", NULL};
    const char *args[] = {"run", "-o", dir, "/bin/true", NULL};
    struct proc_result r = run_cutrace(args, env);
    ck_assert_int_eq(r.status, 125);
    ck_assert_uint_eq(r.out_len, 0);
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "CUTRACE_LIB=/nonexistent/libcutrace.so"));
    proc_result_free(&r);
    free(dir);
    scratch_remove(scratch);
}
END_TEST

START_TEST(test_ld_preload_composition)
{
    char *scratch = scratch_dir(), *dir = trace_dir(scratch);
    char *lib = real(dummy_library());
    const char *script = "printf '%s' \"$LD_PRELOAD\"";

    /* None before: just the tracer. */
    struct proc_result r = run_script(dir, script, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, lib);
    proc_result_free(&r);

    /* Existing entries are kept, after the tracer. */
    char *other = NULL, *expected = NULL, *existing = NULL;
    ck_assert_int_ge(asprintf(&other, "%s/other.so", scratch), 0);
    copy_file(lib, other);
    r = run_script(dir, script, other);
    ck_assert_int_ge(asprintf(&expected, "%s:%s", lib, other), 0);
    ck_assert_str_eq(r.out, expected);
    proc_result_free(&r);
    free(expected);

    /* Already there (by path, with space separators): left as it was. */
    ck_assert_int_ge(asprintf(&existing, "%s %s", other, lib), 0);
    r = run_script(dir, script, existing);
    ck_assert_str_eq(r.out, existing);
    proc_result_free(&r);
    free(existing);

    /* Already there under another name of the same file. */
    char *link = NULL;
    ck_assert_int_ge(asprintf(&link, "%s/alias.so", scratch), 0);
    ck_assert_int_eq(symlink(lib, link), 0);
    r = run_script(dir, script, link);
    ck_assert_str_eq(r.out, link);
    proc_result_free(&r);

    free(link);
    free(other);
    free(lib);
    free(dir);
    scratch_remove(scratch);
}
END_TEST

START_TEST(test_child_environment_and_stdout)
{
    char *scratch = scratch_dir();
    char *messy = NULL;
    ck_assert_int_ge(asprintf(&messy, "%s/./x/../t", scratch), 0);
    struct proc_result r = run_script(messy, "printf '%s' \"$CUTRACE_DIR\"", NULL);
    char *expected = NULL, *base = real(scratch);
    /* The run's own directory in DIR, absolute and resolved. */
    ck_assert_int_ge(asprintf(&expected, "%s/t/run-", base), 0);
    ck_assert_msg(strncmp(r.out, expected, strlen(expected)) == 0 &&
                      !strchr(r.out + strlen(expected), '/'),
                  "CUTRACE_DIR=%s", r.out);
    struct stat st;
    ck_assert_int_eq(stat(r.out, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    proc_result_free(&r);

    /* The program's stdout, byte for byte (NUL and no final newline). */
    r = run_script(messy, "printf 'a\\000b\\nc'", NULL);
    ck_assert_uint_eq(r.out_len, 5);
    ck_assert_mem_eq(r.out, "a\0b\nc", 5);
    proc_result_free(&r);

    /* Options after the command are the command's. */
    char *lib = lib_env();
    const char *env[] = {lib, NULL};
    const char *args[] = {"run", "-o", messy, "/bin/echo", "-o", "--help", NULL};
    r = run_cutrace(args, env);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "-o --help\n");
    proc_result_free(&r);

    /* No trace written: said so, still the program's status. */
    /* (rm runs without the dummy, which would write a file of its own.) */
    r = run_script(messy, "LD_PRELOAD= rm -f \"$CUTRACE_DIR\"/*.db; exit 4", NULL);
    ck_assert_int_eq(r.status, 4);
    ck_assert_ptr_nonnull(strstr(r.err, "no trace written to"));
    ck_assert_uint_eq(count_lines(r.err), 1);
    proc_result_free(&r);

    free(lib);
    free(base);
    free(expected);
    free(messy);
    scratch_remove(scratch);
}
END_TEST

Suite *run_suite(void)
{
    Suite *s = suite_create("run");
    TCase *tc = tcase_create("run");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_exit_code_passes_through);
    tcase_add_test(tc, test_killed_by_signal);
    tcase_add_test(tc, test_parent_ignores_interrupt_forwards_term);
    tcase_add_test(tc, test_command_not_found_or_not_executable);
    tcase_add_test(tc, test_library_missing);
    tcase_add_test(tc, test_ld_preload_composition);
    tcase_add_test(tc, test_child_environment_and_stdout);
    suite_add_tcase(s, tc);
    return s;
}
