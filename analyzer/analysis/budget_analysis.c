/*
 * budget_analysis.c - the analysis behind `cutrace budget` (budget_analysis.h):
 *   1. ranks and jobs (budget_ranks.c): each process's pre and post
 *      measurements, grouped into jobs by the NCCL communicators they share;
 *   2. per rank: the measurements chosen and why, the GPU's live bytes per
 *      category at each, what was made between them, the KV pool seen after;
 *   3. per job: the server's own arithmetic (budget.h) - SGLang's float32
 *      MIN and rest/tokens, or vLLM's requested and available bytes - the
 *      verdict exactly where the server would fail, the smallest fraction
 *      that fits, and for SGLang the decomposition of rest by category,
 *      ranked by what each cost.
 */
#include "analysis/budget_analysis.h"
#include "analysis/budget_version.h"
#include "cli.h"
#include "symbols/stacks.h"
#include "out/units.h"

#include <assert.h>
#include <getopt.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const budget_part_keys[] = {
    "before_pre",    "unexplained_at_pre", "weights",       "between_pre_and_post",
    "freed_between", "unexplained_change", "draft_weights", "multimodal_reserve"};

void budget_add_note(struct budget_analysis *r, char *text)
{
    r->notes = xgrow(r->notes, &r->notes_cap, r->nnotes + 1, sizeof(*r->notes));
    r->notes[r->nnotes++] = text;
}

bool budget_parse_fraction(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || !(v > 0) || v > 1)
        return false;
    *out = v;
    return true;
}

/* A whole number of tokens >= 1 (a page size, a cap), kept as a double. */
static bool parse_count(const char *text, double *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < 1 || v > (1LL << 53))
        return false;
    *out = (double)v;
    return true;
}

/*
 * The value of `--flag V` or `--flag=V` in a shell-quoted command line, as
 * parse reads it; false when absent or not such a value.
 */
static bool cmdline_value(const char *cmdline, const char *flag,
                          bool (*parse)(const char *, double *), double *out)
{
    size_t n = strlen(flag);
    for (const char *at = strstr(cmdline, flag); at; at = strstr(at + 1, flag)) {
        if (at != cmdline && at[-1] != ' ' && at[-1] != '\'' && at[-1] != '"')
            continue;
        const char *v = at + n;
        if (*v == '\'' || *v == '"')
            v++;
        if (*v != '=' && *v != ' ')
            continue;
        v++;
        while (*v == ' ' || *v == '\'' || *v == '"')
            v++;
        char value[32];
        size_t len = strcspn(v, " '\"");
        if (len == 0 || len >= sizeof(value))
            continue;
        memcpy(value, v, len);
        value[len] = '\0';
        if (parse(value, out))
            return true;
    }
    return false;
}

/* Whose line gm_launch_line(m, p, i) is: "own", "launcher" or "run", and the pid. */
static const char *line_owner(const struct gm_process *p, size_t i, int64_t *pid)
{
    if (i == 0) {
        *pid = p->pid;
        return "own";
    }
    if (i <= p->nancestors) {
        *pid = p->ancestors[i - 1].pid;
        return "launcher";
    }
    *pid = 0;
    return "run";
}

static char *owner_text(const char *owner, int64_t pid, char *buf, size_t size)
{
    if (strcmp(owner, "own") == 0)
        snprintf(buf, size, "the command line of pid %" PRId64, pid);
    else if (strcmp(owner, "launcher") == 0)
        snprintf(buf, size, "launcher pid %" PRId64 "'s command line", pid);
    else
        snprintf(buf, size, "the command cutrace run launched");
    return buf;
}

char *budget_source_text(const struct budget_options *o, char *buf, size_t size)
{
    return owner_text(o->source_process ? o->source_process : "own", o->source_pid, buf, size);
}

char *budget_count_source_text(const struct budget_count *c, char *buf, size_t size)
{
    return owner_text(c->source_process ? c->source_process : "own", c->source_pid, buf, size);
}

/* A flag's value found on a command line, and whose line it was. */
struct cmdline_found {
    bool has;
    double value;
    int64_t pid;
    const char *owner;
};

/*
 * A flag's value from the command lines whose flags hold for each process
 * (gm_launch_line: its own, its launcher's, the run's). A spawned worker's
 * own line says nothing; its launcher's does. The first process's value
 * holds; another that disagrees gets a note.
 */
static struct cmdline_found launch_lines_value(struct budget_analysis *r, const char *flag,
                                               bool (*parse)(const char *, double *))
{
    const struct gm_model *m = r->m;
    struct cmdline_found found = {0};
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        const char *line;
        double v = 0;
        size_t k = 0;
        while ((line = gm_launch_line(m, p, k)) != NULL && !cmdline_value(line, flag, parse, &v))
            k++;
        if (!line)
            continue;
        int64_t pid;
        const char *owner = line_owner(p, k, &pid);
        if (!found.has) {
            found = (struct cmdline_found){true, v, pid, owner};
        } else if (v != found.value) {
            char first[96], other[96];
            budget_add_note(r, xasprintf("%s says %s %g, %s %g: using %g",
                                         owner_text(owner, pid, other, sizeof(other)), flag, v,
                                         owner_text(found.owner, found.pid, first, sizeof(first)),
                                         found.value, found.value));
        }
    }
    return found;
}

