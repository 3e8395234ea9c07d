/*
 * gpumodel.h - the GPU memory model shared by `cutrace timeline`, `cutrace
 * budget` and `cutrace diff`: every trace of a directory loaded
 * into one time-ordered stream of events per physical GPU, with live bytes
 * per category (docs/budget.md) at any event, the measurements
 * (cudaMemGetInfo) and the milestones between them.
 *
 * Loading reads each trace once, in seq order: the `events` table itself
 * (one pass over every event, decoded here with `apis`: the model is the
 * one module that knows the format, and the views' joins and window
 * functions would cost more than the rest of the load), `ipc` (exports and
 * opens, for the handles) and the small tables (process, env, devices,
 * modules). Which free ended which
 * allocation is derived in C from the calls, with exactly the rules of the
 * `allocations` view (include/cutrace/schema.h: logical events, pairing by
 * address space and pointer in effect order - calls.effect_order, read, not
 * recomputed - device resets, pointers handed out again), so
 * that a million-event trace loads in about a second instead of the view's
 * window functions; tests/analyzer/test_timeline.c and test_model_views.c
 * check that the model and the views agree.
 * Deriving it here is also what lets the model see the frees the view
 * silently drops: frees of pointers never allocated, and double frees.
 *
 * GPUs are identified by devices.uuid, or by host, boot and ordinal when a
 * trace has no uuid for an ordinal (said in the notes). Times are the
 * monotonic clock of the host (host + boot_id): a GPU's stream merges the
 * events of every process using it in that clock; processes of different
 * hosts never share a GPU or a stream. With several hosts, every host's
 * times are moved onto a reference host's axis where NCCL calls allow
 * (model/clocks.h), so times of different hosts compare directly.
 *
 * Everything here is untrusted input: sizes of 2^63 or more count as 0,
 * sums saturate, live bytes never go negative, and odd traces (unknown
 * frees, double frees, killed processes) become notes, never crashes.
 */
#ifndef CUTRACE_ANALYZER_GPUMODEL_H
#define CUTRACE_ANALYZER_GPUMODEL_H

#include "model/collcalls.h"
#include "model/manifest.h"
#include "model/nccl.h"
#include "model/trace.h"
#include "model/traceset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Categories of live memory (docs/budget.md), in the order of its table.
 * The first GM_GPU_CATEGORIES are GPU memory ("traced GPU bytes"); peer
 * and host are shown apart. GM_CAT_NONE (reserved address space, kinds this
 * build does not know) is never memory. */
enum gm_category {
    GM_CAT_NCCL,
    GM_CAT_IPC_EXPORTED,
    GM_CAT_VMM,
    GM_CAT_RUNTIME,
    GM_CAT_MANAGED,
    GM_CAT_PEER,
    GM_CAT_HOST,
    GM_CAT_NONE,
};
#define GM_GPU_CATEGORIES 5
#define GM_CATEGORIES     7 /* with peer and host; GM_CAT_NONE is not counted */

/* "nccl", "ipc_exported", "vmm", "runtime", "managed", "peer", "host". */
const char *gm_category_key(enum gm_category category);
/* What people call it: "NCCL buffers", "custom all-reduce buffers", ... */
const char *gm_category_label(enum gm_category category);

/* allocations.kind */
enum gm_kind {
    GM_KIND_DEVICE,
    GM_KIND_MANAGED,
    GM_KIND_VMM,
    GM_KIND_HOST,
    GM_KIND_VMM_HOST,
    GM_KIND_IPC,
    GM_KIND_RESERVE,
    GM_KIND_OTHER,
};

#define GM_KINDS 8          /* enum gm_kind values */
#define GM_NONE  UINT32_MAX /* no index */

/* What cudaMemGetInfo counts as used: device, managed and vmm (cuMemCreate
 * on a device) memory. */
bool gm_is_gpu_kind(enum gm_kind kind);

