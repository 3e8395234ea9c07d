/*
 * diff_run.c - the comparison behind `cutrace diff` (diff_analysis.h).
 *
 * Order of work, per run then across the two:
 *   1. open and load each run (trace.h folds rings; gpumodel.h models it);
 *   2. per GPU: its rank, ordinal and milestones, walked once in stream order
 *      with the live bytes before and after each event;
 *   3. pair the GPUs (rank, then ordinal, then uuid) and align each pair's
 *      milestones: keys (kind, api of a failed call, occurrence) are unique
 *      per side, so the longest common subsequence is a longest increasing
 *      subsequence of B's positions of A's keys, O(n log n);
 *   4. merge the pairs' aligned lists into one list of rows, find where
 *      each pair first diverges by more than the threshold;
 *   5. allocations by phase x api x module x size x category per pair,
 *      summed over pairs, keeping the groups whose counts differ;
 *   6. IPC lineage, communicators and collectives, budget, configuration;
 *   7. the verdict: which kinds of difference were found.
 *
 * This file holds the order (diff_run_all), the budget step, the helpers
 * the steps share and the names reports use; each step is a file of its
 * own (diff_build.h): 2-4 diff_milestones.c, 5 diff_allocs.c, 6
 * diff_ipc.c, diff_nccl.c and diff_config.c.
 *
 * Everything compared is free of pids, pointers, times, hashes and file
 * names; ties in every sort are broken by such stable keys so that the same
 * input gives the same bytes.
 */
#include "analysis/diff_build.h"

#include "cli.h"
#include "model/nccl.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const diff_match_keys[] = {"rank", "ordinal", "uuid"};

const char *const diff_difference_keys[] = {
    "gpus",          "ends",        "milestones", "memory",  "allocations", "ipc",
    "communicators", "collectives", "budget",     "cmdline", "env",
};

/* ---- small helpers ---- */

void diff_add_note(struct diff *d, char *text)
{
    d->notes = xgrow(d->notes, &d->notes_cap, d->nnotes + 1, sizeof(*d->notes));
    d->notes[d->nnotes++] = text;
}

uint32_t diff_string_id(struct diff *d, const char *s)
{
    if (!s)
        s = "";
    for (size_t i = 0; i < d->nstrings; i++)
        if (strcmp(d->strings[i], s) == 0)
            return (uint32_t)i;
    assert(d->nstrings < UINT32_MAX - 1);
    d->strings = xgrow(d->strings, &d->strings_cap, d->nstrings + 1, sizeof(*d->strings));
    d->strings[d->nstrings] = xstrdup(s);
    return (uint32_t)d->nstrings++;
}

const char *diff_string(const struct diff *d, uint32_t id)
{
    return id < d->nstrings ? d->strings[id] : "";
}

int64_t diff_sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
    return r;
}

int64_t diff_abs64(int64_t v)
{
    return v == INT64_MIN ? INT64_MAX : (v < 0 ? -v : v);
}

int diff_cmp64(int64_t a, int64_t b)
{
    return (a > b) - (a < b);
}

char *diff_exact_size(char *buf, size_t size, int64_t bytes)
{
    static const struct {
        int64_t unit;
        const char *name;
    } units[] = {{1ll << 40, "TiB"}, {GIB, "GiB"}, {MIB, "MiB"}, {KIB, "KiB"}, {1, "B"}};
    if (bytes <= 0) {
        snprintf(buf, size, "%s", bytes == 0 ? "0 B" : "?");
        return buf;
    }
    /* At most two terms, each a whole number of its unit. */
    int64_t left = bytes;
    char text[2][32];
    int terms = 0;
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]) && left > 0; u++) {
        int64_t n = left / units[u].unit;
        if (n == 0)
            continue;
        if (terms == 2) {
            terms = 3;
            break;
        }
        snprintf(text[terms++], sizeof(text[0]), "%" PRId64 " %s", n, units[u].name);
        left -= n * units[u].unit;
    }
    if (terms <= 2 && left == 0) {
        if (terms == 1)
            snprintf(buf, size, "%s", text[0]);
        else
            snprintf(buf, size, "%s + %s", text[0], text[1]);
        return buf;
    }
    /* Not two round terms: the exact count, which two sizes never share. */
    snprintf(buf, size, "%" PRId64 " B", bytes);
    return buf;
}

