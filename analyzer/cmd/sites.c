/*
 * sites.c - `cutrace sites DIR [--gpu UUID|INDEX] [--at MOMENT]
 * [--top N] [--json | --folded]`: per physical GPU, the GPU memory live at
 * one moment (its peak by default) grouped by the call site that allocated
 * it: the innermost Python frame where the stack has Python frames
 * ("custom_all_reduce.py:142 create_shared_buffer"), else the innermost
 * native frame outside the CUDA libraries and the glue between Python and C
 * ("load_weights (server)"), with a note when that site says less than it
 * seems (an unnamed module+0xOFFSET, only the interpreter's frames).
 * --folded writes the same memory as folded stacks (flamegraph.pl,
 * speedscope), one line per distinct stack, weighted by bytes.
 *
 * The moment comes from the GPU memory model (gpumodel.h), the same one
 * `cutrace timeline` shows, so "--at measurement:2" is the second
 * cudaMemGetInfo row of the timeline. The stacks come from stacks.h, one
 * symbolizer for the whole run (ranks share their libraries).
 */
#include "cli.h"
#include "model/clocks.h"
#include "model/gpumodel.h"
#include "model/milestones.h"
#include "model/filter.h"
#include "out/csv.h"
#include "out/json.h"
#include "symbols/stacks.h"
#include "out/table.h"
#include "model/trace.h"
#include "model/traceset.h"
#include "out/units.h"

#include <ctype.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_TOP 20

static const char usage[] =
    "usage: cutrace sites [options] [--at MOMENT] [--top N] [--json | --csv | --folded] DIR\n"
    "\n"
    "Per physical GPU, the GPU memory live at one moment grouped by the call\n"
    "site that allocated it: the innermost Python frame of its stack where\n"
    "there is one (file.py:LINE function), else the innermost native frame\n"
    "outside the CUDA libraries and the interpreter's call machinery (libffi,\n"
    "ctypes, libpython). Native frames are named from the modules' symbol\n"
    "tables now, offline; a note says why a site stayed module+0xOFFSET.\n"
    "\n"
    "options:\n" CLI_FILTER_HELP "  --at MOMENT       the moment (default: peak):\n" MOMENT_HELP
    "  --top N           the N largest sites (default 20, 0 for all); the rest is one "
    "line\n" CLI_FORMAT_HELP
    "  --folded          folded stacks (flamegraph.pl, speedscope) weighted by bytes,\n"
    "                    rooted at gpuINDEX;pid PID and ending in the API called\n" CLI_HELP_HELP
    "\n"
    "--rank, --pid and --host count only those processes' allocations; the moment\n"
    "stays the GPU's. --json and --csv list the sites the text lists (--top).\n"
    "Tables for --csv: sites (one row per site of each GPU).\n"
    "\n" CLI_EXIT_HELP("GPU memory live at the moment without a call stack\n"
                       "     (site \"(no stack)\")");

static const char *const csv_tables[] = {"sites", NULL};

/* ---- the moment (milestones.h) ---- */

static const struct gm_event *ref_event(const struct gm_model *m, const struct gm_ref *r)
{
    return &m->procs[r->proc].events[r->event];
}

/*
 * seq:N names a call, and a call the trace does not have is a usage error
 * naming the trace and its calls, never "right after the last call": that
 * would report the end under the name of a moment that never came. The
 * processes checked are those seq:N is read in: PID's, else the one
 * process of each GPU in the report.
 */
static int check_seq(const struct gm_model *m, const struct moment_spec *at, int64_t only)
{
    if (at->kind != MOMENT_SEQ)
        return CLI_EXIT_OK;
    bool pid_found = false;
    for (size_t g = 0; g < m->ngpus; g++) {
        const struct gm_gpu *gpu = &m->gpus[g];
        if (only >= 0 && (int64_t)g != only)
            continue;
        for (size_t k = 0; k < gpu->nprocs; k++) {
            const struct gm_process *p = &m->procs[gpu->procs[k]];
            if (at->pid > 0 ? p->pid != at->pid : gpu->nprocs != 1)
                continue;
            pid_found = true;
            if (p->has_calls && at->seq <= p->last_seq)
                continue;
            if (!p->has_calls)
                return cli_usage_error("sites", "--at %s: %s has no calls", at->text,
                                       p->trace->path);
            return cli_usage_error(
                "sites", "--at %s: %s has no call %" PRId64 " (its calls are seq 1 to %" PRId64 ")",
                at->text, p->trace->path, at->seq, p->last_seq);
        }
    }
    if (at->pid > 0 && !pid_found)
        return cli_usage_error("sites", "--at %s: no process %" PRId64 " on %s", at->text, at->pid,
                               only >= 0 ? "that GPU" : "any GPU of these traces");
    return CLI_EXIT_OK;
}

