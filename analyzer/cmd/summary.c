/*
 * summary.c - `cutrace summary DIR [--json]`: per process and per GPU,
 * what was called (the program's own calls apart from those the CUDA and
 * NCCL libraries made inside them, driver entry-point lookups in one line),
 * what was allocated and freed by kind of memory, the peak, what was still
 * live at the end, which module (library or program) issued the GPU memory,
 * how that compares to the last cudaMemGetInfo, and which calls failed; its
 * NCCL version and communicators (nccl.h; `cutrace collectives` joins them
 * across ranks); then a directory-wide view per GPU uuid.
 *
 * GPU memory is what cudaMemGetInfo sees used: device, managed and vmm
 * (cuMemCreate on a device) allocations. Pinned host memory, cuMemCreate on
 * the host, a peer's memory mapped here (ipc) and reserved address space are
 * shown apart and never counted as GPU memory.
 *
 * The report is built in two passes over the traces and only then printed,
 * so a file found damaged halfway through produces a one-line error and no
 * partial report:
 *   1. per trace: process row, env, devices, per-API call statistics,
 *      failed calls, driver lookups and the last cudaMemGetInfo per device;
 *   2. once every trace's last cudaMemGetInfo is known: one ordered walk over
 *      each trace's allocations for totals, peak, live-at-end per kind and
 *      per issuing module, and the live bytes at each cudaMemGetInfo moment
 *      (the process's own, and the latest one of each GPU for the
 *      directory-wide sum).
 *
 * Traces of formats 1 and 2 record no modules and no driver lookups: their
 * reports leave those sections out (JSON: null), see modules.h.
 *
 * Numbers from trace files are untrusted: arithmetic on them saturates
 * instead of overflowing, and negative sizes and durations (values of 2^63
 * or more stored in a signed column) are left out of byte and time totals.
 */
#include "cli.h"
#include "model/errnames.h"
#include "out/json.h"
#include "model/modules.h"
#include "model/nccl.h"
#include "out/table.h"
#include "model/trace.h"
#include "model/traceset.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_FAILED_CALLS 20 /* failed calls listed per device in text mode */
#define TEXT_MODULES      16 /* modules listed per device in text mode */
#define LABEL_WIDTH       11 /* "  command    ..." */
/* Module names kept apart per process; the rest are summed under
 * OTHER_MODULES, so that a hostile trace cannot make the report unbounded. */
#define MAX_MODULE_GROUPS 256
#define MAX_GROUP_PATHS   4 /* distinct paths kept per module name */
#define UNKNOWN_MODULE    "(unknown)"
#define OTHER_MODULES     "(other modules)"

static const char usage[] =
    "usage: cutrace summary [--json] DIR\n"
    "\n"
    "Summarise every trace in DIR (a directory written by `cutrace run`, or one\n"
    "trace file): per process and device, calls by API (nested calls apart),\n"
    "bytes allocated and freed, peak and live memory by kind and by the module\n"
    "that issued it, the last cudaMemGetInfo with the memory the trace does not\n"
    "explain, and failed calls; then one line per GPU.\n"
    "\n"
    "options:\n"
    "  --json      one JSON document with raw numbers (bytes, nanoseconds)\n"
    "  -h, --help  show this help\n"
    "\n"
    "exit status: 0 ok, 1 unreadable or invalid trace, 2 usage error\n";

/* ---- saturating arithmetic on untrusted values ---- */

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* qsort, except that an empty array may be NULL (qsort's may not). */
static void sort_array(void *base, size_t count, size_t size,
                       int (*compare)(const void *, const void *))
{
    if (count > 1)
        qsort(base, count, size, compare);
}

/* ---- the report model ---- */

/* allocations.kind values; GPU memory kinds first (is_gpu_kind). */
enum mem_kind {
    KIND_DEVICE,
    KIND_MANAGED,
    KIND_VMM,
    KIND_HOST,
    KIND_VMM_HOST,
    KIND_IPC,
    KIND_RESERVE,
    KIND_OTHER,
    KIND_COUNT
};

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

/* What cudaMemGetInfo counts as used: managed pages occupy the GPU once
 * touched there, and cuMemCreate on a device is physical GPU memory. */
static bool is_gpu_kind(enum mem_kind kind)
{
    return kind == KIND_DEVICE || kind == KIND_MANAGED || kind == KIND_VMM;
}

static enum mem_kind kind_from_name(const char *kind)
{
    for (int k = 0; k < KIND_OTHER; k++)
        if (kind && strcmp(kind, kind_keys[k]) == 0)
            return (enum mem_kind)k;
    return KIND_OTHER;
}

struct mem_stats {
    int64_t allocs, allocated_bytes;
    int64_t frees, freed_bytes;
    int64_t live_allocs, live_bytes;
    int64_t peak_bytes, peak_seq, peak_t_ns; /* peak_seq < 0: no allocation yet */
};

/*
 * Calls of one API on one device. For d->apis: every call (inside is NULL),
 * with the share made at top level (not inside another traced call) in
 * top_*. For d->nested: the nested calls of the API inside calls of the API
 * `inside` (NULL: the parent is not in the trace), top_* unused.
 */
struct api_stats {
    char *api, *layer, *role, *inside;
    int64_t calls, failed, nested, dur_ns;
    int64_t ok_size_bytes; /* sum of `size` over successful calls */
    int64_t top_calls, top_failed, top_dur_ns, top_ok_size_bytes;
};

struct failed_call {
    int64_t seq, t_ns, device, result, size, ptr;
    char *api, *layer;
};

/* The live GPU memory (device + managed + vmm) of one process at a moment:
 * either before event `seq` (its own cudaMemGetInfo) or at monotonic time
 * `t_ns` (another process's, for the per-GPU sum). */
struct live_probe {
    bool active;
    bool by_time;
    int64_t at; /* the call's effect order (seq before format 6), or t_ns */
    int64_t live_bytes;
    int64_t kind_bytes[KIND_COUNT]; /* live_bytes by kind; only GPU kinds are set */
};

/* The allocations of one module name (see module_basename) in a process. */
struct module_group {
    char *name;        /* basename, UNKNOWN_MODULE or OTHER_MODULES: unique in the process */
    const char *label; /* module_label, or a static note; NULL: none */
    char *paths[MAX_GROUP_PATHS]; /* the distinct paths seen, first ones only */
    size_t npaths;
};

/* The allocations of one module group on one device. */
struct module_mem {
    size_t group;         /* index into the process's groups */
    struct mem_stats gpu; /* device + managed + vmm together */
    struct mem_stats kinds[KIND_COUNT];
};

struct device_report {
    int64_t ordinal; /* -1: calls made before any device was current */
    bool listed;     /* has a row in `devices` */
    char *uuid, *name, *pci_bus_id;
    int64_t total_bytes; /* -1 unknown */
    int64_t calls, failed;
    struct api_stats *apis;
    size_t napis, apis_cap;
    struct api_stats *nested; /* nested calls by API and parent API */
    size_t nnested, nested_cap;
    struct mem_stats mem[KIND_COUNT];
    struct mem_stats gpu_mem;  /* GPU kinds together: its peak is the peak of the sum */
    struct module_mem *modmem; /* by issuing module, when the trace records modules */
    size_t nmodmem, modmem_cap;
    bool has_meminfo;
    int64_t meminfo_seq, meminfo_t_ns, meminfo_free, meminfo_total;
    struct live_probe own_probe; /* at this device's last cudaMemGetInfo */
    struct live_probe gpu_probe; /* at its GPU's latest cudaMemGetInfo */
    struct failed_call *failed_calls;
    size_t nfailed, failed_cap;
    size_t gpu; /* index into the report's gpus, or SIZE_MAX */
};

struct env_var {
    char *name, *value;
};

struct process_report {
    struct trace *trace;
    bool has_row; /* the `process` table had a row */
    bool has_pid, has_ppid, has_start_wall, has_start_mono;
    int64_t pid, ppid, start_wall_ns, start_mono_ns;
    int64_t runtime_version, driver_version; /* 0: unknown */
    char *host, *cmdline, *exe;
    struct env_var *env;
    size_t nenv, env_cap;
    int64_t calls, failed, nested, wait_ns, waited_calls;
    bool has_events;
    int64_t first_t_ns, last_end_ns;
    struct device_report *devices;
    size_t ndevices, devices_cap;
    struct nccl_info nccl; /* present = false for traces from before NCCL was recorded */
    int modules;           /* modules_check: 1 the trace records issuing modules, 0 not */
    struct driver_lookups lookups;
    struct module_group *groups;
    size_t ngroups, groups_cap;
    /* The group of the module path last looked up: allocations come in runs. */
    bool has_last;
    char *last_path; /* NULL: no module */
    size_t last_group;
    bool known_modules; /* an allocation's caller was in a recorded module */
};

struct gpu_report {
    const char *uuid;  /* borrowed from a device_report */
    const char *name;  /* borrowed */
    size_t *processes; /* indexes into the report's processes, in report order */
    size_t nprocesses, processes_cap;
    bool has_meminfo;
    size_t meminfo_process; /* the process with the latest cudaMemGetInfo */
    int64_t meminfo_seq, meminfo_wall_ns, meminfo_free, meminfo_total;
    int64_t traced_live_bytes; /* summed over processes at that moment */
    int64_t traced_kind_bytes[KIND_COUNT];
};

struct summary_report {
    const char *path;
    struct process_report *processes;
    size_t nprocesses;
    struct gpu_report *gpus;
    size_t ngpus, gpus_cap;
    int64_t calls, failed;
    size_t devices_without_uuid;
};

/* The reference for relative times: process start when known, else the
 * first event (a trace whose process row was never written). */
static int64_t time_origin(const struct process_report *p)
{
    if (p->has_start_mono)
        return p->start_mono_ns;
    return p->has_events ? p->first_t_ns : 0;
}

static bool has_wall_clock(const struct process_report *p)
{
    return p->has_start_wall && p->has_start_mono;
}

static int64_t to_wall(const struct process_report *p, int64_t t_ns)
{
    return sat_add(p->start_wall_ns, sat_sub(t_ns, p->start_mono_ns));
}

static int64_t to_mono(const struct process_report *p, int64_t wall_ns)
{
    return sat_add(p->start_mono_ns, sat_sub(wall_ns, p->start_wall_ns));
}

static struct device_report *find_device(struct process_report *p, int64_t ordinal, bool create)
{
    for (size_t i = 0; i < p->ndevices; i++)
        if (p->devices[i].ordinal == ordinal)
            return &p->devices[i];
    if (!create)
        return NULL;
    p->devices = xgrow(p->devices, &p->devices_cap, p->ndevices + 1, sizeof(*p->devices));
    struct device_report *d = &p->devices[p->ndevices++];
    memset(d, 0, sizeof(*d));
    d->ordinal = ordinal;
    d->total_bytes = -1;
    d->gpu = SIZE_MAX;
    for (int k = 0; k < KIND_COUNT; k++)
        d->mem[k].peak_seq = -1;
    d->gpu_mem.peak_seq = -1;
    return d;
}

/* ---- pass 1: facts that need no ordering ---- */

/* For traces that lost their process row. */
static void identity_from_file_name(struct process_report *p)
{
    int64_t pid, start;
    char *host;
    if (!trace_identity_from_file_name(p->trace->file, &pid, &start, &host))
        return;
    p->pid = pid;
    p->has_pid = true;
    p->start_wall_ns = start;
    p->has_start_wall = true;
    p->host = host;
}

static int load_process(struct process_report *p)
{
    struct trace *t = p->trace;
    sqlite3_stmt *stmt =
        trace_query(t,
                    "SELECT pid, ppid, host, cmdline, start_wall_ns, start_mono_ns,"
                    " cuda_runtime_version, cuda_driver_version, exe FROM process LIMIT 1",
                    "");
    if (!stmt)
        return -1;
    int rc = trace_step(t, stmt);
    if (rc == 1) {
        p->has_row = true;
        p->has_pid = !col_is_null(stmt, 0);
        p->pid = col_int(stmt, 0, 0);
        p->has_ppid = !col_is_null(stmt, 1);
        p->ppid = col_int(stmt, 1, 0);
        p->host = col_text(stmt, 2);
        p->cmdline = col_text(stmt, 3);
        p->has_start_wall = !col_is_null(stmt, 4);
        p->start_wall_ns = col_int(stmt, 4, 0);
        p->has_start_mono = !col_is_null(stmt, 5);
        p->start_mono_ns = col_int(stmt, 5, 0);
        p->runtime_version = col_int(stmt, 6, 0);
        p->driver_version = col_int(stmt, 7, 0);
        p->exe = col_text(stmt, 8);
    }
    sqlite3_finalize(stmt);
    if (rc < 0)
        return -1;
    if (!p->has_row)
        identity_from_file_name(p);

    stmt = trace_query(t, "SELECT name, value FROM env ORDER BY name", "");
    if (!stmt)
        return -1;
    while ((rc = trace_step(t, stmt)) == 1) {
        char *name = col_text(stmt, 0);
        if (!name)
            continue;
        p->env = xgrow(p->env, &p->env_cap, p->nenv + 1, sizeof(*p->env));
        p->env[p->nenv].name = name;
        p->env[p->nenv].value = col_text(stmt, 1);
        p->nenv++;
    }
    sqlite3_finalize(stmt);
    return rc;
}

static int load_devices(struct process_report *p)
{
    struct trace *t = p->trace;
    sqlite3_stmt *stmt = trace_query(
        t, "SELECT device, uuid, pci_bus_id, name, total_bytes FROM devices ORDER BY device", "");
    if (!stmt)
        return -1;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        struct device_report *d = find_device(p, col_int(stmt, 0, -1), true);
        if (d->listed)
            continue; /* a damaged table with a repeated device: first row wins */
        d->listed = true;
        d->uuid = col_text(stmt, 1);
        if (d->uuid && d->uuid[0] == '\0') {
            free(d->uuid);
            d->uuid = NULL;
        }
        d->pci_bus_id = col_text(stmt, 2);
        d->name = col_text(stmt, 3);
        d->total_bytes = col_int(stmt, 4, -1);
    }
    sqlite3_finalize(stmt);
    return rc;
}

