/*
 * coll_listing.c - what the filters list of a collectives report
 * (coll_listing.h).
 */
#include "analysis/coll_listing.h"

#include "cli.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

bool coll_listing_run_problem(const struct coll_listing *ls, const struct coll_problem *p)
{
    if (!ls->filtered || p->nranks == 0)
        return true;
    for (size_t k = 0; k < p->nranks; k++)
        for (size_t i = 0; i < ls->r->nprocs; i++)
            if (ls->proc[i] && p->ranks[k].has_pid && ls->r->procs[i].has_pid &&
                ls->r->procs[i].pid == p->ranks[k].pid)
                return true;
    return false;
}

void coll_listing_init(struct coll_listing *ls, const struct coll_report *r,
                       const struct gm_filter *f)
{
    ls->r = r;
    ls->filtered = f->gpus_filtered; /* set by any filter */
    ls->proc = xcalloc(r->nprocs ? r->nprocs : 1, sizeof(*ls->proc));
    ls->member = xcalloc(r->nmembers ? r->nmembers : 1, sizeof(*ls->member));
    ls->group = xcalloc(r->ngroups ? r->ngroups : 1, sizeof(*ls->group));
    const char *uuid = f->gpu >= 0 ? r->model.gpus[f->gpu].uuid : NULL;
    for (size_t i = 0; i < r->nprocs; i++)
        ls->proc[i] = gm_filter_proc(f, r->procs[i].model_proc);
    for (size_t i = 0; i < r->nmembers; i++) {
        const struct coll_member *m = &r->members[i];
        /* A process on two GPUs (ncclCommInitAll) lists only its ranks on this one. */
        ls->member[i] = ls->proc[m->proc] && (!uuid || !m->uuid || strcmp(m->uuid, uuid) == 0);
    }
    ls->problems = 0;
    for (size_t gi = 0; gi < r->ngroups; gi++) {
        const struct coll_group *g = &r->groups[gi];
        for (size_t k = 0; k < g->nmembers; k++)
            ls->group[gi] = ls->group[gi] || ls->member[g->members[k]];
        if (ls->group[gi])
            ls->problems += g->nproblems;
    }
    for (size_t i = 0; i < r->nproblems; i++)
        ls->problems += coll_listing_run_problem(ls, &r->problems[i]);
    assert(ls->filtered || ls->problems == r->total_problems);
    coll_inflight_build(&ls->inflight, r, f);
}

void coll_listing_free(struct coll_listing *ls)
{
    free(ls->proc);
    free(ls->member);
    free(ls->group);
    coll_inflight_free(&ls->inflight);
}
