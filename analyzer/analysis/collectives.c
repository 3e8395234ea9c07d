/*
 * collectives.c - building the `cutrace collectives` report (see
 * collectives.h): the run model's processes, communicators and NCCL calls
 * grouped by communicator across processes, then each group checked: its
 * size and missing ranks, its splits, call counts per rank and op, failed
 * calls, and sends matched with receives per pair of ranks.
 */
#include "analysis/collectives.h"

#include "analysis/coll_checks.h"

#include "cli.h"
#include "model/errnames.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_MISSING_RANGES 8 /* missing-rank ranges named in a message */

static void sort_array(void *base, size_t count, size_t size,
                       int (*compare)(const void *, const void *))
{
    if (count > 1)
        qsort(base, count, size, compare);
}

static int cmp_i64(int64_t a, int64_t b)
{
    return (a > b) - (a < b);
}

static int cmp_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "");
}

/* ---- building the groups ---- */

static const struct coll_report *sort_report; /* qsort has no context argument */

static int compare_members_by_hash(const void *a, const void *b)
{
    const struct coll_member *x = &sort_report->members[*(const size_t *)a];
    const struct coll_member *y = &sort_report->members[*(const size_t *)b];
    int c = strcmp(x->comm->hash, y->comm->hash);
    return c ? c : cmp_i64((int64_t) * (const size_t *)a, (int64_t) * (const size_t *)b);
}

/* Rank order; members without a rank last; then process and comm_id. */
static int compare_members_by_rank(const void *a, const void *b)
{
    const struct coll_member *x = &sort_report->members[*(const size_t *)a];
    const struct coll_member *y = &sort_report->members[*(const size_t *)b];
    if (x->comm->has_rank != y->comm->has_rank)
        return x->comm->has_rank ? -1 : 1;
    int c = cmp_i64(x->comm->rank, y->comm->rank);
    if (c)
        return c;
    const struct coll_proc *px = &sort_report->procs[x->proc], *py = &sort_report->procs[y->proc];
    if ((c = cmp_i64(px->pid, py->pid)) != 0)
        return c;
    if ((c = strcmp(px->trace->file, py->trace->file)) != 0)
        return c;
    return cmp_i64(x->comm->comm_id, y->comm->comm_id);
}

/* When the member's init happened, in wall-clock time where the trace
 * allows (the only clock processes on different hosts share). */
static int64_t init_wall_ns(const struct coll_report *r, const struct coll_member *m)
{
    const struct coll_proc *p = &r->procs[m->proc];
    if (p->has_start_mono && p->has_start_wall)
        return gm_add(p->start_wall_ns, gm_sub(m->comm->t_init_ns, p->start_mono_ns));
    return m->comm->t_init_ns;
}

static void make_groups(struct coll_report *r)
{
    size_t *order = xcalloc(r->nmembers, sizeof(*order));
    for (size_t i = 0; i < r->nmembers; i++)
        order[i] = i;
    sort_report = r;
    sort_array(order, r->nmembers, sizeof(*order), compare_members_by_hash);
    for (size_t i = 0; i < r->nmembers; i++) {
        struct coll_member *m = &r->members[order[i]];
        if (i == 0 || strcmp(r->members[order[i - 1]].comm->hash, m->comm->hash) != 0) {
            r->groups = xgrow(r->groups, &r->groups_cap, r->ngroups + 1, sizeof(*r->groups));
            struct coll_group *g = &r->groups[r->ngroups++];
            memset(g, 0, sizeof(*g));
            g->hash = m->comm->hash;
            g->order_key = INT64_MAX;
        }
        struct coll_group *g = &r->groups[r->ngroups - 1];
        g->members = xgrow(g->members, &g->members_cap, g->nmembers + 1, sizeof(*g->members));
        g->members[g->nmembers++] = order[i];
        m->group = r->ngroups - 1;
        int64_t at = init_wall_ns(r, m);
        if (at < g->order_key)
            g->order_key = at;
    }
    free(order);
    for (size_t gi = 0; gi < r->ngroups; gi++) {
        struct coll_group *g = &r->groups[gi];
        sort_array(g->members, g->nmembers, sizeof(*g->members), compare_members_by_rank);
        for (size_t k = 0; k < g->nmembers; k++) {
            struct coll_member *m = &r->members[g->members[k]];
            m->position = k;
            if (m->active)
                g->nactive++;
        }
    }
}