/* The role of an API in this trace's apis table, copied; NULL if unknown. */
static char *api_role(const struct trace *t, const char *api)
{
    const struct trace_api *info = trace_api_by_name(t, api);
    return info && info->role ? xstrdup(info->role) : NULL;
}

static bool is_lookup_role(const char *role)
{
    return role && strcmp(role, "lookup") == 0;
}

/*
 * Per device and API: every call, and the share made at top level. A call
 * is nested when another traced call of its thread was in progress (a
 * driver call the runtime or NCCL made for the program); NULL counts as top
 * level, like the `nested` sum, so that top + nested = all.
 */
static int load_call_stats(struct process_report *p)
{
    struct trace *t = p->trace;
    sqlite3_stmt *stmt = trace_query(
        t,
        "SELECT coalesce(device, -1) AS dev, api, layer, count(*), sum(result <> 0),"
        " sum(nested <> 0), " TRACE_SUM_FUNCTION "(dur_ns),"
        " " TRACE_SUM_FUNCTION "(CASE WHEN result = 0 THEN size END),"
        " " TRACE_SUM_FUNCTION "(wait_ns), sum(wait_ns > 0), min(t_ns), max(t_ns + max(dur_ns, 0)),"
        " sum(coalesce(nested, 0) = 0),"
        " sum(CASE WHEN coalesce(nested, 0) = 0 THEN result <> 0 END),"
        " " TRACE_SUM_FUNCTION "(CASE WHEN coalesce(nested, 0) = 0 THEN dur_ns END),"
        " " TRACE_SUM_FUNCTION "(CASE WHEN coalesce(nested, 0) = 0 AND result = 0 THEN size END)"
        " FROM calls GROUP BY dev, api, layer ORDER BY dev, api, layer",
        "");
    if (!stmt)
        return -1;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        struct device_report *d = find_device(p, col_int(stmt, 0, -1), true);
        d->apis = xgrow(d->apis, &d->apis_cap, d->napis + 1, sizeof(*d->apis));
        struct api_stats *a = &d->apis[d->napis++];
        memset(a, 0, sizeof(*a));
        a->api = col_text(stmt, 1);
        a->layer = col_text(stmt, 2);
        a->role = api_role(t, a->api);
        a->calls = col_int(stmt, 3, 0);
        a->failed = col_int(stmt, 4, 0);
        a->nested = col_int(stmt, 5, 0);
        a->dur_ns = col_int(stmt, 6, 0);
        a->ok_size_bytes = col_int(stmt, 7, 0);
        a->top_calls = col_int(stmt, 12, 0);
        a->top_failed = col_int(stmt, 13, 0);
        a->top_dur_ns = col_int(stmt, 14, 0);
        a->top_ok_size_bytes = col_int(stmt, 15, 0);
        d->calls = sat_add(d->calls, a->calls);
        d->failed = sat_add(d->failed, a->failed);
        p->calls = sat_add(p->calls, a->calls);
        p->failed = sat_add(p->failed, a->failed);
        p->nested = sat_add(p->nested, a->nested);
        p->wait_ns = sat_add(p->wait_ns, col_int(stmt, 8, 0));
        p->waited_calls = sat_add(p->waited_calls, col_int(stmt, 9, 0));
        if (!col_is_null(stmt, 10)) {
            int64_t first = col_int(stmt, 10, 0), last = col_int(stmt, 11, first);
            if (!p->has_events || first < p->first_t_ns)
                p->first_t_ns = first;
            if (!p->has_events || last > p->last_end_ns)
                p->last_end_ns = last;
            p->has_events = true;
        }
    }
    sqlite3_finalize(stmt);
    return rc;
}

/* Nested calls per device, API and the API of the call they were made in
 * ("cuMemAlloc_v2 inside cudaMalloc"): the libraries' own calls. */
static int load_nested_calls(struct process_report *p)
{
    struct trace *t = p->trace;
    sqlite3_stmt *stmt =
        trace_query(t,
                    "SELECT coalesce(c.device, -1) AS dev, c.api, c.layer,"
                    " (SELECT x.api FROM calls x WHERE x.seq = c.parent_seq) AS inside, count(*),"
                    " sum(c.result <> 0), " TRACE_SUM_FUNCTION "(c.dur_ns),"
                    " " TRACE_SUM_FUNCTION "(CASE WHEN c.result = 0 THEN c.size END)"
                    " FROM calls c WHERE c.nested <> 0 GROUP BY dev, c.api, c.layer, inside"
                    " ORDER BY dev, c.api, c.layer, inside",
                    "");
    if (!stmt)
        return -1;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        struct device_report *d = find_device(p, col_int(stmt, 0, -1), true);
        d->nested = xgrow(d->nested, &d->nested_cap, d->nnested + 1, sizeof(*d->nested));
        struct api_stats *a = &d->nested[d->nnested++];
        memset(a, 0, sizeof(*a));
        a->api = col_text(stmt, 1);
        a->layer = col_text(stmt, 2);
        a->role = api_role(t, a->api);
        a->inside = col_text(stmt, 3);
        a->calls = col_int(stmt, 4, 0);
        a->nested = a->calls;
        a->failed = col_int(stmt, 5, 0);
        a->dur_ns = col_int(stmt, 6, 0);
        a->ok_size_bytes = col_int(stmt, 7, 0);
    }
    sqlite3_finalize(stmt);
    return rc;
}

/* Failed calls, except driver lookups: a lookup of a symbol the driver
 * lacks is how libraries probe for features, routinely by the dozen; the
 * lookups line counts them instead. */
