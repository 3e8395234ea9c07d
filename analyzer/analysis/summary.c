/*
 * summary.c - `cutrace summary`'s report computed from the run model
 * (summary.h). Per process: its row, env, devices, call counters, failed
 * calls, lookups and communicators as the model loaded them; then one walk
 * over its events in effect order (the model's allocations, paired with
 * their frees) for totals, peak and live-at-end per kind and per issuing
 * module. Between the two, each GPU's latest cudaMemGetInfo is found (in
 * wall time, the only clock processes share), so that the walk also sums
 * what each process had live at that moment.
 *
 * Numbers from trace files are untrusted: the model's sizes are never
 * negative and its sums saturate, and so do the ones made here.
 */
#include "analysis/summary.h"

#include "cli.h"
#include "model/filter.h"
#include "model/modules.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_keys[KIND_COUNT] = {"device",   "managed", "vmm",     "host",
                                                  "vmm_host", "ipc",     "reserve", "other"};
static const char *const kind_labels[KIND_COUNT] = {
    "device",
    "managed",
    "vmm (cuMemCreate)",
    "host (pinned)",
    "host (cuMemCreate)",
    "ipc (peer's)",
    "reserved VA (not memory)",
    "other",
};

const char *summary_kind_key(enum mem_kind kind)
{
    return kind < KIND_COUNT ? kind_keys[kind] : "other";
}

const char *summary_kind_label(enum mem_kind kind)
{
    return kind < KIND_COUNT ? kind_labels[kind] : "other";
}

void summary_sort(void *base, size_t count, size_t size, int (*compare)(const void *, const void *))
{
    if (count > 1)
        qsort(base, count, size, compare);
}

int64_t summary_time_origin(const struct process_report *p)
{
    if (p->has_start_mono)
        return p->start_mono_ns;
    return p->has_events ? p->first_t_ns : 0;
}

int64_t summary_meminfo_used(int64_t total, int64_t free_bytes)
{
    int64_t used = gm_sub(total, free_bytes);
    return used < 0 ? 0 : used;
}

bool summary_uses_nccl(const struct process_report *p)
{
    return p->nccl->present && (p->nccl->has_version || p->nccl->ncomms > 0 || p->nccl->calls > 0);
}

bool summary_reports_bytes(const struct api_stats *a)
{
    return a->role && strcmp(a->role, "alloc") == 0;
}

bool summary_is_lookup(const char *role)
{
    return role && strcmp(role, "lookup") == 0;
}

const char *summary_end_state_text(const char *state)
{
    if (!state)
        return "unknown (no end_state recorded)";
    if (strcmp(state, "killed") == 0)
        return "killed (no clean exit)";
    if (strcmp(state, "exit") == 0)
        return "exited normally (exit)";
    if (strcmp(state, "_exit") == 0)
        return "exited through _exit() (no atexit handlers ran)";
    if (strcmp(state, "exec") == 0)
        return "replaced itself with exec()";
    if (strcmp(state, "running") == 0)
        return "still running, or killed (no clean exit was recorded)";
    return state;
}

size_t summary_gpu_neighbours(const struct summary_report *r, const struct device_report *d)
{
    if (d->gpu == SIZE_MAX)
        return 0;
    return r->gpus[d->gpu].nprocesses - 1;
}

char *summary_gpu_pids(const struct summary_report *r, const struct gpu_report *g, char sep,
                       char *buf, size_t size)
{
    assert(buf && size > 0);
    const char joint[2] = {sep, '\0'};
    size_t len = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < g->nprocesses && len < size; k++) {
        const struct process_report *p = &r->processes[g->processes[k]];
        const char *s = k ? joint : "";
        if (p->has_pid)
            len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, s, p->pid);
        else
            len += (size_t)snprintf(buf + len, size - len, "%s?", s);
    }
    return buf;
}

int summary_compare_apis(const void *a, const void *b)
{
    const struct api_stats *x = a, *y = b;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    int c = strcmp(x->api ? x->api : "", y->api ? y->api : "");
    if (c == 0)
        c = strcmp(x->layer ? x->layer : "", y->layer ? y->layer : "");
    if (c != 0 || x->inside == y->inside)
        return c;
    /* NULL (parent unknown) after every name. */
    if (!x->inside || !y->inside)
        return x->inside ? -1 : 1;
    return strcmp(x->inside, y->inside);
}

