/*
 * coll_checks.c - the judgements of `cutrace collectives` on a built
 * report (see coll_checks.h): every rank of a communicator must make every
 * collective the same number of times, calls must not fail, every send
 * must meet its receive, and the processes should run one NCCL and know
 * the communicators they call on.
 */
#include "analysis/coll_checks.h"

#include "cli.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const coll_problem_keys[] = {
    [COLL_PROBLEM_MISSING_RANKS] = "missing_ranks",
    [COLL_PROBLEM_UNKNOWN_SIZE] = "unknown_size",
    [COLL_PROBLEM_NRANKS_DIFFER] = "nranks_differ",
    [COLL_PROBLEM_RANK_INVALID] = "rank_invalid",
    [COLL_PROBLEM_DUPLICATE_RANK] = "duplicate_rank",
    [COLL_PROBLEM_INIT_FAILED] = "init_failed",
    [COLL_PROBLEM_PARENTS_DIFFER] = "parents_differ",
    [COLL_PROBLEM_CALLS_DIFFER] = "call_counts_differ",
    [COLL_PROBLEM_FAILED_CALLS] = "failed_calls",
    [COLL_PROBLEM_P2P_UNMATCHED] = "p2p_unmatched",
    [COLL_PROBLEM_P2P_BAD_PEER] = "p2p_peer_not_in_communicator",
    [COLL_PROBLEM_NCCL_VERSIONS_DIFFER] = "nccl_versions_differ",
    [COLL_PROBLEM_UNATTRIBUTED_CALLS] = "unattributed_calls",
};

struct coll_problem *coll_add_problem(struct coll_problem **list, size_t *count, size_t *cap,
                                      enum coll_problem_kind kind)
{
    *list = xgrow(*list, cap, *count + 1, sizeof(**list));
    struct coll_problem *p = &(*list)[(*count)++];
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    return p;
}

void coll_problem_add_rank(struct coll_problem *p, const struct coll_report *r,
                           const struct coll_member *m, int64_t value)
{
    p->ranks = xgrow(p->ranks, &p->ranks_cap, p->nranks + 1, sizeof(*p->ranks));
    const struct coll_proc *proc = &r->procs[m->proc];
    p->ranks[p->nranks++] = (struct coll_problem_rank){.has_rank = m->comm->has_rank,
                                                       .rank = m->comm->rank,
                                                       .has_pid = proc->has_pid,
                                                       .pid = proc->pid,
                                                       .value = value};
}

/* "rank 3", or the process when the communicator has no rank. */
void coll_member_label(char *buf, size_t size, const struct coll_report *r,
                       const struct coll_member *m)
{
    const struct coll_proc *p = &r->procs[m->proc];
    if (m->comm->has_rank)
        snprintf(buf, size, "rank %" PRId64, m->comm->rank);
    else if (p->has_pid)
        snprintf(buf, size, "pid %" PRId64 " (no rank)", p->pid);
    else
        snprintf(buf, size, "%s (no rank)", p->trace->file);
}

void coll_pid_text(char *buf, size_t size, const struct coll_proc *p)
{
    if (p->has_pid)
        snprintf(buf, size, "pid %" PRId64, p->pid);
    else
        snprintf(buf, size, "%s", p->trace->file);
}

