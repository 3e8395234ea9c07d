/*
 * pairing.c - the GPU model loader's one pass over a trace's events
 * (loader.h): each row of the events table decoded with the trace's apis,
 * handed to the counters (callstats.c) in seq order and applied in effect
 * order (calls.effect_order: an allocation when it returned, everything
 * else when it started), deriving allocations, the frees that ended them
 * (with exactly the rules of the `allocations` view: pairing by address
 * space and pointer, device resets, pointers handed out again),
 * measurements, milestones and each call's stack id; then the rows of the
 * `ipc` view, kept from the same pass, which tie every exported or opened
 * handle to its allocation.
 */
#include "cli.h"
#include "model/comms.h"
#include "model/loader.h"
#include "out/progress.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* A call's stack is looked for in at most this many calls, the call and
 * its parents (as symbols/stacks.c's walk always did); NO_STACK: none found
 * within them. */
#define MAX_STACK_HOPS 64
#define NO_STACK       UINT8_MAX

/* ---- the (space, ptr) map ---- */

static uint64_t slot_hash(uint32_t space, int64_t ptr)
{
    uint64_t h = (uint64_t)ptr * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)space * 0xc2b2ae3d27d4eb4full;
    return h ^ (h >> 29);
}

static struct slot *map_slot(struct pass *s, uint32_t space, int64_t ptr, bool create)
{
    if (create && (s->nmap_used + 1) * 2 > s->nmap_slots) {
        size_t n = s->nmap_slots ? s->nmap_slots * 2 : 1024;
        struct slot *old = s->map;
        size_t nold = s->nmap_slots;
        s->map = xcalloc(n, sizeof(*s->map));
        s->nmap_slots = n;
        for (size_t i = 0; i < nold; i++) {
            if (!old[i].used)
                continue;
            size_t j = slot_hash(old[i].space, old[i].ptr) & (n - 1);
            while (s->map[j].used)
                j = (j + 1) & (n - 1);
            s->map[j] = old[i];
        }
        free(old);
    }
    if (!s->nmap_slots)
        return NULL;
    size_t i = slot_hash(space, ptr) & (s->nmap_slots - 1);
    while (s->map[i].used) {
        if (s->map[i].space == space && s->map[i].ptr == ptr)
            return &s->map[i];
        i = (i + 1) & (s->nmap_slots - 1);
    }
    if (!create)
        return NULL;
    s->map[i] = (struct slot){.ptr = ptr, .space = space, .used = true, .value = -1};
    s->nmap_used++;
    return &s->map[i];
}

/* ---- events and allocations ---- */

static uint32_t add_event(struct pass *s, enum gm_event_type type, int64_t seq, int64_t t_ns,
                          uint32_t gpu, uint32_t api, int64_t a, int64_t b, uint8_t layer)
{
    struct gm_process *p = s->p;
    assert(p->nevents < UINT32_MAX - 2);
    p->events = xgrow(p->events, &s->events_cap, p->nevents + 1, sizeof(*p->events));
    p->events[p->nevents] = (struct gm_event){.seq = seq,
                                              .t_ns = t_ns,
                                              .a = a,
                                              .b = b,
                                              .gpu = gpu,
                                              .api = api,
                                              .type = (uint8_t)type,
                                              .layer = layer};
    return (uint32_t)p->nevents++;
}

static void live_add(struct pass *s, uint32_t index, bool resettable)
{
    s->live_slot = xgrow(s->live_slot, &s->live_slot_cap, index + 1, sizeof(*s->live_slot));
    s->resettable = xgrow(s->resettable, &s->resettable_cap, index + 1, sizeof(*s->resettable));
    s->live = xgrow(s->live, &s->live_cap, s->nlive + 1, sizeof(*s->live));
    s->live_slot[index] = (uint32_t)s->nlive;
    s->resettable[index] = resettable;
    s->live[s->nlive++] = index;
}

static void live_remove(struct pass *s, uint32_t index)
{
    uint32_t slot = s->live_slot[index];
    assert(slot < s->nlive && s->live[slot] == index);
    uint32_t moved = s->live[--s->nlive];
    s->live[slot] = moved;
    s->live_slot[moved] = slot;
    s->live_slot[index] = GM_NONE;
}

static bool is_live(const struct pass *s, int64_t index)
{
    return index >= 0 && (size_t)index < s->p->nallocs && s->p->allocs[index].end_event == GM_NONE;
}

