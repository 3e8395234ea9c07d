/*
 * budget_ranks.c - step 1 of the budget analysis (budget_analysis.c): which
 * measurements each rank's replay uses and which ranks form one job. A
 * rank's pre and post are, on the GPU it measured most: with --pre/--post
 * the N-th and M-th; else those the server's own Python functions made
 * (when the trace has Python stacks: the function names are the servers');
 * else the ones around its weight burst. Processes that share an NCCL
 * communicator are one job (union-find), since the server takes its MIN
 * over them.
 */
#include "analysis/budget_analysis.h"
#include "cli.h"
#include "symbols/stacks.h"
#include "out/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *size_text(int64_t bytes)
{
    char buf[UNITS_BUF];
    return xstrdup(format_bytes_signed(buf, sizeof(buf), bytes));
}

static int64_t event_seq(const struct gm_model *m, uint32_t proc, uint32_t event)
{
    return m->procs[proc].events[event].seq;
}

/*
 * A vLLM worker that stopped after S0: init_device's early failure raises
 * before the weights load, so its trace ends with S0 and nothing after it.
 * It is a candidate with S0 alone; budget_vllm.c replays the check and
 * keeps out->problem (why it is not otherwise analysable) when the check
 * passes, since then the worker did not stop for that reason.
 */
static void vllm_s0_only(const struct gm_model *m, uint32_t proc, uint32_t gpu,
                         struct budget_rank *out, const char *what)
{
    size_t count;
    uint32_t *meas = gm_measurements(m, proc, gpu, &count);
    if (count > 0) {
        out->analysed = true;
        out->s0_only = true;
        out->pre = out->post = meas[count - 1];
        free(out->choice);
        out->choice = xasprintf("S0 = seq %" PRId64 ", %s; no S1: the worker made no "
                                "measurement after it",
                                event_seq(m, proc, out->pre), what);
    }
    free(meas);
}

/*
 * vLLM without Python stacks: the measurement after the weights is
 * memory_profiling's before profile_run when the next one follows the
 * profiling pass (torch memory made between the two and all freed again
 * before the second: the activations); S1 is that next one, after
 * profile_run.
 */
static void vllm_after_profile(const struct gm_model *m, uint32_t proc, uint32_t gpu,
                               struct budget_rank *out)
{
    const struct gm_process *p = &m->procs[proc];
    size_t count;
    uint32_t *meas = gm_measurements(m, proc, gpu, &count);
    uint32_t next = GM_NONE;
    for (size_t i = 0; i + 1 < count && next == GM_NONE; i++)
        if (meas[i] == out->post)
            next = meas[i + 1];
    free(meas);
    /* the pass: torch allocations, every one freed again before the next
     * measurement (empty_cache); a KV pool or graph pools stay */
    size_t made = 0, kept = 0;
    for (uint32_t i = out->post + 1; next != GM_NONE && i < next; i++) {
        const struct gm_event *e = &p->events[i];
        if (e->type != GM_EV_ALLOC || e->gpu != gpu || p->allocs[e->a].category != GM_CAT_RUNTIME)
            continue;
        const struct gm_alloc *a = &p->allocs[e->a];
        made++;
        kept += a->end_event == GM_NONE || a->end_event > next;
    }
    if (made == 0 || kept > 0)
        return;
    char *choice = xasprintf("%s; S1 = seq %" PRId64 ", the next: the profiling pass (torch "
                             "memory made and freed) lies between them, so seq %" PRId64
                             " is memory_profiling's before profile_run",
                             out->choice, event_seq(m, proc, next), event_seq(m, proc, out->post));
    free(out->choice);
    out->choice = choice;
    out->post = next;
}

/* A candidate rank from the weight burst, or NULL (*why set when it is a
 * rank that cannot be analysed). */