static int compare_module_rows(const void *a, const void *b)
{
    const struct module_row *x = a, *y = b;
    if (x->mm->gpu.live_bytes != y->mm->gpu.live_bytes)
        return x->mm->gpu.live_bytes > y->mm->gpu.live_bytes ? -1 : 1;
    if (x->mm->gpu.peak_bytes != y->mm->gpu.peak_bytes)
        return x->mm->gpu.peak_bytes > y->mm->gpu.peak_bytes ? -1 : 1;
    return strcmp(x->group->name, y->group->name);
}

static int compare_module_names(const void *a, const void *b)
{
    const struct module_row *x = a, *y = b;
    return strcmp(x->group->name, y->group->name);
}

struct module_row *summary_module_rows(const struct process_report *p,
                                       const struct device_report *d, bool by_live, size_t *count)
{
    struct module_row *rows = xcalloc(d->nmodmem + 1, sizeof(*rows));
    size_t n = 0;
    for (size_t i = 0; i < d->nmodmem; i++) {
        if (by_live && d->modmem[i].gpu.allocs == 0)
            continue;
        assert(d->modmem[i].group < p->ngroups);
        rows[n++] = (struct module_row){&d->modmem[i], &p->groups[d->modmem[i].group]};
    }
    summary_sort(rows, n, sizeof(*rows), by_live ? compare_module_rows : compare_module_names);
    *count = n;
    return rows;
}

static bool has_wall_clock(const struct process_report *p)
{
    return p->has_start_wall && p->has_start_mono;
}

static int64_t to_wall(const struct process_report *p, int64_t t_ns)
{
    return gm_add(p->start_wall_ns, gm_sub(t_ns, p->start_mono_ns));
}

static int64_t to_mono(const struct process_report *p, int64_t wall_ns)
{
    return gm_add(p->start_mono_ns, gm_sub(wall_ns, p->start_wall_ns));
}

/* The report's device of an ordinal (the model has every one). */
static struct device_report *device_of(struct process_report *p, int64_t ordinal)
{
    size_t lo = 0, hi = p->ndevices;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->devices[mid].ordinal < ordinal)
            lo = mid + 1;
        else
            hi = mid;
    }
    assert(lo < p->ndevices && p->devices[lo].ordinal == ordinal);
    return &p->devices[lo];
}

static bool same_text(const char *a, const char *b)
{
    return a && b ? strcmp(a, b) == 0 : a == b;
}

/* The api row of a device for a model counter: the model counts per apis
 * row, the report per name and layer (the same unless a damaged apis table
 * repeats a name). */
static struct api_stats *api_row(struct device_report *d, const struct gm_model *m,
                                 const struct gm_call_count *c)
{
    const char *api = gm_api_name(m, c->api), *layer = gm_text(m, c->layer);
    const char *inside = c->nested_row && c->inside != GM_NONE ? gm_api_name(m, c->inside) : NULL;
    struct api_stats **rows = c->nested_row ? &d->nested : &d->apis;
    size_t *n = c->nested_row ? &d->nnested : &d->napis;
    size_t *cap = c->nested_row ? &d->nested_cap : &d->apis_cap;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*rows)[i].api, api) == 0 && same_text((*rows)[i].layer, layer) &&
            same_text((*rows)[i].inside, inside))
            return &(*rows)[i];
    *rows = xgrow(*rows, cap, *n + 1, sizeof(**rows));
    struct api_stats *a = &(*rows)[(*n)++];
    memset(a, 0, sizeof(*a));
    a->api = api;
    a->layer = layer;
    a->role = gm_text(m, c->role);
    a->inside = inside;
    return a;
}

static void add_counts(struct process_report *p, const struct gm_model *m,
                       const struct gm_call_count *c)
{
    struct device_report *d = device_of(p, c->device);
    struct api_stats *a = api_row(d, m, c);
    a->calls = gm_add(a->calls, c->calls);
    a->failed = gm_add(a->failed, c->failed);
    a->nested = gm_add(a->nested, c->nested);
    a->dur_ns = gm_add(a->dur_ns, c->dur_ns);
    a->ok_size_bytes = gm_add(a->ok_size_bytes, c->ok_bytes);
    a->top_calls = gm_add(a->top_calls, c->top_calls);
    a->top_failed = gm_add(a->top_failed, c->top_failed);
    a->top_dur_ns = gm_add(a->top_dur_ns, c->top_dur_ns);
    a->top_ok_size_bytes = gm_add(a->top_ok_size_bytes, c->top_ok_bytes);
    if (!c->nested_row) {
        d->calls = gm_add(d->calls, c->calls);
        d->failed = gm_add(d->failed, c->failed);
    }
}

