/*
 * diff_milestones.c - the milestones of each GPU of a run, the pairing of GPUs and the alignment
 * of each pair's milestones into the diff's rows (steps 2 to 4 of
 * diff_run.c).
 */
#include "analysis/diff_build.h"

#include "cli.h"
#include "model/nccl.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
            ms.sub = diff_string_id(d, gm_api_name(m, e->api));
            ms.detail = e->a;
            break;
        case GM_EV_END:
            ms.kind = MS_END;
            ms.detail = e->a;
            break;
        case GM_EV_NVTX_MARK:
        case GM_EV_NVTX_BEGIN:
        case GM_EV_NVTX_END:
            /* Aligned by phase: the message names it in both runs. */
            ms.kind = e->type == GM_EV_NVTX_MARK    ? MS_NVTX_MARK
                      : e->type == GM_EV_NVTX_BEGIN ? MS_NVTX_BEGIN
                                                    : MS_NVTX_END;
            ms.sub = diff_string_id(d, e->a >= 0 && (size_t)e->a < m->ntexts ? m->texts[e->a] : "");
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
    struct diff_keymap counts = {0};
    for (size_t i = 0; i < g->nms; i++) {
        uint64_t k = ms_identity(g->ms[i].kind, g->ms[i].sub, 0);
        uint32_t n = diff_keymap_get(&counts, k);
        n = n == GM_NONE ? 1 : n + 1;
        diff_keymap_put(&counts, k, n);
        g->ms[i].occurrence = n;
    }
    diff_keymap_free(&counts);
    free(bursts);
    free(cap);
}

void diff_build_gpus(struct diff *d, struct diff_run *r)
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
            diff_add_note(d,
                          xasprintf("%s: GPU %s is used by processes of different ranks: paired by "
                                    "ordinal or uuid instead",
                                    r == &d->run[DIFF_A] ? "A" : "B", gpu->key));
        }
        if (g->proc == GM_NONE && gpu->nprocs > 0)
            g->proc = gpu->procs[0];
        if (g->has_rank)
            r->ranks++;
        build_milestones(d, r, g);
        if (g->failed_dropped)
            diff_add_note(d,
                          xasprintf("%s: GPU %s: %" PRId64 " more failed calls than the %d aligned "
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

void diff_pair_gpus(struct diff *d)
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
void diff_align_pair(struct diff *d, struct diff_pair *p)
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
    if (diff_abs64(gm_sub(diff_ms_traced(b), diff_ms_traced(a))) > t)
        return true;
    for (int c = 0; c < GM_GPU_CATEGORIES; c++)
        if (diff_abs64(gm_sub(b->live[c], a->live[c])) > t)
            return true;
    return a->measured && b->measured && diff_abs64(gm_sub(b->free_bytes, a->free_bytes)) > t;
}

char *diff_ms_label(const struct diff *d, const struct diff_milestone *ms)
{
    char *name = ms_name((enum ms_kind)ms->kind, ms->occurrence,
                         ms_has_sub((enum ms_kind)ms->kind) ? diff_string(d, ms->sub) : NULL);
    if (ms->kind != MS_MEASUREMENT || ms->tag == MS_TAG_NONE)
        return name;
    char *tagged = xasprintf("%s (%s)", name, ms_tag_key((enum ms_tag)ms->tag));
    free(name);
    return tagged;
}

/* One list of rows for every pair: each pair's steps in order, a row per
 * key, new keys placed after the pair's previous row (a linked list keeps
 * insertion O(1)), then numbered in list order. */
void diff_build_rows(struct diff *d)
{
    struct diff_keymap ids = {0};
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
            uint32_t id = diff_keymap_get(&ids, key);
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
                diff_keymap_put(&ids, key, id);
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
    diff_keymap_free(&ids);

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
        int64_t size = diff_abs64(gm_sub(diff_ms_traced(b), diff_ms_traced(a)));
        if (a->measured && b->measured && diff_abs64(gm_sub(b->free_bytes, a->free_bytes)) > size)
            size = diff_abs64(gm_sub(b->free_bytes, a->free_bytes));
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
