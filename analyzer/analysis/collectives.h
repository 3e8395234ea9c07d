/*
 * collectives.h - what `cutrace collectives` computes (cmd/collectives.c
 * prints it): the NCCL communicators of every traced process joined across
 * processes into one group per communicator (its ranks), with every
 * collective and point-to-point call counted per rank, so that a rank that
 * made fewer calls than its peers (it exited early or desynchronised: the
 * usual cause of a hang), a rank with no trace, or a send without its
 * receive shows, as problems.
 *
 * A group is keyed by unique_id_hash, which every rank of a communicator
 * records identically (splits get one derived from the parent's). Its
 * members are communicators, not processes: (trace, comm_id) pairs, since a
 * process may hold several ranks of one group (ncclCommInitAll).
 *
 * The calls come from the run model (model/gpumodel.h, its NCCL cells in
 * model/collcalls.h), the communicators and NCCL version from model/nccl.h;
 * no SQL of its own. The report is built completely before anything is
 * printed, so a trace found damaged halfway through gives one line on
 * stderr and no partial report. Numbers from traces are untrusted: sums
 * saturate, negative sizes and durations are left out of totals, ranks
 * outside the communicator are reported instead of indexed with, and
 * nothing is sized by a count a trace claims (nranks may be anything).
 */
#ifndef CUTRACE_ANALYZER_COLLECTIVES_H
#define CUTRACE_ANALYZER_COLLECTIVES_H

#include "analysis/coll_report.h"
#include "model/traceset.h"

/*
 * Builds the report of an opened set of traces. Returns 0, or -1 after
 * printing the one-line error of the trace that could not be read. path is
 * what the user named, kept for the report's header. coll_free frees it
 * either way.
 */
int coll_build(struct coll_report *r, struct trace_set *set, const char *path);
void coll_free(struct coll_report *r);

/* The NCCL version all processes share, 0 when none is known, -1 when they differ. */
int64_t coll_common_version(const struct coll_report *r);
/* The moment a process's times are shown from: its start, or 0 unknown. */
int64_t coll_time_origin(const struct coll_proc *p);
/* total / count, 0 for no count. */
int64_t coll_mean(int64_t total, int64_t count);

#endif
