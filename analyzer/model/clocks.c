/*
 * clocks.c - the offsets between the hosts' clocks of a run, estimated from
 * NCCL calls matched across ranks, and the model's times moved onto the
 * reference host's axis (see clocks.h for the estimator and its error).
 *
 * The model keeps NCCL calls aggregated (collcalls.h), so the single calls
 * are read here with one query per trace, and only when the model has more
 * than one clock: a one-host run costs nothing and is left exactly as it
 * was loaded.
 */
#include "model/clocks.h"

#include "cli.h"
#include "model/gpumodel.h"
#include "out/json.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Collectives matched per communicator: the first ones are as good as any
 * later, and the cap keeps a million-call run's evidence small. */
#define CLOCKS_CALLS_PER_COMM 1024

/* Where a communicator's matched events are keyed: its unique-id hash,
 * size and split color (the children of one split share the parent's
 * hash), and the call's number on it (0: the init). */
struct event_key {
    uint64_t hash;
    int64_t nranks, color, number;
};

/* One rank's part in a matched event. */
struct sighting {
    struct event_key key;
    uint32_t clock;
    bool barrier; /* an init: no rank returns before the last entered */
    int64_t entry, ret;
};

/* An event's sightings on one clock, reduced to what bounds an offset. */
struct clock_span {
    uint32_t clock;
    int64_t first_entry, last_entry, first_ret, last_ret;
};

struct matched_event {
    bool barrier;
    struct clock_span *spans; /* by clock, ascending */
    size_t nspans;
};

struct evidence {
    struct sighting *sightings;
    size_t nsightings, cap;
    struct matched_event *events;
    size_t nevents;
};

/* A communicator handle of one process while its calls are read. */
struct handle_state {
    int64_t handle;
    struct event_key key;
};

/* ---- reading the calls ---- */

static void add_sighting(struct evidence *e, const struct sighting *s)
{
    e->sightings = xgrow(e->sightings, &e->cap, e->nsightings + 1, sizeof(*e->sightings));
    e->sightings[e->nsightings++] = *s;
}

static struct handle_state *find_handle(struct handle_state *h, size_t n, int64_t handle)
{
    for (size_t i = n; i-- > 0;) /* the latest init of a reused handle */
        if (h[i].handle == handle)
            return &h[i];
    return NULL;
}

/* A trace the query cannot read (a format without these columns) gives no
 * evidence: its host stays unaligned unless another trace links it. */
static void read_process(struct evidence *e, const struct gm_process *p)
{
    static const char sql[] =
        "SELECT e.t_ns, e.dur_ns, e.result, e.arg0, e.arg1, e.arg3, e.arg5, e.arg6, e.arg7,"
        " a.role = 'comm_init' FROM events e JOIN apis a ON a.api_id = e.api_id"
        " WHERE a.layer = 'nccl' AND a.role IN ('comm_init', 'collective') AND e.depth = 0"
        " ORDER BY e.seq";
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(p->trace->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        sqlite3_finalize(stmt);
        return;
    }
    struct handle_state *handles = NULL;
    size_t nhandles = 0, cap = 0;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
        int64_t t = sqlite3_column_int64(stmt, 0), dur = sqlite3_column_int64(stmt, 1);
        int64_t result = sqlite3_column_int64(stmt, 2), handle = sqlite3_column_int64(stmt, 3);
        struct sighting s = {.clock = p->clock, .entry = t, .ret = gm_add(t, dur > 0 ? dur : 0)};
        if (sqlite3_column_int64(stmt, 9)) {
            if (result != 0 || handle == 0)
                continue;
            handles = xgrow(handles, &cap, nhandles + 1, sizeof(*handles));
            struct handle_state *h = &handles[nhandles++];
            h->handle = handle;
            h->key = (struct event_key){.hash = (uint64_t)sqlite3_column_int64(stmt, 5),
                                        .nranks = sqlite3_column_int64(stmt, 4),
                                        .color = sqlite3_column_int64(stmt, 6)};
            s.key = h->key;
            s.barrier = true;
            add_sighting(e, &s);
            continue;
        }
        struct handle_state *h = find_handle(handles, nhandles, handle);
        if (!h || h->key.number >= CLOCKS_CALLS_PER_COMM)
            continue;
        /* Every call numbers, so that ranks count alike; only a blocking,
         * successful one is evidence. */
        h->key.number++;
        bool in_group = sqlite3_column_int64(stmt, 7) > 0;
        bool captured = sqlite3_column_int64(stmt, 8) == 1;
        if (result != 0 || in_group || captured)
            continue;
        s.key = h->key;
        add_sighting(e, &s);
    }
    sqlite3_finalize(stmt);
    free(handles);
}

