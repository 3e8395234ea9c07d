/*
 * fuzz_trace.c - libFuzzer target for trace files: the input becomes x.db in
 * a scratch directory, and the trace loader (analyzer/model/trace.c, with its
 * ring-folding step), the GPU model (analyzer/model/gpumodel.c), the stacks and
 * every report that reads one trace (summary, collectives, timeline, budget
 * for both frameworks, sites: text and JSON) run over it in-process,
 * exactly as `cutrace summary x.db` would; then `cutrace diff` compares it
 * with a copy of itself (y.db), which reads it as two runs.
 *
 * What counts as a bug: a crash, an assertion, an AddressSanitizer or
 * UndefinedBehaviorSanitizer report, a leak, or an exit status outside
 * 0/1/2. Rejecting the input (exit 1) is the expected answer to most inputs.
 * Seeds are real traces (`make fuzz` makes them, fuzz/fuzz.mk).
 */
#include "cli.h"
#include "fuzz_support.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_clean();
    fuzz_write("x.db", data, size);
    /* Each run reads the file afresh: the text run may have left a -shm. */
    fuzz_run(cmd_summary, "summary", fuzz_path("x.db"), 0);
    fuzz_run(cmd_summary, "summary", fuzz_path("x.db"), 1);
    fuzz_run(cmd_collectives, "collectives", fuzz_path("x.db"), 0);
    fuzz_run(cmd_collectives, "collectives", fuzz_path("x.db"), 1);
    fuzz_run(cmd_timeline, "timeline", fuzz_path("x.db"), 0);
    fuzz_run(cmd_timeline, "timeline", fuzz_path("x.db"), 1);
    const char *x = fuzz_path("x.db");
    const char *sglang[] = {"budget", "--framework", "sglang", "--mem-fraction-static", "0.8",
                            x,        NULL};
    const char *vllm[] = {"budget", "--framework", "vllm", "--json", x, NULL};
    const char *sites[] = {"sites", "--json", x, NULL};
    const char *folded[] = {"sites", "--folded", x, NULL};
    fuzz_run_args(cmd_budget, sglang);
    fuzz_run_args(cmd_budget, vllm);
    fuzz_run_args(cmd_sites, sites);
    fuzz_run_args(cmd_sites, folded);
    /* Two files, so not "the same run"; x.db as the reports above left it.
     * Text or JSON by the input's length: both printers, at one diff a run. */
    fuzz_write("y.db", data, size);
    char y[PATH_MAX + 256];
    snprintf(y, sizeof(y), "%s", fuzz_path("y.db"));
    const char *diff_json[] = {"diff", "--json", fuzz_path("x.db"), y, NULL};
    const char *diff_text[] = {"diff", fuzz_path("x.db"), y, NULL};
    fuzz_run_args(cmd_diff, size & 1 ? diff_json : diff_text);
    return 0;
}