/* "rank 2", "ranks 1, 3 and 5-7", at most `limit` ranges then "and N more". */
static char *ranges_text(const struct coll_range *ranges, size_t count, size_t limit)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return xstrdup("ranks");
    bool plural = count > 1 || (count == 1 && ranges[0].first != ranges[0].last);
    fputs(plural ? "ranks " : "rank ", out);
    size_t shown = count < limit ? count : limit;
    for (size_t i = 0; i < shown; i++) {
        if (i > 0)
            fputs(i + 1 == shown && shown == count ? " and " : ", ", out);
        if (ranges[i].first == ranges[i].last)
            fprintf(out, "%" PRId64, ranges[i].first);
        else
            fprintf(out, "%" PRId64 "-%" PRId64, ranges[i].first, ranges[i].last);
    }
    if (shown < count)
        fprintf(out, " and %zu more ranges", count - shown);
    if (fclose(out) != 0 || !text)
        return xstrdup("ranks");
    return text;
}

/* A rank that can be placed in the communicator. */
static bool rank_valid(const struct coll_group *g, const struct nccl_comm *c)
{
    return c->has_rank && c->rank >= 0 && (!g->has_nranks || c->rank < g->nranks);
}

/* Size, missing ranks and problems with the members themselves. */
static void check_ranks(struct coll_report *r, struct coll_group *g)
{
    /* nranks: the members should agree; the largest is what counts. */
    int64_t low = INT64_MAX;
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct nccl_comm *c = r->members[g->members[k]].comm;
        if (!c->has_nranks || c->nranks <= 0)
            continue;
        if (!g->has_nranks || c->nranks > g->nranks)
            g->nranks = c->nranks;
        if (c->nranks < low)
            low = c->nranks;
        g->has_nranks = true;
    }
    if (!g->has_nranks) {
        struct coll_problem *p = coll_add_problem(&g->problems, &g->nproblems, &g->problems_cap,
                                                  COLL_PROBLEM_UNKNOWN_SIZE);
        p->message = xstrdup("its size is unknown: no rank recorded a valid nranks");
    } else if (low != g->nranks) {
        struct coll_problem *p = coll_add_problem(&g->problems, &g->nproblems, &g->problems_cap,
                                                  COLL_PROBLEM_NRANKS_DIFFER);
        p->message = xasprintf("its ranks disagree on its size (nranks %" PRId64 " to %" PRId64
                               "); counting %" PRId64,
                               low, g->nranks, g->nranks);
        for (size_t k = 0; k < g->nmembers; k++) {
            const struct coll_member *m = &r->members[g->members[k]];
            coll_problem_add_rank(p, r, m, m->comm->nranks);
        }
    }

    /* Members are in rank order: duplicates are adjacent, gaps are missing. */
    int64_t next = 0; /* the lowest rank not yet seen */
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct coll_member *m = &r->members[g->members[k]];
        const struct nccl_comm *c = m->comm;
        char who[96];
        coll_pid_text(who, sizeof(who), &r->procs[m->proc]);
        if (!rank_valid(g, c)) {
            struct coll_problem *p = coll_add_problem(&g->problems, &g->nproblems, &g->problems_cap,
                                                      COLL_PROBLEM_RANK_INVALID);
            if (c->has_rank)
                p->message = xasprintf("%s holds rank %" PRId64 ", outside 0-%" PRId64, who,
                                       c->rank, g->has_nranks ? g->nranks - 1 : 0);
            else
                p->message = xasprintf("%s holds no rank", who);
            coll_problem_add_rank(p, r, m, c->rank);
            continue;
        }
        if (k > 0) {
            const struct nccl_comm *prev = r->members[g->members[k - 1]].comm;
            if (prev->has_rank && prev->rank == c->rank) {
                struct coll_problem *p = coll_add_problem(
                    &g->problems, &g->nproblems, &g->problems_cap, COLL_PROBLEM_DUPLICATE_RANK);
                p->message = xasprintf("rank %" PRId64 " is held more than once (again by %s)",
                                       c->rank, who);
                coll_problem_add_rank(p, r, m, c->rank);
                continue;
            }
        }
        if (c->rank > next) {
            g->missing = xgrow(g->missing, &g->missing_cap, g->nmissing + 1, sizeof(*g->missing));
            g->missing[g->nmissing++] = (struct coll_range){next, c->rank - 1};
            g->missing_count = gm_add(g->missing_count, c->rank - next);
        }
        next = c->rank + 1;
        g->ranks_traced++;
    }
    if (g->has_nranks && next < g->nranks) {
        g->missing = xgrow(g->missing, &g->missing_cap, g->nmissing + 1, sizeof(*g->missing));
        g->missing[g->nmissing++] = (struct coll_range){next, g->nranks - 1};
        g->missing_count = gm_add(g->missing_count, g->nranks - next);
    }
    if (g->missing_count > 0) {
        struct coll_problem *p = coll_add_problem(&g->problems, &g->nproblems, &g->problems_cap,
                                                  COLL_PROBLEM_MISSING_RANKS);
        char *ranks = ranges_text(g->missing, g->nmissing, TEXT_MISSING_RANGES);
        bool one = g->missing_count == 1;
        p->message = xasprintf("%s of %" PRId64 " %s no trace in this directory: %s calls are"
                               " not counted here",
                               ranks, g->nranks, one ? "has" : "have", one ? "its" : "their");
        p->has_expected = true;
        p->expected = g->missing_count;
        free(ranks);
    }

    for (size_t k = 0; k < g->nmembers; k++) {
        const struct coll_member *m = &r->members[g->members[k]];
        if (m->active)
            continue;
        char who[96], pid[96], result[64];
        coll_member_label(who, sizeof(who), r, m);
        coll_pid_text(pid, sizeof(pid), &r->procs[m->proc]);
        result_describe(result, sizeof(result), LAYER_NCCL, m->comm->init_result);
        struct coll_problem *p = coll_add_problem(&g->problems, &g->nproblems, &g->problems_cap,
                                                  COLL_PROBLEM_INIT_FAILED);
        p->message =
            xasprintf("%s (%s): %s failed with %" PRId64 " %s", who, pid,
                      m->comm->api ? m->comm->api : "its init", m->comm->init_result, result);
        coll_problem_add_rank(p, r, m, m->comm->init_result);
    }
}