char *diff_signed_size(char *buf, size_t size, int64_t bytes)
{
    if (bytes == 0) {
        snprintf(buf, size, "0");
        return buf;
    }
    char body[UNITS_BUF];
    gm_format_size(body, sizeof(body), diff_abs64(bytes));
    snprintf(buf, size, "%c%s", bytes < 0 ? '-' : '+', body);
    return buf;
}

int64_t diff_ms_traced(const struct diff_milestone *ms)
{
    return gm_traced(ms->live);
}

void diff_id_map_init(struct diff_id_map *map, const struct gm_model *m)
{
    map->apis = xcalloc(m->napis ? m->napis : 1, sizeof(*map->apis));
    map->modules = xcalloc(m->nmodules ? m->nmodules : 1, sizeof(*map->modules));
    for (size_t i = 0; i < m->napis; i++)
        map->apis[i] = GM_NONE;
    for (size_t i = 0; i < m->nmodules; i++)
        map->modules[i] = GM_NONE;
}

uint32_t diff_map_api(struct diff *d, struct diff_id_map *map, const struct gm_model *m,
                      uint32_t api)
{
    if (api >= m->napis)
        return diff_string_id(d, "");
    if (map->apis[api] == GM_NONE)
        map->apis[api] = diff_string_id(d, m->apis[api]);
    return map->apis[api];
}

uint32_t diff_map_module(struct diff *d, struct diff_id_map *map, const struct gm_model *m,
                         uint32_t module)
{
    if (module >= m->nmodules)
        return diff_string_id(d, "");
    if (map->modules[module] == GM_NONE)
        map->modules[module] = diff_string_id(d, m->modules[module]);
    return map->modules[module];
}

void diff_id_map_free(struct diff_id_map *map)
{
    free(map->apis);
    free(map->modules);
}

/* ---- a u64 -> u32 map (milestone keys to rows or positions) ---- */

static uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static void keymap_grow(struct diff_keymap *k)
{
    struct diff_keymap old = *k;
    k->nslots = old.nslots ? old.nslots * 2 : 64;
    k->keys = xcalloc(k->nslots, sizeof(*k->keys));
    k->values = xcalloc(k->nslots, sizeof(*k->values));
    k->used = 0;
    for (size_t i = 0; i < old.nslots; i++)
        if (old.values[i])
            diff_keymap_put(k, old.keys[i], old.values[i] - 1);
    free(old.keys);
    free(old.values);
}

void diff_keymap_put(struct diff_keymap *k, uint64_t key, uint32_t value)
{
    if ((k->used + 1) * 2 > k->nslots)
        keymap_grow(k);
    size_t i = mix64(key) & (k->nslots - 1);
    while (k->values[i] && k->keys[i] != key)
        i = (i + 1) & (k->nslots - 1);
    if (!k->values[i])
        k->used++;
    k->keys[i] = key;
    k->values[i] = value + 1;
}

uint32_t diff_keymap_get(const struct diff_keymap *k, uint64_t key)
{
    if (!k->nslots)
        return GM_NONE;
    size_t i = mix64(key) & (k->nslots - 1);
    while (k->values[i]) {
        if (k->keys[i] == key)
            return k->values[i] - 1;
        i = (i + 1) & (k->nslots - 1);
    }
    return GM_NONE;
}

void diff_keymap_free(struct diff_keymap *k)
{
    free(k->keys);
    free(k->values);
    memset(k, 0, sizeof(*k));
}

/* ---- budget ---- */

static int run_budget(struct diff *d, struct diff_run *r)
{
    r->budget_options = d->o->budget_options;
    r->budget_options.path = r->path;
    r->budget = (struct budget_analysis){.m = &r->m, .o = &r->budget_options};
    budget_values_from_cmdlines(&r->budget);
    if (r->budget_options.framework == BUDGET_SGLANG && !r->budget_options.has_fraction)
        return cli_usage_error("diff",
                               "--mem-fraction-static F is required for sglang (no traced "
                               "command line of %s, nor a launcher's, says it)",
                               r->path);
    if (budget_analyse(&r->budget) != 0)
        return CLI_EXIT_BAD_INPUT;
    r->budget_ok = true;
    return 0;
}

