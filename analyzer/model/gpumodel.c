/*
 * gpumodel.c - loading the traces of a directory into per-GPU event
 * streams with live bytes per category (see gpumodel.h).
 *
 * Per trace, in this order: the process row, the devices, the modules (to
 * tell NCCL's own buffers by the library that allocated them), one pass
 * over `calls` in seq order that derives allocations, frees, measurements
 * and milestones, applied in effect order (calls.effect_order: an
 * allocation when it returned, everything else when it started, so that a
 * free another thread made while an allocation was under way is paired
 * with what it freed), and one over `ipc` that ties every opened handle to
 * the exporter's allocation. Then, over the whole directory: IPC mappings get
 * the size of what they map, categories are decided, processes and GPUs are
 * put in report order, and each GPU's events are merged by time into one
 * stream.
 */
#include "model/gpumodel.h"

#include "cli.h"
#include "model/errnames.h"
#include "model/modules.h"
#include "out/units.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MIB                  (1ll << 20)
#define GM_PENDING           (UINT32_MAX - 1) /* device -1: resolved after the pass */
#define MAX_DEVICES          64               /* device ordinals per process that get a GPU */
#define MAX_CONTAINMENT_SCAN (64ll << 20)     /* live allocations examined for interior exports */

/* ---- small helpers ---- */

/* realloc to exactly count elements; out of memory ends the process like xmalloc. */
static void *resize(void *array, size_t count, size_t size)
{
    if (count && size > SIZE_MAX / count) {
        fputs("cutrace: out of memory\n", stderr);
        exit(CLI_EXIT_BAD_INPUT);
    }
    size_t bytes = count * size;
    void *p = realloc(array, bytes ? bytes : 1);
    if (!p) {
        fputs("cutrace: out of memory\n", stderr);
        exit(CLI_EXIT_BAD_INPUT);
    }
    return p;
}

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

void gm_note(struct gm_model *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0)
        text = xstrdup("(note too long)");
    /* Notes quote trace contents: keep them one line. */
    for (char *c = text; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = ' ';
    m->notes = resize(m->notes, m->nnotes + 1, sizeof(*m->notes));
    m->notes[m->nnotes++] = text;
}

char *gm_process_name(char *buf, size_t size, const struct gm_process *p)
{
    if (p->has_rank)
        snprintf(buf, size, "pid %" PRId64 " (rank %" PRId64 ")", p->pid, p->rank);
    else
        snprintf(buf, size, "pid %" PRId64, p->pid);
    return buf;
}

const char *gm_api_name(const struct gm_model *m, uint32_t api)
{
    return api < m->napis ? m->apis[api] : "";
}

const char *gm_module_name(const struct gm_model *m, uint32_t module)
{
    return module < m->nmodules ? m->modules[module] : "";
}

/* ---- string interning (api names, clocks, handles) ---- */

struct strtab {
    char **strings; /* by id */
    size_t count, cap;
    uint32_t *slots; /* id + 1, 0 empty */
    size_t nslots;
};

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static void strtab_rehash(struct strtab *t)
{
    size_t n = t->nslots ? t->nslots * 2 : 64;
    free(t->slots);
    t->slots = xcalloc(n, sizeof(*t->slots));
    t->nslots = n;
    for (size_t id = 0; id < t->count; id++) {
        size_t i = hash_bytes(t->strings[id], strlen(t->strings[id])) & (n - 1);
        while (t->slots[i])
            i = (i + 1) & (n - 1);
        t->slots[i] = (uint32_t)id + 1;
    }
}

/* The id of s (added if new); NULL is "". */
static uint32_t strtab_id(struct strtab *t, const char *s)
{
    if (!s)
        s = "";
    if ((t->count + 1) * 2 > t->nslots)
        strtab_rehash(t);
    size_t i = hash_bytes(s, strlen(s)) & (t->nslots - 1);
    while (t->slots[i]) {
        uint32_t id = t->slots[i] - 1;
        if (strcmp(t->strings[id], s) == 0)
            return id;
        i = (i + 1) & (t->nslots - 1);
    }
    assert(t->count < UINT32_MAX - 2);
    t->strings = xgrow(t->strings, &t->cap, t->count + 1, sizeof(*t->strings));
    t->strings[t->count] = xstrdup(s);
    t->slots[i] = (uint32_t)t->count + 1;
    return (uint32_t)t->count++;
}

/* The id of s, or GM_NONE when it was never added. */
static uint32_t strtab_find(const struct strtab *t, const char *s)
{
    if (!t->nslots || !s)
        return GM_NONE;
    size_t i = hash_bytes(s, strlen(s)) & (t->nslots - 1);
    while (t->slots[i]) {
        uint32_t id = t->slots[i] - 1;
        if (strcmp(t->strings[id], s) == 0)
            return id;
        i = (i + 1) & (t->nslots - 1);
    }
    return GM_NONE;
}

static void strtab_free(struct strtab *t, bool keep_strings)
{
    if (!keep_strings) {
        for (size_t i = 0; i < t->count; i++)
            free(t->strings[i]);
        free(t->strings);
    }
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

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
};

/* One api of a trace's apis table, as the loader needs it. */
struct api_info {
    enum role role;
    uint32_t role_id;  /* the role text, interned per trace: views compare roles as text */
    bool null_role;    /* SQL NULL never equals anything */
    uint32_t space_id; /* the space text, interned per trace */
    bool resettable;   /* space device, host or ipc: a device reset ends it */
    bool ipc_space;    /* an IPC handle open (cudaIpcOpenMemHandle and the driver's) */
    enum gm_kind kind;
    uint32_t name; /* model-wide api name id */
    uint8_t layer; /* enum result_layer */
    uint8_t nccl;  /* enum cc_role: read for the NCCL calls (collcalls.h) */
};