/* The group a split came from: its parent communicator's group, with the
 * color. Members should agree; a disagreement is a problem. */
static void find_parent(struct coll_report *r, struct coll_group *g)
{
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct coll_member *m = &r->members[g->members[k]];
        if (!m->comm->has_parent)
            continue;
        const struct coll_proc *p = &r->procs[m->proc];
        const struct nccl_comm *parent = nccl_find_comm(&p->nccl, m->comm->parent_comm_id);
        const char *hash = parent ? parent->hash : NULL;
        if (!g->has_parent) {
            g->has_parent = true;
            g->parent_hash = hash;
            g->has_color = m->comm->has_color;
            g->color = m->comm->color;
        } else if (cmp_str(g->parent_hash, hash) != 0 || g->color != m->comm->color) {
            struct coll_problem *pr = coll_add_problem(
                &g->problems, &g->nproblems, &g->problems_cap, COLL_PROBLEM_PARENTS_DIFFER);
            char who[96];
            coll_member_label(who, sizeof(who), r, m);
            pr->message =
                xasprintf("%s was split from %s with color %" PRId64
                          ", its peers from %s with color %" PRId64,
                          who, hash ? hash : "an unknown communicator", m->comm->color,
                          g->parent_hash ? g->parent_hash : "an unknown communicator", g->color);
            coll_problem_add_rank(pr, r, m, m->comm->color);
        }
    }
}

