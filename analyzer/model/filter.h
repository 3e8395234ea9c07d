/*
 * filter.h - the --rank, --pid, --host and --gpu filters of the reports,
 * matched once against a loaded model so that every report means the same
 * by them (docs/cli.md, "Conventions").
 *
 * A process passes when it matches every process filter given (its rank in
 * its largest communicator is in --rank, its pid in --pid, its host in
 * --host) and, with --gpu, used that GPU. A GPU passes when it is the one
 * --gpu names (any GPU without it) and, with a process filter, some passing
 * process used it. Filters choose what a report lists; numbers that belong
 * to a GPU or a job as a whole (a GPU's live bytes, a job's MIN over ranks)
 * stay computed over everything.
 *
 * A filter that matches nothing is a usage error (exit 2), as an unknown
 * --gpu always was: the one line says what the traces have instead.
 */
#ifndef CUTRACE_ANALYZER_FILTER_H
#define CUTRACE_ANALYZER_FILTER_H

#include "cli.h"
#include "model/gpumodel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_filter {
    bool procs_filtered;  /* --rank, --pid or --host given */
    bool gpus_filtered;   /* any filter given */
    int64_t gpu;          /* the --gpu index, -1 without */
    bool *proc_ok;        /* per model process */
    bool *gpu_ok;         /* per model GPU */
    size_t nprocs, ngpus; /* how many pass */
};

/*
 * Matches the filters of o (cli_report_finish has checked their syntax)
 * against m. Returns CLI_EXIT_OK, or CLI_EXIT_USAGE after the one-line usage
 * error of `command` when --gpu names no GPU or nothing passes. A model
 * without processes passes an unfiltered report unchanged.
 */
int gm_filter_init(struct gm_filter *f, const struct gm_model *m, const struct cli_report_opts *o,
                   const char *command);
void gm_filter_free(struct gm_filter *f);

/* The pieces of the nothing-matches line, for a report that matches the
 * filters itself (diff, over two runs): "--rank 9 --pid 7" as given; "ranks
 * 0 to 3; pids 11, 12" (malloc'd) for what m has; whether host is in a
 * --host LIST. */
void gm_filter_given(char *buf, size_t size, const struct cli_report_opts *o);
char *gm_filter_what_there_is(const struct gm_model *m, const struct cli_report_opts *o);
bool gm_filter_host_listed(const char *list, const char *host);

static inline bool gm_filter_proc(const struct gm_filter *f, uint32_t proc)
{
    return f->proc_ok[proc];
}
static inline bool gm_filter_gpu(const struct gm_filter *f, uint32_t gpu)
{
    return f->gpu_ok[gpu];
}

#endif