static int load_failed_calls(struct process_report *p)
{
    struct trace *t = p->trace;
    sqlite3_stmt *stmt = trace_query(t,
                                     "SELECT seq, t_ns, coalesce(device, -1), api, layer, result,"
                                     " size, ptr FROM calls WHERE result <> 0 ORDER BY seq",
                                     "");
    if (!stmt)
        return -1;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        const struct trace_api *info =
            trace_api_by_name(t, (const char *)sqlite3_column_text(stmt, 3));
        if (info && is_lookup_role(info->role))
            continue;
        struct device_report *d = find_device(p, col_int(stmt, 2, -1), true);
        d->failed_calls =
            xgrow(d->failed_calls, &d->failed_cap, d->nfailed + 1, sizeof(*d->failed_calls));
        struct failed_call *f = &d->failed_calls[d->nfailed++];
        f->seq = col_int(stmt, 0, -1);
        f->t_ns = col_int(stmt, 1, 0);
        f->device = d->ordinal;
        f->api = col_text(stmt, 3);
        f->layer = col_text(stmt, 4);
        f->result = col_int(stmt, 5, 0);
        f->size = col_int(stmt, 6, 0);
        f->ptr = col_int(stmt, 7, 0);
    }
    sqlite3_finalize(stmt);
    return rc;
}

/* Where the measurement seq falls among the allocations and frees: its
 * calls.effect_order (format 6), or its seq in older traces, which pair by seq. */
static int64_t measurement_order(struct trace *t, int64_t seq)
{
    if (!trace_has_effect_order(t))
        return seq;
    sqlite3_stmt *stmt = trace_query(t, "SELECT effect_order FROM calls WHERE seq = ?", "i", seq);
    int64_t order = seq;
    if (stmt && trace_step(t, stmt) == 1)
        order = col_int(stmt, 0, seq);
    sqlite3_finalize(stmt);
    return order;
}

static int load_meminfo(struct process_report *p)
{
    struct trace *t = p->trace;
    /* SQLite fills the bare columns from the row holding max(seq). */
    sqlite3_stmt *stmt = trace_query(t,
                                     "SELECT coalesce(device, -1) AS dev, max(seq), t_ns,"
                                     " free_bytes, total_bytes FROM meminfo GROUP BY dev",
                                     "");
    if (!stmt)
        return -1;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        struct device_report *d = find_device(p, col_int(stmt, 0, -1), true);
        d->has_meminfo = true;
        d->meminfo_seq = col_int(stmt, 1, -1);
        d->meminfo_t_ns = col_int(stmt, 2, 0);
        d->meminfo_free = col_int(stmt, 3, 0);
        d->meminfo_total = col_int(stmt, 4, 0);
        /* Like sizes, 2^63 bytes or more is not something a GPU reported. */
        if (d->meminfo_free < 0)
            d->meminfo_free = 0;
        if (d->meminfo_total < 0)
            d->meminfo_total = 0;
        d->own_probe =
            (struct live_probe){.active = true, .at = measurement_order(t, d->meminfo_seq)};
    }
    sqlite3_finalize(stmt);
    return rc;
}

static int compare_api_stats(const void *a, const void *b)
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

static int compare_devices(const void *a, const void *b)
{
    const struct device_report *x = a, *y = b;
    return (x->ordinal > y->ordinal) - (x->ordinal < y->ordinal);
}

static int load_pass1(struct process_report *p)
{
    p->modules = modules_check(p->trace);
    if (p->modules < 0 || trace_effect_order_check(p->trace) < 0)
        return -1;
    if (load_process(p) != 0 || load_devices(p) != 0 || load_call_stats(p) != 0 ||
        load_nested_calls(p) != 0 || load_failed_calls(p) != 0 || load_meminfo(p) != 0 ||
        nccl_load(p->trace, false, true, &p->nccl) != 0 ||
        driver_lookups_load(p->trace, p->modules, &p->lookups) != 0)
        return -1;
    sort_array(p->devices, p->ndevices, sizeof(*p->devices), compare_devices);
    for (size_t i = 0; i < p->ndevices; i++) {
        struct device_report *d = &p->devices[i];
        sort_array(d->apis, d->napis, sizeof(*d->apis), compare_api_stats);
        sort_array(d->nested, d->nnested, sizeof(*d->nested), compare_api_stats);
    }
    return 0;
}

/* ---- between the passes: GPUs across processes ---- */

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

/* A process that said how it ended: exit, _exit or exec. Not "running" and
 * not "killed": a killed process died at some unknown moment after its last
 * recorded call. */
static bool exited_cleanly(const char *end_state)
{
    return end_state && (strcmp(end_state, "exit") == 0 || strcmp(end_state, "_exit") == 0 ||
                         strcmp(end_state, "exec") == 0);
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
    sort_array(r->gpus, r->ngpus, sizeof(*r->gpus), compare_gpu_uuids);

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
            bool ended = exited_cleanly(p->trace->end_state);
            if (ended && p->has_events && at > p->last_end_ns)
                continue;
            d->gpu_probe = (struct live_probe){.active = true, .by_time = true, .at = at};
        }
    }
}

/* ---- pass 2: the ordered walk over allocations ---- */

/* A free still to come, ordered by when it takes effect (the free_effect_order
 * of the allocation it ends; free_seq in traces before format 6). */
struct pending_free {
    int64_t order;
    int64_t size;
    size_t device; /* index: the devices array may grow during the walk */
    size_t modmem; /* index into that device's modmem, SIZE_MAX: modules not recorded */
    enum mem_kind kind;
};

struct free_heap {
    struct pending_free *items;
    size_t count, cap;
};

static void heap_push(struct free_heap *h, struct pending_free item)
{
    h->items = xgrow(h->items, &h->cap, h->count + 1, sizeof(*h->items));
    size_t i = h->count++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->items[parent].order <= item.order)
            break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = item;
}

static struct pending_free heap_pop(struct free_heap *h)
{
    assert(h->count > 0);
    struct pending_free top = h->items[0];
    struct pending_free last = h->items[--h->count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->count)
            break;
        if (child + 1 < h->count && h->items[child + 1].order < h->items[child].order)
            child++;
        if (last.order <= h->items[child].order)
            break;
        h->items[i] = h->items[child];
        i = child;
    }
    if (h->count > 0)
        h->items[i] = last;
    return top;
}

/* When an allocation and its end took effect (effect orders, or seqs in
 * traces before format 6), and the allocating call. */
struct alloc_span {
    int64_t seq, t_ns, order, free_order;
    bool freed;
};

/*
 * Counts an allocation into m: its bytes, its free (counted when made: the
 * view knows the end already) and, while it lives, the live bytes and the
 * peak. Returns whether it is live after it was made.
 */
static bool mem_alloc(struct mem_stats *m, const struct alloc_span *a, int64_t size)
{
    m->allocs = sat_add(m->allocs, 1);
    m->allocated_bytes = sat_add(m->allocated_bytes, size);
    if (a->freed) {
        m->frees = sat_add(m->frees, 1);
        m->freed_bytes = sat_add(m->freed_bytes, size);
    }
    /* A free at or before its own allocation (damaged trace) never lived. */
    if (a->freed && a->free_order <= a->order)
        return false;
    m->live_bytes = sat_add(m->live_bytes, size);
    m->live_allocs = sat_add(m->live_allocs, 1);
    if (m->live_bytes > m->peak_bytes || m->peak_seq < 0) {
        m->peak_bytes = m->live_bytes;
        m->peak_seq = a->seq;
        m->peak_t_ns = a->t_ns;
    }
    return true;
}

static void mem_release(struct mem_stats *m, int64_t size)
{
    m->live_bytes = sat_sub(m->live_bytes, size);
    if (m->live_bytes < 0) /* only reachable through saturation on garbage */
        m->live_bytes = 0;
    if (m->live_allocs > 0)
        m->live_allocs--;
}

static void apply_free(struct process_report *p, const struct pending_free *f)
{
    assert(f->device < p->ndevices);
    struct device_report *d = &p->devices[f->device];
    mem_release(&d->mem[f->kind], f->size);
    if (is_gpu_kind(f->kind))
        mem_release(&d->gpu_mem, f->size);
    if (f->modmem != SIZE_MAX) {
        assert(f->modmem < d->nmodmem);
        struct module_mem *mm = &d->modmem[f->modmem];
        mem_release(&mm->kinds[f->kind], f->size);
        if (is_gpu_kind(f->kind))
            mem_release(&mm->gpu, f->size);
    }
}

/* Adds an allocation alive at the probe's moment: made before it (by seq:
 * strictly before the cudaMemGetInfo call; by time: at or before) and not
 * ended by then. */
static void probe(struct live_probe *probe, enum mem_kind kind, int64_t start, int64_t end,
                  bool freed, int64_t size)
{
    if (!probe->active)
        return;
    bool made = probe->by_time ? start <= probe->at : start < probe->at;
    if (made && (!freed || end > probe->at)) {
        probe->live_bytes = sat_add(probe->live_bytes, size);
        probe->kind_bytes[kind] = sat_add(probe->kind_bytes[kind], size);
    }
}

