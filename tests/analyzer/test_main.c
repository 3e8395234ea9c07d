/*
 * test_main.c - runs every analyzer test suite with Check and exits non-zero
 * if any test failed. Suites that run the `cutrace` binary find it through
 * $CUTRACE_BIN (see analyzer/analyzer.mk).
 */
#include "out/table.h"
#include "test_support.h"

#include <stdlib.h>

/* The model-based reports' suites (test_timeline.c, test_budget.c). */
Suite *timeline_suite(void);
Suite *budget_suite(void);
Suite *budget_vllm_suite(void);     /* test_budget_vllm.c */
Suite *diff_suite(void);            /* test_diff.c */
Suite *stacks_merge_suite(void);    /* test_stacks_merge.c */
Suite *readonly_suite(void);        /* test_readonly.c */
Suite *collcalls_suite(void);       /* test_collcalls.c */
Suite *comms_suite(void);           /* test_comms.c */
Suite *conventions_suite(void);     /* test_conventions.c */
Suite *model_views_suite(void);     /* test_model_views.c */
Suite *progress_suite(void);        /* test_progress.c */
Suite *model_ipcstacks_suite(void); /* test_model_ipcstacks.c */
Suite *ls_suite(void);              /* test_ls.c */
Suite *clocks_suite(void);          /* test_clocks.c */
Suite *ancestors_suite(void);       /* test_ancestors.c */
Suite *manifest_suite(void);        /* test_manifest.c */
Suite *inflight_suite(void);        /* test_inflight.c */
Suite *budget_detect_suite(void);   /* test_budget_detect.c */
Suite *report_suite(void);          /* test_report.c */
Suite *nvtx_phases_suite(void);     /* test_nvtx_phases.c */
Suite *export_suite(void);          /* test_export.c */

int main(void)
{
    /* Reports size their tables from the terminal or $COLUMNS: the suites
     * expect the default width unless a test asks for another. */
    unsetenv("COLUMNS");
    table_set_width(TABLE_MAX_WIDTH);
    SRunner *runner = srunner_create(units_suite());
    srunner_add_suite(runner, json_suite());
    srunner_add_suite(runner, table_suite());
    srunner_add_suite(runner, errnames_suite());
    srunner_add_suite(runner, trace_suite());
    srunner_add_suite(runner, summary_suite());
    srunner_add_suite(runner, summary_driver_suite());
    srunner_add_suite(runner, bad_input_suite());
    srunner_add_suite(runner, run_suite());
    srunner_add_suite(runner, recover_suite());
    srunner_add_suite(runner, collectives_suite());
    srunner_add_suite(runner, collcalls_suite());
    srunner_add_suite(runner, comms_suite());
    srunner_add_suite(runner, timeline_suite());
    srunner_add_suite(runner, budget_suite());
    srunner_add_suite(runner, budget_detect_suite());
    srunner_add_suite(runner, budget_vllm_suite());
    srunner_add_suite(runner, diff_suite());
    srunner_add_suite(runner, stacks_merge_suite());
    srunner_add_suite(runner, readonly_suite());
    srunner_add_suite(runner, conventions_suite());
    srunner_add_suite(runner, model_views_suite());
    srunner_add_suite(runner, progress_suite());
    srunner_add_suite(runner, model_ipcstacks_suite());
    srunner_add_suite(runner, ls_suite());
    srunner_add_suite(runner, clocks_suite());
    srunner_add_suite(runner, ancestors_suite());
    srunner_add_suite(runner, pack_suite());
    srunner_add_suite(runner, manifest_suite());
    srunner_add_suite(runner, nvtx_phases_suite());
    srunner_add_suite(runner, inflight_suite());
    srunner_add_suite(runner, report_suite());
    srunner_add_suite(runner, export_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