struct module_range {
    int64_t start, end, id;
    uint32_t name; /* model-wide module name id */
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

struct loader {
    struct gm_model *m;
    struct strtab apis, clocks, handles, modules;
    struct gpu_entry {
        struct gm_gpu gpu;
    } * gpus;
    size_t ngpus, gpus_cap;
    struct handle_use *exports, *opens;
    size_t nexports, exports_cap, nopens, opens_cap;
    /* Per process, kept for the notes. */
    struct proc_extra {
        int format_version;
        int64_t no_gpu_events;
        int64_t devices_without_uuid;
        bool scan_capped;
        bool many_devices;
        bool missing_boot_id;
    } * extra;
};

/* Per trace, during its calls pass. */
struct pass {
    struct loader *L;
    struct gm_process *p;
    struct proc_extra *x;
    struct api_info *infos; /* by index in the trace's apis */
    struct strtab names;    /* api names of the trace, first row of each */
    uint32_t *name_info;    /* names id -> index in infos */
    struct strtab roles, spaces;
    uint32_t device_space; /* space id of "device", GM_NONE if absent */
    struct module_range *modules;
    size_t nmodules;
    /* seq -> role of every call so far, for the parent of nested calls */
    int64_t *seqs;
    uint32_t *seq_roles; /* role_id, or GM_NONE for a NULL role */
    uint8_t *seq_memory; /* 1: alloc, free or reset */
    size_t nseqs, seqs_cap, seq_roles_cap, seq_memory_cap;
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
    /* devices table */
    struct devrow {
        int64_t ordinal;
        char *uuid, *name, *pci_bus_id;
        int64_t total;
    } * devrows;
    size_t ndevrows, devrows_cap;
    uint32_t *first_call_gpus; /* GPUs that got a GM_EV_FIRST_CALL */
    size_t nfirst, first_cap;
    bool seen_call, seen_export, seen_open, seen_collective;
    int64_t scanned;
    size_t events_cap, allocs_cap, comms_cap;
};

/* ---- per-trace tables ---- */

static bool has_column(struct trace *t, const char *table, const char *column, int *rc)
{
    sqlite3_stmt *stmt =
        trace_query(t, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?", "tt", table, column);
    if (!stmt) {
        *rc = -1;
        return false;
    }
    int step = trace_step(t, stmt);
    sqlite3_finalize(stmt);
    if (step < 0)
        *rc = -1;
    return step == 1;
}

/* For traces that lost their process row. */
static void identity_from_file_name(struct gm_process *p)
{
    int64_t pid, start;
    char *host;
    if (!trace_identity_from_file_name(p->trace->file, &pid, &start, &host))
        return;
    p->pid = pid;
    p->start_wall_ns = start;
    p->has_start_wall = true;
    if (!p->host[0]) {
        free(p->host);
        p->host = host;
    } else {
        free(host);
    }
}

static char *text_or_empty(sqlite3_stmt *stmt, int col)
{
    char *text = col_text(stmt, col);
    return text ? text : xstrdup("");
}

static int load_process_row(struct pass *s)
{
    struct gm_process *p = s->p;
    struct trace *t = (struct trace *)p->trace;
    int rc = 0;
    bool boot = has_column(t, "process", "boot_id", &rc);
    if (rc < 0)
        return -1;
    sqlite3_stmt *stmt =
        boot ? trace_query(t,
                           "SELECT pid, ppid, host, cmdline, start_wall_ns, start_mono_ns, boot_id"
                           " FROM process LIMIT 1",
                           "")
             : trace_query(t,
                           "SELECT pid, ppid, host, cmdline, start_wall_ns, start_mono_ns, NULL"
                           " FROM process LIMIT 1",
                           "");
    if (!stmt)
        return -1;
    int step = trace_step(t, stmt);
    bool has_row = step == 1;
    if (has_row) {
        p->pid = col_int(stmt, 0, 0);
        p->ppid = col_int(stmt, 1, 0);
        p->host = text_or_empty(stmt, 2);
        p->cmdline = text_or_empty(stmt, 3);
        p->has_start_wall = !col_is_null(stmt, 4);
        p->start_wall_ns = col_int(stmt, 4, 0);
        p->has_start_mono = !col_is_null(stmt, 5);
        p->start_mono_ns = col_int(stmt, 5, 0);
        p->boot_id = text_or_empty(stmt, 6);
    }
    sqlite3_finalize(stmt);
    if (step < 0)
        return -1;
    if (!p->host)
        p->host = xstrdup("");
    if (!p->cmdline)
        p->cmdline = xstrdup("");
    if (!p->boot_id)
        p->boot_id = xstrdup("");
    if (!has_row || p->pid <= 0)
        identity_from_file_name(p);
    s->x->missing_boot_id = p->boot_id[0] == '\0';
    return 0;
}

static int load_devices(struct pass *s)
{
    struct trace *t = (struct trace *)s->p->trace;
    sqlite3_stmt *stmt = trace_query(
        t, "SELECT device, uuid, name, total_bytes, pci_bus_id FROM devices ORDER BY device", "");
    if (!stmt)
        return -1;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        if (col_is_null(stmt, 0))
            continue;
        int64_t ordinal = col_int(stmt, 0, -1);
        bool repeated = false;
        for (size_t i = 0; i < s->ndevrows; i++)
            repeated |= s->devrows[i].ordinal == ordinal;
        if (repeated) /* a damaged table: the first row wins */
            continue;
        s->devrows = xgrow(s->devrows, &s->devrows_cap, s->ndevrows + 1, sizeof(*s->devrows));
        struct devrow *d = &s->devrows[s->ndevrows++];
        d->ordinal = ordinal;
        d->uuid = col_text(stmt, 1);
        if (d->uuid && !d->uuid[0]) {
            free(d->uuid);
            d->uuid = NULL;
        }
        d->name = text_or_empty(stmt, 2);
        d->total = col_int(stmt, 3, -1);
        if (d->total < 0)
            d->total = -1;
        d->pci_bus_id = text_or_empty(stmt, 4);
    }
    sqlite3_finalize(stmt);
    return rc;
}

static int compare_modules(const void *a, const void *b)
{
    const struct module_range *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool is_nccl_library(const char *path)
{
    return strncmp(module_basename(path), "libnccl", 7) == 0;
}

static int load_modules(struct pass *s)
{
    struct trace *t = (struct trace *)s->p->trace;
    int available = modules_check(t);
    if (available < 0)
        return -1;
    s->p->modules = available > 0;
    if (!s->p->modules)
        return 0;
    sqlite3_stmt *stmt =
        trace_query(t, "SELECT module_id, path, start_addr, end_addr FROM modules", "");
    if (!stmt)
        return -1;
    size_t cap = 0;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        if (col_is_null(stmt, 2) || col_is_null(stmt, 3))
            continue;
        s->modules = xgrow(s->modules, &cap, s->nmodules + 1, sizeof(*s->modules));
        struct module_range *r = &s->modules[s->nmodules++];
        r->id = col_int(stmt, 0, 0);
        r->start = col_int(stmt, 2, 0);
        r->end = col_int(stmt, 3, 0);
        const char *path = (const char *)sqlite3_column_text(stmt, 1);
        r->nccl = is_nccl_library(path);
        char *name = module_display_name(path);
        r->name = strtab_id(&s->L->modules, name);
        free(name);
    }
    sqlite3_finalize(stmt);
    if (s->nmodules > 1)
        qsort(s->modules, s->nmodules, sizeof(*s->modules), compare_modules);
    return rc;
}

/* The module holding a return address, NULL if none. Modules of a
 * process do not overlap; for a damaged table that makes them overlap, the
 * few ranges starting just below are tried too. */
static const struct module_range *module_at(const struct pass *s, int64_t caller)
{
    if (!s->nmodules || !caller)
        return NULL;
    size_t lo = 0, hi = s->nmodules;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->modules[mid].start <= caller)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo, tries = 0; i > 0 && tries < 16; i--, tries++)
        if (caller >= s->modules[i - 1].start && caller < s->modules[i - 1].end)
            return &s->modules[i - 1];
    return NULL;
}

static enum role role_from_text(const char *role)
{
    static const struct {
        const char *text;
        enum role role;
    } roles[] = {
        {"alloc", ROLE_ALLOC},
        {"free", ROLE_FREE},
        {"reset", ROLE_RESET},
        {"meminfo", ROLE_MEMINFO},
        {"ipc_export", ROLE_IPC_EXPORT},
        {"capture_begin", ROLE_CAPTURE_BEGIN},
        {"capture_end", ROLE_CAPTURE_END},
        {"comm_init", ROLE_COMM_INIT},
        {"collective", ROLE_COLLECTIVE},
        {"p2p", ROLE_COLLECTIVE},
        {"lookup", ROLE_LOOKUP},
    };
    for (size_t i = 0; role && i < sizeof(roles) / sizeof(roles[0]); i++)
        if (strcmp(role, roles[i].text) == 0)
            return roles[i].role;
    return ROLE_OTHER;
}

static enum gm_kind kind_from_text(const char *kind)
{
    static const char *const kinds[] = {"device",   "managed", "vmm",    "host",
                                        "vmm_host", "ipc",     "reserve"};
    for (int k = 0; kind && k < (int)(sizeof(kinds) / sizeof(kinds[0])); k++)
        if (strcmp(kind, kinds[k]) == 0)
            return (enum gm_kind)k;
    return GM_KIND_OTHER;
}

static bool is_gpu_kind(enum gm_kind kind)
{
    return kind == GM_KIND_DEVICE || kind == GM_KIND_MANAGED || kind == GM_KIND_VMM;
}

