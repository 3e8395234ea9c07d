/*
 * collcalls.h - a process's NCCL collective and point-to-point calls in the
 * run model (gpumodel.h), loaded in the model's one pass over the calls and
 * kept aggregated per (communicator, op, datatype, size bucket, root or
 * peer): what `cutrace collectives` reports, without a query of its own.
 *
 * The aggregation follows the public `collectives` view
 * (include/cutrace/schema.h) column for column, so the two agree
 * (tests/analyzer/test_collcalls.c checks it):
 *   comm_id    the seq of the latest successful init (role comm_init,
 *              result 0) of the same handle (arg0) at or before the call,
 *              the view's running MAX over the handle's calls in seq order;
 *   op         the api name; datatype arg2; bytes size; peer arg4 when >= 0;
 *   in_group   arg6 > 0; captured arg7 = 1; failed result <> 0;
 * with SQL's NULLs kept apart (a NULL size is no size, a NULL result is no
 * failure). Sums saturate and leave out negative and NULL values, as
 * TRACE_SUM_FUNCTION does.
 *
 * Single calls are not kept: no report needs them, and the cells of a
 * trace are as many as its distinct (communicator, op, datatype, size,
 * peer), not its calls, so a million NCCL calls cost a few kilobytes.
 */
#ifndef CUTRACE_ANALYZER_COLLCALLS_H
#define CUTRACE_ANALYZER_COLLCALLS_H

#include "model/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the model reads an NCCL api for: apis of layer 'nccl' by role. */
enum cc_role {
    CC_NONE,
    CC_COMM_INIT,  /* sets which communicator a handle's later calls are on */
    CC_COLLECTIVE, /* role collective */
    CC_P2P,        /* role p2p */
};

/* Calls of one (communicator, op, datatype, size bucket, peer). */
struct cc_cell {
    int64_t comm_id;  /* communicators.comm_id, when has_comm */
    int64_t datatype; /* ncclDataType_t (arg2), when has_datatype */
    int64_t peer;     /* root or peer, -1 none (the view's NULL) */
    int64_t calls, bytes, dur_ns, max_dur_ns, captured, in_group, failed;
    uint32_t op;   /* the api's name: index into the model's apis */
    int8_t bucket; /* nccl_bucket_of(bytes), -1 not a size */
    bool has_comm; /* the handle had a successful init before the call */
    bool has_datatype;
    bool p2p;
};

/* A process's NCCL calls. */
struct cc_calls {
    struct cc_cell *cells; /* in order of first call */
    size_t ncells;
    void *index; /* private: the loader's lookups */
};

/* Where the model's calls query has each column the loader reads. */
struct cc_columns {
    int size, dur_ns, result, arg0, arg2, arg4, arg6, arg7;
};

/* What the model reads this api for (an apis row of the trace). */
enum cc_role cc_role_of(const struct trace_api *api);

/*
 * One call, in seq order: `row` is the model's calls query on it, `op` its
 * api name id, `role` cc_role_of its api (not CC_NONE).
 */
void cc_read_call(struct cc_calls *cc, enum cc_role role, uint32_t op, int64_t seq,
                  sqlite3_stmt *row, const struct cc_columns *cols);

void cc_calls_free(struct cc_calls *cc);

/* The view's datatype text: "float32", "type99", "?" for NULL. Returns buf. */
char *cc_datatype_name(char *buf, size_t size, const struct cc_cell *cell);

#endif