static int compare_cells(const void *a, const void *b)
{
    const struct coll_cell *x = a, *y = b;
    int c = cmp_i64((int64_t)x->group, (int64_t)y->group);
    if (c == 0) /* collectives first, then point-to-point */
        c = cmp_i64(x->p2p, y->p2p);
    if (c == 0)
        c = strcmp(x->op, y->op);
    if (c == 0)
        c = strcmp(x->datatype, y->datatype);
    if (c == 0)
        c = cmp_i64(x->bucket, y->bucket);
    if (c == 0)
        c = cmp_i64((int64_t)sort_report->members[x->member].position,
                    (int64_t)sort_report->members[y->member].position);
    return c;
}

static bool same_cell(const struct coll_cell *a, const struct coll_cell *b)
{
    return a->group == b->group && a->p2p == b->p2p && strcmp(a->op, b->op) == 0 &&
           strcmp(a->datatype, b->datatype) == 0 && a->bucket == b->bucket &&
           a->member == b->member;
}

/* Sorts the cells into group, op, datatype, bucket, rank order, merges the
 * ones split by root or peer, and hands each group its slice. */
static void distribute_cells(struct coll_report *r)
{
    for (size_t i = 0; i < r->ncells; i++)
        r->cells[i].group = r->members[r->cells[i].member].group;
    sort_report = r;
    sort_array(r->cells, r->ncells, sizeof(*r->cells), compare_cells);
    size_t out = 0;
    for (size_t i = 0; i < r->ncells; i++) {
        struct coll_cell *c = &r->cells[i];
        if (out > 0 && same_cell(&r->cells[out - 1], c)) {
            struct coll_cell *into = &r->cells[out - 1];
            into->calls = gm_add(into->calls, c->calls);
            into->bytes = gm_add(into->bytes, c->bytes);
            into->dur_ns = gm_add(into->dur_ns, c->dur_ns);
            if (c->max_dur_ns > into->max_dur_ns)
                into->max_dur_ns = c->max_dur_ns;
            into->captured = gm_add(into->captured, c->captured);
            into->in_group = gm_add(into->in_group, c->in_group);
            into->failed = gm_add(into->failed, c->failed);
            continue;
        }
        r->cells[out++] = *c;
    }
    r->ncells = out;
    for (size_t i = 0; i < r->ncells;) {
        struct coll_group *g = &r->groups[r->cells[i].group];
        g->cells = &r->cells[i];
        while (i < r->ncells && &r->groups[r->cells[i].group] == g) {
            g->ncells++;
            i++;
        }
    }
}

