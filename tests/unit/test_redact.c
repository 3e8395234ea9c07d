/*
 * test_redact.c - the one redaction rule (redact.h) on names, values and
 * command-line arguments: each secret form is hidden, the rest is kept.
 */
#include <stdlib.h>
#include <string.h>

#include "cutrace/redact.h"
#include "suites.h"

static bool secret(const char *name)
{
    return ct_redact_secret_name(name, strlen(name));
}

START_TEST(test_secret_names)
{
    const char *hidden[] = {
        "NCCL_IB_PASSWD",   "VLLM_DB_PASS",
        "SGLANG_PWD",       "TORCH_HUB_AUTH",
        "CUDA_CREDENTIALS", "NCCL_IB_KEY",
        "HF_TOKEN",         "api-key",
        "password",         "db.password",
        "apiKey",           "hfToken",
        "OPENAI_APIKEY",    "OAUTH",
        "MY_SECRET_THING",  "DBPASSWORD",
        "SSH_KEYS",         "AWS_SECRET_ACCESS_KEY_ID",
        "x_credential",     "vllm_api_Token",
        "PASSPHRASE",       "token",
    };
    for (size_t i = 0; i < sizeof hidden / sizeof *hidden; i++)
        ck_assert_msg(secret(hidden[i]), "%s should be secret", hidden[i]);
    const char *kept[] = {
        "PWD",         "OLDPWD",
        "NCCL_DEBUG",  "max-num-batched-tokens",
        "tokenizer",   "tokenizer-mode",
        "AUTHOR",      "PASSTHROUGH",
        "bypass",      "CUDA_VISIBLE_DEVICES",
        "NCCL_IB_HCA", "PYTORCH_CUDA_ALLOC_CONF",
        "port",        "CUTRACE_DIR",
        "LD_PRELOAD",  "",
    };
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        ck_assert_msg(!secret(kept[i]), "%s should be kept", kept[i]);
    /* The name ends where the caller says: NCCL_DEBUG=KEY is not KEY. */
    ck_assert(!ct_redact_secret_name("NCCL_DEBUG=KEY", 10));
}
END_TEST

static void check_value(const char *in, const char *want)
{
    char *got = ct_redact_value(in);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, want);
    free(got);
}

START_TEST(test_url_passwords_in_values)
{
    check_value("https://bob:hunter2@example.com/x?y=1",
                "https://bob:<redacted>@example.com/x?y=1");
    check_value("redis://:pw@cache:6379", "redis://:<redacted>@cache:6379");
    check_value("http://a:b@h1,http://c:d@h2", "http://a:<redacted>@h1,http://c:<redacted>@h2");
    check_value("https://u:p@ss@h/", "https://u:<redacted>@h/");
    check_value("x=postgres://u:pw@db/t y", "x=postgres://u:<redacted>@db/t y");
    /* Nothing to hide: no password, an '@' past the host, or no URL at all. */
    check_value("https://bob@example.com", "https://bob@example.com");
    check_value("https://u:@h", "https://u:@h");
    check_value("http://h/p:q@r", "http://h/p:q@r");
    check_value("expandable_segments:True", "expandable_segments:True");
    check_value("", "");
    check_value("://", "://");
}
END_TEST

static void check_argv(const char *in, size_t len, const char *want, size_t want_len)
{
    size_t got_len;
    char *got = ct_redact_argv(in, len, &got_len);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(got_len, want_len);
    ck_assert_int_eq(memcmp(got, want, want_len), 0);
    free(got);
}

#define ARGV(s) s, sizeof(s) - 1

START_TEST(test_command_line_arguments)
{
    check_argv(ARGV("python3\0-m\0sglang.launch_server\0--api-key\0K1\0--api-key=K2\0"
                    "--password=Y\0--token\0T\0--max-num-batched-tokens\08192\0"),
               ARGV("python3\0-m\0sglang.launch_server\0--api-key\0<redacted>\0"
                    "--api-key=<redacted>\0--password=<redacted>\0--token\0<redacted>\0"
                    "--max-num-batched-tokens\08192\0"));
    /* URLs in any argument; NAME=VALUE overrides; a flag followed by an option. */
    check_argv(ARGV("run\0--db=postgres://u:pw@h/db\0trainer.hf_token=abc\0--use-auth\0--port\0"
                    "80\0HF_TOKEN=x\0--tokenizer\0m\0"),
               ARGV("run\0--db=postgres://u:<redacted>@h/db\0trainer.hf_token=<redacted>\0"
                    "--use-auth\0--port\080\0HF_TOKEN=<redacted>\0--tokenizer\0m\0"));
    /* A secret option last, and bytes without a final NUL (a truncated command line). */
    check_argv(ARGV("a\0--password\0"), ARGV("a\0--password\0"));
    check_argv(ARGV("a\0--secret\0s3"), ARGV("a\0--secret\0<redacted>\0"));
    check_argv(ARGV("x\0\0-\0--\0---=v\0"), ARGV("x\0\0-\0--\0---=v\0"));
    check_argv("", 0, "", 0);
}
END_TEST

Suite *redact_suite(void)
{
    Suite *s = suite_create("redact");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_secret_names);
    tcase_add_test(tc, test_url_passwords_in_values);
    tcase_add_test(tc, test_command_line_arguments);
    suite_add_tcase(s, tc);
    return s;
}
