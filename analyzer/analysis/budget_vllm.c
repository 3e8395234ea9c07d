/*
 * budget_vllm.c - the vLLM half of `cutrace budget` (budget_analysis.h,
 * docs/budget.md "vLLM"): which of vLLM's code paths a trace comes from,
 * its inputs from the launch lines and the options, and per job the
 * replay of its worker's start-up:
 *   init_device:  S0, requested (truncated or ceil by the path), and the
 *                 early failure when free at S0 is below it (S0 alone
 *                 replays that: the worker died there);
 *   determine_available_memory: memory_profiling's non-KV memory (weights,
 *                 torch's peak increase, the non-torch increase to S1),
 *                 the CUDA-graph estimate from profile_cudagraph_memory's
 *                 measurements when the environment applies it;
 *   the KV cache: blocks and the max_model_len check, with vLLM's messages.
 * torch's allocated counters are not in a cudaMalloc trace: they are taken
 * as its segments (runtime memory) and bounded by how far a segment's
 * blocks can fall short of it; the verdict is given over that range.
 */
#include "analysis/budget_analysis.h"
#include "analysis/budget_version.h"
#include "cli.h"
#include "symbols/stacks.h"
#include "out/units.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((int64_t)1 << 20)
/* --server-version from which the current path is replayed (docs/budget.md:
 * the release is approximate, the sources show no single change) */
#define CURRENT_MAJOR 0
#define CURRENT_MINOR 18
#define GRAPH_ENV     "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
/* the release from which that estimate is applied by default (0.x) */
#define GRAPHS_DEFAULT_MINOR 21

static const char *const graph_functions[] = {"profile_cudagraph_memory"};

/* ---- the code path ---- */

/* The first measurement on a Python stack in profile_cudagraph_memory. */
static char *graph_measurement(const struct gm_model *m, int64_t *pid)
{
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        struct trace *t = (struct trace *)p->trace; /* read only */
        for (size_t e = 0; e < p->nevents; e++) {
            if (p->events[e].type != GM_EV_MEASURE)
                continue;
            char *fn = stacks_python_function(t, p->events[e].seq, graph_functions, 1);
            if (fn) {
                *pid = p->pid;
                return fn;
            }
        }
    }
    return NULL;
}

enum budget_path budget_vllm_path(const struct budget_analysis *r, const char **source, char **why)
{
    const char *version = r->o->server_version;
    int parts[4];
    if (version && budget_parse_server_version(version, parts)) {
        bool current = budget_version_at_least(version, CURRENT_MAJOR, CURRENT_MINOR);
        *source = "option";
        *why = xasprintf("--server-version %s: %s %d.%d", version,
                         current ? "at or after" : "before", CURRENT_MAJOR, CURRENT_MINOR);
        return current ? BUDGET_PATH_VLLM_CURRENT : BUDGET_PATH_VLLM_OLDER;
    }
    int64_t pid = 0;
    char *fn = graph_measurement(r->m, &pid);
    if (fn) {
        *source = "trace";
        *why = xasprintf("pid %" PRId64 " measured in %s: a V1 worker that profiles its CUDA "
                         "graphs' memory",
                         pid, fn);
        free(fn);
        return BUDGET_PATH_VLLM_CURRENT;
    }
    *source = "default";
    *why = version ? xasprintf("--server-version %s is not a version, and no measurement was "
                               "made in profile_cudagraph_memory",
                               version)
                   : xstrdup("no --server-version, and no measurement was made in "
                             "profile_cudagraph_memory");
    return BUDGET_PATH_VLLM_OLDER;
}

bool budget_vllm_current(const struct budget_analysis *r)
{
    if (r->server.path == BUDGET_PATH_VLLM_CURRENT || r->server.path == BUDGET_PATH_VLLM_OLDER)
        return r->server.path == BUDGET_PATH_VLLM_CURRENT;
    const char *source;
    char *why = NULL;
    enum budget_path path = budget_vllm_path(r, &source, &why);
    free(why);
    return path == BUDGET_PATH_VLLM_CURRENT;
}