static bool budgets_differ(const struct diff *d)
{
    const struct budget_analysis *a = &d->run[DIFF_A].budget, *b = &d->run[DIFF_B].budget;
    if (a->ngroups != b->ngroups)
        return true;
    for (size_t i = 0; i < a->ngroups; i++) {
        const struct budget_job *x = &a->groups[i], *y = &b->groups[i];
        if ((x->analysed > 0) != (y->analysed > 0))
            return true;
        if (x->analysed == 0)
            continue;
        if (x->fits != y->fits || x->tokens != y->tokens)
            return true;
        if (d->o->budget_options.framework == BUDGET_SGLANG
                ? x->rest != y->rest || x->min_pre != y->min_pre || x->min_post != y->min_post
                : x->available != y->available || x->early_failure != y->early_failure)
            return true;
    }
    return false;
}

/* ---- the whole diff ---- */

static int load_run(struct diff_run *r, const char *path)
{
    r->path = path;
    if (trace_set_open(&r->set, path) != 0)
        return CLI_EXIT_BAD_INPUT;
    r->set_open = true;
    if (gm_load(&r->m, &r->set) != 0)
        return CLI_EXIT_BAD_INPUT;
    r->loaded = true;
    return 0;
}

/* Whether a process's stacks name call sites: recorded, and not off. */
static bool names_sites(const struct stack_set *s)
{
    return s->present && !(s->config && strstr(s->config, "native=off python=off"));
}

/*
 * The stacks of every process of a run, loaded before anything is compared:
 * a damaged stack table is a damaged trace, refused with its one line as
 * `cutrace sites` refuses it. Calling it "no stacks" would make every
 * allocation of that run differ from the other's by its site. Returns
 * CLI_EXIT_BAD_INPUT after printing.
 */
int diff_load_stacks(struct diff *d, int side)
{
    struct diff_run *r = &d->run[side];
    const struct gm_model *m = &r->m;
    r->stacks = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*r->stacks));
    r->stacks_loaded = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*r->stacks_loaded));
    if (!d->sym)
        d->sym = symbolizer_new();
    for (size_t i = 0; i < m->nprocs; i++) {
        /* gpumodel holds a const trace; loading only reads it. */
        struct trace *t = (struct trace *)m->procs[i].trace;
        if (stacks_load(t, d->sym, &r->stacks[i]) != 0) {
            trace_report_error(t);
            return CLI_EXIT_BAD_INPUT;
        }
        r->stacks_loaded[i] = true;
    }
    return 0;
}

/* Call sites are compared only when every process of both runs has them: a
 * run of format 3, or with stacks off, would differ from the other in every
 * allocation's site. When some have them and some not, a note says whose
 * are missing. */
static void decide_sites(struct diff *d)
{
    int missing_side = -1;
    size_t missing = 0;
    bool some = false;
    for (int side = 0; side < 2; side++)
        for (size_t i = 0; i < d->run[side].m.nprocs; i++) {
            bool has = names_sites(&d->run[side].stacks[i]);
            some |= has;
            if (!has && missing_side < 0) {
                missing_side = side;
                missing = i;
            }
        }
    d->sites_compared = missing_side < 0;
    if (d->sites_compared || !some)
        return;
    const struct diff_run *r = &d->run[missing_side];
    char name[64];
    gm_process_name(name, sizeof(name), &r->m.procs[missing]);
    diff_add_note(d, xasprintf("call sites are not compared: %s: %s has no call stacks (%s)",
                               missing_side ? "B" : "A", name,
                               r->stacks[missing].present ? "stacks were off"
                                                          : "a trace of format 3 or older"));
}

static void compare_ends(struct diff *d)
{
    const struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    /* Counts of processes differ with rank counts; what ended badly should not. */
    bool differ = A->killed != B->killed ||
                  A->m.nprocs - A->exited - A->killed != B->m.nprocs - B->exited - B->killed;
    for (size_t pi = 0; pi < d->npairs && !differ; pi++) {
        const struct diff_pair *p = &d->pairs[pi];
        for (size_t s = 0; s < p->nsteps && !differ; s++) {
            const struct diff_milestone *a = diff_step_ms(d, p, &p->steps[s], DIFF_A);
            const struct diff_milestone *b = diff_step_ms(d, p, &p->steps[s], DIFF_B);
            differ = ((a && a->kind == MS_END) || (b && b->kind == MS_END)) &&
                     (!a || !b || a->detail != b->detail);
        }
    }
    if (differ)
        d->differences |= 1u << DIFF_D_ENDS;
}

