/*
 * streams.c - the GPU model's last step, once every trace of the run is
 * loaded (loader.h): IPC mappings get the size of what they map, categories
 * are decided (an export may come after its allocation, in another trace),
 * each process gets its rank, processes and GPUs are put in report order,
 * each GPU's events are merged by time into one stream, and the notes say
 * what the model assumed.
 */
#include "cli.h"
#include "model/loader.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- after every trace: categories, order, streams ---- */

static void decide_categories(struct gm_process *p)
{
    for (size_t i = 0; i < p->nallocs; i++) {
        struct gm_alloc *a = &p->allocs[i];
        enum gm_kind kind = (enum gm_kind)a->kind;
        enum gm_category c;
        /* NCCL and IPC exports only make categories of GPU memory: NCCL's
         * pinned host buffers stay host memory, the peers' buffers NCCL maps
         * stay peer memory. */
        if (gm_is_gpu_kind(kind) && a->category == GM_CAT_NCCL)
            c = GM_CAT_NCCL;
        else if (gm_is_gpu_kind(kind) && a->exported)
            c = GM_CAT_IPC_EXPORTED;
        else if (kind == GM_KIND_VMM)
            c = GM_CAT_VMM;
        else if (kind == GM_KIND_DEVICE)
            c = GM_CAT_RUNTIME;
        else if (kind == GM_KIND_MANAGED)
            c = GM_CAT_MANAGED;
        else if (kind == GM_KIND_IPC)
            c = GM_CAT_PEER;
        else if (kind == GM_KIND_HOST || kind == GM_KIND_VMM_HOST)
            c = GM_CAT_HOST;
        else
            c = GM_CAT_NONE;
        a->category = (uint8_t)c;
    }
}

/* Rank: the process's rank in its largest successful communicator. */
static void decide_rank(struct gm_process *p)
{
    const struct gm_comm *best = NULL;
    for (size_t i = 0; i < p->ncomms; i++) {
        const struct gm_comm *c = &p->comms[i];
        if (c->result != 0 || c->nranks <= 0 || c->rank < 0 || c->rank >= c->nranks)
            continue;
        if (!best || c->nranks > best->nranks)
            best = c;
    }
    if (best) {
        p->has_rank = true;
        p->rank = best->rank;
        p->world_nranks = best->nranks;
    }
}

/* IPC mappings carry no size; the exporter's allocation has one. Each
 * mapping is also linked to that allocation (processes by their index
 * before the report order, which gm_load renumbers). */
static void size_mappings(struct loader *L)
{
    struct gm_model *m = L->m;
    size_t cap = 0;
    for (size_t i = 0; i < L->nopens; i++) {
        struct gm_alloc *open = &L->opens[i].proc->allocs[L->opens[i].alloc];
        for (size_t k = 0; k < L->nexports; k++)
            if (L->exports[k].handle == L->opens[i].handle && L->exports[k].handle != GM_NONE) {
                if (open->size <= 0)
                    open->size = L->exports[k].proc->allocs[L->exports[k].alloc].size;
                m->ipc_links = xgrow(m->ipc_links, &cap, m->nipc_links + 1, sizeof(*m->ipc_links));
                m->ipc_links[m->nipc_links++] =
                    (struct gm_ipc_link){.exporter_proc = (uint32_t)(L->exports[k].proc - m->procs),
                                         .exporter_alloc = (uint32_t)L->exports[k].alloc,
                                         .opener_proc = (uint32_t)(L->opens[i].proc - m->procs),
                                         .opener_alloc = (uint32_t)L->opens[i].alloc};
                break;
            }
    }
}

static int compare_procs(const void *a, const void *b)
{
    const struct gm_process *x = a, *y = b;
    if (x->start_wall_ns != y->start_wall_ns)
        return x->start_wall_ns < y->start_wall_ns ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return strcmp(x->trace->file, y->trace->file);
}