/* The process as the model has it, before the walk. */
static void fill_process(struct process_report *p, const struct gm_model *m,
                         const struct gm_process *mp)
{
    p->model = mp;
    p->trace = mp->trace;
    const struct gm_row *row = &mp->row;
    if (row->present) {
        p->has_pid = row->has_pid;
        p->pid = row->pid;
        p->has_ppid = row->has_ppid;
        p->ppid = row->ppid;
        p->has_start_wall = row->has_start_wall;
        p->start_wall_ns = row->start_wall_ns;
        p->has_start_mono = row->has_start_mono;
        p->start_mono_ns = row->start_mono_ns;
        p->runtime_version = row->runtime_version;
        p->driver_version = row->driver_version;
        p->host = row->host;
        p->cmdline = row->cmdline;
        p->exe = row->exe;
    } else if (mp->has_start_wall) {
        /* No process row: the model took the identity from the file name. */
        p->has_pid = true;
        p->pid = mp->pid;
        p->has_start_wall = true;
        p->start_wall_ns = mp->start_wall_ns;
        p->host = mp->host;
    }
    p->env = mp->env;
    p->nenv = mp->nenv;
    p->calls = mp->calls;
    p->failed = mp->failed_calls;
    p->nested = mp->nested_calls;
    p->wait_ns = mp->wait_ns;
    p->waited_calls = mp->waited_calls;
    p->has_events = mp->has_calls;
    p->first_t_ns = mp->first_t_ns;
    p->last_end_ns = mp->last_end_ns;
    p->nccl = mp->nccl;
    assert(p->nccl && "the model was loaded with GM_LOAD_NCCL");
    p->modules = mp->modules ? 1 : 0;
    p->lookups = &mp->lookups;

    p->ndevices = mp->ndevices;
    p->devices = xcalloc(mp->ndevices ? mp->ndevices : 1, sizeof(*p->devices));
    for (size_t i = 0; i < mp->ndevices; i++) {
        const struct gm_device *md = &mp->devices[i];
        struct device_report *d = &p->devices[i];
        d->ordinal = md->ordinal;
        d->listed = md->listed;
        d->uuid = md->uuid;
        d->name = md->name;
        d->pci_bus_id = md->pci_bus_id;
        d->total_bytes = md->total;
        d->gpu = SIZE_MAX;
        for (int k = 0; k < KIND_COUNT; k++)
            d->mem[k].peak_seq = -1;
        d->gpu_mem.peak_seq = -1;
        d->has_meminfo = md->has_meminfo;
        d->meminfo_seq = md->meminfo_seq;
        d->meminfo_t_ns = md->meminfo_t_ns;
        d->meminfo_free = md->meminfo_free;
        d->meminfo_total = md->meminfo_total;
        for (int k = 0; k < KIND_COUNT; k++)
            if (gm_is_gpu_kind((enum gm_kind)k)) {
                d->own_probe.kind_bytes[k] = md->meminfo_live[k];
                d->own_probe.live_bytes = gm_add(d->own_probe.live_bytes, md->meminfo_live[k]);
            }
        d->own_probe.active = md->has_meminfo;
        assert(i == 0 || p->devices[i - 1].ordinal < d->ordinal);
    }
    for (size_t i = 0; i < mp->ncall_counts; i++)
        add_counts(p, m, &mp->call_counts[i]);
    for (size_t i = 0; i < mp->nfailed; i++) {
        const struct gm_failed_call *f = &mp->failed[i];
        struct device_report *d = device_of(p, f->device);
        d->failed_calls =
            xgrow(d->failed_calls, &d->failed_cap, d->nfailed + 1, sizeof(*d->failed_calls));
        d->failed_calls[d->nfailed++] = (struct failed_call){.seq = f->seq,
                                                             .t_ns = f->t_ns,
                                                             .device = f->device,
                                                             .result = f->result,
                                                             .size = f->size,
                                                             .ptr = f->ptr,
                                                             .api = gm_api_name(m, f->api),
                                                             .layer = gm_text(m, f->layer)};
    }
    for (size_t i = 0; i < p->ndevices; i++) {
        struct device_report *d = &p->devices[i];
        summary_sort(d->apis, d->napis, sizeof(*d->apis), summary_compare_apis);
        summary_sort(d->nested, d->nnested, sizeof(*d->nested), summary_compare_apis);
    }
}

