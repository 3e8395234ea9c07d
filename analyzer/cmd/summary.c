/*
 * summary.c - `cutrace summary [options] DIR`: the options and the text
 * rendering (JSON and CSV are analysis/summary_json.c and summary_csv.c)
 * of what analysis/summary.h computes from the
 * run model: per process and per GPU, what was called (the program's own
 * calls apart from those the CUDA and NCCL libraries made inside them,
 * driver entry-point lookups in one line), what was allocated and freed by
 * kind of memory, the peak, what was still live at the end, which module
 * (library or program) issued the GPU memory, how that compares to the last
 * cudaMemGetInfo, and which calls failed; its NCCL version and
 * communicators (nccl.h; `cutrace collectives` joins them across ranks);
 * then a directory-wide view per GPU uuid.
 */
#include "analysis/summary.h"
#include "cli.h"
#include "model/errnames.h"
#include "model/filter.h"
#include "model/gpumodel.h"
#include "model/modules.h"
#include "model/nccl.h"
#include "model/trace.h"
#include "model/traceset.h"
#include "out/table.h"
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

static const char usage[] =
    "usage: cutrace summary [options] DIR...\n"
    "\n" CLI_PATHS_HELP "\n"
    "Summarise every trace in DIR (a directory written by `cutrace run`, or one\n"
    "trace file): per process and device, calls by API (nested calls apart),\n"
    "bytes allocated and freed, peak and live memory by kind and by the module\n"
    "that issued it, the last cudaMemGetInfo with the memory the trace does not\n"
    "explain, and failed calls; then one line per GPU.\n"
    "\n"
    "options:\n" CLI_FILTER_HELP CLI_FORMAT_HELP CLI_HELP_HELP "\n"
    "Filters list processes, their devices and GPUs; a GPU's numbers stay those\n"
    "of every process on it, and the totals those of all the traces.\n"
    "Tables for --csv: processes (one row per process), gpus (one per GPU),\n"
    "apis (calls per API per process and device), memory (per kind of memory\n"
    "per process and device).\n"
    "\n" CLI_EXIT_HELP("a failed call (not a driver lookup), or a free of\n"
                       "     memory never allocated or already freed, among the processes listed");

/* ---- text rendering ---- */

/* "  label      text": text that holds numbers wraps under itself (a
 * number is never cut); names, the command and env values are cut with
 * "..." (the text rule of docs/cli.md, "Width"). */
static void print_label_as(const char *label, const char *text, bool wrap)
{
    size_t width = table_width() - 2 - LABEL_WIDTH;
    printf("  %-*s", LABEL_WIDTH, label);
    if (!wrap) {
        text_print(stdout, text, width, 0);
        putchar('\n');
        return;
    }
    for (bool first = true; first || *text; first = false) {
        size_t n = text_break(text, width);
        char *line = xstrndup(text, n);
        if (!first)
            printf("%*s", 2 + LABEL_WIDTH, "");
        text_print(stdout, line, width, 0);
        putchar('\n');
        free(line);
        for (text += n; *text == ' '; text++)
            ;
    }
}

