/*
 * diff.c - `cutrace diff BASELINE OTHER [--json|--csv]`: what the second run
 * does differently from the first and what it costs, aligned by phase, not
 * by wall time. This file is the options and the call: the comparison is
 * diff_analysis.h's, its text, JSON and CSV diff_report.h's.
 *
 * The text report reads like `heaptrack_print --diff`: a short summary
 * first (the verdict, the first milestone that diverges, what each phase
 * made more or less of, the budget and configuration changes), then the
 * details: the milestones of one pair of GPUs side by side, the
 * allocation groups that differ ranked by their cost to local GPU memory,
 * IPC lineage, communicators and collectives, the budget, the
 * configuration. A is the baseline, B the other run; deltas are B - A,
 * signed. Lines fit 120 columns. --json carries every pair, every step and
 * every group with raw numbers.
 *
 * --html FILE writes the same comparison as one HTML page instead
 * (analysis/report_diff.c).
 *
 * --rank, --pid, --host and --gpu choose the GPU pairs listed
 * (analysis/diff_filter.c says how a filter names a pair of two runs).
 *
 * Nothing that makes two identical runs differ (pids, pointers, times, file
 * names, communicator hashes) is compared; pids and seqs appear in JSON as
 * context only.
 */
#include "cli.h"
#include "analysis/diff_analysis.h"
#include "analysis/diff_report.h"
#include "analysis/report.h"
#include "out/html.h"
#include "out/outfile.h"
#include "out/units.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: cutrace diff [options] BASELINE_DIR OTHER_DIR\n"
    "\n"
    "What the other run does differently from the baseline, and what it costs.\n"
    "GPUs are paired by NCCL rank (else device ordinal, else uuid); their\n"
    "milestones (NCCL init, IPC setup, each cudaMemGetInfo, weight burst, graph\n"
    "capture, ...) are aligned by what they are, not by time. Reported: live and\n"
    "free memory at each milestone and the first that diverges; allocations one\n"
    "run made and the other did not, by phase, api, issuing module and size; IPC\n"
    "lineage; communicators and collectives; the KV-cache budget (--framework);\n"
    "command lines and recorded environment. A = baseline, B = other, deltas B - A.\n"
    "\n"
    "options:\n"
    "  --threshold BYTES             a milestone diverges past this (default 16M)\n"
    "  --framework sglang|vllm       compare the budgets, as `cutrace budget` does\n"
    "  --mem-fraction-static F       SGLang's F (else each run's command line)\n"
    "  --gpu-memory-utilization U    vLLM's U (else the command line's, else "
    "0.9)\n" CLI_BUDGET_INPUTS_HELP
    "  --html FILE                   write the diff as one self-contained HTML page\n"
    "                                (charts aligned by milestone, the tables)\n"
    "                                instead of the text report\n" CLI_FILTER_HELP CLI_FORMAT_HELP
        CLI_HELP_HELP "\n"
    "The filters choose the GPU pairs listed: a pair passes when a process on\n"
    "its GPU, in either run, has a rank, pid and host listed; --gpu INDEX is the\n"
    "pair's index in the unfiltered report (JSON gpus.pairs[].index), a uuid\n"
    "prefix may match either side. The summary, milestones, allocations and\n"
    "--fail-on-problem are about the listed pairs; IPC, NCCL, the budget and\n"
    "the configuration stay the whole runs'.\n"
    "\n"
    "Tables for --csv: milestones (one row per aligned milestone of each GPU pair),\n"
    "allocations (one row per allocation group that differs).\n"
    "\n" CLI_EXIT_HELP("a listed pair's milestone diverges past --threshold\n"
                       "exit 0 when compared, whether or not the runs differ");

static const char *const csv_tables[] = {"milestones", "allocations", NULL};

/* ---- options ---- */

static bool parse_bytes_opt(const char *text, int64_t *out, bool positive)
{
    uint64_t v;
    if (parse_size(text, &v) != 0 || v > INT64_MAX || (positive && v == 0))
        return false;
    *out = (int64_t)v;
    return true;
}

