/*
 * diff_analysis.c - the comparison behind `cutrace diff` (diff_analysis.h).
 *
 * Order of work, per run then across the two:
 *   1. open and load each run (trace.h folds rings; gpumodel.h models it);
 *   2. per GPU: its rank, ordinal and milestones, walked once in stream order
 *      with the live bytes before and after each event;
 *   3. pair the GPUs (rank, then ordinal, then uuid) and align each pair's
 *      milestones: keys (kind, api of a failed call, occurrence) are unique
 *      per side, so the longest common subsequence is a longest increasing
 *      subsequence of B's positions of A's keys, O(n log n);
 *   4. merge the pairs' aligned lists into one list of rows, find where
 *      each pair first diverges by more than the threshold;
 *   5. allocations by phase x api x module x size x category per pair,
 *      summed over pairs, keeping the groups whose counts differ;
 *   6. IPC lineage, communicators and collectives, budget, configuration;
 *   7. the verdict: which kinds of difference were found.
 *
 * Everything compared is free of pids, pointers, times, hashes and file
 * names; ties in every sort are broken by such stable keys so that the same
 * input gives the same bytes.
 */
#include "analysis/diff_analysis.h"

#include "cli.h"
#include "model/nccl.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MIB           (1ll << 20)
#define KIB           (1ll << 10)
#define GIB           (1ll << 30)
#define MAX_WORLD     4096 /* ranks a communicator may claim that are listed as missing */
#define MAX_CMD_WORDS 512

const char *const diff_match_keys[] = {"rank", "ordinal", "uuid"};

const char *const diff_difference_keys[] = {
    "gpus",          "ends",        "milestones", "memory",  "allocations", "ipc",
    "communicators", "collectives", "budget",     "cmdline", "env",
};

/* ---- small helpers ---- */

static void add_note(struct diff *d, char *text)
{
    d->notes = xgrow(d->notes, &d->notes_cap, d->nnotes + 1, sizeof(*d->notes));
    d->notes[d->nnotes++] = text;
}

static uint32_t string_id(struct diff *d, const char *s)
{
    if (!s)
        s = "";
    for (size_t i = 0; i < d->nstrings; i++)
        if (strcmp(d->strings[i], s) == 0)
            return (uint32_t)i;
    assert(d->nstrings < UINT32_MAX - 1);
    d->strings = xgrow(d->strings, &d->strings_cap, d->nstrings + 1, sizeof(*d->strings));
    d->strings[d->nstrings] = xstrdup(s);
    return (uint32_t)d->nstrings++;
}

const char *diff_string(const struct diff *d, uint32_t id)
{
    return id < d->nstrings ? d->strings[id] : "";
}

static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
    return r;
}

static int64_t abs64(int64_t v)
{
    return v == INT64_MIN ? INT64_MAX : (v < 0 ? -v : v);
}

static int cmp64(int64_t a, int64_t b)
{
    return (a > b) - (a < b);
}

char *diff_exact_size(char *buf, size_t size, int64_t bytes)
{
    static const struct {
        int64_t unit;
        const char *name;
    } units[] = {{1ll << 40, "TiB"}, {GIB, "GiB"}, {MIB, "MiB"}, {KIB, "KiB"}, {1, "B"}};
    if (bytes <= 0) {
        snprintf(buf, size, "%s", bytes == 0 ? "0 B" : "?");
        return buf;
    }
    /* At most two terms, each a whole number of its unit. */
    int64_t left = bytes;
    char text[2][32];
    int terms = 0;
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]) && left > 0; u++) {
        int64_t n = left / units[u].unit;
        if (n == 0)
            continue;
        if (terms == 2) {
            terms = 3;
            break;
        }
        snprintf(text[terms++], sizeof(text[0]), "%" PRId64 " %s", n, units[u].name);
        left -= n * units[u].unit;
    }
    if (terms <= 2 && left == 0) {
        if (terms == 1)
            snprintf(buf, size, "%s", text[0]);
        else
            snprintf(buf, size, "%s + %s", text[0], text[1]);
        return buf;
    }
    /* Not two round terms: the exact count, which two sizes never share. */
    snprintf(buf, size, "%" PRId64 " B", bytes);
    return buf;
}

char *diff_signed_size(char *buf, size_t size, int64_t bytes)
{
    if (bytes == 0) {
        snprintf(buf, size, "0");
        return buf;
    }
    char body[UNITS_BUF];
    gm_format_size(body, sizeof(body), abs64(bytes));
    snprintf(buf, size, "%c%s", bytes < 0 ? '-' : '+', body);
    return buf;
}

int64_t diff_ms_traced(const struct diff_milestone *ms)
{
    return gm_traced(ms->live);
}

/* ---- a u64 -> u32 map (milestone keys to rows or positions) ---- */

struct keymap {
    uint64_t *keys;
    uint32_t *values; /* value + 1, 0 empty */
    size_t nslots, used;
};

static uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static void keymap_put(struct keymap *k, uint64_t key, uint32_t value);

static void keymap_grow(struct keymap *k)
{
    struct keymap old = *k;
    k->nslots = old.nslots ? old.nslots * 2 : 64;
    k->keys = xcalloc(k->nslots, sizeof(*k->keys));
    k->values = xcalloc(k->nslots, sizeof(*k->values));
    k->used = 0;
    for (size_t i = 0; i < old.nslots; i++)
        if (old.values[i])
            keymap_put(k, old.keys[i], old.values[i] - 1);
    free(old.keys);
    free(old.values);
}

static void keymap_put(struct keymap *k, uint64_t key, uint32_t value)
{
    if ((k->used + 1) * 2 > k->nslots)
        keymap_grow(k);
    size_t i = mix64(key) & (k->nslots - 1);
    while (k->values[i] && k->keys[i] != key)
        i = (i + 1) & (k->nslots - 1);
    if (!k->values[i])
        k->used++;
    k->keys[i] = key;
    k->values[i] = value + 1;
}

static uint32_t keymap_get(const struct keymap *k, uint64_t key)
{
    if (!k->nslots)
        return GM_NONE;
    size_t i = mix64(key) & (k->nslots - 1);
    while (k->values[i]) {
        if (k->keys[i] == key)
            return k->values[i] - 1;
        i = (i + 1) & (k->nslots - 1);
    }
    return GM_NONE;
}

static void keymap_free(struct keymap *k)
{
    free(k->keys);
    free(k->values);
    memset(k, 0, sizeof(*k));
}

/* A milestone's identity: kind, api of a failed call, occurrence. */
static uint64_t ms_identity(uint8_t kind, uint32_t sub, uint32_t occurrence)
{
    return ((uint64_t)kind << 56) | ((uint64_t)(sub & 0xffffffu) << 32) | occurrence;
}

static uint64_t ms_key_of(const struct diff_milestone *ms)
{
    return ms_identity(ms->kind, ms->sub, ms->occurrence);
}

/* ---- GPUs of a run and their milestones ---- */

struct capture_state {
    bool open, pending;
    struct diff_milestone end;
};

struct ms_builder {
    struct diff *d;
    struct diff_run *r;
    struct diff_gpu *g;
    size_t cap;
    int64_t failed;
};

static void push_ms(struct ms_builder *b, const struct diff_milestone *ms)
{
    b->g->ms = xgrow(b->g->ms, &b->cap, b->g->nms + 1, sizeof(*b->g->ms));
    b->g->ms[b->g->nms++] = *ms;
}

static int compare_ms(const void *x, const void *y)
{
    const struct diff_milestone *a = x, *b = y;
    if (a->pos != b->pos)
        return a->pos < b->pos ? -1 : 1;
    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    return (a->kind > b->kind) - (a->kind < b->kind);
}

/* The weight burst of each process on the GPU, for its begin and end marks
 * and the pre/post tags of the measurements around it. */
struct burst_marks {
    bool found;
    struct gm_burst b;
};