/* The group's first active member with that rank, or NULL. */
const struct coll_member *coll_rank_member(const struct coll_report *r, const struct coll_group *g,
                                           int64_t rank)
{
    size_t lo = 0, hi = g->nmembers;
    while (lo < hi) { /* members are in rank order, rankless last */
        size_t mid = lo + (hi - lo) / 2;
        const struct nccl_comm *c = r->members[g->members[mid]].comm;
        if (c->has_rank && c->rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < g->nmembers; lo++) {
        const struct coll_member *m = &r->members[g->members[lo]];
        if (!m->comm->has_rank || m->comm->rank != rank)
            return NULL;
        if (m->active)
            return m;
    }
    return NULL;
}

static int compare_counts(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/*
 * An op whose call counts differ between the ranks of a communicator: every
 * rank must make every collective, so a rank behind its peers stopped (it
 * exited or crashed) or took another path, and the others wait for it.
 * The count most ranks share (the larger on a tie) is taken as the norm.
 */
void coll_check_call_counts(struct coll_report *r, struct coll_group *g, const struct coll_op *op)
{
    if (op->p2p || g->nactive < 2 || op->min_calls == op->max_calls)
        return;
    size_t n = 0;
    int64_t *counts = xcalloc(g->nmembers, sizeof(*counts));
    for (size_t k = 0; k < g->nmembers; k++)
        if (r->members[g->members[k]].active)
            counts[n++] = op->member_calls[k];
    /* Sorted, equal counts are runs: the longest run (the later one on a
     * tie, which is the larger count) is the norm. */
    if (n > 1)
        qsort(counts, n, sizeof(*counts), compare_counts);
    int64_t norm = counts[0];
    size_t best = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && counts[j] == counts[i])
            j++;
        if (j - i >= best) {
            best = j - i;
            norm = counts[i];
        }
        i = j;
    }
    free(counts);

    struct coll_problem *p =
        coll_add_problem(&g->problems, &g->nproblems, &g->problems_cap, COLL_PROBLEM_CALLS_DIFFER);
    p->op = op->op;
    p->has_expected = true;
    p->expected = norm;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        cli_error(NULL, "out of memory");
        exit(CLI_EXIT_BAD_INPUT);
    }
    bool fewer_only = true;
    size_t others = 0, named = 0;
    const struct coll_member *other = NULL;
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct coll_member *m = &r->members[g->members[k]];
        if (!m->active)
            continue;
        int64_t calls = op->member_calls[k];
        if (calls == norm) {
            others++;
            other = m;
            continue;
        }
        fewer_only = fewer_only && calls < norm;
        coll_problem_add_rank(p, r, m, calls);
        char who[96];
        coll_member_label(who, sizeof(who), r, m);
        if (named++ == 0)
            fprintf(out, "%s made %" PRId64 " %s", who, calls, op->op);
        else
            fprintf(out, ", %s made %" PRId64, who, calls);
    }
    assert(named > 0 && others > 0);
    if (others == 1) {
        char who[96];
        coll_member_label(who, sizeof(who), r, other);
        fprintf(out, ", %s made %" PRId64, who, norm);
    } else {
        fprintf(out, ", the others %" PRId64, norm);
    }
    if (fewer_only)
        fprintf(out, ": %s that exited early or desynchronised \u2014 this looks like a hang",
                named == 1 ? "a rank" : "ranks");
    else
        fprintf(out, ": ranks out of step \u2014 this looks like a desynchronisation or a hang");
    if (fclose(out) != 0 || !text) {
        cli_error(NULL, "out of memory");
        exit(CLI_EXIT_BAD_INPUT);
    }
    p->message = text;
}

void coll_check_failed_calls(struct coll_report *r, struct coll_group *g, const struct coll_op *op)
{
    if (op->failed == 0)
        return;
    /* Per member: its failures of this op across datatypes and sizes. */
    int64_t *failed = xcalloc(g->nmembers, sizeof(*failed));
    for (size_t ri = op->first_row; ri < op->first_row + op->nrows; ri++) {
        const struct coll_row *row = &g->rows[ri];
        for (size_t ci = row->first_cell; ci < row->first_cell + row->ncells; ci++) {
            size_t pos = r->members[g->cells[ci].member].position;
            failed[pos] = gm_add(failed[pos], g->cells[ci].failed);
        }
    }
    for (size_t k = 0; k < g->nmembers; k++) {
        if (failed[k] == 0)
            continue;
        const struct coll_member *m = &r->members[g->members[k]];
        char who[96], pid[96];
        coll_member_label(who, sizeof(who), r, m);
        coll_pid_text(pid, sizeof(pid), &r->procs[m->proc]);
        struct coll_problem *p = coll_add_problem(&g->problems, &g->nproblems, &g->problems_cap,
                                                  COLL_PROBLEM_FAILED_CALLS);
        p->op = op->op;
        p->has_expected = true;
        p->expected = op->member_calls[k];
        p->message = xasprintf("%s (%s): %" PRId64 " of %" PRId64 " %s failed", who, pid, failed[k],
                               op->member_calls[k], op->op);
        coll_problem_add_rank(p, r, m, failed[k]);
    }
    free(failed);
}