static int compare_keys(const struct event_key *x, const struct event_key *y)
{
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    if (x->nranks != y->nranks)
        return x->nranks < y->nranks ? -1 : 1;
    if (x->color != y->color)
        return x->color < y->color ? -1 : 1;
    return (x->number > y->number) - (x->number < y->number);
}

static int compare_sightings(const void *a, const void *b)
{
    const struct sighting *x = a, *y = b;
    int c = compare_keys(&x->key, &y->key);
    return c ? c : (x->clock > y->clock) - (x->clock < y->clock);
}

/* Groups the sightings into events; keeps those seen on two clocks or more. */
static void match_events(struct evidence *e)
{
    if (e->nsightings > 1)
        qsort(e->sightings, e->nsightings, sizeof(*e->sightings), compare_sightings);
    e->events = xcalloc(e->nsightings ? e->nsightings : 1, sizeof(*e->events));
    for (size_t i = 0, next; i < e->nsightings; i = next) {
        next = i + 1;
        while (next < e->nsightings &&
               compare_keys(&e->sightings[i].key, &e->sightings[next].key) == 0)
            next++;
        struct matched_event ev = {.barrier = e->sightings[i].barrier};
        ev.spans = xcalloc(next - i, sizeof(*ev.spans));
        for (size_t k = i; k < next; k++) {
            const struct sighting *s = &e->sightings[k];
            struct clock_span *span = ev.nspans ? &ev.spans[ev.nspans - 1] : NULL;
            if (!span || span->clock != s->clock) {
                span = &ev.spans[ev.nspans++];
                *span = (struct clock_span){s->clock, s->entry, s->entry, s->ret, s->ret};
                continue;
            }
            span->first_entry = s->entry < span->first_entry ? s->entry : span->first_entry;
            span->last_entry = s->entry > span->last_entry ? s->entry : span->last_entry;
            span->first_ret = s->ret < span->first_ret ? s->ret : span->first_ret;
            span->last_ret = s->ret > span->last_ret ? s->ret : span->last_ret;
        }
        if (ev.nspans > 1)
            e->events[e->nevents++] = ev;
        else
            free(ev.spans);
    }
}

/* ---- estimating one pair ---- */

struct bound {
    int64_t lo, hi;
};

struct estimate {
    int64_t offset, error, events;
    const char *method;
};

static const struct clock_span *span_of(const struct matched_event *ev, uint32_t clock)
{
    for (size_t i = 0; i < ev->nspans; i++)
        if (ev->spans[i].clock == clock)
            return &ev->spans[i];
    return NULL;
}

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The value at quantile q (0..1) of sorted values. */
static int64_t quantile(const int64_t *sorted, size_t n, double q)
{
    assert(n > 0);
    return sorted[(size_t)(q * (double)(n - 1) + 0.5)];
}

/* When 0 is as consistent with the evidence as the estimate, the clocks
 * already share an axis: leave the times as they are. */
static void prefer_zero(struct estimate *est, int64_t lo, int64_t hi)
{
    if (lo <= 0 && hi >= 0) {
        est->offset = 0;
        est->error = -lo > hi ? -lo : hi;
    }
}

/* Without a consistent barrier bound: the median of the events' midpoints,
 * with the spread of the middle half plus a typical half width as error. */
static void median_estimate(const struct bound *b, size_t n, struct estimate *est)
{
    int64_t *mid = xcalloc(n, sizeof(*mid)), *half = xcalloc(n, sizeof(*half));
    for (size_t i = 0; i < n; i++) {
        int64_t width = gm_sub(b[i].hi, b[i].lo);
        half[i] = (width < 0 ? -(width / 2) : width / 2);
        mid[i] = gm_add(b[i].lo, width / 2);
    }
    qsort(mid, n, sizeof(*mid), compare_i64);
    qsort(half, n, sizeof(*half), compare_i64);
    est->offset = quantile(mid, n, 0.5);
    est->error =
        gm_add(gm_sub(quantile(mid, n, 0.75), quantile(mid, n, 0.25)) / 2, quantile(half, n, 0.5));
    est->events = (int64_t)n;
    est->method = "median";
    prefer_zero(est, gm_sub(est->offset, est->error), gm_add(est->offset, est->error));
    free(mid);
    free(half);
}