/* --page-size or --max-total-tokens (vLLM: --block-size, --max-model-len)
 * when no option gave it. */
void budget_count_from_cmdlines(struct budget_analysis *r, const char *flag, struct budget_count *c,
                                int64_t fallback)
{
    if (c->has)
        return;
    struct cmdline_found found = launch_lines_value(r, flag, parse_count);
    if (found.has)
        *c = (struct budget_count){true, (int64_t)found.value, "cmdline", found.pid, found.owner};
    else if (fallback > 0)
        *c = (struct budget_count){true, fallback, "default", 0, NULL};
    else
        *c = (struct budget_count){false, 0, "none", 0, NULL};
}

/* SGLang's speculative algorithms whose draft model's KV pool shares the
 * target's token budget by layer count (pool_configurator.py), and the
 * others it knows, as codes a flag's value parses to (the order matters:
 * the first three scale the cell size). */
static const char *const spec_algorithms[] = {"EAGLE", "EAGLE3",    "STANDALONE", "NEXTN",
                                              "NGRAM", "LOOKAHEAD", "DFLASH"};
#define SPEC_SCALED 4 /* codes 1-4 (NEXTN is EAGLE in SGLang) */

static bool parse_spec_algorithm(const char *text, double *out)
{
    for (size_t i = 0; i < sizeof(spec_algorithms) / sizeof(spec_algorithms[0]); i++)
        if (strcasecmp(text, spec_algorithms[i]) == 0) {
            *out = (double)(i + 1);
            return true;
        }
    return false;
}

static bool parse_transport(const char *text, double *out)
{
    if (strcmp(text, "cuda_ipc") != 0 && strcmp(text, "cuda_vmm") != 0)
        return false;
    *out = text[5] == 'i' ? 1 : 2;
    return true;
}

/* The first traced process's value of an environment variable, NULL if none has it. */
static const char *env_value(const struct gm_model *m, const char *name)
{
    for (size_t i = 0; i < m->nprocs; i++)
        for (size_t k = 0; k < m->procs[i].nenv; k++)
            if (strcmp(m->procs[i].env[k].name, name) == 0 && m->procs[i].env[k].value)
                return m->procs[i].env[k].value;
    return NULL;
}

/*
 * SGLang's multimodal reserve (kv_cache_configurator.py,
 * mm_runtime_reservation_gb): SGLANG_VLM_CACHE_SIZE_MB (default 100) for
 * the embedding cache, plus SGLANG_MM_FEATURE_CACHE_MB when the features
 * travel over CUDA IPC or VMM (--mm-feature-transport), in GiB (MB / 1024).
 */
static void multimodal_reserve(struct budget_analysis *r)
{
    struct budget_options *o = r->o;
    free(o->mm_reserve_why);
    o->mm_reserve_why = NULL;
    o->mm_reserve_gib = 0;
    if (!o->multimodal)
        return;
    const char *cache = env_value(r->m, "SGLANG_VLM_CACHE_SIZE_MB");
    char *end = NULL;
    double mb = cache ? strtod(cache, &end) : 100.0;
    if (cache && (end == cache || *end || !isfinite(mb)))
        mb = 100.0, cache = NULL;
    char from[160];
    snprintf(from, sizeof(from), "SGLANG_VLM_CACHE_SIZE_MB %s", cache ? cache : "100 (default)");
    double v = 0;
    struct cmdline_found transport = {0};
    const char *feature = env_value(r->m, "SGLANG_MM_FEATURE_CACHE_MB");
    if (feature) {
        /* cuda_ipc and cuda_vmm parse as 1 and 2: only they add the feature cache */
        transport = launch_lines_value(r, "--mm-feature-transport", parse_transport);
        if (transport.has && strtod(feature, &end) > 0 && *end == '\0') {
            mb += strtod(feature, NULL);
            v = 1;
        }
    }
    o->mm_reserve_gib = mb / 1024.0;
    o->mm_reserve_why = xasprintf("--multimodal: %s%s%s MB", from,
                                  v ? " + SGLANG_MM_FEATURE_CACHE_MB " : "", v ? feature : "");
}