int diff_run_all(struct diff *d, struct diff_options *o)
{
    memset(d, 0, sizeof(*d));
    d->o = o;
    d->first_div_row = -1;
    struct stat sa, sb;
    if (stat(o->paths[0], &sa) == 0 && stat(o->paths[1], &sb) == 0 && sa.st_dev == sb.st_dev &&
        sa.st_ino == sb.st_ino)
        return cli_usage_error("diff", "%s and %s are the same run: nothing to compare",
                               o->paths[0], o->paths[1]);
    for (int side = 0; side < 2; side++) {
        int rc = load_run(&d->run[side], o->paths[side]);
        if (rc != 0)
            return rc;
    }
    for (int side = 0; side < 2; side++) {
        int rc = diff_load_stacks(d, side);
        if (rc != 0)
            return rc;
    }
    decide_sites(d);
    for (int side = 0; side < 2; side++) {
        struct diff_run *r = &d->run[side];
        diff_build_gpus(d, r);
        if (diff_build_comms(d, r) != 0 || diff_build_env(r) != 0)
            return CLI_EXIT_BAD_INPUT;
        diff_build_ipc(d, r);
        diff_build_cmdlines(r);
        if (o->budget) {
            int rc = run_budget(d, r);
            if (rc != 0)
                return rc;
        }
    }
    diff_pair_gpus(d);
    int listed = diff_filter_pairs(d, o->filters);
    if (listed != 0)
        return listed;
    for (size_t i = 0; i < d->npairs; i++)
        diff_align_pair(d, &d->pairs[i]);
    diff_build_rows(d);
    diff_compare_allocations(d);
    diff_match_comms(d);
    if (!diff_ipc_equal(&d->run[DIFF_A].ipc, &d->run[DIFF_B].ipc))
        d->differences |= 1u << DIFF_D_IPC;
    diff_compare_config(d);
    compare_ends(d);
    if (o->budget && budgets_differ(d))
        d->differences |= 1u << DIFF_D_BUDGET;
    for (int side = 0; side < 2; side++)
        for (size_t i = 0; i < d->run[side].ngpus; i++)
            if (d->run[side].gpus[i].pair == GM_NONE)
                d->differences |= 1u << DIFF_D_GPUS;
    diff_add_note(d,
                  xstrdup("the tracer's own CUTRACE_* variables are not compared: they name each "
                          "run's trace and scratch directories"));
    for (int side = 0; side < 2; side++) {
        const struct diff_run *r = &d->run[side];
        for (size_t i = 0; i < r->m.nnotes; i++)
            diff_add_note(d, xasprintf("%s: %s", side ? "B" : "A", r->m.notes[i]));
        for (size_t i = 0; o->budget && i < r->budget.nnotes; i++)
            diff_add_note(d, xasprintf("%s: %s", side ? "B" : "A", r->budget.notes[i]));
    }
    return 0;
}

void diff_free(struct diff *d)
{
    for (int side = 0; side < 2; side++) {
        struct diff_run *r = &d->run[side];
        for (size_t i = 0; i < r->ngpus; i++)
            free(r->gpus[i].ms);
        free(r->gpus);
        free(r->missing);
        for (size_t i = 0; i < r->ncomms; i++)
            free(r->comms[i].ops);
        free(r->comms);
        for (size_t i = 0; i < r->ipc.nbuffers; i++) {
            free(r->ipc.buffers[i].exporter);
            free(r->ipc.buffers[i].openers);
            free(r->ipc.buffers[i].opener_ranks);
        }
        free(r->ipc.buffers);
        for (size_t i = 0; i < r->ipc.ngroups; i++)
            free(r->ipc.groups[i].exporters);
        free(r->ipc.groups);
        for (size_t i = 0; i < r->ncmdlines; i++) {
            free(r->cmdlines[i].text);
            diff_free_words(r->cmdlines[i].launched_by, r->cmdlines[i].nlaunched_by);
        }
        free(r->cmdlines);
        for (size_t i = 0; i < r->nenv; i++) {
            free(r->env[i].name);
            free(r->env[i].value);
        }
        free(r->env);
        if (r->budget.m)
            budget_analysis_free(&r->budget);
        if (r->stacks)
            for (size_t i = 0; i < r->m.nprocs; i++)
                if (r->stacks_loaded[i])
                    stacks_free(&r->stacks[i]);
        free(r->stacks);
        free(r->stacks_loaded);
        if (r->loaded)
            gm_free(&r->m);
        if (r->set_open)
            trace_set_close(&r->set);
    }
    symbolizer_free(d->sym);
    for (size_t i = 0; i < d->npairs; i++)
        free(d->pairs[i].steps);
    free(d->pairs);
    for (size_t i = 0; i < d->nrows; i++)
        free(d->rows[i].label);
    free(d->rows);
    for (size_t i = 0; i < d->nallocs; i++)
        free(d->allocs[i].per_pair);
    free(d->allocs);
    for (size_t i = 0; i < d->nstrings; i++)
        free(d->strings[i]);
    free(d->strings);
    diff_free_words(d->cmd_added, d->ncmd_added);
    diff_free_words(d->cmd_removed, d->ncmd_removed);
    free(d->env_changes);
    for (size_t i = 0; i < d->nnotes; i++)
        free(d->notes[i]);
    free(d->notes);
    memset(d, 0, sizeof(*d));
}