static void print_label(const char *label, const char *text)
{
    print_label_as(label, text, true);
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
    print_label_as("command", command, false);
    if (p->has_start_wall)
        format_wall_time(a, sizeof(a), p->start_wall_ns, 3);
    else
        snprintf(a, sizeof(a), "unknown");
    if (p->has_events) {
        int64_t origin = summary_time_origin(p);
        char first[UNITS_BUF];
        format_duration(b, sizeof(b), gm_sub(p->last_end_ns, p->first_t_ns));
        format_offset(first, sizeof(first), gm_sub(p->first_t_ns, origin));
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
                 summary_end_state_text(t->end_state), t->recovered_records);
    else
        snprintf(line, sizeof(line), "%s", summary_end_state_text(t->end_state));
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
    if (summary_uses_nccl(p)) {
        const struct nccl_info *n = p->nccl;
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
    if (p->lookups->present && p->lookups->calls > 0) {
        const struct gm_lookups *l = p->lookups;
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
        print_label_as("env", line, false);
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
        if (!d->shown)
            continue;
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
    for (size_t i = 0; i < p->nccl->ncomms; i++) {
        const struct nccl_comm *c = &p->nccl->comms[i];
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
                    format_duration(buf, sizeof(buf), gm_sub(c->t_destroy_ns, c->t_init_ns)),
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
    return summary_compare_apis(x, y);
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
        if (d->apis[i].top_calls > 0 && !summary_is_lookup(d->apis[i].role))
            rows[nrows++] = &d->apis[i];
    summary_sort(rows, nrows, sizeof(*rows), compare_top_level);
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF];
    for (size_t i = 0; i < nrows; i++) {
        const struct api_stats *a = rows[i];
        table_cell(tab, a->api ? a->api : "?");
        table_cell(tab, a->layer ? a->layer : "?");
        table_cellf(tab, "%" PRId64, a->top_calls);
        table_cellf(tab, "%" PRId64, a->top_failed);
        table_cell(tab, summary_reports_bytes(a)
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
        if (summary_is_lookup(a->role))
            continue;
        table_cell(tab, a->api ? a->api : "?");
        table_cell(tab, a->layer ? a->layer : "?");
        table_cell(tab, a->inside ? a->inside : "? (not in the trace)");
        table_cellf(tab, "%" PRId64, a->calls);
        table_cellf(tab, "%" PRId64, a->failed);
        table_cell(tab, summary_reports_bytes(a)
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
    format_offset(buf, sizeof(buf), gm_sub(m->peak_t_ns, summary_time_origin(p)));
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
        if (gm_is_gpu_kind((enum gm_kind)k) && d->mem[k].allocs > 0)
            gpu_kinds++;
    for (int k = 0; k < KIND_COUNT; k++) {
        if (k == KIND_HOST && gpu_kinds > 1)
            memory_row(tab, "= GPU memory", p, &d->gpu_mem);
        if (d->mem[k].allocs > 0)
            memory_row(tab, summary_kind_label((enum mem_kind)k), p, &d->mem[k]);
    }
    if (table_rows(tab) > 0) {
        putchar('\n');
        table_print(tab, stdout, 4);
    }
    table_free(tab);
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
    size_t nrows;
    struct module_row *rows = summary_module_rows(p, d, true, &nrows);
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
    int64_t used_bytes = summary_meminfo_used(d->meminfo_total, d->meminfo_free);
    format_offset(at, sizeof(at), gm_sub(d->meminfo_t_ns, summary_time_origin(p)));
    format_bytes(free_text, sizeof(free_text), (uint64_t)d->meminfo_free);
    format_bytes(total, sizeof(total), (uint64_t)d->meminfo_total);
    format_bytes(used, sizeof(used), (uint64_t)used_bytes);
    format_bytes(live, sizeof(live), (uint64_t)d->own_probe.live_bytes);
    format_bytes_signed(unexplained, sizeof(unexplained),
                        gm_sub(used_bytes, d->own_probe.live_bytes));
    printf("\n    last cudaMemGetInfo: seq %" PRId64 " at %s: free %s of %s, used %s\n",
           d->meminfo_seq, at, free_text, total, used);
    printf("    traced live device+managed+vmm then: %s; unexplained: %s\n", live, unexplained);
    size_t others = summary_gpu_neighbours(r, d);
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
        table_cell(tab, format_offset(buf, sizeof(buf), gm_sub(f->t_ns, summary_time_origin(p))));
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
        if (!g->shown)
            continue;
        table_cell(tab, g->uuid);
        table_cell(tab, g->name);
        char pids[256];
        table_cell(tab, summary_gpu_pids(r, g, ',', pids, sizeof(pids)));
        if (g->has_meminfo) {
            int64_t used = summary_meminfo_used(g->meminfo_total, g->meminfo_free);
            table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)used));
            table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)g->traced_live_bytes));
            table_cell(tab,
                       format_bytes_signed(buf, sizeof(buf), gm_sub(used, g->traced_live_bytes)));
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
    printf(": %zu process%s", r->nprocesses, r->nprocesses == 1 ? "" : "es");
    if (r->shown_processes < r->nprocesses)
        printf(", %zu listed", r->shown_processes);
    putchar('\n');
    for (size_t i = 0; i < r->nprocesses; i++) {
        const struct process_report *p = &r->processes[i];
        if (!p->shown)
            continue;
        putchar('\n');
        print_process_header(p);
        if (p->ndevices > 0)
            print_device_list(p);
        if (p->nccl->ncomms > 0)
            print_communicators(p);
        for (size_t di = 0; di < p->ndevices; di++)
            if (p->devices[di].shown)
                print_device(r, p, &p->devices[di]);
    }
    printf("\nAll traces: %zu process%s, %zu GPU%s by uuid, %" PRId64 " calls, %" PRId64
           " failed\n",
           r->nprocesses, r->nprocesses == 1 ? "" : "es", r->ngpus, r->ngpus == 1 ? "" : "s",
           r->calls, r->failed);
    if (r->devices_without_uuid > 0)
        printf("  (%zu device%s without a recorded uuid not counted as GPUs)\n",
               r->devices_without_uuid, r->devices_without_uuid == 1 ? "" : "s");
    if (r->shown_gpus > 0) {
        putchar('\n');
        print_gpu_table(r);
        printf("  used: total - free at the GPU's latest cudaMemGetInfo among these traces;\n"
               "  traced live: device, managed and vmm allocations of all these processes live "
               "then\n");
    }
}

/* ---- the command ---- */

int cmd_summary(int argc, char **argv)
{
    struct cli_report_opts o;
    const char *path;
    int parsed = cli_report_parse(argc, argv, usage, summary_csv_tables, &o, &path);
    if (parsed != CLI_PARSED)
        return parsed;

    /* Loaded whole before anything is printed: a file found damaged halfway
     * through gives a one-line error and no partial report. */
    struct trace_set set;
    struct gm_model m;
    if (gm_open_run(&m, &set, o.paths, o.npaths, GM_LOAD_NCCL) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct gm_filter f;
    int status = gm_filter_init(&f, &m, &o, "summary");
    if (status == CLI_EXIT_OK) {
        struct summary_report report;
        summary_build(&report, &m, set.path);
        summary_filter(&report, &m, &f);
        if (o.format == CLI_FORMAT_JSON)
            summary_print_json(&report, stdout);
        else if (o.format == CLI_FORMAT_CSV)
            summary_print_csv(&report, o.csv_table, stdout);
        else
            print_text(&report);
        if (o.fail_on_problem && summary_has_problem(&report))
            status = CLI_EXIT_PROBLEM;
        summary_free(&report);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            cli_error(NULL, "cannot write the report to standard output");
            status = CLI_EXIT_BAD_INPUT;
        }
    }
    gm_filter_free(&f);
    gm_free(&m);
    trace_set_close(&set);
    return status;
}
