/*
 * gpumodel.c - the GPU model's small vocabulary (gpumodel.h): category and
 * kind names, saturating sums, sizes as text, the names of processes, apis,
 * modules and texts. Loading is load.c; reading the loaded model walk.c and
 * bursts.c.
 */
#include "model/gpumodel.h"

#include "cli.h"
#include "out/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ---- */

int64_t gm_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

int64_t gm_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

char *gm_format_size(char *buf, size_t size, int64_t bytes)
{
    return format_size(buf, size, bytes); /* the one rule lives in out/units.c */
}

static const char *const category_keys[] = {"nccl",    "ipc_exported", "vmm", "runtime",
                                            "managed", "peer",         "host"};
static const char *const category_labels[] = {
    "NCCL buffers",       "custom all-reduce buffers",
    "cuMemCreate memory", "runtime (caching allocator) memory",
    "managed memory",     "peer memory mapped here",
    "pinned host memory"};

const char *gm_category_key(enum gm_category category)
{
    return category < GM_CATEGORIES ? category_keys[category] : "none";
}

const char *gm_category_label(enum gm_category category)
{
    return category < GM_CATEGORIES ? category_labels[category] : "not memory";
}

int64_t gm_traced(const int64_t live[GM_CATEGORIES])
{
    int64_t sum = 0;
    for (int c = 0; c < GM_GPU_CATEGORIES; c++)
        sum = gm_add(sum, live[c]);
    return sum;
}

char *gm_process_name(char *buf, size_t size, const struct gm_process *p)
{
    if (p->has_rank)
        snprintf(buf, size, "pid %" PRId64 " (rank %" PRId64 ")", p->pid, p->rank);
    else
        snprintf(buf, size, "pid %" PRId64, p->pid);
    return buf;
}

bool gm_process_rank(const struct gm_process *p, int64_t *rank, int64_t *nranks)
{
    int64_t r = -1, n = -1;
    if (p->has_rank) {
        r = p->rank;
        n = p->world_nranks;
    } else {
        for (size_t i = 0; i < p->ninflight && r < 0; i++) {
            const struct gm_inflight *c = &p->inflight[i];
            if (c->init && c->rank >= 0 && c->nranks > c->rank) {
                r = c->rank;
                n = c->nranks;
            }
        }
    }
    if (r < 0)
        return false;
    *rank = r;
    if (nranks)
        *nranks = n;
    return true;
}

const char *gm_launch_line(const struct gm_model *m, const struct gm_process *p, size_t i)
{
    if (i == 0)
        return p->cmdline;
    if (i - 1 < p->nancestors)
        return p->ancestors[i - 1].cmdline;
    return i - 1 == p->nancestors ? m->run_cmdline : NULL;
}

const char *gm_api_name(const struct gm_model *m, uint32_t api)
{
    return api < m->napis ? m->apis[api] : "";
}

const char *gm_text(const struct gm_model *m, uint32_t id)
{
    return id < m->ntexts ? m->texts[id] : NULL;
}

bool gm_is_gpu_kind(enum gm_kind kind)
{
    return kind == GM_KIND_DEVICE || kind == GM_KIND_MANAGED || kind == GM_KIND_VMM;
}

const char *gm_module_name(const struct gm_model *m, uint32_t module)
{
    return module < m->nmodules ? m->modules[module] : "";
}
