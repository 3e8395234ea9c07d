/*
 * cmd_collectives.c - `cutrace collectives DIR [--json]`: the NCCL
 * communicators of every traced process, joined across processes into one
 * group per communicator (its ranks), with every collective and
 * point-to-point call counted per rank, so that a rank that made fewer
 * calls than its peers (it exited early or desynchronised: the usual cause
 * of a hang), a rank with no trace, or a send without its receive shows.
 *
 * A group is keyed by unique_id_hash, which every rank of a communicator
 * records identically (splits get one derived from the parent's). Its
 * members are communicators, not processes: (trace, comm_id) pairs, since a
 * process may hold several ranks of one group (ncclCommInitAll).
 *
 * The report is built completely before anything is printed, so a trace
 * found damaged halfway through gives one line on stderr and no partial
 * report. Numbers from traces are untrusted: sums saturate, negative sizes
 * and durations are left out of totals, ranks outside the communicator are
 * reported instead of indexed with, and nothing is sized by a count a trace
 * claims (nranks may be anything).
 */
#include "cli.h"
#include "model/errnames.h"
#include "out/json.h"
#include "model/nccl.h"
#include "out/table.h"
#include "model/trace.h"
#include "model/traceset.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_MISSING_RANGES 8 /* missing-rank ranges named in a text message */
#define TEXT_WIDTH          TABLE_MAX_WIDTH

static const char usage[] =
    "usage: cutrace collectives [--json] DIR\n"
    "\n"
    "Join the NCCL communicators of every trace in DIR (or one trace file) by\n"
    "their unique id: per communicator its ranks (process, host, GPU, init\n"
    "result, lifetime) and which ranks have no trace, then its collective calls\n"
    "per operation, datatype and message size (calls per rank, bytes, host time,\n"
    "captured into CUDA graphs or not, inside ncclGroupStart/End, failed), and\n"
    "sends and receives per pair of ranks. Ranks whose call counts differ, ranks\n"
    "without a trace and unmatched sends/receives are flagged.\n"
    "\n"
    "options:\n"
    "  --json      one JSON document with raw numbers (bytes, nanoseconds)\n"
    "  -h, --help  show this help\n"
    "\n"
    "exit status: 0 ok (also when there are no NCCL calls), 1 unreadable or\n"
    "invalid trace, 2 usage error\n";

/* ---- saturating arithmetic on untrusted values ---- */

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int64_t nonneg(int64_t v)
{
    return v < 0 ? 0 : v;
}

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

/* ---- the report model ---- */

struct device_name {
    int64_t device;
    char *uuid;
};

struct op_count {
    char *op;
    int64_t calls;
};

struct proc {
    struct trace *trace;
    bool has_pid;
    int64_t pid;
    char *host;
    bool has_start_mono, has_start_wall;
    int64_t start_mono_ns, start_wall_ns;
    struct nccl_info nccl;
    struct device_name *devices;
    size_t ndevices;
    size_t first_member;      /* its communicators are members first_member.. */
    struct op_count *orphans; /* calls on communicators whose init it lacks */
    size_t norphans, orphans_cap;
};

struct member {
    size_t proc;
    const struct nccl_comm *comm; /* borrowed from the proc's nccl info */
    const char *uuid;             /* its GPU, borrowed; NULL unknown */
    size_t group, position;       /* its group and its place in the group's list */
    bool active;                  /* the init succeeded, so it could make calls */
};

/* One member's calls of one (op, datatype, size bucket). */
struct cell {
    size_t group;
    char *op, *datatype; /* owned */
    int64_t bucket;
    size_t member;
    bool p2p;
    int64_t calls, bytes, dur_ns, max_dur_ns, captured, in_group, failed;
};

/* One member's sends or receives to or from one peer. */
struct p2p_part {
    size_t member;
    bool send;
    bool has_peer;
    int64_t peer, calls, bytes;
};

/* Sends from rank `from` to rank `to` as the sender saw them, and the
 * receives the receiver made from the sender. */
struct pair {
    size_t group;
    int64_t from, to;
    int64_t sends, send_bytes, recvs, recv_bytes;
    bool sender_traced, receiver_traced;
};

/* The calls of one (op, datatype, bucket) in a group: a run of cells. */
struct row {
    size_t first_cell, ncells;
    int64_t calls, bytes, dur_ns, max_dur_ns, captured, in_group, failed;
    int64_t min_calls, max_calls; /* per active member, 0 for one without */
};

/* One op of a group: a run of rows. */
struct op_summary {
    const char *op; /* borrowed from a cell */
    bool p2p;
    size_t first_row, nrows;
    int64_t calls, failed, min_calls, max_calls;
    int64_t *member_calls; /* per group member (by position) */
};

enum problem_kind {
    PROBLEM_MISSING_RANKS,
    PROBLEM_UNKNOWN_SIZE,
    PROBLEM_NRANKS_DIFFER,
    PROBLEM_RANK_INVALID,
    PROBLEM_DUPLICATE_RANK,
    PROBLEM_INIT_FAILED,
    PROBLEM_PARENTS_DIFFER,
    PROBLEM_CALLS_DIFFER,
    PROBLEM_FAILED_CALLS,
    PROBLEM_P2P_UNMATCHED,
    PROBLEM_P2P_BAD_PEER,
    PROBLEM_NCCL_VERSIONS_DIFFER,
    PROBLEM_UNATTRIBUTED_CALLS,
};

static const char *const problem_keys[] = {
    [PROBLEM_MISSING_RANKS] = "missing_ranks",
    [PROBLEM_UNKNOWN_SIZE] = "unknown_size",
    [PROBLEM_NRANKS_DIFFER] = "nranks_differ",
    [PROBLEM_RANK_INVALID] = "rank_invalid",
    [PROBLEM_DUPLICATE_RANK] = "duplicate_rank",
    [PROBLEM_INIT_FAILED] = "init_failed",
    [PROBLEM_PARENTS_DIFFER] = "parents_differ",
    [PROBLEM_CALLS_DIFFER] = "call_counts_differ",
    [PROBLEM_FAILED_CALLS] = "failed_calls",
    [PROBLEM_P2P_UNMATCHED] = "p2p_unmatched",
    [PROBLEM_P2P_BAD_PEER] = "p2p_peer_not_in_communicator",
    [PROBLEM_NCCL_VERSIONS_DIFFER] = "nccl_versions_differ",
    [PROBLEM_UNATTRIBUTED_CALLS] = "unattributed_calls",
};

/* A rank named by a problem, with the number it is flagged for. */
struct problem_rank {
    bool has_rank, has_pid;
    int64_t rank, pid, value;
};

struct problem {
    enum problem_kind kind;
    char *message;
    const char *op; /* borrowed; NULL when not about one op */
    bool has_expected;
    int64_t expected; /* the count most ranks agree on, sends to match, ... */
    struct problem_rank *ranks;
    size_t nranks, ranks_cap;
};

struct range {
    int64_t first, last;
};

struct group {
    const char *hash; /* borrowed from a member's comm */
    size_t *members;  /* indexes into report.members, in rank order */
    size_t nmembers, members_cap, nactive;
    bool has_nranks;
    int64_t nranks;
    int64_t ranks_traced, missing_count;
    struct range *missing;
    size_t nmissing, missing_cap;
    bool has_parent; /* a split of another group */
    const char *parent_hash;
    bool has_color;
    int64_t color;
    struct cell *cells; /* a slice of report.cells */
    size_t ncells;
    struct row *rows;
    size_t nrows, rows_cap;
    struct op_summary *ops;
    size_t nops, ops_cap;
    struct pair *pairs; /* a slice of report.pairs */
    size_t npairs;
    struct problem *problems;
    size_t nproblems, problems_cap;
    int64_t calls, p2p_calls, failed;
    int64_t order_key; /* earliest init, in wall-clock time where known */
};

struct report {
    const char *path;
    struct proc *procs;
    size_t nprocs;
    struct member *members;
    size_t nmembers, members_cap;
    struct cell *cells;
    size_t ncells, cells_cap;
    struct p2p_part *parts;
    size_t nparts, parts_cap;
    struct pair *pairs;
    size_t npairs, pairs_cap;
    struct group *groups;
    size_t ngroups, groups_cap;
    struct problem *problems; /* about the directory, not one communicator */
    size_t nproblems, problems_cap;
    int64_t collective_calls, p2p_calls, failed_calls, unattributed_calls;
    size_t total_problems;
};

