/*
 * test_progress.c - the progress line of a long load (out/progress.h): on a
 * terminal's stderr, once the load is slow, rewritten with \r and cleared
 * before the report; never on a pipe, never on a quick load. The terminal
 * is a pseudo-terminal; "slow" is CUTRACE_PROGRESS_AFTER_MS=0.
 */
#include "scenarios.h"
#include "test_support.h"

#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs `cutrace summary dir` with stderr on a pseudo-terminal (stdout to
 * /dev/null) and returns what the terminal got. */
static char *stderr_on_terminal(const char *dir, const char *after_ms)
{
    int master, slave;
    ck_assert_int_eq(openpty(&master, &slave, NULL, NULL, NULL), 0);
    const char *bin = getenv("CUTRACE_BIN");
    if (!bin)
        bin = "build/cutrace";
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(slave, STDERR_FILENO);
        close(master);
        if (after_ms)
            setenv("CUTRACE_PROGRESS_AFTER_MS", after_ms, 1);
        else
            unsetenv("CUTRACE_PROGRESS_AFTER_MS");
        execl(bin, bin, "summary", dir, (char *)NULL);
        _exit(127);
    }
    close(slave);
    size_t len = 0, cap = 4096;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    for (;;) {
        if (len + 1 >= cap) {
            cap *= 2;
            out = realloc(out, cap);
            ck_assert_ptr_nonnull(out);
        }
        ssize_t n = read(master, out + len, cap - len - 1);
        if (n > 0)
            len += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            break; /* EIO once the child closed the terminal */
    }
    out[len] = '\0';
    close(master);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d: %s", status, out);
    return out;
}

START_TEST(test_progress_on_a_slow_load)
{
    char *dir = scratch_dir();
    free(scenario_normal(dir));
    char *out = stderr_on_terminal(dir, "0");
    ck_assert_msg(strstr(out, "\rcutrace: loading 0/1 trace, 0 events"), "%s", out);
    /* Cleared at the end: blanks over the line, back to its start. */
    size_t n = strlen(out);
    ck_assert_uint_gt(n, 2);
    ck_assert_int_eq(out[n - 1], '\r');
    ck_assert_int_eq(out[n - 2], ' ');
    ck_assert_ptr_null(strchr(out, '\n'));
    free(out);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_no_progress_on_a_quick_load)
{
    char *dir = scratch_dir();
    free(scenario_normal(dir));
    char *out = stderr_on_terminal(dir, NULL); /* the default two seconds */
    ck_assert_msg(out[0] == '\0', "%s", out);
    free(out);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_no_progress_on_a_pipe)
{
    char *dir = scratch_dir();
    free(scenario_normal(dir));
    const char *args[] = {"summary", dir, NULL};
    const char *env[] = {"CUTRACE_PROGRESS_AFTER_MS=0", NULL};
    struct proc_result r = run_cutrace(args, env);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(r.err_len == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "cutrace summary of"));
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

Suite *progress_suite(void); /* registered in test_main.c */
Suite *progress_suite(void)
{
    Suite *s = suite_create("progress");
    TCase *tc = tcase_create("line");
    tcase_add_test(tc, test_progress_on_a_slow_load);
    tcase_add_test(tc, test_no_progress_on_a_quick_load);
    tcase_add_test(tc, test_no_progress_on_a_pipe);
    suite_add_tcase(s, tc);
    return s;
}