void budget_values_from_cmdlines(struct budget_analysis *r)
{
    struct budget_options *o = r->o;
    if (o->framework == BUDGET_VLLM)
        budget_vllm_values_from_cmdlines(r); /* the code path, the KV cache's inputs */
    if (o->framework == BUDGET_SGLANG) {
        budget_count_from_cmdlines(r, "--page-size", &o->page_size, 1);
        budget_count_from_cmdlines(r, "--max-total-tokens", &o->max_total_tokens, 0);
        struct cmdline_found spec =
            launch_lines_value(r, "--speculative-algorithm", parse_spec_algorithm);
        o->spec_algorithm[0] = '\0';
        if (spec.has) {
            snprintf(o->spec_algorithm, sizeof(o->spec_algorithm), "%s",
                     spec_algorithms[(size_t)spec.value - 1]);
            o->spec_pid = spec.pid;
            o->spec_process = spec.owner;
        }
        multimodal_reserve(r);
    }
    const char *flag =
        o->framework == BUDGET_SGLANG ? "--mem-fraction-static" : "--gpu-memory-utilization";
    bool *has = o->framework == BUDGET_SGLANG ? &o->has_fraction : &o->has_util;
    double *value = o->framework == BUDGET_SGLANG ? &o->fraction : &o->util;
    const char **source = o->framework == BUDGET_SGLANG ? &o->fraction_source : &o->util_source;
    if (*has)
        return;
    struct cmdline_found found = launch_lines_value(r, flag, budget_parse_fraction);
    if (found.has) {
        *has = true;
        *value = found.value;
        *source = "cmdline";
        o->source_pid = found.pid;
        o->source_process = found.owner;
    } else if (o->framework == BUDGET_VLLM) {
        o->has_util = true;
        o->util = budget_vllm_current(r) ? BUDGET_VLLM_UTIL_CURRENT : BUDGET_VLLM_UTIL;
        o->util_source = "default";
    }
}

/* ---- ranks and jobs ---- */

void budget_measure_rank(const struct budget_analysis *r, struct budget_rank *rk)
{
    const struct gm_model *m = r->m;
    const struct gm_process *p = &m->procs[rk->proc];
    const struct gm_event *pre = &p->events[rk->pre], *post = &p->events[rk->post];
    rk->pre_free = pre->a;
    rk->pre_total = pre->b;
    rk->post_free = post->a;
    rk->post_total = post->b;

    /* The GPU at both measurements (all its processes). */
    struct gm_walk w;
    gm_walk_init(&w, m, rk->gpu);
    const struct gm_ref *ref;
    bool seen_pre = false, seen_post = false;
    while ((ref = gm_walk_step(&w)) != NULL && !seen_post) {
        if (ref->proc != rk->proc)
            continue;
        if (ref->event == rk->pre) {
            memcpy(rk->live_pre, w.live, sizeof(w.live));
            seen_pre = true;
        }
        if (ref->event == rk->post) { /* == pre for a vLLM rank with S0 alone */
            memcpy(rk->live_post, w.live, sizeof(w.live));
            seen_post = true;
        }
    }
    gm_walk_free(&w);
    assert(seen_pre && seen_post && "measurements are events of the GPU's stream");
    rk->unexpl_pre = gm_sub(gm_sub(rk->pre_total, rk->pre_free), gm_traced(rk->live_pre));
    rk->unexpl_post = gm_sub(gm_sub(rk->post_total, rk->post_free), gm_traced(rk->live_post));

    /* What was made between the two and is live at post; what was freed. */
    uint64_t ppre = pre->pos, ppost = post->pos;
    const struct gm_gpu *gpu = &m->gpus[rk->gpu];
    for (size_t k = 0; k < gpu->nprocs; k++) {
        const struct gm_process *q = &m->procs[gpu->procs[k]];
        for (size_t i = 0; i < q->nallocs; i++) {
            const struct gm_alloc *a = &q->allocs[i];
            if (a->gpu != rk->gpu || a->category >= GM_GPU_CATEGORIES)
                continue;
            uint64_t made = q->events[a->event].pos, ended = gm_alloc_end_pos(q, a);
            if (made < ppre && ended > ppre && ended < ppost)
                rk->freed_between = gm_add(rk->freed_between, a->size);
            if (made > ppre && made < ppost && ended > ppost) {
                bool own = gpu->procs[k] == rk->proc;
                bool weights = rk->has_burst && own && a->event >= rk->burst.first &&
                               a->event <= rk->burst.last && a->top;
                bool draft = own && rk->draft_from != GM_NONE && a->event > rk->draft_from;
                if (draft)
                    rk->draft_live = gm_add(rk->draft_live, a->size);
                else if (weights)
                    rk->weights_live = gm_add(rk->weights_live, a->size);
                else
                    rk->between[a->category] = gm_add(rk->between[a->category], a->size);
            }
        }
    }
    rk->has_kv = gm_equal_set_after(m, rk->proc, rk->gpu, rk->post, &rk->kv_count, &rk->kv_size);
}

static void add_drow(struct budget_rank *rk, enum budget_part part, int category, int64_t bytes,
                     double cost)
{
    if (bytes == 0)
        return;
    assert(rk->nrows < sizeof(rk->rows) / sizeof(rk->rows[0]));
    rk->rows[rk->nrows++] = (struct budget_row){part, category, bytes, cost};
}