/*
 * The offset d of clock b against clock a (b's reading = a's + d) from the
 * events both saw. Returns false when they share none.
 */
static bool estimate_pair(const struct evidence *e, uint32_t a, uint32_t b, struct estimate *est)
{
    struct bound *barriers = xcalloc(e->nevents ? e->nevents : 1, sizeof(*barriers));
    struct bound *others = xcalloc(e->nevents ? e->nevents : 1, sizeof(*others));
    size_t nbarriers = 0, nothers = 0;
    for (size_t i = 0; i < e->nevents; i++) {
        const struct clock_span *sa = span_of(&e->events[i], a), *sb = span_of(&e->events[i], b);
        if (!sa || !sb)
            continue;
        struct bound bd = {gm_sub(sb->last_entry, sa->first_ret),
                           gm_sub(sb->first_ret, sa->last_entry)};
        if (e->events[i].barrier)
            barriers[nbarriers++] = bd;
        else
            others[nothers++] = bd;
    }
    bool found = nbarriers + nothers > 0;
    struct bound all = {INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < nbarriers; i++) {
        all.lo = barriers[i].lo > all.lo ? barriers[i].lo : all.lo;
        all.hi = barriers[i].hi < all.hi ? barriers[i].hi : all.hi;
    }
    if (found && nbarriers > 0 && all.lo <= all.hi) {
        /* Only the barriers' bound is certain: a collective's host call
         * that only enqueues work returns whenever its rank got there, so
         * its "bound" moves with the ranks' skew (a loaded host's ranks
         * late by a millisecond make a narrow one a millisecond off, and
         * intersecting it would state a tight error that misses). The
         * collectives that agree with the bound only choose the point in
         * it, the median of their midpoints; the error covers the whole
         * bound, so the true offset is always within it. */
        int64_t *mids = xcalloc(nothers ? nothers : 1, sizeof(*mids));
        size_t nagree = 0;
        for (size_t i = 0; i < nothers; i++) {
            if (others[i].lo > all.hi || others[i].hi < all.lo)
                continue;
            int64_t width = gm_sub(others[i].hi, others[i].lo);
            mids[nagree++] = gm_add(others[i].lo, width / 2);
        }
        int64_t width = gm_sub(all.hi, all.lo), point = gm_add(all.lo, width / 2);
        if (nagree) {
            qsort(mids, nagree, sizeof(*mids), compare_i64);
            point = quantile(mids, nagree, 0.5);
            point = point < all.lo ? all.lo : point > all.hi ? all.hi : point;
        }
        free(mids);
        int64_t below = gm_sub(point, all.lo), above = gm_sub(all.hi, point);
        *est = (struct estimate){point, below > above ? below : above,
                                 (int64_t)(nbarriers + nagree), "bound"};
        assert(est->error >= 0);
        prefer_zero(est, all.lo, all.hi);
    } else if (found) {
        /* No barrier, or barriers that contradict one another (a
         * non-blocking init, a clock that drifted): every event votes. */
        struct bound *votes = xcalloc(nbarriers + nothers, sizeof(*votes));
        memcpy(votes, barriers, nbarriers * sizeof(*votes));
        memcpy(votes + nbarriers, others, nothers * sizeof(*votes));
        median_estimate(votes, nbarriers + nothers, est);
        free(votes);
    }
    free(barriers);
    free(others);
    return found;
}

/* ---- the model ---- */

/* Rank 0 of the largest communicator sets the axis; without NCCL ranks,
 * the first process's clock. */
static uint32_t pick_reference(const struct gm_model *m)
{
    uint32_t best = GM_NONE;
    int64_t best_size = -1;
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        if (p->has_rank && p->rank == 0 && p->world_nranks > best_size) {
            best = p->clock;
            best_size = p->world_nranks;
        }
    }
    if (best == GM_NONE && m->nprocs)
        best = m->procs[0].clock;
    return best;
}