static struct problem *add_problem(struct problem **list, size_t *count, size_t *cap,
                                   enum problem_kind kind)
{
    *list = xgrow(*list, cap, *count + 1, sizeof(**list));
    struct problem *p = &(*list)[(*count)++];
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    return p;
}

static void problem_add_rank(struct problem *p, const struct report *r, const struct member *m,
                             int64_t value)
{
    p->ranks = xgrow(p->ranks, &p->ranks_cap, p->nranks + 1, sizeof(*p->ranks));
    const struct proc *proc = &r->procs[m->proc];
    p->ranks[p->nranks++] = (struct problem_rank){.has_rank = m->comm->has_rank,
                                                  .rank = m->comm->rank,
                                                  .has_pid = proc->has_pid,
                                                  .pid = proc->pid,
                                                  .value = value};
}

/* ---- loading one trace ---- */

/* For a trace that lost its process row. */
static void identity_from_file_name(struct proc *p)
{
    int64_t pid, start;
    char *host;
    if (!trace_identity_from_file_name(p->trace->file, &pid, &start, &host))
        return;
    p->pid = pid;
    p->has_pid = true;
    free(p->host);
    p->host = host;
}

static int load_process(struct proc *p)
{
    struct trace *t = p->trace;
    sqlite3_stmt *stmt =
        trace_query(t, "SELECT pid, host, start_mono_ns, start_wall_ns FROM process LIMIT 1", "");
    if (!stmt)
        return -1;
    int rc = trace_step(t, stmt);
    if (rc == 1) {
        p->has_pid = !col_is_null(stmt, 0);
        p->pid = col_int(stmt, 0, 0);
        p->host = col_text(stmt, 1);
        p->has_start_mono = !col_is_null(stmt, 2);
        p->start_mono_ns = col_int(stmt, 2, 0);
        p->has_start_wall = !col_is_null(stmt, 3);
        p->start_wall_ns = col_int(stmt, 3, 0);
    }
    sqlite3_finalize(stmt);
    if (rc < 0)
        return -1;
    if (!p->has_pid)
        identity_from_file_name(p);

    stmt = trace_query(t, "SELECT device, uuid FROM devices ORDER BY device", "");
    if (!stmt)
        return -1;
    size_t cap = 0;
    while ((rc = trace_step(t, stmt)) == 1) {
        char *uuid = col_text(stmt, 1);
        if (!uuid || uuid[0] == '\0') {
            free(uuid);
            continue;
        }
        p->devices = xgrow(p->devices, &cap, p->ndevices + 1, sizeof(*p->devices));
        p->devices[p->ndevices++] = (struct device_name){col_int(stmt, 0, -1), uuid};
    }
    sqlite3_finalize(stmt);
    return rc;
}

static const char *device_uuid(const struct proc *p, int64_t device)
{
    for (size_t i = 0; i < p->ndevices; i++)
        if (p->devices[i].device == device)
            return p->devices[i].uuid;
    return NULL;
}

static void add_orphan(struct proc *p, const char *op, int64_t calls)
{
    for (size_t i = 0; i < p->norphans; i++)
        if (cmp_str(p->orphans[i].op, op) == 0) {
            p->orphans[i].calls = sat_add(p->orphans[i].calls, calls);
            return;
        }
    p->orphans = xgrow(p->orphans, &p->orphans_cap, p->norphans + 1, sizeof(*p->orphans));
    p->orphans[p->norphans++] = (struct op_count){xstrdup(op ? op : "?"), calls};
}

static bool is_p2p(const struct trace *t, const char *op)
{
    const struct trace_api *api = trace_api_by_name(t, op);
    return api && api->role && strcmp(api->role, "p2p") == 0;
}

/* Every collective and p2p call of the trace, counted per communicator,
 * op, datatype, size bucket and root/peer in one pass of SQLite. */
static int load_calls(struct report *r, size_t pi)
{
    struct proc *p = &r->procs[pi];
    struct trace *t = p->trace;
    sqlite3_stmt *stmt = trace_query(
        t,
        "SELECT comm_id, op, datatype, " NCCL_BUCKET_FUNCTION "(bytes) AS bucket, peer,"
        " count(*), " TRACE_SUM_FUNCTION "(bytes), " TRACE_SUM_FUNCTION "(dur_ns), max(dur_ns),"
        " sum(captured = 1), sum(in_group > 0), sum(result <> 0)"
        " FROM collectives GROUP BY comm_id, op, datatype, bucket, peer",
        "");
    if (!stmt)
        return -1;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        char *op = col_text(stmt, 1);
        int64_t calls = col_int(stmt, 5, 0);
        bool p2p = is_p2p(t, op);
        if (p2p)
            r->p2p_calls = sat_add(r->p2p_calls, calls);
        else
            r->collective_calls = sat_add(r->collective_calls, calls);
        int64_t failed = col_int(stmt, 11, 0);
        r->failed_calls = sat_add(r->failed_calls, failed);
        /* The process's counts, which nccl_load left to this pass. */
        struct nccl_info *n = &p->nccl;
        n->calls = sat_add(n->calls, calls);
        n->failed_calls = sat_add(n->failed_calls, failed);
        const struct nccl_comm *found =
            col_is_null(stmt, 0) ? NULL : nccl_find_comm(n, col_int(stmt, 0, -1));
        if (!found) {
            add_orphan(p, op, calls);
            n->unattributed_calls = sat_add(n->unattributed_calls, calls);
            r->unattributed_calls = sat_add(r->unattributed_calls, calls);
            free(op);
            continue;
        }
        struct nccl_comm *comm = &n->comms[found - n->comms];
        comm->calls = sat_add(comm->calls, calls);
        comm->failed_calls = sat_add(comm->failed_calls, failed);
        size_t member = p->first_member + (size_t)(comm - n->comms);
        assert(member < r->nmembers && r->members[member].comm == comm);
        r->cells = xgrow(r->cells, &r->cells_cap, r->ncells + 1, sizeof(*r->cells));
        struct cell *c = &r->cells[r->ncells++];
        memset(c, 0, sizeof(*c));
        c->op = op ? op : xstrdup("?");
        c->datatype = col_text(stmt, 2);
        if (!c->datatype)
            c->datatype = xstrdup("?");
        c->bucket = col_int(stmt, 3, -1);
        c->member = member;
        c->p2p = p2p;
        c->calls = calls;
        c->bytes = col_int(stmt, 6, 0);
        c->dur_ns = col_int(stmt, 7, 0);
        c->max_dur_ns = nonneg(col_int(stmt, 8, 0));
        c->captured = col_int(stmt, 9, 0);
        c->in_group = col_int(stmt, 10, 0);
        c->failed = failed;
        bool send = strcmp(c->op, "ncclSend") == 0, recv = strcmp(c->op, "ncclRecv") == 0;
        if (p2p && (send || recv)) {
            r->parts = xgrow(r->parts, &r->parts_cap, r->nparts + 1, sizeof(*r->parts));
            r->parts[r->nparts++] = (struct p2p_part){.member = member,
                                                      .send = send,
                                                      .has_peer = !col_is_null(stmt, 4),
                                                      .peer = col_int(stmt, 4, -1),
                                                      .calls = calls,
                                                      .bytes = c->bytes};
        }
    }
    sqlite3_finalize(stmt);
    return rc;
}

static int load_trace(struct report *r, size_t pi)
{
    struct proc *p = &r->procs[pi];
    if (load_process(p) != 0 || nccl_load(p->trace, true, false, &p->nccl) != 0 ||
        nccl_register_functions(p->trace) != 0)
        return -1;
    p->first_member = r->nmembers;
    for (size_t i = 0; i < p->nccl.ncomms; i++) {
        const struct nccl_comm *c = &p->nccl.comms[i];
        r->members = xgrow(r->members, &r->members_cap, r->nmembers + 1, sizeof(*r->members));
        r->members[r->nmembers++] = (struct member){.proc = pi,
                                                    .comm = c,
                                                    .uuid = device_uuid(p, c->device),
                                                    .active = c->init_result == 0};
    }
    return load_calls(r, pi);
}