/* ---- sites ---- */

struct site {
    char *name; /* NULL: no stack */
    enum site_kind kind;
    int64_t bytes, count;
    int64_t by_category[GM_GPU_CATEGORIES];
    int64_t *pids;
    size_t npids, pids_cap;
    const struct stack *example; /* the stack of its largest allocation */
    int64_t example_bytes;
    char *note; /* what stacks_site said of the example's site, NULL nothing */
};

/* Stacks per process, loaded when first needed. */
struct run {
    const struct gm_model *m;
    const struct gm_filter *only; /* the processes whose allocations count */
    struct symbolizer *sym;
    struct stack_set *stacks; /* per model process */
    bool *loaded;
    char **notes;
    size_t nnotes, notes_cap;
};

static void note(struct run *r, char *text)
{
    r->notes = xgrow(r->notes, &r->notes_cap, r->nnotes + 1, sizeof(*r->notes));
    r->notes[r->nnotes++] = text;
}

static int stacks_of_proc(struct run *r, uint32_t proc, const struct stack_set **out)
{
    if (!r->loaded[proc]) {
        const struct gm_process *p = &r->m->procs[proc];
        /* gpumodel holds a const trace; loading only reads it. */
        struct trace *t = (struct trace *)p->trace;
        if (stacks_load(t, r->sym, &r->stacks[proc]) != 0) {
            trace_report_error(t);
            return -1;
        }
        r->loaded[proc] = true;
        char name[64];
        gm_process_name(name, sizeof(name), p);
        const struct stack_set *s = &r->stacks[proc];
        if (!s->present)
            note(r, xasprintf("%s: its trace (format %" PRId64 ") has no call stacks", name,
                              t->format_version));
        else if (s->config && strstr(s->config, "native=off python=off"))
            note(r, xasprintf("%s: stacks were off (CUTRACE_STACKS=none)", name));
        if (s->unnamed_example)
            note(r,
                 xasprintf("%s: some native frames stay unnamed (%s)", name, s->unnamed_example));
    }
    *out = &r->stacks[proc];
    return 0;
}

static struct site *find_site(struct site **sites, size_t *n, size_t *cap, const char *name,
                              enum site_kind kind)
{
    for (size_t i = 0; i < *n; i++) {
        struct site *s = &(*sites)[i];
        if (s->kind == kind && ((!s->name && !name) || (s->name && name && !strcmp(s->name, name))))
            return s;
    }
    *sites = xgrow(*sites, cap, *n + 1, sizeof(**sites));
    struct site *s = &(*sites)[(*n)++];
    memset(s, 0, sizeof(*s));
    s->name = name ? xstrdup(name) : NULL;
    s->kind = kind;
    return s;
}

static int compare_sites(const void *a, const void *b)
{
    const struct site *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (!x->name || !y->name)
        return !x->name - !y->name;
    return strcmp(x->name, y->name);
}

static bool is_live_gpu_alloc(const struct gm_process *p, const struct gm_alloc *a, uint32_t gpu,
                              uint64_t pos)
{
    if (a->gpu != gpu || a->category >= GM_GPU_CATEGORIES || a->event >= p->nevents)
        return false;
    return p->events[a->event].pos <= pos && pos < gm_alloc_end_pos(p, a);
}

struct gpu_sites {
    uint32_t gpu;
    struct moment at;
    struct site *sites;
    size_t nsites, cap;
    int64_t bytes, count;
};