/* A pair whose two sides were both traced must match call for call. */
void coll_check_pairs(struct coll_report *r, struct coll_group *g)
{
    for (size_t i = 0; i < g->npairs; i++) {
        const struct coll_pair *pair = &g->pairs[i];
        if (!pair->sender_traced || !pair->receiver_traced || pair->sends == pair->recvs)
            continue;
        struct coll_problem *p = coll_add_problem(&g->problems, &g->nproblems, &g->problems_cap,
                                                  COLL_PROBLEM_P2P_UNMATCHED);
        p->message =
            xasprintf("rank %" PRId64 " sent %" PRId64 " to rank %" PRId64 ", but rank %" PRId64
                      " received %" PRId64 " from rank %" PRId64
                      ": a send or receive without its match waits forever",
                      pair->from, pair->sends, pair->to, pair->to, pair->recvs, pair->from);
        p->has_expected = true;
        p->expected = pair->sends;
        /* Both sides were traced, so both have a member. */
        const struct coll_member *sender = coll_rank_member(r, g, pair->from);
        const struct coll_member *receiver = coll_rank_member(r, g, pair->to);
        assert(sender && receiver);
        coll_problem_add_rank(p, r, sender, pair->sends);
        coll_problem_add_rank(p, r, receiver, pair->recvs);
    }
}

/* Problems about the directory: NCCL versions and calls on no communicator. */
void coll_check_processes(struct coll_report *r)
{
    int64_t version = 0;
    bool differ = false;
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct nccl_info *n = &r->procs[i].nccl;
        if (!n->has_version)
            continue;
        if (version && n->version != version)
            differ = true;
        if (!version)
            version = n->version;
    }
    if (differ) {
        struct coll_problem *p = coll_add_problem(&r->problems, &r->nproblems, &r->problems_cap,
                                                  COLL_PROBLEM_NCCL_VERSIONS_DIFFER);
        p->message = xstrdup("the processes loaded different NCCL versions (see the process list"
                             " in --json): mixing versions in one communicator is unsupported");
        for (size_t i = 0; i < r->nprocs; i++) {
            const struct coll_proc *proc = &r->procs[i];
            if (!proc->nccl.has_version)
                continue;
            p->ranks = xgrow(p->ranks, &p->ranks_cap, p->nranks + 1, sizeof(*p->ranks));
            p->ranks[p->nranks++] = (struct coll_problem_rank){
                .has_pid = proc->has_pid, .pid = proc->pid, .value = proc->nccl.version};
        }
    }
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct coll_proc *proc = &r->procs[i];
        int64_t calls = 0;
        for (size_t k = 0; k < proc->norphans; k++)
            calls = gm_add(calls, proc->orphans[k].calls);
        if (calls == 0)
            continue;
        char who[96];
        coll_pid_text(who, sizeof(who), proc);
        struct coll_problem *p = coll_add_problem(&r->problems, &r->nproblems, &r->problems_cap,
                                                  COLL_PROBLEM_UNATTRIBUTED_CALLS);
        p->message = xasprintf("%s made %" PRId64 " NCCL call%s on communicators whose init its"
                               " trace does not hold (made before tracing began, or failed)",
                               who, calls, calls == 1 ? "" : "s");
        p->ranks = xcalloc(1, sizeof(*p->ranks));
        p->ranks_cap = p->nranks = 1;
        p->ranks[0] =
            (struct coll_problem_rank){.has_pid = proc->has_pid, .pid = proc->pid, .value = calls};
    }
}
