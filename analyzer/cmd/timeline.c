/*
 * timeline.c - `cutrace timeline DIR [--gpu UUID|INDEX] [--json]`: per
 * physical GPU, one row at each milestone of every process using it, with
 * the live bytes per category (docs/budget.md) at that moment and, at each
 * cudaMemGetInfo, what the GPU said was free and how much of the used
 * memory the traces do not explain.
 *
 * Milestones, derived from the model (gpumodel.h) without any hint from
 * the user:
 *   - the first call of each process on the GPU;
 *   - every NCCL communicator init (hash, rank/nranks, result);
 *   - IPC setup: each process's first handle export and first open;
 *   - every measurement (top-level cudaMemGetInfo / cuMemGetInfo_v2);
 *   - the weight burst (docs/budget.md, --burst-min's default) and any other
 *     burst of >= 16 consecutive top-level GPU allocations (no free or
 *     measurement between) totalling >= 256 MiB: its first and last one;
 *   - free bursts: >= 8 consecutive frees of GPU memory with no allocation
 *     between (PyTorch's empty_cache), one row at the last;
 *   - CUDA-graph capture: back-to-back captures with no other milestone of
 *     the process between are one begin row and one end row (N graphs);
 *   - each process's first NCCL collective or p2p call;
 *   - every failed call (text lists the first 50 per GPU, JSON all);
 *   - the last event of each process, and whether it exited or was killed.
 *
 * Rows are collected per GPU while walking its stream once, then sorted
 * by their position in it (a capture group's end row is only known later).
 */
#include "replay/budget.h"
#include "cli.h"
#include "model/errnames.h"
#include "analysis/timeline.h"
#include "model/filter.h"
#include "model/clocks.h"
#include "model/gpumodel.h"
#include "model/milestones.h"
#include "out/csv.h"
#include "out/json.h"
#include "out/table.h"
#include "model/trace.h"
#include "model/traceset.h"
#include "out/units.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TEXT_FAILED_ROWS 50
#define MILESTONE_MIN_W  30
#define COLUMN_W         10

static const char usage[] =
    "usage: cutrace timeline [options] DIR...\n"
    "\n" CLI_PATHS_HELP "\n"
    "Per physical GPU, every process's milestones in time order (first call,\n"
    "NCCL inits, IPC setup, cudaMemGetInfo, weight and other allocation bursts,\n"
    "free bursts, CUDA-graph capture, first collective, failed calls, end), with\n"
    "the live bytes per category at each (runtime, vmm, nccl, ipc_exported,\n"
    "managed; peer and host apart) and, at each cudaMemGetInfo, free, used and\n"
    "the memory the traces do not explain.\n"
    "\n"
    "options:\n" CLI_FILTER_HELP CLI_FORMAT_HELP CLI_HELP_HELP "\n"
    "Filters list the processes' milestones; live bytes stay the whole GPU's.\n"
    "Tables for --csv: milestones (one row per milestone).\n"
    "\n" CLI_EXIT_HELP("a failed call, or a free of memory never allocated or\n"
                       "     already freed, among the processes listed");

static const char *const csv_tables[] = {"milestones", NULL};

/* ---- shared wording ---- */

static const char *end_text(const struct gm_process *p)
{
    if (p->exited)
        return "exited";
    if (p->end_state && strcmp(p->end_state, "killed") == 0)
        return "killed";
    return "still running or killed";
}

static char *hash_hex(char *buf, size_t size, uint64_t hash)
{
    snprintf(buf, size, "%016" PRIx64, hash);
    return buf;
}