/* Aligns clock b against the aligned clock that shares the most events. */
static bool align_one(struct gm_model *m, const struct evidence *e, uint32_t b)
{
    struct estimate best = {0};
    uint32_t against = GM_NONE;
    for (uint32_t a = 0; a < m->nclocks; a++) {
        struct estimate est;
        if (!m->clocks[a].aligned || a == b || !estimate_pair(e, a, b, &est))
            continue;
        if (against == GM_NONE || est.events > best.events) {
            best = est;
            against = a;
        }
    }
    if (against == GM_NONE)
        return false;
    struct gm_clock *c = &m->clocks[b];
    c->aligned = true;
    c->offset_ns = gm_add(m->clocks[against].offset_ns, best.offset);
    c->error_ns = gm_add(m->clocks[against].error_ns, best.error);
    c->events = best.events;
    c->method = best.method;
    c->against = against;
    return true;
}

static void shift_comms(struct nccl_comm *comms, size_t n, int64_t offset)
{
    for (size_t i = 0; i < n; i++) {
        comms[i].t_init_ns = gm_sub(comms[i].t_init_ns, offset);
        if (comms[i].destroyed)
            comms[i].t_destroy_ns = gm_sub(comms[i].t_destroy_ns, offset);
        if (comms[i].finalized)
            comms[i].t_finalize_ns = gm_sub(comms[i].t_finalize_ns, offset);
    }
}

/* Every monotonic time the model holds of p; a new time field of
 * gm_process belongs here too. */
static void shift_process(struct gm_process *p, int64_t offset)
{
    for (size_t i = 0; i < p->nevents; i++)
        p->events[i].t_ns = gm_sub(p->events[i].t_ns, offset);
    for (size_t i = 0; i < p->nallocs; i++)
        p->allocs[i].t_ns = gm_sub(p->allocs[i].t_ns, offset);
    for (size_t i = 0; i < p->ncomms; i++)
        p->comms[i].t_ns = gm_sub(p->comms[i].t_ns, offset);
    shift_comms(p->communicators.comms, p->communicators.ncomms, offset);
    if (p->nccl)
        shift_comms(p->nccl->comms, p->nccl->ncomms, offset);
    for (size_t i = 0; i < p->ndevices; i++)
        if (p->devices[i].has_meminfo)
            p->devices[i].meminfo_t_ns = gm_sub(p->devices[i].meminfo_t_ns, offset);
    for (size_t i = 0; i < p->nfailed; i++)
        p->failed[i].t_ns = gm_sub(p->failed[i].t_ns, offset);
    p->first_t_ns = gm_sub(p->first_t_ns, offset);
    p->last_end_ns = gm_sub(p->last_end_ns, offset);
    for (size_t i = 0; i < p->ninflight; i++)
        p->inflight[i].t_ns = gm_sub(p->inflight[i].t_ns, offset);
    if (p->has_alive)
        p->alive_mono_ns = gm_sub(p->alive_mono_ns, offset);
    if (p->has_start_mono)
        p->start_mono_ns = gm_sub(p->start_mono_ns, offset);
    /* The row's start too: reports that read it (summary) take the other
     * times relative to it. */
    if (p->row.has_start_mono)
        p->row.start_mono_ns = gm_sub(p->row.start_mono_ns, offset);
}

void gm_align_clocks(struct gm_model *m)
{
    m->reference_clock = GM_NONE;
    for (size_t i = 0; i < m->nclocks; i++)
        m->clocks[i].against = GM_NONE;
    uint32_t ref = pick_reference(m);
    if (ref == GM_NONE)
        return;
    m->reference_clock = ref;
    m->clocks[ref].reference = m->clocks[ref].aligned = true;
    if (m->nclocks < 2)
        return;
    struct evidence e = {0};
    for (size_t i = 0; i < m->nprocs; i++)
        read_process(&e, &m->procs[i]);
    match_events(&e);
    m->clock_events = (int64_t)e.nevents;
    for (bool progress = true; progress;) {
        progress = false;
        for (uint32_t b = 0; b < m->nclocks; b++)
            if (!m->clocks[b].aligned)
                progress |= align_one(m, &e, b);
    }
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_clock *c = &m->clocks[m->procs[i].clock];
        if (c->aligned && c->offset_ns != 0)
            shift_process(&m->procs[i], c->offset_ns);
    }
    for (size_t i = 0; i < e.nevents; i++)
        free(e.events[i].spans);
    free(e.events);
    free(e.sightings);
    char *summary = gm_clocks_summary(m);
    gm_note(m, "%s", summary);
    free(summary);
}