static void load_apis(struct pass *s)
{
    const struct trace *t = s->p->trace;
    s->infos = xcalloc(t->napis ? t->napis : 1, sizeof(*s->infos));
    s->name_info = xcalloc(t->napis ? t->napis : 1, sizeof(*s->name_info));
    for (size_t i = 0; i < t->napis; i++) {
        const struct trace_api *a = &t->apis[i];
        struct api_info *info = &s->infos[i];
        /* The calls view names each call's api: the first row of a name wins. */
        size_t before = s->names.count;
        uint32_t index = strtab_id(&s->names, a->name);
        if (s->names.count == before)
            continue;
        s->name_info[index] = (uint32_t)i;
        info->role = role_from_text(a->role);
        info->null_role = !a->role;
        info->role_id = strtab_id(&s->roles, a->role);
        info->space_id = strtab_id(&s->spaces, a->space);
        info->resettable =
            a->space && (strcmp(a->space, "device") == 0 || strcmp(a->space, "host") == 0 ||
                         strcmp(a->space, "ipc") == 0);
        info->ipc_space = a->space && strcmp(a->space, "ipc") == 0;
        info->kind = kind_from_text(a->kind);
        info->name = strtab_id(&s->L->apis, a->name);
        info->layer = (uint8_t)result_layer_from_name(a->layer);
        info->nccl = (uint8_t)cc_role_of(a);
    }
    s->device_space = strtab_find(&s->spaces, "device");
}

/* The info of an api name of this trace, NULL if the apis table lacks it. */
static const struct api_info *api_of(const struct pass *s, const char *name)
{
    uint32_t index = strtab_find(&s->names, name);
    return index == GM_NONE ? NULL : &s->infos[s->name_info[index]];
}

/* ---- GPUs ---- */

static uint32_t clock_of(struct loader *L, const struct gm_process *p)
{
    char *key = xasprintf("%s%c%s", p->host, '\x1f', p->boot_id);
    uint32_t id = strtab_id(&L->clocks, key);
    free(key);
    return id;
}

/* The model-wide GPU for a key on a clock, made on first use. */
static uint32_t gpu_entry(struct loader *L, uint32_t clock, const char *uuid, const char *key,
                          const struct devrow *row, int64_t ordinal)
{
    const char *name = row ? row->name : "";
    const char *pci_bus_id = row ? row->pci_bus_id : "";
    int64_t total = row ? row->total : -1;
    for (size_t i = 0; i < L->ngpus; i++)
        if (L->gpus[i].gpu.clock == clock && strcmp(L->gpus[i].gpu.key, key) == 0) {
            struct gm_gpu *g = &L->gpus[i].gpu;
            if (!g->name[0] && name && name[0]) {
                free(g->name);
                g->name = xstrdup(name);
            }
            if (g->total < 0 && total >= 0)
                g->total = total;
            if (!g->pci_bus_id[0] && pci_bus_id[0]) {
                free(g->pci_bus_id);
                g->pci_bus_id = xstrdup(pci_bus_id);
            }
            return (uint32_t)i;
        }
    L->gpus = xgrow(L->gpus, &L->gpus_cap, L->ngpus + 1, sizeof(*L->gpus));
    struct gpu_entry *e = &L->gpus[L->ngpus];
    memset(e, 0, sizeof(*e));
    e->gpu.uuid = uuid ? xstrdup(uuid) : NULL;
    e->gpu.key = xstrdup(key);
    e->gpu.name = xstrdup(name ? name : "");
    e->gpu.pci_bus_id = xstrdup(pci_bus_id);
    e->gpu.total = total;
    e->gpu.ordinal = ordinal;
    e->gpu.clock = clock;
    return (uint32_t)L->ngpus++;
}

/* The GPU of a call's device ordinal (GM_PENDING for -1). */
static uint32_t gpu_of(struct pass *s, int64_t ordinal)
{
    if (ordinal < 0)
        return GM_PENDING;
    for (size_t i = 0; i < s->ndevmap; i++)
        if (s->devmap[i].ordinal == ordinal)
            return s->devmap[i].gpu;
    uint32_t gpu = GM_NONE;
    if (s->ndevmap >= MAX_DEVICES) {
        s->x->many_devices = true;
    } else {
        const struct devrow *row = NULL;
        for (size_t i = 0; i < s->ndevrows; i++)
            if (s->devrows[i].ordinal == ordinal)
                row = &s->devrows[i];
        if (row && row->uuid) {
            gpu = gpu_entry(s->L, s->p->clock, row->uuid, row->uuid, row, ordinal);
        } else {
            char *key = xasprintf("%s/device %" PRId64, s->p->host[0] ? s->p->host : "?", ordinal);
            gpu = gpu_entry(s->L, s->p->clock, NULL, key, row, ordinal);
            free(key);
            s->x->devices_without_uuid++;
        }
    }
    s->devmap = xgrow(s->devmap, &s->devmap_cap, s->ndevmap + 1, sizeof(*s->devmap));
    s->devmap[s->ndevmap++] = (struct devmap){ordinal, gpu};
    return gpu;
}

/* ---- the (space, ptr) map ---- */

static uint64_t slot_hash(uint32_t space, int64_t ptr)
{
    uint64_t h = (uint64_t)ptr * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)space * 0xc2b2ae3d27d4eb4full;
    return h ^ (h >> 29);
}

static struct slot *map_slot(struct pass *s, uint32_t space, int64_t ptr, bool create)
{
    if (create && (s->nmap_used + 1) * 2 > s->nmap_slots) {
        size_t n = s->nmap_slots ? s->nmap_slots * 2 : 1024;
        struct slot *old = s->map;
        size_t nold = s->nmap_slots;
        s->map = xcalloc(n, sizeof(*s->map));
        s->nmap_slots = n;
        for (size_t i = 0; i < nold; i++) {
            if (!old[i].used)
                continue;
            size_t j = slot_hash(old[i].space, old[i].ptr) & (n - 1);
            while (s->map[j].used)
                j = (j + 1) & (n - 1);
            s->map[j] = old[i];
        }
        free(old);
    }
    if (!s->nmap_slots)
        return NULL;
    size_t i = slot_hash(space, ptr) & (s->nmap_slots - 1);
    while (s->map[i].used) {
        if (s->map[i].space == space && s->map[i].ptr == ptr)
            return &s->map[i];
        i = (i + 1) & (s->nmap_slots - 1);
    }
    if (!create)
        return NULL;
    s->map[i] = (struct slot){.ptr = ptr, .space = space, .used = true, .value = -1};
    s->nmap_used++;
    return &s->map[i];
}

/* ---- events and allocations ---- */

static uint32_t add_event(struct pass *s, enum gm_event_type type, int64_t seq, int64_t t_ns,
                          uint32_t gpu, uint32_t api, int64_t a, int64_t b, uint8_t layer)
{
    struct gm_process *p = s->p;
    assert(p->nevents < UINT32_MAX - 2);
    p->events = xgrow(p->events, &s->events_cap, p->nevents + 1, sizeof(*p->events));
    p->events[p->nevents] = (struct gm_event){.seq = seq,
                                              .t_ns = t_ns,
                                              .a = a,
                                              .b = b,
                                              .gpu = gpu,
                                              .api = api,
                                              .type = (uint8_t)type,
                                              .layer = layer};
    return (uint32_t)p->nevents++;
}

static void live_add(struct pass *s, uint32_t index, bool resettable)
{
    s->live_slot = xgrow(s->live_slot, &s->live_slot_cap, index + 1, sizeof(*s->live_slot));
    s->resettable = xgrow(s->resettable, &s->resettable_cap, index + 1, sizeof(*s->resettable));
    s->live = xgrow(s->live, &s->live_cap, s->nlive + 1, sizeof(*s->live));
    s->live_slot[index] = (uint32_t)s->nlive;
    s->resettable[index] = resettable;
    s->live[s->nlive++] = index;
}

static void live_remove(struct pass *s, uint32_t index)
{
    uint32_t slot = s->live_slot[index];
    assert(slot < s->nlive && s->live[slot] == index);
    uint32_t moved = s->live[--s->nlive];
    s->live[slot] = moved;
    s->live_slot[moved] = slot;
    s->live_slot[index] = GM_NONE;
}