/* ---- building the groups ---- */

static const struct report *sort_report; /* qsort has no context argument */

static int compare_members_by_hash(const void *a, const void *b)
{
    const struct member *x = &sort_report->members[*(const size_t *)a];
    const struct member *y = &sort_report->members[*(const size_t *)b];
    int c = strcmp(x->comm->hash, y->comm->hash);
    return c ? c : cmp_i64((int64_t) * (const size_t *)a, (int64_t) * (const size_t *)b);
}

/* Rank order; members without a rank last; then process and comm_id. */
static int compare_members_by_rank(const void *a, const void *b)
{
    const struct member *x = &sort_report->members[*(const size_t *)a];
    const struct member *y = &sort_report->members[*(const size_t *)b];
    if (x->comm->has_rank != y->comm->has_rank)
        return x->comm->has_rank ? -1 : 1;
    int c = cmp_i64(x->comm->rank, y->comm->rank);
    if (c)
        return c;
    const struct proc *px = &sort_report->procs[x->proc], *py = &sort_report->procs[y->proc];
    if ((c = cmp_i64(px->pid, py->pid)) != 0)
        return c;
    if ((c = strcmp(px->trace->file, py->trace->file)) != 0)
        return c;
    return cmp_i64(x->comm->comm_id, y->comm->comm_id);
}

/* When the member's init happened, in wall-clock time where the trace
 * allows (the only clock processes on different hosts share). */
static int64_t init_wall_ns(const struct report *r, const struct member *m)
{
    const struct proc *p = &r->procs[m->proc];
    if (p->has_start_mono && p->has_start_wall)
        return sat_add(p->start_wall_ns, sat_sub(m->comm->t_init_ns, p->start_mono_ns));
    return m->comm->t_init_ns;
}

static void make_groups(struct report *r)
{
    size_t *order = xcalloc(r->nmembers, sizeof(*order));
    for (size_t i = 0; i < r->nmembers; i++)
        order[i] = i;
    sort_report = r;
    sort_array(order, r->nmembers, sizeof(*order), compare_members_by_hash);
    for (size_t i = 0; i < r->nmembers; i++) {
        struct member *m = &r->members[order[i]];
        if (i == 0 || strcmp(r->members[order[i - 1]].comm->hash, m->comm->hash) != 0) {
            r->groups = xgrow(r->groups, &r->groups_cap, r->ngroups + 1, sizeof(*r->groups));
            struct group *g = &r->groups[r->ngroups++];
            memset(g, 0, sizeof(*g));
            g->hash = m->comm->hash;
            g->order_key = INT64_MAX;
        }
        struct group *g = &r->groups[r->ngroups - 1];
        g->members = xgrow(g->members, &g->members_cap, g->nmembers + 1, sizeof(*g->members));
        g->members[g->nmembers++] = order[i];
        m->group = r->ngroups - 1;
        int64_t at = init_wall_ns(r, m);
        if (at < g->order_key)
            g->order_key = at;
    }
    free(order);
    for (size_t gi = 0; gi < r->ngroups; gi++) {
        struct group *g = &r->groups[gi];
        sort_array(g->members, g->nmembers, sizeof(*g->members), compare_members_by_rank);
        for (size_t k = 0; k < g->nmembers; k++) {
            struct member *m = &r->members[g->members[k]];
            m->position = k;
            if (m->active)
                g->nactive++;
        }
    }
}

/* "rank 3", or the process when the communicator has no rank. */
static void member_label(char *buf, size_t size, const struct report *r, const struct member *m)
{
    const struct proc *p = &r->procs[m->proc];
    if (m->comm->has_rank)
        snprintf(buf, size, "rank %" PRId64, m->comm->rank);
    else if (p->has_pid)
        snprintf(buf, size, "pid %" PRId64 " (no rank)", p->pid);
    else
        snprintf(buf, size, "%s (no rank)", p->trace->file);
}

static void pid_text(char *buf, size_t size, const struct proc *p)
{
    if (p->has_pid)
        snprintf(buf, size, "pid %" PRId64, p->pid);
    else
        snprintf(buf, size, "%s", p->trace->file);
}

/* "rank 2", "ranks 1, 3 and 5-7", at most `limit` ranges then "and N more". */
static char *ranges_text(const struct range *ranges, size_t count, size_t limit)
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
static bool rank_valid(const struct group *g, const struct nccl_comm *c)
{
    return c->has_rank && c->rank >= 0 && (!g->has_nranks || c->rank < g->nranks);
}

/* Size, missing ranks and problems with the members themselves. */
static void check_ranks(struct report *r, struct group *g)
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
        struct problem *p =
            add_problem(&g->problems, &g->nproblems, &g->problems_cap, PROBLEM_UNKNOWN_SIZE);
        p->message = xstrdup("its size is unknown: no rank recorded a valid nranks");
    } else if (low != g->nranks) {
        struct problem *p =
            add_problem(&g->problems, &g->nproblems, &g->problems_cap, PROBLEM_NRANKS_DIFFER);
        p->message = xasprintf("its ranks disagree on its size (nranks %" PRId64 " to %" PRId64
                               "); counting %" PRId64,
                               low, g->nranks, g->nranks);
        for (size_t k = 0; k < g->nmembers; k++) {
            const struct member *m = &r->members[g->members[k]];
            problem_add_rank(p, r, m, m->comm->nranks);
        }
    }

    /* Members are in rank order: duplicates are adjacent, gaps are missing. */
    int64_t next = 0; /* the lowest rank not yet seen */
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct member *m = &r->members[g->members[k]];
        const struct nccl_comm *c = m->comm;
        char who[96];
        pid_text(who, sizeof(who), &r->procs[m->proc]);
        if (!rank_valid(g, c)) {
            struct problem *p =
                add_problem(&g->problems, &g->nproblems, &g->problems_cap, PROBLEM_RANK_INVALID);
            if (c->has_rank)
                p->message = xasprintf("%s holds rank %" PRId64 ", outside 0-%" PRId64, who,
                                       c->rank, g->has_nranks ? g->nranks - 1 : 0);
            else
                p->message = xasprintf("%s holds no rank", who);
            problem_add_rank(p, r, m, c->rank);
            continue;
        }
        if (k > 0) {
            const struct nccl_comm *prev = r->members[g->members[k - 1]].comm;
            if (prev->has_rank && prev->rank == c->rank) {
                struct problem *p = add_problem(&g->problems, &g->nproblems, &g->problems_cap,
                                                PROBLEM_DUPLICATE_RANK);
                p->message = xasprintf("rank %" PRId64 " is held more than once (again by %s)",
                                       c->rank, who);
                problem_add_rank(p, r, m, c->rank);
                continue;
            }
        }
        if (c->rank > next) {
            g->missing = xgrow(g->missing, &g->missing_cap, g->nmissing + 1, sizeof(*g->missing));
            g->missing[g->nmissing++] = (struct range){next, c->rank - 1};
            g->missing_count = sat_add(g->missing_count, c->rank - next);
        }
        next = c->rank + 1;
        g->ranks_traced++;
    }
    if (g->has_nranks && next < g->nranks) {
        g->missing = xgrow(g->missing, &g->missing_cap, g->nmissing + 1, sizeof(*g->missing));
        g->missing[g->nmissing++] = (struct range){next, g->nranks - 1};
        g->missing_count = sat_add(g->missing_count, g->nranks - next);
    }
    if (g->missing_count > 0) {
        struct problem *p =
            add_problem(&g->problems, &g->nproblems, &g->problems_cap, PROBLEM_MISSING_RANKS);
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
        const struct member *m = &r->members[g->members[k]];
        if (m->active)
            continue;
        char who[96], pid[96], result[64];
        member_label(who, sizeof(who), r, m);
        pid_text(pid, sizeof(pid), &r->procs[m->proc]);
        result_describe(result, sizeof(result), LAYER_NCCL, m->comm->init_result);
        struct problem *p =
            add_problem(&g->problems, &g->nproblems, &g->problems_cap, PROBLEM_INIT_FAILED);
        p->message =
            xasprintf("%s (%s): %s failed with %" PRId64 " %s", who, pid,
                      m->comm->api ? m->comm->api : "its init", m->comm->init_result, result);
        problem_add_rank(p, r, m, m->comm->init_result);
    }
}