static int compare_drows(const void *a, const void *b)
{
    const struct budget_row *x = a, *y = b;
    if (x->cost_gib != y->cost_gib)
        return x->cost_gib > y->cost_gib ? -1 : 1;
    if (x->part != y->part)
        return x->part < y->part ? -1 : 1;
    return (x->category > y->category) - (x->category < y->category);
}

/* SGLang: the parts of this rank's rest, ranked by what each cost. */
static void decompose(const struct budget_analysis *r, struct budget_rank *rk)
{
    double f = r->o->fraction;
    for (int c = 0; c < GM_GPU_CATEGORIES; c++)
        add_drow(rk, BUDGET_PART_BEFORE, c, rk->live_pre[c],
                 (double)rk->live_pre[c] * f / BUDGET_GIB);
    add_drow(rk, BUDGET_PART_UNEXPLAINED, -1, rk->unexpl_pre,
             (double)rk->unexpl_pre * f / BUDGET_GIB);
    add_drow(rk, BUDGET_PART_WEIGHTS, -1, rk->weights_live, (double)rk->weights_live / BUDGET_GIB);
    add_drow(rk, BUDGET_PART_DRAFT, -1, rk->draft_live, (double)rk->draft_live / BUDGET_GIB);
    for (int c = 0; c < GM_GPU_CATEGORIES; c++)
        add_drow(rk, BUDGET_PART_BETWEEN, c, rk->between[c], (double)rk->between[c] / BUDGET_GIB);
    add_drow(rk, BUDGET_PART_FREED, -1, rk->freed_between, -(double)rk->freed_between / BUDGET_GIB);
    int64_t delta = gm_sub(rk->unexpl_post, rk->unexpl_pre);
    add_drow(rk, BUDGET_PART_UNEXPL_DELTA, -1, delta, (double)delta / BUDGET_GIB);
    double reserve = r->o->mm_reserve_gib;
    add_drow(rk, BUDGET_PART_RESERVE, -1, (int64_t)llround(reserve * BUDGET_GIB), reserve);
    if (rk->nrows > 1)
        qsort(rk->rows, rk->nrows, sizeof(*rk->rows), compare_drows);
    /* rest = F * total - the costs (exact when pre and post agree on total). */
    rk->rest_own =
        budget_sglang_rest_reserved((double)rk->post_free / BUDGET_GIB,
                                    (double)rk->pre_free / BUDGET_GIB, f, r->o->mm_reserve_gib);
    rk->ledger_budget = f * (double)rk->pre_total / BUDGET_GIB;
    double costs = 0;
    for (size_t i = 0; i < rk->nrows; i++)
        costs += rk->rows[i].cost_gib;
    rk->ledger_other = rk->rest_own - (rk->ledger_budget - costs);
}

/* ---- per job ---- */

static char *signed_mib_gib(char *buf, size_t size, double gib)
{
    if (gib > -1.0 && gib < 1.0)
        snprintf(buf, size, "%+.1f MiB", gib * 1024.0);
    else
        snprintf(buf, size, "%+.2f GiB", gib);
    return buf;
}

char *budget_part_label(const struct budget_row *d)
{
    switch (d->part) {
    case BUDGET_PART_BEFORE:
    case BUDGET_PART_BETWEEN:
        return xasprintf("%s (%s)", gm_category_label((enum gm_category)d->category),
                         gm_category_key((enum gm_category)d->category));
    case BUDGET_PART_UNEXPLAINED:
        return xstrdup("unexplained at pre (CUDA contexts, untraced memory)");
    case BUDGET_PART_WEIGHTS:
        return xstrdup("weights (the weight burst)");
    case BUDGET_PART_FREED:
        return xstrdup("freed between pre and post");
    case BUDGET_PART_UNEXPL_DELTA:
        return xstrdup("unexplained change between pre and post");
    case BUDGET_PART_DRAFT:
        return xstrdup("the draft model (speculative decoding: its weights and buffers)");
    case BUDGET_PART_RESERVE:
        return xstrdup("multimodal reserve (SGLang's, for the caches it makes later)");
    }
    return xstrdup("?");
}

const char *budget_part_when(enum budget_part part)
{
    switch (part) {
    case BUDGET_PART_BEFORE:
        return "made before pre";
    case BUDGET_PART_UNEXPLAINED:
        return "at pre";
    case BUDGET_PART_FREED:
        return "pre -> post";
    case BUDGET_PART_RESERVE:
        return "subtracted from rest";
    default:
        return "made pre -> post";
    }
}

/* SGLang's page size and cap (0: none) as the options settled them. */
static int64_t page_size(const struct budget_options *o)
{
    return o->page_size.has ? o->page_size.value : 1;
}

static int64_t max_total_tokens(const struct budget_options *o)
{
    return o->max_total_tokens.has ? o->max_total_tokens.value : 0;
}