static bool is_live(const struct pass *s, int64_t index)
{
    return index >= 0 && (size_t)index < s->p->nallocs && s->p->allocs[index].end_event == GM_NONE;
}

/* Ends a live allocation at this call: how 1 = reset, 2 = implicit, 0 = free. */
static void end_alloc(struct pass *s, uint32_t index, int64_t seq, int64_t t_ns, uint32_t api,
                      int how)
{
    struct gm_alloc *a = &s->p->allocs[index];
    assert(a->end_event == GM_NONE);
    a->free_seq = seq;
    a->end_event = add_event(s, GM_EV_FREE, seq, t_ns, a->gpu, api, index, how, 0);
    live_remove(s, index);
}

struct call_row {
    int64_t seq, t_ns, dur_ns, device, ptr, size, result, parent_seq;
    int64_t arg0, arg1, arg2, arg3, caller;
    int64_t order; /* calls.effect_order, never below 2 * seq */
    bool nested, has_parent;
    bool logical; /* not a second sighting of its parent's event (logical_events) */
    const struct api_info *info;
};

static void on_alloc(struct pass *s, const struct call_row *c, uint32_t gpu)
{
    const struct api_info *info = c->info;
    struct gm_process *p = s->p;
    enum gm_kind kind = info->kind;
    /* cuMemCreate at a host location is not GPU memory (the mem_events view). */
    if (kind == GM_KIND_VMM && c->arg1 != 1)
        kind = GM_KIND_VMM_HOST;
    struct slot *slot = map_slot(s, info->space_id, c->ptr, true);
    if (is_live(s, slot->value)) /* handed out again without a traced free */
        end_alloc(s, (uint32_t)slot->value, c->seq, c->t_ns, info->name, 2);
    assert(p->nallocs < UINT32_MAX - 2);
    p->allocs = xgrow(p->allocs, &s->allocs_cap, p->nallocs + 1, sizeof(*p->allocs));
    uint32_t index = (uint32_t)p->nallocs++;
    struct gm_alloc *a = &p->allocs[index];
    /* NCCL's own buffers: made by libnccl, or through ncclMemAlloc. The
     * final category is decided once every trace is loaded: an export may
     * come later. */
    const struct module_range *module = module_at(s, c->caller);
    bool nccl =
        (module && module->nccl) || strcmp(s->L->apis.strings[info->name], "ncclMemAlloc") == 0;
    *a = (struct gm_alloc){.seq = c->seq,
                           .t_ns = c->t_ns,
                           .ptr = c->ptr,
                           .size = c->size > 0 ? c->size : 0,
                           .device = c->device,
                           .gpu = gpu,
                           .end_event = GM_NONE,
                           .kind = (uint8_t)kind,
                           .category = nccl ? GM_CAT_NCCL : GM_CAT_NONE,
                           .top = !c->nested,
                           .module = module ? module->name : GM_NONE};
    a->event = add_event(s, GM_EV_ALLOC, c->seq, c->t_ns, gpu, info->name, index, 0, 0);
    slot->value = index;
    live_add(s, index, info->resettable);
    if (info->ipc_space && !s->seen_open) {
        s->seen_open = true;
        add_event(s, GM_EV_IPC_OPEN, c->seq, c->t_ns, gpu, info->name, index, 0, 0);
    }
}

static void on_free(struct pass *s, const struct call_row *c)
{
    if (c->ptr == 0) /* freeing NULL does nothing, by every API's contract */
        return;
    struct slot *slot = map_slot(s, c->info->space_id, c->ptr, false);
    if (slot && is_live(s, slot->value))
        end_alloc(s, (uint32_t)slot->value, c->seq, c->t_ns, c->info->name, 0);
    else if (slot)
        s->p->double_frees++;
    else
        s->p->unknown_frees++;
}

/* A device reset ends what the device's context owned: device, host and
 * IPC memory made on that device, not VMM handles (the allocations view). */
static void on_reset(struct pass *s, const struct call_row *c)
{
    for (size_t i = 0; i < s->nlive;) {
        uint32_t index = s->live[i];
        if (s->resettable[index] && s->p->allocs[index].device == c->device) {
            end_alloc(s, index, c->seq, c->t_ns, c->info->name, 1);
            continue; /* live[i] now holds another allocation */
        }
        i++;
    }
}

static void on_export(struct pass *s, const struct call_row *c, uint32_t gpu)
{
    uint32_t found = GM_NONE;
    if (s->device_space != GM_NONE) {
        struct slot *slot = map_slot(s, s->device_space, c->ptr, false);
        if (slot && is_live(s, slot->value))
            found = (uint32_t)slot->value;
    }
    /* A handle of a pointer inside an allocation shares that allocation. */
    for (size_t i = 0; found == GM_NONE && i < s->nlive && !s->x->scan_capped; i++) {
        const struct gm_alloc *a = &s->p->allocs[s->live[i]];
        if (++s->scanned > MAX_CONTAINMENT_SCAN)
            s->x->scan_capped = true;
        else if ((a->kind == GM_KIND_DEVICE || a->kind == GM_KIND_MANAGED) &&
                 (uint64_t)c->ptr >= (uint64_t)a->ptr &&
                 (uint64_t)c->ptr - (uint64_t)a->ptr < (uint64_t)a->size)
            found = s->live[i];
    }
    if (found != GM_NONE) {
        s->p->allocs[found].exported = true;
        struct loader *L = s->L;
        L->exports = xgrow(L->exports, &L->exports_cap, L->nexports + 1, sizeof(*L->exports));
        L->exports[L->nexports++] =
            (struct handle_use){.handle = GM_NONE, .proc = s->p, .alloc = found, .seq = c->seq};
    }
    if (!s->seen_export) {
        s->seen_export = true;
        add_event(s, GM_EV_IPC_EXPORT, c->seq, c->t_ns, gpu, c->info->name,
                  found == GM_NONE ? -1 : (int64_t)found, 0, 0);
    }
}

static void on_comm_init(struct pass *s, const struct call_row *c, uint32_t gpu)
{
    struct gm_process *p = s->p;
    /* The communicators view leaves out a "successful" init without a handle. */
    if (c->result == 0 && c->arg0 == 0)
        return;
    p->comms = xgrow(p->comms, &s->comms_cap, p->ncomms + 1, sizeof(*p->comms));
    p->comms[p->ncomms] = (struct gm_comm){.seq = c->seq,
                                           .t_ns = c->t_ns,
                                           .nranks = c->arg1,
                                           .rank = c->arg2,
                                           .result = c->result,
                                           .hash = (uint64_t)c->arg3,
                                           .gpu = gpu};
    add_event(s, GM_EV_COMM_INIT, c->seq, c->t_ns, gpu, c->info->name, (int64_t)p->ncomms, 0,
              c->info->layer);
    p->ncomms++;
}

/* The role id of the call with that seq among those read so far. */
static bool parent_role(const struct pass *s, int64_t seq, uint32_t *role, bool *memory)
{
    size_t lo = 0, hi = s->nseqs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->seqs[mid] < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == s->nseqs || s->seqs[lo] != seq)
        return false;
    *role = s->seq_roles[lo];
    *memory = s->seq_memory[lo] != 0;
    return true;
}

static bool is_memory_role(enum role role)
{
    return role == ROLE_ALLOC || role == ROLE_FREE || role == ROLE_RESET;
}

/* In seq order, as read: what needs the calls before it (the parent's
 * role) and the process's totals. */
