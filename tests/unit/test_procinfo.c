/*
 * test_procinfo.c - process facts: shell-quoted command lines and identity.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../preload/core/procinfo.h"
#include "cutrace/redact.h"
#include "suites.h"

static void check_quote(const char *args, size_t len, const char *want)
{
    char *got = ct_quote_argv(args, len);
    ck_assert_str_eq(got, want);
    free(got);
}

START_TEST(test_quote_argv)
{
    check_quote("python3\0-m\0sglang.launch_server\0", 32, "python3 -m sglang.launch_server");
    check_quote("a b\0it's\0\0", 10, "'a b' 'it'\\''s' ''");
    check_quote("--x=1\0", 6, "--x=1");
    check_quote("", 0, "");
    check_quote("no-terminator", 13, "no-terminator");
}
END_TEST

/* What the process table gets: redacted, then quoted, still a line a shell can run. */
START_TEST(test_redacted_command_line_stays_pasteable)
{
    const char raw[] = "serve\0--api-key\0K\0--password=it's\0--db=mysql://u:p@h/d\0";
    size_t len;
    char *safe = ct_redact_argv(raw, sizeof raw - 1, &len);
    ck_assert_ptr_nonnull(safe);
    check_quote(safe, len,
                "serve --api-key '<redacted>' '--password=<redacted>' "
                "'--db=mysql://u:<redacted>@h/d'");
    free(safe);
}
END_TEST

START_TEST(test_collect_identifies_this_process)
{
    struct ct_process_info info;
    memset(&info, 0, sizeof info);
    ct_procinfo_collect(&info);
    ck_assert_int_eq(info.pid, getpid());
    ck_assert_int_eq(info.ppid, getppid());
    ck_assert_uint_gt(strlen(info.host), 0);
    ck_assert_uint_eq(strlen(info.boot_id), 36);
    ck_assert_ptr_nonnull(strstr(info.exe, "unit"));
    ck_assert_ptr_nonnull(info.cmdline);
    ck_assert_ptr_nonnull(strstr(info.cmdline, "unit"));
    ct_procinfo_free(&info);
}
END_TEST

Suite *procinfo_suite(void)
{
    Suite *s = suite_create("procinfo");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_quote_argv);
    tcase_add_test(tc, test_redacted_command_line_stays_pasteable);
    tcase_add_test(tc, test_collect_identifies_this_process);
    suite_add_tcase(s, tc);
    return s;
}
