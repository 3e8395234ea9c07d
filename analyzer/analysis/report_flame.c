/*
 * report_flame.c - the call sites of the HTML report (report.h): the GPU
 * memory live at each GPU's peak (the moment `cutrace sites` shows by
 * default) as an icicle flame graph, the outermost frame on top and the API
 * called at the bottom of each stack, widths by bytes. Frames are named as
 * `cutrace sites` names them (stacks.h, one symbolizer for the run); the
 * names cache beside a trace is read, never written: a report changes
 * nothing it reads.
 */
#include "analysis/report.h"

#include "cli.h"
#include "model/milestones.h"
#include "out/html.h"
#include "out/svg.h"
#include "out/units.h"
#include "symbols/stacks.h"
#include "symbols/symbolize.h"
#include "model/trace.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define FLAME_W     960
#define FLAME_ROW   17
#define FLAME_DEPTH 48 /* deeper frames are folded into their parent's box */
#define FLAME_MIN_W 0.5

struct node {
    char *name;
    int64_t bytes;
    struct node *children;
    size_t nchildren, cap;
};

static struct node *child(struct node *n, const char *name)
{
    for (size_t i = 0; i < n->nchildren; i++)
        if (strcmp(n->children[i].name, name) == 0)
            return &n->children[i];
    n->children = xgrow(n->children, &n->cap, n->nchildren + 1, sizeof(*n->children));
    struct node *c = &n->children[n->nchildren++];
    memset(c, 0, sizeof(*c));
    c->name = xstrdup(name);
    return c;
}

static void node_free(struct node *n)
{
    for (size_t i = 0; i < n->nchildren; i++)
        node_free(&n->children[i]);
    free(n->children);
    free(n->name);
}

