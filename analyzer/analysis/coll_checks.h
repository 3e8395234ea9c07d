/*
 * coll_checks.h - the problems analysis/collectives.c looks for once a
 * communicator's calls are summed (call counts that differ between ranks,
 * failed calls, unmatched point-to-point pairs, the processes' NCCL
 * versions and calls on unknown communicators), and the helpers the two
 * files share to name ranks and add problems. Private to the collectives
 * analysis: reports include analysis/collectives.h.
 */
#ifndef CUTRACE_ANALYZER_COLL_CHECKS_H
#define CUTRACE_ANALYZER_COLL_CHECKS_H

#include "analysis/coll_report.h"

/* An op whose call counts differ between the active ranks of g. */
void coll_check_call_counts(struct coll_report *r, struct coll_group *g, const struct coll_op *op);
/* Failed calls of an op, per rank. */
void coll_check_failed_calls(struct coll_report *r, struct coll_group *g, const struct coll_op *op);
/* Pairs whose two sides were both traced must match call for call. */
void coll_check_pairs(struct coll_report *r, struct coll_group *g);
/* About the directory: NCCL versions, calls on no communicator. */
void coll_check_processes(struct coll_report *r);

/* A new problem of that kind at the end of a list (zeroed but for kind). */
struct coll_problem *coll_add_problem(struct coll_problem **list, size_t *count, size_t *cap,
                                      enum coll_problem_kind kind);
/* Names member m in problem p with the number it is flagged for. */
void coll_problem_add_rank(struct coll_problem *p, const struct coll_report *r,
                           const struct coll_member *m, int64_t value);
/* "rank 3", or the process when the communicator has no rank. */
void coll_member_label(char *buf, size_t size, const struct coll_report *r,
                       const struct coll_member *m);
/* "pid 1000", or the trace's file without a pid. */
void coll_pid_text(char *buf, size_t size, const struct coll_proc *p);
/* The group's first active member with that rank, or NULL. */
const struct coll_member *coll_rank_member(const struct coll_report *r, const struct coll_group *g,
                                           int64_t rank);

#endif
