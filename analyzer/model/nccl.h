/*
 * nccl.h - the NCCL side of one trace, shared by `cutrace summary` (per
 * process) and `cutrace collectives` (joined across the ranks of a
 * directory): its communicators with how they ended and how many calls each
 * saw, the NCCL version, and helpers to show them.
 *
 * The data comes from the public views `communicators` and `collectives`
 * and process.nccl_version (include/cutrace/schema.h). Traces written before
 * cutrace recorded NCCL have none of them; the loader says so (present =
 * false) instead of failing, and a report that cannot do without them
 * turns that into a one-line error.
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
 * Loads the NCCL side of a trace. A trace without the NCCL views is fine
 * when !required (info->present = false, returns 0); when required, or
 * when the views are there but unusable (a damaged trace), returns -1 with
 * t->error set. Without count_calls the call counts (calls, failed_calls,
 * unattributed_calls of info and its comms) are left 0 for the caller,
 * which saves a pass over the calls when it counts them anyway.
 */
int nccl_load(struct trace *t, bool required, bool count_calls, struct nccl_info *info);
/* The same without communicators (none, no calls), for a trace whose
 * events the caller knows to hold no communicator init: the views' scans
 * of every event are what nccl_load costs. */
int nccl_load_version(struct trace *t, bool required, struct nccl_info *info);
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
