/*
 * export.c - `cutrace export DIR... -o FILE [--format proto|json]`: the
 * whole run as one picture for Perfetto (ui.perfetto.dev) or
 * chrome://tracing: every call as a slice, per GPU live memory as
 * counters, collectives per communicator, milestones, IPC flows
 * (analysis/export.h says what is drawn, docs/export.md how to open it).
 * The reports' --rank, --pid, --host and --gpu (model/filter.h) choose the
 * processes and GPUs drawn, so that one rank of a big run makes a file a
 * viewer can load.
 *
 * The file is written beside its final name and renamed into place once
 * complete, so a failed export never leaves half a trace under that name;
 * an output that is one of the run's own trace files is refused (a report
 * never modifies the traces it reads).
 */
#include "analysis/export.h"
#include "cli.h"
#include "model/filter.h"
#include "model/gpumodel.h"
#include "model/traceset.h"
#include "out/export_json.h"
#include "out/export_proto.h"
#include "out/outfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: cutrace export [options] DIR... -o FILE\n"
    "\n" CLI_PATHS_HELP "\n"
    "The run as one trace for Perfetto (ui.perfetto.dev) or chrome://tracing:\n"
    "a track per process and thread with every call as a slice and its\n"
    "arguments; per GPU, counters of live memory by category, used memory at\n"
    "each cudaMemGetInfo and the unexplained part, and the milestones of\n"
    "`cutrace timeline` as instants; per NCCL communicator, a track per rank\n"
    "with its collectives; flows from each IPC export to every open of it.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE             the file to write (replaced if it exists)\n"
    "  --format proto|json           proto (default): Perfetto's own format;\n"
    "                                json: Chrome's trace-event JSON, for\n"
    "                                chrome://tracing and older tools\n" CLI_FILTER_HELP
        CLI_HELP_HELP "\n"
    "The filters choose what is drawn: the processes that pass and the GPUs\n"
    "they used (with --gpu, that GPU and the processes that used it); a GPU's\n"
    "counters stay its whole memory, every process's included.\n"
    "\n"
    "exit status:\n"
    "  0  ok\n"
    "  1  bad input: a trace, directory or file that cannot be used, or an\n"
    "     output that cannot be written\n"
    "  2  usage error: a wrong option or argument, a filter that matches nothing\n";

enum { OPT_FORMAT = 0x300 };

/* Whether out names one of the set's trace files (or its -wal/.ring would be hit). */
static bool is_a_trace(const struct trace_set *set, const char *out)
{
    struct stat o;
    if (stat(out, &o) != 0)
        return false;
    for (size_t i = 0; i < set->count; i++) {
        struct stat t;
        const char *path = set->traces[i].packed ? NULL : set->traces[i].path;
        if (path && stat(path, &t) == 0 && t.st_dev == o.st_dev && t.st_ino == o.st_ino)
            return true;
    }
    return false;
}

struct export_job {
    const struct gm_model *m;
    struct trace_set *set;
    const struct gm_filter *f;
    bool json;
};

/* out_write_file's writer: -1 when a trace could not be read (its line is printed). */
static int write_export_to(FILE *f, void *arg)
{
    const struct export_job *job = arg;
    struct ex_sink sink;
    int rc, closed;
    if (job->json) {
        struct ex_json *j = ex_json_open(f, &sink);
        rc = export_run(job->m, job->set, job->f, &sink);
        closed = ex_json_close(j);
    } else {
        struct ex_proto *p = ex_proto_open(f, &sink);
        rc = export_run(job->m, job->set, job->f, &sink);
        closed = ex_proto_close(p);
    }
    if (rc == EXPORT_READ_FAILED)
        return -1;
    return rc != 0 || closed != 0 ? 1 : 0;
}

static int write_export(const struct gm_model *m, struct trace_set *set, const struct gm_filter *f,
                        const char *out, bool json)
{
    struct export_job job = {m, set, f, json};
    return out_write_file(out, write_export_to, &job) == 0 ? CLI_EXIT_OK : CLI_EXIT_BAD_INPUT;
}

int cmd_export(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, OPT_FORMAT},
        CLI_FILTER_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL, *format = "proto";
    struct cli_report_opts o;
    cli_report_init(&o);
    int c;
    while ((c = cli_getopt(argc, argv, "o:h", options, usage)) != -1) {
        if (cli_report_option(&o, c, optarg))
            continue;
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case OPT_FORMAT:
            format = optarg;
            break;
        case 'h':
            return CLI_EXIT_OK;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    if (strcmp(format, "proto") != 0 && strcmp(format, "json") != 0)
        return cli_usage_error(argv[0], "--format is proto or json, not '%s'", format);
    if (cli_report_finish(&o, argv[0], NULL) != CLI_PARSED)
        return CLI_EXIT_USAGE;
    if (cli_report_operands(&o, argc, argv, optind) != CLI_PARSED)
        return CLI_EXIT_USAGE;
    if (!out || !out[0])
        return cli_usage_error(argv[0], "-o FILE is required: the trace to write");
    struct stat st;
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) {
        cli_error(out, "is a directory");
        return CLI_EXIT_USAGE;
    }

    struct trace_set set;
    struct gm_model m;
    if (gm_open_run(&m, &set, o.paths, o.npaths, 0) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct gm_filter f;
    int status = gm_filter_init(&f, &m, &o, argv[0]); /* on failure its line is printed */
    if (status == CLI_EXIT_OK && is_a_trace(&set, out)) {
        cli_error(out, "is one of the traces being exported: choose another output");
        status = CLI_EXIT_USAGE;
    }
    if (status == CLI_EXIT_OK)
        status = write_export(&m, &set, &f, out, strcmp(format, "json") == 0);
    gm_filter_free(&f);
    gm_free(&m);
    trace_set_close(&set);
    return status;
}
