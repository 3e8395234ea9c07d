/*
 * budget_fraction.c - SGLang's --mem-fraction-static when neither the
 * options nor any launch line gives it: SGLang then chooses F itself
 * (ServerArgs._handle_gpu_memory_settings), and the replay must use the
 * F it chose. The arithmetic is replay/sglang_fraction.c's; this file
 * finds its inputs in the trace (the GPU's memory, the launch lines' flags)
 * and says where each came from (docs/budget.md, "Where F comes from when
 * SGLang derives it").
 */
#include "analysis/budget_analysis.h"
#include "analysis/budget_detect.h"
#include "analysis/budget_version.h"
#include "cli.h"
#include "replay/sglang_fraction.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The smallest GPU's memory in bytes, as SGLang takes the smallest of the
 * machine's: the devices' totals, else the measurements' (-1: none). */
static int64_t smallest_gpu_total(const struct gm_model *m)
{
    int64_t smallest = -1;
    for (size_t i = 0; i < m->ngpus; i++)
        if (m->gpus[i].total > 0 && (smallest < 0 || m->gpus[i].total < smallest))
            smallest = m->gpus[i].total;
    for (size_t pi = 0; pi < m->nprocs && smallest < 0; pi++)
        for (size_t i = 0; i < m->procs[pi].nevents; i++) {
            const struct gm_event *e = &m->procs[pi].events[i];
            if (e->type == GM_EV_MEASURE && e->b > 0 && (smallest < 0 || e->b < smallest))
                smallest = e->b;
        }
    return smallest;
}

/* The releases before SGLang's reserve rule took F from the TP size. */
static enum sglang_fraction_rule rule_for(const struct budget_options *o)
{
    int v[4], since[4] = {0, 5, 4, 0};
    if (o->server_version && budget_parse_server_version(o->server_version, v) &&
        budget_version_compare(v, since) < 0)
        return SGLANG_F_BY_TP;
    return SGLANG_F_BY_RESERVE;
}

static void append(char **text, const char *fmt, const char *value)
{
    char *longer = xasprintf(fmt, *text, value);
    free(*text);
    *text = longer;
}

/* "F 0.897 derived as SGLang does ...": the reserve term by term. */
static char *reserve_text(double fraction, const struct budget_fraction_derivation *d,
                          const char *defaulted)
{
    const struct sglang_fraction_reserve *v = &d->reserve;
    char *terms = xasprintf("%.0f base + %.0f activations (chunked prefill %" PRId64
                            ") + %.0f CUDA graphs (max batch %" PRId64 ") + %.0f TP x PP",
                            v->base, v->activation, v->chunked_prefill_size, v->cuda_graph,
                            v->cuda_graph_max_bs, v->parallel);
    const struct {
        double mib;
        const char *what;
    } more[] = {{v->dp_attention, "DP attention"},
                {v->piecewise, "piecewise CUDA graphs"},
                {v->floor_applied, "the 10 GiB floor"},
                {v->speculative, "speculative decoding"}};
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
        if (more[i].mib > 0) {
            char *longer = xasprintf("%s + %.0f %s", terms, more[i].mib, more[i].what);
            free(terms);
            terms = longer;
        }
    char *text = xasprintf("F %.3f derived as SGLang does (_handle_gpu_memory_settings): "
                           "round((gpu_mem - reserved) / gpu_mem, 3), gpu_mem %.0f MiB (the "
                           "smallest traced GPU's total // 2^20; SGLang reads nvidia-smi's "
                           "memory.total, which can be larger), reserved %.0f MiB = %s; "
                           "SGLang's defaults for %s; assumed: %s",
                           fraction, d->gpu_mem_mib, v->total, terms,
                           defaulted[0] ? defaulted : "none", sglang_fraction_assumed[0]);
    free(terms);
    return text;
}

int budget_derive_fraction(struct budget_analysis *r)
{
    struct budget_options *o = r->o;
    if (o->framework != BUDGET_SGLANG || o->has_fraction)
        return 0;
    struct sglang_fraction_inputs in;
    sglang_fraction_defaults(&in);
    struct budget_launch_flags ctx = {.m = r->m};
    const char *defaulted[24], *bad = NULL;
    size_t ndefaulted = 0;
    if (!sglang_fraction_from_flags(&in, budget_launch_flag, &ctx, defaulted,
                                    sizeof(defaulted) / sizeof(defaulted[0]), &ndefaulted, &bad)) {
        cli_error(o->path, "%s on the launch lines has a value SGLang would refuse", bad);
        return -1;
    }
    int64_t total = smallest_gpu_total(r->m);
    in.gpu_mem_mib = total > 0 ? sglang_gpu_mem_mib(total) : 0;
    struct budget_fraction_derivation *d = &o->derived;
    d->rule = rule_for(o);
    d->gpu_mem_mib = in.gpu_mem_mib;
    d->known = sglang_fraction_derive(d->rule, &in, &o->fraction, &d->reserve);
    o->has_fraction = true;
    o->fraction_source = "derived";
    d->has = true;
    d->tp_size = in.tp_size;
    char *text = xstrdup("");
    for (size_t i = 0; i < ndefaulted && i < sizeof(defaulted) / sizeof(defaulted[0]); i++)
        append(&text, i ? "%s, %s" : "%s%s", defaulted[i]);
    d->defaulted = text;
    if (!d->known)
        d->why = xasprintf("F %.3g: SGLang's constant when it cannot read the GPU's memory (the "
                           "trace records none)",
                           o->fraction);
    else if (d->rule == SGLANG_F_BY_TP)
        d->why = xasprintf("F %.3g derived as SGLang before its reserve rule did: from TP size "
                           "%" PRId64 " (--server-version %s)",
                           o->fraction, in.tp_size, o->server_version);
    else
        d->why = reserve_text(o->fraction, d, text);
    return 0;
}
