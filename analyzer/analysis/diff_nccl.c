/*
 * diff_nccl.c - the communicators of a run with their memory and collectives, and which
 * communicator of A is which of B (step 6 of diff_run.c).
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

/* ---- communicators and collectives ---- */

static int compare_comms(const void *x, const void *y)
{
    const struct diff_comm *a = x, *b = y;
    int c = diff_cmp64(a->ordinal, b->ordinal);
    if (!c)
        c = diff_cmp64(a->nranks, b->nranks);
    if (!c)
        c = diff_cmp64(a->min_rank, b->min_rank);
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
    return diff_cmp64(*(const int64_t *)key, ((const struct gm_comm *)elem)->seq);
}

/* One (communicator, op) of a process: its cells summed. */
struct comm_op_calls {
    bool has_comm;
    int64_t comm_id;
    uint32_t op; /* model-wide api name */
    int64_t calls, bytes, captured, failed;
};

static int compare_comm_op_calls(const void *x, const void *y)
{
    const struct comm_op_calls *a = x, *b = y;
    if (a->has_comm != b->has_comm)
        return a->has_comm ? 1 : -1;
    int c = diff_cmp64(a->comm_id, b->comm_id);
    return c ? c : (a->op > b->op) - (a->op < b->op);
}

/* The cells of cc summed per (communicator, op), sorted; returns how many. */
static size_t comm_op_sums(const struct cc_calls *cc, struct comm_op_calls **out)
{
    struct comm_op_calls *sums = xcalloc(cc->ncells ? cc->ncells : 1, sizeof(*sums));
    for (size_t i = 0; i < cc->ncells; i++) {
        const struct cc_cell *c = &cc->cells[i];
        sums[i] = (struct comm_op_calls){.has_comm = c->has_comm,
                                         .comm_id = c->has_comm ? c->comm_id : 0,
                                         .op = c->op,
                                         .calls = c->calls,
                                         .bytes = c->bytes,
                                         .captured = c->captured,
                                         .failed = c->failed};
    }
    if (cc->ncells > 1)
        qsort(sums, cc->ncells, sizeof(*sums), compare_comm_op_calls);
    size_t n = 0;
    for (size_t i = 0; i < cc->ncells; i++) {
        if (n > 0 && compare_comm_op_calls(&sums[n - 1], &sums[i]) == 0) {
            struct comm_op_calls *g = &sums[n - 1];
            g->calls = gm_add(g->calls, sums[i].calls);
            g->bytes = gm_add(g->bytes, sums[i].bytes);
            g->captured = gm_add(g->captured, sums[i].captured);
            g->failed = gm_add(g->failed, sums[i].failed);
        } else {
            sums[n++] = sums[i];
        }
    }
    *out = sums;
    return n;
}

/* Joins a run's communicators, attributes NCCL's memory and counts the
 * collectives. Returns -1 after printing the error of a damaged trace. */
int diff_build_comms(struct diff *d, struct diff_run *r)
{
    const struct gm_model *m = &r->m;
    struct diff_keymap by_hash = {0};
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
            uint32_t id = diff_keymap_get(&by_hash, cm->hash);
            if (id == GM_NONE) {
                id = (uint32_t)r->ncomms;
                r->comms = xgrow(r->comms, &cap, r->ncomms + 1, sizeof(*r->comms));
                r->comms[r->ncomms++] = (struct diff_comm){.hash = cm->hash,
                                                           .ordinal = ordinal,
                                                           .nranks = cm->nranks,
                                                           .nccl_min = INT64_MAX,
                                                           .min_rank = cm->rank,
                                                           .match = GM_NONE};
                diff_keymap_put(&by_hash, cm->hash, id);
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
    diff_keymap_free(&by_hash);
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

    /* Collectives, per trace and (communicator, op): the model's cells
     * summed, as a GROUP BY comm_id, op on the `collectives` view has them
     * (tests/analyzer/test_collcalls.c checks the two agree). */
    size_t *ops_cap = xcalloc(r->ncomms ? r->ncomms : 1, sizeof(*ops_cap));
    int rc = 0;
    for (size_t pi = 0; pi < m->nprocs && rc == 0; pi++) {
        const struct gm_process *p = &m->procs[pi];
        struct trace *t = (struct trace *)p->trace;
        /* The NCCL views are checked as `cutrace summary` checks them: a
         * trace from before NCCL was recorded has none (fine), one with
         * damaged views is refused with the same line. */
        struct nccl_info info;
        if (nccl_check(t, false, &info) != 0) {
            trace_report_error(t);
            rc = -1;
            break;
        }
        bool present = info.present;
        nccl_info_free(&info);
        if (!present)
            continue;
        r->nccl_recorded = true;
        struct comm_op_calls *sums = NULL;
        size_t nsums = comm_op_sums(&p->nccl_calls, &sums);
        for (size_t k = 0; k < nsums; k++) {
            const struct comm_op_calls *g = &sums[k];
            const struct gm_comm *cm = !g->has_comm || !p->ncomms
                                           ? NULL
                                           : bsearch(&g->comm_id, p->comms, p->ncomms,
                                                     sizeof(*p->comms), compare_comm_seq);
            uint32_t id = cm ? comm_of[pi][cm - p->comms] : GM_NONE;
            if (id == GM_NONE) {
                r->unattributed_calls = gm_add(r->unattributed_calls, g->calls);
                continue;
            }
            struct diff_comm *dc = &r->comms[id];
            struct diff_op *o = comm_op(dc, &ops_cap[id], diff_string_id(d, gm_api_name(m, g->op)));
            o->calls = gm_add(o->calls, g->calls);
            o->bytes = gm_add(o->bytes, g->bytes);
            o->captured = gm_add(o->captured, g->captured);
            o->failed = gm_add(o->failed, g->failed);
            o->ranks++;
            if (g->calls < o->rank_min)
                o->rank_min = g->calls;
            if (g->calls > o->rank_max)
                o->rank_max = g->calls;
        }
        free(sums);
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
void diff_match_comms(struct diff *d)
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