/* ---- GPUs across processes ---- */

static struct gpu_report *find_gpu(struct summary_report *r, const char *uuid, size_t *index)
{
    for (size_t i = 0; i < r->ngpus; i++)
        if (strcmp(r->gpus[i].uuid, uuid) == 0) {
            *index = i;
            return &r->gpus[i];
        }
    r->gpus = xgrow(r->gpus, &r->gpus_cap, r->ngpus + 1, sizeof(*r->gpus));
    struct gpu_report *g = &r->gpus[r->ngpus];
    memset(g, 0, sizeof(*g));
    g->uuid = uuid;
    *index = r->ngpus++;
    return g;
}

static int compare_gpu_uuids(const void *a, const void *b)
{
    return strcmp(((const struct gpu_report *)a)->uuid, ((const struct gpu_report *)b)->uuid);
}

/* Groups devices by uuid, finds each GPU's latest cudaMemGetInfo (in wall
 * time, the only clock processes share) and arms every process's probe for
 * that moment. */
static void plan_gpus(struct summary_report *r)
{
    for (size_t pi = 0; pi < r->nprocesses; pi++) {
        struct process_report *p = &r->processes[pi];
        for (size_t di = 0; di < p->ndevices; di++) {
            struct device_report *d = &p->devices[di];
            if (!d->uuid) {
                if (d->ordinal >= 0)
                    r->devices_without_uuid++;
                continue;
            }
            size_t index;
            struct gpu_report *g = find_gpu(r, d->uuid, &index);
            if (!g->name && d->name)
                g->name = d->name;
            if (g->nprocesses == 0 || g->processes[g->nprocesses - 1] != pi) {
                g->processes =
                    xgrow(g->processes, &g->processes_cap, g->nprocesses + 1, sizeof(size_t));
                g->processes[g->nprocesses++] = pi;
            }
            if (d->has_meminfo && has_wall_clock(p)) {
                int64_t wall = to_wall(p, d->meminfo_t_ns);
                if (!g->has_meminfo || wall > g->meminfo_wall_ns) {
                    g->has_meminfo = true;
                    g->meminfo_process = pi;
                    g->meminfo_seq = d->meminfo_seq;
                    g->meminfo_wall_ns = wall;
                    g->meminfo_free = d->meminfo_free;
                    g->meminfo_total = d->meminfo_total;
                }
            }
        }
    }
    summary_sort(r->gpus, r->ngpus, sizeof(*r->gpus), compare_gpu_uuids);

    for (size_t pi = 0; pi < r->nprocesses; pi++) {
        struct process_report *p = &r->processes[pi];
        for (size_t di = 0; di < p->ndevices; di++) {
            struct device_report *d = &p->devices[di];
            if (!d->uuid)
                continue;
            size_t gi;
            struct gpu_report *g = find_gpu(r, d->uuid, &gi);
            d->gpu = gi;
            if (!g->has_meminfo || !has_wall_clock(p))
                continue;
            int64_t at = to_mono(p, g->meminfo_wall_ns);
            /* A process that exited before that moment had its memory
             * released by the driver; one still "running" may have been
             * killed, and one "killed" died at a moment the trace does not
             * know, so their memory is counted: the trace cannot tell. */
            bool ended = p->model->exited; /* exit, _exit or exec */
            if (ended && p->has_events && at > p->last_end_ns)
                continue;
            d->gpu_probe = (struct live_probe){.active = true, .at = at};
        }
    }
}

/* ---- the walk over a process's allocations ---- */

/*
 * Counts an allocation into m: its bytes, its free (counted when made: the
 * model knows the end already) and the live bytes and the peak.
 */