/* The group a split came from: its parent communicator's group, with the
 * color. Members should agree; a disagreement is a problem. */
static void find_parent(struct report *r, struct group *g)
{
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct member *m = &r->members[g->members[k]];
        if (!m->comm->has_parent)
            continue;
        const struct proc *p = &r->procs[m->proc];
        const struct nccl_comm *parent = nccl_find_comm(&p->nccl, m->comm->parent_comm_id);
        const char *hash = parent ? parent->hash : NULL;
        if (!g->has_parent) {
            g->has_parent = true;
            g->parent_hash = hash;
            g->has_color = m->comm->has_color;
            g->color = m->comm->color;
        } else if (cmp_str(g->parent_hash, hash) != 0 || g->color != m->comm->color) {
            struct problem *pr =
                add_problem(&g->problems, &g->nproblems, &g->problems_cap, PROBLEM_PARENTS_DIFFER);
            char who[96];
            member_label(who, sizeof(who), r, m);
            pr->message =
                xasprintf("%s was split from %s with color %" PRId64
                          ", its peers from %s with color %" PRId64,
                          who, hash ? hash : "an unknown communicator", m->comm->color,
                          g->parent_hash ? g->parent_hash : "an unknown communicator", g->color);
            problem_add_rank(pr, r, m, m->comm->color);
        }
    }
}

static int compare_cells(const void *a, const void *b)
{
    const struct cell *x = a, *y = b;
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

static bool same_cell(const struct cell *a, const struct cell *b)
{
    return a->group == b->group && a->p2p == b->p2p && strcmp(a->op, b->op) == 0 &&
           strcmp(a->datatype, b->datatype) == 0 && a->bucket == b->bucket &&
           a->member == b->member;
}

/* Sorts the cells into group, op, datatype, bucket, rank order, merges the
 * ones split by root or peer, and hands each group its slice. */
static void distribute_cells(struct report *r)
{
    for (size_t i = 0; i < r->ncells; i++)
        r->cells[i].group = r->members[r->cells[i].member].group;
    sort_report = r;
    sort_array(r->cells, r->ncells, sizeof(*r->cells), compare_cells);
    size_t out = 0;
    for (size_t i = 0; i < r->ncells; i++) {
        struct cell *c = &r->cells[i];
        if (out > 0 && same_cell(&r->cells[out - 1], c)) {
            struct cell *into = &r->cells[out - 1];
            into->calls = sat_add(into->calls, c->calls);
            into->bytes = sat_add(into->bytes, c->bytes);
            into->dur_ns = sat_add(into->dur_ns, c->dur_ns);
            if (c->max_dur_ns > into->max_dur_ns)
                into->max_dur_ns = c->max_dur_ns;
            into->captured = sat_add(into->captured, c->captured);
            into->in_group = sat_add(into->in_group, c->in_group);
            into->failed = sat_add(into->failed, c->failed);
            free(c->op);
            free(c->datatype);
            continue;
        }
        r->cells[out++] = *c;
    }
    r->ncells = out;
    for (size_t i = 0; i < r->ncells;) {
        struct group *g = &r->groups[r->cells[i].group];
        g->cells = &r->cells[i];
        while (i < r->ncells && &r->groups[r->cells[i].group] == g) {
            g->ncells++;
            i++;
        }
    }
}

/* Rows (op, datatype, bucket) and ops of a group, from its sorted cells. */
static void summarise_calls(struct report *r, struct group *g)
{
    for (size_t i = 0; i < g->ncells;) {
        const struct cell *first = &g->cells[i];
        g->rows = xgrow(g->rows, &g->rows_cap, g->nrows + 1, sizeof(*g->rows));
        struct row *row = &g->rows[g->nrows++];
        memset(row, 0, sizeof(*row));
        row->first_cell = i;
        row->min_calls = INT64_MAX;
        size_t active_with_calls = 0;
        for (; i < g->ncells && g->cells[i].p2p == first->p2p &&
               strcmp(g->cells[i].op, first->op) == 0 &&
               strcmp(g->cells[i].datatype, first->datatype) == 0 &&
               g->cells[i].bucket == first->bucket;
             i++) {
            const struct cell *c = &g->cells[i];
            row->ncells++;
            row->calls = sat_add(row->calls, c->calls);
            row->bytes = sat_add(row->bytes, c->bytes);
            row->dur_ns = sat_add(row->dur_ns, c->dur_ns);
            if (c->max_dur_ns > row->max_dur_ns)
                row->max_dur_ns = c->max_dur_ns;
            row->captured = sat_add(row->captured, c->captured);
            row->in_group = sat_add(row->in_group, c->in_group);
            row->failed = sat_add(row->failed, c->failed);
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
            struct op_summary *op = &g->ops[g->nops++];
            memset(op, 0, sizeof(*op));
            op->op = first->op;
            op->p2p = first->p2p;
            op->first_row = g->nrows - 1;
            op->member_calls = xcalloc(g->nmembers, sizeof(*op->member_calls));
        }
        struct op_summary *op = &g->ops[g->nops - 1];
        op->nrows++;
        op->calls = sat_add(op->calls, row->calls);
        op->failed = sat_add(op->failed, row->failed);
        for (size_t k = row->first_cell; k < row->first_cell + row->ncells; k++) {
            size_t pos = r->members[g->cells[k].member].position;
            assert(pos < g->nmembers);
            op->member_calls[pos] = sat_add(op->member_calls[pos], g->cells[k].calls);
        }
        if (op->p2p)
            g->p2p_calls = sat_add(g->p2p_calls, row->calls);
        else
            g->calls = sat_add(g->calls, row->calls);
        g->failed = sat_add(g->failed, row->failed);
    }
    for (size_t o = 0; o < g->nops; o++) {
        struct op_summary *op = &g->ops[o];
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

static int compare_counts(const void *a, const void *b)
{
    return cmp_i64(*(const int64_t *)a, *(const int64_t *)b);
}

/*
 * An op whose call counts differ between the ranks of a communicator: every
 * rank must make every collective, so a rank behind its peers stopped (it
 * exited or crashed) or took another path, and the others wait for it.
 * The count most ranks share (the larger on a tie) is taken as the norm.
 */
static void check_call_counts(struct report *r, struct group *g, const struct op_summary *op)
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
    sort_array(counts, n, sizeof(*counts), compare_counts);
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

    struct problem *p =
        add_problem(&g->problems, &g->nproblems, &g->problems_cap, PROBLEM_CALLS_DIFFER);
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
    const struct member *other = NULL;
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct member *m = &r->members[g->members[k]];
        if (!m->active)
            continue;
        int64_t calls = op->member_calls[k];
        if (calls == norm) {
            others++;
            other = m;
            continue;
        }
        fewer_only = fewer_only && calls < norm;
        problem_add_rank(p, r, m, calls);
        char who[96];
        member_label(who, sizeof(who), r, m);
        if (named++ == 0)
            fprintf(out, "%s made %" PRId64 " %s", who, calls, op->op);
        else
            fprintf(out, ", %s made %" PRId64, who, calls);
    }
    assert(named > 0 && others > 0);
    if (others == 1) {
        char who[96];
        member_label(who, sizeof(who), r, other);
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

static void check_failed_calls(struct report *r, struct group *g, const struct op_summary *op)
{
    if (op->failed == 0)
        return;
    /* Per member: its failures of this op across datatypes and sizes. */
    int64_t *failed = xcalloc(g->nmembers, sizeof(*failed));
    for (size_t ri = op->first_row; ri < op->first_row + op->nrows; ri++) {
        const struct row *row = &g->rows[ri];
        for (size_t ci = row->first_cell; ci < row->first_cell + row->ncells; ci++) {
            size_t pos = r->members[g->cells[ci].member].position;
            failed[pos] = sat_add(failed[pos], g->cells[ci].failed);
        }
    }
    for (size_t k = 0; k < g->nmembers; k++) {
        if (failed[k] == 0)
            continue;
        const struct member *m = &r->members[g->members[k]];
        char who[96], pid[96];
        member_label(who, sizeof(who), r, m);
        pid_text(pid, sizeof(pid), &r->procs[m->proc]);
        struct problem *p =
            add_problem(&g->problems, &g->nproblems, &g->problems_cap, PROBLEM_FAILED_CALLS);
        p->op = op->op;
        p->has_expected = true;
        p->expected = op->member_calls[k];
        p->message = xasprintf("%s (%s): %" PRId64 " of %" PRId64 " %s failed", who, pid, failed[k],
                               op->member_calls[k], op->op);
        problem_add_rank(p, r, m, failed[k]);
    }
    free(failed);
}

static int compare_pairs(const void *a, const void *b)
{
    const struct pair *x = a, *y = b;
    int c = cmp_i64((int64_t)x->group, (int64_t)y->group);
    if (c == 0)
        c = cmp_i64(x->from, y->from);
    return c ? c : cmp_i64(x->to, y->to);
}

/* The group's first active member with that rank, or NULL. */
static const struct member *rank_member(const struct report *r, const struct group *g, int64_t rank)
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
        const struct member *m = &r->members[g->members[lo]];
        if (!m->comm->has_rank || m->comm->rank != rank)
            return NULL;
        if (m->active)
            return m;
    }
    return NULL;
}

/* Sends and receives into (from, to) pairs; peers outside a communicator
 * are problems, not pairs. */
static void make_pairs(struct report *r)
{
    for (size_t i = 0; i < r->nparts; i++) {
        const struct p2p_part *part = &r->parts[i];
        const struct member *m = &r->members[part->member];
        struct group *g = &r->groups[m->group];
        if (!rank_valid(g, m->comm))
            continue; /* reported as rank_invalid: no pair to put it in */
        if (!part->has_peer || part->peer < 0 || (g->has_nranks && part->peer >= g->nranks)) {
            char who[96], peer[48];
            member_label(who, sizeof(who), r, m);
            if (part->has_peer)
                snprintf(peer, sizeof(peer), "rank %" PRId64, part->peer);
            else
                snprintf(peer, sizeof(peer), "no peer");
            struct problem *p =
                add_problem(&g->problems, &g->nproblems, &g->problems_cap, PROBLEM_P2P_BAD_PEER);
            p->op = part->send ? "ncclSend" : "ncclRecv";
            p->message =
                xasprintf("%s made %" PRId64 " %s %s %s, which is not a rank of this "
                          "%" PRId64 "-rank communicator",
                          who, part->calls, p->op, part->send ? "to" : "from", peer, g->nranks);
            problem_add_rank(p, r, m, part->calls);
            p->has_expected = part->has_peer;
            p->expected = part->peer;
            continue;
        }
        r->pairs = xgrow(r->pairs, &r->pairs_cap, r->npairs + 1, sizeof(*r->pairs));
        struct pair *pair = &r->pairs[r->npairs++];
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
        struct pair *p = &r->pairs[i];
        if (out > 0 && compare_pairs(&r->pairs[out - 1], p) == 0) {
            struct pair *into = &r->pairs[out - 1];
            into->sends = sat_add(into->sends, p->sends);
            into->send_bytes = sat_add(into->send_bytes, p->send_bytes);
            into->recvs = sat_add(into->recvs, p->recvs);
            into->recv_bytes = sat_add(into->recv_bytes, p->recv_bytes);
            continue;
        }
        r->pairs[out++] = *p;
    }
    r->npairs = out;
    for (size_t i = 0; i < r->npairs;) {
        struct group *g = &r->groups[r->pairs[i].group];
        g->pairs = &r->pairs[i];
        for (; i < r->npairs && &r->groups[r->pairs[i].group] == g; i++) {
            struct pair *p = &r->pairs[i];
            g->npairs++;
            p->sender_traced = rank_member(r, g, p->from) != NULL;
            p->receiver_traced = rank_member(r, g, p->to) != NULL;
        }
    }
}

/* A pair whose two sides were both traced must match call for call. */
static void check_pairs(struct report *r, struct group *g)
{
    for (size_t i = 0; i < g->npairs; i++) {
        const struct pair *pair = &g->pairs[i];
        if (!pair->sender_traced || !pair->receiver_traced || pair->sends == pair->recvs)
            continue;
        struct problem *p =
            add_problem(&g->problems, &g->nproblems, &g->problems_cap, PROBLEM_P2P_UNMATCHED);
        p->message =
            xasprintf("rank %" PRId64 " sent %" PRId64 " to rank %" PRId64 ", but rank %" PRId64
                      " received %" PRId64 " from rank %" PRId64
                      ": a send or receive without its match waits forever",
                      pair->from, pair->sends, pair->to, pair->to, pair->recvs, pair->from);
        p->has_expected = true;
        p->expected = pair->sends;
        /* Both sides were traced, so both have a member. */
        const struct member *sender = rank_member(r, g, pair->from);
        const struct member *receiver = rank_member(r, g, pair->to);
        assert(sender && receiver);
        problem_add_rank(p, r, sender, pair->sends);
        problem_add_rank(p, r, receiver, pair->recvs);
    }
}

/* Problems about the directory: NCCL versions and calls on no communicator. */
static void check_processes(struct report *r)
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
        struct problem *p = add_problem(&r->problems, &r->nproblems, &r->problems_cap,
                                        PROBLEM_NCCL_VERSIONS_DIFFER);
        p->message = xstrdup("the processes loaded different NCCL versions (see the process list"
                             " in --json): mixing versions in one communicator is unsupported");
        for (size_t i = 0; i < r->nprocs; i++) {
            const struct proc *proc = &r->procs[i];
            if (!proc->nccl.has_version)
                continue;
            p->ranks = xgrow(p->ranks, &p->ranks_cap, p->nranks + 1, sizeof(*p->ranks));
            p->ranks[p->nranks++] = (struct problem_rank){
                .has_pid = proc->has_pid, .pid = proc->pid, .value = proc->nccl.version};
        }
    }
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct proc *proc = &r->procs[i];
        int64_t calls = 0;
        for (size_t k = 0; k < proc->norphans; k++)
            calls = sat_add(calls, proc->orphans[k].calls);
        if (calls == 0)
            continue;
        char who[96];
        pid_text(who, sizeof(who), proc);
        struct problem *p =
            add_problem(&r->problems, &r->nproblems, &r->problems_cap, PROBLEM_UNATTRIBUTED_CALLS);
        p->message = xasprintf("%s made %" PRId64 " NCCL call%s on communicators whose init its"
                               " trace does not hold (made before tracing began, or failed)",
                               who, calls, calls == 1 ? "" : "s");
        p->ranks = xcalloc(1, sizeof(*p->ranks));
        p->ranks_cap = p->nranks = 1;
        p->ranks[0] =
            (struct problem_rank){.has_pid = proc->has_pid, .pid = proc->pid, .value = calls};
    }
}

