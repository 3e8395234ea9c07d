/*
 * summary_csv.c - `cutrace summary --csv[=TABLE]`: the summary's tables as
 * CSV (out/csv.h), raw numbers, the rows of what the filters list. Beside
 * analysis/summary.c rather than in cmd/summary.c, which holds the options
 * and the text and JSON renderings and stays under the layout's 1000 lines.
 *
 *   processes  one row per process: identity, end, calls, GPU memory
 *   gpus       one row per GPU by uuid: the latest cudaMemGetInfo among its
 *              processes and the memory all of them had live then
 *   apis       one row per API per process and device: every call of it
 *              (top-level and nested), with the top-level share apart
 *   memory     one row per kind of memory used per process and device
 *
 * A process is named by its trace file and pid in every table (pid empty
 * when the trace does not know it); times are nanoseconds from the
 * process's start (summary_time_origin), as in JSON.
 */
#include "analysis/summary.h"
#include "out/csv.h"

#include <assert.h>
#include <inttypes.h>

const char *const summary_csv_tables[] = {"processes", "gpus", "apis", "memory", NULL};

enum { TABLE_PROCESSES, TABLE_GPUS, TABLE_APIS, TABLE_MEMORY };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void process_key(struct csv_writer *w, const struct process_report *p)
{
    csv_string(w, p->trace->file);
    csv_opt_int(w, p->has_pid, p->pid);
}

static void print_processes(const struct summary_report *r, FILE *out)
{
    static const char *const head[] = {
        "file",
        "pid",
        "ppid",
        "host",
        "rank",
        "end_state",
        "exited",
        "start_wall_ns",
        "span_ns",
        "calls",
        "failed_calls",
        "nested_calls",
        "devices",
        "communicators",
        "gpu_allocated_bytes",
        "gpu_freed_bytes",
        "gpu_live_bytes",
        "unknown_frees",
        "double_frees",
    };
    struct csv_writer w;
    csv_begin(&w, out, head, COUNT(head));
    for (size_t i = 0; i < r->nprocesses; i++) {
        const struct process_report *p = &r->processes[i];
        if (!p->shown)
            continue;
        const struct gm_process *mp = p->model;
        int64_t allocated = 0, freed = 0, live = 0;
        for (size_t di = 0; di < p->ndevices; di++) {
            const struct mem_stats *m = &p->devices[di].gpu_mem;
            allocated = gm_add(allocated, m->allocated_bytes);
            freed = gm_add(freed, m->freed_bytes);
            live = gm_add(live, m->live_bytes);
        }
        process_key(&w, p);
        csv_opt_int(&w, p->has_ppid, p->ppid);
        csv_string(&w, p->host);
        csv_opt_int(&w, mp->has_rank, mp->rank);
        csv_string(&w, p->trace->end_state);
        csv_int(&w, mp->exited);
        csv_opt_int(&w, p->has_start_wall, p->start_wall_ns);
        csv_opt_int(&w, p->has_events, gm_sub(p->last_end_ns, p->first_t_ns));
        csv_int(&w, p->calls);
        csv_int(&w, p->failed);
        csv_int(&w, p->nested);
        csv_uint(&w, p->ndevices);
        csv_opt_int(&w, p->nccl->present, (int64_t)p->nccl->ncomms);
        csv_int(&w, allocated);
        csv_int(&w, freed);
        csv_int(&w, live);
        csv_int(&w, mp->unknown_frees);
        csv_int(&w, mp->double_frees);
        csv_end_row(&w);
    }
}

