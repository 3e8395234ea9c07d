/*
 * test_errnames.c - result code names per layer (analyzer/model/errnames.c).
 */
#include "model/errnames.h"
#include "test_support.h"

START_TEST(test_runtime_names)
{
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 0), "cudaSuccess");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 2), "cudaErrorMemoryAllocation");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 35), "cudaErrorInsufficientDriver");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 46), "cudaErrorDevicesUnavailable");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 100), "cudaErrorNoDevice");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 101), "cudaErrorInvalidDevice");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 217), "cudaErrorPeerAccessUnsupported");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 400), "cudaErrorInvalidResourceHandle");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 700), "cudaErrorIllegalAddress");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 719), "cudaErrorLaunchFailure");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 801), "cudaErrorNotSupported");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 901), "cudaErrorStreamCaptureInvalidated");
    ck_assert_str_eq(result_name(LAYER_RUNTIME, 999), "cudaErrorUnknown");
}
END_TEST

START_TEST(test_driver_and_nccl_names)
{
    ck_assert_str_eq(result_name(LAYER_DRIVER, 2), "CUDA_ERROR_OUT_OF_MEMORY");
    ck_assert_str_eq(result_name(LAYER_DRIVER, 201), "CUDA_ERROR_INVALID_CONTEXT");
    ck_assert_str_eq(result_name(LAYER_DRIVER, 304), "CUDA_ERROR_OPERATING_SYSTEM");
    ck_assert_str_eq(result_name(LAYER_DRIVER, 999), "CUDA_ERROR_UNKNOWN");
    ck_assert_str_eq(result_name(LAYER_NCCL, 0), "ncclSuccess");
    ck_assert_str_eq(result_name(LAYER_NCCL, 2), "ncclSystemError");
    ck_assert_str_eq(result_name(LAYER_NCCL, 6), "ncclRemoteError");
    ck_assert_str_eq(result_name(LAYER_NCCL, 7), "ncclInProgress");
}
END_TEST

START_TEST(test_unknown_codes)
{
    char buf[64];
    ck_assert_ptr_null(result_name(LAYER_RUNTIME, 12345));
    ck_assert_ptr_null(result_name(LAYER_NCCL, 8));
    ck_assert_ptr_null(result_name(LAYER_UNKNOWN, 0));
    ck_assert_str_eq(result_describe(buf, sizeof(buf), LAYER_RUNTIME, 12345), "error 12345");
    ck_assert_str_eq(result_describe(buf, sizeof(buf), LAYER_DRIVER, -3), "error -3");
    ck_assert_str_eq(result_describe(buf, sizeof(buf), result_layer_from_name("bogus"), 2),
                     "error 2");
    ck_assert_str_eq(result_describe(buf, sizeof(buf), result_layer_from_name("runtime"), 2),
                     "cudaErrorMemoryAllocation");
    ck_assert_int_eq(result_layer_from_name(NULL), LAYER_UNKNOWN);
}
END_TEST

START_TEST(test_required_codes_and_order)
{
    ck_assert(result_names_sorted(LAYER_RUNTIME));
    ck_assert(result_names_sorted(LAYER_DRIVER));
    ck_assert(result_names_sorted(LAYER_NCCL));
    /* Codes the brief requires, where the runtime header defines them. */
    static const int runtime_required[] = {
        0,   1,   2,   3,   4,   5,   6,   7,   8,   9,   35,  46,  100, 101, 200, 201, 205, 206,
        207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223, 224,
        225, 300, 301, 302, 303, 304, 400, 401, 500, 600, 700, 701, 702, 703, 704, 705, 708, 709,
        710, 711, 712, 713, 714, 715, 716, 717, 718, 719, 720, 800, 801, 802, 803, 804, 805, 806,
        807, 808, 809, 810, 811, 900, 901, 902, 903, 904, 905, 906, 907, 908, 909, 910, 999};
    for (size_t i = 0; i < sizeof(runtime_required) / sizeof(runtime_required[0]); i++)
        ck_assert_msg(result_name(LAYER_RUNTIME, runtime_required[i]) != NULL, "runtime %d",
                      runtime_required[i]);
    static const int driver_required[] = {0,   1,   2,   3,   4,   5,   6,   7,   8,   46,
                                          100, 101, 200, 201, 202, 300, 304, 400, 401, 500,
                                          600, 700, 719, 720, 800, 811, 900, 910, 999};
    for (size_t i = 0; i < sizeof(driver_required) / sizeof(driver_required[0]); i++)
        ck_assert_msg(result_name(LAYER_DRIVER, driver_required[i]) != NULL, "driver %d",
                      driver_required[i]);
}
END_TEST

Suite *errnames_suite(void)
{
    Suite *s = suite_create("errnames");
    TCase *tc = tcase_create("errnames");
    tcase_add_test(tc, test_runtime_names);
    tcase_add_test(tc, test_driver_and_nccl_names);
    tcase_add_test(tc, test_unknown_codes);
    tcase_add_test(tc, test_required_codes_and_order);
    suite_add_tcase(s, tc);
    return s;
}