static int compare_groups(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    int c = cmp_i64(x->order_key, y->order_key);
    return c ? c : strcmp(x->hash, y->hash);
}

static int compare_op_counts(const void *a, const void *b)
{
    return strcmp(((const struct op_count *)a)->op, ((const struct op_count *)b)->op);
}

static int build_report(struct report *r, struct trace_set *set)
{
    r->nprocs = set->count;
    r->procs = xcalloc(set->count, sizeof(*r->procs));
    for (size_t i = 0; i < set->count; i++) {
        r->procs[i].trace = &set->traces[i];
        if (load_trace(r, i) != 0) {
            trace_report_error(&set->traces[i]);
            return -1;
        }
        sort_array(r->procs[i].orphans, r->procs[i].norphans, sizeof(*r->procs[i].orphans),
                   compare_op_counts);
    }
    make_groups(r);
    distribute_cells(r);
    for (size_t gi = 0; gi < r->ngroups; gi++) {
        struct group *g = &r->groups[gi];
        check_ranks(r, g);
        find_parent(r, g);
        summarise_calls(r, g);
        for (size_t o = 0; o < g->nops; o++) {
            check_call_counts(r, g, &g->ops[o]);
            check_failed_calls(r, g, &g->ops[o]);
        }
    }
    make_pairs(r);
    for (size_t gi = 0; gi < r->ngroups; gi++)
        check_pairs(r, &r->groups[gi]);
    check_processes(r);
    /* Cells and pairs point into their groups by index: sort the groups last. */
    sort_array(r->groups, r->ngroups, sizeof(*r->groups), compare_groups);
    r->total_problems = r->nproblems;
    for (size_t gi = 0; gi < r->ngroups; gi++)
        r->total_problems += r->groups[gi].nproblems;
    return 0;
}