/* ---- inputs ---- */

void budget_vllm_values_from_cmdlines(struct budget_analysis *r)
{
    struct budget_options *o = r->o;
    if (r->server.path != BUDGET_PATH_VLLM_CURRENT && r->server.path != BUDGET_PATH_VLLM_OLDER) {
        free(r->server.path_why);
        r->server.path = budget_vllm_path(r, &r->server.path_source, &r->server.path_why);
    }
    /* block_size has no static default: CUDA platforms set 16 */
    budget_count_from_cmdlines(r, "--block-size", &o->block_size, 16);
    budget_count_from_cmdlines(r, "--max-model-len", &o->max_model_len, 0);
    if (!o->num_layers.has)
        o->num_layers = (struct budget_count){false, 0, "none", 0, NULL};
    if (!o->block_bytes.has)
        o->block_bytes = (struct budget_count){false, 0, "none", 0, NULL};
}

int budget_vllm_option(const char *cmd, int c, const char *arg, struct budget_options *o,
                       struct budget_option_state *st)
{
    struct budget_count *count;
    const char *flag;
    switch (c) {
    case BUDGET_OPT_BLOCK_SIZE:
        count = &o->block_size, flag = "--block-size";
        break;
    case BUDGET_OPT_NUM_LAYERS:
        count = &o->num_layers, flag = "--num-layers";
        break;
    case BUDGET_OPT_BLOCK_BYTES:
        count = &o->block_bytes, flag = "--block-bytes";
        break;
    case BUDGET_OPT_MAX_MODEL_LEN:
        count = &o->max_model_len, flag = "--max-model-len";
        break;
    default:
        return 0;
    }
    uint64_t v;
    char *end;
    errno = 0;
    long long n = strtoll(arg, &end, 10);
    bool ok = c == BUDGET_OPT_BLOCK_BYTES ? parse_size(arg, &v) == 0 && v > 0 && v <= INT64_MAX
                                          : !errno && end != arg && !*end && n >= 1;
    if (!ok)
        return cli_usage_error(cmd, "%s %s: expected a whole number >= 1%s", flag, arg,
                               c == BUDGET_OPT_BLOCK_BYTES ? " (bytes)" : "");
    *count = (struct budget_count){true, c == BUDGET_OPT_BLOCK_BYTES ? (int64_t)v : n, "option", 0,
                                   NULL};
    st->budget_only = true;
    if (c != BUDGET_OPT_NUM_LAYERS) /* the layers are SGLang's input too */
        st->vllm_only = flag;
    return 1;
}

/* ---- per rank ---- */

/*
 * How far torch's allocated bytes can fall short of a segment it reserved
 * (PyTorch's CUDACachingAllocator): a request of 10 MiB or more gets a
 * segment of its size rounded up to 2 MiB, so it fills all but < 2 MiB; a
 * 20 MiB segment may hold one request above 1 MiB; a smaller one as little
 * as a byte. Blocks freed inside a live segment are not counted: after
 * empty_cache, which vLLM calls before each snapshot, none are cached.
 */
static int64_t segment_slack(int64_t size)
{
    if (size <= 0)
        return 0;
    if (size == 20 * MIB)
        return size - MIB - 1;
    if (size >= 10 * MIB)
        return 2 * MIB - 1;
    return size - 1;
}

/* The cuda:N vLLM names: the ordinal current at the process's calls on it. */
static int64_t device_ordinal(const struct gm_process *p, uint32_t gpu)
{
    for (size_t i = 0; i < p->nallocs; i++)
        if (p->allocs[i].gpu == gpu && p->allocs[i].device >= 0)
            return p->allocs[i].device;
    return p->ndevices == 1 ? p->devices[0].ordinal : -1;
}

