/*
 * main.c - runs the integration suites (CK_RUN_SUITE=<name> picks one).
 */
#include <check.h>

#include "suites.h"

int main(void)
{
    SRunner *sr = srunner_create(runtime_suite());
    srunner_add_suite(sr, reliability_suite());
    srunner_add_suite(sr, nccl_suite());
    srunner_add_suite(sr, roads_suite());
    srunner_add_suite(sr, budget_suite());
    srunner_add_suite(sr, stacks_suite());
    srunner_add_suite(sr, diff_suite());
    srunner_add_suite(sr, run_suite());
    srunner_add_suite(sr, budget_names_suite());
    srunner_add_suite(sr, budget_vllm_suite());
    srunner_add_suite(sr, pyframes_suite());
    srunner_add_suite(sr, security_suite());
    srunner_add_suite(sr, creation_kill_suite());
    srunner_add_suite(sr, startfinish_suite());
    srunner_add_suite(sr, hotpath_suite());
    srunner_add_suite(sr, order_suite());
    srunner_add_suite(sr, fds_suite());
    srunner_add_suite(sr, launch_suite());
    srunner_add_suite(sr, pack_suite());
    srunner_add_suite(sr, entered_suite());
    srunner_add_suite(sr, budget_paths_suite());
    srunner_add_suite(sr, nvtx_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