/* One allocation, as the `allocations` view has it. */
struct gm_alloc {
    int64_t seq, t_ns;
    int64_t ptr, size;  /* size 0 for what the trace could not size */
    int64_t device;     /* ordinal current at the call */
    int64_t free_seq;   /* 0 while live (or ended only by the process's end) */
    uint32_t gpu;       /* index into the model's gpus, GM_NONE: on no GPU */
    uint32_t event;     /* its GM_EV_ALLOC in the process's events */
    uint32_t end_event; /* the event that ended it (a GM_EV_FREE, or the process's
                           GM_EV_END when it exited cleanly with it live), GM_NONE */
    uint8_t kind;       /* enum gm_kind */
    uint8_t category;   /* enum gm_category */
    bool top;           /* made at top level (calls.nested = 0) */
    bool exported;      /* an IPC handle was made on it */
    uint32_t module;    /* the module that issued it: index into the model's modules,
                           GM_NONE when unknown (no module holds its caller, format < 3) */
    uint32_t path;      /* that module's path (gm_text), GM_NONE when unknown */
    int64_t stack_id;   /* the stack of its call (symbols/stacks.h: its own, or its
                           nearest enclosing call's), 0 none; stacks_by_id names it */
};

enum gm_event_type {
    GM_EV_ALLOC,         /* a: the allocation's index */
    GM_EV_FREE,          /* a: the allocation it ended; b: 1 by a reset, 2 implicit */
    GM_EV_MEASURE,       /* a: free bytes, b: total bytes (a top-level cudaMemGetInfo) */
    GM_EV_FIRST_CALL,    /* the process's first call on this GPU */
    GM_EV_COMM_INIT,     /* a: index into the process's comms */
    GM_EV_IPC_EXPORT,    /* the process's first IPC handle export */
    GM_EV_IPC_OPEN,      /* the process's first IPC handle open (a: its allocation) */
    GM_EV_CAPTURE_BEGIN, /* CUDA-graph stream capture */
    GM_EV_CAPTURE_END,
    GM_EV_COLLECTIVE, /* the process's first NCCL collective or p2p call */
    GM_EV_FAILED,     /* a: result, b: size */
    GM_EV_END,        /* the process's last event on this GPU; a: 1 exited cleanly */
    /* NVTX (model/nvtx.c, docs/nvtx.md): a: gm_text id of the message (of
     * the range's begin, for an end), b: the push's nesting level (0 for
     * marks and start/end ranges). Not NCCL's own per-call ranges. */
    GM_EV_NVTX_MARK,
    GM_EV_NVTX_BEGIN,
    GM_EV_NVTX_END,
};

struct gm_event {
    int64_t seq, t_ns;
    int64_t a, b;  /* per type, see above */
    uint64_t pos;  /* position in its GPU's stream (gm_gpu.stream) */
    uint32_t gpu;  /* GM_NONE: on no GPU (kept for the process's own analyses) */
    uint32_t api;  /* index into the model's api names, GM_NONE for GM_EV_END */
    uint8_t type;  /* enum gm_event_type */
    uint8_t layer; /* enum result_layer of the api, for failed calls */
};

/* One NCCL communicator init of a process (failed ones included). */
struct gm_comm {
    int64_t seq, t_ns;
    int64_t nranks, rank, result;
    uint64_t hash; /* unique-id hash: the same in every rank's trace */
    uint32_t gpu;
};

/* The process row as the trace has it, NULLs apart (the model's own pid,
 * host and start fall back on the file name where the row lacks them). */
struct gm_row {
    bool present, has_pid, has_ppid, has_start_wall, has_start_mono;
    int64_t pid, ppid, start_wall_ns, start_mono_ns;
    int64_t runtime_version, driver_version; /* 0 unknown */
    char *host, *cmdline, *exe;              /* NULL: NULL, or no row */
};

struct gm_env {
    char *name, *value; /* value NULL for NULL */
};

/*
 * A device ordinal of a process: a row of its devices table or an ordinal
 * one of its calls had current (-1: none yet), in ordinal order.
 */
struct gm_device {
    int64_t ordinal;
    bool listed;                    /* has a row in `devices` */
    char *uuid, *name, *pci_bus_id; /* NULL unknown (uuid "" is NULL too) */
    int64_t total;                  /* -1 unknown */
    /* Its last successful cudaMemGetInfo (the `meminfo` view: nested ones
     * too), and the process's live bytes on this ordinal by kind when it
     * took effect (allocations made before it and not ended by then). */
    bool has_meminfo;
    int64_t meminfo_seq, meminfo_t_ns, meminfo_free, meminfo_total; /* bytes never negative */
    int64_t meminfo_live[GM_KINDS];
};