static void build_milestones(struct diff *d, struct diff_run *r, struct diff_gpu *g)
{
    const struct gm_model *m = &r->m;
    const struct gm_gpu *gpu = &m->gpus[g->gpu];
    int64_t burst_min = d->o->budget ? d->o->budget_options.burst_min : GM_BURST_MIN_DEFAULT;
    struct burst_marks *bursts = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*bursts));
    struct capture_state *cap = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*cap));
    for (size_t k = 0; k < gpu->nprocs; k++) {
        uint32_t proc = gpu->procs[k];
        bursts[proc].found = gm_weight_burst(m, proc, g->gpu, burst_min, &bursts[proc].b);
    }
    struct ms_builder b = {.d = d, .r = r, .g = g};
    struct gm_walk w;
    gm_walk_init(&w, m, g->gpu);
    int64_t before[GM_CATEGORIES];
    memcpy(before, w.live, sizeof(before));
    const struct gm_ref *ref;
    while ((ref = gm_walk_step(&w)) != NULL) {
        const struct gm_process *p = &m->procs[ref->proc];
        const struct gm_event *e = &p->events[ref->event];
        const struct burst_marks *bm = &bursts[ref->proc];
        struct diff_milestone ms = {
            .order = 1, .proc = ref->proc, .event = ref->event, .pos = e->pos};
        memcpy(ms.live, w.live, sizeof(ms.live));
        bool milestone = true, capture = false;
        switch ((enum gm_event_type)e->type) {
        case GM_EV_FIRST_CALL:
            ms.kind = MS_FIRST_CALL;
            break;
        case GM_EV_COMM_INIT:
            ms.kind = MS_COMM_INIT;
            assert(e->a >= 0 && (size_t)e->a < p->ncomms);
            ms.detail = p->comms[e->a].nranks;
            break;
        case GM_EV_COLLECTIVE:
            ms.kind = MS_COLLECTIVE;
            break;
        case GM_EV_IPC_EXPORT:
            ms.kind = MS_IPC_EXPORT;
            break;
        case GM_EV_IPC_OPEN:
            ms.kind = MS_IPC_OPEN;
            break;
        case GM_EV_MEASURE:
            ms.kind = MS_MEASUREMENT;
            ms.measured = true;
            ms.free_bytes = e->a;
            ms.total_bytes = e->b;
            if (bm->found && bm->b.before == ref->event)
                ms.tag = MS_TAG_PRE;
            else if (bm->found && bm->b.after == ref->event)
                ms.tag = MS_TAG_POST;
            break;
        case GM_EV_FAILED:
            if (b.failed++ >= DIFF_MAX_FAILED_MILESTONES) {
                g->failed_dropped++;
                milestone = false;
                break;
            }
            ms.kind = MS_FAILED;
            ms.sub = string_id(d, gm_api_name(m, e->api));
            ms.detail = e->a;
            break;
        case GM_EV_END:
            ms.kind = MS_END;
            ms.detail = e->a;
            break;
        case GM_EV_CAPTURE_BEGIN:
        case GM_EV_CAPTURE_END:
            capture = true;
            break;
        default:
            milestone = false;
            break;
        }
        bool begin = bm->found && ref->event == bm->b.first;
        bool end = bm->found && ref->event == bm->b.last;
        struct capture_state *cs = &cap[ref->proc];
        /* Back-to-back captures of a process are one begin and one end. */
        if (((milestone && !capture) || begin) && cs->pending) {
            push_ms(&b, &cs->end);
            cs->pending = false;
        }
        if ((milestone && !capture) || begin)
            cs->open = false;
        if (begin) {
            struct diff_milestone mb = ms;
            mb.kind = MS_WEIGHT_BEGIN;
            mb.order = 0;
            mb.measured = false;
            mb.tag = MS_TAG_NONE;
            memcpy(mb.live, before, sizeof(mb.live));
            push_ms(&b, &mb);
        }
        if (capture && e->type == GM_EV_CAPTURE_BEGIN && !cs->open) {
            ms.kind = MS_CAPTURE_BEGIN;
            push_ms(&b, &ms);
            cs->open = true;
        } else if (capture && e->type == GM_EV_CAPTURE_END) {
            int64_t graphs = cs->pending ? cs->end.detail + 1 : 1;
            cs->end = ms;
            cs->end.kind = MS_CAPTURE_END;
            cs->end.detail = graphs;
            cs->pending = true;
            cs->open = true;
        } else if (milestone && !capture) {
            push_ms(&b, &ms);
        }
        if (end) {
            struct diff_milestone me = ms;
            me.kind = MS_WEIGHT_END;
            me.order = 2;
            me.measured = false;
            me.tag = MS_TAG_NONE;
            me.detail = 0;
            push_ms(&b, &me);
        }
        memcpy(before, w.live, sizeof(before));
    }
    gm_walk_free(&w);
    for (size_t k = 0; k < gpu->nprocs; k++)
        if (cap[gpu->procs[k]].pending)
            push_ms(&b, &cap[gpu->procs[k]].end);
    if (g->nms > 1)
        qsort(g->ms, g->nms, sizeof(*g->ms), compare_ms);
    /* Occurrences per kind (and api, for failed calls), in stream order. */
    struct keymap counts = {0};
    for (size_t i = 0; i < g->nms; i++) {
        uint64_t k = ms_identity(g->ms[i].kind, g->ms[i].sub, 0);
        uint32_t n = keymap_get(&counts, k);
        n = n == GM_NONE ? 1 : n + 1;
        keymap_put(&counts, k, n);
        g->ms[i].occurrence = n;
    }
    keymap_free(&counts);
    free(bursts);
    free(cap);
}

static void build_gpus(struct diff *d, struct diff_run *r)
{
    const struct gm_model *m = &r->m;
    uint32_t *main_gpu = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*main_gpu));
    for (size_t i = 0; i < m->nprocs; i++)
        main_gpu[i] = gm_main_gpu(m, (uint32_t)i);
    r->ngpus = m->ngpus;
    r->gpus = xcalloc(m->ngpus ? m->ngpus : 1, sizeof(*r->gpus));
    for (size_t gi = 0; gi < m->ngpus; gi++) {
        struct diff_gpu *g = &r->gpus[gi];
        const struct gm_gpu *gpu = &m->gpus[gi];
        g->gpu = (uint32_t)gi;
        g->proc = GM_NONE;
        g->pair = GM_NONE;
        g->ordinal = gpu->ordinal;
        bool conflict = false;
        for (size_t k = 0; k < gpu->nprocs; k++) {
            uint32_t proc = gpu->procs[k];
            const struct gm_process *p = &m->procs[proc];
            if (main_gpu[proc] != gi)
                continue;
            if (g->proc == GM_NONE)
                g->proc = proc;
            if (!p->has_rank)
                continue;
            if (g->has_rank && (g->rank != p->rank || g->world != p->world_nranks))
                conflict = true;
            g->has_rank = true;
            g->rank = p->rank;
            g->world = p->world_nranks;
        }
        if (conflict) {
            /* Two jobs' ranks on one GPU: no rank names it. */
            g->has_rank = false;
            add_note(d, xasprintf("%s: GPU %s is used by processes of different ranks: paired by "
                                  "ordinal or uuid instead",
                                  r == &d->run[DIFF_A] ? "A" : "B", gpu->key));
        }
        if (g->proc == GM_NONE && gpu->nprocs > 0)
            g->proc = gpu->procs[0];
        if (g->has_rank)
            r->ranks++;
        build_milestones(d, r, g);
        if (g->failed_dropped)
            add_note(d, xasprintf("%s: GPU %s: %" PRId64 " more failed calls than the %d aligned "
                                  "as milestones",
                                  r == &d->run[DIFF_A] ? "A" : "B", gpu->key, g->failed_dropped,
                                  DIFF_MAX_FAILED_MILESTONES));
    }
    free(main_gpu);
    /* The job's size and the ranks no GPU has. */
    for (size_t i = 0; i < m->nprocs; i++)
        for (size_t c = 0; c < m->procs[i].ncomms; c++) {
            const struct gm_comm *cm = &m->procs[i].comms[c];
            if (cm->result == 0 && cm->nranks > r->world)
                r->world = cm->nranks;
        }
    if (r->world > 0 && r->world <= MAX_WORLD) {
        size_t cap = 0;
        for (int64_t rank = 0; rank < r->world; rank++) {
            bool held = false;
            for (size_t gi = 0; gi < r->ngpus && !held; gi++)
                held = r->gpus[gi].has_rank && r->gpus[gi].rank == rank;
            if (!held) {
                r->missing = xgrow(r->missing, &cap, r->nmissing + 1, sizeof(*r->missing));
                r->missing[r->nmissing++] = rank;
            }
        }
    }
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        if (p->exited)
            r->exited++;
        else if (p->end_state && strcmp(p->end_state, "killed") == 0)
            r->killed++;
    }
}

/* ---- pairing ---- */

static size_t count_rank(const struct diff_run *r, int64_t rank)
{
    size_t n = 0;
    for (size_t i = 0; i < r->ngpus; i++)
        n += r->gpus[i].has_rank && r->gpus[i].rank == rank;
    return n;
}

static size_t count_ordinal(const struct diff_run *r, int64_t ordinal)
{
    size_t n = 0;
    for (size_t i = 0; i < r->ngpus; i++)
        n += r->gpus[i].pair == GM_NONE && r->gpus[i].ordinal == ordinal;
    return n;
}

static void add_pair(struct diff *d, size_t *cap, uint32_t a, uint32_t b, enum diff_match_by by)
{
    d->pairs = xgrow(d->pairs, cap, d->npairs + 1, sizeof(*d->pairs));
    d->pairs[d->npairs] = (struct diff_pair){.gpu = {a, b}, .by = (uint8_t)by, .first_div = -1};
    d->run[DIFF_A].gpus[a].pair = (uint32_t)d->npairs;
    d->run[DIFF_B].gpus[b].pair = (uint32_t)d->npairs;
    d->npairs++;
}