/* Rows (op, datatype, bucket) and ops of a group, from its sorted cells. */
static void summarise_calls(struct coll_report *r, struct coll_group *g)
{
    for (size_t i = 0; i < g->ncells;) {
        const struct coll_cell *first = &g->cells[i];
        g->rows = xgrow(g->rows, &g->rows_cap, g->nrows + 1, sizeof(*g->rows));
        struct coll_row *row = &g->rows[g->nrows++];
        memset(row, 0, sizeof(*row));
        row->first_cell = i;
        row->min_calls = INT64_MAX;
        size_t active_with_calls = 0;
        for (; i < g->ncells && g->cells[i].p2p == first->p2p &&
               strcmp(g->cells[i].op, first->op) == 0 &&
               strcmp(g->cells[i].datatype, first->datatype) == 0 &&
               g->cells[i].bucket == first->bucket;
             i++) {
            const struct coll_cell *c = &g->cells[i];
            row->ncells++;
            row->calls = gm_add(row->calls, c->calls);
            row->bytes = gm_add(row->bytes, c->bytes);
            row->dur_ns = gm_add(row->dur_ns, c->dur_ns);
            if (c->max_dur_ns > row->max_dur_ns)
                row->max_dur_ns = c->max_dur_ns;
            row->captured = gm_add(row->captured, c->captured);
            row->in_group = gm_add(row->in_group, c->in_group);
            row->failed = gm_add(row->failed, c->failed);
            if (c->calls < row->min_calls)
                row->min_calls = c->calls;
            if (c->calls > row->max_calls)
                row->max_calls = c->calls;
            if (r->members[c->member].active)
                active_with_calls++;
        }
        /* An active member without a cell made none of these. */
        if (active_with_calls < g->nactive || row->min_calls == INT64_MAX)
            row->min_calls = 0;

        if (g->nops == 0 || g->ops[g->nops - 1].p2p != first->p2p ||
            strcmp(g->ops[g->nops - 1].op, first->op) != 0) {
            g->ops = xgrow(g->ops, &g->ops_cap, g->nops + 1, sizeof(*g->ops));
            struct coll_op *op = &g->ops[g->nops++];
            memset(op, 0, sizeof(*op));
            op->op = first->op;
            op->p2p = first->p2p;
            op->first_row = g->nrows - 1;
            op->member_calls = xcalloc(g->nmembers, sizeof(*op->member_calls));
        }
        struct coll_op *op = &g->ops[g->nops - 1];
        op->nrows++;
        op->calls = gm_add(op->calls, row->calls);
        op->failed = gm_add(op->failed, row->failed);
        for (size_t k = row->first_cell; k < row->first_cell + row->ncells; k++) {
            size_t pos = r->members[g->cells[k].member].position;
            assert(pos < g->nmembers);
            op->member_calls[pos] = gm_add(op->member_calls[pos], g->cells[k].calls);
        }
        if (op->p2p)
            g->p2p_calls = gm_add(g->p2p_calls, row->calls);
        else
            g->calls = gm_add(g->calls, row->calls);
        g->failed = gm_add(g->failed, row->failed);
    }
    for (size_t o = 0; o < g->nops; o++) {
        struct coll_op *op = &g->ops[o];
        op->min_calls = INT64_MAX;
        for (size_t k = 0; k < g->nmembers; k++) {
            if (!r->members[g->members[k]].active)
                continue;
            if (op->member_calls[k] < op->min_calls)
                op->min_calls = op->member_calls[k];
            if (op->member_calls[k] > op->max_calls)
                op->max_calls = op->member_calls[k];
        }
        if (op->min_calls == INT64_MAX)
            op->min_calls = 0;
    }
}

static int compare_pairs(const void *a, const void *b)
{
    const struct coll_pair *x = a, *y = b;
    int c = cmp_i64((int64_t)x->group, (int64_t)y->group);
    if (c == 0)
        c = cmp_i64(x->from, y->from);
    return c ? c : cmp_i64(x->to, y->to);
}

/* Sends and receives into (from, to) pairs; peers outside a communicator
 * are problems, not pairs. */
static void make_pairs(struct coll_report *r)
{
    for (size_t i = 0; i < r->nparts; i++) {
        const struct coll_p2p_part *part = &r->parts[i];
        const struct coll_member *m = &r->members[part->member];
        struct coll_group *g = &r->groups[m->group];
        if (!rank_valid(g, m->comm))
            continue; /* reported as rank_invalid: no pair to put it in */
        if (!part->has_peer || part->peer < 0 || (g->has_nranks && part->peer >= g->nranks)) {
            char who[96], peer[48];
            coll_member_label(who, sizeof(who), r, m);
            if (part->has_peer)
                snprintf(peer, sizeof(peer), "rank %" PRId64, part->peer);
            else
                snprintf(peer, sizeof(peer), "no peer");
            struct coll_problem *p = coll_add_problem(&g->problems, &g->nproblems, &g->problems_cap,
                                                      COLL_PROBLEM_P2P_BAD_PEER);
            p->op = part->send ? "ncclSend" : "ncclRecv";
            p->message =
                xasprintf("%s made %" PRId64 " %s %s %s, which is not a rank of this "
                          "%" PRId64 "-rank communicator",
                          who, part->calls, p->op, part->send ? "to" : "from", peer, g->nranks);
            coll_problem_add_rank(p, r, m, part->calls);
            p->has_expected = part->has_peer;
            p->expected = part->peer;
            continue;
        }
        r->pairs = xgrow(r->pairs, &r->pairs_cap, r->npairs + 1, sizeof(*r->pairs));
        struct coll_pair *pair = &r->pairs[r->npairs++];
        memset(pair, 0, sizeof(*pair));
        pair->group = m->group;
        pair->from = part->send ? m->comm->rank : part->peer;
        pair->to = part->send ? part->peer : m->comm->rank;
        if (part->send) {
            pair->sends = part->calls;
            pair->send_bytes = part->bytes;
        } else {
            pair->recvs = part->calls;
            pair->recv_bytes = part->bytes;
        }
    }
    sort_array(r->pairs, r->npairs, sizeof(*r->pairs), compare_pairs);
    size_t out = 0;
    for (size_t i = 0; i < r->npairs; i++) {
        struct coll_pair *p = &r->pairs[i];
        if (out > 0 && compare_pairs(&r->pairs[out - 1], p) == 0) {
            struct coll_pair *into = &r->pairs[out - 1];
            into->sends = gm_add(into->sends, p->sends);
            into->send_bytes = gm_add(into->send_bytes, p->send_bytes);
            into->recvs = gm_add(into->recvs, p->recvs);
            into->recv_bytes = gm_add(into->recv_bytes, p->recv_bytes);
            continue;
        }
        r->pairs[out++] = *p;
    }
    r->npairs = out;
    for (size_t i = 0; i < r->npairs;) {
        struct coll_group *g = &r->groups[r->pairs[i].group];
        g->pairs = &r->pairs[i];
        for (; i < r->npairs && &r->groups[r->pairs[i].group] == g; i++) {
            struct coll_pair *p = &r->pairs[i];
            g->npairs++;
            p->sender_traced = coll_rank_member(r, g, p->from) != NULL;
            p->receiver_traced = coll_rank_member(r, g, p->to) != NULL;
        }
    }
}