static void add_group_path(struct module_group *g, const char *path)
{
    if (!path || !path[0])
        return;
    for (size_t i = 0; i < g->npaths; i++)
        if (strcmp(g->paths[i], path) == 0)
            return;
    if (g->npaths < MAX_GROUP_PATHS)
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
 * The group of an allocation whose allocations.module is `path` (NULL: the
 * caller is in no recorded module). Groups are by module_display_name, the
 * name people know a library by; past MAX_MODULE_GROUPS names the rest
 * share OTHER_MODULES.
 */
static size_t find_group(struct process_report *p, const char *path)
{
    if (p->has_last &&
        (path && p->last_path ? strcmp(path, p->last_path) == 0 : !path && !p->last_path))
        return p->last_group;
    char *name = module_display_name(path);
    const char *key = name[0] ? name : UNKNOWN_MODULE;
    size_t found = SIZE_MAX, other = SIZE_MAX;
    for (size_t i = 0; i < p->ngroups && found == SIZE_MAX; i++) {
        if (strcmp(p->groups[i].name, key) == 0)
            found = i;
        else if (strcmp(p->groups[i].name, OTHER_MODULES) == 0)
            other = i;
    }
    if (found == SIZE_MAX && p->ngroups < MAX_MODULE_GROUPS) {
        const char *label = strcmp(key, UNKNOWN_MODULE) == 0
                                ? "caller outside every recorded module"
                                : module_label(key, p->exe);
        found = new_group(p, key, label);
        add_group_path(&p->groups[found], path);
    } else if (found == SIZE_MAX) {
        /* Its paths would be many and mean nothing together: none kept. */
        found =
            other != SIZE_MAX ? other : new_group(p, OTHER_MODULES, "more module names than shown");
    } else {
        add_group_path(&p->groups[found], path);
    }
    free(name);
    assert(found < p->ngroups && p->ngroups <= MAX_MODULE_GROUPS + 1);
    free(p->last_path);
    p->last_path = path ? xstrdup(path) : NULL;
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

static int walk_allocations(struct process_report *p)
{
    struct trace *t = p->trace;
    /* allocations.module exists from format 3 on (modules.h); effect orders
     * from format 6: older traces pair by seq, and are walked in it. */
    bool ordered = trace_has_effect_order(t);
    char *sql = xasprintf("SELECT seq, t_ns, coalesce(device, -1), kind, size, free_seq, free_t_ns,"
                          " %s, %s, %s FROM allocations ORDER BY %s",
                          p->modules > 0 ? "module" : "NULL", ordered ? "effect_order" : "seq",
                          ordered ? "free_effect_order" : "free_seq",
                          ordered ? "effect_order, seq" : "seq");
    sqlite3_stmt *stmt = trace_query(t, sql, "");
    free(sql);
    if (!stmt)
        return -1;
    struct free_heap heap = {0};
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        struct alloc_span span = {.seq = col_int(stmt, 0, -1),
                                  .t_ns = col_int(stmt, 1, 0),
                                  .freed = !col_is_null(stmt, 5),
                                  .order = col_int(stmt, 8, -1),
                                  .free_order = col_int(stmt, 9, 0)};
        struct device_report *d = find_device(p, col_int(stmt, 2, -1), true);
        const unsigned char *kind_text = sqlite3_column_text(stmt, 3);
        enum mem_kind kind = kind_from_name((const char *)kind_text);
        int64_t size = col_int(stmt, 4, 0);
        if (size < 0)
            size = 0; /* 2^63 bytes or more: not an allocation that happened */
        int64_t free_t_ns = col_int(stmt, 6, 0);
        size_t modmem = SIZE_MAX;
        if (p->modules > 0) {
            const char *module = (const char *)sqlite3_column_text(stmt, 7);
            modmem = find_modmem(d, find_group(p, module));
            if (module)
                p->known_modules = true;
        }

        /* Frees that took effect by now come first: a pointer handed out
         * again ends its previous allocation at the same moment, and must
         * not count twice. */
        while (heap.count > 0 && heap.items[0].order <= span.order) {
            struct pending_free f = heap_pop(&heap);
            apply_free(p, &f);
        }

        bool live = mem_alloc(&d->mem[kind], &span, size);
        if (is_gpu_kind(kind))
            mem_alloc(&d->gpu_mem, &span, size);
        if (modmem != SIZE_MAX) {
            struct module_mem *mm = &d->modmem[modmem];
            mem_alloc(&mm->kinds[kind], &span, size);
            if (is_gpu_kind(kind))
                mem_alloc(&mm->gpu, &span, size);
        }
        if (live && span.freed)
            heap_push(&heap, (struct pending_free){span.free_order, size, (size_t)(d - p->devices),
                                                   modmem, kind});
        if (is_gpu_kind(kind)) {
            probe(&d->own_probe, kind, span.order, span.free_order, span.freed, size);
            probe(&d->gpu_probe, kind, span.t_ns, free_t_ns, span.freed, size);
        }
    }
    sqlite3_finalize(stmt);
    while (heap.count > 0) {
        struct pending_free f = heap_pop(&heap);
        apply_free(p, &f);
    }
    free(heap.items);
    if (rc < 0)
        return -1;

    /* Devices first seen here (allocations of a device no call named) keep
     * the ordinal order. */
    sort_array(p->devices, p->ndevices, sizeof(*p->devices), compare_devices);
    return 0;
}

static int compare_processes(const void *a, const void *b)
{
    const struct process_report *x = a, *y = b;
    if (x->start_wall_ns != y->start_wall_ns)
        return x->start_wall_ns < y->start_wall_ns ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return strcmp(x->trace->file, y->trace->file);
}

static int build_report(struct summary_report *r, struct trace_set *set)
{
    r->nprocesses = set->count;
    r->processes = xcalloc(set->count, sizeof(*r->processes));
    for (size_t i = 0; i < set->count; i++) {
        struct process_report *p = &r->processes[i];
        p->trace = &set->traces[i];
        if (load_pass1(p) != 0) {
            trace_report_error(p->trace);
            return -1;
        }
        r->calls = sat_add(r->calls, p->calls);
        r->failed = sat_add(r->failed, p->failed);
    }
    sort_array(r->processes, r->nprocesses, sizeof(*r->processes), compare_processes);
    /* The walk needs to know every GPU's latest cudaMemGetInfo, which
     * needs pass 1 of every trace. */
    plan_gpus(r);
    for (size_t i = 0; i < r->nprocesses; i++) {
        struct process_report *p = &r->processes[i];
        if (walk_allocations(p) != 0) {
            trace_report_error(p->trace);
            return -1;
        }
    }
    for (size_t gi = 0; gi < r->ngpus; gi++) {
        struct gpu_report *g = &r->gpus[gi];
        for (size_t k = 0; k < g->nprocesses; k++) {
            struct process_report *p = &r->processes[g->processes[k]];
            for (size_t di = 0; di < p->ndevices; di++) {
                const struct device_report *d = &p->devices[di];
                if (!d->uuid || strcmp(d->uuid, g->uuid) != 0 || !d->gpu_probe.active)
                    continue;
                g->traced_live_bytes = sat_add(g->traced_live_bytes, d->gpu_probe.live_bytes);
                for (int kind = 0; kind < KIND_COUNT; kind++)
                    g->traced_kind_bytes[kind] =
                        sat_add(g->traced_kind_bytes[kind], d->gpu_probe.kind_bytes[kind]);
            }
        }
    }
    return 0;
}

static void free_report(struct summary_report *r)
{
    for (size_t i = 0; i < r->nprocesses; i++) {
        struct process_report *p = &r->processes[i];
        for (size_t di = 0; di < p->ndevices; di++) {
            struct device_report *d = &p->devices[di];
            for (size_t a = 0; a < d->napis; a++) {
                free(d->apis[a].api);
                free(d->apis[a].layer);
                free(d->apis[a].role);
                assert(!d->apis[a].inside);
            }
            for (size_t a = 0; a < d->nnested; a++) {
                free(d->nested[a].api);
                free(d->nested[a].layer);
                free(d->nested[a].role);
                free(d->nested[a].inside);
            }
            free(d->nested);
            free(d->modmem);
            for (size_t f = 0; f < d->nfailed; f++) {
                free(d->failed_calls[f].api);
                free(d->failed_calls[f].layer);
            }
            free(d->apis);
            free(d->failed_calls);
            free(d->uuid);
            free(d->name);
            free(d->pci_bus_id);
        }
        for (size_t e = 0; e < p->nenv; e++) {
            free(p->env[e].name);
            free(p->env[e].value);
        }
        free(p->env);
        free(p->devices);
        for (size_t g = 0; g < p->ngroups; g++) {
            free(p->groups[g].name);
            for (size_t k = 0; k < p->groups[g].npaths; k++)
                free(p->groups[g].paths[k]);
        }
        free(p->groups);
        free(p->last_path);
        nccl_info_free(&p->nccl);
        free(p->host);
        free(p->cmdline);
        free(p->exe);
    }
    for (size_t gi = 0; gi < r->ngpus; gi++)
        free(r->gpus[gi].processes);
    free(r->gpus);
    free(r->processes);
}

/* ---- derived numbers shared by both renderings ---- */

static int64_t meminfo_used(int64_t total, int64_t free_bytes)
{
    int64_t used = sat_sub(total, free_bytes);
    return used < 0 ? 0 : used;
}

/* Whether the process shows any sign of NCCL (its text gets an nccl line). */
static bool uses_nccl(const struct process_report *p)
{
    return p->nccl.present && (p->nccl.has_version || p->nccl.ncomms > 0 || p->nccl.calls > 0);
}

static bool api_reports_bytes(const struct api_stats *a)
{
    return a->role && strcmp(a->role, "alloc") == 0;
}

static const char *end_state_text(const char *state)
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

/* Other traced processes that share the device's GPU. */
static size_t gpu_neighbours(const struct summary_report *r, const struct device_report *d)
{
    if (d->gpu == SIZE_MAX)
        return 0;
    return r->gpus[d->gpu].nprocesses - 1;
}

/* ---- text rendering ---- */

static void print_label(const char *label, const char *text)
{
    printf("  %-*s", LABEL_WIDTH, label);
    text_print(stdout, text, TABLE_MAX_WIDTH - 2 - LABEL_WIDTH, 0);
    putchar('\n');
}

static void print_process_header(const struct process_report *p)
{
    char a[UNITS_BUF], b[UNITS_BUF], line[1024];
    const struct trace *t = p->trace;

    printf("Process ");
    if (p->has_pid)
        printf("%" PRId64, p->pid);
    else
        printf("(pid unknown)");
    if (p->has_ppid)
        printf(" (parent %" PRId64 ")", p->ppid);
    if (p->host && p->host[0]) {
        printf(" on ");
        text_print(stdout, p->host, 64, 0);
    }
    putchar('\n');

    /* Empty in a process row rebuilt from a ring's header (cutrace recover). */
    const char *command = p->cmdline && p->cmdline[0] ? p->cmdline
                          : p->exe && p->exe[0]       ? p->exe
                                                      : "unknown";
    print_label("command", command);
    if (p->has_start_wall)
        format_wall_time(a, sizeof(a), p->start_wall_ns, 3);
    else
        snprintf(a, sizeof(a), "unknown");
    if (p->has_events) {
        int64_t origin = time_origin(p);
        char first[UNITS_BUF];
        format_duration(b, sizeof(b), sat_sub(p->last_end_ns, p->first_t_ns));
        format_offset(first, sizeof(first), sat_sub(p->first_t_ns, origin));
        snprintf(line, sizeof(line), "%s; calls span %s (first at %s)", a, b, first);
    } else {
        snprintf(line, sizeof(line), "%s; no calls recorded", a);
    }
    print_label("started", line);
    if (t->has_recovered_records && t->end_state && strcmp(t->end_state, "killed") == 0)
        snprintf(line, sizeof(line),
                 "killed (no clean exit; %" PRId64 " records recovered from its ring)",
                 t->recovered_records);
    else if (t->has_recovered_records && t->recovered_records > 0)
        snprintf(line, sizeof(line), "%s; %" PRId64 " records recovered from its ring",
                 end_state_text(t->end_state), t->recovered_records);
    else
        snprintf(line, sizeof(line), "%s", end_state_text(t->end_state));
    print_label("ended", line);
    if (t->writer_error && t->writer_error[0]) {
        if (t->has_writer_stopped_after)
            snprintf(line, sizeof(line), "trace stopped early: %s, after seq %" PRId64,
                     t->writer_error, t->writer_stopped_after);
        else
            snprintf(line, sizeof(line), "trace stopped early: %s", t->writer_error);
        print_label("stopped", line);
    }
    if (t->has_dropped_records && t->dropped_records > 0) {
        snprintf(line, sizeof(line),
                 "%" PRId64 " call%s not recorded (a signal handler's calls the tracer could "
                 "not take without waiting on its own thread, or calls in flight when its "
                 "writer stopped); seq skips them",
                 t->dropped_records, t->dropped_records == 1 ? "" : "s");
        print_label("dropped", line);
    }
    format_cuda_version(a, sizeof(a), p->runtime_version);
    format_cuda_version(b, sizeof(b), p->driver_version);
    snprintf(line, sizeof(line), "runtime %s, driver %s", a, b);
    print_label("cuda", line);
    if (uses_nccl(p)) {
        const struct nccl_info *n = &p->nccl;
        size_t len = (size_t)snprintf(
            line, sizeof(line), "%s; %zu communicator%s, %" PRId64 " collective and p2p calls",
            nccl_format_version(a, sizeof(a), n->has_version ? n->version : 0), n->ncomms,
            n->ncomms == 1 ? "" : "s", n->calls);
        if (n->failed_calls > 0 && len < sizeof(line))
            len += (size_t)snprintf(line + len, sizeof(line) - len, " (%" PRId64 " failed)",
                                    n->failed_calls);
        if (n->unattributed_calls > 0 && len < sizeof(line))
            snprintf(line + len, sizeof(line) - len,
                     ", %" PRId64 " on communicators whose init is not in the trace",
                     n->unattributed_calls);
        print_label("nccl", line);
    }
    snprintf(line, sizeof(line), "%" PRId64 " (%" PRId64 " failed, %" PRId64 " nested)", p->calls,
             p->failed, p->nested);
    print_label("calls", line);
    if (p->lookups.present && p->lookups.calls > 0) {
        const struct driver_lookups *l = &p->lookups;
        size_t len = (size_t)snprintf(line, sizeof(line),
                                      "%" PRId64 " driver lookups of %" PRId64 " symbols (%" PRId64
                                      " wrapped by cutrace",
                                      l->calls, l->symbols, l->wrapped);
        if (l->failed > 0 && len < sizeof(line))
            len +=
                (size_t)snprintf(line + len, sizeof(line) - len, ", %" PRId64 " failed", l->failed);
        if (len < sizeof(line))
            snprintf(line + len, sizeof(line) - len, ")");
        print_label("lookups", line);
    }
    if (p->wait_ns > 0) {
        format_duration(a, sizeof(a), p->wait_ns);
        snprintf(line, sizeof(line), "%s in %" PRId64 " calls waiting for the tracer's buffer", a,
                 p->waited_calls);
        print_label("waited", line);
    }
    if (p->nenv > 0) {
        size_t len = 0;
        line[0] = '\0';
        for (size_t i = 0; i < p->nenv && len < sizeof(line); i++)
            len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s=%s", i ? "  " : "",
                                    p->env[i].name, p->env[i].value ? p->env[i].value : "");
        print_label("env", line);
    }
    snprintf(line, sizeof(line), "%s (%s, format %" PRId64 ")", t->path,
             t->producer ? t->producer : "producer unknown", t->format_version);
    print_label("trace", line);
}