static void free_problems(struct problem *list, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free(list[i].message);
        free(list[i].ranks);
    }
    free(list);
}

static void free_report(struct report *r)
{
    for (size_t i = 0; i < r->nprocs; i++) {
        struct proc *p = &r->procs[i];
        nccl_info_free(&p->nccl);
        for (size_t d = 0; d < p->ndevices; d++)
            free(p->devices[d].uuid);
        free(p->devices);
        for (size_t o = 0; o < p->norphans; o++)
            free(p->orphans[o].op);
        free(p->orphans);
        free(p->host);
    }
    for (size_t gi = 0; gi < r->ngroups; gi++) {
        struct group *g = &r->groups[gi];
        for (size_t o = 0; o < g->nops; o++)
            free(g->ops[o].member_calls);
        free(g->ops);
        free(g->rows);
        free(g->members);
        free(g->missing);
        free_problems(g->problems, g->nproblems);
    }
    for (size_t i = 0; i < r->ncells; i++) {
        free(r->cells[i].op);
        free(r->cells[i].datatype);
    }
    free_problems(r->problems, r->nproblems);
    free(r->cells);
    free(r->parts);
    free(r->pairs);
    free(r->groups);
    free(r->members);
    free(r->procs);
}

/* ---- shared by both renderings ---- */

/* The NCCL version all processes share, 0 when none is known, -1 when they differ. */
static int64_t common_version(const struct report *r)
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

static int64_t time_origin(const struct proc *p)
{
    return p->has_start_mono ? p->start_mono_ns : 0;
}

static int64_t mean(int64_t total, int64_t count)
{
    return count > 0 ? total / count : 0;
}

/* ---- text rendering ---- */

static void print_members(const struct report *r, const struct group *g)
{
    static const struct table_column columns[] = {
        {"rank", TABLE_RIGHT, 0},     {"pid", TABLE_RIGHT, 0},      {"host", TABLE_LEFT, 16},
        {"device", TABLE_RIGHT, 0},   {"gpu uuid", TABLE_LEFT, 40}, {"init", TABLE_LEFT, 16},
        {"lifetime", TABLE_LEFT, 24},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF], result[64];
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct member *m = &r->members[g->members[k]];
        const struct proc *p = &r->procs[m->proc];
        const struct nccl_comm *c = m->comm;
        if (c->has_rank)
            table_cellf(tab, "%" PRId64, c->rank);
        else
            table_cell(tab, "?");
        if (p->has_pid)
            table_cellf(tab, "%" PRId64, p->pid);
        else
            table_cell(tab, "?");
        table_cell(tab, p->host && p->host[0] ? p->host : "?");
        if (c->device >= 0)
            table_cellf(tab, "%" PRId64, c->device);
        else
            table_cell(tab, "?");
        table_cell(tab, m->uuid);
        if (c->init_result == 0)
            table_cell(tab, "ok");
        else
            table_cell(tab, result_describe(result, sizeof(result), LAYER_NCCL, c->init_result));
        if (c->init_result != 0)
            table_cell(tab, "-");
        else if (c->destroyed)
            table_cellf(tab, "%s, %s",
                        format_duration(buf, sizeof(buf), sat_sub(c->t_destroy_ns, c->t_init_ns)),
                        nccl_end_text(c));
        else
            table_cell(tab, nccl_end_text(c));
    }
    table_print(tab, stdout, 2);
    table_free(tab);
}

static void print_op(const struct group *g, const struct op_summary *op)
{
    putchar('\n');
    char line[512];
    if (op->p2p)
        snprintf(line, sizeof(line), "%s: %" PRId64 " call%s (point-to-point: pairs below)", op->op,
                 op->calls, op->calls == 1 ? "" : "s");
    else if (g->nactive > 0 && op->min_calls == op->max_calls)
        snprintf(line, sizeof(line), "%s: %" PRId64 " call%s, %" PRId64 " on each of %zu rank%s",
                 op->op, op->calls, op->calls == 1 ? "" : "s", op->max_calls, g->nactive,
                 g->nactive == 1 ? "" : "s");
    else
        snprintf(line, sizeof(line),
                 "%s: %" PRId64 " calls; RANKS DIFFER, %" PRId64 " to %" PRId64 " per rank", op->op,
                 op->calls, op->min_calls, op->max_calls);
    printf("  ");
    text_print(stdout, line, TEXT_WIDTH - 2, 0);
    putchar('\n');

    static const struct table_column columns[] = {
        {"type", TABLE_LEFT, 12},    {"size", TABLE_LEFT, 0},       {"calls/rank", TABLE_RIGHT, 0},
        {"bytes", TABLE_RIGHT, 0},   {"host time", TABLE_RIGHT, 0}, {"mean", TABLE_RIGHT, 0},
        {"max", TABLE_RIGHT, 0},     {"graph", TABLE_RIGHT, 0},     {"eager", TABLE_RIGHT, 0},
        {"grouped", TABLE_RIGHT, 0}, {"failed", TABLE_RIGHT, 0},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF];
    for (size_t ri = op->first_row; ri < op->first_row + op->nrows; ri++) {
        const struct row *row = &g->rows[ri];
        const struct cell *first = &g->cells[row->first_cell];
        table_cell(tab, first->datatype);
        table_cell(tab, nccl_bucket_label(buf, sizeof(buf), first->bucket));
        if (row->min_calls == row->max_calls)
            table_cellf(tab, "%" PRId64, row->max_calls);
        else
            table_cellf(tab, "%" PRId64 "-%" PRId64 "%s", row->min_calls, row->max_calls,
                        op->p2p ? "" : " !");
        table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)row->bytes));
        table_cell(tab, format_duration(buf, sizeof(buf), row->dur_ns));
        table_cell(tab, format_duration(buf, sizeof(buf), mean(row->dur_ns, row->calls)));
        table_cell(tab, format_duration(buf, sizeof(buf), row->max_dur_ns));
        table_cellf(tab, "%" PRId64, row->captured);
        table_cellf(tab, "%" PRId64, nonneg(sat_sub(row->calls, row->captured)));
        table_cellf(tab, "%" PRId64, row->in_group);
        table_cellf(tab, "%" PRId64, row->failed);
    }
    table_print(tab, stdout, 4);
    table_free(tab);
}

static void print_pairs(const struct group *g)
{
    static const struct table_column columns[] = {
        {"point-to-point", TABLE_LEFT, 0},  {"sends", TABLE_RIGHT, 0},
        {"recvs", TABLE_RIGHT, 0},          {"bytes sent", TABLE_RIGHT, 0},
        {"bytes received", TABLE_RIGHT, 0}, {"", TABLE_LEFT, 0},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF];
    for (size_t i = 0; i < g->npairs; i++) {
        const struct pair *p = &g->pairs[i];
        table_cellf(tab, "%" PRId64 " -> %" PRId64, p->from, p->to);
        if (p->sender_traced)
            table_cellf(tab, "%" PRId64, p->sends);
        else
            table_cell(tab, "-");
        if (p->receiver_traced)
            table_cellf(tab, "%" PRId64, p->recvs);
        else
            table_cell(tab, "-");
        table_cell(tab, p->sender_traced ? format_bytes(buf, sizeof(buf), (uint64_t)p->send_bytes)
                                         : "-");
        table_cell(tab, p->receiver_traced ? format_bytes(buf, sizeof(buf), (uint64_t)p->recv_bytes)
                                           : "-");
        if (!p->sender_traced || !p->receiver_traced)
            table_cell(tab, "(a side without trace)");
        else
            table_cell(tab, p->sends == p->recvs ? "" : "UNMATCHED");
    }
    putchar('\n');
    table_print(tab, stdout, 2);
    table_free(tab);
}

static void print_problems(const struct problem *list, size_t count, size_t indent)
{
    for (size_t i = 0; i < count; i++)
        text_print_wrapped(stdout, list[i].message, indent);
}

