/*
 * test_budget_vllm.c - vLLM's replay (replay/vllm.c, analysis/budget_vllm.c):
 * the arithmetic of each code path against vLLM's definitions written out
 * here (Python's int(), math.ceil, round(x, 2) and repr, the binary search
 * of estimate_max_model_len), and `cutrace budget` on small traces: a
 * worker that stopped after S0, the code path chosen by --server-version,
 * the inputs a trace lacks named, and the options that belong to vLLM.
 */
#include "replay/budget.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB   ((int64_t)1 << 20)
#define GIB   ((int64_t)1 << 30)
#define TOTAL (80 * GIB)

Suite *budget_vllm_suite(void);

/* ---- the arithmetic ---- */

START_TEST(test_requested_by_path)
{
    /* 1000000001 * 0.9 = 900000000.9: int() and math.ceil part by a byte */
    ck_assert_int_eq(budget_vllm_requested(1000000001, 0.9), 900000000);
    ck_assert_int_eq(budget_vllm_requested_ceil(1000000001, 0.9), 900000001);
    ck_assert_int_eq(budget_vllm_requested_on(true, 1000000001, 0.9), 900000001);
    ck_assert_int_eq(budget_vllm_requested_on(false, 1000000001, 0.9), 900000000);
    /* a whole product is its own ceil */
    ck_assert_int_eq(budget_vllm_requested_ceil(80 * GIB, 0.5), 40 * GIB);
    ck_assert_int_eq(budget_vllm_requested_ceil(-5, 0.9), 0);
    /* free < requested, as Python compares: the float on the older path */
    ck_assert(budget_vllm_early_failure(false, 900000000, 1000000001, 0.9));
    ck_assert(!budget_vllm_early_failure(false, 900000001, 1000000001, 0.9));
    ck_assert(budget_vllm_early_failure(true, 900000000, 1000000001, 0.9));
    ck_assert(!budget_vllm_early_failure(true, 900000001, 1000000001, 0.9));
    double u;
    /* the largest U that passes S0's check, by the path's requested */
    ck_assert(budget_vllm_u_max_on(true, 1000, 900, &u));
    ck_assert_double_eq(u, 0.9);
    ck_assert(budget_vllm_u_min_on(true, 1000, 899, &u));
    ck_assert_double_eq(u, 0.9);
}
END_TEST

START_TEST(test_python_formatting)
{
    char buf[64];
    /* repr */
    ck_assert_str_eq(budget_vllm_py_repr(0.9, buf, sizeof(buf)), "0.9");
    ck_assert_str_eq(budget_vllm_py_repr(0.92, buf, sizeof(buf)), "0.92");
    ck_assert_str_eq(budget_vllm_py_repr(80.0, buf, sizeof(buf)), "80.0");
    ck_assert_str_eq(budget_vllm_py_repr(79.4, buf, sizeof(buf)), "79.4");
    ck_assert_str_eq(budget_vllm_py_repr(0.0001, buf, sizeof(buf)), "0.0001");
    ck_assert_str_eq(budget_vllm_py_repr(1e-05, buf, sizeof(buf)), "1e-05");
    ck_assert_str_eq(budget_vllm_py_repr(1e16, buf, sizeof(buf)), "1e+16");
    ck_assert_str_eq(budget_vllm_py_repr(123456789012345.0, buf, sizeof(buf)), "123456789012345.0");
    /* round(b / 2^30, 2): half to even on the exact binary value */
    ck_assert_double_eq(budget_vllm_format_gib((double)(GIB / 8)), 0.12);     /* 0.125 */
    ck_assert_double_eq(budget_vllm_format_gib((double)(3 * GIB / 8)), 0.38); /* 0.375 */
    ck_assert_double_eq(budget_vllm_format_gib(85257617408.0), 79.4);
}
END_TEST