/* The milestone's words, for the text report and JSON's "text". */
static char *row_text(const struct gm_model *m, const struct row *r)
{
    const struct gm_process *p = &m->procs[r->proc];
    const struct gm_event *e = timeline_row_event(m, r);
    const char *api = gm_api_name(m, e->api);
    char size[UNITS_BUF], hash[24], res[64];
    const char *label = ms_label(r->kind);
    switch (r->kind) {
    case MS_FIRST_CALL:
    case MS_IPC_EXPORT:
    case MS_IPC_OPEN:
    case MS_COLLECTIVE:
        return xasprintf("%s (%s)", label, api);
    case MS_COMM_INIT: {
        const struct gm_comm *c = &p->comms[e->a];
        if (c->result != 0)
            return xasprintf("%s %s rank %" PRId64 "/%" PRId64 " failed: %s", label,
                             hash_hex(hash, sizeof(hash), c->hash), c->rank, c->nranks,
                             result_describe(res, sizeof(res), LAYER_NCCL, c->result));
        return xasprintf("%s %s rank %" PRId64 "/%" PRId64, label,
                         hash_hex(hash, sizeof(hash), c->hash), c->rank, c->nranks);
    }
    case MS_MEASUREMENT:
        if (r->tag != MS_TAG_NONE)
            return xasprintf("%s (%s), %s", label, api, ms_tag_key((enum ms_tag)r->tag));
        return xasprintf("%s (%s)", label, api);
    case MS_WEIGHT_BEGIN:
    case MS_BURST_BEGIN:
        return xasprintf("%s: %" PRId64 " allocs, %s", label, r->count,
                         gm_format_size(size, sizeof(size), r->bytes));
    case MS_FREE_BURST:
        return xasprintf("%s: %" PRId64 " frees, %s", label, r->count,
                         gm_format_size(size, sizeof(size), r->bytes));
    case MS_WEIGHT_END:
    case MS_BURST_END:
    case MS_CAPTURE_BEGIN:
        return xstrdup(label);
    case MS_CAPTURE_END:
        return xasprintf("%s (%" PRId64 " graph%s)", label, r->count, r->count == 1 ? "" : "s");
    case MS_FAILED:
        if (e->b > 0)
            return xasprintf("%s: %s %s: %s", label, api, gm_format_size(size, sizeof(size), e->b),
                             result_describe(res, sizeof(res), (enum result_layer)e->layer, e->a));
        return xasprintf("%s: %s: %s", label, api,
                         result_describe(res, sizeof(res), (enum result_layer)e->layer, e->a));
    case MS_NVTX_MARK:
    case MS_NVTX_BEGIN:
    case MS_NVTX_END:
        return xasprintf("%s: %s", label, timeline_row_sub(m, r));
    case MS_END:
        return xasprintf("%s: %s", label, end_text(p));
    }
    return xstrdup("?");
}

/* ---- choosing GPUs ---- */

/* ---- text ---- */

/* Display order of the GPU categories (the brief's), then peer and host. */
static const enum gm_category display_order[] = {GM_CAT_RUNTIME, GM_CAT_VMM, GM_CAT_NCCL,
                                                 GM_CAT_IPC_EXPORTED, GM_CAT_MANAGED};
static const char *const short_names[] = {"nccl",    "ipc_exp", "vmm", "runtime",
                                          "managed", "peer",    "host"};

struct column {
    const char *header;
    unsigned cats; /* bit per category summed in it; 0: traced (all GPU ones) */
    size_t width;
};

static int64_t column_value(const struct column *c, const int64_t *live)
{
    if (c->cats == 0)
        return gm_traced(live);
    int64_t sum = 0;
    for (int k = 0; k < GM_CATEGORIES; k++)
        if (c->cats & (1u << k))
            sum = gm_add(sum, live[k]);
    return sum;
}