/*
 * Whether the worker subtracted its CUDA-graph estimate: as its environment
 * says (vllm/envs.py reads the variable as an int), else as the release's
 * default, on from about 0.21 (--server-version; off when not given).
 */
static bool env_applies_graphs(const struct budget_options *o, const struct gm_process *p,
                               const char **why)
{
    for (size_t i = 0; i < p->nenv; i++)
        if (strcmp(p->env[i].name, GRAPH_ENV) == 0 && p->env[i].value) {
            bool on = strtol(p->env[i].value, NULL, 10) != 0;
            *why = on ? "environment" : "not applied: environment";
            return on;
        }
    bool on =
        o->server_version && budget_version_at_least(o->server_version, 0, GRAPHS_DEFAULT_MINOR);
    *why = on ? "release default" : "not applied: " GRAPH_ENV " not set";
    return on;
}

/* profile_cudagraph_memory's brackets after S0: (free before - free after) each. */
static void graph_brackets(const struct budget_analysis *r, struct budget_rank *rk)
{
    const struct gm_process *p = &r->m->procs[rk->proc];
    struct trace *t = (struct trace *)p->trace; /* read only */
    int64_t before = -1;
    for (size_t i = rk->pre + 1; i < p->nevents; i++) {
        const struct gm_event *e = &p->events[i];
        if (e->type != GM_EV_MEASURE || e->gpu != rk->gpu || i == rk->post)
            continue;
        char *fn = stacks_python_function(t, e->seq, graph_functions, 1);
        if (!fn)
            continue;
        free(fn);
        if (before < 0) {
            before = e->a;
        } else {
            rk->graph_measured = gm_add(rk->graph_measured, gm_sub(before, e->a));
            rk->graph_brackets++;
            before = -1;
        }
    }
}

/* torch's reserved bytes (this process's runtime memory) over time, and
 * the rest of the worker's arithmetic. */