/* Ends a live allocation at this call: how 1 = reset, 2 = implicit, 0 = free. */
static void end_alloc(struct pass *s, uint32_t index, int64_t seq, int64_t t_ns, uint32_t api,
                      int how)
{
    struct gm_alloc *a = &s->p->allocs[index];
    assert(a->end_event == GM_NONE);
    a->free_seq = seq;
    a->end_event = add_event(s, GM_EV_FREE, seq, t_ns, a->gpu, api, index, how, 0);
    live_remove(s, index);
    cs_live(s, a, -1);
}

static void on_alloc(struct pass *s, const struct call_row *c, uint32_t gpu)
{
    const struct api_info *info = c->info;
    struct gm_process *p = s->p;
    enum gm_kind kind = info->kind;
    /* cuMemCreate at a host location is not GPU memory (the mem_events view). */
    if (kind == GM_KIND_VMM && c->arg1 != 1)
        kind = GM_KIND_VMM_HOST;
    struct slot *slot = map_slot(s, info->space_id, c->ptr, true);
    if (is_live(s, slot->value)) /* handed out again without a traced free */
        end_alloc(s, (uint32_t)slot->value, c->seq, c->t_ns, info->name, 2);
    assert(p->nallocs < UINT32_MAX - 2);
    p->allocs = xgrow(p->allocs, &s->allocs_cap, p->nallocs + 1, sizeof(*p->allocs));
    uint32_t index = (uint32_t)p->nallocs++;
    struct gm_alloc *a = &p->allocs[index];
    /* NCCL's own buffers: made by libnccl, or through ncclMemAlloc. The
     * final category is decided once every trace is loaded: an export may
     * come later. */
    const struct module_range *module = ld_module_at(s, c->caller);
    bool nccl =
        (module && module->nccl) || strcmp(s->L->apis.strings[info->name], "ncclMemAlloc") == 0;
    *a = (struct gm_alloc){.seq = c->seq,
                           .t_ns = c->t_ns,
                           .ptr = c->ptr,
                           .size = c->size > 0 ? c->size : 0,
                           .device = c->device,
                           .gpu = gpu,
                           .end_event = GM_NONE,
                           .kind = (uint8_t)kind,
                           .category = nccl ? GM_CAT_NCCL : GM_CAT_NONE,
                           .top = !c->nested,
                           .module = module ? module->name : GM_NONE,
                           .path = module ? module->path : GM_NONE,
                           .stack_id = c->stack_id};
    a->event = add_event(s, GM_EV_ALLOC, c->seq, c->t_ns, gpu, info->name, index, 0, 0);
    slot->value = index;
    live_add(s, index, info->resettable);
    cs_live(s, a, 1);
    if (info->ipc_space && !s->seen_open) {
        s->seen_open = true;
        add_event(s, GM_EV_IPC_OPEN, c->seq, c->t_ns, gpu, info->name, index, 0, 0);
    }
}

static void on_free(struct pass *s, const struct call_row *c)
{
    if (c->ptr == 0) /* freeing NULL does nothing, by every API's contract */
        return;
    struct slot *slot = map_slot(s, c->info->space_id, c->ptr, false);
    if (slot && is_live(s, slot->value))
        end_alloc(s, (uint32_t)slot->value, c->seq, c->t_ns, c->info->name, 0);
    else if (slot)
        s->p->double_frees++;
    else
        s->p->unknown_frees++;
}

/* A device reset ends what the device's context owned: device, host and
 * IPC memory made on that device, not VMM handles (the allocations view). */
static void on_reset(struct pass *s, const struct call_row *c)
{
    for (size_t i = 0; i < s->nlive;) {
        uint32_t index = s->live[i];
        if (s->resettable[index] && s->p->allocs[index].device == c->device) {
            end_alloc(s, index, c->seq, c->t_ns, c->info->name, 1);
            continue; /* live[i] now holds another allocation */
        }
        i++;
    }
}