static bool rank_from_burst(const struct budget_analysis *r, uint32_t proc, struct budget_rank *out)
{
    const struct gm_model *m = r->m;
    uint32_t gpu = gm_main_gpu(m, proc);
    memset(out, 0, sizeof(*out));
    out->proc = proc;
    out->gpu = gpu;
    out->draft_from = GM_NONE;
    if (gpu == GM_NONE)
        return false;
    struct gm_burst b;
    bool found = gm_weight_burst(m, proc, gpu, r->o->burst_min, &b);
    char *bytes = size_text(b.bytes), *min = size_text(r->o->burst_min);
    if (found) {
        out->analysed = true;
        out->has_burst = true;
        out->burst = b;
        out->pre = b.before;
        out->post = b.after;
        out->choice = xasprintf(
            "pre = seq %" PRId64 ", the last measurement before the weight burst (seq %" PRId64
            "-%" PRId64 ": %" PRId64 " allocations, %s); post = seq %" PRId64
            ", the first after it%s%s%s%s",
            event_seq(m, proc, b.before), event_seq(m, proc, b.first), event_seq(m, proc, b.last),
            b.count, bytes, event_seq(m, proc, b.after),
            b.kv_like_skipped ? " (a later, larger stretch of equal allocations looked like a KV "
                                "pool and was passed over)"
                              : "",
            b.named ? " (the weight burst is the program's NVTX range " : "",
            b.named ? gm_text(m, b.named_text) : "", b.named ? ")" : "");
        if (r->o->framework == BUDGET_VLLM)
            vllm_after_profile(m, proc, gpu, out);
    } else if (b.count > 0 && b.bytes >= r->o->burst_min) {
        out->problem = xasprintf("its largest burst of allocations (%s, seq %" PRId64 "-%" PRId64
                                 ") has no measurement %s it: the budget cannot be replayed",
                                 bytes, event_seq(m, proc, b.first), event_seq(m, proc, b.last),
                                 b.before == GM_NONE ? "before" : "after");
    } else if (m->procs[proc].measurements > 0) {
        out->problem =
            xasprintf("no weight burst: no stretch between two measurements allocated %s or more "
                      "(the largest allocated %s)",
                      min, bytes);
        if (r->o->framework == BUDGET_VLLM)
            vllm_s0_only(m, proc, gpu, out, "its last measurement (no Python stacks name it)");
    } else {
        free(bytes);
        free(min);
        return false;
    }
    free(bytes);
    free(min);
    return true;
}

/*
 * The functions in which the servers take their measurements, and which of
 * those measurements the budget uses (docs/budget.md, "How the
 * measurements are found"; the release facts are there).
 *
 * SGLang's init_torch_distributed measures after the NCCL groups and the
 * custom all-reduce buffers are made: pre (the MIN over the ranks), then one
 * local measurement for its TP balance check; releases since about 0.4.5
 * measure once more at its start, for its "mem usage" log, and releases up
 * to about 0.4.1 skip the local one at TP 1. So pre is the second-to-last
 * measurement when the function made two or more, the only one otherwise.
 * A draft worker (speculative decoding) calls it again after the target's
 * load_model, which measures too: only the first, uninterrupted run of
 * init_torch_distributed's measurements is the target's. post is the first
 * measurement after pre made in profile_max_num_token (older releases) or
 * _profile_available_bytes (the KV cache mixin's, then KVCacheConfigurator's
 * from about 0.5.16): never one of load_model's.
 *
 * vLLM's S0 is the last measurement of init_device. S1 is the snapshot its
 * memory_profiling context manager (a generator under contextlib) takes
 * after profile_run: the one contextlib's __exit__ resumed it for. Its
 * snapshot before profile_run was resumed by __enter__, and
 * profile_cudagraph_memory measures with neither, inside the with block or
 * after it: the last measurement of determine_available_memory is S1 only
 * in releases without memory_profiling (early V1 workers, about 0.7).
 */
static const char *const sglang_pre_functions[] = {"init_torch_distributed"};
static const char *const sglang_post_functions[] = {"profile_max_num_token",
                                                    "_profile_available_bytes"};
static const char *const vllm_pre_functions[] = {"init_device"};
static const char *const vllm_post_functions[] = {"determine_available_memory"};
static const char *const vllm_profiling_functions[] = {"memory_profiling"};
/* The innermost of these above a measurement made under memory_profiling is
 * contextlib's, the frame that resumed the generator: nothing between the
 * generator and torch.cuda.mem_get_info runs inside a with statement's
 * enter or exit. */
static const char *const context_manager_functions[] = {"__enter__", "__exit__"};
#define NAMES(list) list, sizeof(list) / sizeof(list[0])

/* "__exit__ (contextlib.py:148)" is an __exit__ frame. */
static bool function_is(const char *found, const char *name)
{
    size_t n = strlen(name);
    return found && strncmp(found, name, n) == 0 && (found[n] == ' ' || found[n] == '\0');
}