static void vllm_rank(const struct budget_analysis *r, struct budget_rank *rk, bool current)
{
    const struct gm_model *m = r->m;
    const struct budget_options *o = r->o;
    const struct gm_process *p = &m->procs[rk->proc];
    rk->device_ordinal = device_ordinal(p, rk->gpu);
    rk->requested = budget_vllm_requested_on(current, rk->pre_total, o->util);
    rk->early_failure = budget_vllm_early_failure(current, rk->pre_free, rk->pre_total, o->util);
    rk->has_u_max = budget_vllm_u_max_on(current, rk->pre_total, rk->pre_free, &rk->u_max);
    if (rk->s0_only)
        return;
    /* vLLM measures nothing between loading the weights and its profiling
     * pass, so the stretch from S0 to S1 holds both: the weights are what it
     * made through torch that is still live at S1 (torch's memory delta over
     * load_model), and the weight burst ends at the last of them. */
    size_t weights_end = rk->has_burst ? rk->burst.last : SIZE_MAX;
    rk->weights = 0;
    if (rk->has_burst) {
        weights_end = rk->burst.first;
        for (size_t i = rk->burst.first; i <= rk->burst.last && i < p->nevents; i++) {
            const struct gm_event *e = &p->events[i];
            if (e->type != GM_EV_ALLOC || e->gpu != rk->gpu)
                continue;
            const struct gm_alloc *a = &p->allocs[e->a];
            /* torch's own memory only: what NCCL took meanwhile is non-torch */
            if (!a->top || a->category != GM_CAT_RUNTIME)
                continue;
            if (a->end_event != GM_NONE && a->end_event <= rk->post)
                continue;
            rk->weights = gm_add(rk->weights, a->size);
            weights_end = i;
        }
    }
    int64_t runtime = 0, slack = 0;
    bool after_burst = !rk->has_burst;
    for (size_t i = 0; i < p->nevents; i++) {
        const struct gm_event *e = &p->events[i];
        if (i == rk->pre) {
            rk->torch_pre = runtime;
            rk->torch_slack_s0 = slack;
        }
        if (i == rk->post) {
            rk->torch_post = runtime;
            break;
        }
        if ((e->type == GM_EV_ALLOC || e->type == GM_EV_FREE) && e->gpu == rk->gpu) {
            const struct gm_alloc *a = &p->allocs[e->a];
            if (a->category == GM_CAT_RUNTIME) {
                bool made = e->type == GM_EV_ALLOC;
                runtime = made ? gm_add(runtime, a->size) : gm_sub(runtime, a->size);
                slack = made ? gm_add(slack, segment_slack(a->size))
                             : gm_sub(slack, segment_slack(a->size));
            }
            if (runtime < 0)
                runtime = 0;
            if (slack < 0)
                slack = 0;
        }
        if (rk->has_burst && i == weights_end) {
            rk->runtime_at_burst_end = runtime;
            rk->runtime_peak = runtime;
            rk->torch_slack_peak = slack;
            after_burst = true;
        } else if (after_burst && i > rk->pre && runtime > rk->runtime_peak) {
            rk->runtime_peak = runtime;
            rk->torch_slack_peak = slack;
        }
    }
    if (!rk->has_burst) {
        rk->runtime_at_burst_end = rk->torch_pre;
        if (rk->runtime_peak < rk->runtime_at_burst_end) {
            rk->runtime_peak = rk->runtime_at_burst_end;
            rk->torch_slack_peak = rk->torch_slack_s0;
        }
    }
    rk->non_torch_pre = gm_sub(gm_sub(rk->pre_total, rk->pre_free), rk->torch_pre);
    rk->non_torch_post = gm_sub(gm_sub(rk->post_total, rk->post_free), rk->torch_post);
    rk->non_torch_increase = gm_sub(rk->non_torch_post, rk->non_torch_pre);
    rk->peak_activation = gm_sub(rk->runtime_peak, rk->runtime_at_burst_end);
    graph_brackets(r, rk);
    if (o->graph_estimate_source && strcmp(o->graph_estimate_source, "option") == 0) {
        rk->graph_applied = o->graph_estimate;
        rk->graph_why = "option";
    } else if (env_applies_graphs(o, p, &rk->graph_why)) {
        rk->graph_applied = rk->graph_measured;
    }
    /* memory_profiling's non_kv_cache_memory, then the estimate */
    int64_t need = gm_add(gm_add(rk->weights, rk->peak_activation), rk->non_torch_increase);
    need = gm_add(need, rk->graph_applied);
    rk->available = gm_sub(rk->requested, need);
    rk->available_low = gm_sub(rk->available, rk->torch_slack_s0);
    rk->available_high = gm_add(rk->available, rk->torch_slack_peak);
    rk->has_u_min = budget_vllm_u_min_on(current, rk->pre_total, need, &rk->u_min);
}

/* ---- per job ---- */

/* Does available pass vLLM's checks after init_device (blocks > 0 and one
 * request of max_model_len)? */
static bool passes(const struct budget_job *g, int64_t available)
{
    return available > 0 && (g->needed_bytes == 0 || g->needed_bytes <= available);
}