static int compare_groups(const void *a, const void *b)
{
    const struct coll_group *x = a, *y = b;
    int c = cmp_i64(x->order_key, y->order_key);
    return c ? c : strcmp(x->hash, y->hash);
}

static int compare_op_counts(const void *a, const void *b)
{
    return strcmp(((const struct coll_op_count *)a)->op, ((const struct coll_op_count *)b)->op);
}

/* ---- loading: the run model, and each trace's communicators ---- */

static void add_orphan(struct coll_proc *p, const char *op, int64_t calls)
{
    for (size_t i = 0; i < p->norphans; i++)
        if (cmp_str(p->orphans[i].op, op) == 0) {
            p->orphans[i].calls = gm_add(p->orphans[i].calls, calls);
            return;
        }
    p->orphans = xgrow(p->orphans, &p->orphans_cap, p->norphans + 1, sizeof(*p->orphans));
    p->orphans[p->norphans++] = (struct coll_op_count){xstrdup(op ? op : "?"), calls};
}

/* The process's identity, as the model read it. */
static void take_identity(struct coll_proc *p, const struct gm_process *gp)
{
    p->has_pid = gp->pid != 0;
    p->pid = gp->pid;
    p->host = gp->host[0] ? gp->host : NULL;
    p->has_start_mono = gp->has_start_mono;
    p->start_mono_ns = gp->start_mono_ns;
    p->has_start_wall = gp->has_start_wall;
    p->start_wall_ns = gp->start_wall_ns;
}

static int compare_comm_gpus(const void *a, const void *b)
{
    const struct gm_comm *x = a, *y = b;
    return cmp_i64(x->seq, y->seq);
}

/* The GPU uuid of the communicator init with that seq (comm_id) on a known
 * device; NULL unknown. by_seq: the process's model comms sorted by seq. */
static const char *comm_uuid(const struct gm_model *m, const struct gm_comm *by_seq, size_t count,
                             const struct nccl_comm *c)
{
    if (c->device < 0) /* no device current: the trace does not say which GPU */
        return NULL;
    struct gm_comm key = {.seq = c->comm_id};
    const struct gm_comm *found =
        count ? bsearch(&key, by_seq, count, sizeof(*by_seq), compare_comm_gpus) : NULL;
    if (!found || found->gpu >= m->ngpus)
        return NULL;
    return m->gpus[found->gpu].uuid;
}

