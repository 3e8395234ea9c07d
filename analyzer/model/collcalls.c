/*
 * collcalls.c - a process's NCCL calls aggregated as the `collectives` view
 * has them (see collcalls.h), read one row at a time from the model's calls
 * pass: two hash tables, handle -> communicator and cell key -> cell, so a
 * trace of any number of calls and communicators loads in linear time.
 */
#include "model/collcalls.h"

#include "cli.h"
#include "model/nccl.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct handle_slot {
    int64_t handle, comm_id;
    bool used;
};

struct cc_index {
    struct handle_slot *handles; /* open addressing, a power of two */
    size_t handle_slots, nhandles;
    /* A NULL handle is a handle of its own: SQL partitions NULLs together. */
    bool null_has_comm;
    int64_t null_comm_id;
    uint32_t *cells; /* open addressing: cell index + 1, 0 empty */
    size_t cell_slots, cells_cap;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static struct cc_index *index_of(struct cc_calls *cc)
{
    if (!cc->index)
        cc->index = xcalloc(1, sizeof(struct cc_index));
    return cc->index;
}

static struct handle_slot *handle_slot(struct cc_index *ix, int64_t handle, bool create)
{
    if (create && (ix->nhandles + 1) * 2 > ix->handle_slots) {
        size_t slots = ix->handle_slots ? ix->handle_slots * 2 : 16;
        struct handle_slot *old = ix->handles;
        size_t old_slots = ix->handle_slots;
        ix->handles = xcalloc(slots, sizeof(*ix->handles));
        ix->handle_slots = slots;
        /* Into the new table's first free slot of the handle's chain (a
         * lookup without create finds no slot for a handle not there yet). */
        for (size_t i = 0; i < old_slots; i++) {
            if (!old[i].used)
                continue;
            size_t j = mix(0, (uint64_t)old[i].handle) & (slots - 1);
            while (ix->handles[j].used)
                j = (j + 1) & (slots - 1);
            ix->handles[j] = old[i];
        }
        free(old);
    }
    if (ix->handle_slots == 0)
        return NULL;
    size_t mask = ix->handle_slots - 1;
    for (size_t i = mix(0, (uint64_t)handle) & mask;; i = (i + 1) & mask) {
        struct handle_slot *s = &ix->handles[i];
        if (s->used && s->handle == handle)
            return s;
        if (!s->used)
            return create ? s : NULL;
    }
}

static uint64_t cell_hash(const struct cc_cell *c)
{
    uint64_t h = mix(c->has_comm, (uint64_t)c->comm_id);
    h = mix(h, c->op);
    h = mix(h, c->has_datatype ? (uint64_t)c->datatype : UINT64_MAX);
    h = mix(h, (uint64_t)(int64_t)c->bucket);
    return mix(h, (uint64_t)c->peer);
}

static bool same_key(const struct cc_cell *a, const struct cc_cell *b)
{
    return a->has_comm == b->has_comm && (!a->has_comm || a->comm_id == b->comm_id) &&
           a->op == b->op && a->has_datatype == b->has_datatype &&
           (!a->has_datatype || a->datatype == b->datatype) && a->bucket == b->bucket &&
           a->peer == b->peer;
}

static void cells_rehash(struct cc_calls *cc, struct cc_index *ix)
{
    size_t slots = ix->cell_slots ? ix->cell_slots * 2 : 64;
    free(ix->cells);
    ix->cells = xcalloc(slots, sizeof(*ix->cells));
    ix->cell_slots = slots;
    for (size_t c = 0; c < cc->ncells; c++) {
        size_t i = cell_hash(&cc->cells[c]) & (slots - 1);
        while (ix->cells[i])
            i = (i + 1) & (slots - 1);
        ix->cells[i] = (uint32_t)(c + 1);
    }
}

/* The cell with key's key, made (zero counts) on first use. */
static struct cc_cell *find_cell(struct cc_calls *cc, const struct cc_cell *key)
{
    struct cc_index *ix = index_of(cc);
    if ((cc->ncells + 1) * 2 > ix->cell_slots)
        cells_rehash(cc, ix);
    size_t mask = ix->cell_slots - 1;
    size_t i = cell_hash(key) & mask;
    for (; ix->cells[i]; i = (i + 1) & mask)
        if (same_key(&cc->cells[ix->cells[i] - 1], key))
            return &cc->cells[ix->cells[i] - 1];
    assert(cc->ncells < UINT32_MAX - 1);
    cc->cells = xgrow(cc->cells, &ix->cells_cap, cc->ncells + 1, sizeof(*cc->cells));
    cc->cells[cc->ncells] = *key;
    ix->cells[i] = (uint32_t)(++cc->ncells);
    return &cc->cells[cc->ncells - 1];
}

/* An integer value of a column; false for NULL and anything else. */
static bool int_col(sqlite3_stmt *row, int col, int64_t *value)
{
    if (sqlite3_column_type(row, col) != SQLITE_INTEGER)
        return false;
    *value = sqlite3_column_int64(row, col);
    return true;
}

/* TRACE_SUM_FUNCTION's step: positive integers, saturating. */
static int64_t sum_step(int64_t total, sqlite3_stmt *row, int col)
{
    int64_t v;
    if (!int_col(row, col, &v) || v <= 0)
        return total;
    return v > INT64_MAX - total ? INT64_MAX : total + v;
}

enum cc_role cc_role_of(const struct trace_api *api)
{
    if (!api->layer || strcmp(api->layer, "nccl") != 0 || !api->role)
        return CC_NONE;
    if (strcmp(api->role, "comm_init") == 0)
        return CC_COMM_INIT;
    if (strcmp(api->role, "collective") == 0)
        return CC_COLLECTIVE;
    if (strcmp(api->role, "p2p") == 0)
        return CC_P2P;
    return CC_NONE;
}

void cc_read_call(struct cc_calls *cc, enum cc_role role, uint32_t op, int64_t seq,
                  sqlite3_stmt *row, const struct cc_columns *cols)
{
    assert(role != CC_NONE);
    struct cc_index *ix = index_of(cc);
    int64_t handle = 0, v;
    bool null_handle = sqlite3_column_type(row, cols->arg0) == SQLITE_NULL;
    if (!null_handle)
        handle = sqlite3_column_int64(row, cols->arg0);

    if (role == CC_COMM_INIT) {
        if (!int_col(row, cols->result, &v) || v != 0)
            return;
        if (null_handle) {
            ix->null_has_comm = true;
            ix->null_comm_id = seq;
        } else {
            struct handle_slot *s = handle_slot(ix, handle, true);
            if (!s->used)
                ix->nhandles++;
            *s = (struct handle_slot){.handle = handle, .comm_id = seq, .used = true};
        }
        return;
    }

    struct cc_cell key = {.op = op, .p2p = role == CC_P2P, .peer = -1, .bucket = -1};
    if (null_handle) {
        key.has_comm = ix->null_has_comm;
        key.comm_id = ix->null_comm_id;
    } else {
        const struct handle_slot *s = handle_slot(ix, handle, false);
        key.has_comm = s != NULL;
        key.comm_id = s ? s->comm_id : 0;
    }
    if (!key.has_comm)
        key.comm_id = 0;
    key.has_datatype = sqlite3_column_type(row, cols->arg2) != SQLITE_NULL;
    key.datatype = key.has_datatype ? sqlite3_column_int64(row, cols->arg2) : 0;
    if (int_col(row, cols->size, &v))
        key.bucket = (int8_t)nccl_bucket_of(v);
    if (int_col(row, cols->arg4, &v) && v >= 0)
        key.peer = v;

    struct cc_cell *c = find_cell(cc, &key);
    c->calls++;
    c->bytes = sum_step(c->bytes, row, cols->size);
    c->dur_ns = sum_step(c->dur_ns, row, cols->dur_ns);
    if (int_col(row, cols->dur_ns, &v) && v > c->max_dur_ns)
        c->max_dur_ns = v;
    if (int_col(row, cols->arg7, &v) && v == 1)
        c->captured++;
    if (int_col(row, cols->arg6, &v) && v > 0)
        c->in_group++;
    if (int_col(row, cols->result, &v) && v != 0)
        c->failed++;
}

void cc_calls_free(struct cc_calls *cc)
{
    struct cc_index *ix = cc->index;
    if (ix) {
        free(ix->handles);
        free(ix->cells);
        free(ix);
    }
    free(cc->cells);
    memset(cc, 0, sizeof(*cc));
}

char *cc_datatype_name(char *buf, size_t size, const struct cc_cell *cell)
{
    static const char *const names[] = {"int8",    "uint8",    "int32",      "uint32",
                                        "int64",   "uint64",   "float16",    "float32",
                                        "float64", "bfloat16", "float8e4m3", "float8e5m2"};
    assert(buf && size > 0);
    if (!cell->has_datatype)
        snprintf(buf, size, "?");
    else if (cell->datatype >= 0 && cell->datatype < (int64_t)(sizeof(names) / sizeof(names[0])))
        snprintf(buf, size, "%s", names[cell->datatype]);
    else
        snprintf(buf, size, "type%" PRId64, cell->datatype);
    return buf;
}