/*
 * Calls of one API on one device ordinal of a process. A per-API row
 * (!nested_row) counts every call, with the share made at top level (not
 * inside another traced call, depth 0) in top_*. A nested row counts the
 * nested calls of the API made inside calls of the API `inside` (GM_NONE:
 * the parent is not in the trace); top_* 0. Sums leave out negative values
 * and saturate; ok_bytes sums `size` over successful calls.
 */
struct gm_call_count {
    int64_t device;
    uint32_t api;   /* the model's api name */
    uint32_t layer; /* gm_text ids of the apis row's layer and role (GM_NONE: NULL) */
    uint32_t role;
    uint32_t inside;
    bool nested_row;
    int64_t calls, failed, nested, dur_ns, ok_bytes;
    int64_t top_calls, top_failed, top_dur_ns, top_ok_bytes;
};

/* A failed call (result != 0) other than a driver lookup: a lookup of a
 * symbol the driver lacks is how libraries probe for features, by the
 * dozen; gm_lookups counts them. In seq order. */
struct gm_failed_call {
    int64_t seq, t_ns, device, result, size, ptr;
    uint32_t api, layer; /* api name; layer gm_text (GM_NONE: NULL) */
};

/* The `driver_lookups` view summed (traces of format 3 on: present). */
struct gm_lookups {
    bool present;
    int64_t calls, wrapped, failed, symbols; /* symbols: distinct names looked up */
};

struct gm_process {
    const struct trace *trace;
    int64_t pid, ppid;
    bool has_start_wall, has_start_mono;
    int64_t start_wall_ns, start_mono_ns;
    char *host, *boot_id, *cmdline; /* never NULL ("" unknown) */
    const char *end_state;          /* meta end_state, NULL unknown */
    bool exited;                    /* exit, _exit or exec: its memory went with it */
    uint32_t clock;                 /* index into the model's clocks */
    struct gm_alloc *allocs;        /* in effect order (calls.effect_order) */
    size_t nallocs;
    struct gm_event *events; /* in effect order; GM_EV_END events last */
    size_t nevents;
    struct gm_comm *comms;
    size_t ncomms;
    bool has_rank; /* its rank in its largest successful communicator */
    int64_t rank, world_nranks;
    int64_t calls;
    bool has_calls;
    int64_t first_t_ns, last_seq, last_end_ns;
    int64_t unknown_frees, double_frees; /* successful frees that ended nothing */
    int64_t measurements;
    bool modules;   /* the trace records issuing modules (format 3) */
    uint32_t *gpus; /* the GPUs it used, ascending */
    size_t ngpus;
    struct cc_calls nccl_calls;      /* its NCCL collective and p2p calls, aggregated */
    struct nccl_comms communicators; /* its NCCL inits as the `communicators` view has them */
    /* What the reports show of a process besides its memory (summary). */
    struct gm_row row;
    struct gm_env *env; /* by name */
    size_t nenv;
    struct gm_device *devices;
    size_t ndevices;
    struct gm_call_count *call_counts; /* per device, API (and parent API) */
    size_t ncall_counts;
    struct gm_failed_call *failed;
    size_t nfailed;
    int64_t failed_calls, nested_calls, wait_ns, waited_calls;
    struct gm_lookups lookups;
    int64_t comm_inits;     /* NCCL communicator inits (layer nccl), failed ones too */
    struct nccl_info *nccl; /* communicators: with GM_LOAD_NCCL only, else NULL */
    /* The command lines of the processes it descends from, its parent
     * first, as the tracer recorded them (redacted): where a spawned
     * worker's launcher flags are. */
    struct gm_ancestor *ancestors;
    size_t nancestors;
    /* meta exit_status: the status it passed to exit() or _exit() (format 7). */
    bool has_exit_status;
    int exit_status;
    /* Calls it was inside when the trace ended, in seq order (gm_inflight). */
    struct gm_inflight *inflight;
    size_t ninflight;
    /* The last moment it is known alive: meta alive_mono_ns (the writer's
     * last heartbeat, kept by recover), or a live ring's header. */
    bool has_alive;
    int64_t alive_mono_ns;
};