static void note_call(struct pass *s, struct call_row *c)
{
    struct gm_process *p = s->p;
    const struct api_info *info = c->info;
    /* logical_events: a call made inside a traced call of the same role (or
     * a memory call inside a memory call) is the same event seen twice. A
     * parent that is not in the trace (or comes later: a damaged trace)
     * counts as absent. */
    c->logical = true;
    uint32_t prole;
    bool pmemory;
    if (c->has_parent && parent_role(s, c->parent_seq, &prole, &pmemory) && prole != GM_NONE)
        c->logical = !((!info->null_role && prole == info->role_id) ||
                       (pmemory && is_memory_role(info->role)));

    if (s->nseqs == 0 || c->seq > s->seqs[s->nseqs - 1]) {
        s->seqs = xgrow(s->seqs, &s->seqs_cap, s->nseqs + 1, sizeof(*s->seqs));
        s->seq_roles = xgrow(s->seq_roles, &s->seq_roles_cap, s->nseqs + 1, sizeof(*s->seq_roles));
        s->seq_memory =
            xgrow(s->seq_memory, &s->seq_memory_cap, s->nseqs + 1, sizeof(*s->seq_memory));
        s->seqs[s->nseqs] = c->seq;
        s->seq_roles[s->nseqs] = info->null_role ? GM_NONE : info->role_id;
        s->seq_memory[s->nseqs] = is_memory_role(info->role);
        s->nseqs++;
    }

    p->calls++;
    int64_t end = gm_add(c->t_ns, c->dur_ns > 0 ? c->dur_ns : 0);
    if (!p->has_calls || c->t_ns < p->first_t_ns)
        p->first_t_ns = c->t_ns;
    if (!p->has_calls || end > p->last_end_ns)
        p->last_end_ns = end;
    p->last_seq = c->seq;
    p->has_calls = true;
}

/* In effect order: the events and allocations the call makes. */
static void apply_call(struct pass *s, const struct call_row *c)
{
    struct gm_process *p = s->p;
    const struct api_info *info = c->info;
    bool logical = c->logical;

    /* The first call of the process, and its first call on each GPU. */
    uint32_t gpu = gpu_of(s, c->device);
    bool first = !s->seen_call;
    if (!first && gpu != GM_PENDING && gpu != GM_NONE) {
        first = true;
        for (size_t i = 0; first && i < s->nfirst; i++)
            first = s->first_call_gpus[i] != gpu;
    }
    if (first && gpu != GM_NONE) {
        s->first_call_gpus =
            xgrow(s->first_call_gpus, &s->first_cap, s->nfirst + 1, sizeof(uint32_t));
        s->first_call_gpus[s->nfirst++] = gpu;
        add_event(s, GM_EV_FIRST_CALL, c->seq, c->t_ns, gpu, info->name, 0, 0, 0);
    }
    s->seen_call = true;

    bool ok = c->result == 0;
    switch (info->role) {
    case ROLE_ALLOC:
        if (logical && ok)
            on_alloc(s, c, gpu);
        break;
    case ROLE_FREE:
        if (logical && ok)
            on_free(s, c);
        break;
    case ROLE_RESET:
        if (logical && ok)
            on_reset(s, c);
        break;
    case ROLE_MEMINFO:
        /* A measurement is a top-level query: a nested one is the same answer. */
        if (logical && ok && !c->nested) {
            add_event(s, GM_EV_MEASURE, c->seq, c->t_ns, gpu, info->name, c->arg0 > 0 ? c->arg0 : 0,
                      c->arg1 > 0 ? c->arg1 : 0, 0);
            p->measurements++;
        }
        break;
    case ROLE_IPC_EXPORT:
        if (logical && ok)
            on_export(s, c, gpu);
        break;
    case ROLE_CAPTURE_BEGIN:
    case ROLE_CAPTURE_END:
        if (logical && ok)
            add_event(s, info->role == ROLE_CAPTURE_BEGIN ? GM_EV_CAPTURE_BEGIN : GM_EV_CAPTURE_END,
                      c->seq, c->t_ns, gpu, info->name, 0, 0, 0);
        break;
    case ROLE_COMM_INIT:
        on_comm_init(s, c, gpu);
        break;
    case ROLE_COLLECTIVE:
        if (ok && !s->seen_collective) {
            s->seen_collective = true;
            add_event(s, GM_EV_COLLECTIVE, c->seq, c->t_ns, gpu, info->name, 0, 0, 0);
        }
        break;
    default:
        break;
    }
    /* Failed calls, except failed lookups (how libraries probe for driver
     * features) and failed inits (their own milestone says so). */
    if (!ok && logical && info->role != ROLE_LOOKUP && info->role != ROLE_COMM_INIT)
        add_event(s, GM_EV_FAILED, c->seq, c->t_ns, gpu, info->name, c->result,
                  c->size > 0 ? c->size : 0, info->layer);
}

/* ---- effect order ---- */

/* Calls read but not yet applied, least (order, seq) first. */
struct pending {
    struct call_row *rows;
    size_t count, cap;
};

static bool applies_before(const struct call_row *a, const struct call_row *b)
{
    return a->order != b->order ? a->order < b->order : a->seq < b->seq;
}