START_TEST(test_early_messages)
{
    char buf[BUDGET_VLLM_MESSAGE];
    const int64_t free_bytes = 85257617408, total = TOTAL; /* 79.40 of 80 GiB */
    ck_assert_str_eq(
        budget_vllm_early_message(false, 0, free_bytes, total, 0.995, buf, sizeof(buf)),
        "Free memory on device (79.4/80.0 GiB) on startup is less than desired GPU "
        "memory utilization (0.995, 79.6 GiB). Decrease GPU memory utilization or "
        "reduce GPU memory used by other processes.");
    ck_assert_str_eq(budget_vllm_early_message(true, 3, free_bytes, total, 0.995, buf, sizeof(buf)),
                     "Free memory on device cuda:3 (79.4/80.0 GiB) on startup is less than "
                     "desired GPU memory utilization (0.995, 79.6 GiB). Decrease GPU memory "
                     "utilization or reduce GPU memory used by other processes.");
    ck_assert_ptr_nonnull(
        strstr(budget_vllm_early_message(true, -1, free_bytes, total, 0.995, buf, sizeof(buf)),
               "on device cuda:? ("));
}
END_TEST

/* estimate_max_model_len as vLLM writes it: a binary search over 1..max. */
static int64_t searched_max_len(int64_t available, int64_t max_len, int64_t block, int64_t page,
                                int64_t layers)
{
    if (budget_vllm_needed_bytes(1, block, page, layers) > available)
        return 0;
    int64_t left = 1, right = max_len, result = 1;
    while (left <= right) {
        int64_t mid = (left + right) / 2;
        if (budget_vllm_needed_bytes(mid, block, page, layers) <= available) {
            result = mid;
            left = mid + 1;
        } else {
            right = mid - 1;
        }
    }
    return result;
}

START_TEST(test_blocks_and_max_model_len)
{
    /* get_num_blocks: available // page_size // num_layers */
    ck_assert_int_eq(budget_vllm_blocks(10 * GIB + 5, 65536, 32), (10 * GIB + 5) / 65536 / 32);
    ck_assert_int_eq(budget_vllm_blocks(-1, 65536, 32), 0);
    /* layers * cdiv(len, block_size) * page */
    ck_assert_int_eq(budget_vllm_needed_bytes(4097, 16, 65536, 32), 32 * 257 * 65536);
    ck_assert_int_eq(budget_vllm_needed_bytes(4096, 16, 65536, 32), 32 * 256 * 65536);
    static const int64_t availables[] = {1, 65536 * 32 - 1, 65536 * 32, 3 * GIB + 17, 40 * GIB};
    for (size_t i = 0; i < sizeof(availables) / sizeof(availables[0]); i++)
        for (int64_t len = 1000; len <= 1000000; len *= 10)
            ck_assert_int_eq(budget_vllm_estimated_max_len(availables[i], len, 16, 65536, 32),
                             searched_max_len(availables[i], len, 16, 65536, 32));
    char buf[BUDGET_VLLM_MESSAGE];
    ck_assert_str_eq(
        budget_vllm_max_len_message(100000, 3 * GIB, GIB + GIB / 2, 48000, buf, sizeof(buf)),
        "To serve at least one request with the models's max seq len (100000), "
        "(3.00 GiB KV cache is needed, which is larger than the available KV cache "
        "memory (1.50 GiB). Based on the available memory, the estimated maximum "
        "model length is 48000. Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine.");
    /* no estimate: vLLM's f-string leaves two spaces */
    ck_assert_ptr_nonnull(
        strstr(budget_vllm_max_len_message(100000, 3 * GIB, 1, 0, buf, sizeof(buf)),
               "(0.00 GiB).  Try increasing"));
}
END_TEST

/* ---- cutrace budget on traces ---- */

static struct proc_result budget(const char *dir, const char *const *opts, bool json)
{
    const char *args[24] = {"budget", "--framework", "vllm"};
    size_t n = 3;
    for (; opts && *opts && n < 20; opts++)
        args[n++] = *opts;
    if (json)
        args[n++] = "--json";
    args[n++] = dir;
    args[n] = NULL;
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(!r.signaled, "killed; stderr:\n%.1500s", r.err);
    return r;
}

/* A worker with no Python stacks that measured once and stopped: NCCL's
 * buffers, S0, nothing after it (its launcher's line says U when util). */
