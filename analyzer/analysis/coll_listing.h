/*
 * coll_listing.h - what the filters (model/filter.h) list of a collectives
 * report (coll_report.h): the members of the processes that pass (with
 * --gpu, those on that GPU where the member's GPU is known), the
 * communicators with a member listed, the run's own problems about a
 * listed process, and the listed processes' calls that never returned.
 * `cutrace collectives` and the HTML report list the same by one filter.
 */
#ifndef CUTRACE_ANALYZER_COLL_LISTING_H
#define CUTRACE_ANALYZER_COLL_LISTING_H

#include "analysis/coll_inflight.h"
#include "analysis/coll_report.h"
#include "model/filter.h"

#include <stdbool.h>
#include <stddef.h>

struct coll_listing {
    const struct coll_report *r;
    bool filtered;                 /* some filter was given: else everything is listed */
    bool *proc, *member, *group;   /* per r->procs, r->members, r->groups */
    size_t problems;               /* the problems listed: what --fail-on-problem counts */
    struct coll_inflight inflight; /* the listed processes' calls that never returned */
};

void coll_listing_init(struct coll_listing *ls, const struct coll_report *r,
                       const struct gm_filter *f);
void coll_listing_free(struct coll_listing *ls);
/* Whether a problem of the run's own (r->problems, about no one
 * communicator) is listed: it names a listed process, or no process. */
bool coll_listing_run_problem(const struct coll_listing *ls, const struct coll_problem *p);

#endif