static void print_device_list(const struct process_report *p)
{
    static const struct table_column columns[] = {
        {"device", TABLE_RIGHT, 0}, {"uuid", TABLE_LEFT, 40},    {"name", TABLE_LEFT, 32},
        {"memory", TABLE_RIGHT, 0}, {"pci bus", TABLE_LEFT, 16},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF];
    for (size_t i = 0; i < p->ndevices; i++) {
        const struct device_report *d = &p->devices[i];
        if (d->ordinal < 0)
            table_cell(tab, "?");
        else
            table_cellf(tab, "%" PRId64, d->ordinal);
        table_cell(tab, d->uuid);
        table_cell(tab, d->name ? d->name : (d->ordinal < 0 ? "(no current device)" : NULL));
        table_cell(tab, d->total_bytes >= 0
                            ? format_bytes(buf, sizeof(buf), (uint64_t)d->total_bytes)
                            : NULL);
        table_cell(tab, d->pci_bus_id);
    }
    putchar('\n');
    table_print(tab, stdout, 2);
    table_free(tab);
}

static void print_communicators(const struct process_report *p)
{
    static const struct table_column columns[] = {
        {"comm", TABLE_RIGHT, 0},  {"unique id hash", TABLE_LEFT, 16},
        {"rank", TABLE_RIGHT, 0},  {"device", TABLE_RIGHT, 0},
        {"init", TABLE_LEFT, 16},  {"lifetime", TABLE_LEFT, 24},
        {"calls", TABLE_RIGHT, 0}, {"split of", TABLE_LEFT, 24},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF], result[64];
    for (size_t i = 0; i < p->nccl.ncomms; i++) {
        const struct nccl_comm *c = &p->nccl.comms[i];
        table_cellf(tab, "%" PRId64, c->comm_id);
        table_cell(tab, c->hash);
        if (c->has_rank && c->has_nranks)
            table_cellf(tab, "%" PRId64 "/%" PRId64, c->rank, c->nranks);
        else
            table_cell(tab, "?");
        if (c->device >= 0)
            table_cellf(tab, "%" PRId64, c->device);
        else
            table_cell(tab, "?");
        if (c->init_result == 0) {
            table_cell(tab, "ok");
            if (c->destroyed)
                table_cellf(
                    tab, "%s, %s",
                    format_duration(buf, sizeof(buf), sat_sub(c->t_destroy_ns, c->t_init_ns)),
                    nccl_end_text(c));
            else
                table_cell(tab, nccl_end_text(c));
        } else {
            table_cell(tab, result_describe(result, sizeof(result), LAYER_NCCL, c->init_result));
            table_cell(tab, "-");
        }
        table_cellf(tab, "%" PRId64, c->calls);
        if (!c->has_parent)
            table_cell(tab, "");
        else if (c->has_color)
            table_cellf(tab, "comm %" PRId64 ", color %" PRId64, c->parent_comm_id, c->color);
        else
            table_cellf(tab, "comm %" PRId64, c->parent_comm_id);
    }
    putchar('\n');
    table_print(tab, stdout, 2);
    table_free(tab);
}

static int compare_top_level(const void *a, const void *b)
{
    const struct api_stats *x = *(const struct api_stats *const *)a,
                           *y = *(const struct api_stats *const *)b;
    if (x->top_calls != y->top_calls)
        return x->top_calls > y->top_calls ? -1 : 1;
    return compare_api_stats(x, y);
}

/* The calls the program made itself (or the libraries it calls: what is
 * not inside another traced call); driver lookups are in their own line. */
static void print_api_table(const struct device_report *d)
{
    static const struct table_column columns[] = {
        {"api", TABLE_LEFT, 40},    {"layer", TABLE_LEFT, 8},  {"calls", TABLE_RIGHT, 0},
        {"failed", TABLE_RIGHT, 0}, {"bytes", TABLE_RIGHT, 0}, {"host time", TABLE_RIGHT, 0},
    };
    const struct api_stats **rows = xcalloc(d->napis + 1, sizeof(*rows));
    size_t nrows = 0;
    for (size_t i = 0; i < d->napis; i++)
        if (d->apis[i].top_calls > 0 && !is_lookup_role(d->apis[i].role))
            rows[nrows++] = &d->apis[i];
    sort_array(rows, nrows, sizeof(*rows), compare_top_level);
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF];
    for (size_t i = 0; i < nrows; i++) {
        const struct api_stats *a = rows[i];
        table_cell(tab, a->api ? a->api : "?");
        table_cell(tab, a->layer ? a->layer : "?");
        table_cellf(tab, "%" PRId64, a->top_calls);
        table_cellf(tab, "%" PRId64, a->top_failed);
        table_cell(tab, api_reports_bytes(a)
                            ? format_bytes(buf, sizeof(buf), (uint64_t)a->top_ok_size_bytes)
                            : "");
        table_cell(tab, format_duration(buf, sizeof(buf), a->top_dur_ns));
    }
    if (table_rows(tab) > 0)
        table_print(tab, stdout, 4);
    else
        printf("    no top-level calls (only nested calls or driver lookups)\n");
    table_free(tab);
    free(rows);
}