static int parse_options(int argc, char **argv, struct diff_options *o, struct cli_report_opts *rep,
                         const char **html)
{
    static const struct option options[] = {
        BUDGET_LONG_OPTIONS,
        {"threshold", required_argument, NULL, 't'},
        {"html", required_argument, NULL, 'H'},
        CLI_FILTER_OPTIONS,
        CLI_FORMAT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = argv[0];
    *o = (struct diff_options){.threshold = DIFF_THRESHOLD_DEFAULT};
    struct budget_options *b = &o->budget_options;
    struct budget_option_state st;
    budget_options_init(b, &st);
    cli_report_init(rep);
    int c;
    while ((c = cli_getopt(argc, argv, "h", options, usage)) != -1) {
        if (cli_report_option(rep, c, optarg))
            continue;
        int taken = budget_option(cmd, c, optarg, b, &st);
        if (taken > 1)
            return taken;
        if (taken == 1)
            continue;
        switch (c) {
        case 't':
            if (!parse_bytes_opt(optarg, &o->threshold, false))
                return cli_usage_error(cmd, "--threshold %s: expected a size in bytes", optarg);
            break;
        case 'H':
            if (!optarg[0])
                return cli_usage_error(cmd, "--html: expected a file name");
            *html = optarg;
            break;
        case 'h':
            return CLI_EXIT_OK;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    int finished = budget_options_finish(cmd, false, b, &st);
    if (finished != CLI_PARSED)
        return finished;
    finished = cli_report_finish(rep, cmd, csv_tables);
    if (finished != CLI_PARSED)
        return finished;
    if (*html && rep->format != CLI_FORMAT_TEXT)
        return cli_usage_error(cmd, "--html writes a page instead of the text: not with --%s",
                               rep->format == CLI_FORMAT_JSON ? "json" : "csv");
    o->json = rep->format == CLI_FORMAT_JSON;
    o->filters = rep;
    o->budget = st.framework != NULL;
    b->json = o->json;
    if (argc - optind < 2)
        return cli_usage_error(cmd, "two trace directories expected (baseline, other), got %d",
                               argc - optind);
    if (argc - optind > 2)
        return cli_usage_error(cmd, "two trace directories expected, got %d arguments",
                               argc - optind);
    o->paths[0] = argv[optind];
    o->paths[1] = argv[optind + 1];
    return CLI_PARSED;
}

/* --html: the page (analysis/report.h), one section. */
static int write_html(FILE *out, void *ctx)
{
    const struct diff *d = ctx;
    char *title = xasprintf("cutrace diff: %s vs %s", d->run[DIFF_A].path, d->run[DIFF_B].path);
    html_page_begin(out, title);
    html_elem(out, "h1", NULL, title);
    free(title);
    report_diff(out, d);
    return html_page_end(out) == 0 ? 0 : -2;
}

int cmd_diff(int argc, char **argv)
{
    struct diff_options o;
    struct cli_report_opts rep;
    const char *html = NULL;
    int parsed = parse_options(argc, argv, &o, &rep, &html);
    if (parsed != CLI_PARSED)
        return parsed;
    struct diff d;
    int status = diff_run_all(&d, &o);
    if (status == 0) {
        if (html) {
            if (out_write_file(html, write_html, &d) != 0)
                status = CLI_EXIT_BAD_INPUT;
        } else if (rep.format == CLI_FORMAT_JSON)
            diff_print_json(&d, stdout);
        else if (rep.format == CLI_FORMAT_CSV && rep.csv_table == 1)
            diff_print_csv_allocations(&d, stdout);
        else if (rep.format == CLI_FORMAT_CSV)
            diff_print_csv_milestones(&d, stdout);
        else
            diff_print_text(&d, stdout);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            cli_error(NULL, "cannot write the report to standard output");
            status = CLI_EXIT_BAD_INPUT;
        } else if (rep.fail_on_problem && d.first_div_row >= 0) {
            status = CLI_EXIT_PROBLEM; /* a listed pair diverges past --threshold */
        }
    }
    diff_free(&d);
    return status;
}
