/*
 * comms.c - a process's communicators from the model's pass over its events
 * (comms.h), by the rules of the `communicators` view (include/cutrace/
 * schema.h), column for column, so that no report needs the view's window
 * over every NCCL event:
 *   rows        the NCCL inits (layer nccl, role comm_init), failed ones
 *               too, except a "successful" one without a handle (the
 *               view's NOT (result = 0 AND arg0 = 0), SQL NULLs included);
 *   comm_id     the init's seq; a later destroy or finalize (role
 *               comm_destroy / comm_finalize) belongs to the latest
 *               successful init (result 0, not NULL) of the same handle
 *               (arg0; NULL is a handle of its own, as SQL partitions);
 *   t_destroy_ns, t_finalize_ns  the least t_ns of its successful destroys,
 *               finalizes (NULL t_ns left out);
 *   unique_id_hash  printf('%016x', arg3); rank arg2, nranks arg1, device;
 *   parent_comm_id  with arg4 != 0, the latest successful init of handle
 *               arg4 before this one; color arg5, key arg6 with arg4 != 0;
 *   aborted     (not in the view) a successful ncclCommAbort, by name, of
 *               the handle after the init at exactly t_destroy_ns.
 * tests/analyzer/test_comms.c checks the two agree. A handle -> latest init
 * hash keeps it linear in the events.
 */
#include "model/comms.h"

#include "cli.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a row of an api is for the communicators (bits). */
enum {
    KIND_INIT = 1,
    KIND_DESTROY = 2,
    KIND_FINALIZE = 4,
    KIND_ABORT = 8, /* ncclCommAbort by name, whatever its layer (the query on `calls`) */
};

/* The latest successful init of a handle. */
struct init_slot {
    int64_t handle, seq;
    int64_t comm; /* its index in the communicators, -1 when not a row of the view */
    bool used;
};

struct abort_call {
    int64_t handle, t_ns, seq;
};

struct comms_index {
    uint8_t *kinds; /* by index in the trace's apis */
    size_t nkinds;
    struct init_slot *slots; /* open addressing, a power of two */
    size_t nslots, nused;
    struct init_slot null_handle; /* used: a successful init with a NULL handle */
    struct abort_call *aborts;
    size_t naborts, aborts_cap, comms_cap;
};

static struct comms_index *make_index(const struct pass *s)
{
    const struct trace *t = s->p->trace;
    struct comms_index *ix = xcalloc(1, sizeof(*ix));
    ix->nkinds = t->napis;
    ix->kinds = xcalloc(t->napis ? t->napis : 1, sizeof(*ix->kinds));
    for (size_t i = 0; i < t->napis; i++) {
        const struct trace_api *a = &t->apis[i];
        uint8_t kind = 0;
        if (a->layer && strcmp(a->layer, "nccl") == 0 && a->role) {
            if (strcmp(a->role, "comm_init") == 0)
                kind = KIND_INIT;
            else if (strcmp(a->role, "comm_destroy") == 0)
                kind = KIND_DESTROY;
            else if (strcmp(a->role, "comm_finalize") == 0)
                kind = KIND_FINALIZE;
        }
        if (a->name && strcmp(a->name, "ncclCommAbort") == 0)
            kind |= KIND_ABORT;
        ix->kinds[i] = kind;
    }
    return ix;
}

static size_t slot_of(int64_t handle, size_t mask)
{
    uint64_t h = (uint64_t)handle * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 31)) & mask;
}

/* The handle's latest successful init; made (unused) when create. */
static struct init_slot *init_of(struct comms_index *ix, bool null_handle, int64_t handle,
                                 bool create)
{
    if (null_handle)
        return create || ix->null_handle.used ? &ix->null_handle : NULL;
    if (create && (ix->nused + 1) * 2 > ix->nslots) {
        struct init_slot *old = ix->slots;
        size_t nold = ix->nslots;
        ix->nslots = nold ? nold * 2 : 16;
        ix->slots = xcalloc(ix->nslots, sizeof(*ix->slots));
        for (size_t i = 0; i < nold; i++)
            if (old[i].used) {
                size_t j = slot_of(old[i].handle, ix->nslots - 1);
                while (ix->slots[j].used)
                    j = (j + 1) & (ix->nslots - 1);
                ix->slots[j] = old[i];
            }
        free(old);
    }
    if (ix->nslots == 0)
        return NULL;
    for (size_t i = slot_of(handle, ix->nslots - 1);; i = (i + 1) & (ix->nslots - 1)) {
        struct init_slot *slot = &ix->slots[i];
        if (slot->used && slot->handle == handle)
            return slot;
        if (!slot->used) {
            if (!create)
                return NULL;
            slot->handle = handle;
            ix->nused++;
            return slot;
        }
    }
}

static bool is_null(sqlite3_stmt *row, int col)
{
    return sqlite3_column_type(row, col) == SQLITE_NULL;
}