static void print_gpu_text(const struct gm_model *m, const struct gpu_report *g, FILE *out)
{
    const struct gm_gpu *gpu = &m->gpus[g->gpu];
    char buf[UNITS_BUF], name[64];
    /* Names come from the traces: any length, wrapped to the report's width. */
    char total[UNITS_BUF + 2] = "";
    if (gpu->total >= 0)
        snprintf(total, sizeof(total), ", %s",
                 format_bytes(buf, sizeof(buf), (uint64_t)gpu->total));
    char *heading = xasprintf("GPU %" PRIu32 ": %s (%s%s) on %s", g->gpu, gpu->key,
                              gpu->name[0] ? gpu->name : "unknown GPU", total,
                              m->clocks[gpu->clock].host[0] ? m->clocks[gpu->clock].host : "?");
    fputc('\n', out);
    text_print_wrapped(out, heading, 0);
    free(heading);
    char *procs = xstrdup("processes:");
    for (size_t k = 0; k < gpu->nprocs; k++) {
        const struct gm_process *p = &m->procs[gpu->procs[k]];
        char *next;
        if (p->has_rank)
            next = xasprintf("%s%s %" PRId64 " (rank %" PRId64 ", %s)", procs, k ? "," : "", p->pid,
                             p->rank, end_text(p));
        else
            next = xasprintf("%s%s %" PRId64 " (%s)", procs, k ? "," : "", p->pid, end_text(p));
        free(procs);
        procs = next;
    }
    text_print_wrapped(out, procs, 2);
    free(procs);

    /* Columns: the categories seen, then what fits. */
    struct column cols[GM_CATEGORIES + 2];
    size_t ncols = 0;
    unsigned other = 0;
    size_t gpu_cats = 0;
    for (size_t i = 0; i < sizeof(display_order) / sizeof(display_order[0]); i++)
        if (g->peak[display_order[i]] > 0) {
            cols[ncols++] =
                (struct column){short_names[display_order[i]], 1u << display_order[i], COLUMN_W};
            gpu_cats++;
        }
    if (gpu_cats != 1)
        cols[ncols++] = (struct column){"traced", 0, COLUMN_W};
    bool peer = g->peak[GM_CAT_PEER] > 0, host = g->peak[GM_CAT_HOST] > 0;
    bool apart = false;
    if (peer)
        cols[ncols++] = (struct column){"peer", 1u << GM_CAT_PEER, COLUMN_W};
    if (host)
        cols[ncols++] = (struct column){"host", 1u << GM_CAT_HOST, COLUMN_W};

    size_t time_w = 4, pid_w = 8, text_w = 9;
    size_t shown_failed = 0;
    char **texts = xcalloc(g->nrows ? g->nrows : 1, sizeof(*texts));
    bool *shown = xcalloc(g->nrows ? g->nrows : 1, sizeof(*shown));
    size_t hidden_failed = 0;
    for (size_t i = 0; i < g->nrows; i++) {
        const struct row *r = &g->rows[i];
        if (r->kind == MS_FAILED && shown_failed++ >= TEXT_FAILED_ROWS) {
            hidden_failed++;
            continue;
        }
        shown[i] = true;
        texts[i] = row_text(m, r);
        size_t w = text_width(texts[i]);
        if (w > text_w)
            text_w = w;
        const struct gm_event *e = timeline_row_event(m, r);
        w = strlen(format_offset(buf, sizeof(buf), e->t_ns - g->first_t_ns));
        if (w > time_w)
            time_w = w;
    }
    /* Fit in the report's width: peer and host go to a line of their own,
     * then the smallest categories share an "other" column. */
    size_t limit = table_width();
    for (;;) {
        size_t width = 2 + time_w + 2 + pid_w + 2 + MILESTONE_MIN_W;
        for (size_t c = 0; c < ncols; c++)
            width += 2 + cols[c].width;
        if (width <= limit)
            break;
        if (ncols > 0 && cols[ncols - 1].cats & ((1u << GM_CAT_PEER) | (1u << GM_CAT_HOST))) {
            ncols--;
            apart = true;
            continue;
        }
        /* merge the category column with the smallest peak into other */
        size_t smallest = SIZE_MAX;
        for (size_t c = 0; c < ncols; c++)
            if (cols[c].cats && !(cols[c].cats & other) &&
                (smallest == SIZE_MAX ||
                 column_value(&cols[c], g->peak) < column_value(&cols[smallest], g->peak)))
                smallest = c;
        if (smallest == SIZE_MAX || gpu_cats < 2)
            break;
        other |= cols[smallest].cats;
        memmove(&cols[smallest], &cols[smallest + 1], (ncols - smallest - 1) * sizeof(*cols));
        ncols--;
        gpu_cats--;
        bool has_other = false;
        for (size_t c = 0; c < ncols; c++)
            if (strcmp(cols[c].header, "other") == 0) {
                cols[c].cats = other;
                has_other = true;
            }
        if (!has_other) {
            /* before traced, which stays last of the GPU columns */
            size_t at = 0;
            while (at < ncols && cols[at].cats && cols[at].cats != (1u << GM_CAT_PEER) &&
                   cols[at].cats != (1u << GM_CAT_HOST))
                at++;
            memmove(&cols[at + 1], &cols[at], (ncols - at) * sizeof(*cols));
            cols[at] = (struct column){"other", other, COLUMN_W};
            ncols++;
        }
    }
    size_t used = 2 + time_w + 2 + pid_w + 2;
    for (size_t c = 0; c < ncols; c++)
        used += 2 + cols[c].width;
    size_t milestone_w = limit > used ? limit - used : MILESTONE_MIN_W;
    if (milestone_w < MILESTONE_MIN_W)
        milestone_w = MILESTONE_MIN_W;
    if (milestone_w > text_w)
        milestone_w = text_w;

    fprintf(out, "  %-*s  %-*s  ", (int)time_w, "time", (int)pid_w, "pid/rank");
    text_print(out, "milestone", milestone_w, milestone_w);
    for (size_t c = 0; c < ncols; c++)
        fprintf(out, "  %*s", (int)cols[c].width, cols[c].header);
    fputc('\n', out);
    for (size_t i = 0; i < g->nrows; i++) {
        if (!shown[i])
            continue;
        const struct row *r = &g->rows[i];
        const struct gm_process *p = &m->procs[r->proc];
        const struct gm_event *e = timeline_row_event(m, r);
        char who[48];
        if (p->has_rank)
            snprintf(who, sizeof(who), "%" PRId64 "/%" PRId64, p->pid, p->rank);
        else
            snprintf(who, sizeof(who), "%" PRId64 "/-", p->pid);
        fprintf(out, "  %-*s  %-*s  ", (int)time_w,
                format_offset(buf, sizeof(buf), e->t_ns - g->first_t_ns), (int)pid_w, who);
        /* A milestone's words carry numbers: too long, they wrap under it. */
        const char *rest = texts[i];
        size_t cut = text_break(rest, milestone_w);
        char *first = xstrndup(rest, cut);
        text_print(out, first, milestone_w, milestone_w);
        free(first);
        for (size_t c = 0; c < ncols; c++)
            fprintf(out, "  %*s", (int)cols[c].width,
                    format_size(buf, sizeof(buf), column_value(&cols[c], r->live)));
        fputc('\n', out);
        for (rest += cut; *rest;) {
            while (*rest == ' ')
                rest++;
            cut = text_break(rest, milestone_w - 2);
            char *line = xstrndup(rest, cut);
            fprintf(out, "  %*s    ", (int)(time_w + 2 + pid_w), "");
            text_print(out, line, milestone_w, 0);
            fputc('\n', out);
            free(line);
            rest += cut;
        }
        if (r->kind == MS_MEASUREMENT) {
            char f[UNITS_BUF], t[UNITS_BUF], u[UNITS_BUF], x[UNITS_BUF];
            int64_t used_bytes = gm_sub(e->b, e->a);
            char *line =
                xasprintf("free %s of %s, used %s, unexplained %s", format_size(f, sizeof(f), e->a),
                          format_size(t, sizeof(t), e->b), format_size(u, sizeof(u), used_bytes),
                          format_size(x, sizeof(x), gm_sub(used_bytes, gm_traced(r->live))));
            text_print_wrapped(out, line, 2 + time_w + 2 + pid_w + 2);
            free(line);
        }
    }
    if (hidden_failed)
        fprintf(out, "  ... and %zu more failed call%s (--json lists every one)\n", hidden_failed,
                hidden_failed == 1 ? "" : "s");
    if (other) {
        fputs("  other:", out);
        for (int k = 0; k < GM_GPU_CATEGORIES; k++)
            if (other & (1u << k))
                fprintf(out, " %s", gm_category_key((enum gm_category)k));
        fputc('\n', out);
    }
    if (apart && (peer || host)) {
        fputs("  not GPU memory, shown apart:", out);
        if (peer)
            fprintf(out, " peer memory mapped here up to %s%s",
                    format_size(buf, sizeof(buf), g->peak[GM_CAT_PEER]), host ? "," : "");
        if (host)
            fprintf(out, " pinned host memory up to %s",
                    format_size(buf, sizeof(buf), g->peak[GM_CAT_HOST]));
        fputc('\n', out);
    }
    (void)name;
    for (size_t i = 0; i < g->nrows; i++)
        free(texts[i]);
    free(texts);
    free(shown);
}

