/*
 * loader.h - the GPU model loader's private state, shared by the files that
 * load a run (gpumodel.h is the public side): load.c reads each trace's
 * small tables and drives the load, pairing.c makes the one pass over its
 * events (allocations paired with their frees), callstats.c counts what
 * summary reports in that same pass, streams.c orders the result once
 * every trace is in. Nothing outside analyzer/model/ includes it.
 */
#ifndef CUTRACE_ANALYZER_MODEL_LOADER_H
#define CUTRACE_ANALYZER_MODEL_LOADER_H

#include "model/gpumodel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MIB                  (1ll << 20)
#define GM_PENDING           (UINT32_MAX - 1) /* device -1: resolved after the pass */
#define MAX_DEVICES          64               /* device ordinals per process that get a GPU */
#define MAX_CONTAINMENT_SCAN (64ll << 20)     /* live allocations examined for interior exports */

/* realloc to exactly count elements; out of memory ends the process like xmalloc. */
void *ld_resize(void *array, size_t count, size_t size);

/* ---- string interning (api names, clocks, handles, texts) ---- */

struct strtab {
    char **strings; /* by id */
    size_t count, cap;
    uint32_t *slots; /* id + 1, 0 empty */
    size_t nslots;
};

/* The id of s (added if new); NULL is "". */
uint32_t strtab_id(struct strtab *t, const char *s);
/* The id of s, or GM_NONE when it was never added. */
uint32_t strtab_find(const struct strtab *t, const char *s);
void strtab_free(struct strtab *t, bool keep_strings);
/* The id of s in t, GM_NONE for NULL. */
uint32_t strtab_id_or_none(struct strtab *t, const char *s);

/* ---- the loader's private state ---- */

enum role {
    ROLE_OTHER,
    ROLE_ALLOC,
    ROLE_FREE,
    ROLE_RESET,
    ROLE_MEMINFO,
    ROLE_IPC_EXPORT,
    ROLE_CAPTURE_BEGIN,
    ROLE_CAPTURE_END,
    ROLE_COMM_INIT,
    ROLE_COLLECTIVE,
    ROLE_LOOKUP,
    ROLE_NVTX_MARK, /* the nvtx layer's records (model/nvtx.c) */
    ROLE_NVTX_PUSH,
    ROLE_NVTX_POP,
    ROLE_NVTX_START,
    ROLE_NVTX_END,
    ROLE_NVTX_DOMAIN,
};
#define ROLE_IS_NVTX(r) ((r) >= ROLE_NVTX_MARK && (r) <= ROLE_NVTX_DOMAIN)

/* One api of a trace's apis table, as the loader needs it. */
struct api_info {
    enum role role;
    uint32_t role_id;  /* the role text, interned per trace: views compare roles as text */
    bool null_role;    /* SQL NULL never equals anything */
    uint32_t space_id; /* the space text, interned per trace */
    bool resettable;   /* space device, host or ipc: a device reset ends it */
    bool ipc_space;    /* an IPC handle open (cudaIpcOpenMemHandle and the driver's) */
    bool ipc_row;      /* role ipc_export, or alloc in space ipc: the ipc view's rows */
    bool nccl_layer;   /* layer 'nccl' (the nccl_events view) */
    uint8_t nccl;      /* enum cc_role: read for the NCCL calls (collcalls.h) */
    enum gm_kind kind;
    uint32_t name;                  /* model-wide api name id */
    uint32_t layer_text, role_text; /* model-wide gm_text ids, GM_NONE for NULL */
    uint8_t layer;                  /* enum result_layer */
    uint32_t index;                 /* its index in the trace's apis */
};

struct module_range {
    int64_t start, end, id;
    uint32_t name; /* model-wide module name id */
    uint32_t path; /* model-wide gm_text id */
    bool nccl;
};

/* An IPC handle exported (exporter's allocation) or opened (the mapping). */
struct handle_use {
    uint32_t handle; /* interned handle_hex, GM_NONE until the ipc pass finds it */
    /* An index, not a pointer: a process's allocs grow while it loads.
     * m->procs itself stays put until every trace is loaded. */
    struct gm_process *proc;
    size_t alloc;
    int64_t seq; /* the export's or open's call */
};

/* Per process, kept for the notes. */
struct proc_extra {
    int format_version;
    int64_t no_gpu_events;
    int64_t devices_without_uuid;
    bool scan_capped;
    bool many_devices;
    bool missing_boot_id;
};

struct loader {
    struct gm_model *m;
    struct strtab apis, clocks, handles, modules, texts;
    struct gpu_entry {
        struct gm_gpu gpu;
    } * gpus;
    size_t ngpus, gpus_cap;
    struct handle_use *exports, *opens;
    size_t nexports, exports_cap, nopens, opens_cap;
    struct proc_extra *extra;
    int64_t events_read; /* for the progress line */
    size_t traces_done, traces;
};

struct callstats;  /* callstats.c */
struct nvtx_state; /* nvtx.c */

/* Per trace, during its calls pass. */
/* A call as later calls need it when it is their parent. */
struct seq_call {
    int64_t seq;
    /* its stack (calls.stack_id, or its nearest caller's that has one), 0
     * none */
    int64_t stack;
    uint32_t role;  /* role_id, or GM_NONE for a NULL role */
    uint32_t api;   /* model-wide api name of the call */
    uint8_t memory; /* 1: alloc, free or reset */
    uint8_t hops;   /* how many parent hops away its stack was found */
};