static void add_members(struct coll_report *r, size_t pi, const struct gm_process *gp)
{
    struct coll_proc *p = &r->procs[pi];
    struct gm_comm *by_seq = NULL;
    if (gp->ncomms > 0) {
        by_seq = xcalloc(gp->ncomms, sizeof(*by_seq));
        memcpy(by_seq, gp->comms, gp->ncomms * sizeof(*by_seq));
        sort_array(by_seq, gp->ncomms, sizeof(*by_seq), compare_comm_gpus);
    }
    p->first_member = r->nmembers;
    for (size_t i = 0; i < p->nccl.ncomms; i++) {
        const struct nccl_comm *c = &p->nccl.comms[i];
        r->members = xgrow(r->members, &r->members_cap, r->nmembers + 1, sizeof(*r->members));
        r->members[r->nmembers++] =
            (struct coll_member){.proc = pi,
                                 .comm = c,
                                 .uuid = comm_uuid(&r->model, by_seq, gp->ncomms, c),
                                 .active = c->init_result == 0};
    }
    free(by_seq);
}

/* Every collective and p2p call of the process, from the model's cells
 * (per communicator, op, datatype, size bucket and root/peer). */
static void take_calls(struct coll_report *r, size_t pi, const struct gm_process *gp)
{
    struct coll_proc *p = &r->procs[pi];
    struct nccl_info *n = &p->nccl;
    for (size_t i = 0; i < gp->nccl_calls.ncells; i++) {
        const struct cc_cell *cc = &gp->nccl_calls.cells[i];
        const char *op = gm_api_name(&r->model, cc->op);
        int64_t calls = cc->calls;
        if (cc->p2p)
            r->p2p_calls = gm_add(r->p2p_calls, calls);
        else
            r->collective_calls = gm_add(r->collective_calls, calls);
        r->failed_calls = gm_add(r->failed_calls, cc->failed);
        /* The process's counts, which nccl_check left to this pass. */
        n->calls = gm_add(n->calls, calls);
        n->failed_calls = gm_add(n->failed_calls, cc->failed);
        const struct nccl_comm *found = cc->has_comm ? nccl_find_comm(n, cc->comm_id) : NULL;
        if (!found) {
            add_orphan(p, op, calls);
            n->unattributed_calls = gm_add(n->unattributed_calls, calls);
            r->unattributed_calls = gm_add(r->unattributed_calls, calls);
            continue;
        }
        struct nccl_comm *comm = &n->comms[found - n->comms];
        comm->calls = gm_add(comm->calls, calls);
        comm->failed_calls = gm_add(comm->failed_calls, cc->failed);
        size_t member = p->first_member + (size_t)(comm - n->comms);
        assert(member < r->nmembers && r->members[member].comm == comm);
        r->cells = xgrow(r->cells, &r->cells_cap, r->ncells + 1, sizeof(*r->cells));
        struct coll_cell *c = &r->cells[r->ncells++];
        memset(c, 0, sizeof(*c));
        c->op = op;
        cc_datatype_name(c->datatype, sizeof(c->datatype), cc);
        c->bucket = cc->bucket;
        c->member = member;
        c->p2p = cc->p2p;
        c->calls = calls;
        c->bytes = cc->bytes;
        c->dur_ns = cc->dur_ns;
        c->max_dur_ns = coll_nonneg(cc->max_dur_ns);
        c->captured = cc->captured;
        c->in_group = cc->in_group;
        c->failed = cc->failed;
        bool send = strcmp(op, "ncclSend") == 0, recv = strcmp(op, "ncclRecv") == 0;
        if (cc->p2p && (send || recv)) {
            r->parts = xgrow(r->parts, &r->parts_cap, r->nparts + 1, sizeof(*r->parts));
            r->parts[r->nparts++] = (struct coll_p2p_part){.member = member,
                                                           .send = send,
                                                           .has_peer = cc->peer >= 0,
                                                           .peer = cc->peer,
                                                           .calls = calls,
                                                           .bytes = c->bytes};
        }
    }
}

/* The model's process of a trace (the model orders them its own way). */
static const struct gm_process *model_process(const struct gm_model *m, const struct trace *t)
{
    for (size_t i = 0; i < m->nprocs; i++)
        if (m->procs[i].trace == t)
            return &m->procs[i];
    return NULL;
}

/* The NCCL views are checked first: a trace without them is refused with
 * the words nccl_check has for it, before the model reads its calls (and
 * its communicators, which nccl_add_comms takes). */
