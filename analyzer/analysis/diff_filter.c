/*
 * diff_filter.c - which GPU pairs `cutrace diff` lists under the report
 * filters (docs/cli.md, "Filters"). The two runs' pids, hosts and uuids
 * differ by design, so a filter names a pair by either side:
 *
 *   --rank LIST   the pairs whose GPU, on either side, a process of a rank
 *                 in LIST used (its rank in its largest communicator, as
 *                 model/filter.c takes it; pairs by rank have the same on
 *                 both sides);
 *   --pid LIST    ... a process of a pid in LIST (a pid names one run's
 *                 process: the pair is listed through that side);
 *   --host LIST   ... a process of a host in LIST;
 *   --gpu INDEX   the pair of that index in the unfiltered report (JSON
 *                 gpus.pairs[].index), or UUID: every pair with a GPU,
 *                 on either side, whose uuid starts with the prefix.
 *
 * Every filter given must hold, and the process filters by one process, as
 * in model/filter.c. A GPU without a partner is listed when it passes the
 * process filters and --gpu (a uuid; an INDEX names only pairs). It runs
 * right after the pairing, so that what is aligned, grouped and summed over
 * pairs is over the listed ones; the rest stays the runs'.
 */
#include "analysis/diff_build.h"

#include "model/filter.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct matcher {
    const struct cli_report_opts *o;
    struct cli_range *ranks, *pids;
    size_t nranks, npids;
    int64_t index; /* --gpu INDEX, -1 */
};

static bool proc_passes(const struct matcher *mt, const struct gm_process *p)
{
    const struct cli_report_opts *o = mt->o;
    if (o->rank && !(p->has_rank && cli_ranges_contain(mt->ranks, mt->nranks, p->rank)))
        return false;
    if (o->pid && !cli_ranges_contain(mt->pids, mt->npids, p->pid))
        return false;
    return !o->host || gm_filter_host_listed(o->host, p->host);
}

/* A GPU of one side passes the process filters: a passing process used it. */
static bool gpu_passes(const struct matcher *mt, const struct diff_run *r, uint32_t g)
{
    const struct cli_report_opts *o = mt->o;
    if (!o->rank && !o->pid && !o->host)
        return true;
    const struct gm_gpu *mg = &r->m.gpus[r->gpus[g].gpu];
    for (size_t k = 0; k < mg->nprocs; k++)
        if (proc_passes(mt, &r->m.procs[mg->procs[k]]))
            return true;
    return false;
}

static bool uuid_matches(const struct matcher *mt, const struct diff_run *r, uint32_t g)
{
    return mt->index < 0 && gm_gpu_matches(&r->m.gpus[r->gpus[g].gpu], mt->o->gpu);
}

static bool pair_listed(const struct diff *d, const struct matcher *mt, const struct diff_pair *p)
{
    const struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    if (mt->o->gpu &&
        !(mt->index >= 0 ? (int64_t)p->index == mt->index
                         : uuid_matches(mt, A, p->gpu[0]) || uuid_matches(mt, B, p->gpu[1])))
        return false;
    return gpu_passes(mt, A, p->gpu[0]) || gpu_passes(mt, B, p->gpu[1]);
}

static bool all_digits(const char *s)
{
    for (const char *c = s; *c; c++)
        if (!isdigit((unsigned char)*c))
            return false;
    return *s != '\0';
}

/* --gpu on its own: an INDEX out of range, or a uuid no GPU has. */
static int check_gpu(const struct diff *d, struct matcher *mt)
{
    const char *arg = mt->o->gpu;
    if (all_digits(arg)) {
        char *end;
        unsigned long long index = strtoull(arg, &end, 10);
        if (*end == '\0' && index < d->pairs_total) {
            mt->index = (int64_t)index;
            return 0;
        }
        return cli_usage_error("diff", "--gpu %s: the runs have %zu GPU pair%s (index 0 to %zu)",
                               arg, d->pairs_total, d->pairs_total == 1 ? "" : "s",
                               d->pairs_total ? d->pairs_total - 1 : 0);
    }
    for (int side = 0; side < 2; side++)
        for (uint32_t g = 0; g < d->run[side].ngpus; g++)
            if (uuid_matches(mt, &d->run[side], g))
                return 0;
    return cli_usage_error("diff", "--gpu %s: no GPU of these runs has that uuid", arg);
}

static int nothing_listed(const struct diff *d, const struct cli_report_opts *o)
{
    char given[256];
    gm_filter_given(given, sizeof(given), o);
    char *there[2];
    for (int side = 0; side < 2; side++)
        there[side] = gm_filter_what_there_is(&d->run[side].m, o);
    if (*there[0] || *there[1])
        cli_usage_error("diff", "%s: no GPU of these runs matches (A: %s; B: %s)", given, there[0],
                        there[1]);
    else
        cli_usage_error("diff", "%s: no GPU of these runs matches", given);
    free(there[0]);
    free(there[1]);
    return CLI_EXIT_USAGE;
}

int diff_filter_pairs(struct diff *d, const struct cli_report_opts *o)
{
    d->pairs_total = d->npairs;
    for (uint32_t p = 0; p < d->npairs; p++) {
        d->pairs[p].index = p;
        d->paired_by[d->pairs[p].by]++;
    }
    d->filtered = o && cli_report_filtered(o);
    if (!d->filtered)
        return 0;
    struct matcher mt = {.o = o, .index = -1};
    if (o->gpu && check_gpu(d, &mt) != 0)
        return CLI_EXIT_USAGE;
    /* cli_report_finish has parsed these once already: they cannot fail. */
    if (o->rank && cli_parse_ranges(o->rank, &mt.ranks, &mt.nranks) != 0)
        assert(!"--rank was checked");
    if (o->pid && cli_parse_ranges(o->pid, &mt.pids, &mt.npids) != 0)
        assert(!"--pid was checked");
    size_t kept = 0, listed = 0;
    for (size_t p = 0; p < d->npairs; p++) {
        struct diff_pair pair = d->pairs[p];
        bool ok = pair_listed(d, &mt, &pair);
        d->run[DIFF_A].gpus[pair.gpu[0]].pair = ok ? (uint32_t)kept : DIFF_UNLISTED;
        d->run[DIFF_B].gpus[pair.gpu[1]].pair = ok ? (uint32_t)kept : DIFF_UNLISTED;
        assert(pair.nsteps == 0); /* nothing aligned yet: nothing to free */
        if (ok)
            d->pairs[kept++] = pair;
    }
    d->npairs = kept;
    listed += kept;
    for (int side = 0; side < 2; side++) {
        struct diff_run *r = &d->run[side];
        for (uint32_t g = 0; g < r->ngpus; g++) {
            if (r->gpus[g].pair != GM_NONE)
                continue;
            bool ok = (!o->gpu || uuid_matches(&mt, r, g)) && gpu_passes(&mt, r, g);
            if (!ok)
                r->gpus[g].pair = DIFF_UNLISTED;
            listed += ok;
        }
    }
    free(mt.ranks);
    free(mt.pids);
    return listed ? 0 : nothing_listed(d, o);
}