struct pass {
    struct loader *L;
    struct gm_process *p;
    struct proc_extra *x;
    struct api_info *infos; /* by index in the trace's apis */
    struct strtab names;    /* api names of the trace, first row of each */
    uint32_t *name_info;    /* names id -> index in infos */
    int64_t *api_ids;       /* the trace's api ids, ascending ... */
    uint32_t *api_rows;     /* ... and the index in infos of each */
    size_t napi_ids;
    struct strtab roles, spaces;
    uint32_t device_space; /* space id of "device", GM_NONE if absent */
    struct module_range *modules;
    size_t nmodules;
    /* Every call so far in seq order (seqs strictly increase), for the
     * parent of nested calls: one entry per call, so that the parent's
     * lookup touches one cache line, not six arrays. */
    struct seq_call *seq_calls;
    size_t nseqs, seqs_cap;
    /* api_id -> info for the ids 0 .. napi_direct - 1 (most traces' ids):
     * no search per row; others go through api_ids */
    const struct api_info **api_direct;
    size_t napi_direct;
    /* The rows of the ipc view's apis that carry a handle, in seq order:
     * tied to allocations once the pass is over (ld_read_ipc). */
    struct ipc_row {
        int64_t seq, parent_seq;
        bool has_parent;
        const struct api_info *info;
        char *hex; /* lower(hex(handle)), never empty */
    } * ipc_rows;
    size_t nipc_rows, ipc_rows_cap;
    /* (space, ptr) -> allocation index (live) or -1 (seen, ended) */
    struct slot {
        int64_t ptr;
        uint32_t space;
        bool used;
        int64_t value;
    } * map;
    size_t nmap_slots, nmap_used;
    /* live allocations, for resets and interior exports */
    uint32_t *live;
    size_t nlive, live_cap;
    uint32_t *live_slot; /* per allocation: its index in live, GM_NONE */
    uint8_t *resettable; /* per allocation: in a space a device reset ends */
    size_t live_slot_cap, resettable_cap;
    /* device ordinal -> gpu */
    struct devmap {
        int64_t ordinal;
        uint32_t gpu;
    } * devmap;
    size_t ndevmap, devmap_cap;
    size_t devices_cap;        /* of p->devices, which holds the devices table's rows first */
    uint32_t *first_call_gpus; /* GPUs that got a GM_EV_FIRST_CALL */
    size_t nfirst, first_cap;
    bool seen_call, seen_export, seen_open, seen_collective;
    int64_t scanned;
    size_t events_cap, allocs_cap, comms_cap;
    struct callstats *stats;
    struct nvtx_state *nvtx; /* model/nvtx.c, NULL until the first NVTX record */
};

/* One row of the events table, decoded. */
struct call_row {
    int64_t seq, t_ns, dur_ns, wait_ns, device, ptr, size, result, parent_seq;
    int64_t arg0, arg1, arg2, arg3, caller;
    int64_t order; /* calls.effect_order, never below 2 * seq */
    /* Its stack: calls.stack_id as read, then (note_call) the stack
     * symbols/stacks.h gives the call: its own, or that of the nearest
     * enclosing call that has one; 0 none. */
    int64_t stack_id;
    bool nested, has_parent;
    bool logical; /* not a second sighting of its parent's event (logical_events) */
    const struct api_info *info;
    /* NVTX records (nvtx.c): the model event they make (0 none), its
     * message (gm_text id) and nesting level. */
    uint8_t nvtx_event;
    uint32_t nvtx_text;
    int64_t nvtx_level;
};

/* load.c */
uint32_t ld_gpu_of(struct pass *s, int64_t ordinal);
const struct module_range *ld_module_at(const struct pass *s, int64_t caller);
const struct api_info *ld_api_of(const struct pass *s, const char *name);
const struct api_info *ld_api_by_id(const struct pass *s, int64_t api_id);

/* pairing.c: the pass over the events, then its IPC rows tied to allocations. */
/* The index in s->seq_calls of the call with that seq among those read so
 * far, SIZE_MAX if none. */
size_t ld_seq_index(const struct pass *s, int64_t seq);
int ld_read_calls(struct pass *s);
/* After the calls: the process's calls in flight and heartbeat (inflight.c). */
int ld_read_inflight(struct pass *s);
/* The pass's IPC rows that the ipc view holds, tied to their allocations:
 * exports from first_export on in L->exports get their handle, opens are
 * added to L->opens. */
void ld_read_ipc(struct pass *s, size_t first_export);
void ld_resolve_pending(struct pass *s);

/* nvtx.c: an NVTX record of the pass, in seq order (the handle and tid
 * columns of stmt at those positions): its domain named, its range paired,
 * c->nvtx_* set. */
void nvtx_read(struct pass *s, struct call_row *c, struct sqlite3_stmt *stmt, int col_handle,
               int col_tid);
void nvtx_free(struct pass *s);

/* callstats.c: summary's counters, fed by the pass. */
/* The process's device of that ordinal, made on first use. */
struct gm_device *ld_device(struct pass *s, int64_t ordinal);
void cs_begin(struct pass *s);
/* Every row, in seq order as read (handle: the row's blob, for lookups). */
void cs_row(struct pass *s, const struct call_row *c, const void *handle, int handle_len);
/* A successful logical cudaMemGetInfo, applied in effect order. */
void cs_meminfo(struct pass *s, const struct call_row *c);
/* An allocation became live (+1) or ended (-1). */
void cs_live(struct pass *s, const struct gm_alloc *a, int sign);
/* Hands the counters to the process (sorted), frees the rest. */
void cs_finish(struct pass *s);

/* streams.c: once every trace is loaded. */
void ld_finish_model(struct loader *L);

#endif