static size_t count_hosts(const struct gm_model *m)
{
    size_t hosts = 0;
    for (size_t i = 0; i < m->nclocks; i++) {
        bool again = false;
        for (size_t k = 0; k < i; k++)
            again |= strcmp(m->clocks[k].host, m->clocks[i].host) == 0;
        hosts += !again;
    }
    return hosts;
}

/* What each process was inside when its trace ended (calls that never returned). */
static void print_inflight_text(const struct gm_model *m, FILE *out)
{
    bool any = false;
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct gm_process *p = &m->procs[i];
        for (size_t k = 0; k < p->ninflight; k++) {
            const struct gm_inflight *c = &p->inflight[k];
            if (!any)
                fputs("\nCalls that never returned:\n", out);
            any = true;
            char name[96], what[320];
            gm_process_name(name, sizeof(name), p);
            gm_inflight_text(what, sizeof(what), m, p, c);
            char *line = xasprintf("%s, thread %" PRId64 ": %s%s", name, c->tid, what,
                                   c->depth > 0 ? " (nested)" : "");
            text_print_wrapped(out, line, 2);
            free(line);
        }
    }
}

static void print_text(const struct gm_model *m, const char *path, struct gpu_report *gpus,
                       size_t ngpus, FILE *out)
{
    size_t hosts = count_hosts(m);
    char *line;
    if (m->ngpus == 0)
        line = xasprintf("cutrace timeline of %s: no GPU events in %zu process%s", path, m->nprocs,
                         m->nprocs == 1 ? "" : "es");
    else
        line = xasprintf("cutrace timeline of %s: %zu GPU%s, %zu process%s, %zu host%s", path,
                         m->ngpus, m->ngpus == 1 ? "" : "s", m->nprocs, m->nprocs == 1 ? "" : "es",
                         hosts, hosts == 1 ? "" : "s");
    text_print_wrapped(out, line, 0);
    free(line);
    if (m->ngpus > 0)
        text_print_wrapped(out,
                           "time: since the GPU's first event; sizes: live bytes per category "
                           "after each milestone",
                           2);
    for (size_t i = 0; i < ngpus; i++)
        print_gpu_text(m, &gpus[i], out);
    print_inflight_text(m, out);
    if (m->nnotes)
        fputc('\n', out);
    for (size_t i = 0; i < m->nnotes; i++) {
        char *note = xasprintf("note: %s", m->notes[i]);
        text_print_wrapped(out, note, 0);
        free(note);
    }
}