static void pending_push(struct pending *h, const struct call_row *row)
{
    h->rows = xgrow(h->rows, &h->cap, h->count + 1, sizeof(*h->rows));
    size_t i = h->count++;
    while (i > 0 && applies_before(row, &h->rows[(i - 1) / 2])) {
        h->rows[i] = h->rows[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->rows[i] = *row;
}

static struct call_row pending_pop(struct pending *h)
{
    assert(h->count > 0);
    struct call_row top = h->rows[0];
    struct call_row last = h->rows[--h->count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->count)
            break;
        if (child + 1 < h->count && applies_before(&h->rows[child + 1], &h->rows[child]))
            child++;
        if (!applies_before(&h->rows[child], &last))
            break;
        h->rows[i] = h->rows[child];
        i = child;
    }
    if (h->count > 0)
        h->rows[i] = last;
    return top;
}

/* floor(v / 2), for the untrusted orders of a damaged trace too. */
static int64_t half_down(int64_t v)
{
    return v >= 0 ? v / 2 : -((-(v + 1)) / 2) - 1;
}

/*
 * Calls come in seq order, and no call takes effect before 2 * its seq
 * (schema.h), so once the call with seq s is read every pending call whose
 * order is below 2 * (s + 1) is due: no later row can come before it.
 */
static void apply_due(struct pass *s, struct pending *h, int64_t read_up_to)
{
    while (h->count > 0 && half_down(h->rows[0].order) <= read_up_to) {
        struct call_row c = pending_pop(h);
        apply_call(s, &c);
    }
}

/* What the NCCL calls' loader reads, by position in read_calls' query. */
static const struct cc_columns nccl_columns = {.size = 6,
                                               .dur_ns = 2,
                                               .result = 7,
                                               .arg0 = 10,
                                               .arg2 = 12,
                                               .arg4 = 16,
                                               .arg6 = 17,
                                               .arg7 = 18};

static int read_calls(struct pass *s)
{
    struct trace *t = (struct trace *)s->p->trace;
    /* Format 5 and older: every call takes effect at its seq, as their views pair. */
    const char *order = trace_has_effect_order(t) ? "effect_order" : "2 * seq";
    char *sql = xasprintf("SELECT seq, t_ns, dur_ns, api, device, ptr, size, result, nested,"
                          " parent_seq, arg0, arg1, arg2, arg3, %s, %s, %s FROM calls ORDER BY seq",
                          s->p->modules ? "caller" : "NULL", order,
                          /* Format 1 had four arguments and no NCCL. */
                          t->format_version >= 2 ? "arg4, arg6, arg7" : "NULL, NULL, NULL");
    sqlite3_stmt *stmt = trace_query(t, sql, "");
    free(sql);
    if (!stmt)
        return -1;
    int rc;
    int64_t last_t = 0;
    struct pending due = {0};
    while ((rc = trace_step(t, stmt)) == 1) {
        if (col_is_null(stmt, 0))
            continue;
        struct call_row c = {
            .seq = col_int(stmt, 0, 0),
            .t_ns = col_int(stmt, 1, last_t),
            .dur_ns = col_int(stmt, 2, 0),
            .device = col_int(stmt, 4, -1),
            .ptr = col_int(stmt, 5, 0),
            .size = col_int(stmt, 6, 0),
            .result = col_int(stmt, 7, 0),
            .nested = col_int(stmt, 8, 0) != 0,
            .has_parent = !col_is_null(stmt, 9),
            .parent_seq = col_int(stmt, 9, 0),
            .arg0 = col_int(stmt, 10, 0),
            .arg1 = col_int(stmt, 11, 0),
            .arg2 = col_int(stmt, 12, 0),
            .arg3 = col_int(stmt, 13, 0),
            .caller = col_int(stmt, 14, 0),
            .order = col_int(stmt, 15, 0),
        };
        c.info = api_of(s, (const char *)sqlite3_column_text(stmt, 3));
        if (!c.info)
            continue;
        if (c.info->nccl != CC_NONE)
            cc_read_call(&s->p->nccl_calls, c.info->nccl, c.info->name, c.seq, stmt, &nccl_columns);
        last_t = c.t_ns;
        int64_t earliest = gm_add(c.seq, c.seq);
        if (c.order < earliest) /* NULL, or a damaged trace's */
            c.order = earliest;
        note_call(s, &c);
        pending_push(&due, &c);
        apply_due(s, &due, c.seq);
    }
    sqlite3_finalize(stmt);
    apply_due(s, &due, INT64_MAX);
    free(due.rows);
    return rc;
}

static int compare_by_seq(const void *a, const void *b, void *arg)
{
    const struct gm_alloc *allocs = arg;
    int64_t x = allocs[*(const uint32_t *)a].seq, y = allocs[*(const uint32_t *)b].seq;
    return (x > y) - (x < y);
}

/* The allocation made by call seq: allocs are in effect order, so by an
 * index sorted by seq (made on first use, in *by_seq). GM_NONE if none. */
static uint32_t alloc_of_call(const struct gm_process *p, uint32_t **by_seq, int64_t seq)
{
    if (!*by_seq) {
        *by_seq = xcalloc(p->nallocs ? p->nallocs : 1, sizeof(**by_seq));
        for (size_t i = 0; i < p->nallocs; i++)
            (*by_seq)[i] = (uint32_t)i;
        if (p->nallocs > 1)
            qsort_r(*by_seq, p->nallocs, sizeof(**by_seq), compare_by_seq, p->allocs);
    }
    size_t lo = 0, hi = p->nallocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->allocs[(*by_seq)[mid]].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->nallocs && p->allocs[(*by_seq)[lo]].seq == seq ? (*by_seq)[lo] : GM_NONE;
}

/* Exports and opens from the ipc view: the handle names what was shared. */
static int read_ipc(struct pass *s, size_t first_export)
{
    struct trace *t = (struct trace *)s->p->trace;
    struct loader *L = s->L;
    sqlite3_stmt *stmt =
        trace_query(t, "SELECT seq, api, handle_hex, result FROM ipc ORDER BY seq", "");
    if (!stmt)
        return -1;
    size_t next_export = first_export;
    uint32_t *by_seq = NULL;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        const struct api_info *info = api_of(s, (const char *)sqlite3_column_text(stmt, 1));
        const char *hex = (const char *)sqlite3_column_text(stmt, 2);
        if (!info || !hex || !hex[0] || col_int(stmt, 3, 1) != 0 || col_is_null(stmt, 0))
            continue;
        int64_t seq = col_int(stmt, 0, 0);
        if (info->role == ROLE_IPC_EXPORT) {
            /* The exports the calls pass tied to an allocation, in seq order. */
            while (next_export < L->nexports && L->exports[next_export].seq < seq)
                next_export++;
            if (next_export < L->nexports && L->exports[next_export].seq == seq)
                L->exports[next_export++].handle = strtab_id(&L->handles, hex);
        } else if (info->role == ROLE_ALLOC && info->kind == GM_KIND_IPC) {
            uint32_t a = alloc_of_call(s->p, &by_seq, seq);
            if (a == GM_NONE)
                continue;
            L->opens = xgrow(L->opens, &L->opens_cap, L->nopens + 1, sizeof(*L->opens));
            L->opens[L->nopens++] = (struct handle_use){
                .handle = strtab_id(&L->handles, hex), .proc = s->p, .alloc = a, .seq = seq};
        }
    }
    sqlite3_finalize(stmt);
    free(by_seq);
    return rc;
}

static void pass_free(struct pass *s)
{
    free(s->infos);
    free(s->name_info);
    free(s->resettable);
    strtab_free(&s->names, false);
    strtab_free(&s->roles, false);
    strtab_free(&s->spaces, false);
    free(s->modules);
    free(s->seqs);
    free(s->seq_roles);
    free(s->seq_memory);
    free(s->map);
    free(s->live);
    free(s->live_slot);
    free(s->devmap);
    for (size_t i = 0; i < s->ndevrows; i++) {
        free(s->devrows[i].uuid);
        free(s->devrows[i].name);
        free(s->devrows[i].pci_bus_id);
    }
    free(s->devrows);
    free(s->first_call_gpus);
}

/* Events on no known device (device -1: before any device was current) go
 * to the process's only GPU; with several, to none. */
static void resolve_pending(struct pass *s)
{
    struct gm_process *p = s->p;
    uint32_t only = GM_NONE;
    size_t distinct = 0;
    for (size_t i = 0; i < s->ndevmap; i++)
        if (s->devmap[i].gpu != GM_NONE && s->devmap[i].gpu != only) {
            only = s->devmap[i].gpu;
            distinct++;
        }
    if (distinct == 0 && s->ndevrows == 1 && s->devrows[0].uuid)
        only = gpu_of(s, s->devrows[0].ordinal);
    else if (distinct != 1)
        only = GM_NONE;
    for (size_t i = 0; i < p->nevents; i++) {
        if (p->events[i].gpu == GM_PENDING)
            p->events[i].gpu = only;
        if (p->events[i].gpu == GM_NONE)
            s->x->no_gpu_events++;
    }
    for (size_t i = 0; i < p->nallocs; i++)
        if (p->allocs[i].gpu == GM_PENDING)
            p->allocs[i].gpu = only;
    for (size_t i = 0; i < p->ncomms; i++)
        if (p->comms[i].gpu == GM_PENDING)
            p->comms[i].gpu = only;
}

static int load_trace(struct loader *L, struct gm_process *p, struct proc_extra *x)
{
    struct pass s = {.L = L, .p = p, .x = x, .device_space = GM_NONE};
    x->format_version = (int)p->trace->format_version;
    int rc = load_process_row(&s);
    if (rc == 0) {
        p->end_state = p->trace->end_state;
        p->exited = p->end_state &&
                    (strcmp(p->end_state, "exit") == 0 || strcmp(p->end_state, "_exit") == 0 ||
                     strcmp(p->end_state, "exec") == 0);
        p->clock = clock_of(L, p);
        load_apis(&s);
        rc = load_devices(&s);
    }
    if (rc == 0)
        rc = load_modules(&s);
    if (rc == 0 && trace_effect_order_check((struct trace *)p->trace) < 0)
        rc = -1;
    size_t first_export = L->nexports;
    if (rc == 0)
        rc = read_calls(&s);
    if (rc == 0) {
        resolve_pending(&s);
        rc = read_ipc(&s, first_export);
    }
    pass_free(&s);
    return rc;
}

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
        if (is_gpu_kind(kind) && a->category == GM_CAT_NCCL)
            c = GM_CAT_NCCL;
        else if (is_gpu_kind(kind) && a->exported)
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
        p->gpus = resize(p->gpus, p->ngpus + 1, sizeof(*p->gpus));
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
                    gpu->procs = resize(gpu->procs, gpu->nprocs + 1, sizeof(uint32_t));
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