static int compare_nodes(const void *a, const void *b)
{
    const struct node *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static size_t depth_of(struct node *n)
{
    size_t d = 0;
    if (n->nchildren > 1)
        qsort(n->children, n->nchildren, sizeof(*n->children), compare_nodes);
    for (size_t i = 0; i < n->nchildren; i++) {
        size_t c = depth_of(&n->children[i]);
        d = c > d ? c : d;
    }
    return d + 1;
}

static void add_stack(struct node *root, const struct stack *st, const char *api, int64_t bytes)
{
    struct node *n = root;
    n->bytes = gm_add(n->bytes, bytes);
    size_t nframes = st ? st->nframes : 0;
    size_t depth = 1;
    if (nframes == 0) {
        n = child(n, "(no stack)");
        n->bytes = gm_add(n->bytes, bytes);
        depth++;
    }
    for (size_t k = 0; k < nframes && depth < FLAME_DEPTH; k++, depth++) {
        char *text = stack_frame_text(&st->frames[nframes - 1 - k]); /* outermost first */
        n = child(n, text);
        free(text);
        n->bytes = gm_add(n->bytes, bytes);
    }
    n = child(n, api && api[0] ? api : "?");
    n->bytes = gm_add(n->bytes, bytes);
}

static void draw(FILE *out, const struct node *n, double x, double w, size_t depth, int64_t total,
                 size_t *boxes)
{
    if (w < FLAME_MIN_W)
        return;
    char b[UNITS_BUF];
    char *title = xasprintf("%s: %s (%.1f%%)", n->name, report_size(b, sizeof(b), n->bytes),
                            total > 0 ? 100.0 * (double)n->bytes / (double)total : 0.0);
    char cls[16];
    snprintf(cls, sizeof(cls), "flame c%zu", depth % 7);
    svg_rect(out, x, (double)depth * FLAME_ROW, w, FLAME_ROW - 1, cls, title, title);
    free(title);
    (*boxes)++;
    if (w > 40) {
        /* as much of the name as fits, about 6.5 px a character */
        size_t fit = (size_t)((w - 6) / 6.5);
        size_t len = strlen(n->name);
        char *text = xstrdup(n->name);
        if (len > fit && fit >= 2) {
            /* cut on a character boundary, then mark the cut */
            size_t cut = fit - 1;
            while (cut > 0 && ((unsigned char)text[cut] & 0xc0) == 0x80)
                cut--;
            memcpy(text + cut, "~", 2);
        }
        if (len <= fit || fit >= 2)
            svg_text(out, x + 3, (double)depth * FLAME_ROW + 12, "start", 0, text);
        free(text);
    }
    double cx = x;
    for (size_t i = 0; i < n->nchildren; i++) {
        double cw = n->bytes > 0 ? w * (double)n->children[i].bytes / (double)n->bytes : 0;
        draw(out, &n->children[i], cx, cw, depth + 1, total, boxes);
        cx += cw;
    }
}

static bool live_gpu_alloc(const struct gm_process *p, const struct gm_alloc *a, uint32_t gpu,
                           uint64_t pos)
{
    if (a->gpu != gpu || a->category >= GM_GPU_CATEGORIES || a->event >= p->nevents || a->size <= 0)
        return false;
    return p->events[a->event].pos <= pos && pos < gm_alloc_end_pos(p, a);
}

int report_flame(FILE *out, const struct gm_model *m, const struct gm_filter *f)
{
    struct symbolizer *sym = symbolizer_new();
    struct stack_set *sets = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*sets));
    bool *loaded = xcalloc(m->nprocs ? m->nprocs : 1, sizeof(*loaded));
    int status = 0;
    struct moment_spec peak = {.kind = MOMENT_PEAK, .text = "peak"};
    for (uint32_t gpu = 0; gpu < m->ngpus && status == 0; gpu++) {
        if (!gm_filter_gpu(f, gpu))
            continue;
        struct moment at;
        if (!moment_find(m, gpu, &peak, &at) || !at.found)
            continue;
        char rootname[96], b[UNITS_BUF];
        snprintf(rootname, sizeof(rootname), "GPU %" PRIu32 " at its peak, %s%s", gpu,
                 report_size(b, sizeof(b), at.traced),
                 f->procs_filtered ? ": the listed processes' part" : "");
        struct node root = {.name = xstrdup(rootname)};
        const struct gm_gpu *g = &m->gpus[gpu];
        for (size_t k = 0; k < g->nprocs && status == 0; k++) {
            uint32_t proc = g->procs[k];
            if (!gm_filter_proc(f, proc))
                continue;
            const struct gm_process *p = &m->procs[proc];
            for (size_t a = 0; a < p->nallocs; a++) {
                const struct gm_alloc *al = &p->allocs[a];
                if (!live_gpu_alloc(p, al, gpu, at.pos))
                    continue;
                if (!loaded[proc]) {
                    /* gpumodel holds a const trace; loading stacks only reads it */
                    struct trace *t = (struct trace *)p->trace;
                    if (stacks_load(t, sym, &sets[proc]) != 0) {
                        trace_report_error(t);
                        status = -1;
                        break;
                    }
                    loaded[proc] = true;
                }
                add_stack(&root, stacks_by_id(&sets[proc], al->stack_id),
                          gm_api_name(m, p->events[al->event].api), al->size);
            }
        }
        if (status == 0 && root.bytes > 0) {
            size_t depth = depth_of(&root);
            char id[32], label[64];
            snprintf(id, sizeof(id), "flame-%" PRIu32, gpu);
            snprintf(label, sizeof(label), "call sites on GPU %" PRIu32, gpu);
            fputs("<h3>", out);
            html_text(out, rootname);
            fputs("</h3>\n", out);
            svg_begin(out, id, "chart flamegraph", FLAME_W, (int)(depth * FLAME_ROW + 2), label);
            size_t boxes = 0;
            draw(out, &root, 0, FLAME_W, 0, root.bytes, &boxes);
            assert(boxes > 0);
            svg_end(out);
            fprintf(out, "<div class=\"readout\" id=\"%s-readout\"></div>\n", id);
        }
        node_free(&root);
    }
    for (size_t i = 0; i < m->nprocs; i++)
        if (loaded[i])
            stacks_free(&sets[i]);
    free(sets);
    free(loaded);
    symbolizer_free(sym);
    return status;
}