/*
 * The bytes per token the job's replay uses (SGLang): --cell-size, else
 * DeepSeek-V3's, scaled for an EAGLE or STANDALONE draft model when the
 * layers are known. A trace cannot tell it (budget_sglang_pool_matches):
 * the KV pool seen after post only confirms it or not (pool_check).
 */
static void job_cell_size(struct budget_analysis *r, struct budget_job *g)
{
    struct budget_options *o = r->o;
    g->cell_size = o->cell_size;
    if (o->has_cell_size) {
        g->cell_source = "option";
        g->cell_why = xasprintf("%" PRId64 " B per token (--cell-size)", o->cell_size);
    } else {
        g->cell_source = "default";
        g->cell_why = xasprintf("%" PRId64 " B per token assumed (DeepSeek-V3 / Kimi-K2 MLA in "
                                "bf16): --cell-size gives the model's",
                                o->cell_size);
    }
    bool scaled = false;
    for (size_t i = 0; i < SPEC_SCALED && o->spec_algorithm[0]; i++)
        scaled |= strcmp(o->spec_algorithm, spec_algorithms[i]) == 0;
    if (!scaled)
        return;
    char *why = g->cell_why;
    if (o->num_layers.has && o->draft_layers.has) {
        g->cell_size =
            budget_sglang_spec_cell_size(g->cell_size, o->num_layers.value, o->draft_layers.value);
        g->cell_why = xasprintf("%s, x (1 + %" PRId64 " / %" PRId64 ") for the %s draft model = "
                                "%" PRId64 " B",
                                why, o->draft_layers.value, o->num_layers.value, o->spec_algorithm,
                                g->cell_size);
    } else {
        g->cell_why = xasprintf("%s; not scaled for the %s draft model's KV pool (SGLang "
                                "multiplies it by 1 + draft layers / layers): --num-layers and "
                                "--draft-num-layers give them",
                                why, o->spec_algorithm);
    }
    free(why);
}

/* Whether the KV pool the trace saw after post is the one this replay
 * predicts: "matches", "differs" (said in cell_why), NULL when none. */
static void pool_check(struct budget_job *g)
{
    const struct budget_rank *rk = &g->ranks[g->post_rank];
    if (!rk->has_kv || !g->fits)
        return;
    int64_t page = g->page_size;
    if (budget_sglang_pool_matches(g->tokens, page, rk->kv_count, rk->kv_size, g->cell_size)) {
        g->pool_check = "matches";
        return;
    }
    g->pool_check = "differs";
    char *why = g->cell_why;
    g->cell_why = xasprintf("%s; the KV pool seen after post (%" PRId64 " x %" PRId64
                            " B) is not (%" PRId64 " tokens + page %" PRId64 ") x %" PRId64
                            " B: the cell size or the tokens differ from the server's",
                            why, rk->kv_count, rk->kv_size, g->tokens, page, g->cell_size);
    free(why);
}

/* Whether SGLang would go on with this rest, on the job's path and pool. */
static bool rest_fits(const struct budget_analysis *r, const struct budget_job *g, double rest)
{
    const struct budget_options *o = r->o;
    int64_t tokens;
    if (r->server.path == BUDGET_PATH_SGLANG_CURRENT) {
        if (!(rest > 0))
            return false;
        tokens = budget_sglang_available_bytes(rest) / g->cell_size;
    } else {
        tokens = budget_sglang_tokens(rest, g->cell_size);
    }
    return budget_sglang_pool_tokens(tokens, page_size(o), max_total_tokens(o)) > 0;
}

/* A part the user could do without: not the weights, not what rest bought. */
static bool removable(const struct budget_row *d)
{
    return d->cost_gib > 0 && d->part != BUDGET_PART_WEIGHTS && d->part != BUDGET_PART_FREED;
}

/* "custom all-reduce buffers (ipc_exported, 1.00 GiB made before pre)" */
static char *part_phrase(const struct budget_row *d)
{
    char bytes[UNITS_BUF];
    format_bytes_signed(bytes, sizeof(bytes), d->bytes);
    switch (d->part) {
    case BUDGET_PART_UNEXPLAINED:
        return xasprintf("memory the traces do not explain (%s at pre: CUDA contexts, untraced "
                         "memory)",
                         bytes);
    case BUDGET_PART_BEFORE:
    case BUDGET_PART_BETWEEN:
        return xasprintf("%s (%s, %s %s)", gm_category_label((enum gm_category)d->category),
                         gm_category_key((enum gm_category)d->category), bytes,
                         d->part == BUDGET_PART_BEFORE ? "made before pre"
                                                       : "made between pre and post");
    default: {
        char *label = budget_part_label(d);
        char *text = xasprintf("%s (%s)", label, bytes);
        free(label);
        return text;
    }
    }
}

/*
 * One line that names what pushed a failing run under, in the replayed
 * formula's terms: the costliest part without which it would fit; else the
 * fewest parts, costliest first, without which it would; else that even
 * without all of them the weights leave no room. It never blames a part
 * whose removal would still not fit.
 */