static int compare_pairs(const void *x, const void *y, void *arg)
{
    const struct diff *d = arg;
    const struct diff_pair *p = x, *q = y;
    if (p->by != q->by)
        return p->by < q->by ? -1 : 1;
    const struct diff_gpu *a = &d->run[DIFF_A].gpus[p->gpu[0]];
    const struct diff_gpu *b = &d->run[DIFF_A].gpus[q->gpu[0]];
    if (p->by == DIFF_BY_RANK && a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (p->by == DIFF_BY_ORDINAL && a->ordinal != b->ordinal)
        return a->ordinal < b->ordinal ? -1 : 1;
    return (p->gpu[0] > q->gpu[0]) - (p->gpu[0] < q->gpu[0]);
}

static void pair_gpus(struct diff *d)
{
    struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    size_t cap = 0;
    /* 1. by rank, where each side has exactly one GPU of that rank */
    for (size_t i = 0; i < A->ngpus; i++) {
        const struct diff_gpu *a = &A->gpus[i];
        if (!a->has_rank || count_rank(A, a->rank) != 1 || count_rank(B, a->rank) != 1)
            continue;
        for (size_t k = 0; k < B->ngpus; k++)
            if (B->gpus[k].has_rank && B->gpus[k].rank == a->rank && B->gpus[k].pair == GM_NONE) {
                add_pair(d, &cap, (uint32_t)i, (uint32_t)k, DIFF_BY_RANK);
                break;
            }
    }
    /* 2. by device ordinal, among the GPUs left, where it is unique on both sides */
    for (size_t i = 0; i < A->ngpus; i++) {
        const struct diff_gpu *a = &A->gpus[i];
        if (a->pair != GM_NONE || count_ordinal(A, a->ordinal) != 1 ||
            count_ordinal(B, a->ordinal) != 1)
            continue;
        /* a rank on both sides that differs is not the same GPU's work */
        for (size_t k = 0; k < B->ngpus; k++) {
            const struct diff_gpu *b = &B->gpus[k];
            if (b->pair != GM_NONE || b->ordinal != a->ordinal)
                continue;
            if (!(a->has_rank && b->has_rank))
                add_pair(d, &cap, (uint32_t)i, (uint32_t)k, DIFF_BY_ORDINAL);
            break;
        }
    }
    /* 3. by uuid: the same machine */
    for (size_t i = 0; i < A->ngpus; i++) {
        const struct gm_gpu *ga = &A->m.gpus[A->gpus[i].gpu];
        if (A->gpus[i].pair != GM_NONE || !ga->uuid)
            continue;
        for (size_t k = 0; k < B->ngpus; k++) {
            const struct gm_gpu *gb = &B->m.gpus[B->gpus[k].gpu];
            if (B->gpus[k].pair == GM_NONE && gb->uuid && strcmp(ga->uuid, gb->uuid) == 0) {
                add_pair(d, &cap, (uint32_t)i, (uint32_t)k, DIFF_BY_UUID);
                break;
            }
        }
    }
    if (d->npairs > 1)
        qsort_r(d->pairs, d->npairs, sizeof(*d->pairs), compare_pairs, d);
    for (size_t p = 0; p < d->npairs; p++) {
        A->gpus[d->pairs[p].gpu[0]].pair = (uint32_t)p;
        B->gpus[d->pairs[p].gpu[1]].pair = (uint32_t)p;
    }
}

/* ---- alignment ---- */

struct keyed {
    uint64_t key;
    uint32_t index;
};

static int compare_keyed(const void *x, const void *y)
{
    const struct keyed *a = x, *b = y;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static void add_step(struct diff_pair *p, size_t *cap, int32_t a, int32_t b)
{
    p->steps = xgrow(p->steps, cap, p->nsteps + 1, sizeof(*p->steps));
    p->steps[p->nsteps++] = (struct diff_step){.ms = {a, b}, .row = GM_NONE};
}

/*
 * The longest common subsequence of the two milestone lists. Keys are
 * unique per side, so each A milestone has at most one partner in B and
 * the LCS is the longest increasing run of those partners' indexes.
 */
static void align_pair(struct diff *d, struct diff_pair *p)
{
    const struct diff_gpu *ga = &d->run[DIFF_A].gpus[p->gpu[0]];
    const struct diff_gpu *gb = &d->run[DIFF_B].gpus[p->gpu[1]];
    size_t na = ga->nms, nb = gb->nms;
    struct keyed *bk = xcalloc(nb ? nb : 1, sizeof(*bk));
    for (size_t j = 0; j < nb; j++)
        bk[j] = (struct keyed){ms_key_of(&gb->ms[j]), (uint32_t)j};
    if (nb > 1)
        qsort(bk, nb, sizeof(*bk), compare_keyed);
    /* seq: (a index, b index) of A's milestones that B has, in A's order */
    uint32_t *sa = xcalloc(na ? na : 1, sizeof(*sa)), *sb = xcalloc(na ? na : 1, sizeof(*sb));
    size_t n = 0;
    for (size_t i = 0; i < na; i++) {
        struct keyed key = {ms_key_of(&ga->ms[i]), 0};
        size_t lo = 0, hi = nb; /* the first B key >= A's: keys are unique per side */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (bk[mid].key < key.key)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < nb && bk[lo].key == key.key) {
            sa[n] = (uint32_t)i;
            sb[n] = bk[lo].index;
            n++;
        }
    }
    /* patience sorting: tails[k] = the seq index ending the best run of length k+1 */
    size_t *tails = xcalloc(n ? n : 1, sizeof(*tails));
    size_t *prev = xcalloc(n ? n : 1, sizeof(*prev));
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t lo = 0, hi = len;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (sb[tails[mid]] < sb[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        prev[i] = lo > 0 ? tails[lo - 1] : SIZE_MAX;
        tails[lo] = i;
        if (lo == len)
            len++;
    }
    size_t *chosen = xcalloc(len ? len : 1, sizeof(*chosen));
    for (size_t k = len, i = len ? tails[len - 1] : SIZE_MAX; k > 0; k--) {
        assert(i != SIZE_MAX);
        chosen[k - 1] = i;
        i = prev[i];
    }
    size_t cap = 0, ia = 0, ib = 0;
    for (size_t k = 0; k <= len; k++) {
        size_t ma = k < len ? sa[chosen[k]] : na, mb = k < len ? sb[chosen[k]] : nb;
        while (ia < ma)
            add_step(p, &cap, (int32_t)ia++, -1);
        while (ib < mb)
            add_step(p, &cap, -1, (int32_t)ib++);
        if (k < len) {
            assert(ia == ma && ib == mb);
            add_step(p, &cap, (int32_t)ia++, (int32_t)ib++);
        }
    }
    assert(ia == na && ib == nb);
    free(bk);
    free(sa);
    free(sb);
    free(tails);
    free(prev);
    free(chosen);
}

const struct diff_milestone *diff_step_ms(const struct diff *d, const struct diff_pair *p,
                                          const struct diff_step *s, int side)
{
    assert(side == DIFF_A || side == DIFF_B);
    if (s->ms[side] < 0)
        return NULL;
    const struct diff_gpu *g = &d->run[side].gpus[p->gpu[side]];
    assert((size_t)s->ms[side] < g->nms);
    return &g->ms[s->ms[side]];
}

bool diff_step_diverges(const struct diff *d, const struct diff_pair *p, const struct diff_step *s)
{
    const struct diff_milestone *a = diff_step_ms(d, p, s, DIFF_A);
    const struct diff_milestone *b = diff_step_ms(d, p, s, DIFF_B);
    if (!a || !b)
        return false;
    int64_t t = d->o->threshold;
    if (abs64(gm_sub(diff_ms_traced(b), diff_ms_traced(a))) > t)
        return true;
    for (int c = 0; c < GM_GPU_CATEGORIES; c++)
        if (abs64(gm_sub(b->live[c], a->live[c])) > t)
            return true;
    return a->measured && b->measured && abs64(gm_sub(b->free_bytes, a->free_bytes)) > t;
}

char *diff_ms_label(const struct diff *d, const struct diff_milestone *ms)
{
    char *name = ms_name((enum ms_kind)ms->kind, ms->occurrence,
                         ms->kind == MS_FAILED ? diff_string(d, ms->sub) : NULL);
    if (ms->kind != MS_MEASUREMENT || ms->tag == MS_TAG_NONE)
        return name;
    char *tagged = xasprintf("%s (%s)", name, ms_tag_key((enum ms_tag)ms->tag));
    free(name);
    return tagged;
}

/* One list of rows for every pair: each pair's steps in order, a row per
 * key, new keys placed after the pair's previous row (a linked list keeps
 * insertion O(1)), then numbered in list order. */
static void build_rows(struct diff *d)
{
    struct keymap ids = {0};
    uint32_t *next = NULL;
    size_t next_cap = 0;
    uint32_t head = GM_NONE;
    for (size_t pi = 0; pi < d->npairs; pi++) {
        struct diff_pair *p = &d->pairs[pi];
        uint32_t last = GM_NONE;
        for (size_t s = 0; s < p->nsteps; s++) {
            struct diff_step *st = &p->steps[s];
            const struct diff_milestone *ms = diff_step_ms(d, p, st, st->ms[0] >= 0 ? 0 : 1);
            uint64_t key = ms_key_of(ms);
            uint32_t id = keymap_get(&ids, key);
            if (id == GM_NONE) {
                id = (uint32_t)d->nrows;
                d->rows = xgrow(d->rows, &d->rows_cap, d->nrows + 1, sizeof(*d->rows));
                d->rows[d->nrows++] = (struct diff_row){.kind = ms->kind,
                                                        .tag = ms->tag,
                                                        .sub = ms->sub,
                                                        .occurrence = ms->occurrence,
                                                        .label = diff_ms_label(d, ms)};
                next = xgrow(next, &next_cap, d->nrows, sizeof(*next));
                if (last == GM_NONE) {
                    next[id] = head;
                    head = id;
                } else {
                    next[id] = next[last];
                    next[last] = id;
                }
                keymap_put(&ids, key, id);
            }
            st->row = id;
            last = id;
        }
    }
    /* Renumber in list order. */
    uint32_t *order = xcalloc(d->nrows ? d->nrows : 1, sizeof(*order));
    struct diff_row *rows = xcalloc(d->nrows ? d->nrows : 1, sizeof(*rows));
    size_t n = 0;
    for (uint32_t id = head; id != GM_NONE; id = next[id]) {
        assert(n < d->nrows);
        order[id] = (uint32_t)n;
        rows[n++] = d->rows[id];
    }
    assert(n == d->nrows);
    free(d->rows);
    d->rows = rows;
    d->rows_cap = d->nrows;
    for (size_t pi = 0; pi < d->npairs; pi++)
        for (size_t s = 0; s < d->pairs[pi].nsteps; s++)
            d->pairs[pi].steps[s].row = order[d->pairs[pi].steps[s].row];
    free(order);
    free(next);
    keymap_free(&ids);

    /* Presence, and where each pair first diverges. */
    d->first_div_row = -1;
    int64_t best = -1;
    for (size_t pi = 0; pi < d->npairs; pi++) {
        struct diff_pair *p = &d->pairs[pi];
        for (size_t s = 0; s < p->nsteps; s++) {
            const struct diff_step *st = &p->steps[s];
            struct diff_row *row = &d->rows[st->row];
            row->present[0] += st->ms[0] >= 0;
            row->present[1] += st->ms[1] >= 0;
            row->matched += st->ms[0] >= 0 && st->ms[1] >= 0;
            if (st->ms[0] < 0 || st->ms[1] < 0)
                d->differences |= 1u << DIFF_D_MILESTONES;
            if (!diff_step_diverges(d, p, st))
                continue;
            row->diverged++;
            if (p->first_div < 0)
                p->first_div = (int64_t)s;
        }
        if (p->first_div < 0)
            continue;
        const struct diff_step *st = &p->steps[p->first_div];
        const struct diff_milestone *a = diff_step_ms(d, p, st, DIFF_A);
        const struct diff_milestone *b = diff_step_ms(d, p, st, DIFF_B);
        int64_t size = abs64(gm_sub(diff_ms_traced(b), diff_ms_traced(a)));
        if (a->measured && b->measured && abs64(gm_sub(b->free_bytes, a->free_bytes)) > size)
            size = abs64(gm_sub(b->free_bytes, a->free_bytes));
        if (d->first_div_row < 0 || (int64_t)st->row < d->first_div_row ||
            ((int64_t)st->row == d->first_div_row && size > best)) {
            d->first_div_row = (int64_t)st->row;
            d->first_div_pair = (uint32_t)pi;
            best = size;
        }
    }
    if (d->first_div_row >= 0)
        d->differences |= 1u << DIFF_D_MEMORY;
}

/* ---- allocations by phase ---- */

/* Model ids to diff-wide string ids, filled on first use. */
struct id_map {
    uint32_t *apis, *modules;
};

static void id_map_init(struct id_map *map, const struct gm_model *m)
{
    map->apis = xcalloc(m->napis ? m->napis : 1, sizeof(*map->apis));
    map->modules = xcalloc(m->nmodules ? m->nmodules : 1, sizeof(*map->modules));
    for (size_t i = 0; i < m->napis; i++)
        map->apis[i] = GM_NONE;
    for (size_t i = 0; i < m->nmodules; i++)
        map->modules[i] = GM_NONE;
}

static uint32_t map_api(struct diff *d, struct id_map *map, const struct gm_model *m, uint32_t api)
{
    if (api >= m->napis)
        return string_id(d, "");
    if (map->apis[api] == GM_NONE)
        map->apis[api] = string_id(d, m->apis[api]);
    return map->apis[api];
}

static uint32_t map_module(struct diff *d, struct id_map *map, const struct gm_model *m,
                           uint32_t module)
{
    if (module >= m->nmodules)
        return string_id(d, "");
    if (map->modules[module] == GM_NONE)
        map->modules[module] = string_id(d, m->modules[module]);
    return map->modules[module];
}

static void id_map_free(struct id_map *map)
{
    free(map->apis);
    free(map->modules);
}

struct alloc_entry {
    int64_t phase;
    uint32_t api, module, site;
    int64_t size;
    uint8_t category;
    uint8_t side;
    uint32_t pair;
    int64_t count[2];
};

static int compare_alloc_keys(const struct alloc_entry *a, const struct alloc_entry *b)
{
    int c = cmp64(a->phase, b->phase);
    if (!c)
        c = cmp64(a->api, b->api);
    if (!c)
        c = cmp64(a->module, b->module);
    if (!c)
        c = cmp64(a->site, b->site);
    if (!c)
        c = cmp64(a->size, b->size);
    if (!c)
        c = cmp64(a->category, b->category);
    return c;
}

static int compare_entries(const void *x, const void *y)
{
    const struct alloc_entry *a = x, *b = y;
    int c = compare_alloc_keys(a, b);
    if (!c)
        c = cmp64(a->pair, b->pair);
    if (!c)
        c = cmp64(a->side, b->side);
    return c;
}

/* The position of a matched milestone on one side, for phases. */
struct boundary {
    uint64_t pos;
    uint8_t order;
    uint32_t row;
};

/* The row of the last boundary at or before an event at pos (order 1). */
static int64_t phase_of(const struct boundary *b, size_t n, uint64_t pos)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b[mid].pos < pos || (b[mid].pos == pos && b[mid].order <= 1))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? -1 : (int64_t)b[lo - 1].row;
}