/* ---- JSON ---- */

static void json_live(struct json_writer *w, const int64_t *live)
{
    json_key(w, "live");
    json_object_begin(w);
    for (int c = 0; c < GM_CATEGORIES; c++)
        json_kv_int(w, gm_category_key((enum gm_category)c), live[c]);
    json_object_end(w);
    json_kv_int(w, "traced_bytes", gm_traced(live));
}

static void print_row_json(struct json_writer *w, const struct gm_model *m,
                           const struct gpu_report *g, const struct row *r)
{
    const struct gm_process *p = &m->procs[r->proc];
    const struct gm_event *e = timeline_row_event(m, r);
    json_object_begin(w);
    json_kv_string(w, "kind", ms_key(r->kind));
    json_kv_int(w, "seq", e->seq);
    json_kv_int(w, "pid", p->pid);
    json_kv_opt_int(w, "rank", p->has_rank, p->rank);
    json_kv_string(w, "file", p->trace->file);
    json_kv_int(w, "t_ns", e->t_ns);
    json_kv_int(w, "at_ns", gm_sub(e->t_ns, g->first_t_ns));
    json_kv_string(w, "api", e->type == GM_EV_END ? NULL : gm_api_name(m, e->api));
    char *text = row_text(m, r);
    json_kv_string(w, "text", text);
    free(text);
    /* The row's name in `cutrace diff` and the moment that names it for
     * `cutrace sites --at` (milestones.h). */
    const char *sub = timeline_row_sub(m, r);
    char *name = sub ? ms_name(r->kind, r->n_api, sub) : ms_name(r->kind, r->n, NULL);
    json_kv_string(w, "name", name);
    free(name);
    char *at = xasprintf("%s:%u", ms_key(r->kind), r->n);
    json_kv_string(w, "at",
                   r->kind == MS_BURST_BEGIN || r->kind == MS_BURST_END || r->kind == MS_FREE_BURST
                       ? NULL
                       : at);
    free(at);
    if (r->tag != MS_TAG_NONE)
        json_kv_string(w, "tag", ms_tag_key((enum ms_tag)r->tag));
    else
        json_kv_null(w, "tag");
    char hash[24], res[64];
    switch (r->kind) {
    case MS_COMM_INIT: {
        const struct gm_comm *c = &p->comms[e->a];
        json_key(w, "communicator");
        json_object_begin(w);
        json_kv_string(w, "unique_id_hash", hash_hex(hash, sizeof(hash), c->hash));
        json_kv_int(w, "rank", c->rank);
        json_kv_int(w, "nranks", c->nranks);
        json_kv_int(w, "result", c->result);
        json_kv_string(w, "result_name", result_name(LAYER_NCCL, c->result));
        json_object_end(w);
        break;
    }
    case MS_WEIGHT_BEGIN:
    case MS_WEIGHT_END:
    case MS_BURST_BEGIN:
    case MS_BURST_END:
    case MS_FREE_BURST:
        json_key(w, "burst");
        json_object_begin(w);
        json_kv_int(w, r->kind == MS_FREE_BURST ? "frees" : "allocations", r->count);
        json_kv_int(w, "bytes", r->bytes);
        json_kv_int(w, "first_seq", r->first_seq);
        json_kv_int(w, "last_seq", r->last_seq);
        json_object_end(w);
        break;
    case MS_CAPTURE_END:
        json_kv_int(w, "graphs", r->count);
        break;
    case MS_FAILED:
        json_kv_int(w, "result", e->a);
        json_kv_string(w, "result_name", result_name((enum result_layer)e->layer, e->a));
        json_kv_int(w, "size", e->b);
        break;
    case MS_END:
        json_kv_string(w, "end_state", p->end_state);
        json_kv_bool(w, "exited", p->exited);
        break;
    default:
        break;
    }
    (void)res;
    json_live(w, r->live);
    json_key(w, "measurement");
    if (r->kind == MS_MEASUREMENT) {
        int64_t used_bytes = gm_sub(e->b, e->a);
        json_object_begin(w);
        json_kv_int(w, "free_bytes", e->a);
        json_kv_int(w, "total_bytes", e->b);
        json_kv_int(w, "used_bytes", used_bytes);
        json_kv_int(w, "unexplained_bytes", gm_sub(used_bytes, gm_traced(r->live)));
        json_object_end(w);
    } else {
        json_null(w);
    }
    json_object_end(w);
}