static int compare_gpus(const void *a, const void *b, void *arg)
{
    const struct loader *L = arg;
    const struct gm_gpu *x = &L->gpus[*(const uint32_t *)a].gpu;
    const struct gm_gpu *y = &L->gpus[*(const uint32_t *)b].gpu;
    const struct gm_clock *cx = &L->m->clocks[x->clock], *cy = &L->m->clocks[y->clock];
    int c = strcmp(cx->host, cy->host);
    if (c == 0)
        c = strcmp(cx->boot_id, cy->boot_id);
    if (c == 0 && (!x->uuid) != (!y->uuid))
        c = x->uuid ? -1 : 1;
    /* nvidia-smi numbers a host's GPUs in PCI order; GPUs without a bus id last */
    if (c == 0 && (!x->pci_bus_id[0]) != (!y->pci_bus_id[0]))
        c = x->pci_bus_id[0] ? -1 : 1;
    if (c == 0)
        c = strcasecmp(x->pci_bus_id, y->pci_bus_id);
    if (c == 0 && !x->uuid && x->ordinal != y->ordinal)
        c = x->ordinal < y->ordinal ? -1 : 1;
    if (c == 0)
        c = strcmp(x->key, y->key);
    return c;
}

static uint32_t remap(const uint32_t *new_index, uint32_t gpu)
{
    return gpu == GM_NONE ? GM_NONE : new_index[gpu];
}

static void order_gpus(struct loader *L)
{
    struct gm_model *m = L->m;
    /* clocks as host and boot id */
    m->nclocks = L->clocks.count;
    m->clocks = xcalloc(m->nclocks ? m->nclocks : 1, sizeof(*m->clocks));
    for (size_t i = 0; i < m->nclocks; i++) {
        const char *key = L->clocks.strings[i];
        const char *sep = strchr(key, '\x1f');
        assert(sep);
        m->clocks[i].host = xstrndup(key, (size_t)(sep - key));
        m->clocks[i].boot_id = xstrdup(sep + 1);
    }
    size_t n = L->ngpus;
    uint32_t *order = xcalloc(n ? n : 1, sizeof(*order));
    uint32_t *new_index = xcalloc(n ? n : 1, sizeof(*new_index));
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    if (n > 1)
        qsort_r(order, n, sizeof(*order), compare_gpus, L);
    m->ngpus = n;
    m->gpus = xcalloc(n ? n : 1, sizeof(*m->gpus));
    for (size_t i = 0; i < n; i++) {
        new_index[order[i]] = (uint32_t)i;
        m->gpus[i] = L->gpus[order[i]].gpu;
    }
    for (size_t pi = 0; pi < m->nprocs; pi++) {
        struct gm_process *p = &m->procs[pi];
        for (size_t i = 0; i < p->nevents; i++)
            p->events[i].gpu = remap(new_index, p->events[i].gpu);
        for (size_t i = 0; i < p->nallocs; i++)
            p->allocs[i].gpu = remap(new_index, p->allocs[i].gpu);
        for (size_t i = 0; i < p->ncomms; i++)
            p->comms[i].gpu = remap(new_index, p->comms[i].gpu);
    }
    free(order);
    free(new_index);
}

/* Keeps the first GM_EV_FIRST_CALL per GPU (events moved from device -1 to
 * a GPU may have made a second one), then adds one GM_EV_END per GPU the
 * process used and ties each allocation still live at a clean exit to it. */
static void finish_process_events(struct gm_model *m, uint32_t proc)
{
    struct gm_process *p = &m->procs[proc];
    bool *seen = xcalloc(m->ngpus ? m->ngpus : 1, sizeof(bool));
    bool *used = xcalloc(m->ngpus ? m->ngpus : 1, sizeof(bool));
    /* Removing events would renumber them; a duplicate is moved to no GPU,
     * where no timeline shows it. */
    for (size_t i = 0; i < p->nevents; i++) {
        struct gm_event *e = &p->events[i];
        if (e->gpu == GM_NONE)
            continue;
        if (e->type == GM_EV_FIRST_CALL && seen[e->gpu]) {
            e->gpu = GM_NONE;
            continue;
        }
        if (e->type == GM_EV_FIRST_CALL)
            seen[e->gpu] = true;
        used[e->gpu] = true;
    }
    size_t cap = p->nevents;
    uint32_t *end_of = xcalloc(m->ngpus ? m->ngpus : 1, sizeof(uint32_t));
    for (size_t g = 0; g < m->ngpus; g++) {
        end_of[g] = GM_NONE;
        if (!used[g])
            continue;
        p->events = xgrow(p->events, &cap, p->nevents + 1, sizeof(*p->events));
        end_of[g] = (uint32_t)p->nevents;
        p->events[p->nevents++] = (struct gm_event){.seq = p->last_seq,
                                                    .t_ns = p->last_end_ns,
                                                    .a = p->exited,
                                                    .gpu = (uint32_t)g,
                                                    .api = GM_NONE,
                                                    .type = GM_EV_END};
        p->gpus = ld_resize(p->gpus, p->ngpus + 1, sizeof(*p->gpus));
        p->gpus[p->ngpus++] = (uint32_t)g;
    }
    if (p->exited)
        for (size_t i = 0; i < p->nallocs; i++) {
            struct gm_alloc *a = &p->allocs[i];
            if (a->end_event == GM_NONE && a->gpu != GM_NONE)
                a->end_event = end_of[a->gpu];
        }
    free(end_of);
    free(seen);
    free(used);
}