static int load(struct coll_report *r, struct trace_set *set)
{
    r->nprocs = set->count;
    r->procs = xcalloc(set->count ? set->count : 1, sizeof(*r->procs));
    for (size_t i = 0; i < set->count; i++) {
        r->procs[i].trace = &set->traces[i];
        if (nccl_check(&set->traces[i], true, &r->procs[i].nccl) != 0) {
            trace_report_error(&set->traces[i]);
            return -1;
        }
    }
    if (gm_load(&r->model, set) != 0)
        return -1;
    r->has_model = true;
    for (size_t i = 0; i < set->count; i++) {
        const struct gm_process *gp = model_process(&r->model, r->procs[i].trace);
        assert(gp && "gm_load loads every trace of the set");
        r->procs[i].model_proc = (uint32_t)(gp - r->model.procs);
        take_identity(&r->procs[i], gp);
        nccl_add_comms(&r->procs[i].nccl, &gp->communicators);
        add_members(r, i, gp);
        take_calls(r, i, gp);
        sort_array(r->procs[i].orphans, r->procs[i].norphans, sizeof(*r->procs[i].orphans),
                   compare_op_counts);
    }
    return 0;
}

int coll_build(struct coll_report *r, struct trace_set *set, const char *path)
{
    memset(r, 0, sizeof(*r));
    r->path = path;
    if (load(r, set) != 0)
        return -1;
    make_groups(r);
    distribute_cells(r);
    for (size_t gi = 0; gi < r->ngroups; gi++) {
        struct coll_group *g = &r->groups[gi];
        check_ranks(r, g);
        find_parent(r, g);
        summarise_calls(r, g);
        for (size_t o = 0; o < g->nops; o++) {
            coll_check_call_counts(r, g, &g->ops[o]);
            coll_check_failed_calls(r, g, &g->ops[o]);
        }
    }
    make_pairs(r);
    for (size_t gi = 0; gi < r->ngroups; gi++)
        coll_check_pairs(r, &r->groups[gi]);
    coll_check_processes(r);
    /* Cells and pairs point into their groups by index: sort the groups last. */
    sort_array(r->groups, r->ngroups, sizeof(*r->groups), compare_groups);
    r->total_problems = r->nproblems;
    for (size_t gi = 0; gi < r->ngroups; gi++)
        r->total_problems += r->groups[gi].nproblems;
    return 0;
}

static void free_problems(struct coll_problem *list, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free(list[i].message);
        free(list[i].ranks);
    }
    free(list);
}

void coll_free(struct coll_report *r)
{
    for (size_t i = 0; i < r->nprocs; i++) {
        struct coll_proc *p = &r->procs[i];
        nccl_info_free(&p->nccl);
        for (size_t o = 0; o < p->norphans; o++)
            free(p->orphans[o].op);
        free(p->orphans);
    }
    for (size_t gi = 0; gi < r->ngroups; gi++) {
        struct coll_group *g = &r->groups[gi];
        for (size_t o = 0; o < g->nops; o++)
            free(g->ops[o].member_calls);
        free(g->ops);
        free(g->rows);
        free(g->members);
        free(g->missing);
        free_problems(g->problems, g->nproblems);
    }
    free_problems(r->problems, r->nproblems);
    free(r->cells);
    free(r->parts);
    free(r->pairs);
    free(r->groups);
    free(r->members);
    free(r->procs);
    if (r->has_model)
        gm_free(&r->model);
    memset(r, 0, sizeof(*r));
}

/* ---- shared by both renderings ---- */

/* The NCCL version all processes share, 0 when none is known, -1 when they differ. */
int64_t coll_common_version(const struct coll_report *r)
{
    int64_t version = 0;
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct nccl_info *n = &r->procs[i].nccl;
        if (!n->has_version)
            continue;
        if (version && n->version != version)
            return -1;
        version = n->version;
    }
    return version;
}

int64_t coll_time_origin(const struct coll_proc *p)
{
    return p->has_start_mono ? p->start_mono_ns : 0;
}

int64_t coll_mean(int64_t total, int64_t count)
{
    return count > 0 ? total / count : 0;
}