static void print_json(const struct gm_model *m, const char *path, struct gpu_report *gpus,
                       size_t ngpus, FILE *out)
{
    struct json_writer w;
    json_init(&w, out);
    json_object_begin(&w);
    json_kv_string(&w, "cutrace_version", CUTRACE_VERSION);
    json_kv_string(&w, "report", "timeline");
    json_kv_string(&w, "path", path);
    gm_clocks_json(&w, m);
    json_key(&w, "gpus");
    json_array_begin(&w);
    for (size_t i = 0; i < ngpus; i++) {
        const struct gpu_report *g = &gpus[i];
        const struct gm_gpu *gpu = &m->gpus[g->gpu];
        json_object_begin(&w);
        json_kv_int(&w, "index", g->gpu);
        json_kv_string(&w, "uuid", gpu->uuid);
        json_kv_string(&w, "key", gpu->key);
        json_kv_string(&w, "identified_by", gpu->uuid ? "uuid" : "host_and_ordinal");
        json_kv_string(&w, "name", gpu->name[0] ? gpu->name : NULL);
        json_kv_opt_int(&w, "total_bytes", gpu->total >= 0, gpu->total);
        json_kv_string(&w, "host", m->clocks[gpu->clock].host);
        json_kv_string(&w, "boot_id", m->clocks[gpu->clock].boot_id);
        json_kv_int(&w, "first_t_ns", g->first_t_ns);
        json_key(&w, "processes");
        json_array_begin(&w);
        for (size_t k = 0; k < gpu->nprocs; k++) {
            const struct gm_process *p = &m->procs[gpu->procs[k]];
            json_object_begin(&w);
            json_kv_int(&w, "pid", p->pid);
            json_kv_opt_int(&w, "rank", p->has_rank, p->rank);
            json_kv_string(&w, "file", p->trace->file);
            json_kv_string(&w, "end_state", p->end_state);
            json_kv_bool(&w, "exited", p->exited);
            json_object_end(&w);
        }
        json_array_end(&w);
        json_key(&w, "peak_live");
        json_object_begin(&w);
        for (int c = 0; c < GM_CATEGORIES; c++)
            json_kv_int(&w, gm_category_key((enum gm_category)c), g->peak[c]);
        json_object_end(&w);
        json_key(&w, "milestones");
        json_array_begin(&w);
        for (size_t r = 0; r < g->nrows; r++)
            print_row_json(&w, m, g, &g->rows[r]);
        json_array_end(&w);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_key(&w, "in_flight");
    json_array_begin(&w);
    for (size_t i = 0; i < m->nprocs; i++)
        for (size_t k = 0; k < m->procs[i].ninflight; k++)
            gm_inflight_json(&w, m, &m->procs[i], &m->procs[i].inflight[k]);
    json_array_end(&w);
    json_key(&w, "notes");
    json_array_begin(&w);
    for (size_t i = 0; i < m->nnotes; i++)
        json_string(&w, m->notes[i]);
    json_array_end(&w);
    json_key(&w, "totals");
    json_object_begin(&w);
    json_kv_uint(&w, "processes", m->nprocs);
    json_kv_uint(&w, "gpus", m->ngpus);
    json_kv_uint(&w, "hosts", count_hosts(m));
    json_object_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

/* ---- CSV: one row per milestone ---- */

static void print_csv(const struct gm_model *m, struct gpu_report *gpus, size_t ngpus, FILE *out)
{
    static const char *const head[] = {"gpu",        "gpu_uuid",      "pid",
                                       "rank",       "kind",          "seq",
                                       "t_ns",       "at_ns",         "api",
                                       "text",       "nccl_bytes",    "ipc_exported_bytes",
                                       "vmm_bytes",  "runtime_bytes", "managed_bytes",
                                       "peer_bytes", "host_bytes",    "traced_bytes",
                                       "free_bytes", "total_bytes",   "unexplained_bytes",
                                       "clock"};
    static_assert(GM_CATEGORIES == 7, "one CSV column per category");
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    for (size_t i = 0; i < ngpus; i++) {
        const struct gpu_report *g = &gpus[i];
        for (size_t k = 0; k < g->nrows; k++) {
            const struct row *r = &g->rows[k];
            const struct gm_process *p = &m->procs[r->proc];
            const struct gm_event *e = timeline_row_event(m, r);
            csv_uint(&w, g->gpu);
            csv_string(&w, m->gpus[g->gpu].uuid);
            csv_int(&w, p->pid);
            csv_opt_int(&w, p->has_rank, p->rank);
            csv_string(&w, ms_key(r->kind));
            csv_int(&w, e->seq);
            csv_int(&w, e->t_ns);
            csv_int(&w, gm_sub(e->t_ns, g->first_t_ns));
            csv_string(&w, e->type == GM_EV_END ? NULL : gm_api_name(m, e->api));
            char *text = row_text(m, r);
            csv_string(&w, text);
            free(text);
            for (int c = 0; c < GM_CATEGORIES; c++)
                csv_int(&w, r->live[c]);
            csv_int(&w, gm_traced(r->live));
            bool measured = r->kind == MS_MEASUREMENT;
            csv_opt_int(&w, measured, e->a);
            csv_opt_int(&w, measured, e->b);
            csv_opt_int(&w, measured, gm_sub(gm_sub(e->b, e->a), gm_traced(r->live)));
            csv_string(&w, gm_clock_state(m, p->clock));
            csv_end_row(&w);
        }
    }
}

/* --fail-on-problem: a failed call, an unknown or a double free among the
 * processes listed. */
static bool found_problem(const struct gm_model *m, const struct gm_filter *f,
                          const struct gpu_report *gpus, size_t ngpus)
{
    bool found = false;
    for (size_t i = 0; i < ngpus; i++)
        for (size_t k = 0; k < gpus[i].nrows; k++)
            found |= gpus[i].rows[k].kind == MS_FAILED;
    for (size_t p = 0; p < m->nprocs; p++)
        found |= gm_filter_proc(f, (uint32_t)p) &&
                 (m->procs[p].unknown_frees > 0 || m->procs[p].double_frees > 0);
    return found;
}

int cmd_timeline(int argc, char **argv)
{
    struct cli_report_opts o;
    const char *path;
    int parsed = cli_report_parse(argc, argv, usage, csv_tables, &o, &path);
    if (parsed != CLI_PARSED)
        return parsed;

    struct trace_set set;
    struct gm_model m;
    if (gm_open_run(&m, &set, o.paths, o.npaths, 0) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct gm_filter f;
    int status = gm_filter_init(&f, &m, &o, "timeline");
    if (status == CLI_EXIT_OK) {
        struct gpu_report *gpus = xcalloc(m.ngpus ? m.ngpus : 1, sizeof(*gpus));
        size_t ngpus = 0;
        for (size_t i = 0; i < m.ngpus; i++) {
            if (!gm_filter_gpu(&f, (uint32_t)i))
                continue;
            gpus[ngpus].gpu = (uint32_t)i;
            struct gpu_report *g = &gpus[ngpus++];
            timeline_build_gpu(&m, g);
            /* The listed processes' rows; their live bytes stay the GPU's. */
            size_t kept = 0;
            for (size_t k = 0; k < g->nrows; k++)
                if (gm_filter_proc(&f, g->rows[k].proc))
                    g->rows[kept++] = g->rows[k];
            g->nrows = kept;
        }
        if (o.format == CLI_FORMAT_JSON)
            print_json(&m, path, gpus, ngpus, stdout);
        else if (o.format == CLI_FORMAT_CSV)
            print_csv(&m, gpus, ngpus, stdout);
        else
            print_text(&m, path, gpus, ngpus, stdout);
        if (o.fail_on_problem && found_problem(&m, &f, gpus, ngpus))
            status = CLI_EXIT_PROBLEM;
        for (size_t i = 0; i < ngpus; i++)
            free(gpus[i].rows);
        free(gpus);
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