static void on_export(struct pass *s, const struct call_row *c, uint32_t gpu)
{
    uint32_t found = GM_NONE;
    if (s->device_space != GM_NONE) {
        struct slot *slot = map_slot(s, s->device_space, c->ptr, false);
        if (slot && is_live(s, slot->value))
            found = (uint32_t)slot->value;
    }
    /* A handle of a pointer inside an allocation shares that allocation. */
    for (size_t i = 0; found == GM_NONE && i < s->nlive && !s->x->scan_capped; i++) {
        const struct gm_alloc *a = &s->p->allocs[s->live[i]];
        if (++s->scanned > MAX_CONTAINMENT_SCAN)
            s->x->scan_capped = true;
        else if ((a->kind == GM_KIND_DEVICE || a->kind == GM_KIND_MANAGED) &&
                 (uint64_t)c->ptr >= (uint64_t)a->ptr &&
                 (uint64_t)c->ptr - (uint64_t)a->ptr < (uint64_t)a->size)
            found = s->live[i];
    }
    if (found != GM_NONE) {
        s->p->allocs[found].exported = true;
        struct loader *L = s->L;
        L->exports = xgrow(L->exports, &L->exports_cap, L->nexports + 1, sizeof(*L->exports));
        L->exports[L->nexports++] =
            (struct handle_use){.handle = GM_NONE, .proc = s->p, .alloc = found, .seq = c->seq};
    }
    if (!s->seen_export) {
        s->seen_export = true;
        add_event(s, GM_EV_IPC_EXPORT, c->seq, c->t_ns, gpu, c->info->name,
                  found == GM_NONE ? -1 : (int64_t)found, 0, 0);
    }
}

static void on_comm_init(struct pass *s, const struct call_row *c, uint32_t gpu)
{
    struct gm_process *p = s->p;
    /* The communicators view leaves out a "successful" init without a handle. */
    if (c->result == 0 && c->arg0 == 0)
        return;
    p->comms = xgrow(p->comms, &s->comms_cap, p->ncomms + 1, sizeof(*p->comms));
    p->comms[p->ncomms] = (struct gm_comm){.seq = c->seq,
                                           .t_ns = c->t_ns,
                                           .nranks = c->arg1,
                                           .rank = c->arg2,
                                           .result = c->result,
                                           .hash = (uint64_t)c->arg3,
                                           .gpu = gpu};
    add_event(s, GM_EV_COMM_INIT, c->seq, c->t_ns, gpu, c->info->name, (int64_t)p->ncomms, 0,
              c->info->layer);
    p->ncomms++;
}

size_t ld_seq_index(const struct pass *s, int64_t seq)
{
    size_t n = s->nseqs;
    if (n == 0)
        return SIZE_MAX;
    const struct seq_call *c = s->seq_calls;
    int64_t first = c[0].seq, last = c[n - 1].seq;
    if (seq < first || seq > last)
        return SIZE_MAX;
    /* Seqs strictly increase, so the call with seq, if read, lies between
     * these bounds; where seqs have no gaps (the usual trace) lo is it.
     * Parents are recent calls: no search through a table that has outgrown
     * the caches. */
    uint64_t after = (uint64_t)last - (uint64_t)seq, before = (uint64_t)seq - (uint64_t)first;
    size_t lo = after < n ? n - 1 - (size_t)after : 0;
    size_t hi = before < n - 1 ? (size_t)before + 1 : n;
    assert(lo < hi);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && c[lo].seq == seq ? lo : SIZE_MAX;
}

static bool is_memory_role(enum role role)
{
    return role == ROLE_ALLOC || role == ROLE_FREE || role == ROLE_RESET;
}

/* logical_events: a call made inside a traced call of the same role (or a
 * memory call inside a memory call) is the same event seen twice. parent:
 * the parent's index in s->seq_calls, SIZE_MAX when it is not in the trace. */
static bool is_logical(const struct pass *s, const struct api_info *info, size_t parent)
{
    if (parent == SIZE_MAX || s->seq_calls[parent].role == GM_NONE)
        return true;
    uint32_t prole = s->seq_calls[parent].role;
    return !((!info->null_role && prole == info->role_id) ||
             (s->seq_calls[parent].memory && is_memory_role(info->role)));
}

/* In seq order, as read: what needs the calls before it (the parent's
 * role and stack) and the process's totals. */