static int collect(struct run *r, struct gpu_sites *gs)
{
    const struct gm_model *m = r->m;
    const struct gm_gpu *g = &m->gpus[gs->gpu];
    for (size_t k = 0; k < g->nprocs; k++) {
        uint32_t proc = g->procs[k];
        const struct gm_process *p = &m->procs[proc];
        const struct stack_set *ss = NULL;
        if (!gm_filter_proc(r->only, proc))
            continue;
        for (size_t i = 0; i < p->nallocs; i++) {
            const struct gm_alloc *a = &p->allocs[i];
            if (!is_live_gpu_alloc(p, a, gs->gpu, gs->at.pos))
                continue;
            if (!ss && stacks_of_proc(r, proc, &ss) != 0)
                return -1;
            enum site_kind kind;
            const char *api = gm_api_name(m, p->events[a->event].api);
            const struct stack *st = stacks_by_id(ss, a->stack_id);
            char *why;
            char *name = stacks_site(st, api, &kind, &why);
            struct site *s = find_site(&gs->sites, &gs->nsites, &gs->cap, name, kind);
            free(name);
            s->bytes = gm_add(s->bytes, a->size);
            s->count++;
            s->by_category[a->category] = gm_add(s->by_category[a->category], a->size);
            if (!s->example || a->size > s->example_bytes) {
                s->example = st;
                s->example_bytes = a->size;
                free(s->note);
                s->note = why;
                why = NULL;
            }
            free(why);
            bool seen = false;
            for (size_t q = 0; q < s->npids && !seen; q++)
                seen = s->pids[q] == p->pid;
            if (!seen) {
                s->pids = xgrow(s->pids, &s->pids_cap, s->npids + 1, sizeof(*s->pids));
                s->pids[s->npids++] = p->pid;
            }
            gs->bytes = gm_add(gs->bytes, a->size);
            gs->count++;
        }
    }
    if (gs->nsites > 1)
        qsort(gs->sites, gs->nsites, sizeof(*gs->sites), compare_sites);
    return 0;
}

/* ---- output ---- */

static const char *kind_key(enum site_kind kind)
{
    return kind == SITE_PYTHON ? "python" : kind == SITE_NATIVE ? "native" : "none";
}

static char *moment_text(const struct gm_model *m, const struct moment_spec *at,
                         const struct moment *mo)
{
    const struct gm_process *p = &m->procs[mo->ref.proc];
    const struct gm_event *e = ref_event(m, &mo->ref);
    char name[64];
    gm_process_name(name, sizeof(name), p);
    const char *what = at->kind == MOMENT_PEAK  ? "the peak"
                       : at->kind == MOMENT_END ? "the end"
                                                : at->text;
    const char *api = gm_api_name(m, e->api);
    if (e->type == GM_EV_END)
        return xasprintf("at %s: the end of %s", what, name);
    return xasprintf("at %s: %s seq %" PRId64 "%s%s", what, name, e->seq, api[0] ? " " : "", api);
}