int gm_load(struct gm_model *m, struct trace_set *set)
{
    memset(m, 0, sizeof(*m));
    struct loader L = {.m = m};
    m->nprocs = set->count;
    m->procs = xcalloc(set->count ? set->count : 1, sizeof(*m->procs));
    L.extra = xcalloc(set->count ? set->count : 1, sizeof(*L.extra));
    int rc = 0;
    for (size_t i = 0; i < set->count && rc == 0; i++) {
        m->procs[i].trace = &set->traces[i];
        rc = load_trace(&L, &m->procs[i], &L.extra[i]);
        if (rc != 0)
            trace_report_error(&set->traces[i]);
    }
    m->apis = L.apis.strings;
    m->napis = L.apis.count;
    strtab_free(&L.apis, true);
    m->modules = L.modules.strings;
    m->nmodules = L.modules.count;
    strtab_free(&L.modules, true);
    if (rc == 0) {
        size_mappings(&L);
        for (size_t i = 0; i < m->nprocs; i++) {
            decide_categories(&m->procs[i]);
            decide_rank(&m->procs[i]);
        }
        /* Report order; the extras move along. */
        struct gm_process *sorted = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*sorted));
        memcpy(sorted, m->procs, m->nprocs * sizeof(*sorted));
        if (m->nprocs > 1)
            qsort(sorted, m->nprocs, sizeof(*sorted), compare_procs);
        struct proc_extra *extra = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*extra));
        uint32_t *new_index = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*new_index));
        for (size_t i = 0; i < m->nprocs; i++)
            for (size_t k = 0; k < m->nprocs; k++)
                if (m->procs[k].trace == sorted[i].trace) {
                    extra[i] = L.extra[k];
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
        free(L.extra);
        m->procs = sorted;
        L.extra = extra;
        order_gpus(&L);
        for (size_t i = 0; i < m->nprocs; i++)
            finish_process_events(m, (uint32_t)i);
        build_streams(m);
        add_notes(m, &L);
    } else {
        /* Hand what was made to the model so gm_free releases it. */
        m->ngpus = L.ngpus;
        m->gpus = xcalloc(L.ngpus ? L.ngpus : 1, sizeof(*m->gpus));
        for (size_t i = 0; i < L.ngpus; i++)
            m->gpus[i] = L.gpus[i].gpu;
    }
    free(L.gpus);
    strtab_free(&L.clocks, false);
    strtab_free(&L.handles, false);
    free(L.exports);
    free(L.opens);
    free(L.extra);
    if (rc != 0) {
        gm_free(m);
        return -1;
    }
    return 0;
}

void gm_free(struct gm_model *m)
{
    for (size_t i = 0; i < m->nprocs; i++) {
        struct gm_process *p = &m->procs[i];
        free(p->host);
        free(p->boot_id);
        free(p->cmdline);
        free(p->allocs);
        free(p->events);
        free(p->comms);
        free(p->gpus);
        cc_calls_free(&p->nccl_calls);
    }
    free(m->procs);
    for (size_t i = 0; i < m->ngpus; i++) {
        free(m->gpus[i].uuid);
        free(m->gpus[i].key);
        free(m->gpus[i].name);
        free(m->gpus[i].pci_bus_id);
        free(m->gpus[i].stream);
        free(m->gpus[i].procs);
    }
    free(m->gpus);
    for (size_t i = 0; i < m->nclocks; i++) {
        free(m->clocks[i].host);
        free(m->clocks[i].boot_id);
    }
    free(m->clocks);
    for (size_t i = 0; i < m->napis; i++)
        free(m->apis[i]);
    free(m->apis);
    for (size_t i = 0; i < m->nnotes; i++)
        free(m->notes[i]);
    free(m->notes);
    for (size_t i = 0; i < m->nmodules; i++)
        free(m->modules[i]);
    free(m->modules);
    free(m->ipc_links);
    memset(m, 0, sizeof(*m));
}

/* ---- walking a GPU's stream ---- */

void gm_walk_init(struct gm_walk *w, const struct gm_model *m, uint32_t gpu)
{
    assert(gpu < m->ngpus);
    memset(w, 0, sizeof(*w));
    w->m = m;
    w->gpu = gpu;
    w->proc_live = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*w->proc_live));
}

void gm_walk_free(struct gm_walk *w)
{
    free(w->proc_live);
    memset(w, 0, sizeof(*w));
}

static void live_sub(int64_t *live, int64_t size)
{
    *live = gm_sub(*live, size);
    if (*live < 0) /* only through saturation on garbage sizes */
        *live = 0;
}

const struct gm_ref *gm_walk_step(struct gm_walk *w)
{
    const struct gm_gpu *g = &w->m->gpus[w->gpu];
    if (w->next >= g->nstream)
        return NULL;
    const struct gm_ref *ref = &g->stream[w->next++];
    const struct gm_process *p = &w->m->procs[ref->proc];
    const struct gm_event *e = &p->events[ref->event];
    int64_t *mine = w->proc_live[ref->proc];
    switch (e->type) {
    case GM_EV_ALLOC:
    case GM_EV_FREE: {
        assert(e->a >= 0 && (size_t)e->a < p->nallocs);
        const struct gm_alloc *a = &p->allocs[e->a];
        if (a->category >= GM_CATEGORIES || a->gpu != w->gpu)
            break;
        if (e->type == GM_EV_ALLOC) {
            w->live[a->category] = gm_add(w->live[a->category], a->size);
            mine[a->category] = gm_add(mine[a->category], a->size);
        } else {
            live_sub(&w->live[a->category], a->size);
            live_sub(&mine[a->category], a->size);
        }
        break;
    }
    case GM_EV_END:
        /* The driver frees what an exiting process still held. */
        if (e->a)
            for (int c = 0; c < GM_CATEGORIES; c++) {
                live_sub(&w->live[c], mine[c]);
                mine[c] = 0;
            }
        break;
    default:
        break;
    }
    return ref;
}

uint64_t gm_alloc_end_pos(const struct gm_process *p, const struct gm_alloc *a)
{
    if (a->end_event == GM_NONE)
        return UINT64_MAX;
    assert(a->end_event < p->nevents);
    return p->events[a->end_event].pos;
}

/* ---- bursts and measurements ---- */

uint32_t *gm_measurements(const struct gm_model *m, uint32_t proc, uint32_t gpu, size_t *count)
{
    const struct gm_process *p = &m->procs[proc];
    uint32_t *out = xcalloc(p->nevents ? p->nevents : 1, sizeof(*out));
    size_t n = 0;
    for (size_t i = 0; i < p->nevents; i++)
        if (p->events[i].type == GM_EV_MEASURE && p->events[i].gpu == gpu)
            out[n++] = (uint32_t)i;
    *count = n;
    return out;
}

/* A top-level allocation of GPU memory on that GPU, for bursts. */
static const struct gm_alloc *burst_alloc(const struct gm_process *p, const struct gm_event *e,
                                          uint32_t gpu)
{
    if (e->type != GM_EV_ALLOC || e->gpu != gpu)
        return NULL;
    const struct gm_alloc *a = &p->allocs[e->a];
    return a->top && is_gpu_kind((enum gm_kind)a->kind) ? a : NULL;
}

/* The stretches of a process on a GPU between its measurements there. */
static struct gm_burst *stretches(const struct gm_model *m, uint32_t proc, uint32_t gpu,
                                  size_t *count)
{
    const struct gm_process *p = &m->procs[proc];
    struct gm_burst *out = NULL;
    size_t n = 0, cap = 0;
    struct gm_burst cur = {.proc = proc, .gpu = gpu, .before = GM_NONE, .after = GM_NONE};
    for (size_t i = 0; i < p->nevents; i++) {
        const struct gm_event *e = &p->events[i];
        if (e->type == GM_EV_MEASURE && e->gpu == gpu) {
            cur.after = (uint32_t)i;
            out = xgrow(out, &cap, n + 1, sizeof(*out));
            out[n++] = cur;
            cur = (struct gm_burst){
                .proc = proc, .gpu = gpu, .before = (uint32_t)i, .after = GM_NONE};
            continue;
        }
        const struct gm_alloc *a = burst_alloc(p, e, gpu);
        if (!a)
            continue;
        if (cur.count == 0)
            cur.first = (uint32_t)i;
        cur.last = (uint32_t)i;
        cur.count++;
        cur.bytes = gm_add(cur.bytes, a->size);
    }
    out = xgrow(out, &cap, n + 1, sizeof(*out));
    out[n++] = cur;
    *count = n;
    return out;
}

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The largest set of >= 2 equal sizes of >= 1 MiB among sizes[] (sorted
 * here): its bytes, count and size. */
