/*
 * summary.h - what `cutrace summary` reports, computed from the run model
 * (model/gpumodel.h, loaded once with GM_LOAD_NCCL) and nothing else: per
 * process and device ordinal, calls by API (nested calls apart, by the API
 * they were made in), bytes allocated and freed, peak and live by kind and
 * by issuing module, the last cudaMemGetInfo with the memory the trace does
 * not explain, failed calls, communicators, end state and env; then per
 * GPU uuid, the latest cudaMemGetInfo among the processes on it and the
 * memory they all had live then. cmd/summary.c prints it as text,
 * summary_print_json (summary_json.c) as JSON, summary_print_csv
 * (summary_csv.c) as CSV. The filters (model/filter.h)
 * choose which processes, devices and GPUs are listed (`shown`); every
 * number stays computed over all the traces (a GPU's traced live bytes are
 * those of every process on it).
 *
 * GPU memory is what cudaMemGetInfo sees used: device, managed and vmm
 * (cuMemCreate on a device) allocations. Pinned host memory, cuMemCreate on
 * the host, a peer's memory mapped here (ipc) and reserved address space are
 * shown apart and never counted as GPU memory.
 *
 * Traces of formats 1 and 2 record no modules and no driver lookups: their
 * reports leave those sections out (JSON: null), see modules.h. Every
 * string of the report is borrowed from the model, which must outlive it.
 */
#ifndef CUTRACE_ANALYZER_ANALYSIS_SUMMARY_H
#define CUTRACE_ANALYZER_ANALYSIS_SUMMARY_H

#include "model/gpumodel.h"
#include "model/nccl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Module names kept apart per process; the rest are summed under
 * SUMMARY_OTHER_MODULES, so that a hostile trace cannot make the report
 * unbounded. */
#define SUMMARY_MAX_MODULE_GROUPS 256
#define SUMMARY_MAX_GROUP_PATHS   4 /* distinct paths kept per module name */
#define SUMMARY_UNKNOWN_MODULE    "(unknown)"
#define SUMMARY_OTHER_MODULES     "(other modules)"

/* allocations.kind values (enum gm_kind); GPU memory kinds first. */
#define KIND_COUNT GM_KINDS
enum mem_kind {
    KIND_DEVICE = GM_KIND_DEVICE,
    KIND_MANAGED = GM_KIND_MANAGED,
    KIND_VMM = GM_KIND_VMM,
    KIND_HOST = GM_KIND_HOST,
    KIND_VMM_HOST = GM_KIND_VMM_HOST,
    KIND_IPC = GM_KIND_IPC,
    KIND_RESERVE = GM_KIND_RESERVE,
    KIND_OTHER = GM_KIND_OTHER,
};

/* "device", "managed", ... (the allocations view's kinds). */
const char *summary_kind_key(enum mem_kind kind);
/* "vmm (cuMemCreate)", "host (pinned)", ... */
const char *summary_kind_label(enum mem_kind kind);

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
    const char *api, *layer, *role, *inside;
    int64_t calls, failed, nested, dur_ns;
    int64_t ok_size_bytes; /* sum of `size` over successful calls */
    int64_t top_calls, top_failed, top_dur_ns, top_ok_size_bytes;
};

struct failed_call {
    int64_t seq, t_ns, device, result, size, ptr;
    const char *api, *layer;
};

/* The live GPU memory (device + managed + vmm) of one process at a moment:
 * the model's at its own last cudaMemGetInfo, or at monotonic time `at`
 * (another process's, for the per-GPU sum). */
struct live_probe {
    bool active;
    int64_t at; /* t_ns */
    int64_t live_bytes;
    int64_t kind_bytes[KIND_COUNT]; /* live_bytes by kind; only GPU kinds are set */
};