/* ---- what the reports say ---- */

/* "node2", or "node2 (boot 1f3a...)" when the host has several clocks. */
static char *clock_label(const struct gm_model *m, uint32_t clock)
{
    const struct gm_clock *c = &m->clocks[clock];
    bool shared = false;
    for (size_t i = 0; i < m->nclocks; i++)
        shared |= i != clock && strcmp(m->clocks[i].host, c->host) == 0;
    const char *host = c->host[0] ? c->host : "?";
    return shared ? xasprintf("%s (boot %.8s)", host, c->boot_id) : xstrdup(host);
}

const char *gm_clock_state(const struct gm_model *m, uint32_t clock)
{
    const struct gm_clock *c = &m->clocks[clock];
    return c->reference ? "reference" : c->aligned ? "aligned" : "unaligned";
}

static void append(char **text, const char *more)
{
    char *joined = xasprintf("%s%s", *text, more);
    free(*text);
    *text = joined;
}

char *gm_clocks_summary(const struct gm_model *m)
{
    if (m->nclocks < 2 || m->reference_clock == GM_NONE)
        return NULL;
    size_t naligned = 0;
    for (size_t i = 0; i < m->nclocks; i++)
        naligned += m->clocks[i].aligned;
    char *ref = clock_label(m, m->reference_clock);
    char *text;
    if (naligned > 1)
        text = xasprintf(
            "clocks of %zu hosts aligned on %s's from %" PRId64 " matched NCCL events:", naligned,
            ref, m->clock_events);
    else
        text = xasprintf("clocks of %zu hosts not aligned: no NCCL communicator spans them",
                         m->nclocks);
    free(ref);
    const char *sep = " ";
    for (uint32_t i = 0; i < m->nclocks && naligned > 1; i++) {
        const struct gm_clock *c = &m->clocks[i];
        if (!c->aligned || c->reference)
            continue;
        char off[UNITS_BUF], err[UNITS_BUF];
        char *label = clock_label(m, i);
        char *part =
            xasprintf("%s%s %s (+/- %s)", sep, label, format_offset(off, sizeof(off), c->offset_ns),
                      format_duration(err, sizeof(err), c->error_ns));
        append(&text, part);
        free(part);
        free(label);
        sep = ", ";
    }
    sep = naligned > 1 ? "; not aligned (no NCCL communicator shared with an aligned host): "
                       : "; each host's times are on its own clock: ";
    for (uint32_t i = 0; i < m->nclocks; i++) {
        if (m->clocks[i].aligned && naligned > 1)
            continue;
        char *label = clock_label(m, i);
        char *part = xasprintf("%s%s", sep, label);
        append(&text, part);
        free(part);
        free(label);
        sep = ", ";
    }
    return text;
}

void gm_clocks_json(struct json_writer *w, const struct gm_model *m)
{
    json_key(w, "clocks");
    json_object_begin(w);
    if (m->reference_clock == GM_NONE) {
        json_kv_null(w, "reference_host");
    } else {
        json_kv_string(w, "reference_host", m->clocks[m->reference_clock].host);
    }
    json_kv_int(w, "matched_events", m->clock_events);
    json_key(w, "hosts");
    json_array_begin(w);
    for (uint32_t i = 0; i < m->nclocks; i++) {
        const struct gm_clock *c = &m->clocks[i];
        json_object_begin(w);
        json_kv_string(w, "host", c->host);
        json_kv_string(w, "boot_id", c->boot_id);
        json_kv_string(w, "state", gm_clock_state(m, i));
        json_kv_opt_int(w, "offset_ns", c->aligned, c->offset_ns);
        json_kv_opt_int(w, "error_ns", c->aligned, c->error_ns);
        json_kv_int(w, "events", c->events);
        json_key(w, "method");
        json_string(w, c->method);
        if (c->against == GM_NONE)
            json_kv_null(w, "aligned_against");
        else
            json_kv_string(w, "aligned_against", m->clocks[c->against].host);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}