static void print_gpus(const struct summary_report *r, FILE *out)
{
    static const char *const head[] = {
        "uuid",
        "name",
        "processes",
        "pids",
        "meminfo_file",
        "meminfo_pid",
        "meminfo_seq",
        "meminfo_wall_ns",
        "free_bytes",
        "total_bytes",
        "used_bytes",
        "traced_live_bytes",
        "unexplained_bytes",
    };
    struct csv_writer w;
    csv_begin(&w, out, head, COUNT(head));
    for (size_t gi = 0; gi < r->ngpus; gi++) {
        const struct gpu_report *g = &r->gpus[gi];
        if (!g->shown)
            continue;
        csv_string(&w, g->uuid);
        csv_string(&w, g->name);
        csv_uint(&w, g->nprocesses);
        /* Every process on the GPU: the row's numbers are theirs together. */
        char pids[512];
        summary_gpu_pids(r, g, ' ', pids, sizeof(pids));
        csv_string(&w, pids);
        if (g->has_meminfo) {
            const struct process_report *p = &r->processes[g->meminfo_process];
            int64_t used = summary_meminfo_used(g->meminfo_total, g->meminfo_free);
            process_key(&w, p);
            csv_int(&w, g->meminfo_seq);
            csv_int(&w, g->meminfo_wall_ns);
            csv_int(&w, g->meminfo_free);
            csv_int(&w, g->meminfo_total);
            csv_int(&w, used);
            csv_int(&w, g->traced_live_bytes);
            csv_int(&w, gm_sub(used, g->traced_live_bytes));
        } else {
            for (int k = 0; k < 9; k++)
                csv_null(&w);
        }
        csv_end_row(&w);
    }
}

static void print_apis(const struct summary_report *r, FILE *out)
{
    static const char *const head[] = {
        "file",   "pid",    "device",    "api",        "layer", "role",   "calls",
        "failed", "nested", "top_calls", "top_failed", "bytes", "dur_ns", "top_dur_ns",
    };
    struct csv_writer w;
    csv_begin(&w, out, head, COUNT(head));
    for (size_t i = 0; i < r->nprocesses; i++) {
        const struct process_report *p = &r->processes[i];
        for (size_t di = 0; p->shown && di < p->ndevices; di++) {
            const struct device_report *d = &p->devices[di];
            for (size_t k = 0; d->shown && k < d->napis; k++) {
                const struct api_stats *a = &d->apis[k];
                process_key(&w, p);
                csv_int(&w, d->ordinal);
                csv_string(&w, a->api);
                csv_string(&w, a->layer);
                csv_string(&w, a->role);
                csv_int(&w, a->calls);
                csv_int(&w, a->failed);
                csv_int(&w, a->nested);
                csv_int(&w, a->top_calls);
                csv_int(&w, a->top_failed);
                csv_opt_int(&w, summary_reports_bytes(a), a->ok_size_bytes);
                csv_int(&w, a->dur_ns);
                csv_int(&w, a->top_dur_ns);
                csv_end_row(&w);
            }
        }
    }
}

static void print_memory(const struct summary_report *r, FILE *out)
{
    static const char *const head[] = {
        "file",       "pid",         "device",      "kind",       "allocs",     "allocated_bytes",
        "frees",      "freed_bytes", "live_allocs", "live_bytes", "peak_bytes", "peak_seq",
        "peak_at_ns",
    };
    struct csv_writer w;
    csv_begin(&w, out, head, COUNT(head));
    for (size_t i = 0; i < r->nprocesses; i++) {
        const struct process_report *p = &r->processes[i];
        for (size_t di = 0; p->shown && di < p->ndevices; di++) {
            const struct device_report *d = &p->devices[di];
            for (int k = 0; d->shown && k < KIND_COUNT; k++) {
                const struct mem_stats *m = &d->mem[k];
                if (m->allocs == 0)
                    continue;
                process_key(&w, p);
                csv_int(&w, d->ordinal);
                csv_string(&w, summary_kind_key((enum mem_kind)k));
                csv_int(&w, m->allocs);
                csv_int(&w, m->allocated_bytes);
                csv_int(&w, m->frees);
                csv_int(&w, m->freed_bytes);
                csv_int(&w, m->live_allocs);
                csv_int(&w, m->live_bytes);
                csv_int(&w, m->peak_bytes);
                csv_opt_int(&w, m->peak_seq >= 0, m->peak_seq);
                csv_opt_int(&w, m->peak_seq >= 0, gm_sub(m->peak_t_ns, summary_time_origin(p)));
                csv_end_row(&w);
            }
        }
    }
}

void summary_print_csv(const struct summary_report *r, size_t table, FILE *out)
{
    switch (table) {
    case TABLE_PROCESSES:
        print_processes(r, out);
        break;
    case TABLE_GPUS:
        print_gpus(r, out);
        break;
    case TABLE_APIS:
        print_apis(r, out);
        break;
    case TABLE_MEMORY:
        print_memory(r, out);
        break;
    default:
        assert(!"a table of summary_csv_tables");
    }
}
