/*
 * load.c - loading the traces of a directory into the GPU model (see
 * gpumodel.h, loader.h): per trace, in this order, the process row and env,
 * the ancestors, the devices, the apis, the modules (to tell NCCL's own buffers by the
 * library that allocated them), the one pass over the events (pairing.c,
 * which hands each row to the counters of callstats.c), the `ipc` view's
 * rows that pass kept; then, over the whole run, the last step of streams.c. A progress line
 * (out/progress.h) says how far a long load got.
 */
#include "cli.h"
#include "model/errnames.h"
#include "model/gpumodel.h"
#include "model/clocks.h"
#include "model/loader.h"
#include "model/manifest.h"
#include "model/modules.h"
#include "out/progress.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* realloc to exactly count elements; out of memory ends the process like xmalloc. */
void *ld_resize(void *array, size_t count, size_t size)
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
    m->notes = ld_resize(m->notes, m->nnotes + 1, sizeof(*m->notes));
    m->notes[m->nnotes++] = text;
}

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
    char *sql = xasprintf("SELECT pid, ppid, host, cmdline, start_wall_ns, start_mono_ns, %s,"
                          " cuda_runtime_version, cuda_driver_version, exe FROM process LIMIT 1",
                          boot ? "boot_id" : "NULL");
    sqlite3_stmt *stmt = trace_query(t, sql, "");
    free(sql);
    if (!stmt)
        return -1;
    int step = trace_step(t, stmt);
    bool has_row = step == 1;
    if (has_row) {
        struct gm_row *r = &p->row;
        r->present = true;
        r->has_pid = !col_is_null(stmt, 0);
        r->pid = col_int(stmt, 0, 0);
        r->has_ppid = !col_is_null(stmt, 1);
        r->ppid = col_int(stmt, 1, 0);
        r->host = col_text(stmt, 2);
        r->cmdline = col_text(stmt, 3);
        r->has_start_wall = !col_is_null(stmt, 4);
        r->start_wall_ns = col_int(stmt, 4, 0);
        r->has_start_mono = !col_is_null(stmt, 5);
        r->start_mono_ns = col_int(stmt, 5, 0);
        r->runtime_version = col_int(stmt, 7, 0);
        r->driver_version = col_int(stmt, 8, 0);
        r->exe = col_text(stmt, 9);
        p->pid = r->pid;
        p->ppid = r->ppid;
        p->host = xstrdup(r->host ? r->host : "");
        p->cmdline = xstrdup(r->cmdline ? r->cmdline : "");
        p->has_start_wall = r->has_start_wall;
        p->start_wall_ns = r->start_wall_ns;
        p->has_start_mono = r->has_start_mono;
        p->start_mono_ns = r->start_mono_ns;
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

static int load_env(struct gm_process *p)
{
    struct trace *t = (struct trace *)p->trace;
    sqlite3_stmt *stmt = trace_query(t, "SELECT name, value FROM env ORDER BY name", "");
    if (!stmt)
        return -1;
    size_t cap = 0;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        char *name = col_text(stmt, 0);
        if (!name)
            continue;
        p->env = xgrow(p->env, &cap, p->nenv + 1, sizeof(*p->env));
        p->env[p->nenv++] = (struct gm_env){name, col_text(stmt, 1)};
    }
    sqlite3_finalize(stmt);
    return rc;
}

/* The ancestors table (format 7), parent first; a trace without it (older
 * formats) has none. */