/*
 * The call site of an allocation, a diff-wide string id (stacks.h: the
 * Python site where the trace has Python frames, else the native one; ""
 * for traces without stacks, format 3 and older), so that the groups split
 * by who made them. A process's stacks are loaded the first time one of
 * its allocations is grouped; a damaged stack table reads as no stacks.
 */
static uint32_t alloc_site(struct diff *d, int side, uint32_t proc, const struct gm_alloc *a)
{
    struct diff_run *r = &d->run[side];
    const struct gm_model *m = &r->m;
    const struct gm_process *p = &m->procs[proc];
    assert(r->stacks_loaded && r->stacks_loaded[proc] && "load_stacks runs first");
    if (!d->sites_compared)
        return string_id(d, "");
    enum site_kind kind;
    char *site = stacks_call_site(&r->stacks[proc], a->seq, gm_api_name(m, p->events[a->event].api),
                                  &kind, NULL);
    uint32_t id = string_id(d, site ? site : "");
    free(site);
    return id;
}

/* The allocations of one side of a pair, one entry each. */
static void pair_side_entries(struct diff *d, uint32_t pi, int side, struct id_map *map,
                              struct alloc_entry **entries, size_t *n, size_t *cap)
{
    const struct diff_pair *p = &d->pairs[pi];
    const struct diff_run *r = &d->run[side];
    const struct gm_model *m = &r->m;
    const struct diff_gpu *g = &r->gpus[p->gpu[side]];
    struct boundary *b = xcalloc(p->nsteps ? p->nsteps : 1, sizeof(*b));
    size_t nb = 0;
    for (size_t s = 0; s < p->nsteps; s++) {
        const struct diff_step *st = &p->steps[s];
        if (st->ms[0] < 0 || st->ms[1] < 0)
            continue;
        const struct diff_milestone *ms = diff_step_ms(d, p, st, side);
        b[nb++] = (struct boundary){ms->pos, ms->order, st->row};
    }
    const struct gm_gpu *gpu = &m->gpus[g->gpu];
    for (size_t k = 0; k < gpu->nprocs; k++) {
        const struct gm_process *q = &m->procs[gpu->procs[k]];
        for (size_t i = 0; i < q->nallocs; i++) {
            const struct gm_alloc *a = &q->allocs[i];
            if (a->gpu != g->gpu || a->category >= GM_CATEGORIES)
                continue;
            const struct gm_event *e = &q->events[a->event];
            *entries = xgrow(*entries, cap, *n + 1, sizeof(**entries));
            (*entries)[(*n)++] = (struct alloc_entry){
                .phase = phase_of(b, nb, e->pos),
                .api = map_api(d, map, m, e->api),
                .module = map_module(d, map, m, a->module),
                .site = alloc_site(d, side, gpu->procs[k], a),
                .size = a->size,
                .category = a->category,
                .side = (uint8_t)side,
                .pair = pi,
                .count = {side == DIFF_A, side == DIFF_B},
            };
        }
    }
    free(b);
}

/* The row of the first step after `row` (-1: from the start) that both
 * sides of the pair have; -1 when there is none. */
static int64_t next_common_row(const struct diff_pair *p, int64_t row)
{
    size_t s = 0;
    if (row >= 0) {
        while (s < p->nsteps && !((int64_t)p->steps[s].row == row && p->steps[s].ms[0] >= 0 &&
                                  p->steps[s].ms[1] >= 0))
            s++;
        s++;
    }
    for (; s < p->nsteps; s++)
        if (p->steps[s].ms[0] >= 0 && p->steps[s].ms[1] >= 0)
            return (int64_t)p->steps[s].row;
    return -1;
}

static int compare_alloc_rows(const void *x, const void *y, void *arg)
{
    const struct diff *d = arg;
    const struct diff_alloc_row *a = x, *b = y;
    bool ga = a->category < GM_GPU_CATEGORIES, gb = b->category < GM_GPU_CATEGORIES;
    if (ga != gb)
        return ga ? -1 : 1;
    int64_t ia = abs64(gm_sub(a->bytes[1], a->bytes[0]));
    int64_t ib = abs64(gm_sub(b->bytes[1], b->bytes[0]));
    if (ia != ib)
        return ia > ib ? -1 : 1;
    int c = cmp64(a->phase, b->phase);
    if (!c)
        c = strcmp(diff_string(d, a->api), diff_string(d, b->api));
    if (!c)
        c = strcmp(diff_string(d, a->module), diff_string(d, b->module));
    if (!c)
        c = strcmp(diff_string(d, a->site), diff_string(d, b->site));
    if (!c)
        c = cmp64(a->size, b->size);
    if (!c)
        c = cmp64(a->category, b->category);
    return c;
}

static void compare_allocations(struct diff *d)
{
    struct id_map maps[2];
    id_map_init(&maps[0], &d->run[0].m);
    id_map_init(&maps[1], &d->run[1].m);
    /* Per pair: one entry per allocation, reduced to counts per key. */
    struct alloc_entry *groups = NULL;
    size_t ngroups = 0, groups_cap = 0;
    struct alloc_entry *entries = NULL;
    size_t entries_cap = 0;
    for (uint32_t pi = 0; pi < d->npairs; pi++) {
        size_t n = 0;
        for (int side = 0; side < 2; side++)
            pair_side_entries(d, pi, side, &maps[side], &entries, &n, &entries_cap);
        if (n > 1)
            qsort(entries, n, sizeof(*entries), compare_entries);
        for (size_t i = 0; i < n;) {
            struct alloc_entry g = entries[i];
            g.count[0] = g.count[1] = 0;
            size_t k = i;
            for (; k < n && compare_alloc_keys(&entries[k], &entries[i]) == 0; k++)
                g.count[entries[k].side]++;
            if (g.count[0] != g.count[1]) {
                groups = xgrow(groups, &groups_cap, ngroups + 1, sizeof(*groups));
                groups[ngroups++] = g;
            }
            i = k;
        }
    }
    free(entries);
    id_map_free(&maps[0]);
    id_map_free(&maps[1]);
    if (ngroups > 1)
        qsort(groups, ngroups, sizeof(*groups), compare_entries);
    /* Over pairs: one row per key; a pair without the key changed nothing. */
    size_t cap = 0;
    for (size_t i = 0; i < ngroups;) {
        size_t k = i;
        while (k < ngroups && compare_alloc_keys(&groups[k], &groups[i]) == 0)
            k++;
        d->allocs = xgrow(d->allocs, &cap, d->nallocs + 1, sizeof(*d->allocs));
        struct diff_alloc_row *row = &d->allocs[d->nallocs++];
        *row = (struct diff_alloc_row){.phase = groups[i].phase,
                                       .phase_end = -1,
                                       .api = groups[i].api,
                                       .module = groups[i].module,
                                       .site = groups[i].site,
                                       .size = groups[i].size,
                                       .category = groups[i].category};
        row->per_pair = xcalloc(k - i, sizeof(*row->per_pair));
        bool first = true;
        for (size_t j = i; j < k; j++) {
            int64_t delta = gm_sub(groups[j].count[1], groups[j].count[0]);
            for (int s = 0; s < 2; s++) {
                row->count[s] = gm_add(row->count[s], groups[j].count[s]);
                row->bytes[s] = gm_add(row->bytes[s], sat_mul(groups[j].count[s], row->size));
            }
            if (first || delta < row->dmin)
                row->dmin = delta;
            if (first || delta > row->dmax)
                row->dmax = delta;
            first = false;
            row->per_pair[row->nper++] =
                (struct diff_alloc_pair){groups[j].pair, {groups[j].count[0], groups[j].count[1]}};
        }
        row->changed = k - i;
        if (row->changed < d->npairs) {
            if (row->dmin > 0)
                row->dmin = 0;
            if (row->dmax < 0)
                row->dmax = 0;
        }
        /* The phase ends at the next milestone both runs share, when every
         * pair that differs here agrees on it. */
        for (size_t j = 0; j < row->nper; j++) {
            int64_t end = next_common_row(&d->pairs[row->per_pair[j].pair], row->phase);
            if (j == 0)
                row->phase_end = end;
            else if (end != row->phase_end)
                row->phase_end = -1;
        }
        i = k;
    }
    free(groups);
    if (d->nallocs > 1)
        qsort_r(d->allocs, d->nallocs, sizeof(*d->allocs), compare_alloc_rows, d);
    if (d->nallocs)
        d->differences |= 1u << DIFF_D_ALLOCATIONS;
}