static char *conclusion(const struct budget_analysis *r, const struct budget_job *g,
                        const struct budget_rank *rk)
{
    char cost[UNITS_BUF], without[UNITS_BUF];
    for (size_t i = 0; i < rk->nrows; i++) {
        const struct budget_row *d = &rk->rows[i];
        if (!removable(d) || !rest_fits(r, g, g->rest + d->cost_gib))
            continue;
        char *part = part_phrase(d);
        format_bytes_signed(cost, sizeof(cost), (int64_t)llround(d->cost_gib * BUDGET_GIB));
        signed_mib_gib(without, sizeof(without), g->rest + d->cost_gib);
        char *text = xasprintf("%s cost rest %s: without %s rest would be %s", part, cost,
                               d->part == BUDGET_PART_UNEXPLAINED ? "it" : "them", without);
        free(part);
        return text;
    }
    /* No one part is enough: the fewest that are, costliest first. */
    double rest = g->rest;
    size_t taken = 0;
    char *list = xstrdup("");
    bool fits = false;
    for (size_t i = 0; i < rk->nrows && !fits; i++) {
        const struct budget_row *d = &rk->rows[i];
        if (!removable(d))
            continue;
        char *part = part_phrase(d);
        char *longer = xasprintf("%s%s%s", list, taken ? "; " : "", part);
        free(part);
        free(list);
        list = longer;
        rest += d->cost_gib;
        taken++;
        fits = rest_fits(r, g, rest);
    }
    signed_mib_gib(without, sizeof(without), rest);
    char weights[UNITS_BUF];
    format_bytes_signed(weights, sizeof(weights), gm_add(rk->weights_live, rk->draft_live));
    char fix[64] = "";
    if (!fits && g->has_f_min)
        snprintf(fix, sizeof(fix), "; --mem-fraction-static %.3f fits", g->f_min_rounded);
    char *text;
    if (fits)
        text = xasprintf("no single part is enough: only without all of %s would rest be %s", list,
                         without);
    else if (taken)
        text = xasprintf("the weights (%s live at post) leave no room under this F: even "
                         "without everything else (%s) rest would be %s%s",
                         weights, list, without, fix);
    else
        text =
            xasprintf("the weights (%s live at post) leave no room under this F%s", weights, fix);
    free(list);
    return text;
}

/*
 * Where the server's own Python code made the chosen measurements, when the
 * traces carry Python stacks (stacks.h): the functions that measure free
 * memory for the budget (docs/budget.md) are said in the rank's choice.
 */
void budget_name_measurements(const struct budget_analysis *r, struct budget_rank *rk)
{
    /* load_model and profile_cudagraph_memory too: a burst that chose one
     * of their measurements chose what the server does not use. */
    static const char *const names[] = {
        "init_torch_distributed",
        "profile_max_num_token",
        "_profile_available_bytes",
        "determine_available_memory",
        "profile_run",
        "init_device",
        "load_model",
        "profile_cudagraph_memory",
    };
    const size_t n = sizeof(names) / sizeof(names[0]);
    const struct gm_process *p = &r->m->procs[rk->proc];
    struct trace *t = (struct trace *)p->trace; /* read only */
    char *pre = stacks_python_function(t, p->events[rk->pre].seq, names, n);
    char *post = stacks_python_function(t, p->events[rk->post].seq, names, n);
    if (pre || post) {
        char *choice = xasprintf("%s; by the Python stacks, pre is in %s and post in %s",
                                 rk->choice ? rk->choice : "", pre ? pre : "no function named",
                                 post ? post : "no function named");
        free(rk->choice);
        rk->choice = choice;
    }
    free(pre);
    free(post);
}