static void job_verdict(struct budget_analysis *r, struct budget_job *g, bool current)
{
    const struct budget_options *o = r->o;
    char text[BUDGET_VLLM_MESSAGE];
    bool blocks_known = o->num_layers.has && o->block_bytes.has;
    if (blocks_known && o->max_model_len.has)
        g->needed_bytes = budget_vllm_needed_bytes(o->max_model_len.value, o->block_size.value,
                                                   o->block_bytes.value, o->num_layers.value);
    if (!blocks_known)
        g->missing_inputs = xstrdup(
            "vLLM's blocks and its max_model_len check need the model's KV cache spec: "
            "--num-layers (attention layers) and --block-bytes (one layer's bytes per block), "
            "with --max-model-len for the check; the traces' launch lines do not say them");
    else if (!o->max_model_len.has)
        g->missing_inputs = xstrdup("the max_model_len check needs --max-model-len (no traced "
                                    "launch line says it)");
    if (g->early_failure) {
        const struct budget_rank *rk = &g->ranks[g->early_rank];
        g->verdict = xstrdup(budget_vllm_early_message(current, rk->device_ordinal, rk->pre_free,
                                                       rk->pre_total, o->util, text, sizeof(text)));
        g->range_verdict = "fails for all"; /* S0's check takes no torch counter */
        return;
    }
    if (g->available <= 0) {
        g->verdict = xstrdup(BUDGET_VLLM_ERR);
    } else if (g->needed_bytes > g->available) {
        g->max_len_failure = true;
        g->estimated_max_len =
            budget_vllm_estimated_max_len(g->available, o->max_model_len.value, o->block_size.value,
                                          o->block_bytes.value, o->num_layers.value);
        g->verdict = xstrdup(budget_vllm_max_len_message(o->max_model_len.value, g->needed_bytes,
                                                         g->available, g->estimated_max_len, text,
                                                         sizeof(text)));
    } else if (blocks_known) {
        g->fits = true;
        g->has_blocks = true;
        g->blocks = budget_vllm_blocks(g->available, o->block_bytes.value, o->num_layers.value);
        g->tokens = g->blocks <= INT64_MAX / o->block_size.value ? g->blocks * o->block_size.value
                                                                 : INT64_MAX;
        g->verdict = xasprintf("fits: %" PRId64 " tokens (%" PRId64 " blocks of %" PRId64 ")",
                               g->tokens, g->blocks, o->block_size.value);
    } else {
        g->fits = true;
        g->tokens = g->available / o->cell_size;
        g->verdict = xasprintf("fits: %" PRId64 " tokens", g->tokens);
    }
    bool low = passes(g, g->available_low), high = passes(g, g->available_high);
    g->range_verdict = low && high ? "fits for all" : !low && !high ? "fails for all" : "depends";
}

void budget_vllm_analyse_job(struct budget_analysis *r, struct budget_job *g)
{
    bool current = budget_vllm_current(r);
    bool first = true;
    for (size_t k = 0; k < g->nranks; k++) {
        struct budget_rank *rk = &g->ranks[k];
        if (!rk->analysed)
            continue;
        budget_measure_rank(r, rk);
        if (!rk->by_names && !rk->s0_only)
            budget_name_measurements(r, rk);
        vllm_rank(r, rk, current);
        if (rk->s0_only && !rk->early_failure) {
            /* S0 passed its check: the worker stopped for another reason */
            rk->analysed = false;
            continue;
        }
        g->analysed++;
        if (rk->early_failure && !g->early_failure) {
            g->early_failure = true;
            g->early_rank = k;
        }
        if (rk->s0_only)
            continue;
        if (first || rk->available < g->available) {
            g->available = rk->available;
            g->available_rank = k;
        }
        if (first || rk->available_low < g->available_low)
            g->available_low = rk->available_low;
        if (first || rk->available_high < g->available_high)
            g->available_high = rk->available_high;
        /* The job fits for a U every rank fits with. */
        if (first) {
            g->has_u_min = rk->has_u_min;
            g->u_min = rk->u_min;
            g->has_u_max = rk->has_u_max;
            g->u_max = rk->u_max;
        } else {
            g->has_u_min = g->has_u_min && rk->has_u_min;
            if (rk->u_min > g->u_min)
                g->u_min = rk->u_min;
            g->has_u_max = g->has_u_max && rk->has_u_max;
            if (rk->u_max < g->u_max)
                g->u_max = rk->u_max;
        }
        first = false;
    }
    if (first && g->early_failure) {
        /* only ranks with S0 alone: the job's U range is theirs */
        const struct budget_rank *rk = &g->ranks[g->early_rank];
        g->has_u_max = rk->has_u_max;
        g->u_max = rk->u_max;
    }
    r->analysed += g->analysed;
    if (g->analysed > 0)
        job_verdict(r, g, current);
}