static void mem_alloc(struct mem_stats *m, const struct gm_alloc *a, bool freed)
{
    m->allocs = gm_add(m->allocs, 1);
    m->allocated_bytes = gm_add(m->allocated_bytes, a->size);
    if (freed) {
        m->frees = gm_add(m->frees, 1);
        m->freed_bytes = gm_add(m->freed_bytes, a->size);
    }
    m->live_bytes = gm_add(m->live_bytes, a->size);
    m->live_allocs = gm_add(m->live_allocs, 1);
    if (m->live_bytes > m->peak_bytes || m->peak_seq < 0) {
        m->peak_bytes = m->live_bytes;
        m->peak_seq = a->seq;
        m->peak_t_ns = a->t_ns;
    }
}

static void mem_release(struct mem_stats *m, int64_t size)
{
    m->live_bytes = gm_sub(m->live_bytes, size);
    if (m->live_bytes < 0) /* only reachable through saturation on garbage */
        m->live_bytes = 0;
    if (m->live_allocs > 0)
        m->live_allocs--;
}

static void add_group_path(struct module_group *g, const char *path)
{
    if (!path || !path[0])
        return;
    for (size_t i = 0; i < g->npaths; i++)
        if (strcmp(g->paths[i], path) == 0)
            return;
    if (g->npaths < SUMMARY_MAX_GROUP_PATHS)
        g->paths[g->npaths++] = xstrdup(path);
}

static size_t new_group(struct process_report *p, const char *name, const char *label)
{
    p->groups = xgrow(p->groups, &p->groups_cap, p->ngroups + 1, sizeof(*p->groups));
    struct module_group *g = &p->groups[p->ngroups];
    memset(g, 0, sizeof(*g));
    g->name = xstrdup(name);
    g->label = label;
    return p->ngroups++;
}

/*
 * The group of an allocation whose issuing module is `path` (NULL: the
 * caller is in no recorded module). Groups are by module_display_name, the
 * name people know a library by; past SUMMARY_MAX_MODULE_GROUPS names the
 * rest share SUMMARY_OTHER_MODULES.
 */
static size_t find_group(struct process_report *p, const char *path)
{
    if (p->has_last && same_text(path, p->last_path))
        return p->last_group;
    char *name = module_display_name(path);
    const char *key = name[0] ? name : SUMMARY_UNKNOWN_MODULE;
    size_t found = SIZE_MAX, other = SIZE_MAX;
    for (size_t i = 0; i < p->ngroups && found == SIZE_MAX; i++) {
        if (strcmp(p->groups[i].name, key) == 0)
            found = i;
        else if (strcmp(p->groups[i].name, SUMMARY_OTHER_MODULES) == 0)
            other = i;
    }
    if (found == SIZE_MAX && p->ngroups < SUMMARY_MAX_MODULE_GROUPS) {
        const char *label = strcmp(key, SUMMARY_UNKNOWN_MODULE) == 0
                                ? "caller outside every recorded module"
                                : module_label(key, p->exe);
        found = new_group(p, key, label);
        add_group_path(&p->groups[found], path);
    } else if (found == SIZE_MAX) {
        /* Its paths would be many and mean nothing together: none kept. */
        found = other != SIZE_MAX
                    ? other
                    : new_group(p, SUMMARY_OTHER_MODULES, "more module names than shown");
    } else {
        add_group_path(&p->groups[found], path);
    }
    free(name);
    assert(found < p->ngroups && p->ngroups <= SUMMARY_MAX_MODULE_GROUPS + 1);
    p->last_path = path; /* the model's, which outlives the report */
    p->has_last = true;
    p->last_group = found;
    return found;
}

/* The device's entry for a module group, made on first use. */
static size_t find_modmem(struct device_report *d, size_t group)
{
    for (size_t i = 0; i < d->nmodmem; i++)
        if (d->modmem[i].group == group)
            return i;
    d->modmem = xgrow(d->modmem, &d->modmem_cap, d->nmodmem + 1, sizeof(*d->modmem));
    struct module_mem *mm = &d->modmem[d->nmodmem];
    memset(mm, 0, sizeof(*mm));
    mm->group = group;
    mm->gpu.peak_seq = -1;
    for (int k = 0; k < KIND_COUNT; k++)
        mm->kinds[k].peak_seq = -1;
    return d->nmodmem++;
}

/* Where an allocation counts: its device's stats and module entry. */
struct alloc_place {
    uint32_t device, modmem; /* modmem UINT32_MAX: modules not recorded */
};