struct gm_ancestor {
    int64_t pid;
    char *cmdline; /* never NULL */
};

/*
 * A call the process was inside when its trace ended (format 7): an
 * `inflight` row of a killed process (recover folded its entered mark), or
 * a mark read from the ring of a process that still runs (`live`: a hung
 * rank). Not a call: it has no duration and no result, and is counted
 * nowhere else in the model. Fields are the record at entry
 * (include/cutrace/schema.h, the hooks' comments): NCCL inits have
 * nranks, rank and the unique-id hash; calls on a communicator its handle,
 * with comm_id the init it belongs to (-1 none known) and nth its number
 * among the process's calls of that api on that communicator (1 = first);
 * collectives count and peer (-1 none).
 */
struct gm_inflight {
    int64_t seq, t_ns, tid, depth, parent_seq, device;
    uint32_t api;  /* model api name */
    uint32_t role; /* gm_text id of the api's role, GM_NONE unknown */
    bool live;     /* read from a running process's ring */
    bool nccl;     /* an NCCL api */
    bool init;     /* role comm_init or comm_init_all */
    int64_t handle, nranks, rank;
    uint64_t hash;
    int64_t comm_id, nth;
    int64_t count, peer, stream;
};

struct gm_ref {
    uint32_t proc, event;
};

struct gm_gpu {
    char *uuid;       /* devices.uuid, or NULL when identified by host and ordinal */
    char *key;        /* the uuid, or "<host>/device <ordinal>" */
    char *name;       /* product name, "" unknown */
    char *pci_bus_id; /* "0000:18:00.0", "" unknown; GPUs of a host are in its order */
    int64_t total;    /* devices.total_bytes, -1 unknown */
    int64_t ordinal;  /* for a GPU without uuid */
    uint32_t clock;
    struct gm_ref *stream; /* every event on it, all processes, in time order */
    size_t nstream;
    uint32_t *procs; /* the processes with events on it, in report order */
    size_t nprocs;
};

/* An IPC mapping tied to what it maps, by the 64-byte handle: process
 * opener_proc's allocation opener_alloc (kind ipc) maps exporter_proc's
 * allocation exporter_alloc (indexes into the model's processes and their
 * allocs). A mapping of a handle no trace exported has no link. */
struct gm_ipc_link {
    uint32_t exporter_proc, exporter_alloc;
    uint32_t opener_proc, opener_alloc;
};

/* A host's monotonic clock: processes with the same host and boot id. */
struct gm_clock {
    char *host, *boot_id;
    /* Its place on the run's one time axis (model/clocks.h). */
    bool reference;     /* the axis every aligned time is on */
    bool aligned;       /* offset_ns is known (the reference's is 0) */
    int64_t offset_ns;  /* its reading minus the reference's at one moment:
                           subtracted from its processes' times */
    int64_t error_ns;   /* how far the true offset can be from offset_ns */
    int64_t events;     /* matched events the estimate used */
    const char *method; /* "bound", "median", NULL for the reference or unaligned */
    uint32_t against;   /* the aligned clock it was estimated against, GM_NONE */
};

struct gm_model {
    struct gm_process *procs; /* report order: start time, pid, file */
    size_t nprocs;
    struct gm_gpu *gpus; /* report order: host, boot, PCI bus id, uuid (then GPUs without uuid) */
    size_t ngpus;
    struct gm_clock *clocks;
    size_t nclocks;
    uint32_t reference_clock; /* GM_NONE with no clock */
    int64_t clock_events;     /* NCCL events matched across clocks (model/clocks.h) */
    char **apis;              /* api names, interned */
    size_t napis;
    char **notes; /* what the model assumed, one sentence each, in a stable order */
    size_t nnotes;
    void *intern;   /* private */
    char **modules; /* issuing modules by name (module_display_name), interned */
    size_t nmodules;
    struct gm_ipc_link *ipc_links; /* every mapping whose exporter is traced, by opener */
    size_t nipc_links;
    char **texts; /* other interned texts: api layers and roles, module paths */
    size_t ntexts;
    /* The command `cutrace run` launched (its run manifest), NULL without
     * one: the launcher's flags hold for every process of the run. */
    char *run_cmdline;
    /* That manifest, NULL without one (run_cmdline is its cmdline). */
    struct run_manifest *manifest;
};