static void note_call(struct pass *s, struct call_row *c)
{
    struct gm_process *p = s->p;
    const struct api_info *info = c->info;
    /* A parent that is not in the trace (or comes later: a damaged trace)
     * counts as absent. */
    size_t parent = c->has_parent ? ld_seq_index(s, c->parent_seq) : SIZE_MAX;
    c->logical = is_logical(s, info, parent);
    /* The call's stack (symbols/stacks.h): its own, else its parent's (parents start earlier:
     * anything else is damage), at most MAX_STACK_HOPS calls up. */
    uint8_t hops = 0;
    if (c->stack_id <= 0) {
        c->stack_id = 0;
        hops = NO_STACK;
        if (parent != SIZE_MAX && c->parent_seq > 0 &&
            s->seq_calls[parent].hops + 1 < MAX_STACK_HOPS) {
            c->stack_id = s->seq_calls[parent].stack;
            hops = (uint8_t)(s->seq_calls[parent].hops + 1);
        }
    }

    if (s->nseqs == 0 || c->seq > s->seq_calls[s->nseqs - 1].seq) {
        s->seq_calls = xgrow(s->seq_calls, &s->seqs_cap, s->nseqs + 1, sizeof(*s->seq_calls));
        s->seq_calls[s->nseqs++] = (struct seq_call){
            .seq = c->seq,
            .stack = c->stack_id,
            .role = info->null_role ? GM_NONE : info->role_id,
            .api = info->name,
            .memory = is_memory_role(info->role),
            .hops = hops,
        };
    }

    p->calls++;
    int64_t end = gm_add(c->t_ns, c->dur_ns > 0 ? c->dur_ns : 0);
    if (!p->has_calls || c->t_ns < p->first_t_ns)
        p->first_t_ns = c->t_ns;
    if (!p->has_calls || end > p->last_end_ns)
        p->last_end_ns = end;
    p->last_seq = c->seq;
    p->has_calls = true;
}

/* In effect order: the events and allocations the call makes. */
static void apply_call(struct pass *s, const struct call_row *c)
{
    struct gm_process *p = s->p;
    const struct api_info *info = c->info;
    bool logical = c->logical;

    /* The first call of the process, and its first call on each GPU. */
    uint32_t gpu = ld_gpu_of(s, c->device);
    /* NVTX records are the program's words, not CUDA calls. */
    bool first = !s->seen_call && !ROLE_IS_NVTX(info->role);
    if (!first && gpu != GM_PENDING && gpu != GM_NONE && !ROLE_IS_NVTX(info->role)) {
        first = true;
        for (size_t i = 0; first && i < s->nfirst; i++)
            first = s->first_call_gpus[i] != gpu;
    }
    if (first && gpu != GM_NONE) {
        s->first_call_gpus =
            xgrow(s->first_call_gpus, &s->first_cap, s->nfirst + 1, sizeof(uint32_t));
        s->first_call_gpus[s->nfirst++] = gpu;
        add_event(s, GM_EV_FIRST_CALL, c->seq, c->t_ns, gpu, info->name, 0, 0, 0);
    }
    s->seen_call |= !ROLE_IS_NVTX(info->role);
    if (c->nvtx_event)
        add_event(s, (enum gm_event_type)c->nvtx_event, c->seq, c->t_ns, gpu, info->name,
                  c->nvtx_text, c->nvtx_level, 0);

    bool ok = c->result == 0;
    switch (info->role) {
    case ROLE_ALLOC:
        if (logical && ok)
            on_alloc(s, c, gpu);
        break;
    case ROLE_FREE:
        if (logical && ok)
            on_free(s, c);
        break;
    case ROLE_RESET:
        if (logical && ok)
            on_reset(s, c);
        break;
    case ROLE_MEMINFO:
        if (logical && ok)
            cs_meminfo(s, c);
        /* A measurement is a top-level query: a nested one is the same answer. */
        if (logical && ok && !c->nested) {
            add_event(s, GM_EV_MEASURE, c->seq, c->t_ns, gpu, info->name, c->arg0 > 0 ? c->arg0 : 0,
                      c->arg1 > 0 ? c->arg1 : 0, 0);
            p->measurements++;
        }
        break;
    case ROLE_IPC_EXPORT:
        if (logical && ok)
            on_export(s, c, gpu);
        break;
    case ROLE_CAPTURE_BEGIN:
    case ROLE_CAPTURE_END:
        if (logical && ok)
            add_event(s, info->role == ROLE_CAPTURE_BEGIN ? GM_EV_CAPTURE_BEGIN : GM_EV_CAPTURE_END,
                      c->seq, c->t_ns, gpu, info->name, 0, 0, 0);
        break;
    case ROLE_COMM_INIT:
        on_comm_init(s, c, gpu);
        break;
    case ROLE_COLLECTIVE:
        if (ok && !s->seen_collective) {
            s->seen_collective = true;
            add_event(s, GM_EV_COLLECTIVE, c->seq, c->t_ns, gpu, info->name, 0, 0, 0);
        }
        break;
    default:
        break;
    }
    /* Failed calls, except failed lookups (how libraries probe for driver
     * features) and failed inits (their own milestone says so). */
    if (!ok && logical && info->role != ROLE_LOOKUP && info->role != ROLE_COMM_INIT &&
        !ROLE_IS_NVTX(info->role))
        add_event(s, GM_EV_FAILED, c->seq, c->t_ns, gpu, info->name, c->result,
                  c->size > 0 ? c->size : 0, info->layer);
}