/* Merges the events of every process on each GPU by time. Within a process
 * the order stays its effect order (its clock may step back between threads;
 * an allocation must never come after its own free). */
static void build_streams(struct gm_model *m)
{
    size_t *counts = xcalloc(m->ngpus ? m->ngpus : 1, sizeof(size_t));
    for (size_t pi = 0; pi < m->nprocs; pi++)
        for (size_t i = 0; i < m->procs[pi].nevents; i++)
            if (m->procs[pi].events[i].gpu != GM_NONE)
                counts[m->procs[pi].events[i].gpu]++;
    for (size_t g = 0; g < m->ngpus; g++) {
        struct gm_gpu *gpu = &m->gpus[g];
        gpu->stream = xcalloc(counts[g] ? counts[g] : 1, sizeof(*gpu->stream));
        for (size_t pi = 0; pi < m->nprocs; pi++) {
            const struct gm_process *p = &m->procs[pi];
            for (size_t k = 0; k < p->ngpus; k++)
                if (p->gpus[k] == g) {
                    gpu->procs = ld_resize(gpu->procs, gpu->nprocs + 1, sizeof(uint32_t));
                    gpu->procs[gpu->nprocs++] = (uint32_t)pi;
                }
        }
        /* k-way merge; k is the number of processes on one GPU (a handful). */
        size_t *heads = xcalloc(gpu->nprocs ? gpu->nprocs : 1, sizeof(size_t));
        for (;;) {
            size_t best = SIZE_MAX;
            int64_t best_t = 0;
            for (size_t k = 0; k < gpu->nprocs; k++) {
                const struct gm_process *p = &m->procs[gpu->procs[k]];
                while (heads[k] < p->nevents && p->events[heads[k]].gpu != g)
                    heads[k]++;
                if (heads[k] == p->nevents)
                    continue;
                int64_t t = p->events[heads[k]].t_ns;
                if (best == SIZE_MAX || t < best_t) {
                    best = k;
                    best_t = t;
                }
            }
            if (best == SIZE_MAX)
                break;
            struct gm_process *p = &m->procs[gpu->procs[best]];
            assert(gpu->nstream < counts[g]);
            p->events[heads[best]].pos = gpu->nstream;
            gpu->stream[gpu->nstream++] = (struct gm_ref){gpu->procs[best], (uint32_t)heads[best]};
            heads[best]++;
        }
        assert(gpu->nstream == counts[g]);
        free(heads);
    }
    free(counts);
}