static void analyse_group(struct budget_analysis *r, struct budget_job *g)
{
    const struct budget_options *o = r->o;
    if (o->framework == BUDGET_VLLM) {
        budget_vllm_analyse_job(r, g);
        return;
    }
    g->float_ranks = (int)(g->world > (int64_t)g->nranks ? (g->world > 1 << 20 ? 1 << 20 : g->world)
                                                         : (int64_t)g->nranks);
    bool first = true;
    for (size_t k = 0; k < g->nranks; k++) {
        struct budget_rank *rk = &g->ranks[k];
        if (!rk->analysed)
            continue;
        budget_measure_rank(r, rk);
        if (!rk->by_names)
            budget_name_measurements(r, rk);
        g->analysed++;
        if (o->framework == BUDGET_SGLANG) {
            decompose(r, rk);
            if (first || (uint64_t)rk->pre_free < g->min_pre) {
                g->min_pre = (uint64_t)rk->pre_free;
                g->pre_rank = k;
            }
            if (first || (uint64_t)rk->post_free < g->min_post) {
                g->min_post = (uint64_t)rk->post_free;
                g->post_rank = k;
            }
        }
        first = false;
    }
    r->analysed += g->analysed;
    if (g->analysed == 0)
        return;
    if (o->framework == BUDGET_SGLANG) {
        g->pre_gib = budget_sglang_gib(g->min_pre, g->float_ranks);
        g->post_gib = budget_sglang_gib(g->min_post, g->float_ranks);
        bool current = r->server.path == BUDGET_PATH_SGLANG_CURRENT;
        g->mm_reserve_gib = current ? o->mm_reserve_gib : 0;
        g->rest =
            budget_sglang_rest_reserved(g->post_gib, g->pre_gib, o->fraction, g->mm_reserve_gib);
        job_cell_size(r, g);
        g->page_size = page_size(o);
        struct budget_sglang_pool pool = {g->cell_size, g->page_size, max_total_tokens(o),
                                          g->mm_reserve_gib, current};
        if (current && !(g->rest > 0)) {
            /* _profile_available_bytes raises before any token is counted */
            g->tokens_profiled = g->tokens = 0;
            g->error_type = "ValueError";
            g->verdict = budget_sglang_value_error(o->fraction, g->post_gib, g->pre_gib);
        } else {
            if (current) {
                g->has_kv_budget = true;
                g->kv_budget_bytes = budget_sglang_available_bytes(g->rest);
                g->tokens_profiled = g->kv_budget_bytes / g->cell_size;
            } else {
                g->tokens_profiled = budget_sglang_tokens(g->rest, g->cell_size);
            }
            g->tokens = budget_sglang_pool_tokens(g->tokens_profiled, pool.page_size,
                                                  pool.max_total_tokens);
            g->fits = g->tokens > 0;
            g->error_type = g->fits ? NULL : "RuntimeError";
            g->verdict = g->fits ? xasprintf("fits: %" PRId64 " tokens", g->tokens)
                                 : xstrdup(BUDGET_SGLANG_ERR);
        }
        g->f_min = budget_sglang_pool_f_min(g->post_gib, g->pre_gib, &pool);
        g->has_f_min =
            budget_sglang_pool_f_min_rounded(g->post_gib, g->pre_gib, &pool, &g->f_min_rounded);
        if (!g->fits && g->tokens_profiled > 0)
            g->conclusion = xasprintf(
                "rest buys %" PRId64 " tokens, less than one page of %" PRId64 " (--page-size)",
                g->tokens_profiled < pool.max_total_tokens || pool.max_total_tokens == 0
                    ? g->tokens_profiled
                    : pool.max_total_tokens,
                pool.page_size);
        else if (!g->fits)
            g->conclusion = conclusion(r, g, &g->ranks[g->post_rank]);
        pool_check(g);
    }
}

void budget_analysis_free(struct budget_analysis *r)
{
    for (size_t i = 0; i < r->ngroups; i++) {
        struct budget_job *g = &r->groups[i];
        for (size_t k = 0; k < g->nranks; k++) {
            free(g->ranks[k].problem);
            free(g->ranks[k].choice);
        }
        free(g->ranks);
        free(g->missing);
        free(g->conclusion);
        free(g->verdict);
        free(g->cell_why);
        free(g->missing_inputs);
    }
    free(r->groups);
    free(r->o->mm_reserve_why);
    r->o->mm_reserve_why = NULL;
    free(r->o->derived.defaulted);
    free(r->o->derived.why);
    r->o->derived.defaulted = r->o->derived.why = NULL;
    free(r->server.framework_why);
    free(r->server.path_why);
    for (size_t i = 0; i < r->nnotes; i++)
        free(r->notes[i]);
    free(r->notes);
}

void budget_options_init(struct budget_options *o, struct budget_option_state *st)
{
    *o = (struct budget_options){.cell_size = BUDGET_CELL_SIZE, .burst_min = GM_BURST_MIN_DEFAULT};
    *st = (struct budget_option_state){0};
}

static bool parse_bytes_opt(const char *text, int64_t *out, bool positive)
{
    uint64_t v;
    if (parse_size(text, &v) != 0 || v > INT64_MAX || (positive && v == 0))
        return false;
    *out = (int64_t)v;
    return true;
}