/* ---- IPC lineage ---- */

/* "rank 3" or "pid 4242" */
static char *proc_who(const struct gm_process *p)
{
    return p->has_rank ? xasprintf("rank %" PRId64, p->rank) : xasprintf("pid %" PRId64, p->pid);
}

/* A sorted id list as ranges: "1-3, 5" (ids < 0 are -pid - 1: "pid 7"). */
static char *ranges_text(const int64_t *ids, size_t n)
{
    char *out = xstrdup("");
    for (size_t i = 0; i < n;) {
        size_t k = i;
        while (ids[i] >= 0 && k + 1 < n && ids[k + 1] == ids[k] + 1)
            k++;
        char *part;
        if (ids[i] < 0)
            part = xasprintf("pid %" PRId64, -(ids[i] + 1));
        else if (k > i)
            part = xasprintf("%" PRId64 "-%" PRId64, ids[i], ids[k]);
        else
            part = xasprintf("%" PRId64, ids[i]);
        char *joined = xasprintf("%s%s%s", out, *out ? ", " : "", part);
        free(out);
        free(part);
        out = joined;
        i = k + 1;
    }
    return out;
}

static int compare_i64(const void *x, const void *y)
{
    return cmp64(*(const int64_t *)x, *(const int64_t *)y);
}

/* Distinct ids, sorted, counted: "ranks 1-3" / "rank 2" / "pid 7, pid 9". */
static char *ids_text(int64_t *ids, size_t n, size_t *distinct)
{
    if (n > 1)
        qsort(ids, n, sizeof(*ids), compare_i64);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || ids[k - 1] != ids[i])
            ids[k++] = ids[i];
    *distinct = k;
    char *list = ranges_text(ids, k);
    bool ranks = k > 0 && ids[0] >= 0;
    char *out = xasprintf("%s%s", ranks ? (k > 1 ? "ranks " : "rank ") : "", list);
    free(list);
    return out;
}

static int64_t proc_id(const struct gm_process *p)
{
    return p->has_rank ? p->rank : -(p->pid > 0 ? p->pid : 0) - 1;
}

static int compare_links(const void *x, const void *y)
{
    const struct gm_ipc_link *a = x, *b = y;
    int c = cmp64(a->exporter_proc, b->exporter_proc);
    if (!c)
        c = cmp64(a->exporter_alloc, b->exporter_alloc);
    if (!c)
        c = cmp64(a->opener_proc, b->opener_proc);
    if (!c)
        c = cmp64(a->opener_alloc, b->opener_alloc);
    return c;
}

static int compare_buffers(const void *x, const void *y, void *arg)
{
    const struct gm_model *m = arg;
    const struct diff_ipc_buffer *a = x, *b = y;
    const struct gm_process *p = &m->procs[a->proc], *q = &m->procs[b->proc];
    if (p->has_rank != q->has_rank)
        return p->has_rank ? -1 : 1;
    int c = p->has_rank ? cmp64(p->rank, q->rank) : 0;
    if (!c)
        c = cmp64(p->allocs[a->alloc].seq, q->allocs[b->alloc].seq);
    if (!c)
        c = cmp64(a->proc, b->proc);
    return c;
}

