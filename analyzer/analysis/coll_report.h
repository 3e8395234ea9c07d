/*
 * coll_report.h - the types of the `cutrace collectives` report
 * (analysis/collectives.h builds it, analysis/coll_checks.h judges it,
 * cmd/collectives.c prints it): processes, communicators as members of
 * groups, call cells, rows and ops, point-to-point pairs and problems.
 */
#ifndef CUTRACE_ANALYZER_COLL_REPORT_H
#define CUTRACE_ANALYZER_COLL_REPORT_H

#include "model/gpumodel.h"
#include "model/nccl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct coll_op_count {
    char *op;
    int64_t calls;
};

/* A traced process: its identity from the run model, its communicators
 * from model/nccl.h. */
struct coll_proc {
    const struct trace *trace;
    uint32_t model_proc; /* its index in the model's processes (what filters match) */
    bool has_pid;
    int64_t pid;
    const char *host; /* borrowed from the model; NULL unknown */
    bool has_start_mono, has_start_wall;
    int64_t start_mono_ns, start_wall_ns;
    struct nccl_info nccl;
    size_t first_member;           /* its communicators are members first_member.. */
    struct coll_op_count *orphans; /* calls on communicators whose init it lacks */
    size_t norphans, orphans_cap;
};

struct coll_member {
    size_t proc;
    const struct nccl_comm *comm; /* borrowed from the proc's nccl info */
    const char *uuid;             /* its GPU, borrowed; NULL unknown */
    size_t group, position;       /* its group and its place in the group's list */
    bool active;                  /* the init succeeded, so it could make calls */
};

/* One member's calls of one (op, datatype, size bucket). */
struct coll_cell {
    size_t group;
    const char *op;    /* borrowed from the model's api names */
    char datatype[32]; /* the collectives view's text */
    int64_t bucket;
    size_t member;
    bool p2p;
    int64_t calls, bytes, dur_ns, max_dur_ns, captured, in_group, failed;
};

/* One member's sends or receives to or from one peer. */
struct coll_p2p_part {
    size_t member;
    bool send;
    bool has_peer;
    int64_t peer, calls, bytes;
};

/* Sends from rank `from` to rank `to` as the sender saw them, and the
 * receives the receiver made from the sender. */
struct coll_pair {
    size_t group;
    int64_t from, to;
    int64_t sends, send_bytes, recvs, recv_bytes;
    bool sender_traced, receiver_traced;
};

/* The calls of one (op, datatype, bucket) in a group: a run of cells. */
struct coll_row {
    size_t first_cell, ncells;
    int64_t calls, bytes, dur_ns, max_dur_ns, captured, in_group, failed;
    int64_t min_calls, max_calls; /* per active member, 0 for one without */
};

/* One op of a group: a run of rows. */
struct coll_op {
    const char *op; /* borrowed from a cell */
    bool p2p;
    size_t first_row, nrows;
    int64_t calls, failed, min_calls, max_calls;
    int64_t *member_calls; /* per group member (by position) */
};

enum coll_problem_kind {
    COLL_PROBLEM_MISSING_RANKS,
    COLL_PROBLEM_UNKNOWN_SIZE,
    COLL_PROBLEM_NRANKS_DIFFER,
    COLL_PROBLEM_RANK_INVALID,
    COLL_PROBLEM_DUPLICATE_RANK,
    COLL_PROBLEM_INIT_FAILED,
    COLL_PROBLEM_PARENTS_DIFFER,
    COLL_PROBLEM_CALLS_DIFFER,
    COLL_PROBLEM_FAILED_CALLS,
    COLL_PROBLEM_P2P_UNMATCHED,
    COLL_PROBLEM_P2P_BAD_PEER,
    COLL_PROBLEM_NCCL_VERSIONS_DIFFER,
    COLL_PROBLEM_UNATTRIBUTED_CALLS,
};

/* The JSON name of each kind (coll_checks.c). */
extern const char *const coll_problem_keys[];

/* A rank named by a problem, with the number it is flagged for. */
struct coll_problem_rank {
    bool has_rank, has_pid;
    int64_t rank, pid, value;
};

struct coll_problem {
    enum coll_problem_kind kind;
    char *message;
    const char *op; /* borrowed; NULL when not about one op */
    bool has_expected;
    int64_t expected; /* the count most ranks agree on, sends to match, ... */
    struct coll_problem_rank *ranks;
    size_t nranks, ranks_cap;
};

struct coll_range {
    int64_t first, last;
};

struct coll_group {
    const char *hash; /* borrowed from a member's comm */
    size_t *members;  /* indexes into report.members, in rank order */
    size_t nmembers, members_cap, nactive;
    bool has_nranks;
    int64_t nranks;
    int64_t ranks_traced, missing_count;
    struct coll_range *missing;
    size_t nmissing, missing_cap;
    bool has_parent; /* a split of another group */
    const char *parent_hash;
    bool has_color;
    int64_t color;
    struct coll_cell *cells; /* a slice of report.cells */
    size_t ncells;
    struct coll_row *rows;
    size_t nrows, rows_cap;
    struct coll_op *ops;
    size_t nops, ops_cap;
    struct coll_pair *pairs; /* a slice of report.pairs */
    size_t npairs;
    struct coll_problem *problems;
    size_t nproblems, problems_cap;
    int64_t calls, p2p_calls, failed;
    int64_t order_key; /* earliest init, in wall-clock time where known */
};

struct coll_report {
    const char *path;
    struct gm_model model; /* what the rest borrows names and GPUs from */
    bool has_model;
    struct coll_proc *procs;
    size_t nprocs;
    struct coll_member *members;
    size_t nmembers, members_cap;
    struct coll_cell *cells;
    size_t ncells, cells_cap;
    struct coll_p2p_part *parts;
    size_t nparts, parts_cap;
    struct coll_pair *pairs;
    size_t npairs, pairs_cap;
    struct coll_group *groups;
    size_t ngroups, groups_cap;
    struct coll_problem *problems; /* about the directory, not one communicator */
    size_t nproblems, problems_cap;
    int64_t collective_calls, p2p_calls, failed_calls, unattributed_calls;
    size_t total_problems;
};

static inline int64_t coll_nonneg(int64_t v)
{
    return v < 0 ? 0 : v;
}

#endif