int budget_option(const char *cmd, int c, const char *arg, struct budget_options *o,
                  struct budget_option_state *st)
{
    switch (c) {
    case 'f':
        st->framework = arg;
        return 1;
    case 'F':
        if (!budget_parse_fraction(arg, &o->fraction))
            return cli_usage_error(cmd, "--mem-fraction-static %s: expected a number in (0, 1]",
                                   arg);
        o->has_fraction = true;
        o->fraction_source = "option";
        st->budget_only = true;
        return 1;
    case 'U':
        if (!budget_parse_fraction(arg, &o->util))
            return cli_usage_error(cmd, "--gpu-memory-utilization %s: expected a number in (0, 1]",
                                   arg);
        o->has_util = true;
        o->util_source = "option";
        st->budget_only = true;
        return 1;
    case 'c':
        if (!parse_bytes_opt(arg, &o->cell_size, true))
            return cli_usage_error(cmd, "--cell-size %s: expected a positive size in bytes", arg);
        o->has_cell_size = true;
        st->budget_only = true;
        return 1;
    case 'D': {
        double v;
        if (!parse_count(arg, &v))
            return cli_usage_error(cmd,
                                   "--draft-num-layers %s: expected a whole number of layers "
                                   ">= 1",
                                   arg);
        o->draft_layers = (struct budget_count){true, (int64_t)v, "option", 0, NULL};
        st->budget_only = true;
        st->sglang_only = "--draft-num-layers";
        return 1;
    }
    case 'b':
        if (!parse_bytes_opt(arg, &o->burst_min, true))
            return cli_usage_error(cmd, "--burst-min %s: expected a positive size in bytes", arg);
        return 1;
    case 'k':
    case 'T': {
        struct budget_count *count = c == 'k' ? &o->page_size : &o->max_total_tokens;
        double v;
        if (!parse_count(arg, &v))
            return cli_usage_error(cmd, "%s %s: expected a whole number of tokens >= 1",
                                   c == 'k' ? "--page-size" : "--max-total-tokens", arg);
        *count = (struct budget_count){true, (int64_t)v, "option", 0, NULL};
        st->budget_only = true;
        st->sglang_only = c == 'k' ? "--page-size" : "--max-total-tokens";
        return 1;
    }
    case 'V': {
        int parts[4];
        if (!budget_parse_server_version(arg, parts))
            return cli_usage_error(cmd, "--server-version %s: not a version number like 0.5.16",
                                   arg);
        o->server_version = arg;
        st->budget_only = true;
        return 1;
    }
    case 'M':
        o->multimodal = true;
        st->budget_only = true;
        st->sglang_only = "--multimodal";
        return 1;
    case 'g':
        if (!parse_bytes_opt(arg, &o->graph_estimate, false))
            return cli_usage_error(cmd, "--cuda-graph-estimate %s: expected a size in bytes", arg);
        o->graph_estimate_source = "option";
        st->has_graph = true;
        st->budget_only = true;
        return 1;
    default:
        return budget_vllm_option(cmd, c, arg, o, st);
    }
}

int budget_options_finish(const char *cmd, bool framework_required, struct budget_options *o,
                          struct budget_option_state *st)
{
    if (!st->framework) {
        if (framework_required)
            return cli_usage_error(cmd, "--framework sglang|vllm is required");
        if (st->detect)
            return CLI_PARSED;
        if (st->budget_only)
            return cli_usage_error(cmd, "the budget options need --framework sglang|vllm");
        return CLI_PARSED;
    }
    if (strcmp(st->framework, "sglang") == 0)
        o->framework = BUDGET_SGLANG;
    else if (strcmp(st->framework, "vllm") == 0)
        o->framework = BUDGET_VLLM;
    else
        return cli_usage_error(cmd, "--framework %s: expected sglang or vllm", st->framework);
    return budget_options_framework(cmd, o, st);
}

int budget_options_framework(const char *cmd, struct budget_options *o,
                             const struct budget_option_state *st)
{
    if (o->framework == BUDGET_SGLANG && (o->has_util || st->has_graph || st->vllm_only))
        return cli_usage_error(cmd, "%s is a vLLM option",
                               o->has_util     ? "--gpu-memory-utilization"
                               : st->has_graph ? "--cuda-graph-estimate"
                                               : st->vllm_only);
    if (o->framework == BUDGET_VLLM && (o->has_fraction || st->sglang_only))
        return cli_usage_error(cmd, "%s is an SGLang option",
                               o->has_fraction ? "--mem-fraction-static" : st->sglang_only);
    return CLI_PARSED;
}

/* The JSON and text name of a path. */
const char *budget_path_name(enum budget_path path)
{
    switch (path) {
    case BUDGET_PATH_SGLANG_OLDER:
        return "sglang-older";
    case BUDGET_PATH_SGLANG_CURRENT:
        return "sglang-current";
    case BUDGET_PATH_VLLM_OLDER:
        return "vllm-older";
    case BUDGET_PATH_VLLM_CURRENT:
        return "vllm-current";
    default:
        return "unknown";
    }
}

int budget_analyse(struct budget_analysis *r)
{
    if (budget_find_groups(r) != 0)
        return -1;
    if (r->server.path == BUDGET_PATH_UNKNOWN && r->o->framework == BUDGET_SGLANG)
        budget_choose_path(r);
    if (r->o->framework == BUDGET_SGLANG && r->o->multimodal &&
        r->server.path != BUDGET_PATH_SGLANG_CURRENT)
        budget_add_note(r, xasprintf("--multimodal: the %s path reserves nothing for multimodal "
                                     "caches",
                                     budget_path_name(r->server.path)));
    for (size_t i = 0; i < r->ngroups; i++)
        analyse_group(r, &r->groups[i]);
    return 0;
}