static int64_t largest_equal_set(int64_t *sizes, size_t n, int64_t *count, int64_t *size)
{
    if (n > 1)
        qsort(sizes, n, sizeof(*sizes), compare_int64);
    int64_t best = 0;
    *count = 0;
    *size = 0;
    for (size_t i = 0; i < n;) {
        size_t k = i;
        while (k < n && sizes[k] == sizes[i])
            k++;
        int64_t c = (int64_t)(k - i);
        int64_t bytes = c > INT64_MAX / (sizes[i] ? sizes[i] : 1) ? INT64_MAX : c * sizes[i];
        if (sizes[i] >= MIB && c >= 2 && bytes >= best) {
            best = bytes;
            *count = c;
            *size = sizes[i];
        }
        i = k;
    }
    return best;
}

/* A KV cache pool: nine tenths or more one set of equal allocations. */
static bool kv_like(const struct gm_model *m, const struct gm_burst *b)
{
    const struct gm_process *p = &m->procs[b->proc];
    int64_t *sizes = xcalloc((size_t)b->count ? (size_t)b->count : 1, sizeof(*sizes));
    size_t n = 0;
    for (uint32_t i = b->first; i <= b->last && i < p->nevents && n < (size_t)b->count; i++) {
        const struct gm_alloc *a = burst_alloc(p, &p->events[i], b->gpu);
        if (a)
            sizes[n++] = a->size;
    }
    int64_t count, size;
    int64_t set = largest_equal_set(sizes, n, &count, &size);
    free(sizes);
    /* set * 10 >= bytes * 9, without overflow */
    return b->bytes > 0 && (double)set >= 0.9 * (double)b->bytes;
}

bool gm_weight_burst(const struct gm_model *m, uint32_t proc, uint32_t gpu, int64_t burst_min,
                     struct gm_burst *out)
{
    size_t n;
    struct gm_burst *s = stretches(m, proc, gpu, &n);
    size_t best = SIZE_MAX, first = SIZE_MAX, largest = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (s[i].count > 0 && (largest == SIZE_MAX || s[i].bytes > s[largest].bytes))
            largest = i;
        bool bounded = s[i].before != GM_NONE && s[i].after != GM_NONE;
        if (!bounded || s[i].count == 0 || s[i].bytes < burst_min)
            continue;
        if (first == SIZE_MAX)
            first = i;
        if (best == SIZE_MAX || s[i].bytes > s[best].bytes)
            best = i;
    }
    bool found = best != SIZE_MAX;
    if (found && best != first && kv_like(m, &s[best])) {
        size_t earlier = SIZE_MAX;
        for (size_t i = first; i < best; i++) {
            bool bounded = s[i].before != GM_NONE && s[i].after != GM_NONE;
            if (bounded && s[i].count > 0 && s[i].bytes >= burst_min &&
                (earlier == SIZE_MAX || s[i].bytes > s[earlier].bytes))
                earlier = i;
        }
        assert(earlier != SIZE_MAX);
        int64_t skipped = s[best].bytes;
        best = earlier;
        s[best].kv_like_skipped = true;
        s[best].skipped_bytes = skipped;
    }
    if (found)
        *out = s[best];
    else if (largest != SIZE_MAX)
        *out = s[largest];
    else
        *out = (struct gm_burst){.proc = proc, .gpu = gpu, .before = GM_NONE, .after = GM_NONE};
    free(s);
    return found;
}

bool gm_burst_between(const struct gm_model *m, uint32_t proc, uint32_t gpu, uint32_t from,
                      uint32_t to, struct gm_burst *out)
{
    size_t n;
    struct gm_burst *s = stretches(m, proc, gpu, &n);
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (s[i].before == GM_NONE || s[i].after == GM_NONE || s[i].before < from ||
            s[i].after > to || s[i].count == 0)
            continue;
        if (best == SIZE_MAX || s[i].bytes > s[best].bytes)
            best = i;
    }
    if (best != SIZE_MAX)
        *out = s[best];
    free(s);
    return best != SIZE_MAX;
}

uint32_t gm_main_gpu(const struct gm_model *m, uint32_t proc)
{
    const struct gm_process *p = &m->procs[proc];
    uint32_t best = GM_NONE;
    int64_t best_meas = -1, best_bytes = -1;
    for (size_t k = 0; k < p->ngpus; k++) {
        uint32_t g = p->gpus[k];
        int64_t meas = 0, bytes = 0;
        for (size_t i = 0; i < p->nevents; i++)
            if (p->events[i].gpu == g && p->events[i].type == GM_EV_MEASURE)
                meas++;
        for (size_t i = 0; i < p->nallocs; i++)
            if (p->allocs[i].gpu == g && p->allocs[i].category < GM_GPU_CATEGORIES)
                bytes = gm_add(bytes, p->allocs[i].size);
        if (meas > best_meas || (meas == best_meas && bytes > best_bytes)) {
            best = g;
            best_meas = meas;
            best_bytes = bytes;
        }
    }
    return best;
}

bool gm_equal_set_after(const struct gm_model *m, uint32_t proc, uint32_t gpu, uint32_t after,
                        int64_t *count, int64_t *size)
{
    const struct gm_process *p = &m->procs[proc];
    int64_t *sizes = xcalloc(p->nallocs ? p->nallocs : 1, sizeof(*sizes));
    size_t n = 0;
    for (size_t i = 0; i < p->nallocs; i++) {
        const struct gm_alloc *a = &p->allocs[i];
        if (a->gpu == gpu && a->event > after && a->category < GM_GPU_CATEGORIES && a->size >= MIB)
            sizes[n++] = a->size;
    }
    int64_t bytes = largest_equal_set(sizes, n, count, size);
    free(sizes);
    return bytes > 0;
}

/* ---- --gpu ---- */

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

static bool gpu_matches(const struct gm_gpu *g, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncasecmp(g->key, prefix, n) == 0)
        return true;
    return g->uuid && strncasecmp(g->uuid, "GPU-", 4) == 0 &&
           strncasecmp(g->uuid + 4, prefix, n) == 0;
}

int64_t gm_select_gpu(const struct gm_model *m, const char *arg, const char *cmd)
{
    if (all_digits(arg)) {
        char *end;
        unsigned long long index = strtoull(arg, &end, 10);
        if (*end == '\0' && index < m->ngpus)
            return (int64_t)index;
        cli_usage_error(cmd, "--gpu %s: the traces show %zu GPU%s (index 0 to %zu)", arg, m->ngpus,
                        m->ngpus == 1 ? "" : "s", m->ngpus ? m->ngpus - 1 : 0);
        return -1;
    }
    int64_t found = -1;
    size_t matches = 0;
    for (size_t i = 0; i < m->ngpus; i++)
        if (gpu_matches(&m->gpus[i], arg)) {
            if (found < 0)
                found = (int64_t)i;
            matches++;
        }
    if (matches == 1)
        return found;
    if (matches == 0)
        cli_usage_error(cmd, "--gpu %s: no GPU of these traces has that uuid", arg);
    else
        cli_usage_error(cmd, "--gpu %s: %zu GPUs match; give more of the uuid", arg, matches);
    return -1;
}