static int load_ancestors(struct gm_process *p)
{
    struct trace *t = (struct trace *)p->trace;
    sqlite3_stmt *stmt = trace_query(
        t, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ancestors'", "");
    if (!stmt)
        return -1;
    int rc = trace_step(t, stmt);
    sqlite3_finalize(stmt);
    if (rc != 1)
        return rc;
    stmt = trace_query(t, "SELECT pid, cmdline FROM ancestors ORDER BY depth", "");
    if (!stmt)
        return -1;
    size_t cap = 0;
    while ((rc = trace_step(t, stmt)) == 1) {
        p->ancestors = xgrow(p->ancestors, &cap, p->nancestors + 1, sizeof(*p->ancestors));
        p->ancestors[p->nancestors++] =
            (struct gm_ancestor){col_int(stmt, 0, 0), text_or_empty(stmt, 1)};
    }
    sqlite3_finalize(stmt);
    return rc;
}

/* The devices table's rows, first in p->devices (callstats.c adds the
 * ordinals only calls name, and sorts them all at the end). */
static int load_devices(struct pass *s)
{
    struct gm_process *p = s->p;
    struct trace *t = (struct trace *)p->trace;
    sqlite3_stmt *stmt = trace_query(
        t, "SELECT device, uuid, name, total_bytes, pci_bus_id FROM devices ORDER BY device", "");
    if (!stmt)
        return -1;
    int rc;
    while ((rc = trace_step(t, stmt)) == 1) {
        /* A NULL ordinal is device -1 to the reports (coalesce(device, -1)). */
        int64_t ordinal = col_int(stmt, 0, -1);
        bool repeated = false;
        for (size_t i = 0; i < p->ndevices; i++)
            repeated |= p->devices[i].ordinal == ordinal;
        if (repeated) /* a damaged table: the first row wins */
            continue;
        p->devices = xgrow(p->devices, &s->devices_cap, p->ndevices + 1, sizeof(*p->devices));
        struct gm_device *d = &p->devices[p->ndevices++];
        memset(d, 0, sizeof(*d));
        d->ordinal = ordinal;
        d->listed = true;
        d->uuid = col_text(stmt, 1);
        if (d->uuid && !d->uuid[0]) {
            free(d->uuid);
            d->uuid = NULL;
        }
        d->name = col_text(stmt, 2);
        d->total = col_int(stmt, 3, -1);
        if (d->total < 0)
            d->total = -1;
        d->pci_bus_id = col_text(stmt, 4);
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
        r->path = strtab_id(&s->L->texts, path);
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
const struct module_range *ld_module_at(const struct pass *s, int64_t caller)
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
        {"nvtx_mark", ROLE_NVTX_MARK},
        {"nvtx_push", ROLE_NVTX_PUSH},
        {"nvtx_pop", ROLE_NVTX_POP},
        {"nvtx_start", ROLE_NVTX_START},
        {"nvtx_end", ROLE_NVTX_END},
        {"nvtx_domain", ROLE_NVTX_DOMAIN},
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

static int compare_api_ids(const void *a, const void *b, void *arg)
{
    const struct trace_api *apis = arg;
    int64_t x = apis[*(const uint32_t *)a].id, y = apis[*(const uint32_t *)b].id;
    return (x > y) - (x < y);
}

/* Every row of the trace's apis, and its ids in order for the pass (the
 * views join events to apis by id; the ipc view names them, and a name
 * stands for its first row). */
static void load_apis(struct pass *s)
{
    const struct trace *t = s->p->trace;
    s->infos = xcalloc(t->napis ? t->napis : 1, sizeof(*s->infos));
    s->name_info = xcalloc(t->napis ? t->napis : 1, sizeof(*s->name_info));
    s->api_rows = xcalloc(t->napis ? t->napis : 1, sizeof(*s->api_rows));
    s->api_ids = xcalloc(t->napis ? t->napis : 1, sizeof(*s->api_ids));
    for (size_t i = 0; i < t->napis; i++) {
        const struct trace_api *a = &t->apis[i];
        struct api_info *info = &s->infos[i];
        s->api_rows[i] = (uint32_t)i;
        size_t before = s->names.count;
        uint32_t index = strtab_id(&s->names, a->name);
        if (s->names.count != before)
            s->name_info[index] = (uint32_t)i;
        info->index = (uint32_t)i;
        info->layer_text = strtab_id_or_none(&s->L->texts, a->layer);
        info->role_text = strtab_id_or_none(&s->L->texts, a->role);
        info->nccl_layer = a->layer && strcmp(a->layer, "nccl") == 0;
        info->nccl = (uint8_t)cc_role_of(a);
        info->role = role_from_text(a->role);
        info->null_role = !a->role;
        info->role_id = strtab_id(&s->roles, a->role);
        info->space_id = strtab_id(&s->spaces, a->space);
        info->resettable =
            a->space && (strcmp(a->space, "device") == 0 || strcmp(a->space, "host") == 0 ||
                         strcmp(a->space, "ipc") == 0);
        info->ipc_space = a->space && strcmp(a->space, "ipc") == 0;
        info->ipc_row =
            info->role == ROLE_IPC_EXPORT || (info->role == ROLE_ALLOC && info->ipc_space);
        info->kind = kind_from_text(a->kind);
        info->name = strtab_id(&s->L->apis, a->name);
        info->layer = (uint8_t)result_layer_from_name(a->layer);
    }
    s->device_space = strtab_find(&s->spaces, "device");
    if (t->napis > 1)
        qsort_r(s->api_rows, t->napis, sizeof(*s->api_rows), compare_api_ids, t->apis);
    /* api_id is the primary key: ids never repeat. */
    for (size_t i = 0; i < t->napis; i++)
        s->api_ids[i] = t->apis[s->api_rows[i]].id;
    s->napi_ids = t->napis;
    /* The tracer numbers apis from 0 (enum ct_api, include/cutrace/apis.h): a table by
     * id, when the ids are small enough for one. */
    if (t->napis > 0 && s->api_ids[0] >= 0 &&
        s->api_ids[t->napis - 1] < (int64_t)(4 * t->napis + 64)) {
        s->napi_direct = (size_t)s->api_ids[t->napis - 1] + 1;
        s->api_direct = xcalloc(s->napi_direct, sizeof(*s->api_direct));
        for (size_t i = 0; i < t->napis; i++)
            s->api_direct[s->api_ids[i]] = &s->infos[s->api_rows[i]];
    }
}

/* The info of an api name of this trace, NULL if the apis table lacks it. */
const struct api_info *ld_api_of(const struct pass *s, const char *name)
{
    uint32_t index = strtab_find(&s->names, name);
    return index == GM_NONE ? NULL : &s->infos[s->name_info[index]];
}

const struct api_info *ld_api_by_id(const struct pass *s, int64_t api_id)
{
    if (s->api_direct)
        return api_id >= 0 && (uint64_t)api_id < s->napi_direct ? s->api_direct[api_id] : NULL;
    size_t lo = 0, hi = s->napi_ids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->api_ids[mid] < api_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->napi_ids && s->api_ids[lo] == api_id ? &s->infos[s->api_rows[lo]] : NULL;
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
                          const struct gm_device *row, int64_t ordinal)
{
    const char *name = row && row->name ? row->name : "";
    const char *pci_bus_id = row && row->pci_bus_id ? row->pci_bus_id : "";
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
uint32_t ld_gpu_of(struct pass *s, int64_t ordinal)
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
        const struct gm_device *row = NULL;
        for (size_t i = 0; i < s->p->ndevices && s->p->devices[i].listed && !row; i++)
            if (s->p->devices[i].ordinal == ordinal)
                row = &s->p->devices[i];
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

static void pass_free(struct pass *s)
{
    nvtx_free(s);
    free(s->infos);
    free(s->name_info);
    free(s->resettable);
    strtab_free(&s->names, false);
    strtab_free(&s->roles, false);
    strtab_free(&s->spaces, false);
    free(s->modules);
    free(s->seq_calls);
    free(s->api_direct);
    for (size_t i = 0; i < s->nipc_rows; i++)
        free(s->ipc_rows[i].hex);
    free(s->ipc_rows);
    free(s->api_rows);
    free(s->api_ids);
    free(s->map);
    free(s->live);
    free(s->live_slot);
    free(s->devmap);
    free(s->first_call_gpus);
}

/* Events on no known device (device -1: before any device was current) go
 * to the process's only GPU; with several, to none. */
/* The NCCL side (nccl.h), with the call counts of the pass. */
static int load_nccl(struct gm_process *p)
{
    p->nccl = xcalloc(1, sizeof(*p->nccl));
    /* The views are checked; their communicators are the pass's. */
    if (nccl_check((struct trace *)p->trace, false, p->nccl) != 0)
        return -1;
    struct nccl_info *n = p->nccl;
    if (!n->present)
        return 0;
    nccl_add_comms(n, &p->communicators);
    /* Calls per communicator: the sums of the `collectives` view's cells
     * (collcalls.h), the one place NCCL calls are tied to communicators. */
    for (size_t i = 0; i < p->nccl_calls.ncells; i++) {
        const struct cc_cell *c = &p->nccl_calls.cells[i];
        n->calls = gm_add(n->calls, c->calls);
        n->failed_calls = gm_add(n->failed_calls, c->failed);
        struct nccl_comm *comm =
            c->has_comm ? (struct nccl_comm *)nccl_find_comm(n, c->comm_id) : NULL;
        if (comm) {
            comm->calls = gm_add(comm->calls, c->calls);
            comm->failed_calls = gm_add(comm->failed_calls, c->failed);
        } else {
            n->unattributed_calls = gm_add(n->unattributed_calls, c->calls);
        }
    }
    return 0;
}

/* meta exit_status (format 7): the status the process gave exit() or _exit(). */
static int load_exit_status(struct gm_process *p)
{
    bool found = false, is_integer = false;
    char *text = NULL;
    int64_t v = 0;
    if (trace_meta_get(p->trace->db, "exit_status", &found, &text, &v, &is_integer) != SQLITE_OK) {
        free(text);
        return trace_fail((struct trace *)p->trace, "cannot read meta 'exit_status'");
    }
    free(text);
    if (found && (!is_integer || v < 0 || v > 255))
        return trace_fail((struct trace *)p->trace, "invalid meta 'exit_status' (not 0-255)");
    p->has_exit_status = found;
    p->exit_status = (int)v;
    return 0;
}

/* The run's manifest (manifest.h), whose command's flags hold for every process. */
/* The manifest a packed run keeps in its `manifest` table (cmd/pack.c):
 * 1 found, 0 none, -1 after the one-line error. */
static int packed_manifest(struct trace *t, struct run_manifest *out)
{
    sqlite3_stmt *stmt = trace_query(t, "SELECT json FROM manifest LIMIT 1", "");
    if (!stmt) {
        trace_report_error(t);
        return -1;
    }
    int rc = trace_step(t, stmt);
    if (rc == 1 && !col_is_null(stmt, 0)) {
        const char *text = (const char *)sqlite3_column_text(stmt, 0);
        size_t len = (size_t)sqlite3_column_bytes(stmt, 0);
        rc = text && manifest_parse(text, len, t->path, out) == 0 ? 1 : -1;
    } else if (rc < 0) {
        trace_report_error(t);
    }
    sqlite3_finalize(stmt);
    return rc;
}

/* The run's manifest: beside the first trace that has one (a directory of
 * one run of `cutrace run`, given itself or as its parent), or inside the
 * packed file its traces came from. */
static int load_manifest(struct gm_model *m, const struct trace_set *set)
{
    struct run_manifest found;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < set->count; i++) {
        struct trace *t = &set->traces[i];
        rc = t->packed ? packed_manifest(t, &found) : manifest_find(t->path, &found);
    }
    if (rc <= 0)
        return rc;
    m->manifest = xmalloc(sizeof(*m->manifest));
    *m->manifest = found;
    m->run_cmdline = xstrdup(found.cmdline);
    return 0;
}

static int load_trace(struct loader *L, struct gm_process *p, struct proc_extra *x, unsigned flags)
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
        rc = load_env(p);
    }
    if (rc == 0)
        rc = load_ancestors(p);
    if (rc == 0)
        rc = load_exit_status(p);
    if (rc == 0)
        rc = load_devices(&s);
    if (rc == 0)
        rc = load_modules(&s);
    if (rc == 0 && trace_effect_order_check((struct trace *)p->trace) < 0)
        rc = -1;
    size_t first_export = L->nexports;
    if (rc == 0)
        rc = ld_read_calls(&s);
    if (rc == 0) {
        ld_resolve_pending(&s);
        ld_read_ipc(&s, first_export);
    }
    cs_finish(&s);
    if (rc == 0)
        rc = ld_read_inflight(&s);
    if (rc == 0 && (flags & GM_LOAD_NCCL))
        rc = load_nccl(p);
    pass_free(&s);
    return rc;
}

int gm_load(struct gm_model *m, struct trace_set *set)
{
    return gm_load_with(m, set, 0);
}

int gm_load_with(struct gm_model *m, struct trace_set *set, unsigned flags)
{
    memset(m, 0, sizeof(*m));
    struct loader L = {.m = m, .traces = set->count};
    m->nprocs = set->count;
    m->procs = xcalloc(set->count ? set->count : 1, sizeof(*m->procs));
    L.extra = xcalloc(set->count ? set->count : 1, sizeof(*L.extra));
    progress_begin();
    int rc = 0;
    for (size_t i = 0; i < set->count && rc == 0; i++) {
        L.traces_done = i;
        progress_update(i, set->count, L.events_read);
        m->procs[i].trace = &set->traces[i];
        rc = load_trace(&L, &m->procs[i], &L.extra[i], flags);
        if (rc != 0) {
            progress_end(); /* before the error, on a line of its own */
            trace_report_error(&set->traces[i]);
        }
    }
    m->apis = L.apis.strings;
    m->napis = L.apis.count;
    strtab_free(&L.apis, true);
    m->modules = L.modules.strings;
    m->nmodules = L.modules.count;
    strtab_free(&L.modules, true);
    m->texts = L.texts.strings;
    m->ntexts = L.texts.count;
    strtab_free(&L.texts, true);
    if (rc == 0) {
        progress_update(set->count, set->count, L.events_read);
        ld_finish_model(&L);
        gm_align_clocks(m); /* reads the traces' NCCL calls: before they close */
    } else {
        /* Hand what was made to the model so gm_free releases it. */
        m->ngpus = L.ngpus;
        m->gpus = xcalloc(L.ngpus ? L.ngpus : 1, sizeof(*m->gpus));
        for (size_t i = 0; i < L.ngpus; i++)
            m->gpus[i] = L.gpus[i].gpu;
    }
    progress_end();
    free(L.gpus);
    strtab_free(&L.clocks, false);
    strtab_free(&L.handles, false);
    free(L.exports);
    free(L.opens);
    free(L.extra);
    if (rc == 0 && load_manifest(m, set) != 0)
        rc = -1; /* its error said */
    if (rc != 0) {
        gm_free(m);
        return -1;
    }
    return 0;
}

static void free_process(struct gm_process *p)
{
    free(p->host);
    free(p->boot_id);
    free(p->cmdline);
    for (size_t i = 0; i < p->nancestors; i++)
        free(p->ancestors[i].cmdline);
    free(p->ancestors);
    free(p->inflight);
    free(p->allocs);
    free(p->events);
    free(p->comms);
    cc_calls_free(&p->nccl_calls);
    nccl_comms_free(&p->communicators);
    free(p->gpus);
    free(p->row.host);
    free(p->row.cmdline);
    free(p->row.exe);
    for (size_t i = 0; i < p->nenv; i++) {
        free(p->env[i].name);
        free(p->env[i].value);
    }
    free(p->env);
    for (size_t i = 0; i < p->ndevices; i++) {
        free(p->devices[i].uuid);
        free(p->devices[i].name);
        free(p->devices[i].pci_bus_id);
    }
    free(p->devices);
    free(p->call_counts);
    free(p->failed);
    if (p->nccl)
        nccl_info_free(p->nccl);
    free(p->nccl);
}

void gm_free(struct gm_model *m)
{
    for (size_t i = 0; i < m->nprocs; i++)
        free_process(&m->procs[i]);
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
    free(m->run_cmdline);
    if (m->manifest)
        manifest_free(m->manifest);
    free(m->manifest);
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
    for (size_t i = 0; i < m->ntexts; i++)
        free(m->texts[i]);
    free(m->texts);
    memset(m, 0, sizeof(*m));
}

int gm_open_run(struct gm_model *m, struct trace_set *set, const char *const *paths, size_t npaths,
                unsigned flags)
{
    if (trace_set_open_paths(set, paths, npaths) != 0)
        return -1;
    if (gm_load_with(m, set, flags) != 0) {
        trace_set_close(set);
        return -1;
    }
    return 0;
}