/* Calls made inside other traced calls: the runtime's own driver calls,
 * NCCL's cuMem* calls in ncclCommInitRank, and so on. Apart, so that the
 * table above reads as what the program asked for. */
static void print_nested_table(const struct device_report *d)
{
    static const struct table_column columns[] = {
        {"nested call", TABLE_LEFT, 40}, {"layer", TABLE_LEFT, 8},   {"inside", TABLE_LEFT, 32},
        {"calls", TABLE_RIGHT, 0},       {"failed", TABLE_RIGHT, 0}, {"bytes", TABLE_RIGHT, 0},
        {"host time", TABLE_RIGHT, 0},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF];
    for (size_t i = 0; i < d->nnested; i++) {
        const struct api_stats *a = &d->nested[i];
        if (is_lookup_role(a->role))
            continue;
        table_cell(tab, a->api ? a->api : "?");
        table_cell(tab, a->layer ? a->layer : "?");
        table_cell(tab, a->inside ? a->inside : "? (not in the trace)");
        table_cellf(tab, "%" PRId64, a->calls);
        table_cellf(tab, "%" PRId64, a->failed);
        table_cell(tab, api_reports_bytes(a)
                            ? format_bytes(buf, sizeof(buf), (uint64_t)a->ok_size_bytes)
                            : "");
        table_cell(tab, format_duration(buf, sizeof(buf), a->dur_ns));
    }
    if (table_rows(tab) > 0) {
        putchar('\n');
        table_print(tab, stdout, 4);
    }
    table_free(tab);
}

static void memory_row(struct table *tab, const char *label, const struct process_report *p,
                       const struct mem_stats *m)
{
    char buf[UNITS_BUF];
    table_cell(tab, label);
    table_cellf(tab, "%" PRId64, m->allocs);
    table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)m->allocated_bytes));
    table_cellf(tab, "%" PRId64, m->frees);
    table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)m->freed_bytes));
    table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)m->live_bytes));
    table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)m->peak_bytes));
    format_offset(buf, sizeof(buf), sat_sub(m->peak_t_ns, time_origin(p)));
    table_cellf(tab, "seq %" PRId64 " (%s)", m->peak_seq, buf);
}

/* Kinds in enum order: GPU memory first, then (when more than one GPU kind
 * was used) their total, whose peak is the peak of the sum, then the kinds
 * that are not GPU memory. */
static void print_memory_table(const struct process_report *p, const struct device_report *d)
{
    static const struct table_column columns[] = {
        {"memory", TABLE_LEFT, 0},     {"allocs", TABLE_RIGHT, 0}, {"allocated", TABLE_RIGHT, 0},
        {"frees", TABLE_RIGHT, 0},     {"freed", TABLE_RIGHT, 0},  {"live at end", TABLE_RIGHT, 0},
        {"peak live", TABLE_RIGHT, 0}, {"peak at", TABLE_LEFT, 0},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    int gpu_kinds = 0;
    for (int k = 0; k < KIND_COUNT; k++)
        if (is_gpu_kind((enum mem_kind)k) && d->mem[k].allocs > 0)
            gpu_kinds++;
    for (int k = 0; k < KIND_COUNT; k++) {
        if (k == KIND_HOST && gpu_kinds > 1)
            memory_row(tab, "= GPU memory", p, &d->gpu_mem);
        if (d->mem[k].allocs > 0)
            memory_row(tab, kind_labels[k], p, &d->mem[k]);
    }
    if (table_rows(tab) > 0) {
        putchar('\n');
        table_print(tab, stdout, 4);
    }
    table_free(tab);
}

/* Text order of a device's modules: most GPU memory live at the end first,
 * then highest peak, then by name. */
struct module_row {
    const struct module_mem *mm;
    const struct module_group *group;
};

static int compare_module_rows(const void *a, const void *b)
{
    const struct module_row *x = a, *y = b;
    if (x->mm->gpu.live_bytes != y->mm->gpu.live_bytes)
        return x->mm->gpu.live_bytes > y->mm->gpu.live_bytes ? -1 : 1;
    if (x->mm->gpu.peak_bytes != y->mm->gpu.peak_bytes)
        return x->mm->gpu.peak_bytes > y->mm->gpu.peak_bytes ? -1 : 1;
    return strcmp(x->group->name, y->group->name);
}

/* GPU memory by the module that issued it: "libnccl.so.2  NCCL's own
 * buffers  212.00 MiB", which needs no stacks. */
static void print_module_table(const struct process_report *p, const struct device_report *d)
{
    static const struct table_column columns[] = {
        {"issued by", TABLE_LEFT, 32},   {"what", TABLE_LEFT, 36},
        {"allocs", TABLE_RIGHT, 0},      {"allocated", TABLE_RIGHT, 0},
        {"live at end", TABLE_RIGHT, 0}, {"peak live", TABLE_RIGHT, 0},
    };
    struct module_row *rows = xcalloc(d->nmodmem + 1, sizeof(*rows));
    size_t nrows = 0;
    for (size_t i = 0; i < d->nmodmem; i++) {
        if (d->modmem[i].gpu.allocs == 0)
            continue;
        assert(d->modmem[i].group < p->ngroups);
        rows[nrows++] = (struct module_row){&d->modmem[i], &p->groups[d->modmem[i].group]};
    }
    sort_array(rows, nrows, sizeof(*rows), compare_module_rows);
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF];
    size_t shown = nrows < TEXT_MODULES ? nrows : TEXT_MODULES;
    for (size_t i = 0; i < shown; i++) {
        const struct mem_stats *m = &rows[i].mm->gpu;
        table_cell(tab, rows[i].group->name);
        table_cell(tab, rows[i].group->label ? rows[i].group->label : "");
        table_cellf(tab, "%" PRId64, m->allocs);
        table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)m->allocated_bytes));
        table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)m->live_bytes));
        table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)m->peak_bytes));
    }
    if (table_rows(tab) > 0) {
        printf("\n    GPU memory (device, managed, vmm) by the module that allocated it\n");
        table_print(tab, stdout, 4);
    }
    if (nrows > shown)
        printf("    ... and %zu more (all of them with --json)\n", nrows - shown);
    table_free(tab);
    free(rows);
}

static void print_meminfo(const struct summary_report *r, const struct process_report *p,
                          const struct device_report *d)
{
    if (!d->has_meminfo)
        return;
    char at[UNITS_BUF], free_text[UNITS_BUF], total[UNITS_BUF], used[UNITS_BUF], live[UNITS_BUF],
        unexplained[UNITS_BUF];
    int64_t used_bytes = meminfo_used(d->meminfo_total, d->meminfo_free);
    format_offset(at, sizeof(at), sat_sub(d->meminfo_t_ns, time_origin(p)));
    format_bytes(free_text, sizeof(free_text), (uint64_t)d->meminfo_free);
    format_bytes(total, sizeof(total), (uint64_t)d->meminfo_total);
    format_bytes(used, sizeof(used), (uint64_t)used_bytes);
    format_bytes(live, sizeof(live), (uint64_t)d->own_probe.live_bytes);
    format_bytes_signed(unexplained, sizeof(unexplained),
                        sat_sub(used_bytes, d->own_probe.live_bytes));
    printf("\n    last cudaMemGetInfo: seq %" PRId64 " at %s: free %s of %s, used %s\n",
           d->meminfo_seq, at, free_text, total, used);
    printf("    traced live device+managed+vmm then: %s; unexplained: %s\n", live, unexplained);
    size_t others = gpu_neighbours(r, d);
    if (others > 0)
        printf("    (used includes %zu other traced process%s on this GPU: see the GPU table)\n",
               others, others == 1 ? "" : "es");
    else
        printf("    (unexplained: CUDA context, untraced allocators, other processes)\n");
}

static void print_failed_calls(const struct process_report *p, const struct device_report *d)
{
    if (d->nfailed == 0)
        return;
    static const struct table_column columns[] = {
        {"seq", TABLE_RIGHT, 0},    {"at", TABLE_RIGHT, 0},   {"api", TABLE_LEFT, 32},
        {"result", TABLE_LEFT, 48}, {"size", TABLE_RIGHT, 0},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF], name[64];
    size_t shown = d->nfailed < TEXT_FAILED_CALLS ? d->nfailed : TEXT_FAILED_CALLS;
    for (size_t i = 0; i < shown; i++) {
        const struct failed_call *f = &d->failed_calls[i];
        table_cellf(tab, "%" PRId64, f->seq);
        table_cell(tab, format_offset(buf, sizeof(buf), sat_sub(f->t_ns, time_origin(p))));
        table_cell(tab, f->api ? f->api : "?");
        result_describe(name, sizeof(name), result_layer_from_name(f->layer), f->result);
        table_cellf(tab, "%" PRId64 " %s", f->result, name);
        table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)f->size));
    }
    printf("\n    failed calls: %zu\n", d->nfailed);
    table_print(tab, stdout, 4);
    if (d->nfailed > shown)
        printf("    ... and %zu more (all of them with --json)\n", d->nfailed - shown);
    table_free(tab);
}

static void print_device(const struct summary_report *r, const struct process_report *p,
                         const struct device_report *d)
{
    putchar('\n');
    if (d->ordinal < 0)
        printf("  Calls with no current device\n");
    else {
        printf("  Device %" PRId64, d->ordinal);
        if (d->name || d->uuid) {
            printf(" (");
            text_print(stdout, d->name ? d->name : "?", 48, 0);
            if (d->uuid) {
                printf(", ");
                text_print(stdout, d->uuid, 48, 0);
            }
            printf(")");
        }
        putchar('\n');
    }
    if (d->napis > 0) {
        print_api_table(d);
        print_nested_table(d);
    } else {
        printf("    no calls\n");
    }
    print_memory_table(p, d);
    /* Without a single known module (the tracer could not map callers) the
     * table would be one "(unknown)" row: JSON still has it. */
    if (p->modules > 0 && p->known_modules)
        print_module_table(p, d);
    print_meminfo(r, p, d);
    print_failed_calls(p, d);
}