static void add_comm(struct pass *s, struct comms_index *ix, const struct call_row *c,
                     sqlite3_stmt *row, const struct comm_columns *cols)
{
    struct nccl_comms *cs = &s->p->communicators;
    const struct trace_api *api = &s->p->trace->apis[c->info->index];
    assert(cs->ncomms == 0 || cs->comms[cs->ncomms - 1].comm_id < c->seq);
    cs->comms = xgrow(cs->comms, &ix->comms_cap, cs->ncomms + 1, sizeof(*cs->comms));
    struct nccl_comm *comm = &cs->comms[cs->ncomms];
    /* printf('%016x', NULL) is sixteen zeros, as column_int64 reads NULL. */
    char hash[24];
    snprintf(hash, sizeof(hash), "%016" PRIx64, (uint64_t)sqlite3_column_int64(row, cols->arg3));
    *comm = (struct nccl_comm){
        .comm_id = c->seq,
        .hash = xstrdup(hash),
        .has_rank = !is_null(row, cols->arg2),
        .rank = col_int(row, cols->arg2, -1),
        .has_nranks = !is_null(row, cols->arg1),
        .nranks = col_int(row, cols->arg1, -1),
        .device = c->device,
        .api = api->name ? xstrdup(api->name) : NULL,
        .handle = sqlite3_column_int64(row, cols->arg0),
        .init_result = sqlite3_column_int64(row, cols->result),
        .t_init_ns = sqlite3_column_int64(row, cols->t_ns),
    };
    /* A split: CASE WHEN arg4 != 0, which a NULL arg4 is not. */
    if (!is_null(row, cols->arg4) && sqlite3_column_int64(row, cols->arg4) != 0) {
        const struct init_slot *parent =
            init_of(ix, false, sqlite3_column_int64(row, cols->arg4), false);
        comm->has_parent = parent != NULL;
        comm->parent_comm_id = parent ? parent->seq : -1;
        comm->has_color = !is_null(row, cols->arg5);
        comm->color = sqlite3_column_int64(row, cols->arg5);
        comm->has_key = !is_null(row, cols->arg6);
        comm->key = sqlite3_column_int64(row, cols->arg6);
    } else {
        comm->parent_comm_id = -1;
    }
    cs->ncomms++;
}

void comms_row(struct pass *s, const struct call_row *c, sqlite3_stmt *row,
               const struct comm_columns *cols)
{
    struct nccl_comms *cs = &s->p->communicators;
    if (!cs->index)
        cs->index = make_index(s);
    struct comms_index *ix = cs->index;
    assert(c->info->index < ix->nkinds);
    uint8_t kind = ix->kinds[c->info->index];
    if (!kind)
        return;
    bool null_handle = is_null(row, cols->arg0);
    int64_t handle = sqlite3_column_int64(row, cols->arg0);
    bool ok = !is_null(row, cols->result) && sqlite3_column_int64(row, cols->result) == 0;
    if ((kind & KIND_ABORT) && ok) {
        ix->aborts = xgrow(ix->aborts, &ix->aborts_cap, ix->naborts + 1, sizeof(*ix->aborts));
        ix->aborts[ix->naborts++] = (struct abort_call){
            .handle = handle, .t_ns = sqlite3_column_int64(row, cols->t_ns), .seq = c->seq};
    }
    if (kind & KIND_INIT) {
        /* NOT (result = 0 AND arg0 = 0) holds only when one of them is a
         * value other than 0: a NULL reads as 0 here. */
        int64_t comm = -1;
        if (sqlite3_column_int64(row, cols->result) != 0 || handle != 0) {
            comm = (int64_t)cs->ncomms;
            add_comm(s, ix, c, row, cols);
        }
        if (ok) {
            struct init_slot *slot = init_of(ix, null_handle, handle, true);
            slot->seq = c->seq;
            slot->comm = comm;
            slot->used = true;
        }
    }
    if ((kind & (KIND_DESTROY | KIND_FINALIZE)) && ok && !is_null(row, cols->t_ns)) {
        const struct init_slot *slot = init_of(ix, null_handle, handle, false);
        if (!slot || slot->comm < 0)
            return;
        struct nccl_comm *comm = &cs->comms[slot->comm];
        int64_t t = sqlite3_column_int64(row, cols->t_ns);
        if ((kind & KIND_DESTROY) && (!comm->destroyed || t < comm->t_destroy_ns)) {
            comm->destroyed = true;
            comm->t_destroy_ns = t;
        }
        if ((kind & KIND_FINALIZE) && (!comm->finalized || t < comm->t_finalize_ns)) {
            comm->finalized = true;
            comm->t_finalize_ns = t;
        }
    }
}

static int compare_aborts(const void *a, const void *b)
{
    const struct abort_call *x = a, *y = b;
    if (x->handle != y->handle)
        return x->handle < y->handle ? -1 : 1;
    if (x->t_ns != y->t_ns)
        return x->t_ns < y->t_ns ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/*
 * The view says when a communicator was destroyed, not by which call:
 * ncclCommAbort (the error path) is told apart here. An abort ended a
 * communicator when it names its handle, comes after its init and happened
 * at the moment the view gives. Sorted lookups keep a hostile trace with
 * many of both from taking quadratic time.
 */
static void mark_aborts(struct nccl_comms *cs, struct comms_index *ix)
{
    if (ix->naborts > 1)
        qsort(ix->aborts, ix->naborts, sizeof(*ix->aborts), compare_aborts);
    for (size_t i = 0; ix->naborts > 0 && i < cs->ncomms; i++) {
        struct nccl_comm *c = &cs->comms[i];
        if (!c->destroyed)
            continue;
        /* The last abort of this handle at that moment has the largest seq. */
        struct abort_call key = {c->handle, c->t_destroy_ns, INT64_MAX};
        size_t lo = 0, hi = ix->naborts;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (compare_aborts(&ix->aborts[mid], &key) <= 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        const struct abort_call *last = lo > 0 ? &ix->aborts[lo - 1] : NULL;
        c->aborted = last && last->handle == c->handle && last->t_ns == c->t_destroy_ns &&
                     last->seq > c->comm_id;
    }
}

void comms_finish(struct pass *s)
{
    struct nccl_comms *cs = &s->p->communicators;
    struct comms_index *ix = cs->index;
    if (!ix)
        return;
    mark_aborts(cs, ix);
    free(ix->kinds);
    free(ix->slots);
    free(ix->aborts);
    free(ix);
    cs->index = NULL;
}
