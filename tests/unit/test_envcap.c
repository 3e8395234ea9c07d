/*
 * test_envcap.c - which environment variables a trace keeps, and redaction.
 */
#include <string.h>

#include "cutrace/envcap.h"
#include "suites.h"

START_TEST(test_selects_gpu_memory_families)
{
    ck_assert(ct_env_is_recorded("NCCL_DEBUG=INFO"));
    ck_assert(ct_env_is_recorded("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
    ck_assert(ct_env_is_recorded("SGLANG_FORCE_CUSTOM_AR_PCIE=0"));
    ck_assert(ct_env_is_recorded("CUDA_VISIBLE_DEVICES"));
    ck_assert(ct_env_is_recorded("VLLM_X=1"));
    ck_assert(ct_env_is_recorded("TRTLLM_X=1"));
    ck_assert(ct_env_is_recorded("TORCH_NCCL_ASYNC_ERROR_HANDLING=1"));
    ck_assert(ct_env_is_recorded("OMP_NUM_THREADS=4"));
    ck_assert(ct_env_is_recorded("RANK=3"));
    ck_assert(ct_env_is_recorded("LOCAL_RANK=3"));
    ck_assert(ct_env_is_recorded("WORLD_SIZE=8"));
    ck_assert(ct_env_is_recorded("LOCAL_WORLD_SIZE=8"));
    ck_assert(ct_env_is_recorded("NODE_RANK=1"));
    ck_assert(ct_env_is_recorded("GROUP_RANK=1"));
    ck_assert(!ct_env_is_recorded("RANKING=1"));
    ck_assert(!ct_env_is_recorded("MY_RANK=1"));
    ck_assert(!ct_env_is_recorded("OMP_PROC_BIND=true"));
    ck_assert(!ct_env_is_recorded("OMP_NUM_THREADSX=4"));
    ck_assert(!ct_env_is_recorded("HOME=/root"));
    ck_assert(!ct_env_is_recorded("HF_TOKEN=abc"));
    ck_assert(!ct_env_is_recorded("CUDA_=1"));
    ck_assert(!ct_env_is_recorded("XCUDA_HOME=1"));
}
END_TEST

START_TEST(test_secret_names_any_case)
{
    ck_assert(ct_env_is_secret("NCCL_IB_KEY=1"));
    ck_assert(ct_env_is_secret("VLLM_API_Token=1"));
    ck_assert(ct_env_is_secret("SGLANG_secret_thing=1"));
    ck_assert(ct_env_is_secret("TRTLLM_PASSWORD"));
    ck_assert(!ct_env_is_secret("NCCL_DEBUG=KEY"));
}
END_TEST

/* Issue 14: the names today's rule missed, and passwords in URLs under any name. */
START_TEST(test_capture_redacts_every_secret_form)
{
    char *envp[] = {
        "NCCL_IB_PASSWD=p1",    "VLLM_DB_PASS=p2",     "SGLANG_PWD=p3",
        "TORCH_HUB_AUTH=p4",    "CUDA_CREDENTIALS=p5", "NCCL_PROXY=http://bob:p6@proxy:3128/",
        "VLLM_MAX_TOKENS=8192", "PWD=/work",           NULL};
    struct ct_env_capture cap;
    ck_assert_int_eq(ct_env_capture(envp, &cap), 0);
    ck_assert_uint_eq(cap.count, 7);
    const char *want[][2] = {
        {"CUDA_CREDENTIALS", CT_REDACTED},
        {"NCCL_IB_PASSWD", CT_REDACTED},
        {"NCCL_PROXY", "http://bob:<redacted>@proxy:3128/"},
        {"SGLANG_PWD", CT_REDACTED},
        {"TORCH_HUB_AUTH", CT_REDACTED},
        {"VLLM_DB_PASS", CT_REDACTED},
        {"VLLM_MAX_TOKENS", "8192"},
    };
    for (size_t i = 0; i < cap.count; i++) {
        ck_assert_str_eq(cap.vars[i].name, want[i][0]);
        ck_assert_str_eq(cap.vars[i].value, want[i][1]);
        ck_assert_ptr_null(strstr(cap.vars[i].value, "p6"));
    }
    ct_env_capture_free(&cap);
}
END_TEST

START_TEST(test_capture_sorts_copies_and_redacts)
{
    char *envp[] = {
        "VLLM_API_KEY=hunter2", "HOME=/root", "NCCL_DEBUG=INFO", "CUDA_HOME=/c", "BROKEN",
        "SGLANG_X=a=b",         NULL};
    struct ct_env_capture cap;
    ck_assert_int_eq(ct_env_capture(envp, &cap), 0);
    ck_assert_uint_eq(cap.count, 4);
    ck_assert_str_eq(cap.vars[0].name, "CUDA_HOME");
    ck_assert_str_eq(cap.vars[1].name, "NCCL_DEBUG");
    ck_assert_str_eq(cap.vars[2].name, "SGLANG_X");
    ck_assert_str_eq(cap.vars[2].value, "a=b");
    ck_assert_str_eq(cap.vars[3].name, "VLLM_API_KEY");
    ck_assert_str_eq(cap.vars[3].value, CT_REDACTED);
    for (size_t i = 0; i < cap.count; i++)
        ck_assert_ptr_null(strstr(cap.vars[i].value, "hunter2"));
    ct_env_capture_free(&cap);
    char *empty[] = {NULL};
    ck_assert_int_eq(ct_env_capture(empty, &cap), 0);
    ck_assert_uint_eq(cap.count, 0);
}
END_TEST

Suite *envcap_suite(void)
{
    Suite *s = suite_create("envcap");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_selects_gpu_memory_families);
    tcase_add_test(tc, test_secret_names_any_case);
    tcase_add_test(tc, test_capture_sorts_copies_and_redacts);
    tcase_add_test(tc, test_capture_redacts_every_secret_form);
    suite_add_tcase(s, tc);
    return s;
}