static void add_notes(struct gm_model *m, const struct loader *L)
{
    char name[64];
    for (size_t pi = 0; pi < m->nprocs; pi++) {
        const struct gm_process *p = &m->procs[pi];
        const struct proc_extra *x = &L->extra[pi];
        gm_process_name(name, sizeof(name), p);
        if (!p->modules && p->nallocs > 0)
            gm_note(m,
                    "%s: a trace of format %d records no issuing modules: NCCL's buffers count "
                    "as NCCL only when made by ncclMemAlloc",
                    name, x->format_version);
        if (p->unknown_frees)
            gm_note(m, "%s: %" PRId64 " free%s of pointers the trace never saw allocated (ignored)",
                    name, p->unknown_frees, p->unknown_frees == 1 ? "" : "s");
        if (p->double_frees)
            gm_note(m, "%s: %" PRId64 " free%s of pointers already freed (ignored)", name,
                    p->double_frees, p->double_frees == 1 ? "" : "s");
        if (!p->exited && p->has_calls)
            gm_note(m,
                    "%s was %s after seq %" PRId64
                    ": loaded as far as it got; its memory counts until the end",
                    name,
                    p->end_state && strcmp(p->end_state, "killed") == 0 ? "killed (no clean exit)"
                                                                        : "still running or killed",
                    p->last_seq);
        if (x->devices_without_uuid)
            gm_note(m,
                    "%s: %" PRId64 " device%s without a uuid in its trace: identified by host and "
                    "ordinal, which other processes may number differently",
                    name, x->devices_without_uuid, x->devices_without_uuid == 1 ? "" : "s");
        if (x->no_gpu_events)
            gm_note(m, "%s: %" PRId64 " event%s on no known GPU (left out of the GPUs' timelines)",
                    name, x->no_gpu_events, x->no_gpu_events == 1 ? "" : "s");
        if (x->many_devices)
            gm_note(m, "%s: more than %d device ordinals; the others are left out", name,
                    MAX_DEVICES);
        if (x->scan_capped)
            gm_note(m, "%s: too many IPC exports inside allocations to match them all", name);
        if (x->missing_boot_id)
            gm_note(m, "%s: no boot id in its trace: assumed to share the clock of host '%s'", name,
                    p->host);
    }
    /* Several hosts: several clocks. */
    size_t hosts = 0;
    for (size_t i = 0; i < m->nclocks; i++) {
        bool again = false;
        for (size_t k = 0; k < i; k++)
            again |= strcmp(m->clocks[k].host, m->clocks[i].host) == 0;
        hosts += !again;
    }
    if (m->nclocks > 1)
        gm_note(m,
                "traces of %zu host%s (%zu clock%s): each host's monotonic clock is its own, so "
                "each host has its own timelines",
                hosts, hosts == 1 ? "" : "s", m->nclocks, m->nclocks == 1 ? "" : "s");
    for (size_t g = 0; g < m->ngpus; g++)
        for (size_t k = 0; k < g; k++)
            if (m->gpus[g].uuid && m->gpus[k].uuid &&
                strcmp(m->gpus[g].uuid, m->gpus[k].uuid) == 0) {
                gm_note(m, "GPU %s appears under two clocks (host or boot differ): shown apart",
                        m->gpus[g].uuid);
                break;
            }
}

/* Processes in report order; the extras and the IPC links move along. */
static void order_processes(struct loader *L)
{
    struct gm_model *m = L->m;
    struct gm_process *sorted = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*sorted));
    memcpy(sorted, m->procs, m->nprocs * sizeof(*sorted));
    if (m->nprocs > 1)
        qsort(sorted, m->nprocs, sizeof(*sorted), compare_procs);
    struct proc_extra *extra = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*extra));
    uint32_t *new_index = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*new_index));
    for (size_t i = 0; i < m->nprocs; i++)
        for (size_t k = 0; k < m->nprocs; k++)
            if (m->procs[k].trace == sorted[i].trace) {
                extra[i] = L->extra[k];
                new_index[k] = (uint32_t)i;
            }
    for (size_t i = 0; i < m->nipc_links; i++) {
        struct gm_ipc_link *link = &m->ipc_links[i];
        assert(link->exporter_proc < m->nprocs && link->opener_proc < m->nprocs);
        link->exporter_proc = new_index[link->exporter_proc];
        link->opener_proc = new_index[link->opener_proc];
    }
    free(new_index);
    free(m->procs);
    free(L->extra);
    m->procs = sorted;
    L->extra = extra;
}

void ld_finish_model(struct loader *L)
{
    struct gm_model *m = L->m;
    size_mappings(L);
    for (size_t i = 0; i < m->nprocs; i++) {
        decide_categories(&m->procs[i]);
        decide_rank(&m->procs[i]);
    }
    order_processes(L);
    order_gpus(L);
    for (size_t i = 0; i < m->nprocs; i++)
        finish_process_events(m, (uint32_t)i);
    build_streams(m);
    add_notes(m, L);
}