static int compare_texts(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void print_text(const struct gm_model *m, const struct moment_spec *at, struct run *r,
                       struct gpu_sites *gpus, size_t n, size_t top, FILE *out)
{
    static const struct table_column columns[] = {
        {"bytes", TABLE_RIGHT, 0},
        {"share", TABLE_RIGHT, 0},
        {"allocs", TABLE_RIGHT, 0},
        {"site", TABLE_LEFT, 0},
    };
    for (size_t i = 0; i < n; i++) {
        struct gpu_sites *gs = &gpus[i];
        const struct gm_gpu *g = &m->gpus[gs->gpu];
        fprintf(out, "%sGPU %" PRIu32 "  ", i ? "\n" : "", gs->gpu);
        text_print(out, g->uuid ? g->uuid : g->key, 60, 0);
        if (g->name[0]) {
            fputs("  ", out);
            text_print(out, g->name, 40, 0);
        }
        fputc('\n', out);
        if (!gs->at.found) {
            fputs("  no such moment on this GPU: ", out);
            text_print(out, at->text, 40, 0);
            fputc('\n', out);
            continue;
        }
        char *when = moment_text(m, at, &gs->at);
        char bytes[UNITS_BUF];
        fputs("  ", out);
        text_print(out, when, 100, 0);
        fprintf(out, ": %s of GPU memory live in %" PRId64 " allocation%s\n",
                format_bytes(bytes, sizeof(bytes), (uint64_t)gs->bytes), gs->count,
                gs->count == 1 ? "" : "s");
        free(when);
        if (gs->nsites == 0)
            continue;
        struct table *t = table_new(columns, sizeof(columns) / sizeof(columns[0]));
        size_t shown = top && top < gs->nsites ? top : gs->nsites;
        for (size_t k = 0; k < shown; k++) {
            const struct site *s = &gs->sites[k];
            table_cell(t, format_bytes(bytes, sizeof(bytes), (uint64_t)s->bytes));
            table_cellf(t, "%.1f%%", gs->bytes ? 100.0 * (double)s->bytes / (double)gs->bytes : 0);
            table_cellf(t, "%" PRId64, s->count);
            table_cell(t, s->name ? s->name : "(no stack)");
        }
        table_print(t, out, 2);
        table_free(t);
        if (shown < gs->nsites) {
            int64_t rest = 0, count = 0;
            for (size_t k = shown; k < gs->nsites; k++) {
                rest = gm_add(rest, gs->sites[k].bytes);
                count += gs->sites[k].count;
            }
            fprintf(out, "  (%zu more site%s: %s in %" PRId64 " allocation%s)\n",
                    gs->nsites - shown, gs->nsites - shown == 1 ? "" : "s",
                    format_bytes(bytes, sizeof(bytes), (uint64_t)rest), count,
                    count == 1 ? "" : "s");
        }
    }
    /* The shown sites' own notes, once each however many GPUs show the
     * site (sorted, so that duplicates meet whatever their number). */
    char **lines = NULL;
    size_t nlines = 0, lines_cap = 0;
    for (size_t i = 0; i < n; i++) {
        struct gpu_sites *gs = &gpus[i];
        size_t shown = top && top < gs->nsites ? top : gs->nsites;
        for (size_t k = 0; gs->at.found && k < shown; k++) {
            const struct site *s = &gs->sites[k];
            if (!s->note || !s->name)
                continue;
            lines = xgrow(lines, &lines_cap, nlines + 1, sizeof(*lines));
            lines[nlines++] = xasprintf("%s: %s", s->name, s->note);
        }
    }
    if (nlines > 1)
        qsort(lines, nlines, sizeof(*lines), compare_texts);
    if (m->nnotes + r->nnotes + nlines)
        fputc('\n', out);
    for (size_t i = 0; i < nlines; i++) {
        if (i == 0 || strcmp(lines[i], lines[i - 1]) != 0) {
            fputs("note: ", out);
            text_print(out, lines[i], 200, 0);
            fputc('\n', out);
        }
    }
    for (size_t i = 0; i < nlines; i++)
        free(lines[i]);
    free(lines);
    for (size_t i = 0; i < m->nnotes; i++) {
        fputs("note: ", out);
        text_print(out, m->notes[i], 200, 0);
        fputc('\n', out);
    }
    for (size_t i = 0; i < r->nnotes; i++) {
        fputs("note: ", out);
        text_print(out, r->notes[i], 200, 0);
        fputc('\n', out);
    }
}

static void print_json(const struct gm_model *m, const char *path, const struct moment_spec *at,
                       struct run *r, struct gpu_sites *gpus, size_t n, size_t top, FILE *out)
{
    struct json_writer w;
    json_init(&w, out);
    json_object_begin(&w);
    json_kv_string(&w, "cutrace_version", CUTRACE_VERSION);
    json_kv_string(&w, "report", "sites");
    json_kv_string(&w, "path", path);
    gm_clocks_json(&w, m);
    json_kv_string(&w, "at", at->text);
    json_key(&w, "gpus");
    json_array_begin(&w);
    for (size_t i = 0; i < n; i++) {
        struct gpu_sites *gs = &gpus[i];
        const struct gm_gpu *g = &m->gpus[gs->gpu];
        json_object_begin(&w);
        json_kv_int(&w, "index", gs->gpu);
        json_kv_string(&w, "uuid", g->uuid);
        json_kv_string(&w, "key", g->key);
        json_kv_string(&w, "name", g->name[0] ? g->name : NULL);
        if (!gs->at.found) {
            json_kv_null(&w, "moment");
        } else {
            const struct gm_process *p = &m->procs[gs->at.ref.proc];
            const struct gm_event *e = ref_event(m, &gs->at.ref);
            json_key(&w, "moment");
            json_object_begin(&w);
            json_kv_int(&w, "pid", p->pid);
            json_kv_int(&w, "seq", e->seq);
            json_kv_int(&w, "t_ns", e->t_ns);
            json_kv_string(&w, "api", e->type == GM_EV_END ? NULL : gm_api_name(m, e->api));
            json_kv_int(&w, "traced_bytes", gs->at.traced);
            json_object_end(&w);
        }
        json_kv_int(&w, "live_bytes", gs->bytes);
        json_kv_int(&w, "allocations", gs->count);
        json_key(&w, "sites");
        json_array_begin(&w);
        size_t shown = top && top < gs->nsites ? top : gs->nsites;
        for (size_t k = 0; k < shown; k++) {
            const struct site *s = &gs->sites[k];
            json_object_begin(&w);
            json_kv_string(&w, "site", s->name);
            json_kv_string(&w, "kind", kind_key(s->kind));
            json_kv_int(&w, "bytes", s->bytes);
            json_kv_int(&w, "allocations", s->count);
            json_key(&w, "categories");
            json_object_begin(&w);
            for (int c = 0; c < GM_GPU_CATEGORIES; c++)
                if (s->by_category[c])
                    json_kv_int(&w, gm_category_key((enum gm_category)c), s->by_category[c]);
            json_object_end(&w);
            json_key(&w, "pids");
            json_array_begin(&w);
            for (size_t q = 0; q < s->npids; q++)
                json_int(&w, s->pids[q]);
            json_array_end(&w);
            json_key(&w, "stack");
            stacks_json_frames(&w, s->example);
            json_kv_string(&w, "note", s->note);
            json_object_end(&w);
        }
        json_array_end(&w);
        int64_t rest = 0, count = 0;
        for (size_t k = shown; k < gs->nsites; k++) {
            rest = gm_add(rest, gs->sites[k].bytes);
            count += gs->sites[k].count;
        }
        json_key(&w, "other");
        json_object_begin(&w);
        json_kv_uint(&w, "sites", gs->nsites - shown);
        json_kv_int(&w, "bytes", rest);
        json_kv_int(&w, "allocations", count);
        json_object_end(&w);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_key(&w, "notes");
    json_array_begin(&w);
    for (size_t i = 0; i < m->nnotes; i++)
        json_string(&w, m->notes[i]);
    for (size_t i = 0; i < r->nnotes; i++)
        json_string(&w, r->notes[i]);
    json_array_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

/* ---- folded stacks ---- */

struct folded_line {
    char *stack;
    int64_t bytes;
};

static int compare_lines(const void *a, const void *b)
{
    return strcmp(((const struct folded_line *)a)->stack, ((const struct folded_line *)b)->stack);
}

static char *folded_stack(uint32_t gpu, const struct gm_process *p, const struct stack *st,
                          const char *api)
{
    size_t cap = 256, len = 0;
    char *out = xmalloc(cap);
    len = (size_t)snprintf(out, cap, "gpu%" PRIu32 ";pid %" PRId64, gpu, p->pid);
    size_t nframes = st ? st->nframes : 0;
    for (size_t k = 0; k <= nframes; k++) {
        char *frame;
        if (k < nframes)
            frame = stack_frame_folded(&st->frames[nframes - 1 - k]);
        else
            frame = xstrdup(api && api[0] ? api : "?");
        if (k == 0 && nframes == 0) {
            char *tmp = xasprintf("(no stack);%s", frame);
            free(frame);
            frame = tmp;
        }
        size_t flen = strlen(frame);
        out = xgrow(out, &cap, len + flen + 2, 1);
        out[len++] = ';';
        memcpy(out + len, frame, flen + 1);
        len += flen;
        free(frame);
    }
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = '?';
    return out;
}

static int print_folded(struct run *r, struct gpu_sites *gpus, size_t n, FILE *out)
{
    const struct gm_model *m = r->m;
    struct folded_line *lines = NULL;
    size_t nlines = 0, cap = 0;
    for (size_t i = 0; i < n; i++) {
        struct gpu_sites *gs = &gpus[i];
        if (!gs->at.found)
            continue;
        const struct gm_gpu *g = &m->gpus[gs->gpu];
        for (size_t k = 0; k < g->nprocs; k++) {
            uint32_t proc = g->procs[k];
            const struct gm_process *p = &m->procs[proc];
            const struct stack_set *ss = NULL;
            if (!gm_filter_proc(r->only, proc))
                continue;
            for (size_t a = 0; a < p->nallocs; a++) {
                const struct gm_alloc *al = &p->allocs[a];
                if (!is_live_gpu_alloc(p, al, gs->gpu, gs->at.pos) || al->size <= 0)
                    continue;
                if (!ss && stacks_of_proc(r, proc, &ss) != 0) {
                    for (size_t q = 0; q < nlines; q++)
                        free(lines[q].stack);
                    free(lines);
                    return -1;
                }
                lines = xgrow(lines, &cap, nlines + 1, sizeof(*lines));
                lines[nlines].stack = folded_stack(gs->gpu, p, stacks_by_id(ss, al->stack_id),
                                                   gm_api_name(m, p->events[al->event].api));
                lines[nlines++].bytes = al->size;
            }
        }
    }
    if (nlines > 1)
        qsort(lines, nlines, sizeof(*lines), compare_lines);
    for (size_t i = 0; i < nlines;) {
        size_t j = i;
        int64_t bytes = 0;
        for (; j < nlines && strcmp(lines[j].stack, lines[i].stack) == 0; j++)
            bytes = gm_add(bytes, lines[j].bytes);
        fprintf(out, "%s %" PRId64 "\n", lines[i].stack, bytes);
        i = j;
    }
    for (size_t i = 0; i < nlines; i++)
        free(lines[i].stack);
    free(lines);
    return 0;
}

/* ---- CSV: one row per site listed ---- */

static void print_csv(const struct gm_model *m, struct gpu_sites *gpus, size_t n, size_t top,
                      FILE *out)
{
    static const char *const head[] = {
        "gpu",       "gpu_uuid",      "site",          "kind",
        "bytes",     "allocations",   "nccl_bytes",    "ipc_exported_bytes",
        "vmm_bytes", "runtime_bytes", "managed_bytes", "pids"};
    static_assert(GM_GPU_CATEGORIES == 5, "one CSV column per GPU category");
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    for (size_t i = 0; i < n; i++) {
        const struct gpu_sites *gs = &gpus[i];
        size_t shown = top && top < gs->nsites ? top : gs->nsites;
        for (size_t k = 0; k < shown; k++) {
            const struct site *s = &gs->sites[k];
            csv_uint(&w, gs->gpu);
            csv_string(&w, m->gpus[gs->gpu].uuid);
            csv_string(&w, s->name);
            csv_string(&w, kind_key(s->kind));
            csv_int(&w, s->bytes);
            csv_int(&w, s->count);
            for (int c = 0; c < GM_GPU_CATEGORIES; c++)
                csv_int(&w, s->by_category[c]);
            char *pids = xstrdup("");
            for (size_t q = 0; q < s->npids; q++) {
                char *next = xasprintf("%s%s%" PRId64, pids, q ? " " : "", s->pids[q]);
                free(pids);
                pids = next;
            }
            csv_string(&w, pids);
            free(pids);
            csv_end_row(&w);
        }
    }
}

/* --fail-on-problem: live GPU memory at the moment that no call stack explains. */
static bool found_problem(const struct gpu_sites *gpus, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < gpus[i].nsites; k++)
            if (gpus[i].sites[k].kind == SITE_NONE && gpus[i].sites[k].bytes > 0)
                return true;
    return false;
}

/* ---- the command ---- */

static int report(const char *path, const struct cli_report_opts *o, const struct moment_spec *at,
                  size_t top, bool folded)
{
    struct trace_set set;
    struct gm_model m;
    if (gm_open_run(&m, &set, path, 0) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct gm_filter filter;
    int status = gm_filter_init(&filter, &m, o, "sites");
    int64_t only = filter.gpu;
    if (status == CLI_EXIT_OK)
        status = check_seq(&m, at, only);
    struct run r = {.m = &m, .only = &filter, .sym = symbolizer_new()};
    r.stacks = xcalloc(m.nprocs ? m.nprocs : 1, sizeof(*r.stacks));
    r.loaded = xcalloc(m.nprocs ? m.nprocs : 1, sizeof(*r.loaded));
    size_t n = 0;
    struct gpu_sites *gpus = xcalloc(m.ngpus ? m.ngpus : 1, sizeof(*gpus));
    for (size_t i = 0; status == CLI_EXIT_OK && i < m.ngpus; i++)
        if (gm_filter_gpu(&filter, (uint32_t)i))
            gpus[n++].gpu = (uint32_t)i;
    size_t with_moment = 0;
    for (size_t i = 0; status == CLI_EXIT_OK && i < n; i++) {
        if (moment_find(&m, gpus[i].gpu, at, &gpus[i].at)) {
            with_moment++;
            if (!folded && collect(&r, &gpus[i]) != 0)
                status = CLI_EXIT_BAD_INPUT;
        }
    }
    if (status == CLI_EXIT_OK && n > 0 && with_moment == 0 && at->kind != MOMENT_PEAK &&
        at->kind != MOMENT_END)
        status =
            cli_usage_error("sites", "--at %s: no GPU of these traces has that moment", at->text);
    if (status == CLI_EXIT_OK) {
        if (folded)
            status = print_folded(&r, gpus, n, stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_BAD_INPUT;
        else if (o->format == CLI_FORMAT_JSON)
            print_json(&m, path, at, &r, gpus, n, top, stdout);
        else if (o->format == CLI_FORMAT_CSV)
            print_csv(&m, gpus, n, top, stdout);
        else
            print_text(&m, at, &r, gpus, n, top, stdout);
        if (status == CLI_EXIT_OK && o->fail_on_problem && !folded && found_problem(gpus, n))
            status = CLI_EXIT_PROBLEM;
        if (status == CLI_EXIT_OK && (fflush(stdout) != 0 || ferror(stdout))) {
            cli_error(NULL, "cannot write the report to standard output");
            status = CLI_EXIT_BAD_INPUT;
        }
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < gpus[i].nsites; k++) {
            free(gpus[i].sites[k].name);
            free(gpus[i].sites[k].pids);
            free(gpus[i].sites[k].note);
        }
        free(gpus[i].sites);
    }
    free(gpus);
    gm_filter_free(&filter);
    for (size_t i = 0; i < r.nnotes; i++)
        free(r.notes[i]);
    free(r.notes);
    symbolizer_free(r.sym);
    /* The names are stored once the traces are closed (stacks.h says why). */
    size_t nprocs = m.nprocs;
    char **paths = xcalloc(nprocs ? nprocs : 1, sizeof(*paths));
    for (size_t i = 0; i < nprocs; i++)
        if (r.loaded[i] && status == CLI_EXIT_OK)
            paths[i] = xstrdup(m.procs[i].trace->path);
    gm_free(&m);
    trace_set_close(&set);
    for (size_t i = 0; i < nprocs; i++) {
        if (paths[i])
            stacks_store_symbols(paths[i], &r.stacks[i]);
        if (r.loaded[i])
            stacks_free(&r.stacks[i]);
        free(paths[i]);
    }
    free(paths);
    free(r.stacks);
    free(r.loaded);
    return status;
}

int cmd_sites(int argc, char **argv)
{
    static const struct option options[] = {
        CLI_FILTER_OPTIONS,
        CLI_FORMAT_OPTIONS,
        {"at", required_argument, NULL, 'a'},
        {"top", required_argument, NULL, 't'},
        {"folded", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool folded = false;
    const char *at_arg = "peak";
    int64_t top = DEFAULT_TOP;
    struct cli_report_opts o;
    cli_report_init(&o);
    int c;
    while ((c = cli_getopt(argc, argv, "h", options, usage)) != -1) {
        if (cli_report_option(&o, c, optarg))
            continue;
        switch (c) {
        case 'a':
            at_arg = optarg;
            break;
        case 't': {
            char *end;
            errno = 0;
            top = strtoll(optarg, &end, 10);
            if (!optarg[0] || *end || errno || top < 0)
                return cli_usage_error(argv[0], "--top %s: expected a count (0 for all)", optarg);
            break;
        }
        case 'f':
            folded = true;
            break;
        case 'h':
            return CLI_EXIT_OK;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage_error(argv[0], "missing trace directory");
    if (argc - optind > 1)
        return cli_usage_error(argv[0], "one trace directory expected, got %d arguments",
                               argc - optind);
    if (o.json_given && folded)
        return cli_usage_error(argv[0], "--json and --folded exclude each other");
    if (o.csv_given && folded)
        return cli_usage_error(argv[0], "--csv and --folded exclude each other");
    int finished = cli_report_finish(&o, argv[0], csv_tables);
    if (finished != CLI_PARSED)
        return finished;
    struct moment_spec at;
    const char *why;
    if (!moment_parse(at_arg, &at, &why))
        return cli_usage_error(argv[0], "--at %s: %s", at_arg, why);
    return report(argv[optind], &o, &at, (size_t)top, folded);
}