/* SGLang's pre and post among a rank's measurements (see above). */
static bool sglang_by_names(const struct gm_model *m, uint32_t proc, struct trace *t,
                            const uint32_t *meas, size_t count, size_t *pre, size_t *post,
                            char **pre_fn, char **post_fn, char **why, size_t *draft)
{
    size_t first = SIZE_MAX, last = SIZE_MAX;
    char *last_fn = NULL, *before_last_fn = NULL;
    for (size_t i = 0; i < count; i++) {
        char *fn =
            stacks_python_function(t, event_seq(m, proc, meas[i]), NAMES(sglang_pre_functions));
        if (!fn) {
            if (first != SIZE_MAX)
                break; /* the first run is over: a later one is a draft worker's */
            continue;
        }
        if (first == SIZE_MAX)
            first = i;
        last = i;
        free(before_last_fn);
        before_last_fn = last_fn;
        last_fn = fn;
    }
    if (first == SIZE_MAX)
        return false;
    size_t made = last - first + 1;
    *pre = made >= 2 ? last - 1 : last;
    *pre_fn = made >= 2 ? before_last_fn : last_fn;
    free(made >= 2 ? last_fn : before_last_fn);
    for (size_t i = *pre + 1; i < count && *post == SIZE_MAX; i++) {
        char *fn =
            stacks_python_function(t, event_seq(m, proc, meas[i]), NAMES(sglang_post_functions));
        if (fn) {
            *post = i;
            *post_fn = fn;
        }
    }
    if (*post == SIZE_MAX)
        return false;
    /* A later init_torch_distributed before post is the draft worker's:
     * what it made from there on is the draft model's. */
    for (size_t i = last + 1; i < *post && *draft == SIZE_MAX; i++) {
        char *fn =
            stacks_python_function(t, event_seq(m, proc, meas[i]), NAMES(sglang_pre_functions));
        if (fn)
            *draft = i;
        free(fn);
    }
    char *post_name = xstrndup(*post_fn, strcspn(*post_fn, " "));
    *why = made >= 2 ? xasprintf("pre: the distributed measurement, the second-to-last of the "
                                 "%zu made by the first init_torch_distributed (its last is the "
                                 "TP balance check); post: the first measurement in %s after pre",
                                 made, post_name)
                     : xasprintf("pre: the only measurement made by the first "
                                 "init_torch_distributed; post: the first measurement in %s "
                                 "after pre",
                                 post_name);
    free(post_name);
    return true;
}

/* vLLM's S0 and S1 among a rank's measurements (see above). */
static bool vllm_by_names(const struct gm_model *m, uint32_t proc, struct trace *t,
                          const uint32_t *meas, size_t count, size_t *pre, size_t *post,
                          char **pre_fn, char **post_fn, char **why)
{
    for (size_t i = 0; i < count; i++) {
        char *fn =
            stacks_python_function(t, event_seq(m, proc, meas[i]), NAMES(vllm_pre_functions));
        if (fn) {
            free(*pre_fn);
            *pre_fn = fn;
            *pre = i;
        }
    }
    if (*pre == SIZE_MAX)
        return false;
    size_t last = SIZE_MAX, exit_at = SIZE_MAX, second = SIZE_MAX;
    size_t profiled = 0;
    char *last_fn = NULL, *exit_fn = NULL, *second_fn = NULL;
    for (size_t i = *pre + 1; i < count; i++) {
        int64_t seq = event_seq(m, proc, meas[i]);
        char *fn = stacks_python_function(t, seq, NAMES(vllm_post_functions));
        if (!fn)
            continue;
        char *gen = stacks_python_function(t, seq, NAMES(vllm_profiling_functions));
        if (gen) {
            char *cm = stacks_python_function(t, seq, NAMES(context_manager_functions));
            if (function_is(cm, "__exit__") && exit_at == SIZE_MAX) {
                exit_at = i;
                exit_fn = xstrdup(fn);
            }
            if (++profiled == 2) {
                second = i;
                second_fn = xstrdup(fn);
            }
            free(cm);
            free(gen);
        }
        free(last_fn);
        last_fn = fn;
        last = i;
    }
    if (exit_at != SIZE_MAX) {
        *post = exit_at;
        *post_fn = exit_fn;
        exit_fn = NULL;
        *why = xstrdup("S0: the last measurement made in init_device; S1: memory_profiling's "
                       "measurement after profile_run (its generator resumed by contextlib's "
                       "__exit__)");
    } else if (second != SIZE_MAX) {
        *post = second;
        *post_fn = second_fn;
        second_fn = NULL;
        *why = xstrdup("S0: the last measurement made in init_device; S1: the second measurement "
                       "made under memory_profiling (the stacks do not show its context "
                       "manager)");
    } else if (profiled == 0 && last != SIZE_MAX) {
        /* Releases before memory_profiling measured last after profile_run. */
        *post = last;
        *post_fn = last_fn;
        last_fn = NULL;
        *why = xstrdup("S0: the last measurement made in init_device; S1: the last measurement "
                       "of determine_available_memory (no memory_profiling on its stacks)");
    }
    free(last_fn);
    free(exit_fn);
    free(second_fn);
    return *post != SIZE_MAX;
}