static void build_ipc(struct diff *d, struct diff_run *r)
{
    const struct gm_model *m = &r->m;
    struct diff_ipc *ipc = &r->ipc;
    struct id_map map;
    id_map_init(&map, m);
    struct gm_ipc_link *links = xcalloc(m->nipc_links ? m->nipc_links : 1, sizeof(*links));
    if (m->nipc_links)
        memcpy(links, m->ipc_links, m->nipc_links * sizeof(*links));
    if (m->nipc_links > 1)
        qsort(links, m->nipc_links, sizeof(*links), compare_links);
    size_t cap = 0;
    for (size_t pi = 0; pi < m->nprocs; pi++) {
        const struct gm_process *p = &m->procs[pi];
        for (size_t i = 0; i < p->nallocs; i++) {
            const struct gm_alloc *a = &p->allocs[i];
            if (a->kind == GM_KIND_IPC)
                ipc->opens++;
            if (!a->exported)
                continue;
            ipc->buffers = xgrow(ipc->buffers, &cap, ipc->nbuffers + 1, sizeof(*ipc->buffers));
            ipc->buffers[ipc->nbuffers++] =
                (struct diff_ipc_buffer){.proc = (uint32_t)pi,
                                         .alloc = (uint32_t)i,
                                         .api = map_api(d, &map, m, p->events[a->event].api),
                                         .module = map_module(d, &map, m, a->module),
                                         .size = a->size};
        }
    }
    ipc->foreign_opens = gm_sub(ipc->opens, (int64_t)m->nipc_links);
    if (ipc->nbuffers > 1)
        qsort_r(ipc->buffers, ipc->nbuffers, sizeof(*ipc->buffers), compare_buffers, (void *)m);
    for (size_t bi = 0; bi < ipc->nbuffers; bi++) {
        struct diff_ipc_buffer *b = &ipc->buffers[bi];
        const struct gm_process *p = &m->procs[b->proc];
        b->exporter = proc_who(p);
        struct gm_ipc_link key = {(uint32_t)b->proc, (uint32_t)b->alloc, 0, 0};
        size_t lo = 0, hi = m->nipc_links;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (compare_links(&links[mid], &key) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t hi_link = lo;
        while (hi_link < m->nipc_links && links[hi_link].exporter_proc == b->proc &&
               links[hi_link].exporter_alloc == b->alloc)
            hi_link++;
        size_t n = 0;
        b->opener_ranks = xcalloc(hi_link - lo, sizeof(*b->opener_ranks));
        for (size_t k = lo; k < hi_link; k++)
            b->opener_ranks[n++] = proc_id(&m->procs[links[k].opener_proc]);
        size_t distinct;
        char *list = ids_text(b->opener_ranks, n, &distinct);
        /* "every other rank": each rank of the exporter's job but itself */
        bool every =
            p->has_rank && p->world_nranks > 1 && distinct == (size_t)(p->world_nranks - 1);
        for (size_t k = 0; every && k < distinct; k++)
            every = b->opener_ranks[k] >= 0 && b->opener_ranks[k] < p->world_nranks &&
                    b->opener_ranks[k] != p->rank;
        if (n == 0)
            b->openers = xstrdup("nobody");
        else if (every)
            b->openers = xasprintf("every other rank (%zu)", distinct);
        else
            b->openers = xstrdup(list);
        b->nopeners = (int64_t)distinct;
        b->opens = (int64_t)n;
        free(list);
    }
    /* Text groups: buffers alike but for their exporter. */
    size_t gcap = 0;
    bool *done = xcalloc(ipc->nbuffers, sizeof(*done));
    int64_t *who = xcalloc(ipc->nbuffers, sizeof(*who));
    for (size_t bi = 0; bi < ipc->nbuffers; bi++) {
        if (done[bi])
            continue;
        const struct diff_ipc_buffer *b = &ipc->buffers[bi];
        size_t nwho = 0;
        struct diff_ipc_group g = {
            .api = b->api, .module = b->module, .size = b->size, .openers = b->openers};
        for (size_t k = bi; k < ipc->nbuffers; k++) {
            const struct diff_ipc_buffer *c = &ipc->buffers[k];
            if (done[k] || c->api != b->api || c->module != b->module || c->size != b->size ||
                strcmp(c->openers, b->openers) != 0)
                continue;
            done[k] = true;
            g.buffers++;
            g.opens = gm_add(g.opens, c->opens);
            who[nwho++] = proc_id(&m->procs[c->proc]);
        }
        size_t distinct;
        g.exporters = ids_text(who, nwho, &distinct);
        ipc->groups = xgrow(ipc->groups, &gcap, ipc->ngroups + 1, sizeof(*ipc->groups));
        ipc->groups[ipc->ngroups++] = g;
    }
    free(done);
    free(who);
    free(links);
    id_map_free(&map);
}

static bool ipc_equal(const struct diff_ipc *a, const struct diff_ipc *b)
{
    if (a->ngroups != b->ngroups || a->opens != b->opens || a->foreign_opens != b->foreign_opens)
        return false;
    for (size_t i = 0; i < a->ngroups; i++) {
        const struct diff_ipc_group *x = &a->groups[i], *y = &b->groups[i];
        if (x->api != y->api || x->module != y->module || x->size != y->size ||
            x->buffers != y->buffers || x->opens != y->opens ||
            strcmp(x->openers, y->openers) != 0 || strcmp(x->exporters, y->exporters) != 0)
            return false;
    }
    return true;
}

/* ---- communicators and collectives ---- */

static int compare_comms(const void *x, const void *y)
{
    const struct diff_comm *a = x, *b = y;
    int c = cmp64(a->ordinal, b->ordinal);
    if (!c)
        c = cmp64(a->nranks, b->nranks);
    if (!c)
        c = cmp64(a->min_rank, b->min_rank);
    if (!c)
        c = a->hash < b->hash ? -1 : a->hash > b->hash;
    return c;
}

static int compare_ops(const void *x, const void *y, void *arg)
{
    const struct diff *d = arg;
    return strcmp(diff_string(d, ((const struct diff_op *)x)->op),
                  diff_string(d, ((const struct diff_op *)y)->op));
}

static struct diff_op *comm_op(struct diff_comm *c, size_t *cap, uint32_t op)
{
    for (size_t i = 0; i < c->nops; i++)
        if (c->ops[i].op == op)
            return &c->ops[i];
    c->ops = xgrow(c->ops, cap, c->nops + 1, sizeof(*c->ops));
    c->ops[c->nops] = (struct diff_op){.op = op, .rank_min = INT64_MAX};
    return &c->ops[c->nops++];
}

static int compare_comm_seq(const void *key, const void *elem)
{
    return cmp64(*(const int64_t *)key, ((const struct gm_comm *)elem)->seq);
}

/* Joins a run's communicators, attributes NCCL's memory and counts the
 * collectives. Returns -1 after printing the error of a damaged trace. */
static int build_comms(struct diff *d, struct diff_run *r)
{
    const struct gm_model *m = &r->m;
    struct keymap by_hash = {0};
    size_t cap = 0;
    uint32_t **comm_of = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*comm_of));
    int64_t **bytes_of = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*bytes_of));
    for (size_t pi = 0; pi < m->nprocs; pi++) {
        const struct gm_process *p = &m->procs[pi];
        comm_of[pi] = xcalloc(p->ncomms ? p->ncomms : 1, sizeof(**comm_of));
        bytes_of[pi] = xcalloc(p->ncomms ? p->ncomms : 1, sizeof(**bytes_of));
        int64_t ordinal = 0;
        for (size_t c = 0; c < p->ncomms; c++) {
            const struct gm_comm *cm = &p->comms[c];
            comm_of[pi][c] = GM_NONE;
            if (cm->result != 0 || cm->nranks <= 0)
                continue;
            ordinal++;
            uint32_t id = keymap_get(&by_hash, cm->hash);
            if (id == GM_NONE) {
                id = (uint32_t)r->ncomms;
                r->comms = xgrow(r->comms, &cap, r->ncomms + 1, sizeof(*r->comms));
                r->comms[r->ncomms++] = (struct diff_comm){.hash = cm->hash,
                                                           .ordinal = ordinal,
                                                           .nranks = cm->nranks,
                                                           .nccl_min = INT64_MAX,
                                                           .min_rank = cm->rank,
                                                           .match = GM_NONE};
                keymap_put(&by_hash, cm->hash, id);
            }
            struct diff_comm *dc = &r->comms[id];
            if (ordinal < dc->ordinal)
                dc->ordinal = ordinal;
            if (cm->rank < dc->min_rank)
                dc->min_rank = cm->rank;
            if (cm->nranks > dc->nranks)
                dc->nranks = cm->nranks;
            dc->members++;
            comm_of[pi][c] = id;
        }
        /* NCCL memory goes to the communicator initialised last before it. */
        size_t c = 0;
        ssize_t current = -1;
        for (size_t i = 0; i < p->nallocs; i++) {
            const struct gm_alloc *a = &p->allocs[i];
            for (; c < p->ncomms && p->comms[c].seq < a->seq; c++)
                if (comm_of[pi][c] != GM_NONE)
                    current = (ssize_t)c;
            if (a->category != GM_CAT_NCCL)
                continue;
            if (current < 0)
                r->nccl_outside_bytes = gm_add(r->nccl_outside_bytes, a->size);
            else
                bytes_of[pi][current] = gm_add(bytes_of[pi][current], a->size);
        }
    }
    keymap_free(&by_hash);
    for (size_t pi = 0; pi < m->nprocs; pi++)
        for (size_t c = 0; c < m->procs[pi].ncomms; c++) {
            if (comm_of[pi][c] == GM_NONE)
                continue;
            struct diff_comm *dc = &r->comms[comm_of[pi][c]];
            dc->nccl_bytes = gm_add(dc->nccl_bytes, bytes_of[pi][c]);
            if (bytes_of[pi][c] < dc->nccl_min)
                dc->nccl_min = bytes_of[pi][c];
            if (bytes_of[pi][c] > dc->nccl_max)
                dc->nccl_max = bytes_of[pi][c];
        }

    /* Collectives, per trace: one pass of SQLite grouped by communicator and op. */
    size_t *ops_cap = xcalloc(r->ncomms ? r->ncomms : 1, sizeof(*ops_cap));
    int rc = 0;
    for (size_t pi = 0; pi < m->nprocs && rc == 0; pi++) {
        const struct gm_process *p = &m->procs[pi];
        struct trace *t = (struct trace *)p->trace;
        /* The NCCL views are checked as `cutrace summary` checks them: a
         * trace from before NCCL was recorded has none (fine), one with
         * damaged views is refused with the same line. */
        struct nccl_info info;
        if (nccl_load(t, false, false, &info) != 0) {
            trace_report_error(t);
            rc = -1;
            break;
        }
        bool present = info.present;
        nccl_info_free(&info);
        if (!present)
            continue;
        r->nccl_recorded = true;
        sqlite3_stmt *stmt = trace_query(t,
                                         "SELECT comm_id, op, count(*), " TRACE_SUM_FUNCTION
                                         "(bytes), sum(captured = 1), sum(result <> 0)"
                                         " FROM collectives GROUP BY comm_id, op",
                                         "");
        if (!stmt) {
            trace_report_error(t);
            rc = -1;
            break;
        }
        int step;
        while ((step = trace_step(t, stmt)) == 1) {
            int64_t calls = col_int(stmt, 2, 0);
            int64_t comm_id = col_int(stmt, 0, -1);
            const struct gm_comm *cm =
                col_is_null(stmt, 0) || !p->ncomms
                    ? NULL
                    : bsearch(&comm_id, p->comms, p->ncomms, sizeof(*p->comms), compare_comm_seq);
            uint32_t id = cm ? comm_of[pi][cm - p->comms] : GM_NONE;
            if (id == GM_NONE) {
                r->unattributed_calls = gm_add(r->unattributed_calls, calls);
                continue;
            }
            struct diff_comm *dc = &r->comms[id];
            const char *op = (const char *)sqlite3_column_text(stmt, 1);
            struct diff_op *o = comm_op(dc, &ops_cap[id], string_id(d, op ? op : "?"));
            o->calls = gm_add(o->calls, calls);
            o->bytes = gm_add(o->bytes, col_int(stmt, 3, 0));
            o->captured = gm_add(o->captured, col_int(stmt, 4, 0));
            o->failed = gm_add(o->failed, col_int(stmt, 5, 0));
            o->ranks++;
            if (calls < o->rank_min)
                o->rank_min = calls;
            if (calls > o->rank_max)
                o->rank_max = calls;
        }
        sqlite3_finalize(stmt);
        if (step < 0)
            rc = -1;
        if (rc != 0)
            trace_report_error(t);
    }
    free(ops_cap);
    for (size_t pi = 0; pi < m->nprocs; pi++) {
        free(comm_of[pi]);
        free(bytes_of[pi]);
    }
    free(comm_of);
    free(bytes_of);
    for (size_t i = 0; i < r->ncomms; i++) {
        struct diff_comm *dc = &r->comms[i];
        if (dc->nccl_min == INT64_MAX)
            dc->nccl_min = 0;
        for (size_t k = 0; k < dc->nops; k++)
            if ((size_t)dc->ops[k].ranks < dc->members || dc->ops[k].rank_min == INT64_MAX)
                dc->ops[k].rank_min = 0;
        if (dc->nops > 1)
            qsort_r(dc->ops, dc->nops, sizeof(*dc->ops), compare_ops, d);
    }
    if (r->ncomms > 1)
        qsort(r->comms, r->ncomms, sizeof(*r->comms), compare_comms);
    return rc;
}

static bool ops_equal(const struct diff_comm *a, const struct diff_comm *b)
{
    if (a->nops != b->nops)
        return false;
    for (size_t i = 0; i < a->nops; i++) {
        const struct diff_op *x = &a->ops[i], *y = &b->ops[i];
        if (x->op != y->op || x->calls != y->calls || x->bytes != y->bytes ||
            x->captured != y->captured || x->failed != y->failed)
            return false;
    }
    return true;
}

/* Communicators of A and B with the same ordinal, in order. */
static void match_comms(struct diff *d)
{
    struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    for (size_t i = 0; i < A->ncomms; i++)
        for (size_t k = 0; k < B->ncomms; k++)
            if (B->comms[k].match == GM_NONE && B->comms[k].ordinal == A->comms[i].ordinal) {
                A->comms[i].match = (uint32_t)k;
                B->comms[k].match = (uint32_t)i;
                break;
            }
    bool comms_differ = A->ncomms != B->ncomms || A->nccl_outside_bytes != B->nccl_outside_bytes;
    bool calls_differ = A->unattributed_calls != B->unattributed_calls;
    for (size_t i = 0; i < A->ncomms; i++) {
        const struct diff_comm *a = &A->comms[i];
        if (a->match == GM_NONE) {
            comms_differ = true;
            calls_differ |= a->nops > 0;
            continue;
        }
        const struct diff_comm *b = &B->comms[a->match];
        comms_differ |=
            a->nranks != b->nranks || a->members != b->members || a->nccl_bytes != b->nccl_bytes;
        calls_differ |= !ops_equal(a, b);
    }
    for (size_t k = 0; k < B->ncomms; k++)
        if (B->comms[k].match == GM_NONE)
            calls_differ |= B->comms[k].nops > 0;
    if (comms_differ)
        d->differences |= 1u << DIFF_D_COMMUNICATORS;
    if (calls_differ)
        d->differences |= 1u << DIFF_D_COLLECTIVES;
}

/* ---- configuration ---- */

static int compare_counts(const void *x, const void *y)
{
    const struct diff_count *a = x, *b = y;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return strcmp(a->text, b->text);
}

static void build_cmdlines(struct diff_run *r)
{
    const struct gm_model *m = &r->m;
    size_t cap = 0;
    for (size_t pi = 0; pi < m->nprocs; pi++) {
        const char *text = m->procs[pi].cmdline;
        size_t i = 0;
        while (i < r->ncmdlines && strcmp(r->cmdlines[i].text, text) != 0)
            i++;
        if (i == r->ncmdlines) {
            r->cmdlines = xgrow(r->cmdlines, &cap, r->ncmdlines + 1, sizeof(*r->cmdlines));
            r->cmdlines[r->ncmdlines++] = (struct diff_count){xstrdup(text), 0};
        }
        r->cmdlines[i].count++;
    }
    if (r->ncmdlines > 1)
        qsort(r->cmdlines, r->ncmdlines, sizeof(*r->cmdlines), compare_counts);
}

struct env_pair {
    char *name, *value;
};