/* The allocations of one module name (see module_basename) in a process. */
struct module_group {
    char *name;        /* basename, UNKNOWN_MODULE or OTHER_MODULES: unique in the process */
    const char *label; /* module_label, or a static note; NULL: none */
    char *paths[SUMMARY_MAX_GROUP_PATHS]; /* the distinct paths seen, first ones only */
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
    bool shown;      /* passes the filters (summary_filter) */
    const char *uuid, *name, *pci_bus_id;
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

struct process_report {
    const struct gm_process *model;
    bool shown; /* passes the filters (summary_filter) */
    const struct trace *trace;
    bool has_pid, has_ppid, has_start_wall, has_start_mono;
    int64_t pid, ppid, start_wall_ns, start_mono_ns;
    int64_t runtime_version, driver_version; /* 0: unknown */
    const char *host, *cmdline, *exe;
    const struct gm_env *env;
    size_t nenv;
    int64_t calls, failed, nested, wait_ns, waited_calls;
    bool has_events;
    int64_t first_t_ns, last_end_ns;
    struct device_report *devices;
    size_t ndevices;
    const struct nccl_info *nccl; /* present = false for traces from before NCCL was recorded */
    int modules;                  /* 1 the trace records issuing modules, 0 not */
    const struct gm_lookups *lookups;
    struct module_group *groups;
    size_t ngroups, groups_cap;
    /* The group of the module path last looked up: allocations come in runs. */
    bool has_last;
    const char *last_path; /* NULL: no module */
    size_t last_group;
    bool known_modules; /* an allocation's caller was in a recorded module */
};

struct gpu_report {
    bool shown;        /* passes the filters (summary_filter) */
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
    const struct gm_model *model;     /* what it was built from (its clocks) */
    struct process_report *processes; /* the model's report order */
    size_t nprocesses;
    struct gpu_report *gpus; /* by uuid */
    size_t ngpus, gpus_cap;
    int64_t calls, failed;
    size_t devices_without_uuid;
    size_t shown_processes, shown_gpus; /* all of them unless filtered */
};

/* The report of a loaded model (loaded with GM_LOAD_NCCL). */
void summary_build(struct summary_report *r, const struct gm_model *m, const char *path);
void summary_free(struct summary_report *r);

/*
 * Lists only what passes f (matched against the model r was built from): a
 * process that passes, with those of its devices on the --gpu GPU (all of
 * them without --gpu); a GPU that passes, or, for one the model does not
 * know, one a listed process used. Nothing is recomputed.
 */
struct gm_filter;
void summary_filter(struct summary_report *r, const struct gm_model *m, const struct gm_filter *f);

/*
 * --fail-on-problem: among what is listed, a failed call (driver lookups
 * apart: libraries probe for features with them), memory (device, managed,
 * vmm or pinned host) still live at the end of a process that exited, or a
 * successful free of a pointer never allocated or already freed.
 */
bool summary_has_problem(const struct summary_report *r);

/* --json: the report as one JSON document (summary_json.c). */
void summary_print_json(const struct summary_report *r, FILE *out);

/* The tables of --csv, the main one first, NULL-terminated; and the printer
 * of table `table` (an index into them), raw numbers, listed rows only. */
extern const char *const summary_csv_tables[];
void summary_print_csv(const struct summary_report *r, size_t table, FILE *out);

/* ---- derived numbers shared by both renderings ---- */

/* The reference for relative times: process start when known, else the
 * first call (a trace whose process row was never written). */
int64_t summary_time_origin(const struct process_report *p);
/* total - free, never negative. */
int64_t summary_meminfo_used(int64_t total, int64_t free_bytes);
/* Whether the process shows any sign of NCCL (its text gets an nccl line). */
bool summary_uses_nccl(const struct process_report *p);
/* Allocating APIs report their bytes. */
bool summary_reports_bytes(const struct api_stats *a);
bool summary_is_lookup(const char *role);
/* The words for meta end_state. */
const char *summary_end_state_text(const char *state);
/* Other traced processes that share the device's GPU. */
size_t summary_gpu_neighbours(const struct summary_report *r, const struct device_report *d);
/* The pids of the GPU's processes, in report order, joined by sep ("?" for
 * an unknown pid), cut to fit buf. Returns buf. */
char *summary_gpu_pids(const struct summary_report *r, const struct gpu_report *g, char sep,
                       char *buf, size_t size);
/* Most calls first, then by api, layer and parent (NULL last). */
int summary_compare_apis(const void *a, const void *b);
/* A device's modules: by_live, those that issued GPU memory, most live at
 * the end first, then highest peak, then by name (the text's order); else
 * all of them by name (JSON). malloc'd; *count rows. */
struct module_row {
    const struct module_mem *mm;
    const struct module_group *group;
};
struct module_row *summary_module_rows(const struct process_report *p,
                                       const struct device_report *d, bool by_live, size_t *count);
/* qsort, except that an empty array may be NULL (qsort's may not). */
void summary_sort(void *base, size_t count, size_t size,
                  int (*compare)(const void *, const void *));

#endif
