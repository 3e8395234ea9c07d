/*
 * report.c - `cutrace report DIR... -o FILE`: one self-contained HTML page
 * (no network, no external script, font or style: out/html.h) that opens
 * from disk and shows a run as pictures: per GPU its memory over time, the
 * server's budget as a waterfall per rank, the memory live at each GPU's
 * peak as a flame graph of call sites, the collectives with their problems.
 * The sections are analysis/report.h's; this file is the options, the
 * analyses they draw and the page's order.
 *
 * The reports' --rank, --pid, --host and --gpu (model/filter.h) choose
 * what the page lists: the processes, the GPUs' charts and flame graphs,
 * the budget's ranks, the communicators; what belongs to a GPU or a job as
 * a whole (its memory, its verdict) stays computed over everything.
 *
 * The run is loaded once (the collectives' build loads the model every
 * other section reads). The budget is replayed when --framework is given or
 * the traces show the server (budget_detect.h), exactly as `cutrace budget`
 * replays it, so the page's numbers are that report's. The page is written
 * under a hidden name and renamed (out_write_file), so a failed write leaves no
 * half page; the traces are only read.
 */
#include "cli.h"
#include "analysis/budget_analysis.h"
#include "analysis/budget_detect.h"
#include "analysis/coll_listing.h"
#include "analysis/collectives.h"
#include "analysis/report.h"
#include "analysis/timeline.h"
#include "model/filter.h"
#include "model/gpumodel.h"
#include "model/traceset.h"
#include "out/html.h"
#include "out/outfile.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: cutrace report [options] DIR... -o FILE\n"
    "\n" CLI_PATHS_HELP "\n"
    "One self-contained HTML page (no network, no external script, font or\n"
    "style) that opens from disk: per GPU, memory over time (the traced\n"
    "categories stacked, used memory at each cudaMemGetInfo, unexplained memory,\n"
    "milestones as labelled lines, failed calls marked; hover shows values); the\n"
    "server's budget as a waterfall per rank; the memory live at each GPU's peak\n"
    "as a flame graph of call sites; the collectives, problems highlighted.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE             write the page here (required)\n"
    "  --framework sglang|vllm       the server whose budget to replay (default:\n"
    "                                the one the traces show; none: no budget)\n"
    "  --mem-fraction-static F       SGLang's F (else the command line's)\n"
    "  --gpu-memory-utilization U    vLLM's U (else the command line's, else "
    "0.9)\n" CLI_BUDGET_INPUTS_HELP CLI_FILTER_HELP CLI_HELP_HELP "\n"
    "The budget options are `cutrace budget`'s. The filters choose what the page\n"
    "lists: processes, GPUs (their charts and flame graphs, of the listed\n"
    "processes' allocations), the budget's ranks and the communicators; a GPU's\n"
    "memory and a job's verdict stay computed over every process.\n"
    "\n"
    "exit status:\n"
    "  0  the page was written\n"
    "  1  bad input: a trace that cannot be used, a budget that cannot be\n"
    "     replayed as asked, or FILE cannot be written\n"
    "  2  usage error: a wrong option or argument, a filter that matches nothing\n";

struct report_options {
    const char *output;
    struct budget_options budget;
    struct budget_option_state st;
    struct cli_report_opts rep;
};