/*
 * A rank whose measurements its Python stacks name (issue 8's stacks), by
 * the rules above. False when the trace has no Python stacks or they do
 * not name both: the weight burst decides.
 */
static bool rank_from_names(const struct budget_analysis *r, uint32_t proc, struct budget_rank *out)
{
    const struct gm_model *m = r->m;
    uint32_t gpu = gm_main_gpu(m, proc);
    if (gpu == GM_NONE || m->procs[proc].measurements == 0)
        return false;
    struct trace *t = (struct trace *)m->procs[proc].trace; /* read only */
    size_t count;
    uint32_t *meas = gm_measurements(m, proc, gpu, &count);
    size_t pre = SIZE_MAX, post = SIZE_MAX, draft = SIZE_MAX;
    char *pre_fn = NULL, *post_fn = NULL, *why = NULL;
    bool found =
        r->o->framework == BUDGET_SGLANG
            ? sglang_by_names(m, proc, t, meas, count, &pre, &post, &pre_fn, &post_fn, &why, &draft)
            : vllm_by_names(m, proc, t, meas, count, &pre, &post, &pre_fn, &post_fn, &why);
    if (found) {
        memset(out, 0, sizeof(*out));
        out->draft_from = draft == SIZE_MAX ? GM_NONE : meas[draft];
        out->proc = proc;
        out->gpu = gpu;
        out->analysed = true;
        out->by_names = true;
        out->pre = meas[pre];
        out->post = meas[post];
        out->has_burst = gm_burst_between(m, proc, gpu, out->pre, out->post, &out->burst);
        out->choice = xasprintf("pre = seq %" PRId64 ", made in %s, post = seq %" PRId64
                                ", made in %s: chosen by the Python stacks (%s)",
                                event_seq(m, proc, out->pre), pre_fn, event_seq(m, proc, out->post),
                                post_fn, why);
    }
    if (!found && r->o->framework == BUDGET_VLLM && pre != SIZE_MAX && pre + 1 == count) {
        /* init_device's S0 and nothing after it: see vllm_s0_only */
        memset(out, 0, sizeof(*out));
        out->proc = proc;
        out->gpu = gpu;
        out->by_names = true;
        out->problem = xstrdup("no S1: the worker made no measurement after init_device's S0");
        char *what = xasprintf("the last measurement made in %s", pre_fn);
        vllm_s0_only(m, proc, gpu, out, what);
        free(what);
        found = true;
    }
    free(pre_fn);
    free(post_fn);
    free(why);
    free(meas);
    return found;
}

/* The index of the measurement with that seq in its process, -1 if none. */
static int64_t measurement_index(const struct gm_model *m, int64_t seq, uint32_t *proc_out)
{
    for (size_t pi = 0; pi < m->nprocs; pi++) {
        const struct gm_process *p = &m->procs[pi];
        for (size_t i = 0; i < p->nevents; i++) {
            const struct gm_event *e = &p->events[i];
            if (e->type != GM_EV_MEASURE || e->seq != seq)
                continue;
            size_t count;
            uint32_t *meas = gm_measurements(m, (uint32_t)pi, e->gpu, &count);
            int64_t index = -1;
            for (size_t k = 0; k < count; k++)
                if (meas[k] == i)
                    index = (int64_t)k;
            free(meas);
            *proc_out = (uint32_t)pi;
            return index;
        }
    }
    return -1;
}