static void print_gpu_table(const struct summary_report *r)
{
    static const struct table_column columns[] = {
        {"gpu uuid", TABLE_LEFT, 40},    {"name", TABLE_LEFT, 24},
        {"pids", TABLE_LEFT, 20},        {"used", TABLE_RIGHT, 0},
        {"traced live", TABLE_RIGHT, 0}, {"unexplained", TABLE_RIGHT, 0},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF];
    for (size_t gi = 0; gi < r->ngpus; gi++) {
        const struct gpu_report *g = &r->gpus[gi];
        table_cell(tab, g->uuid);
        table_cell(tab, g->name);
        char pids[256];
        size_t len = 0;
        pids[0] = '\0';
        for (size_t k = 0; k < g->nprocesses && len < sizeof(pids); k++) {
            const struct process_report *p = &r->processes[g->processes[k]];
            if (p->has_pid)
                len += (size_t)snprintf(pids + len, sizeof(pids) - len, "%s%" PRId64, k ? "," : "",
                                        p->pid);
            else
                len += (size_t)snprintf(pids + len, sizeof(pids) - len, "%s?", k ? "," : "");
        }
        table_cell(tab, pids);
        if (g->has_meminfo) {
            int64_t used = meminfo_used(g->meminfo_total, g->meminfo_free);
            table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)used));
            table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)g->traced_live_bytes));
            table_cell(tab,
                       format_bytes_signed(buf, sizeof(buf), sat_sub(used, g->traced_live_bytes)));
        } else {
            table_cell(tab, "-");
            table_cell(tab, "-");
            table_cell(tab, "-");
        }
    }
    table_print(tab, stdout, 2);
    table_free(tab);
}

static void print_text(const struct summary_report *r)
{
    printf("cutrace summary of ");
    text_print(stdout, r->path, 80, 0);
    printf(": %zu process%s\n", r->nprocesses, r->nprocesses == 1 ? "" : "es");
    for (size_t i = 0; i < r->nprocesses; i++) {
        const struct process_report *p = &r->processes[i];
        putchar('\n');
        print_process_header(p);
        if (p->ndevices > 0)
            print_device_list(p);
        if (p->nccl.ncomms > 0)
            print_communicators(p);
        for (size_t di = 0; di < p->ndevices; di++)
            print_device(r, p, &p->devices[di]);
    }
    printf("\nAll traces: %zu process%s, %zu GPU%s by uuid, %" PRId64 " calls, %" PRId64
           " failed\n",
           r->nprocesses, r->nprocesses == 1 ? "" : "es", r->ngpus, r->ngpus == 1 ? "" : "s",
           r->calls, r->failed);
    if (r->devices_without_uuid > 0)
        printf("  (%zu device%s without a recorded uuid not counted as GPUs)\n",
               r->devices_without_uuid, r->devices_without_uuid == 1 ? "" : "s");
    if (r->ngpus > 0) {
        putchar('\n');
        print_gpu_table(r);
        printf("  used: total - free at the GPU's latest cudaMemGetInfo among these traces;\n"
               "  traced live: device, managed and vmm allocations of all these processes live "
               "then\n");
    }
}

/* ---- JSON rendering ---- */

static void json_rel_time(struct json_writer *w, const char *key, const struct process_report *p,
                          int64_t t_ns)
{
    json_kv_int(w, key, sat_sub(t_ns, time_origin(p)));
}

static void json_pointer(struct json_writer *w, const char *key, int64_t ptr)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)(uint64_t)ptr);
    json_kv_string(w, key, buf);
}

static void json_opt_int(struct json_writer *w, const char *key, bool present, int64_t value)
{
    if (present)
        json_kv_int(w, key, value);
    else
        json_kv_null(w, key);
}

static void json_mem_stats(struct json_writer *w, const struct process_report *p,
                           const struct mem_stats *m)
{
    json_object_begin(w);
    json_kv_int(w, "allocs", m->allocs);
    json_kv_int(w, "allocated_bytes", m->allocated_bytes);
    json_kv_int(w, "frees", m->frees);
    json_kv_int(w, "freed_bytes", m->freed_bytes);
    json_kv_int(w, "live_allocs", m->live_allocs);
    json_kv_int(w, "live_bytes", m->live_bytes);
    json_kv_int(w, "peak_bytes", m->peak_bytes);
    json_opt_int(w, "peak_seq", m->peak_seq >= 0, m->peak_seq);
    if (m->peak_seq >= 0)
        json_rel_time(w, "peak_at_ns", p, m->peak_t_ns);
    else
        json_kv_null(w, "peak_at_ns");
    json_object_end(w);
}

/* {"device": n, "managed": n, "vmm": n}: the GPU kinds of a live sum. */
static void json_gpu_kinds(struct json_writer *w, const char *key, const int64_t *kind_bytes)
{
    json_key(w, key);
    json_object_begin(w);
    for (int k = 0; k < KIND_COUNT; k++)
        if (is_gpu_kind((enum mem_kind)k))
            json_kv_int(w, kind_keys[k], kind_bytes[k]);
    json_object_end(w);
}

static int compare_module_names(const void *a, const void *b)
{
    const struct module_row *x = a, *y = b;
    return strcmp(x->group->name, y->group->name);
}

/* "modules": {"libnccl.so.2": {...}, ...} by name (unique per process),
 * null for a trace that does not record modules. */
static void json_modules(struct json_writer *w, const struct process_report *p,
                         const struct device_report *d)
{
    json_key(w, "modules");
    if (p->modules <= 0) {
        json_null(w);
        return;
    }
    struct module_row *rows = xcalloc(d->nmodmem + 1, sizeof(*rows));
    for (size_t i = 0; i < d->nmodmem; i++) {
        assert(d->modmem[i].group < p->ngroups);
        rows[i] = (struct module_row){&d->modmem[i], &p->groups[d->modmem[i].group]};
    }
    sort_array(rows, d->nmodmem, sizeof(*rows), compare_module_names);
    json_object_begin(w);
    for (size_t i = 0; i < d->nmodmem; i++) {
        const struct module_group *g = rows[i].group;
        json_key(w, g->name);
        json_object_begin(w);
        json_kv_string(w, "label", g->label);
        json_key(w, "paths");
        json_array_begin(w);
        for (size_t k = 0; k < g->npaths; k++)
            json_string(w, g->paths[k]);
        json_array_end(w);
        json_key(w, "gpu_memory");
        json_mem_stats(w, p, &rows[i].mm->gpu);
        json_key(w, "memory");
        json_object_begin(w);
        for (int k = 0; k < KIND_COUNT; k++) {
            if (rows[i].mm->kinds[k].allocs == 0)
                continue;
            json_key(w, kind_keys[k]);
            json_mem_stats(w, p, &rows[i].mm->kinds[k]);
        }
        json_object_end(w);
        json_object_end(w);
    }
    json_object_end(w);
    free(rows);
}

static void json_api_stats(struct json_writer *w, const struct api_stats *a, bool nested)
{
    json_object_begin(w);
    json_kv_string(w, "api", a->api);
    json_kv_string(w, "layer", a->layer);
    json_kv_string(w, "role", a->role);
    if (nested)
        json_kv_string(w, "inside", a->inside);
    json_kv_int(w, "calls", a->calls);
    json_kv_int(w, "failed", a->failed);
    if (!nested)
        json_kv_int(w, "nested", a->nested);
    json_opt_int(w, "bytes", api_reports_bytes(a), a->ok_size_bytes);
    json_kv_int(w, "dur_ns", a->dur_ns);
    json_object_end(w);
}