static int parse_options(int argc, char **argv, struct report_options *o)
{
    static const struct option options[] = {
        BUDGET_LONG_OPTIONS, {"output", required_argument, NULL, 'o'},
        CLI_FILTER_OPTIONS,  {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = argv[0];
    budget_options_init(&o->budget, &o->st);
    cli_report_init(&o->rep);
    o->output = NULL;
    int c;
    while ((c = cli_getopt(argc, argv, "ho:", options, usage)) != -1) {
        if (cli_report_option(&o->rep, c, optarg))
            continue;
        int taken = budget_option(cmd, c, optarg, &o->budget, &o->st);
        if (taken > 1)
            return taken;
        if (taken == 1)
            continue;
        switch (c) {
        case 'o':
            o->output = optarg;
            break;
        case 'h':
            return CLI_EXIT_OK;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    o->st.detect = true;
    int finished = budget_options_finish(cmd, false, &o->budget, &o->st);
    if (finished != CLI_PARSED)
        return finished;
    if (!o->output || !o->output[0])
        return cli_usage_error(cmd, "-o FILE is required: where to write the page");
    if (cli_report_finish(&o->rep, cmd, NULL) != CLI_PARSED)
        return CLI_EXIT_USAGE;
    if (cli_report_operands(&o->rep, argc, argv, optind) != CLI_PARSED)
        return CLI_EXIT_USAGE;
    return CLI_PARSED;
}

/* ---- sections ---- */

static void processes(FILE *out, const struct gm_model *m, const struct gm_filter *f)
{
    fputs("<table class=\"procs\"><tr><th>host</th><th class=\"n\">pid</th>"
          "<th class=\"n\">rank</th><th>ended</th><th>command line</th></tr>\n",
          out);
    for (size_t i = 0; i < m->nprocs; i++) {
        if (!gm_filter_proc(f, (uint32_t)i))
            continue;
        const struct gm_process *p = &m->procs[i];
        const char *ended = p->exited ? "exited" : p->end_state ? p->end_state : "unknown";
        fputs("<tr><td>", out);
        html_text(out, p->host);
        fprintf(out, "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">", p->pid);
        if (p->has_rank)
            fprintf(out, "%" PRId64 "/%" PRId64, p->rank, p->world_nranks);
        fputs("</td><td>", out);
        html_text(out, ended);
        fputs("</td><td class=\"mono\">", out);
        html_text(out, p->cmdline);
        fputs("</td></tr>\n", out);
    }
    fputs("</table>\n", out);
}

static void memory(FILE *out, const struct gm_model *m, const struct gm_filter *f)
{
    for (size_t i = 0; i < m->ngpus; i++) {
        if (!gm_filter_gpu(f, (uint32_t)i))
            continue;
        const struct gm_gpu *g = &m->gpus[i];
        struct gpu_report gr = {.gpu = (uint32_t)i};
        timeline_build_gpu(m, &gr);
        timeline_keep_listed(&gr, f);
        fputs("<h3>", out);
        html_textf(out, "GPU %zu: %s%s%s", i, g->key, g->name[0] ? ", " : "", g->name);
        fputs("</h3>\n", out);
        char id[32];
        snprintf(id, sizeof(id), "mem-%zu", i);
        report_memory_chart(out, m, &gr, id);
        free(gr.rows);
    }
    if (m->ngpus == 0)
        html_elem(out, "p", "note", "no GPU memory in these traces");
}

/*
 * The budget, replayed as `cutrace budget` replays it; NULL text in *why
 * when it was, else why not (malloc'd). Returns 0, or -1 after an error line.
 */
static int budget(struct report_options *o, struct gm_model *m, struct budget_analysis *r,
                  char **why)
{
    *why = NULL;
    o->budget.path = o->rep.paths[0];
    *r = (struct budget_analysis){.m = m, .o = &o->budget};
    if (o->st.framework) {
        r->server.framework_source = "option";
    } else {
        enum budget_framework fw;
        char *detected = NULL;
        if (!budget_detect_framework(m, &fw, &detected)) {
            *why = xstrdup("the traces do not show which server made them: --framework "
                           "sglang|vllm replays its budget");
            return 0;
        }
        o->budget.framework = fw;
        r->server.framework_source = "trace";
        r->server.framework_why = detected;
        if (budget_options_framework("report", &o->budget, &o->st) != CLI_PARSED)
            return -1;
    }
    budget_values_from_cmdlines(r);
    if (budget_derive_fraction(r) != 0 || budget_analyse(r) != 0)
        return -1;
    if (r->analysed == 0)
        *why = xstrdup("no rank could be analysed: `cutrace budget` says why");
    return 0;
}

static void notes(FILE *out, const struct gm_model *m)
{
    if (m->nnotes == 0)
        return;
    fputs("<h2>Notes</h2>\n<ul class=\"note\">\n", out);
    for (size_t i = 0; i < m->nnotes; i++) {
        fputs("<li>", out);
        html_text(out, m->notes[i]);
        fputs("</li>\n", out);
    }
    fputs("</ul>\n", out);
}

static int write_page(FILE *out, const char *path, struct gm_model *m,
                      const struct budget_analysis *b, const char *no_budget,
                      const struct coll_listing *coll, const struct gm_filter *f,
                      const char *filters)
{
    char *title = xasprintf("cutrace report: %s", path);
    html_page_begin(out, title);
    fputs("<h1>", out);
    html_text(out, title);
    fputs("</h1>\n", out);
    free(title);
    html_textf(out, "cutrace %s, %zu processes, %zu GPUs.", CUTRACE_VERSION, m->nprocs, m->ngpus);
    if (filters[0])
        html_textf(out, " Listed (%s): %zu processes, %zu GPUs.", filters, f->nprocs, f->ngpus);
    fputs("\n<h2>Processes</h2>\n", out);
    processes(out, m, f);
    fputs("<h2>Memory over time</h2>\n", out);
    memory(out, m, f);
    fputs("<h2>Budget</h2>\n", out);
    if (no_budget)
        html_elem(out, "p", "note", no_budget);
    else
        report_budget(out, b, f, NULL);
    fputs("<h2>Call sites at each GPU's peak</h2>\n", out);
    int status = report_flame(out, m, f);
    fputs("<h2>Collectives</h2>\n", out);
    report_collectives(out, coll);
    notes(out, m);
    if (html_page_end(out) != 0)
        return -2;
    return status;
}

struct page {
    const char *path;
    struct gm_model *m;
    const struct budget_analysis *b;
    const char *no_budget;
    const struct coll_listing *coll;
    const struct gm_filter *f;
    const char *filters; /* as given, "" without */
};

static int write_cb(FILE *out, void *ctx)
{
    struct page *p = ctx;
    return write_page(out, p->path, p->m, p->b, p->no_budget, p->coll, p->f, p->filters);
}

int cmd_report(int argc, char **argv)
{
    struct report_options o;
    int parsed = parse_options(argc, argv, &o);
    if (parsed != CLI_PARSED)
        return parsed;
    struct trace_set set;
    if (trace_set_open_paths(&set, o.rep.paths, o.rep.npaths) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct coll_report coll;
    int status = CLI_EXIT_OK;
    if (coll_build(&coll, &set, set.path) != 0) {
        coll_free(&coll);
        trace_set_close(&set);
        return CLI_EXIT_BAD_INPUT;
    }
    struct gm_filter f;
    status = gm_filter_init(&f, &coll.model, &o.rep, argv[0]);
    if (status == CLI_EXIT_OK) {
        struct coll_listing listing;
        coll_listing_init(&listing, &coll, &f);
        char filters[256];
        gm_filter_given(filters, sizeof(filters), &o.rep);
        struct budget_analysis b;
        char *no_budget = NULL;
        if (budget(&o, &coll.model, &b, &no_budget) != 0)
            status = CLI_EXIT_BAD_INPUT;
        else
            status = out_write_file(o.output, write_cb,
                                    &(struct page){set.path, &coll.model, &b, no_budget, &listing,
                                                   &f, filters})
                         ? CLI_EXIT_BAD_INPUT
                         : CLI_EXIT_OK;
        free(no_budget);
        budget_analysis_free(&b);
        coll_listing_free(&listing);
    }
    gm_filter_free(&f);
    coll_free(&coll);
    trace_set_close(&set);
    return status;
}