static bool rank_from_indexes(const struct budget_analysis *r, uint32_t proc, int64_t n_pre,
                              int64_t n_post, struct budget_rank *out)
{
    const struct gm_model *m = r->m;
    uint32_t gpu = gm_main_gpu(m, proc);
    memset(out, 0, sizeof(*out));
    out->proc = proc;
    out->gpu = gpu;
    out->draft_from = GM_NONE;
    if (gpu == GM_NONE || m->procs[proc].measurements == 0)
        return false;
    size_t count;
    uint32_t *meas = gm_measurements(m, proc, gpu, &count);
    if ((int64_t)count <= n_pre || (int64_t)count <= n_post) {
        out->problem = xasprintf("it made %zu measurement%s; --pre/--post need the %" PRId64
                                 "th and %" PRId64 "th",
                                 count, count == 1 ? "" : "s", n_pre + 1, n_post + 1);
        free(meas);
        return true;
    }
    out->analysed = true;
    out->pre = meas[n_pre];
    out->post = meas[n_post];
    free(meas);
    out->has_burst = gm_burst_between(m, proc, gpu, out->pre, out->post, &out->burst);
    out->choice = xasprintf("pre = seq %" PRId64 " and post = seq %" PRId64
                            ", its measurements number %" PRId64 " and %" PRId64 " (--pre/--post)",
                            event_seq(m, proc, out->pre), event_seq(m, proc, out->post), n_pre + 1,
                            n_post + 1);
    return true;
}

/* Union-find over processes, joined by the communicators they share. */
static size_t find_root(size_t *parent, size_t i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    return i;
}