static int compare_env_pairs(const void *x, const void *y)
{
    const struct env_pair *a = x, *b = y;
    int c = strcmp(a->name, b->name);
    return c ? c : strcmp(a->value, b->value);
}

/*
 * The recorded environment of a run: per variable its distinct values over
 * the processes that recorded any. The tracer's own CUTRACE_* variables
 * are left out: they name this run's trace and scratch directories.
 * Returns -1 after printing the error of a damaged trace.
 */
static int build_env(struct diff_run *r)
{
    const struct gm_model *m = &r->m;
    struct env_pair *all = NULL;
    size_t n = 0, cap = 0, with_env = 0;
    int rc = 0;
    for (size_t pi = 0; pi < m->nprocs && rc == 0; pi++) {
        struct trace *t = (struct trace *)m->procs[pi].trace;
        sqlite3_stmt *stmt = trace_query(t, "SELECT name, value FROM env ORDER BY name", "");
        if (!stmt) {
            rc = -1;
        } else {
            size_t before = n;
            int step;
            while ((step = trace_step(t, stmt)) == 1) {
                char *name = col_text(stmt, 0);
                if (!name || strncmp(name, "CUTRACE_", 8) == 0) {
                    free(name);
                    continue;
                }
                char *value = col_text(stmt, 1);
                all = xgrow(all, &cap, n + 1, sizeof(*all));
                all[n++] = (struct env_pair){name, value ? value : xstrdup("")};
            }
            sqlite3_finalize(stmt);
            with_env += n > before;
            if (step < 0)
                rc = -1;
        }
        if (rc != 0)
            trace_report_error(t);
    }
    if (n > 1)
        qsort(all, n, sizeof(*all), compare_env_pairs);
    size_t ecap = 0;
    for (size_t i = 0; i < n;) {
        size_t k = i, procs = 0;
        char *value = NULL;
        for (; k < n && strcmp(all[k].name, all[i].name) == 0; k++) {
            procs++;
            if (k > i && strcmp(all[k].value, all[k - 1].value) == 0)
                continue;
            char *joined =
                value ? xasprintf("%s | %s", value, all[k].value) : xstrdup(all[k].value);
            free(value);
            value = joined;
        }
        if (procs < with_env) {
            char *joined = xasprintf("%s | (unset)", value);
            free(value);
            value = joined;
        }
        r->env = xgrow(r->env, &ecap, r->nenv + 1, sizeof(*r->env));
        r->env[r->nenv++] = (struct diff_env){xstrdup(all[i].name), value};
        i = k;
    }
    for (size_t i = 0; i < n; i++) {
        free(all[i].name);
        free(all[i].value);
    }
    free(all);
    return rc;
}

/* A command line's words, split at blanks outside quotes (quotes kept);
 * an option and the value after it are one word ("--tp 4"), so that a
 * changed value reads as the option that changed. */
static char **split_words(const char *text, size_t *count)
{
    char **words = NULL;
    size_t n = 0, cap = 0;
    const char *p = text;
    while (*p && n < MAX_CMD_WORDS) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *start = p;
        char quote = 0;
        for (; *p && (quote || (*p != ' ' && *p != '\t')); p++) {
            if (quote && *p == quote)
                quote = 0;
            else if (!quote && (*p == '\'' || *p == '"'))
                quote = *p;
        }
        words = xgrow(words, &cap, n + 1, sizeof(*words));
        words[n++] = xstrndup(start, (size_t)(p - start));
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool option = words[i][0] == '-' && words[i][1] && !strchr(words[i], '=');
        if (option && i + 1 < n && words[i + 1][0] != '-') {
            char *joined = xasprintf("%s %s", words[i], words[i + 1]);
            free(words[i]);
            free(words[i + 1]);
            words[k++] = joined;
            i++;
        } else {
            words[k++] = words[i];
        }
    }
    *count = k;
    return words;
}

static void free_words(char **words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(words[i]);
    free(words);
}

/* The words of B's command line that A's lacks and back, by LCS. */
static void diff_words(struct diff *d, const char *a_text, const char *b_text)
{
    size_t na, nb;
    char **a = split_words(a_text, &na), **b = split_words(b_text, &nb);
    /* lcs[i][j]: LCS of a[i..] and b[j..] */
    size_t w = nb + 1;
    uint16_t *lcs = xcalloc((na + 1) * w, sizeof(*lcs));
    for (size_t i = na; i-- > 0;)
        for (size_t j = nb; j-- > 0;)
            lcs[i * w + j] = strcmp(a[i], b[j]) == 0
                                 ? (uint16_t)(lcs[(i + 1) * w + j + 1] + 1)
                                 : (lcs[(i + 1) * w + j] > lcs[i * w + j + 1] ? lcs[(i + 1) * w + j]
                                                                              : lcs[i * w + j + 1]);
    size_t i = 0, j = 0, acap = 0, rcap = 0;
    while (i < na || j < nb) {
        if (i < na && j < nb && strcmp(a[i], b[j]) == 0) {
            i++;
            j++;
        } else if (j < nb && (i == na || lcs[i * w + j + 1] >= lcs[(i + 1) * w + j])) {
            d->cmd_added = xgrow(d->cmd_added, &acap, d->ncmd_added + 1, sizeof(char *));
            d->cmd_added[d->ncmd_added++] = xstrdup(b[j++]);
        } else {
            d->cmd_removed = xgrow(d->cmd_removed, &rcap, d->ncmd_removed + 1, sizeof(char *));
            d->cmd_removed[d->ncmd_removed++] = xstrdup(a[i++]);
        }
    }
    free(lcs);
    free_words(a, na);
    free_words(b, nb);
}

static void compare_config(struct diff *d)
{
    const struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    bool same = A->ncmdlines == B->ncmdlines;
    for (size_t i = 0; same && i < A->ncmdlines; i++) {
        bool found = false;
        for (size_t k = 0; k < B->ncmdlines && !found; k++)
            found = strcmp(A->cmdlines[i].text, B->cmdlines[k].text) == 0;
        same = found;
    }
    if (!same) {
        d->differences |= 1u << DIFF_D_CMDLINE;
        diff_words(d, A->ncmdlines ? A->cmdlines[0].text : "",
                   B->ncmdlines ? B->cmdlines[0].text : "");
    }
    size_t i = 0, k = 0, cap = 0;
    while (i < A->nenv || k < B->nenv) {
        int c = i == A->nenv ? 1 : k == B->nenv ? -1 : strcmp(A->env[i].name, B->env[k].name);
        const struct diff_env *a = c <= 0 ? &A->env[i] : NULL, *b = c >= 0 ? &B->env[k] : NULL;
        i += c <= 0;
        k += c >= 0;
        d->env_compared++;
        if (a && b && strcmp(a->value, b->value) == 0)
            continue;
        d->env_changes = xgrow(d->env_changes, &cap, d->nenv_changes + 1, sizeof(*d->env_changes));
        d->env_changes[d->nenv_changes++] = (struct diff_env_change){
            a ? a->name : b->name, {a ? a->value : NULL, b ? b->value : NULL}};
    }
    if (d->nenv_changes)
        d->differences |= 1u << DIFF_D_ENV;
}

/* ---- budget ---- */

static int run_budget(struct diff *d, struct diff_run *r)
{
    r->budget_options = d->o->budget_options;
    r->budget_options.path = r->path;
    r->budget = (struct budget_analysis){.m = &r->m, .o = &r->budget_options};
    budget_values_from_cmdlines(&r->budget);
    if (r->budget_options.framework == BUDGET_SGLANG && !r->budget_options.has_fraction)
        return cli_usage_error("diff",
                               "--mem-fraction-static F is required for sglang (no traced "
                               "command line of %s says it)",
                               r->path);
    if (budget_analyse(&r->budget) != 0)
        return CLI_EXIT_BAD_INPUT;
    r->budget_ok = true;
    return 0;
}

static bool budgets_differ(const struct diff *d)
{
    const struct budget_analysis *a = &d->run[DIFF_A].budget, *b = &d->run[DIFF_B].budget;
    if (a->ngroups != b->ngroups)
        return true;
    for (size_t i = 0; i < a->ngroups; i++) {
        const struct budget_job *x = &a->groups[i], *y = &b->groups[i];
        if ((x->analysed > 0) != (y->analysed > 0))
            return true;
        if (x->analysed == 0)
            continue;
        if (x->fits != y->fits || x->tokens != y->tokens)
            return true;
        if (d->o->budget_options.framework == BUDGET_SGLANG
                ? x->rest != y->rest || x->min_pre != y->min_pre || x->min_post != y->min_post
                : x->available != y->available || x->early_failure != y->early_failure)
            return true;
    }
    return false;
}

/* ---- the whole diff ---- */

static int load_run(struct diff_run *r, const char *path)
{
    r->path = path;
    if (trace_set_open(&r->set, path) != 0)
        return CLI_EXIT_BAD_INPUT;
    r->set_open = true;
    if (gm_load(&r->m, &r->set) != 0)
        return CLI_EXIT_BAD_INPUT;
    r->loaded = true;
    return 0;
}

/* Whether a process's stacks name call sites: recorded, and not off. */
static bool names_sites(const struct stack_set *s)
{
    return s->present && !(s->config && strstr(s->config, "native=off python=off"));
}

/*
 * The stacks of every process of a run, loaded before anything is compared:
 * a damaged stack table is a damaged trace, refused with its one line as
 * `cutrace sites` refuses it. Calling it "no stacks" would make every
 * allocation of that run differ from the other's by its site. Returns
 * CLI_EXIT_BAD_INPUT after printing.
 */
static int load_stacks(struct diff *d, int side)
{
    struct diff_run *r = &d->run[side];
    const struct gm_model *m = &r->m;
    r->stacks = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*r->stacks));
    r->stacks_loaded = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*r->stacks_loaded));
    if (!d->sym)
        d->sym = symbolizer_new();
    for (size_t i = 0; i < m->nprocs; i++) {
        /* gpumodel holds a const trace; loading only reads it. */
        struct trace *t = (struct trace *)m->procs[i].trace;
        if (stacks_load(t, d->sym, &r->stacks[i]) != 0) {
            trace_report_error(t);
            return CLI_EXIT_BAD_INPUT;
        }
        r->stacks_loaded[i] = true;
    }
    return 0;
}

