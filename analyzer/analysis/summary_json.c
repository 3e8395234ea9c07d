/*
 * summary_json.c - `cutrace summary --json`: the summary report (summary.h)
 * as one JSON document, raw numbers (bytes and nanoseconds as integers,
 * times from each process's start, summary_time_origin), addresses as
 * "0x..." strings, null for what a trace cannot tell; only what the filters
 * list, the totals over all the traces. Beside analysis/summary.c, as the
 * diff's renderings are, so that cmd/summary.c holds the options and text.
 */
#include "analysis/summary.h"
#include "model/clocks.h"
#include "model/errnames.h"
#include "out/json.h"
#include "out/units.h"

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static void json_rel_time(struct json_writer *w, const char *key, const struct process_report *p,
                          int64_t t_ns)
{
    json_kv_int(w, key, gm_sub(t_ns, summary_time_origin(p)));
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
    json_kv_opt_int(w, "peak_seq", m->peak_seq >= 0, m->peak_seq);
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
        if (gm_is_gpu_kind((enum gm_kind)k))
            json_kv_int(w, summary_kind_key((enum mem_kind)k), kind_bytes[k]);
    json_object_end(w);
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
    size_t nrows;
    struct module_row *rows = summary_module_rows(p, d, false, &nrows);
    assert(nrows == d->nmodmem);
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
            json_key(w, summary_kind_key((enum mem_kind)k));
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
    json_kv_opt_int(w, "bytes", summary_reports_bytes(a), a->ok_size_bytes);
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
    json_kv_opt_int(w, "total_bytes", d->total_bytes >= 0, d->total_bytes);
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
        json_key(w, summary_kind_key((enum mem_kind)k));
        json_mem_stats(w, p, &d->mem[k]);
    }
    json_object_end(w);
    json_key(w, "gpu_memory");
    json_mem_stats(w, p, &d->gpu_mem);
    json_modules(w, p, d);

    json_key(w, "meminfo");
    if (d->has_meminfo) {
        int64_t used = summary_meminfo_used(d->meminfo_total, d->meminfo_free);
        json_object_begin(w);
        json_kv_int(w, "seq", d->meminfo_seq);
        json_rel_time(w, "at_ns", p, d->meminfo_t_ns);
        json_kv_int(w, "free_bytes", d->meminfo_free);
        json_kv_int(w, "total_bytes", d->meminfo_total);
        json_kv_int(w, "used_bytes", used);
        json_kv_int(w, "traced_live_bytes", d->own_probe.live_bytes);
        json_kv_int(w, "unexplained_bytes", gm_sub(used, d->own_probe.live_bytes));
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
        json_kv_address(w, "ptr", (uint64_t)f->ptr);
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
    const struct nccl_info *n = p->nccl;
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
        json_kv_opt_int(w, "rank", c->has_rank, c->rank);
        json_kv_opt_int(w, "nranks", c->has_nranks, c->nranks);
        json_kv_int(w, "device", c->device);
        json_kv_string(w, "api", c->api);
        json_kv_address(w, "comm", (uint64_t)c->handle);
        json_kv_int(w, "init_result", c->init_result);
        json_kv_string(w, "init_result_name",
                       result_describe(result, sizeof(result), LAYER_NCCL, c->init_result));
        json_rel_time(w, "init_at_ns", p, c->t_init_ns);
        json_kv_string(w, "end", c->aborted ? "abort" : c->destroyed ? "destroy" : NULL);
        if (c->destroyed) {
            json_rel_time(w, "end_at_ns", p, c->t_destroy_ns);
            json_kv_int(w, "lifetime_ns", gm_sub(c->t_destroy_ns, c->t_init_ns));
        } else {
            json_kv_null(w, "end_at_ns");
            json_kv_null(w, "lifetime_ns");
        }
        if (c->finalized)
            json_rel_time(w, "finalize_at_ns", p, c->t_finalize_ns);
        else
            json_kv_null(w, "finalize_at_ns");
        json_kv_opt_int(w, "parent_comm_id", c->has_parent, c->parent_comm_id);
        json_kv_opt_int(w, "color", c->has_color, c->color);
        json_kv_opt_int(w, "key", c->has_key, c->key);
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
    json_kv_opt_int(w, "recovered_records", t->has_recovered_records, t->recovered_records);
    json_kv_string(w, "writer_error", t->writer_error);
    json_kv_opt_int(w, "writer_stopped_after", t->writer_error && t->has_writer_stopped_after,
                    t->writer_stopped_after);
    json_kv_opt_int(w, "pid", p->has_pid, p->pid);
    json_kv_opt_int(w, "ppid", p->has_ppid, p->ppid);
    json_kv_string(w, "host", p->host);
    json_kv_string(w, "cmdline", p->cmdline);
    json_kv_string(w, "exe", p->exe);
    json_kv_opt_int(w, "cuda_runtime_version", p->runtime_version > 0, p->runtime_version);
    json_kv_opt_int(w, "cuda_driver_version", p->driver_version > 0, p->driver_version);
    json_kv_opt_int(w, "nccl_version", p->nccl->has_version, p->nccl->version);
    json_kv_opt_int(w, "start_wall_ns", p->has_start_wall, p->start_wall_ns);
    json_kv_string(w, "start_time",
                   p->has_start_wall ? format_wall_time(buf, sizeof(buf), p->start_wall_ns, 9)
                                     : NULL);
    json_kv_opt_int(w, "start_mono_ns", p->has_start_mono, p->start_mono_ns);
    if (p->has_events) {
        json_rel_time(w, "first_call_at_ns", p, p->first_t_ns);
        json_rel_time(w, "last_call_end_at_ns", p, p->last_end_ns);
        json_kv_int(w, "span_ns", gm_sub(p->last_end_ns, p->first_t_ns));
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
    json_kv_opt_int(w, "dropped_records", t->has_dropped_records, t->dropped_records);
    json_key(w, "driver_lookups");
    if (p->lookups->present) {
        json_object_begin(w);
        json_kv_int(w, "calls", p->lookups->calls);
        json_kv_int(w, "wrapped", p->lookups->wrapped);
        json_kv_int(w, "failed", p->lookups->failed);
        json_kv_int(w, "symbols", p->lookups->symbols);
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
        if (p->devices[di].shown)
            json_device(w, p, &p->devices[di]);
    json_array_end(w);
    json_communicators(w, p);
    json_object_end(w);
}

void summary_print_json(const struct summary_report *r, FILE *out)
{
    struct json_writer w;
    json_init(&w, out);
    json_object_begin(&w);
    json_kv_string(&w, "cutrace_version", CUTRACE_VERSION);
    json_kv_string(&w, "report", "summary");
    json_kv_string(&w, "path", r->path);
    gm_clocks_json(&w, r->model);
    json_key(&w, "processes");
    json_array_begin(&w);
    for (size_t i = 0; i < r->nprocesses; i++)
        if (r->processes[i].shown)
            json_process(&w, &r->processes[i]);
    json_array_end(&w);

    json_key(&w, "gpus");
    json_array_begin(&w);
    for (size_t gi = 0; gi < r->ngpus; gi++) {
        const struct gpu_report *g = &r->gpus[gi];
        if (!g->shown)
            continue;
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
            int64_t used = summary_meminfo_used(g->meminfo_total, g->meminfo_free);
            json_object_begin(&w);
            json_kv_opt_int(&w, "pid", p->has_pid, p->pid);
            json_kv_string(&w, "file", p->trace->file);
            json_kv_int(&w, "seq", g->meminfo_seq);
            json_kv_int(&w, "wall_ns", g->meminfo_wall_ns);
            json_kv_int(&w, "free_bytes", g->meminfo_free);
            json_kv_int(&w, "total_bytes", g->meminfo_total);
            json_kv_int(&w, "used_bytes", used);
            json_kv_int(&w, "traced_live_bytes", g->traced_live_bytes);
            json_kv_int(&w, "unexplained_bytes", gm_sub(used, g->traced_live_bytes));
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
    /* What the filters kept of the totals' processes and GPUs. */
    json_key(&w, "listed");
    json_object_begin(&w);
    json_kv_uint(&w, "processes", r->shown_processes);
    json_kv_uint(&w, "gpus", r->shown_gpus);
    json_object_end(&w);
    json_object_end(&w);
    json_finish(&w);
}