static void print_group(const struct report *r, const struct group *g)
{
    char line[512];
    putchar('\n');
    if (!g->has_nranks)
        snprintf(line, sizeof(line), "Communicator %s: size unknown, %" PRId64 " rank%s traced",
                 g->hash, g->ranks_traced, g->ranks_traced == 1 ? "" : "s");
    else if (g->missing_count == 0)
        snprintf(line, sizeof(line), "Communicator %s: %" PRId64 " rank%s, all traced", g->hash,
                 g->nranks, g->nranks == 1 ? "" : "s");
    else
        snprintf(line, sizeof(line),
                 "Communicator %s: %" PRId64 " ranks, %" PRId64 " traced, %" PRId64
                 " WITHOUT TRACE",
                 g->hash, g->nranks, g->ranks_traced, g->missing_count);
    text_print(stdout, line, TEXT_WIDTH, 0);
    putchar('\n');
    if (g->has_parent) {
        char color[48] = "";
        if (g->has_color)
            snprintf(color, sizeof(color), " with color %" PRId64, g->color);
        snprintf(line, sizeof(line), "  split from communicator %s%s",
                 g->parent_hash ? g->parent_hash : "(not in the trace)", color);
        text_print(stdout, line, TEXT_WIDTH, 0);
        putchar('\n');
    }
    print_members(r, g);
    for (size_t o = 0; o < g->nops; o++)
        print_op(g, &g->ops[o]);
    if (g->nops == 0)
        printf("\n  no collective or point-to-point calls\n");
    if (g->npairs > 0)
        print_pairs(g);
    if (g->nproblems > 0) {
        printf("\n  problems:\n");
        print_problems(g->problems, g->nproblems, 4);
    }
}

static void print_text(const struct report *r)
{
    static const char prefix[] = "cutrace collectives of ";
    char version[32], suffix[160];
    bool none = r->ngroups == 0 && r->collective_calls == 0 && r->p2p_calls == 0;
    int64_t v = common_version(r);
    if (none)
        snprintf(suffix, sizeof(suffix), ": no NCCL communicators or calls in %zu process%s",
                 r->nprocs, r->nprocs == 1 ? "" : "es");
    else
        snprintf(suffix, sizeof(suffix), ": %zu process%s, %zu communicator%s, NCCL %s", r->nprocs,
                 r->nprocs == 1 ? "" : "es", r->ngroups, r->ngroups == 1 ? "" : "s",
                 v < 0 ? "versions differ" : nccl_format_version(version, sizeof(version), v));
    /* The path gets what the line has left. */
    size_t room = TEXT_WIDTH - (sizeof(prefix) - 1) - strlen(suffix);
    printf("%s", prefix);
    text_print(stdout, r->path, room, 0);
    printf("%s\n", suffix);
    if (none)
        return;
    printf("  calls      %" PRId64 " collective, %" PRId64 " point-to-point (%" PRId64 " failed)\n",
           r->collective_calls, r->p2p_calls, r->failed_calls);
    if (r->total_problems == 0)
        printf("  problems   none found\n");
    else
        printf("  problems   %zu (listed under each communicator)\n", r->total_problems);
    if (r->nproblems > 0) {
        putchar('\n');
        print_problems(r->problems, r->nproblems, 2);
    }
    for (size_t gi = 0; gi < r->ngroups; gi++)
        print_group(r, &r->groups[gi]);
    bool any_calls = false;
    for (size_t gi = 0; gi < r->ngroups; gi++)
        any_calls = any_calls || r->groups[gi].nops > 0;
    if (!any_calls)
        return;
    printf("\ncalls/rank: calls each rank made (\"9-10 !\": the ranks differ); bytes and times:"
           " all ranks together;\n"
           "graph: captured into a CUDA graph (runs at every replay, counted once); eager: the"
           " rest;\n"
           "grouped: issued between ncclGroupStart and ncclGroupEnd\n");
}

/* ---- JSON rendering ---- */

static void json_opt_int(struct json_writer *w, const char *key, bool present, int64_t value)
{
    if (present)
        json_kv_int(w, key, value);
    else
        json_kv_null(w, key);
}

static void json_pointer(struct json_writer *w, const char *key, int64_t ptr)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)(uint64_t)ptr);
    json_kv_string(w, key, buf);
}