static int compare_ranks(const void *a, const void *b, void *arg)
{
    const struct gm_model *m = arg;
    const struct gm_process *x = &m->procs[((const struct budget_rank *)a)->proc];
    const struct gm_process *y = &m->procs[((const struct budget_rank *)b)->proc];
    if (x->has_rank != y->has_rank)
        return x->has_rank ? -1 : 1;
    if (x->has_rank && x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return strcmp(x->trace->file, y->trace->file);
}

static void group_add(struct budget_job *g, const struct budget_rank *rk)
{
    g->ranks = xgrow(g->ranks, &g->cap, g->nranks + 1, sizeof(*g->ranks));
    g->ranks[g->nranks++] = *rk;
}

/* Returns -1 (after an error line) when --pre/--post name no measurement. */
int budget_find_groups(struct budget_analysis *r)
{
    const struct gm_model *m = r->m;
    size_t n = m->nprocs;
    struct budget_rank *cand = xcalloc(n ? n : 1, sizeof(*cand));
    bool *is_cand = xcalloc(n ? n : 1, sizeof(bool));
    int64_t n_pre = 0, n_post = 0;
    if (r->o->has_pre) {
        uint32_t pre_proc = 0, post_proc = 0;
        n_pre = measurement_index(m, r->o->pre_seq, &pre_proc);
        n_post = measurement_index(m, r->o->post_seq, &post_proc);
        if (n_pre < 0 || n_post < 0) {
            cli_error(r->o->path, "--%s %" PRId64 ": no trace has a cudaMemGetInfo with that seq",
                      n_pre < 0 ? "pre" : "post", n_pre < 0 ? r->o->pre_seq : r->o->post_seq);
            free(cand);
            free(is_cand);
            return -1;
        }
        if (n_pre >= n_post) {
            cli_error(r->o->path,
                      "--pre %" PRId64 " is measurement %" PRId64 " of pid %" PRId64
                      ", not before --post %" PRId64 " (measurement %" PRId64 ")",
                      r->o->pre_seq, n_pre + 1, m->procs[pre_proc].pid, r->o->post_seq, n_post + 1);
            free(cand);
            free(is_cand);
            return -1;
        }
    }
    for (size_t i = 0; i < n; i++)
        /* --pre/--post, else the Python stacks' function names, else the weight burst */
        is_cand[i] = r->o->has_pre ? rank_from_indexes(r, (uint32_t)i, n_pre, n_post, &cand[i])
                     : rank_from_names(r, (uint32_t)i, &cand[i])
                         ? true
                         : rank_from_burst(r, (uint32_t)i, &cand[i]);

    size_t *parent = xcalloc(n ? n : 1, sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        parent[i] = i;
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < m->procs[i].ncomms; c++)
            for (size_t k = 0; k < i; k++)
                for (size_t d = 0; d < m->procs[k].ncomms; d++)
                    if (m->procs[i].comms[c].hash &&
                        m->procs[i].comms[c].hash == m->procs[k].comms[d].hash)
                        parent[find_root(parent, i)] = find_root(parent, k);
    /* No communicators at all among the candidates: one job, said so. */
    size_t ncand = 0, with_comms = 0;
    for (size_t i = 0; i < n; i++)
        if (is_cand[i]) {
            ncand++;
            with_comms += m->procs[i].ncomms > 0;
        }
    if (ncand > 1 && with_comms == 0) {
        size_t first = SIZE_MAX;
        for (size_t i = 0; i < n; i++)
            if (is_cand[i]) {
                if (first == SIZE_MAX)
                    first = i;
                parent[find_root(parent, i)] = find_root(parent, first);
            }
        budget_add_note(r,
                        xasprintf("no NCCL communicators in the traces: the %zu ranks are taken as "
                                  "one job",
                                  ncand));
    }
    /* Groups in report order of their first member. */
    size_t *group_of = xcalloc(n ? n : 1, sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        group_of[i] = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (!is_cand[i])
            continue;
        size_t root = find_root(parent, i);
        if (group_of[root] == SIZE_MAX) {
            r->groups = xgrow(r->groups, &r->groups_cap, r->ngroups + 1, sizeof(*r->groups));
            memset(&r->groups[r->ngroups], 0, sizeof(*r->groups));
            group_of[root] = r->ngroups++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        size_t gi = group_of[find_root(parent, i)];
        if (gi == SIZE_MAX) {
            free(cand[i].problem);
            free(cand[i].choice);
            continue;
        }
        struct budget_rank rk = cand[i];
        if (!is_cand[i]) {
            /* A member of the job by its communicators, without a burst. */
            if (m->procs[i].ncomms == 0) {
                free(rk.problem);
                free(rk.choice);
                continue;
            }
            rk.proc = (uint32_t)i;
            rk.gpu = gm_main_gpu(m, (uint32_t)i);
            rk.draft_from = GM_NONE;
            rk.analysed = false;
            rk.problem = xstrdup(rk.gpu == GM_NONE ? "no GPU activity in its trace"
                                                   : "no measurement and no weight burst");
        }
        group_add(&r->groups[gi], &rk);
    }
    for (size_t gi = 0; gi < r->ngroups; gi++) {
        struct budget_job *g = &r->groups[gi];
        if (g->nranks > 1)
            qsort_r(g->ranks, g->nranks, sizeof(*g->ranks), compare_ranks, (void *)m);
        /* Its largest communicator names the job and its size. */
        for (size_t k = 0; k < g->nranks; k++) {
            const struct gm_process *p = &m->procs[g->ranks[k].proc];
            for (size_t c = 0; c < p->ncomms; c++) {
                const struct gm_comm *cm = &p->comms[c];
                if (cm->result != 0 || cm->nranks <= 0)
                    continue;
                if (!g->has_hash || cm->nranks > g->world ||
                    (cm->nranks == g->world && cm->hash < g->hash)) {
                    g->has_hash = true;
                    g->hash = cm->hash;
                    g->world = cm->nranks;
                }
            }
        }
        if (g->has_hash && g->world <= 4096) {
            for (int64_t rank = 0; rank < g->world; rank++) {
                bool held = false;
                for (size_t k = 0; k < g->nranks && !held; k++) {
                    const struct gm_process *p = &m->procs[g->ranks[k].proc];
                    for (size_t c = 0; c < p->ncomms && !held; c++)
                        held = p->comms[c].hash == g->hash && p->comms[c].rank == rank &&
                               p->comms[c].result == 0;
                }
                if (!held) {
                    g->missing =
                        xgrow(g->missing, &g->missing_cap, g->nmissing + 1, sizeof(*g->missing));
                    g->missing[g->nmissing++] = rank;
                }
            }
        }
        if (g->nmissing) {
            char hash[24];
            snprintf(hash, sizeof(hash), "%016" PRIx64, g->hash);
            budget_add_note(r, xasprintf("job %zu (communicator %s): %zu of its %" PRId64
                                         " ranks have no trace here (the first is rank %" PRId64
                                         "); the MIN is taken over the %zu traced ranks, the "
                                         "server took it over all of them",
                                         gi + 1, hash, g->nmissing, g->world, g->missing[0],
                                         g->nranks));
        }
    }
    if (r->ngroups > 1)
        budget_add_note(r, xasprintf("the traces hold %zu jobs (processes that share no NCCL "
                                     "communicator): each is analysed on its own",
                                     r->ngroups));
    free(group_of);
    free(parent);
    free(cand);
    free(is_cand);
    return 0;
}

/* ---- per rank ---- */