/* ---- names ---- */

char *diff_gpu_name(const struct diff *d, int side, uint32_t gpu)
{
    const struct diff_run *r = &d->run[side];
    assert(gpu < r->ngpus);
    const struct diff_gpu *g = &r->gpus[gpu];
    if (g->has_rank)
        return xasprintf("rank %" PRId64, g->rank);
    const struct gm_gpu *mg = &r->m.gpus[g->gpu];
    if (mg->uuid && strncmp(mg->uuid, "GPU-", 4) == 0)
        return xstrndup(mg->uuid, 12);
    return xasprintf("device %" PRId64, g->ordinal);
}

char *diff_pair_name(const struct diff *d, uint32_t pair)
{
    assert(pair < d->npairs);
    const struct diff_pair *p = &d->pairs[pair];
    const struct diff_gpu *a = &d->run[DIFF_A].gpus[p->gpu[0]];
    switch ((enum diff_match_by)p->by) {
    case DIFF_BY_RANK:
        return xasprintf("rank %" PRId64, a->rank);
    case DIFF_BY_ORDINAL:
        return xasprintf("device %" PRId64, a->ordinal);
    case DIFF_BY_UUID:
        break;
    }
    return diff_gpu_name(d, DIFF_A, p->gpu[0]);
}

char *diff_pairs_text(const struct diff *d, const uint32_t *pairs, size_t count)
{
    if (count == 0)
        return xstrdup("no GPU");
    bool ranks = true;
    for (size_t i = 0; i < count; i++)
        ranks &= d->pairs[pairs[i]].by == DIFF_BY_RANK;
    if (count == d->npairs && count > 1 && d->filtered)
        return xstrdup(ranks ? "every listed rank" : "every listed GPU");
    if (count == d->npairs && count > 1)
        return xstrdup(ranks ? "every rank" : "every GPU");
    if (ranks) {
        int64_t *ids = xcalloc(count, sizeof(*ids));
        for (size_t i = 0; i < count; i++)
            ids[i] = d->run[DIFF_A].gpus[d->pairs[pairs[i]].gpu[0]].rank;
        size_t distinct;
        char *text = diff_ids_text(ids, count, &distinct);
        free(ids);
        return text;
    }
    char *out = xstrdup("");
    for (size_t i = 0; i < count && i < 8; i++) {
        char *name = diff_pair_name(d, pairs[i]);
        char *joined = xasprintf("%s%s%s", out, i ? ", " : "", name);
        free(name);
        free(out);
        out = joined;
    }
    if (count > 8) {
        char *joined = xasprintf("%s and %zu more", out, count - 8);
        free(out);
        out = joined;
    }
    return out;
}

const struct diff_step *diff_first_divergence(const struct diff *d, uint32_t **pairs, size_t *n)
{
    *pairs = NULL;
    *n = 0;
    if (d->first_div_row < 0)
        return NULL;
    *pairs = xcalloc(d->npairs ? d->npairs : 1, sizeof(**pairs));
    const struct diff_step *shown = NULL;
    for (uint32_t p = 0; p < d->npairs; p++)
        for (size_t s = 0; s < d->pairs[p].nsteps; s++) {
            const struct diff_step *st = &d->pairs[p].steps[s];
            if ((int64_t)st->row != d->first_div_row)
                continue;
            if (diff_step_diverges(d, &d->pairs[p], st))
                (*pairs)[(*n)++] = p;
            if (p == d->first_div_pair)
                shown = st;
        }
    assert(shown);
    return shown;
}