static void release(struct process_report *p, const struct gm_alloc *a, struct alloc_place at)
{
    struct device_report *d = &p->devices[at.device];
    enum mem_kind kind = (enum mem_kind)a->kind;
    mem_release(&d->mem[kind], a->size);
    if (gm_is_gpu_kind(a->kind))
        mem_release(&d->gpu_mem, a->size);
    if (at.modmem != UINT32_MAX) {
        struct module_mem *mm = &d->modmem[at.modmem];
        mem_release(&mm->kinds[kind], a->size);
        if (gm_is_gpu_kind(a->kind))
            mem_release(&mm->gpu, a->size);
    }
}

/* Adds an allocation alive at the probe's moment: made at or before it and
 * not ended by then. */
static void probe(struct live_probe *probe, enum mem_kind kind, int64_t start, int64_t end,
                  bool freed, int64_t size)
{
    if (!probe->active)
        return;
    if (start <= probe->at && (!freed || end > probe->at)) {
        probe->live_bytes = gm_add(probe->live_bytes, size);
        probe->kind_bytes[kind] = gm_add(probe->kind_bytes[kind], size);
    }
}

/* The process's events in effect order: each allocation counted when made,
 * released at the free that ended it (a process's exit ends nothing here:
 * the allocations view leaves its frees NULL). */
static void walk_allocations(struct process_report *p, const struct gm_model *m)
{
    const struct gm_process *mp = p->model;
    struct alloc_place *places = xcalloc(mp->nallocs ? mp->nallocs : 1, sizeof(*places));
    for (size_t i = 0; i < mp->nevents; i++) {
        const struct gm_event *e = &mp->events[i];
        if (e->type != GM_EV_ALLOC && e->type != GM_EV_FREE)
            continue;
        assert(e->a >= 0 && (size_t)e->a < mp->nallocs);
        const struct gm_alloc *a = &mp->allocs[e->a];
        if (e->type == GM_EV_FREE) {
            release(p, a, places[e->a]);
            continue;
        }
        struct device_report *d = device_of(p, a->device);
        enum mem_kind kind = (enum mem_kind)a->kind;
        const struct gm_event *end = a->end_event != GM_NONE ? &mp->events[a->end_event] : NULL;
        bool freed = end && end->type == GM_EV_FREE;
        struct alloc_place at = {(uint32_t)(d - p->devices), UINT32_MAX};
        mem_alloc(&d->mem[kind], a, freed);
        if (gm_is_gpu_kind(a->kind))
            mem_alloc(&d->gpu_mem, a, freed);
        if (p->modules > 0) {
            const char *path = gm_text(m, a->path);
            at.modmem = (uint32_t)find_modmem(d, find_group(p, path));
            if (a->module != GM_NONE)
                p->known_modules = true;
            struct module_mem *mm = &d->modmem[at.modmem];
            mem_alloc(&mm->kinds[kind], a, freed);
            if (gm_is_gpu_kind(a->kind))
                mem_alloc(&mm->gpu, a, freed);
        }
        places[e->a] = at;
        if (gm_is_gpu_kind(a->kind))
            probe(&d->gpu_probe, kind, a->t_ns, freed ? end->t_ns : 0, freed, a->size);
    }
    free(places);
}

void summary_build(struct summary_report *r, const struct gm_model *m, const char *path)
{
    memset(r, 0, sizeof(*r));
    r->path = path;
    r->model = m;
    r->nprocesses = m->nprocs;
    r->processes = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*r->processes));
    for (size_t i = 0; i < m->nprocs; i++) {
        struct process_report *p = &r->processes[i];
        fill_process(p, m, &m->procs[i]);
        p->shown = true;
        for (size_t di = 0; di < p->ndevices; di++)
            p->devices[di].shown = true;
        r->calls = gm_add(r->calls, p->calls);
        r->failed = gm_add(r->failed, p->failed);
    }
    /* The walk sums what was live at every GPU's latest cudaMemGetInfo. */
    plan_gpus(r);
    for (size_t i = 0; i < r->nprocesses; i++)
        walk_allocations(&r->processes[i], m);
    r->shown_processes = r->nprocesses;
    r->shown_gpus = r->ngpus;
    for (size_t gi = 0; gi < r->ngpus; gi++) {
        struct gpu_report *g = &r->gpus[gi];
        g->shown = true;
        for (size_t k = 0; k < g->nprocesses; k++) {
            struct process_report *p = &r->processes[g->processes[k]];
            for (size_t di = 0; di < p->ndevices; di++) {
                const struct device_report *d = &p->devices[di];
                if (!d->uuid || strcmp(d->uuid, g->uuid) != 0 || !d->gpu_probe.active)
                    continue;
                g->traced_live_bytes = gm_add(g->traced_live_bytes, d->gpu_probe.live_bytes);
                for (int kind = 0; kind < KIND_COUNT; kind++)
                    g->traced_kind_bytes[kind] =
                        gm_add(g->traced_kind_bytes[kind], d->gpu_probe.kind_bytes[kind]);
            }
        }
    }
}