/* Call sites are compared only when every process of both runs has them: a
 * run of format 3, or with stacks off, would differ from the other in every
 * allocation's site. When some have them and some not, a note says whose
 * are missing. */
static void decide_sites(struct diff *d)
{
    int missing_side = -1;
    size_t missing = 0;
    bool some = false;
    for (int side = 0; side < 2; side++)
        for (size_t i = 0; i < d->run[side].m.nprocs; i++) {
            bool has = names_sites(&d->run[side].stacks[i]);
            some |= has;
            if (!has && missing_side < 0) {
                missing_side = side;
                missing = i;
            }
        }
    d->sites_compared = missing_side < 0;
    if (d->sites_compared || !some)
        return;
    const struct diff_run *r = &d->run[missing_side];
    char name[64];
    gm_process_name(name, sizeof(name), &r->m.procs[missing]);
    add_note(d, xasprintf("call sites are not compared: %s: %s has no call stacks (%s)",
                          missing_side ? "B" : "A", name,
                          r->stacks[missing].present ? "stacks were off"
                                                     : "a trace of format 3 or older"));
}

static void compare_ends(struct diff *d)
{
    const struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    /* Counts of processes differ with rank counts; what ended badly should not. */
    bool differ = A->killed != B->killed ||
                  A->m.nprocs - A->exited - A->killed != B->m.nprocs - B->exited - B->killed;
    for (size_t pi = 0; pi < d->npairs && !differ; pi++) {
        const struct diff_pair *p = &d->pairs[pi];
        for (size_t s = 0; s < p->nsteps && !differ; s++) {
            const struct diff_milestone *a = diff_step_ms(d, p, &p->steps[s], DIFF_A);
            const struct diff_milestone *b = diff_step_ms(d, p, &p->steps[s], DIFF_B);
            differ = ((a && a->kind == MS_END) || (b && b->kind == MS_END)) &&
                     (!a || !b || a->detail != b->detail);
        }
    }
    if (differ)
        d->differences |= 1u << DIFF_D_ENDS;
}

int diff_run_all(struct diff *d, struct diff_options *o)
{
    memset(d, 0, sizeof(*d));
    d->o = o;
    d->first_div_row = -1;
    struct stat sa, sb;
    if (stat(o->paths[0], &sa) == 0 && stat(o->paths[1], &sb) == 0 && sa.st_dev == sb.st_dev &&
        sa.st_ino == sb.st_ino)
        return cli_usage_error("diff", "%s and %s are the same run: nothing to compare",
                               o->paths[0], o->paths[1]);
    for (int side = 0; side < 2; side++) {
        int rc = load_run(&d->run[side], o->paths[side]);
        if (rc != 0)
            return rc;
    }
    for (int side = 0; side < 2; side++) {
        int rc = load_stacks(d, side);
        if (rc != 0)
            return rc;
    }
    decide_sites(d);
    for (int side = 0; side < 2; side++) {
        struct diff_run *r = &d->run[side];
        build_gpus(d, r);
        if (build_comms(d, r) != 0 || build_env(r) != 0)
            return CLI_EXIT_BAD_INPUT;
        build_ipc(d, r);
        build_cmdlines(r);
        if (o->budget) {
            int rc = run_budget(d, r);
            if (rc != 0)
                return rc;
        }
    }
    pair_gpus(d);
    for (size_t i = 0; i < d->npairs; i++)
        align_pair(d, &d->pairs[i]);
    build_rows(d);
    compare_allocations(d);
    match_comms(d);
    if (!ipc_equal(&d->run[DIFF_A].ipc, &d->run[DIFF_B].ipc))
        d->differences |= 1u << DIFF_D_IPC;
    compare_config(d);
    compare_ends(d);
    if (o->budget && budgets_differ(d))
        d->differences |= 1u << DIFF_D_BUDGET;
    for (int side = 0; side < 2; side++)
        for (size_t i = 0; i < d->run[side].ngpus; i++)
            if (d->run[side].gpus[i].pair == GM_NONE)
                d->differences |= 1u << DIFF_D_GPUS;
    add_note(d, xstrdup("the tracer's own CUTRACE_* variables are not compared: they name each "
                        "run's trace and scratch directories"));
    for (int side = 0; side < 2; side++) {
        const struct diff_run *r = &d->run[side];
        for (size_t i = 0; i < r->m.nnotes; i++)
            add_note(d, xasprintf("%s: %s", side ? "B" : "A", r->m.notes[i]));
        for (size_t i = 0; o->budget && i < r->budget.nnotes; i++)
            add_note(d, xasprintf("%s: %s", side ? "B" : "A", r->budget.notes[i]));
    }
    return 0;
}

void diff_free(struct diff *d)
{
    for (int side = 0; side < 2; side++) {
        struct diff_run *r = &d->run[side];
        for (size_t i = 0; i < r->ngpus; i++)
            free(r->gpus[i].ms);
        free(r->gpus);
        free(r->missing);
        for (size_t i = 0; i < r->ncomms; i++)
            free(r->comms[i].ops);
        free(r->comms);
        for (size_t i = 0; i < r->ipc.nbuffers; i++) {
            free(r->ipc.buffers[i].exporter);
            free(r->ipc.buffers[i].openers);
            free(r->ipc.buffers[i].opener_ranks);
        }
        free(r->ipc.buffers);
        for (size_t i = 0; i < r->ipc.ngroups; i++)
            free(r->ipc.groups[i].exporters);
        free(r->ipc.groups);
        for (size_t i = 0; i < r->ncmdlines; i++)
            free(r->cmdlines[i].text);
        free(r->cmdlines);
        for (size_t i = 0; i < r->nenv; i++) {
            free(r->env[i].name);
            free(r->env[i].value);
        }
        free(r->env);
        if (r->budget.m)
            budget_analysis_free(&r->budget);
        if (r->stacks)
            for (size_t i = 0; i < r->m.nprocs; i++)
                if (r->stacks_loaded[i])
                    stacks_free(&r->stacks[i]);
        free(r->stacks);
        free(r->stacks_loaded);
        if (r->loaded)
            gm_free(&r->m);
        if (r->set_open)
            trace_set_close(&r->set);
    }
    symbolizer_free(d->sym);
    for (size_t i = 0; i < d->npairs; i++)
        free(d->pairs[i].steps);
    free(d->pairs);
    for (size_t i = 0; i < d->nrows; i++)
        free(d->rows[i].label);
    free(d->rows);
    for (size_t i = 0; i < d->nallocs; i++)
        free(d->allocs[i].per_pair);
    free(d->allocs);
    for (size_t i = 0; i < d->nstrings; i++)
        free(d->strings[i]);
    free(d->strings);
    free_words(d->cmd_added, d->ncmd_added);
    free_words(d->cmd_removed, d->ncmd_removed);
    free(d->env_changes);
    for (size_t i = 0; i < d->nnotes; i++)
        free(d->notes[i]);
    free(d->notes);
    memset(d, 0, sizeof(*d));
}

/* ---- names ---- */

char *diff_gpu_name(const struct diff *d, int side, uint32_t gpu)
{
    const struct diff_run *r = &d->run[side];
    assert(gpu < r->ngpus);
    const struct diff_gpu *g = &r->gpus[gpu];
    if (g->has_rank)
        return xasprintf("rank %" PRId64, g->rank);
    const struct gm_gpu *mg = &r->m.gpus[g->gpu];
    if (mg->uuid && strncmp(mg->uuid, "GPU-", 4) == 0)
        return xstrndup(mg->uuid, 12);
    return xasprintf("device %" PRId64, g->ordinal);
}

char *diff_pair_name(const struct diff *d, uint32_t pair)
{
    assert(pair < d->npairs);
    const struct diff_pair *p = &d->pairs[pair];
    const struct diff_gpu *a = &d->run[DIFF_A].gpus[p->gpu[0]];
    switch ((enum diff_match_by)p->by) {
    case DIFF_BY_RANK:
        return xasprintf("rank %" PRId64, a->rank);
    case DIFF_BY_ORDINAL:
        return xasprintf("device %" PRId64, a->ordinal);
    case DIFF_BY_UUID:
        break;
    }
    return diff_gpu_name(d, DIFF_A, p->gpu[0]);
}

char *diff_pairs_text(const struct diff *d, const uint32_t *pairs, size_t count)
{
    if (count == 0)
        return xstrdup("no GPU");
    bool ranks = true;
    for (size_t i = 0; i < count; i++)
        ranks &= d->pairs[pairs[i]].by == DIFF_BY_RANK;
    if (count == d->npairs && count > 1)
        return xstrdup(ranks ? "every rank" : "every GPU");
    if (ranks) {
        int64_t *ids = xcalloc(count, sizeof(*ids));
        for (size_t i = 0; i < count; i++)
            ids[i] = d->run[DIFF_A].gpus[d->pairs[pairs[i]].gpu[0]].rank;
        size_t distinct;
        char *text = ids_text(ids, count, &distinct);
        free(ids);
        return text;
    }
    char *out = xstrdup("");
    for (size_t i = 0; i < count && i < 8; i++) {
        char *name = diff_pair_name(d, pairs[i]);
        char *joined = xasprintf("%s%s%s", out, i ? ", " : "", name);
        free(name);
        free(out);
        out = joined;
    }
    if (count > 8) {
        char *joined = xasprintf("%s and %zu more", out, count - 8);
        free(out);
        out = joined;
    }
    return out;
}

const struct diff_step *diff_first_divergence(const struct diff *d, uint32_t **pairs, size_t *n)
{
    *pairs = NULL;
    *n = 0;
    if (d->first_div_row < 0)
        return NULL;
    *pairs = xcalloc(d->npairs ? d->npairs : 1, sizeof(**pairs));
    const struct diff_step *shown = NULL;
    for (uint32_t p = 0; p < d->npairs; p++)
        for (size_t s = 0; s < d->pairs[p].nsteps; s++) {
            const struct diff_step *st = &d->pairs[p].steps[s];
            if ((int64_t)st->row != d->first_div_row)
                continue;
            if (diff_step_diverges(d, &d->pairs[p], st))
                (*pairs)[(*n)++] = p;
            if (p == d->first_div_pair)
                shown = st;
        }
    assert(shown);
    return shown;
}