static void json_problems(struct json_writer *w, const struct problem *list, size_t count)
{
    json_array_begin(w);
    for (size_t i = 0; i < count; i++) {
        const struct problem *p = &list[i];
        json_object_begin(w);
        json_kv_string(w, "kind", problem_keys[p->kind]);
        json_kv_string(w, "message", p->message);
        json_kv_string(w, "op", p->op);
        json_opt_int(w, "expected", p->has_expected, p->expected);
        json_key(w, "ranks");
        json_array_begin(w);
        for (size_t k = 0; k < p->nranks; k++) {
            json_object_begin(w);
            json_opt_int(w, "rank", p->ranks[k].has_rank, p->ranks[k].rank);
            json_opt_int(w, "pid", p->ranks[k].has_pid, p->ranks[k].pid);
            json_kv_int(w, "value", p->ranks[k].value);
            json_object_end(w);
        }
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
}

static void json_member(struct json_writer *w, const struct report *r, const struct member *m)
{
    const struct proc *p = &r->procs[m->proc];
    const struct nccl_comm *c = m->comm;
    char result[64];
    int64_t origin = time_origin(p);
    json_object_begin(w);
    json_opt_int(w, "rank", c->has_rank, c->rank);
    json_opt_int(w, "nranks", c->has_nranks, c->nranks);
    json_opt_int(w, "pid", p->has_pid, p->pid);
    json_kv_string(w, "host", p->host);
    json_kv_string(w, "file", p->trace->file);
    json_kv_int(w, "comm_id", c->comm_id);
    json_pointer(w, "comm", c->handle);
    json_kv_int(w, "device", c->device);
    json_kv_string(w, "gpu_uuid", m->uuid);
    json_kv_string(w, "api", c->api);
    json_kv_int(w, "init_result", c->init_result);
    json_kv_string(w, "init_result_name",
                   result_describe(result, sizeof(result), LAYER_NCCL, c->init_result));
    json_kv_int(w, "t_init_ns", c->t_init_ns);
    json_kv_int(w, "init_at_ns", sat_sub(c->t_init_ns, origin));
    json_kv_string(w, "end", c->aborted ? "abort" : c->destroyed ? "destroy" : NULL);
    json_opt_int(w, "end_at_ns", c->destroyed, sat_sub(c->t_destroy_ns, origin));
    json_opt_int(w, "lifetime_ns", c->destroyed, sat_sub(c->t_destroy_ns, c->t_init_ns));
    json_opt_int(w, "finalize_at_ns", c->finalized, sat_sub(c->t_finalize_ns, origin));
    json_opt_int(w, "parent_comm_id", c->has_parent, c->parent_comm_id);
    json_opt_int(w, "color", c->has_color, c->color);
    json_opt_int(w, "key", c->has_key, c->key);
    json_kv_int(w, "calls", c->calls);
    json_kv_int(w, "failed_calls", c->failed_calls);
    json_object_end(w);
}

static void json_rank_ref(struct json_writer *w, const struct report *r, const struct member *m)
{
    const struct proc *p = &r->procs[m->proc];
    json_opt_int(w, "rank", m->comm->has_rank, m->comm->rank);
    json_opt_int(w, "pid", p->has_pid, p->pid);
    json_kv_int(w, "comm_id", m->comm->comm_id);
}

static void json_op(struct json_writer *w, const struct report *r, const struct group *g,
                    const struct op_summary *op)
{
    char label[UNITS_BUF];
    json_object_begin(w);
    json_kv_string(w, "op", op->op);
    json_kv_string(w, "kind", op->p2p ? "p2p" : "collective");
    json_kv_int(w, "calls", op->calls);
    json_kv_int(w, "failed", op->failed);
    json_kv_int(w, "min_calls_per_rank", op->min_calls);
    json_kv_int(w, "max_calls_per_rank", op->max_calls);
    if (op->p2p)
        json_kv_null(w, "ranks_agree");
    else
        json_kv_bool(w, "ranks_agree", op->min_calls == op->max_calls);
    json_key(w, "per_rank");
    json_array_begin(w);
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct member *m = &r->members[g->members[k]];
        if (!m->active)
            continue;
        json_object_begin(w);
        json_rank_ref(w, r, m);
        json_kv_int(w, "calls", op->member_calls[k]);
        json_object_end(w);
    }
    json_array_end(w);
    json_key(w, "rows");
    json_array_begin(w);
    for (size_t ri = op->first_row; ri < op->first_row + op->nrows; ri++) {
        const struct row *row = &g->rows[ri];
        const struct cell *first = &g->cells[row->first_cell];
        json_object_begin(w);
        json_kv_string(w, "datatype", first->datatype);
        json_kv_string(w, "size_bucket", nccl_bucket_label(label, sizeof(label), first->bucket));
        json_opt_int(w, "size_min", first->bucket >= 0, nccl_bucket_min(first->bucket));
        json_opt_int(w, "size_max", first->bucket >= 0, nccl_bucket_max(first->bucket));
        json_kv_int(w, "calls", row->calls);
        json_kv_int(w, "min_calls_per_rank", row->min_calls);
        json_kv_int(w, "max_calls_per_rank", row->max_calls);
        if (op->p2p)
            json_kv_null(w, "ranks_agree");
        else
            json_kv_bool(w, "ranks_agree", row->min_calls == row->max_calls);
        json_kv_int(w, "bytes", row->bytes);
        json_kv_int(w, "dur_ns", row->dur_ns);
        json_kv_int(w, "mean_dur_ns", mean(row->dur_ns, row->calls));
        json_kv_int(w, "max_dur_ns", row->max_dur_ns);
        json_kv_int(w, "captured", row->captured);
        json_kv_int(w, "eager", nonneg(sat_sub(row->calls, row->captured)));
        json_kv_int(w, "in_group", row->in_group);
        json_kv_int(w, "failed", row->failed);
        json_key(w, "per_rank");
        json_array_begin(w);
        for (size_t ci = row->first_cell; ci < row->first_cell + row->ncells; ci++) {
            const struct cell *c = &g->cells[ci];
            json_object_begin(w);
            json_rank_ref(w, r, &r->members[c->member]);
            json_kv_int(w, "calls", c->calls);
            json_kv_int(w, "bytes", c->bytes);
            json_kv_int(w, "dur_ns", c->dur_ns);
            json_kv_int(w, "max_dur_ns", c->max_dur_ns);
            json_kv_int(w, "captured", c->captured);
            json_kv_int(w, "in_group", c->in_group);
            json_kv_int(w, "failed", c->failed);
            json_object_end(w);
        }
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

static void json_group(struct json_writer *w, const struct report *r, const struct group *g)
{
    json_object_begin(w);
    json_kv_string(w, "unique_id_hash", g->hash);
    json_opt_int(w, "nranks", g->has_nranks, g->nranks);
    json_kv_int(w, "ranks_traced", g->ranks_traced);
    json_kv_int(w, "missing_ranks_count", g->missing_count);
    json_key(w, "missing_ranks");
    json_array_begin(w);
    for (size_t i = 0; i < g->nmissing; i++) {
        json_object_begin(w);
        json_kv_int(w, "first", g->missing[i].first);
        json_kv_int(w, "last", g->missing[i].last);
        json_object_end(w);
    }
    json_array_end(w);
    json_kv_bool(w, "complete", g->has_nranks && g->missing_count == 0);
    json_key(w, "parent");
    if (g->has_parent) {
        json_object_begin(w);
        json_kv_string(w, "unique_id_hash", g->parent_hash);
        json_opt_int(w, "color", g->has_color, g->color);
        json_object_end(w);
    } else {
        json_null(w);
    }
    json_kv_int(w, "collective_calls", g->calls);
    json_kv_int(w, "p2p_calls", g->p2p_calls);
    json_kv_int(w, "failed_calls", g->failed);
    json_key(w, "members");
    json_array_begin(w);
    for (size_t k = 0; k < g->nmembers; k++)
        json_member(w, r, &r->members[g->members[k]]);
    json_array_end(w);
    json_key(w, "ops");
    json_array_begin(w);
    for (size_t o = 0; o < g->nops; o++)
        json_op(w, r, g, &g->ops[o]);
    json_array_end(w);
    json_key(w, "p2p");
    json_array_begin(w);
    for (size_t i = 0; i < g->npairs; i++) {
        const struct pair *p = &g->pairs[i];
        json_object_begin(w);
        json_kv_int(w, "from_rank", p->from);
        json_kv_int(w, "to_rank", p->to);
        json_opt_int(w, "sends", p->sender_traced, p->sends);
        json_opt_int(w, "send_bytes", p->sender_traced, p->send_bytes);
        json_opt_int(w, "recvs", p->receiver_traced, p->recvs);
        json_opt_int(w, "recv_bytes", p->receiver_traced, p->recv_bytes);
        if (p->sender_traced && p->receiver_traced)
            json_kv_bool(w, "matched", p->sends == p->recvs);
        else
            json_kv_null(w, "matched");
        json_object_end(w);
    }
    json_array_end(w);
    json_key(w, "problems");
    json_problems(w, g->problems, g->nproblems);
    json_object_end(w);
}

static void print_json(const struct report *r)
{
    struct json_writer w;
    json_init(&w, stdout);
    json_object_begin(&w);
    json_kv_string(&w, "cutrace_version", CUTRACE_VERSION);
    json_kv_string(&w, "report", "collectives");
    json_kv_string(&w, "path", r->path);
    json_key(&w, "processes");
    json_array_begin(&w);
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct proc *p = &r->procs[i];
        json_object_begin(&w);
        json_kv_string(&w, "file", p->trace->file);
        json_opt_int(&w, "pid", p->has_pid, p->pid);
        json_kv_string(&w, "host", p->host);
        json_opt_int(&w, "nccl_version", p->nccl.has_version, p->nccl.version);
        json_kv_uint(&w, "communicator_count", p->nccl.ncomms);
        json_kv_int(&w, "calls", p->nccl.calls);
        json_kv_int(&w, "failed_calls", p->nccl.failed_calls);
        json_kv_int(&w, "unattributed_calls", p->nccl.unattributed_calls);
        json_key(&w, "unattributed");
        json_array_begin(&w);
        for (size_t o = 0; o < p->norphans; o++) {
            json_object_begin(&w);
            json_kv_string(&w, "op", p->orphans[o].op);
            json_kv_int(&w, "calls", p->orphans[o].calls);
            json_object_end(&w);
        }
        json_array_end(&w);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_key(&w, "communicators");
    json_array_begin(&w);
    for (size_t gi = 0; gi < r->ngroups; gi++)
        json_group(&w, r, &r->groups[gi]);
    json_array_end(&w);
    json_key(&w, "problems");
    json_problems(&w, r->problems, r->nproblems);
    json_key(&w, "totals");
    json_object_begin(&w);
    json_kv_uint(&w, "processes", r->nprocs);
    json_kv_uint(&w, "communicators", r->ngroups);
    json_kv_uint(&w, "members", r->nmembers);
    json_kv_int(&w, "collective_calls", r->collective_calls);
    json_kv_int(&w, "p2p_calls", r->p2p_calls);
    json_kv_int(&w, "failed_calls", r->failed_calls);
    json_kv_int(&w, "unattributed_calls", r->unattributed_calls);
    json_kv_uint(&w, "problems", r->total_problems);
    json_object_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

/* ---- the command ---- */

int cmd_collectives(int argc, char **argv)
{
    struct cli_report_args args;
    int parsed = cli_report_args(argc, argv, usage, "trace directory", &args);
    if (parsed != CLI_PARSED)
        return parsed;

    struct trace_set set;
    if (trace_set_open(&set, args.path) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct report report = {.path = args.path};
    int status = CLI_EXIT_OK;
    if (build_report(&report, &set) != 0)
        status = CLI_EXIT_BAD_INPUT;
    else if (args.json)
        print_json(&report);
    else
        print_text(&report);
    free_report(&report);
    trace_set_close(&set);
    if (status == CLI_EXIT_OK && (fflush(stdout) != 0 || ferror(stdout))) {
        cli_error(NULL, "cannot write the report to standard output");
        status = CLI_EXIT_BAD_INPUT;
    }
    return status;
}