/* The model's GPU of a device, GM_NONE for none: by uuid, or for a device
 * without one, the process's GPU known by its ordinal (gpumodel.h). */
static uint32_t model_gpu(const struct gm_model *m, const struct gm_process *mp,
                          const struct device_report *d)
{
    for (size_t i = 0; i < mp->ngpus; i++) {
        const struct gm_gpu *g = &m->gpus[mp->gpus[i]];
        if (d->uuid ? g->uuid && strcmp(g->uuid, d->uuid) == 0
                    : !g->uuid && g->ordinal == d->ordinal && d->ordinal >= 0)
            return mp->gpus[i];
    }
    return GM_NONE;
}

void summary_filter(struct summary_report *r, const struct gm_model *m, const struct gm_filter *f)
{
    r->shown_processes = r->shown_gpus = 0;
    for (size_t i = 0; i < r->nprocesses; i++) {
        struct process_report *p = &r->processes[i];
        assert(p->model >= m->procs && p->model < m->procs + m->nprocs);
        p->shown = gm_filter_proc(f, (uint32_t)(p->model - m->procs));
        r->shown_processes += p->shown;
        for (size_t di = 0; di < p->ndevices; di++) {
            struct device_report *d = &p->devices[di];
            d->shown = p->shown && (f->gpu < 0 || model_gpu(m, p->model, d) == (uint32_t)f->gpu);
        }
    }
    for (size_t gi = 0; gi < r->ngpus; gi++) {
        struct gpu_report *g = &r->gpus[gi];
        uint32_t mg = GM_NONE;
        for (size_t i = 0; i < m->ngpus && mg == GM_NONE; i++)
            if (m->gpus[i].uuid && strcmp(m->gpus[i].uuid, g->uuid) == 0)
                mg = (uint32_t)i;
        if (mg != GM_NONE) {
            g->shown = gm_filter_gpu(f, mg);
        } else {
            /* A GPU of a devices row that no event used. */
            g->shown = f->gpu < 0;
            if (g->shown && f->procs_filtered) {
                g->shown = false;
                for (size_t k = 0; k < g->nprocesses && !g->shown; k++)
                    g->shown = r->processes[g->processes[k]].shown;
            }
        }
        r->shown_gpus += g->shown;
    }
}

bool summary_has_problem(const struct summary_report *r)
{
    for (size_t i = 0; i < r->nprocesses; i++) {
        const struct process_report *p = &r->processes[i];
        if (!p->shown)
            continue;
        if (p->model->unknown_frees > 0 || p->model->double_frees > 0)
            return true;
        for (size_t di = 0; di < p->ndevices; di++) {
            const struct device_report *d = &p->devices[di];
            if (!d->shown)
                continue;
            /* Memory live at exit is not one: PyTorch's caching allocator
             * never hands its blocks back before the process ends. */
            if (d->nfailed > 0)
                return true;
        }
    }
    return false;
}

void summary_free(struct summary_report *r)
{
    for (size_t i = 0; i < r->nprocesses; i++) {
        struct process_report *p = &r->processes[i];
        for (size_t di = 0; di < p->ndevices; di++) {
            struct device_report *d = &p->devices[di];
            free(d->apis);
            free(d->nested);
            free(d->modmem);
            free(d->failed_calls);
        }
        free(p->devices);
        for (size_t g = 0; g < p->ngroups; g++) {
            free(p->groups[g].name);
            for (size_t k = 0; k < p->groups[g].npaths; k++)
                free(p->groups[g].paths[k]);
        }
        free(p->groups);
    }
    for (size_t gi = 0; gi < r->ngpus; gi++)
        free(r->gpus[gi].processes);
    free(r->gpus);
    free(r->processes);
    memset(r, 0, sizeof(*r));
}
