/*
 * nccl.h - the NCCL side of one trace, shared by `cutrace summary` (per
 * process) and `cutrace collectives` (joined across the ranks of a
 * directory): its communicators with how they ended and how many calls each
 * saw, the NCCL version, and helpers to show them.
 *
 * The communicators are what the public view `communicators`
 * (include/cutrace/schema.h) has, built in C by the run model's one pass
 * over the events (model/comms.c, struct nccl_comms); the call counts come
 * from the same pass. The views themselves are only checked here (their
 * schema, and that the reports' queries on them compile), with the words
 * the reports have always had for a trace without them, and the version
 * is process.nccl_version. Traces written before cutrace recorded NCCL
 * have no NCCL views; nccl_check says so (present = false) instead of
 * failing, and a report that cannot do without them turns that into a
 * one-line error.
 */
#ifndef CUTRACE_ANALYZER_NCCL_H
#define CUTRACE_ANALYZER_NCCL_H

#include "model/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One row of `communicators`: one communicator init of the process. */
struct nccl_comm {
    int64_t comm_id; /* the init's seq: unique within its trace only */
    char *hash;      /* unique_id_hash, 16 hex digits; "?" when the trace has none */
    bool has_rank, has_nranks;
    int64_t rank, nranks;
    int64_t device; /* current at the init, -1 unknown */
    char *api;      /* ncclCommInitRank, ncclCommSplit, ...; NULL unknown */
    int64_t handle; /* the ncclComm_t value */
    int64_t init_result;
    int64_t t_init_ns;
    bool has_parent; /* a split: parent_comm_id is the parent's comm_id */
    int64_t parent_comm_id;
    bool has_color, has_key;
    int64_t color, key;
    bool destroyed; /* by ncclCommDestroy or ncclCommAbort */
    bool aborted;   /* ... by ncclCommAbort */
    int64_t t_destroy_ns;
    bool finalized;
    int64_t t_finalize_ns;
    int64_t calls, failed_calls; /* collective and p2p calls made on it */
};

struct nccl_info {
    bool present; /* the trace has the NCCL views: the rest is meaningful */
    bool has_version;
    int64_t version;         /* process.nccl_version, e.g. 22809 */
    struct nccl_comm *comms; /* ordered by comm_id */
    size_t ncomms;
    int64_t calls, failed_calls; /* every collective and p2p call */
    int64_t unattributed_calls;  /* ... of which on no communicator this trace knows */
};

/*
 * A process's communicators as the run model's pass over its events builds
 * them (model/comms.c): row for row the `communicators` view, ordered by
 * comm_id, with `aborted` told apart; calls and failed_calls are 0 (the
 * model counts calls in cc_calls, collcalls.h).
 */
struct nccl_comms {
    struct nccl_comm *comms;
    size_t ncomms;
    void *index; /* private: the pass's lookups, NULL once the pass is done */
};
void nccl_comms_free(struct nccl_comms *comms);

/*
 * Checks the NCCL side of a trace and reads its version: info gets present,
 * has_version and version, no communicators (nccl_add_comms) and no calls.
 * The views are compiled, never run: what they would say the model knows
 * from its pass. A trace without the NCCL views is fine when !required
 * (info->present = false, returns 0); when required, or when the views are
 * there but unusable (a damaged trace), returns -1 with t->error set.
 */
int nccl_check(struct trace *t, bool required, struct nccl_info *info);
/* Copies the model's communicators of the trace into info (which has none
 * yet), call counts 0 for the caller to fill. */
void nccl_add_comms(struct nccl_info *info, const struct nccl_comms *comms);
void nccl_info_free(struct nccl_info *info);

/* The comm of info with that comm_id, or NULL. */
const struct nccl_comm *nccl_find_comm(const struct nccl_info *info, int64_t comm_id);

/*
 * Registers ct_size_bucket(bytes) on the trace's connection: -1 for NULL,
 * non-integers and values of 2^63 or more (negative in SQLite), 0 for 0,
 * else k + 1 for bytes in [2^k, 2^(k+1)).
 */
#define NCCL_BUCKET_FUNCTION "ct_size_bucket"
int nccl_register_functions(struct trace *t);
/* The same for an integer: the model's loader buckets in C (collcalls.h). */
int64_t nccl_bucket_of(int64_t bytes);

/* Inclusive lower and exclusive upper bound of a bucket (0 and 0 for -1;
 * the upper bound of the last bucket saturates at INT64_MAX). */
int64_t nccl_bucket_min(int64_t bucket);
int64_t nccl_bucket_max(int64_t bucket);
/* "0 B", "1-2 MiB", "512 B-1 KiB", "?" (not a size). Returns buf. */
char *nccl_bucket_label(char *buf, size_t size, int64_t bucket);

/* An NCCL version code as text: 22809 -> "2.28.9", 2708 -> "2.7.8",
 * 0 or less -> "unknown". Returns buf. */
char *nccl_format_version(char *buf, size_t size, int64_t version);

/* "destroyed", "aborted" or "not destroyed" (", finalized" when it was). */
const char *nccl_end_text(const struct nccl_comm *c);

#endif