/* ---- effect order ---- */

/* Calls read but not yet applied, least (order, seq) first. */
struct pending {
    struct call_row *rows;
    size_t count, cap;
};

static bool applies_before(const struct call_row *a, const struct call_row *b)
{
    return a->order != b->order ? a->order < b->order : a->seq < b->seq;
}

static void pending_push(struct pending *h, const struct call_row *row)
{
    h->rows = xgrow(h->rows, &h->cap, h->count + 1, sizeof(*h->rows));
    size_t i = h->count++;
    while (i > 0 && applies_before(row, &h->rows[(i - 1) / 2])) {
        h->rows[i] = h->rows[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->rows[i] = *row;
}

static struct call_row pending_pop(struct pending *h)
{
    assert(h->count > 0);
    struct call_row top = h->rows[0];
    struct call_row last = h->rows[--h->count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->count)
            break;
        if (child + 1 < h->count && applies_before(&h->rows[child + 1], &h->rows[child]))
            child++;
        if (!applies_before(&h->rows[child], &last))
            break;
        h->rows[i] = h->rows[child];
        i = child;
    }
    if (h->count > 0)
        h->rows[i] = last;
    return top;
}

/* floor(v / 2), for the untrusted orders of a damaged trace too. */
static int64_t half_down(int64_t v)
{
    return v >= 0 ? v / 2 : -((-(v + 1)) / 2) - 1;
}

/*
 * Calls come in seq order, and no call takes effect before 2 * its seq
 * (schema.h), so once the call with seq s is read every pending call whose
 * order is below 2 * (s + 1) is due: no later row can come before it.
 */
static void apply_due(struct pass *s, struct pending *h, int64_t read_up_to)
{
    while (h->count > 0 && half_down(h->rows[0].order) <= read_up_to) {
        struct call_row c = pending_pop(h);
        apply_call(s, &c);
    }
}

/* The events columns the pass reads, in this order; a column an older
 * format lacks reads as NULL (caller: modules from format 3; ret_seq:
 * effect orders from format 6). */
enum {
    COL_SEQ,
    COL_T,
    COL_DUR,
    COL_WAIT,
    COL_API,
    COL_DEVICE,
    COL_PTR,
    COL_SIZE,
    COL_RESULT,
    COL_DEPTH,
    COL_PARENT,
    COL_ARG0,
    COL_ARG1,
    COL_ARG2,
    COL_ARG3,
    COL_CALLER,
    COL_RET_SEQ,
    COL_HANDLE,
    COL_ARG4,
    COL_ARG6,
    COL_ARG7,
    COL_ARG5,
    COL_STACK,
    COL_TID,
    NCOLS
};

/* The query of the pass; notnull[i]: the table declares column i NOT NULL
 * (SQLite enforces it: a NULL check can be left out). */
static char *events_query(struct pass *s, bool notnull[NCOLS], int *rc)
{
    static const char *const names[NCOLS] = {
        "seq",     "t_ns",   "dur_ns",     "wait_ns", "api_id", "device", "ptr",      "size",
        "result",  "depth",  "parent_seq", "arg0",    "arg1",   "arg2",   "arg3",     "caller",
        "ret_seq", "handle", "arg4",       "arg6",    "arg7",   "arg5",   "stack_id", "tid"};
    struct trace *t = (struct trace *)s->p->trace;
    sqlite3_stmt *stmt =
        trace_query(t, "SELECT name, \"notnull\" FROM pragma_table_info('events')", "");
    if (!stmt) {
        *rc = -1;
        return NULL;
    }
    bool have[NCOLS] = {0};
    while ((*rc = trace_step(t, stmt)) == 1) {
        const char *name = (const char *)sqlite3_column_text(stmt, 0);
        for (int i = 0; name && i < NCOLS; i++)
            if (strcmp(name, names[i]) == 0) {
                have[i] = true;
                notnull[i] = sqlite3_column_int64(stmt, 1) != 0;
            }
    }
    sqlite3_finalize(stmt);
    if (*rc < 0)
        return NULL;
    have[COL_CALLER] &= s->p->modules;
    have[COL_RET_SEQ] &= trace_has_effect_order(t);
    for (int i = 0; i < NCOLS; i++)
        notnull[i] &= have[i]; /* a column read as NULL is NULL */
    char *sql = xstrdup("SELECT");
    for (int i = 0; i < NCOLS; i++) {
        char *more = xasprintf("%s%s %s", sql, i ? "," : "", have[i] ? names[i] : "NULL");
        free(sql);
        sql = more;
    }
    char *full = xasprintf("%s FROM events ORDER BY seq", sql);
    free(sql);
    return full;
}

/* calls.effect_order (include/cutrace/schema.h): an acquisition when it
 * returned, anything else when it started; 2 * seq before format 6. */
/* What the NCCL calls' loader reads (collcalls.h), by position in the query. */
static const struct cc_columns nccl_columns = {.size = COL_SIZE,
                                               .dur_ns = COL_DUR,
                                               .result = COL_RESULT,
                                               .arg0 = COL_ARG0,
                                               .arg2 = COL_ARG2,
                                               .arg4 = COL_ARG4,
                                               .arg6 = COL_ARG6,
                                               .arg7 = COL_ARG7};

/* What the communicators' builder reads (comms.h). */
static const struct comm_columns comm_columns = {.t_ns = COL_T,
                                                 .result = COL_RESULT,
                                                 .arg0 = COL_ARG0,
                                                 .arg1 = COL_ARG1,
                                                 .arg2 = COL_ARG2,
                                                 .arg3 = COL_ARG3,
                                                 .arg4 = COL_ARG4,
                                                 .arg5 = COL_ARG5,
                                                 .arg6 = COL_ARG6};

static int64_t effect_order(const struct call_row *c, bool ordered, bool has_ret, int64_t ret_seq)
{
    int64_t earliest = gm_add(c->seq, c->seq);
    if (!ordered || c->info->role != ROLE_ALLOC)
        return earliest;
    int64_t at = has_ret && ret_seq > c->seq ? ret_seq : c->seq;
    return gm_add(gm_add(at, at), 1);
}

/* An integer column, if_null for NULL; a NOT NULL column in one call. */
static inline int64_t col_or(sqlite3_stmt *stmt, int col, bool notnull, int64_t if_null)
{
    return notnull || sqlite3_column_type(stmt, col) != SQLITE_NULL
               ? sqlite3_column_int64(stmt, col)
               : if_null;
}

/*
 * A row of the ipc view's apis (role ipc_export, or alloc in space ipc), kept
 * when the view would show it and ld_read_ipc use it: a handle (not NULL,
 * not empty: lower(hex(handle)) is its handle_hex), result 0 (not NULL). The
 * view's other condition, a logical event, needs the parent, which a
 * damaged trace may record later: ld_read_ipc decides it.
 */
static void keep_ipc_row(struct pass *s, const struct call_row *c, sqlite3_stmt *stmt,
                         const bool notnull[NCOLS])
{
    if (sqlite3_column_type(stmt, COL_HANDLE) == SQLITE_NULL ||
        col_or(stmt, COL_RESULT, notnull[COL_RESULT], 1) != 0 ||
        sqlite3_column_type(stmt, COL_SEQ) == SQLITE_NULL)
        return;
    /* hex() reads its argument as a blob, as sqlite3_column_blob does. */
    const unsigned char *bytes = sqlite3_column_blob(stmt, COL_HANDLE);
    int len = sqlite3_column_bytes(stmt, COL_HANDLE);
    if (!bytes || len <= 0)
        return;
    static const char digits[] = "0123456789abcdef";
    char *hex = xmalloc(2 * (size_t)len + 1);
    for (int i = 0; i < len; i++) {
        hex[2 * i] = digits[bytes[i] >> 4];
        hex[2 * i + 1] = digits[bytes[i] & 15];
    }
    hex[2 * len] = '\0';
    s->ipc_rows = xgrow(s->ipc_rows, &s->ipc_rows_cap, s->nipc_rows + 1, sizeof(*s->ipc_rows));
    s->ipc_rows[s->nipc_rows++] = (struct ipc_row){.seq = c->seq,
                                                   .parent_seq = c->parent_seq,
                                                   .has_parent = c->has_parent,
                                                   .info = c->info,
                                                   .hex = hex};
}

int ld_read_calls(struct pass *s)
{
    struct trace *t = (struct trace *)s->p->trace;
    int rc = 0;
    bool notnull[NCOLS] = {0};
    char *sql = events_query(s, notnull, &rc);
    if (!sql)
        return -1;
    sqlite3_stmt *stmt = trace_query(t, sql, "");
    free(sql);
    if (!stmt)
        return -1;
    bool ordered = trace_has_effect_order(t);
    int64_t last_t = 0;
    struct pending due = {0};
    cs_begin(s);
    while ((rc = trace_step(t, stmt)) == 1) {
        /* seq is the rowid: never NULL. The calls view joins apis: a row of
         * an api it lacks is not a call. */
        const struct api_info *info =
            ld_api_by_id(s, col_or(stmt, COL_API, notnull[COL_API], INT64_MIN));
        if (!info)
            continue;
        /* Columns where NULL reads as 0 take one call, and so do those the
         * table declares NOT NULL: the SQLite API's per-call cost is most
         * of the pass. */
        bool has_t = notnull[COL_T] || !col_is_null(stmt, COL_T);
        int64_t device = col_or(stmt, COL_DEVICE, notnull[COL_DEVICE], -1);
        bool has_parent = notnull[COL_PARENT] || !col_is_null(stmt, COL_PARENT);
        struct call_row c = {
            .seq = sqlite3_column_int64(stmt, COL_SEQ),
            .t_ns = has_t ? sqlite3_column_int64(stmt, COL_T) : last_t,
            .dur_ns = sqlite3_column_int64(stmt, COL_DUR),
            .wait_ns = sqlite3_column_int64(stmt, COL_WAIT),
            .device = device,
            .ptr = sqlite3_column_int64(stmt, COL_PTR),
            .size = sqlite3_column_int64(stmt, COL_SIZE),
            .result = sqlite3_column_int64(stmt, COL_RESULT),
            .nested = sqlite3_column_int64(stmt, COL_DEPTH) > 0,
            .has_parent = has_parent,
            .parent_seq = has_parent ? sqlite3_column_int64(stmt, COL_PARENT) : 0,
            .arg0 = sqlite3_column_int64(stmt, COL_ARG0),
            .arg1 = sqlite3_column_int64(stmt, COL_ARG1),
            .arg2 = sqlite3_column_int64(stmt, COL_ARG2),
            .arg3 = sqlite3_column_int64(stmt, COL_ARG3),
            .caller = sqlite3_column_int64(stmt, COL_CALLER),
            .stack_id = sqlite3_column_int64(stmt, COL_STACK),
            .info = info,
        };
        last_t = c.t_ns;
        c.order = effect_order(&c, ordered,
                               ordered && (notnull[COL_RET_SEQ] || !col_is_null(stmt, COL_RET_SEQ)),
                               ordered ? sqlite3_column_int64(stmt, COL_RET_SEQ) : 0);
        note_call(s, &c);
        if (info->ipc_row)
            keep_ipc_row(s, &c, stmt, notnull);
        /* Each decoded row, in seq order: what is counted per call. */
        const void *handle = NULL;
        int handle_len = 0;
        if (info->role == ROLE_LOOKUP) {
            handle = sqlite3_column_blob(stmt, COL_HANDLE);
            handle_len =
                col_is_null(stmt, COL_HANDLE) ? -1 : sqlite3_column_bytes(stmt, COL_HANDLE);
        }
        if (ROLE_IS_NVTX(info->role))
            nvtx_read(s, &c, stmt, COL_HANDLE, COL_TID);
        cs_row(s, &c, handle, handle_len);
        if (info->nccl != CC_NONE)
            cc_read_call(&s->p->nccl_calls, info->nccl, info->name, c.seq, stmt, &nccl_columns);
        comms_row(s, &c, stmt, &comm_columns);
        s->L->events_read++;
        if ((s->L->events_read & 0xffff) == 0)
            progress_update(s->L->traces_done, s->L->traces, s->L->events_read);
        /* Most calls are due at once: only the pending ones need the heap. */
        if (due.count == 0 && half_down(c.order) <= c.seq)
            apply_call(s, &c);
        else {
            pending_push(&due, &c);
            apply_due(s, &due, c.seq);
        }
    }
    sqlite3_finalize(stmt);
    comms_finish(s);
    apply_due(s, &due, INT64_MAX);
    free(due.rows);
    return rc;
}

static int compare_by_seq(const void *a, const void *b, void *arg)
{
    const struct gm_alloc *allocs = arg;
    int64_t x = allocs[*(const uint32_t *)a].seq, y = allocs[*(const uint32_t *)b].seq;
    return (x > y) - (x < y);
}

/* The allocation made by call seq: allocs are in effect order, so by an
 * index sorted by seq (made on first use, in *by_seq). GM_NONE if none. */
static uint32_t alloc_of_call(const struct gm_process *p, uint32_t **by_seq, int64_t seq)
{
    if (!*by_seq) {
        *by_seq = xcalloc(p->nallocs ? p->nallocs : 1, sizeof(**by_seq));
        for (size_t i = 0; i < p->nallocs; i++)
            (*by_seq)[i] = (uint32_t)i;
        if (p->nallocs > 1)
            qsort_r(*by_seq, p->nallocs, sizeof(**by_seq), compare_by_seq, p->allocs);
    }
    size_t lo = 0, hi = p->nallocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->allocs[(*by_seq)[mid]].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->nallocs && p->allocs[(*by_seq)[lo]].seq == seq ? (*by_seq)[lo] : GM_NONE;
}

/* Exports and opens from the ipc view's rows, kept by the pass: the handle
 * names what was shared. */
void ld_read_ipc(struct pass *s, size_t first_export)
{
    struct loader *L = s->L;
    size_t next_export = first_export;
    uint32_t *by_seq = NULL;
    for (size_t i = 0; i < s->nipc_rows; i++) {
        const struct ipc_row *row = &s->ipc_rows[i];
        /* The view joins each event to its parent wherever it is. */
        bool logical =
            is_logical(s, row->info, row->has_parent ? ld_seq_index(s, row->parent_seq) : SIZE_MAX);
        /* The view names the api, and a name stands for its first row. */
        const struct api_info *info = ld_api_of(s, L->apis.strings[row->info->name]);
        if (!logical || !info)
            continue;
        int64_t seq = row->seq;
        if (info->role == ROLE_IPC_EXPORT) {
            /* The exports the calls pass tied to an allocation, in seq order. */
            while (next_export < L->nexports && L->exports[next_export].seq < seq)
                next_export++;
            if (next_export < L->nexports && L->exports[next_export].seq == seq)
                L->exports[next_export++].handle = strtab_id(&L->handles, row->hex);
        } else if (info->role == ROLE_ALLOC && info->kind == GM_KIND_IPC) {
            uint32_t a = alloc_of_call(s->p, &by_seq, seq);
            if (a == GM_NONE)
                continue;
            L->opens = xgrow(L->opens, &L->opens_cap, L->nopens + 1, sizeof(*L->opens));
            L->opens[L->nopens++] = (struct handle_use){
                .handle = strtab_id(&L->handles, row->hex), .proc = s->p, .alloc = a, .seq = seq};
        }
    }
    free(by_seq);
}

void ld_resolve_pending(struct pass *s)
{
    struct gm_process *p = s->p;
    uint32_t only = GM_NONE;
    size_t distinct = 0;
    for (size_t i = 0; i < s->ndevmap; i++)
        if (s->devmap[i].gpu != GM_NONE && s->devmap[i].gpu != only) {
            only = s->devmap[i].gpu;
            distinct++;
        }
    /* The devices table's rows come first in p->devices (unsorted yet). */
    size_t listed = 0;
    while (listed < p->ndevices && p->devices[listed].listed)
        listed++;
    if (distinct == 0 && listed == 1 && p->devices[0].uuid)
        only = ld_gpu_of(s, p->devices[0].ordinal);
    else if (distinct != 1)
        only = GM_NONE;
    for (size_t i = 0; i < p->nevents; i++) {
        if (p->events[i].gpu == GM_PENDING)
            p->events[i].gpu = only;
        if (p->events[i].gpu == GM_NONE)
            s->x->no_gpu_events++;
    }
    for (size_t i = 0; i < p->nallocs; i++)
        if (p->allocs[i].gpu == GM_PENDING)
            p->allocs[i].gpu = only;
    for (size_t i = 0; i < p->ncomms; i++)
        if (p->comms[i].gpu == GM_PENDING)
            p->comms[i].gpu = only;
}