/*
 * Loads every trace of an opened set. Returns 0, or -1 after printing the
 * one-line error of the trace that could not be read (a damaged file found
 * halfway through). A load of more than about two seconds shows a progress
 * line on a terminal's stderr (out/progress.h).
 */
int gm_load(struct gm_model *m, struct trace_set *set);
/* GM_LOAD_NCCL: also each process's communicators (gm_process.nccl, nccl.h). */
#define GM_LOAD_NCCL 1u
int gm_load_with(struct gm_model *m, struct trace_set *set, unsigned flags);
/*
 * What every report does first: opens the run at `paths` (directories,
 * trace files or packed runs taken as one: trace_set_open_paths, which
 * folds the dead processes' rings) and loads it with `flags`. Returns 0,
 * or -1 after the one-line error, with nothing left open. The caller frees
 * with gm_free and trace_set_close.
 */
int gm_open_run(struct gm_model *m, struct trace_set *set, const char *const *paths, size_t npaths,
                unsigned flags);
void gm_free(struct gm_model *m);

/* Adds a note (printf-style); notes keep the order they were added in. */
void gm_note(struct gm_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "pid 1000", or "pid 1000 (rank 0)". Returns buf. */
char *gm_process_name(char *buf, size_t size, const struct gm_process *p);

/*
 * The command lines whose flags hold for process p, nearest first: i = 0
 * its own, then its ancestors' (parent first), then the run's launched
 * command; NULL once i is past the last. A flag is looked for in them in
 * this order, so a worker's own flag wins over its launcher's.
 */
const char *gm_launch_line(const struct gm_model *m, const struct gm_process *p, size_t i);

/* The end of p's trace, in its monotonic clock: the latest of its last
 * call's end, its last heartbeat and its calls in flight's entries. */
int64_t gm_process_end_ns(const struct gm_process *p);
/* The call p is stuck in: its first top-level NCCL call in flight, else its
 * first top-level one, else its first; NULL when it has none. */
const struct gm_inflight *gm_stuck_call(const struct gm_process *p);
/* "died inside ncclCommInitRank, entered 41.3 s before the end" (a live
 * process: "inside ..., entered ... before its last heartbeat (still
 * running)"; one that exited while a thread was inside: "still inside ...
 * when it ended (exit), ..."). Returns buf. */
char *gm_inflight_text(char *buf, size_t size, const struct gm_model *m, const struct gm_process *p,
                       const struct gm_inflight *c);

/* One call in flight as a JSON object (collectives and timeline). */
struct json_writer;
void gm_inflight_json(struct json_writer *w, const struct gm_model *m, const struct gm_process *p,
                      const struct gm_inflight *c);

/*
 * The process's NCCL rank: its rank in its largest successful communicator
 * (has_rank), or, for one that never finished an init, the rank the init
 * it was inside asked for (a rank that hung or died in ncclCommInitRank is
 * still rank 3 of 8). False with neither; nranks may be NULL.
 */
bool gm_process_rank(const struct gm_process *p, int64_t *rank, int64_t *nranks);

/* The api name of an event ("" for none). */
const char *gm_api_name(const struct gm_model *m, uint32_t api);

/* An interned text of m->texts, NULL for GM_NONE. */
const char *gm_text(const struct gm_model *m, uint32_t id);

/* The name of an allocation's issuing module ("" for GM_NONE). */
const char *gm_module_name(const struct gm_model *m, uint32_t module);

/* format_size of out/units.h, kept under this name for the model's users:
 * "0", "528.0 MiB", "70.50 GiB", "-12.0 MiB". Returns buf. */
char *gm_format_size(char *buf, size_t size, int64_t bytes);

/* Saturating arithmetic on untrusted values. */
int64_t gm_add(int64_t a, int64_t b);
int64_t gm_sub(int64_t a, int64_t b);

/*
 * A walk over one GPU's stream, in order: after gm_walk_step returns an
 * event, live[] holds the GPU's live bytes per category with that event
 * applied (a measurement changes nothing, so for it they are the bytes live
 * when it was made). proc_live[] holds the same per process of the GPU.
 */
struct gm_walk {
    const struct gm_model *m;
    uint32_t gpu;
    size_t next;
    int64_t live[GM_CATEGORIES];
    int64_t (*proc_live)[GM_CATEGORIES]; /* per model process */
};
void gm_walk_init(struct gm_walk *w, const struct gm_model *m, uint32_t gpu);
const struct gm_ref *gm_walk_step(struct gm_walk *w);
void gm_walk_free(struct gm_walk *w);
/* Traced GPU bytes: the sum of the GPU categories. */
int64_t gm_traced(const int64_t live[GM_CATEGORIES]);

/* The position in its GPU's stream at which an allocation ends (UINT64_MAX: never). */
uint64_t gm_alloc_end_pos(const struct gm_process *p, const struct gm_alloc *a);

/*
 * A burst of allocations of one process on one GPU: top-level allocations
 * of GPU memory, from the event `first` to the event `last` (indexes into
 * the process's events).
 */
struct gm_burst {
    uint32_t proc, gpu;
    uint32_t first, last;
    int64_t count, bytes;
    /* The weight burst only: the measurements around it (GM_NONE: none). */
    uint32_t before, after;
    bool kv_like_skipped; /* a later, larger stretch that looked like a KV pool was passed over */
    int64_t skipped_bytes;
    /* The weight burst only: it is the program's own NVTX range (named_text
     * its message, gm_text), not found from the sizes. */
    bool named;
    uint32_t named_text;
};

#define GM_BURST_MIN_DEFAULT (1ll << 30)

/*
 * The weight burst of process `proc` on `gpu` (docs/budget.md): of the
 * stretches between two consecutive measurements of the process on that
 * GPU, the one that allocated the most GPU memory at top level, if it holds
 * at least burst_min bytes. A stretch that comes after another qualifying
 * one and is nine tenths one set of equal allocations (a KV cache pool:
 * SGLang measures again before capturing CUDA graphs, after its pool) is
 * passed over for the largest earlier one. Returns false when there is
 * none; then *out describes the largest stretch of any kind (before the
 * first or after the last measurement included; count 0 if none) so that
 * the caller can say why.
 *
 * A phase the program named comes first (docs/nvtx.md): its first NVTX
 * range on that GPU whose message mentions weights ("load_weights", any
 * case) with a measurement before it and one after it is the weight burst,
 * whatever its size: its allocations between the range's begin and end,
 * the measurements the last before its begin and the first after its end.
 */
bool gm_weight_burst(const struct gm_model *m, uint32_t proc, uint32_t gpu, int64_t burst_min,
                     struct gm_burst *out);

/* The same restricted to the stretches between the measurement events
 * from and to (indexes into the process's events), with no minimum. */
bool gm_burst_between(const struct gm_model *m, uint32_t proc, uint32_t gpu, uint32_t from,
                      uint32_t to, struct gm_burst *out);

/*
 * The GPU a report's --gpu names: its index in the report (digits), or a
 * prefix of its uuid (with or without "GPU-", any case) or key. Returns -1
 * after printing the usage error of command cmd.
 */
int64_t gm_select_gpu(const struct gm_model *m, const char *arg, const char *cmd);
/* Whether g's uuid (with or without "GPU-") or key starts with prefix, any case. */
bool gm_gpu_matches(const struct gm_gpu *g, const char *prefix);

/* The GPU a process used most (the most measurements, then the most
 * allocated bytes, then the lowest index); GM_NONE if none. */
uint32_t gm_main_gpu(const struct gm_model *m, uint32_t proc);

/* The measurement events of a process on a GPU, in order (malloc'd). */
uint32_t *gm_measurements(const struct gm_model *m, uint32_t proc, uint32_t gpu, size_t *count);

/* The largest set (by bytes) of at least 2 equal allocations of at least
 * 1 MiB of GPU memory that process `proc` made on `gpu` after event
 * `after`: the KV cache pool. Returns false when there is none. */
bool gm_equal_set_after(const struct gm_model *m, uint32_t proc, uint32_t gpu, uint32_t after,
                        int64_t *count, int64_t *size);

#endif
