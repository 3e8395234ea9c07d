/*
 * comms.h - a process's communicators built in the GPU model loader's one
 * pass over its events (pairing.c), as the `communicators` view has them;
 * the result is gm_process.communicators (struct nccl_comms, nccl.h).
 * Private to analyzer/model/, like loader.h.
 */
#ifndef CUTRACE_ANALYZER_MODEL_COMMS_H
#define CUTRACE_ANALYZER_MODEL_COMMS_H

#include "model/loader.h"

/* Where the pass's query has each column comms_row reads. */
struct comm_columns {
    int t_ns, result, arg0, arg1, arg2, arg3, arg4, arg5, arg6;
};

/* Every row of the pass, in seq order: `row` is the pass's query on it.
 * Rows of no NCCL init, destroy, finalize or abort cost one lookup. */
void comms_row(struct pass *s, const struct call_row *c, sqlite3_stmt *row,
               const struct comm_columns *cols);
/* After the last row: tells aborts apart and frees the lookups. */
void comms_finish(struct pass *s);

#endif