static void json_device(struct json_writer *w, const struct process_report *p,
                        const struct device_report *d)
{
    json_object_begin(w);
    json_kv_int(w, "device", d->ordinal);
    json_kv_string(w, "uuid", d->uuid);
    json_kv_string(w, "name", d->name);
    json_kv_string(w, "pci_bus_id", d->pci_bus_id);
    json_opt_int(w, "total_bytes", d->total_bytes >= 0, d->total_bytes);
    json_kv_int(w, "calls", d->calls);
    json_kv_int(w, "failed_calls", d->failed);

    json_key(w, "apis");
    json_array_begin(w);
    for (size_t i = 0; i < d->napis; i++)
        json_api_stats(w, &d->apis[i], false);
    json_array_end(w);
    json_key(w, "nested_apis");
    json_array_begin(w);
    for (size_t i = 0; i < d->nnested; i++)
        json_api_stats(w, &d->nested[i], true);
    json_array_end(w);

    json_key(w, "memory");
    json_object_begin(w);
    for (int k = 0; k < KIND_COUNT; k++) {
        json_key(w, kind_keys[k]);
        json_mem_stats(w, p, &d->mem[k]);
    }
    json_object_end(w);
    json_key(w, "gpu_memory");
    json_mem_stats(w, p, &d->gpu_mem);
    json_modules(w, p, d);

    json_key(w, "meminfo");
    if (d->has_meminfo) {
        int64_t used = meminfo_used(d->meminfo_total, d->meminfo_free);
        json_object_begin(w);
        json_kv_int(w, "seq", d->meminfo_seq);
        json_rel_time(w, "at_ns", p, d->meminfo_t_ns);
        json_kv_int(w, "free_bytes", d->meminfo_free);
        json_kv_int(w, "total_bytes", d->meminfo_total);
        json_kv_int(w, "used_bytes", used);
        json_kv_int(w, "traced_live_bytes", d->own_probe.live_bytes);
        json_kv_int(w, "unexplained_bytes", sat_sub(used, d->own_probe.live_bytes));
        json_gpu_kinds(w, "traced_live_by_kind", d->own_probe.kind_bytes);
        json_object_end(w);
    } else {
        json_null(w);
    }

    json_key(w, "failed_calls");
    json_array_begin(w);
    char name[64];
    for (size_t i = 0; i < d->nfailed; i++) {
        const struct failed_call *f = &d->failed_calls[i];
        json_object_begin(w);
        json_kv_int(w, "seq", f->seq);
        json_rel_time(w, "at_ns", p, f->t_ns);
        json_kv_string(w, "api", f->api);
        json_kv_string(w, "layer", f->layer);
        json_kv_int(w, "result", f->result);
        json_kv_string(
            w, "result_name",
            result_describe(name, sizeof(name), result_layer_from_name(f->layer), f->result));
        json_kv_uint(w, "size", (uint64_t)f->size);
        json_pointer(w, "ptr", f->ptr);
        json_kv_int(w, "device", f->device);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

/* "communicators" and "nccl_calls": null for a trace from before NCCL was
 * recorded, which cannot tell. */
static void json_communicators(struct json_writer *w, const struct process_report *p)
{
    const struct nccl_info *n = &p->nccl;
    json_key(w, "communicators");
    if (!n->present) {
        json_null(w);
        json_kv_null(w, "nccl_calls");
        return;
    }
    char result[64];
    json_array_begin(w);
    for (size_t i = 0; i < n->ncomms; i++) {
        const struct nccl_comm *c = &n->comms[i];
        json_object_begin(w);
        json_kv_int(w, "comm_id", c->comm_id);
        json_kv_string(w, "unique_id_hash", c->hash);
        json_opt_int(w, "rank", c->has_rank, c->rank);
        json_opt_int(w, "nranks", c->has_nranks, c->nranks);
        json_kv_int(w, "device", c->device);
        json_kv_string(w, "api", c->api);
        json_pointer(w, "comm", c->handle);
        json_kv_int(w, "init_result", c->init_result);
        json_kv_string(w, "init_result_name",
                       result_describe(result, sizeof(result), LAYER_NCCL, c->init_result));
        json_rel_time(w, "init_at_ns", p, c->t_init_ns);
        json_kv_string(w, "end", c->aborted ? "abort" : c->destroyed ? "destroy" : NULL);
        if (c->destroyed) {
            json_rel_time(w, "end_at_ns", p, c->t_destroy_ns);
            json_kv_int(w, "lifetime_ns", sat_sub(c->t_destroy_ns, c->t_init_ns));
        } else {
            json_kv_null(w, "end_at_ns");
            json_kv_null(w, "lifetime_ns");
        }
        if (c->finalized)
            json_rel_time(w, "finalize_at_ns", p, c->t_finalize_ns);
        else
            json_kv_null(w, "finalize_at_ns");
        json_opt_int(w, "parent_comm_id", c->has_parent, c->parent_comm_id);
        json_opt_int(w, "color", c->has_color, c->color);
        json_opt_int(w, "key", c->has_key, c->key);
        json_kv_int(w, "calls", c->calls);
        json_kv_int(w, "failed_calls", c->failed_calls);
        json_object_end(w);
    }
    json_array_end(w);
    json_key(w, "nccl_calls");
    json_object_begin(w);
    json_kv_int(w, "calls", n->calls);
    json_kv_int(w, "failed", n->failed_calls);
    json_kv_int(w, "unattributed", n->unattributed_calls);
    json_object_end(w);
}

static void json_process(struct json_writer *w, const struct process_report *p)
{
    const struct trace *t = p->trace;
    char buf[UNITS_BUF];
    json_object_begin(w);
    json_kv_string(w, "file", t->file);
    json_kv_int(w, "format_version", t->format_version);
    json_kv_string(w, "producer", t->producer);
    json_kv_string(w, "end_state", t->end_state);
    json_opt_int(w, "recovered_records", t->has_recovered_records, t->recovered_records);
    json_kv_string(w, "writer_error", t->writer_error);
    json_opt_int(w, "writer_stopped_after", t->writer_error && t->has_writer_stopped_after,
                 t->writer_stopped_after);
    json_opt_int(w, "pid", p->has_pid, p->pid);
    json_opt_int(w, "ppid", p->has_ppid, p->ppid);
    json_kv_string(w, "host", p->host);
    json_kv_string(w, "cmdline", p->cmdline);
    json_kv_string(w, "exe", p->exe);
    json_opt_int(w, "cuda_runtime_version", p->runtime_version > 0, p->runtime_version);
    json_opt_int(w, "cuda_driver_version", p->driver_version > 0, p->driver_version);
    json_opt_int(w, "nccl_version", p->nccl.has_version, p->nccl.version);
    json_opt_int(w, "start_wall_ns", p->has_start_wall, p->start_wall_ns);
    json_kv_string(w, "start_time",
                   p->has_start_wall ? format_wall_time(buf, sizeof(buf), p->start_wall_ns, 9)
                                     : NULL);
    json_opt_int(w, "start_mono_ns", p->has_start_mono, p->start_mono_ns);
    if (p->has_events) {
        json_rel_time(w, "first_call_at_ns", p, p->first_t_ns);
        json_rel_time(w, "last_call_end_at_ns", p, p->last_end_ns);
        json_kv_int(w, "span_ns", sat_sub(p->last_end_ns, p->first_t_ns));
    } else {
        json_kv_null(w, "first_call_at_ns");
        json_kv_null(w, "last_call_end_at_ns");
        json_kv_null(w, "span_ns");
    }
    json_kv_int(w, "calls", p->calls);
    json_kv_int(w, "failed_calls", p->failed);
    json_kv_int(w, "nested_calls", p->nested);
    json_kv_int(w, "wait_ns", p->wait_ns);
    json_kv_int(w, "waited_calls", p->waited_calls);
    json_opt_int(w, "dropped_records", t->has_dropped_records, t->dropped_records);
    json_key(w, "driver_lookups");
    if (p->lookups.present) {
        json_object_begin(w);
        json_kv_int(w, "calls", p->lookups.calls);
        json_kv_int(w, "wrapped", p->lookups.wrapped);
        json_kv_int(w, "failed", p->lookups.failed);
        json_kv_int(w, "symbols", p->lookups.symbols);
        json_object_end(w);
    } else {
        json_null(w);
    }
    json_key(w, "env");
    json_object_begin(w);
    for (size_t i = 0; i < p->nenv; i++)
        json_kv_string(w, p->env[i].name, p->env[i].value);
    json_object_end(w);
    json_key(w, "devices");
    json_array_begin(w);
    for (size_t di = 0; di < p->ndevices; di++)
        json_device(w, p, &p->devices[di]);
    json_array_end(w);
    json_communicators(w, p);
    json_object_end(w);
}

static void print_json(const struct summary_report *r)
{
    struct json_writer w;
    json_init(&w, stdout);
    json_object_begin(&w);
    json_kv_string(&w, "cutrace_version", CUTRACE_VERSION);
    json_kv_string(&w, "report", "summary");
    json_kv_string(&w, "path", r->path);
    json_key(&w, "processes");
    json_array_begin(&w);
    for (size_t i = 0; i < r->nprocesses; i++)
        json_process(&w, &r->processes[i]);
    json_array_end(&w);

    json_key(&w, "gpus");
    json_array_begin(&w);
    for (size_t gi = 0; gi < r->ngpus; gi++) {
        const struct gpu_report *g = &r->gpus[gi];
        json_object_begin(&w);
        json_kv_string(&w, "uuid", g->uuid);
        json_kv_string(&w, "name", g->name);
        json_key(&w, "pids");
        json_array_begin(&w);
        for (size_t k = 0; k < g->nprocesses; k++) {
            const struct process_report *p = &r->processes[g->processes[k]];
            if (p->has_pid)
                json_int(&w, p->pid);
            else
                json_null(&w);
        }
        json_array_end(&w);
        json_key(&w, "meminfo");
        if (g->has_meminfo) {
            const struct process_report *p = &r->processes[g->meminfo_process];
            int64_t used = meminfo_used(g->meminfo_total, g->meminfo_free);
            json_object_begin(&w);
            json_opt_int(&w, "pid", p->has_pid, p->pid);
            json_kv_string(&w, "file", p->trace->file);
            json_kv_int(&w, "seq", g->meminfo_seq);
            json_kv_int(&w, "wall_ns", g->meminfo_wall_ns);
            json_kv_int(&w, "free_bytes", g->meminfo_free);
            json_kv_int(&w, "total_bytes", g->meminfo_total);
            json_kv_int(&w, "used_bytes", used);
            json_kv_int(&w, "traced_live_bytes", g->traced_live_bytes);
            json_kv_int(&w, "unexplained_bytes", sat_sub(used, g->traced_live_bytes));
            json_gpu_kinds(&w, "traced_live_by_kind", g->traced_kind_bytes);
            json_object_end(&w);
        } else {
            json_null(&w);
        }
        json_object_end(&w);
    }
    json_array_end(&w);

    json_key(&w, "totals");
    json_object_begin(&w);
    json_kv_uint(&w, "processes", r->nprocesses);
    json_kv_uint(&w, "gpus", r->ngpus);
    json_kv_uint(&w, "devices_without_uuid", r->devices_without_uuid);
    json_kv_int(&w, "calls", r->calls);
    json_kv_int(&w, "failed_calls", r->failed);
    json_object_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

/* ---- the command ---- */

int cmd_summary(int argc, char **argv)
{
    struct cli_report_args args;
    int parsed = cli_report_args(argc, argv, usage, "trace directory", &args);
    if (parsed != CLI_PARSED)
        return parsed;
    bool json = args.json;

    struct trace_set set;
    if (trace_set_open(&set, args.path) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct summary_report report = {.path = args.path};
    int status = CLI_EXIT_OK;
    if (build_report(&report, &set) != 0)
        status = CLI_EXIT_BAD_INPUT;
    else if (json)
        print_json(&report);
    else
        print_text(&report);
    free_report(&report);
    trace_set_close(&set);
    if (status == CLI_EXIT_OK && (fflush(stdout) != 0 || ferror(stdout))) {
        cli_error(NULL, "cannot write the report to standard output");
        status = CLI_EXIT_BAD_INPUT;
    }
    return status;
}
