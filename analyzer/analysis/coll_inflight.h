/*
 * coll_inflight.h - the part of `cutrace collectives` about calls that
 * never returned (model/gpumodel.h, struct gm_inflight): each process that
 * died or hangs inside a call, communicators that never finished their
 * init (ranks inside ncclCommInitRank, grouped by the unique-id hash and
 * nranks their init records), and the classic hang: ranks of a
 * communicator inside its call #n of an op while others never entered it.
 */
#ifndef CUTRACE_ANALYZER_COLL_INFLIGHT_H
#define CUTRACE_ANALYZER_COLL_INFLIGHT_H

#include "analysis/coll_report.h"
#include "model/filter.h"
#include "out/json.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A process inside a call: its model index and the call. */
struct coll_inside {
    uint32_t proc;
    const struct gm_inflight *call;
};

/* Ranks inside the init of one communicator that never finished. */
struct coll_stuck_init {
    uint64_t hash;
    int64_t nranks; /* as the inits say (the first one's), -1 unknown */
    struct coll_inside *ranks;
    size_t count, cap;
};

/* Members of communicator group `group` inside call #nth of `op`, and
 * the members that never entered it. */
struct coll_hang {
    size_t group;
    uint32_t op; /* model api name */
    int64_t nth;
    struct coll_inside *inside;
    size_t ninside, inside_cap;
    size_t *absent; /* indexes into the report's members */
    size_t nabsent, absent_cap;
};

struct coll_inflight {
    struct coll_inside *stuck; /* each listed process with a call in flight: gm_stuck_call */
    size_t nstuck, stuck_cap;
    struct coll_stuck_init *inits;
    size_t ninits, inits_cap;
    struct coll_hang *hangs;
    size_t nhangs, hangs_cap;
};

/* Built from a complete report (its model and groups), for the processes
 * filter f lists (NULL: all); a member that never entered a call is named
 * whatever the filter, since it is what the listed ranks wait for. */
void coll_inflight_build(struct coll_inflight *x, const struct coll_report *r,
                         const struct gm_filter *f);
void coll_inflight_free(struct coll_inflight *x);
/* Whether there is anything to say. */
bool coll_inflight_any(const struct coll_inflight *x);

void coll_inflight_print(const struct coll_inflight *x, const struct coll_report *r);
/* Writes the value of the report's "in_flight" key. */
void coll_inflight_json(struct json_writer *w, const struct coll_inflight *x,
                        const struct coll_report *r);

#endif