static void s0_only_trace(const char *dir, const char *util)
{
    char *path = fixture_trace_path(dir, "node1", 4100, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    char cmdline[128];
    snprintf(cmdline, sizeof(cmdline), "python3 -m vllm.entrypoints.openai.api_server%s%s",
             util ? " --gpu-memory-utilization " : "", util ? util : "");
    struct fixture_process p = {.pid = 4100,
                                .ppid = 4000,
                                .host = "node1",
                                .cmdline = cmdline,
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = 3000000000ll,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, "GPU-d0000000-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3",
                   TOTAL);
    fixture_call(f, CT_API_cudaSetDevice, 0, 0, 0, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000ll, 64 * MIB, 0);
    fixture_meminfo(f, 0, 85257617408, TOTAL);
    fixture_close(f);
    free(path);
}

START_TEST(test_s0_alone_replays_the_early_failure)
{
    char *dir = scratch_dir();
    s0_only_trace(dir, "0.995");
    struct proc_result r = budget(dir, NULL, true);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    char *j = compact(r.out);
    assert_contains(j, "\"s0_only\":true,\"device_ordinal\":0,");
    assert_contains(j, "\"post\":null,");
    assert_contains(j, "\"early_failure\":true,\"fits\":false,\"tokens\":null,\"verdict\":\"Free "
                       "memory on device (79.4/80.0 GiB) on startup is less than desired GPU "
                       "memory utilization (0.995, 79.6 GiB). Decrease GPU memory utilization or "
                       "reduce GPU memory used by other processes.\"");
    free(j);
    proc_result_free(&r);

    /* The current path names the device and rounds requested up. */
    const char *current[] = {"--server-version", "0.20.1", NULL};
    r = budget(dir, current, true);
    j = compact(r.out);
    assert_contains(j, "\"vllm_path\":\"current\",\"vllm_path_source\":\"option\",");
    char requested[64];
    snprintf(requested, sizeof(requested), "\"requested_bytes\":%" PRId64 ",",
             budget_vllm_requested_ceil(TOTAL, 0.995));
    assert_contains(j, requested);
    assert_contains(j, "\"verdict\":\"Free memory on device cuda:0 (79.4/80.0 GiB)");
    free(j);
    proc_result_free(&r);

    const char *text_opts[] = {"--server-version", "0.20.1", NULL};
    r = budget(dir, text_opts, false);
    char *t = squeeze(r.out);
    assert_contains(t, "S0 only: free 79.40 GiB of total 80.00 GiB");
    assert_contains(t, "code path replayed: vLLM current (U default 0.92");
    free(t);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

/* S0 that passes its check: the worker stopped for another reason, and the
 * rank stays unanalysed as before (exit 1, its problem said). */
START_TEST(test_s0_alone_that_passes_is_not_analysed)
{
    char *dir = scratch_dir();
    s0_only_trace(dir, "0.5");
    struct proc_result r = budget(dir, NULL, true);
    ck_assert_int_eq(r.status, 1);
    char *j = compact(r.out);
    assert_contains(j, "\"analysed\":false,\"problem\":\"no weight burst");
    assert_contains(j, "\"ranks_analysed\":0,");
    free(j);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_path_and_default_u)
{
    char *dir = scratch_dir();
    s0_only_trace(dir, NULL); /* no U on any line: the path's default */
    const char *older[] = {"--server-version", "0.11.0", NULL};
    struct proc_result r = budget(dir, older, true);
    char *j = compact(r.out);
    assert_contains(j, "\"gpu_memory_utilization\":0.90000000000000002,"
                       "\"gpu_memory_utilization_source\":\"default\",");
    assert_contains(j, "\"vllm_path\":\"older\",\"vllm_path_source\":\"option\","
                       "\"vllm_path_why\":\"--server-version 0.11.0: before 0.18\"");
    free(j);
    proc_result_free(&r);
    const char *current[] = {"--server-version", "v0.18.0", NULL};
    r = budget(dir, current, true);
    j = compact(r.out);
    assert_contains(j, "\"gpu_memory_utilization\":0.92000000000000004,");
    assert_contains(j, "\"vllm_path\":\"current\"");
    free(j);
    proc_result_free(&r);
    /* what the trace lacks for the blocks is named */
    const char *greedy[] = {"--gpu-memory-utilization", "0.995", NULL};
    r = budget(dir, greedy, true);
    j = compact(r.out);
    assert_contains(j, "\"missing_inputs\":\"vLLM's blocks and its max_model_len check need");
    free(j);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

/*
 * A current worker without Python stacks: S0, the weights, memory_profiling's
 * snapshot before profile_run, the pass (activations made and freed), its
 * snapshot after (S1), then the KV cache. S1 is the one after the pass, not
 * the first after the weights (issue 18: 30.41 GB available vs 25.80).
 */
START_TEST(test_s1_after_the_profiling_pass)
{
    char *dir = scratch_dir();
    char *path = fixture_trace_path(dir, "node1", 4200, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 4200,
                                .ppid = 4000,
                                .host = "node1",
                                .cmdline = "python3 -m vllm.entrypoints.openai.api_server",
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = 3000000000ll,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, "GPU-e0000000-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3",
                   TOTAL);
    fixture_call(f, CT_API_cudaSetDevice, 0, 0, 0, 0);
    const int64_t context = 512 * MIB, weights = 24 * 64 * MIB, act = 768 * MIB;
    int64_t s0_free = TOTAL - context;
    fixture_meminfo(f, 0, s0_free, TOTAL);
    for (int i = 0; i < 24; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0x600000000000ll + i * 64 * MIB, 64 * MIB, 0);
    int64_t before_seq = fixture_meminfo(f, 0, s0_free - weights, TOTAL);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f3000000000ll, act, 0);
    fixture_call(f, CT_API_cudaFree, 0, 0x7f3000000000ll, 0, 0);
    int64_t s1_seq = fixture_meminfo(f, 0, s0_free - weights, TOTAL);
    for (int i = 0; i < 4; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0x7f4000000000ll + i * 512 * MIB, 512 * MIB, 0);
    fixture_close(f);
    free(path);

    const char *opts[] = {"--gpu-memory-utilization", "0.9", NULL};
    struct proc_result r = budget(dir, opts, true);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    char *j = compact(r.out);
    char want[128];
    snprintf(want, sizeof(want), "\"post\":{\"seq\":%" PRId64 ",", s1_seq);
    assert_contains(j, want);
    snprintf(want, sizeof(want), "seq %" PRId64 " is memory_profiling's before profile_run",
             before_seq);
    assert_contains(j, want);
    snprintf(want, sizeof(want), "\"available_kv_bytes\":%" PRId64 ",",
             budget_vllm_requested(TOTAL, 0.9) - (weights + act));
    assert_contains(j, want);
    free(j);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_vllm_options)
{
    char *dir = scratch_dir();
    /* --num-layers is both servers' (SGLang's draft scale); --block-bytes vLLM's */
    const char *sglang[] = {"budget", "--framework", "sglang", "--block-bytes", "32", dir, NULL};
    struct proc_result r = run_cutrace(sglang, NULL);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "--block-bytes is a vLLM option");
    proc_result_free(&r);
    const char *bad[] = {"budget", "--framework", "vllm", "--block-size", "0", dir, NULL};
    r = run_cutrace(bad, NULL);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "--block-size 0: expected a whole number >= 1");
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

Suite *budget_vllm_suite(void)
{
    Suite *s = suite_create("budget_vllm");
    TCase *pure = tcase_create("arithmetic");
    tcase_add_test(pure, test_requested_by_path);
    tcase_add_test(pure, test_python_formatting);
    tcase_add_test(pure, test_early_messages);
    tcase_add_test(pure, test_blocks_and_max_model_len);
    suite_add_tcase(s, pure);
    TCase *tc = tcase_create("traces");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_s0_alone_replays_the_early_failure);
    tcase_add_test(tc, test_s0_alone_that_passes_is_not_analysed);
    tcase_add_test(tc, test_path_and_default_u);
    tcase_add_test(tc, test_s1_after_the_profiling_pass);
    tcase_add_test(tc, test_vllm_options);
    suite_add_tcase(s, tc);
    return s;
}
