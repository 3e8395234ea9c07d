/*
 * milestones.c - the one table of milestone names (keys, labels,
 * numbering) and the one parser and finder of moments (milestones.h).
 *
 * Finding a moment counts milestones the way `cutrace timeline` and
 * `cutrace diff` list them, so that `--at capture_begin:2` is the second
 * capture row of the timeline: back-to-back captures of a process, with no
 * other milestone of it between, are one begin and one end; the kinds a
 * process has once are numbered in the order the GPU's stream reaches them.
 */
#include "model/milestones.h"

#include "cli.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *key, *label;
    const char *numbered; /* MS_BY_OCCURRENCE: the name of the N-th (%u) */
    enum ms_numbering numbering;
    int event_type; /* the model's event that is the milestone; -1 derived */
} kinds[MS_KINDS] = {
    [MS_FIRST_CALL] = {"first_call", "first call", NULL, MS_BY_PROCESS, GM_EV_FIRST_CALL},
    [MS_COMM_INIT] = {"comm_init", "NCCL init", "NCCL init %u", MS_BY_OCCURRENCE, GM_EV_COMM_INIT},
    [MS_IPC_EXPORT] = {"ipc_export", "IPC export", NULL, MS_BY_PROCESS, GM_EV_IPC_EXPORT},
    [MS_IPC_OPEN] = {"ipc_open", "IPC open", NULL, MS_BY_PROCESS, GM_EV_IPC_OPEN},
    [MS_MEASUREMENT] = {"measurement", "measurement", "measurement %u", MS_BY_OCCURRENCE,
                        GM_EV_MEASURE},
    [MS_WEIGHT_BEGIN] = {"weight_burst_begin", "weight burst begins", NULL, MS_BY_PROCESS, -1},
    [MS_WEIGHT_END] = {"weight_burst_end", "weight burst ends", NULL, MS_BY_PROCESS, -1},
    [MS_BURST_BEGIN] = {"burst_begin", "allocation burst begins", "allocation burst %u begins",
                        MS_BY_OCCURRENCE, -1},
    [MS_BURST_END] = {"burst_end", "allocation burst ends", "allocation burst %u ends",
                      MS_BY_OCCURRENCE, -1},
    [MS_FREE_BURST] = {"free_burst", "free burst (empty_cache)", "free burst %u (empty_cache)",
                       MS_BY_OCCURRENCE, -1},
    [MS_CAPTURE_BEGIN] = {"capture_begin", "CUDA-graph capture begins",
                          "CUDA-graph capture %u begins", MS_BY_OCCURRENCE, GM_EV_CAPTURE_BEGIN},
    [MS_CAPTURE_END] = {"capture_end", "CUDA-graph capture ends", "CUDA-graph capture %u ends",
                        MS_BY_OCCURRENCE, GM_EV_CAPTURE_END},
    [MS_COLLECTIVE] = {"first_collective", "first collective", NULL, MS_BY_PROCESS,
                       GM_EV_COLLECTIVE},
    [MS_FAILED] = {"failed_call", "failed", "failed %u", MS_BY_OCCURRENCE, GM_EV_FAILED},
    [MS_NVTX_MARK] = {"nvtx_mark", "NVTX mark", "NVTX mark %u", MS_BY_OCCURRENCE, GM_EV_NVTX_MARK},
    [MS_NVTX_BEGIN] = {"nvtx_begin", "NVTX range begins", "NVTX range %u begins", MS_BY_OCCURRENCE,
                       GM_EV_NVTX_BEGIN},
    [MS_NVTX_END] = {"nvtx_end", "NVTX range ends", "NVTX range %u ends", MS_BY_OCCURRENCE,
                     GM_EV_NVTX_END},
    [MS_END] = {"process_end", "last event", NULL, MS_BY_PROCESS, GM_EV_END},
};

const char *ms_key(enum ms_kind kind)
{
    assert((unsigned)kind < MS_KINDS);
    return kinds[kind].key;
}

const char *ms_label(enum ms_kind kind)
{
    assert((unsigned)kind < MS_KINDS);
    return kinds[kind].label;
}

enum ms_numbering ms_numbering(enum ms_kind kind)
{
    assert((unsigned)kind < MS_KINDS);
    return kinds[kind].numbering;
}

bool ms_kind_of_key(const char *key, size_t len, enum ms_kind *out)
{
    for (int k = 0; k < MS_KINDS; k++)
        if (strlen(kinds[k].key) == len && strncmp(kinds[k].key, key, len) == 0) {
            *out = (enum ms_kind)k;
            return true;
        }
    return false;
}

bool ms_has_sub(enum ms_kind kind)
{
    return kind == MS_FAILED || kind == MS_NVTX_MARK || kind == MS_NVTX_BEGIN ||
           kind == MS_NVTX_END;
}

char *ms_name(enum ms_kind kind, uint32_t n, const char *sub)
{
    assert((unsigned)kind < MS_KINDS);
    if (kind == MS_FAILED && sub)
        return xasprintf("%s %s %u", kinds[kind].label, sub, n);
    if (kind == MS_NVTX_MARK && sub)
        return xasprintf("NVTX mark %s %u", sub, n);
    if ((kind == MS_NVTX_BEGIN || kind == MS_NVTX_END) && sub)
        return xasprintf("NVTX %s %u %s", sub, n, kind == MS_NVTX_BEGIN ? "begins" : "ends");
    if (kinds[kind].numbering == MS_BY_OCCURRENCE)
        return xasprintf(kinds[kind].numbered, n);
    return n > 1 ? xasprintf("%s, process %u", kinds[kind].label, n) : xstrdup(kinds[kind].label);
}

const char *ms_tag_key(enum ms_tag tag)
{
    return tag == MS_TAG_PRE ? "pre" : tag == MS_TAG_POST ? "post" : "";
}

/* ---- parsing ---- */

static bool parse_int(const char *s, int64_t *out)
{
    if (!*s)
        return false;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || v > INT64_MAX / 2 || v < -(INT64_MAX / 2))
        return false;
    *out = v;
    return true;
}

/* Kinds a moment can name: the timeline's burst rows are found by
 * thresholds of the timeline alone, so they are rows, not moments. */
static bool is_moment_kind(enum ms_kind k)
{
    return k != MS_BURST_BEGIN && k != MS_BURST_END && k != MS_FREE_BURST;
}

bool moment_parse(const char *arg, struct moment_spec *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    out->text = arg;
    out->n = 1;
    out->pid = -1;
    out->burst_min = GM_BURST_MIN_DEFAULT;
    *why = "not a moment";
    if (strcmp(arg, "peak") == 0) {
        out->kind = MOMENT_PEAK;
        return true;
    }
    if (strcmp(arg, "end") == 0) {
        out->kind = MOMENT_END;
        return true;
    }
    if (strncmp(arg, "seq:", 4) == 0) {
        out->kind = MOMENT_SEQ;
        const char *rest = arg + 4;
        const char *colon = strchr(rest, ':');
        if (colon) {
            char pid[32];
            size_t len = (size_t)(colon - rest);
            if (len == 0 || len >= sizeof(pid))
                return false;
            memcpy(pid, rest, len);
            pid[len] = '\0';
            if (!parse_int(pid, &out->pid) || out->pid <= 0)
                return false;
            rest = colon + 1;
        }
        return parse_int(rest, &out->seq) && out->seq > 0;
    }
    const char *colon = strchr(arg, ':');
    size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
    if (colon && (!parse_int(colon + 1, &out->n) || out->n == 0))
        return false;
    if (len == 3 && strncmp(arg, "pre", 3) == 0) {
        out->kind = MOMENT_PRE;
        return true;
    }
    if (len == 4 && strncmp(arg, "post", 4) == 0) {
        out->kind = MOMENT_POST;
        return true;
    }
    if (!ms_kind_of_key(arg, len, &out->ms))
        return false;
    if (!is_moment_kind(out->ms)) {
        *why = "a row of `cutrace timeline`, not a moment";
        return false;
    }
    out->kind = MOMENT_MILESTONE;
    return true;
}

/* ---- finding ---- */

static const struct gm_event *ref_event(const struct gm_model *m, const struct gm_ref *r)
{
    return &m->procs[r->proc].events[r->event];
}

/* The N-th (1-based, negative from the end) of count candidates. */
static bool pick(int64_t n, int64_t count, int64_t *index)
{
    if (n > 0 && n <= count)
        *index = n - 1;
    else if (n < 0 && -n <= count)
        *index = count + n;
    else
        return false;
    return true;
}

/* Candidates of a moment on a GPU, in stream order. */
struct candidates {
    struct gm_ref *refs;
    size_t n, cap;
};

static void add_candidate(struct candidates *c, uint32_t proc, uint32_t event)
{
    c->refs = xgrow(c->refs, &c->cap, c->n + 1, sizeof(*c->refs));
    c->refs[c->n++] = (struct gm_ref){proc, event};
}

static const struct gm_model *sort_model; /* qsort has no context argument */

static int compare_by_pos(const void *a, const void *b)
{
    uint64_t x = ref_event(sort_model, a)->pos, y = ref_event(sort_model, b)->pos;
    return (x > y) - (x < y);
}

/* The weight burst's begin, end, pre or post of each process on the GPU. */
static void weight_candidates(const struct gm_model *m, uint32_t gpu, const struct moment_spec *at,
                              struct candidates *c)
{
    const struct gm_gpu *g = &m->gpus[gpu];
    for (size_t k = 0; k < g->nprocs; k++) {
        struct gm_burst b;
        if (!gm_weight_burst(m, g->procs[k], gpu, at->burst_min, &b))
            continue;
        uint32_t event = at->kind == MOMENT_PRE      ? b.before
                         : at->kind == MOMENT_POST   ? b.after
                         : at->ms == MS_WEIGHT_BEGIN ? b.first
                                                     : b.last;
        if (event != GM_NONE)
            add_candidate(c, g->procs[k], event);
    }
    sort_model = m;
    if (c->n > 1)
        qsort(c->refs, c->n, sizeof(*c->refs), compare_by_pos);
}

static bool ends_capture_group(enum gm_event_type type)
{
    return type == GM_EV_FIRST_CALL || type == GM_EV_COMM_INIT || type == GM_EV_IPC_EXPORT ||
           type == GM_EV_IPC_OPEN || type == GM_EV_MEASURE || type == GM_EV_COLLECTIVE ||
           type == GM_EV_FAILED || type == GM_EV_END || type == GM_EV_NVTX_MARK ||
           type == GM_EV_NVTX_BEGIN || type == GM_EV_NVTX_END;
}

/* Capture groups: a process's back-to-back captures until its next other
 * milestone (or its weight burst) are one begin and one end. */
static void capture_candidates(const struct gm_model *m, uint32_t gpu, bool begins,
                               struct candidates *c)
{
    const struct gm_gpu *g = &m->gpus[gpu];
    size_t np = m->nprocs ? m->nprocs : 1;
    bool *open = xcalloc(np, sizeof(*open));
    struct gm_ref *pending = xcalloc(np, sizeof(*pending));
    uint32_t *wb_first = xcalloc(np, sizeof(*wb_first));
    for (size_t i = 0; i < np; i++)
        pending[i].event = wb_first[i] = GM_NONE;
    for (size_t k = 0; k < g->nprocs; k++) {
        struct gm_burst b;
        if (gm_weight_burst(m, g->procs[k], gpu, GM_BURST_MIN_DEFAULT, &b))
            wb_first[g->procs[k]] = b.first;
    }
    for (size_t i = 0; i < g->nstream; i++) {
        const struct gm_ref *r = &g->stream[i];
        const struct gm_event *e = ref_event(m, r);
        if (ends_capture_group((enum gm_event_type)e->type) || r->event == wb_first[r->proc]) {
            if (pending[r->proc].event != GM_NONE && !begins)
                add_candidate(c, r->proc, pending[r->proc].event);
            pending[r->proc].event = GM_NONE;
            open[r->proc] = false;
        }
        if (e->type == GM_EV_CAPTURE_BEGIN) {
            if (!open[r->proc] && begins)
                add_candidate(c, r->proc, r->event);
            open[r->proc] = true;
        } else if (e->type == GM_EV_CAPTURE_END) {
            pending[r->proc] = *r;
            open[r->proc] = true;
        }
    }
    for (size_t k = 0; k < g->nprocs; k++)
        if (pending[g->procs[k]].event != GM_NONE && !begins)
            add_candidate(c, g->procs[k], pending[g->procs[k]].event);
    free(open);
    free(pending);
    free(wb_first);
    sort_model = m;
    if (c->n > 1)
        qsort(c->refs, c->n, sizeof(*c->refs), compare_by_pos);
}

static void event_candidates(const struct gm_model *m, uint32_t gpu, int type, struct candidates *c)
{
    const struct gm_gpu *g = &m->gpus[gpu];
    for (size_t i = 0; i < g->nstream; i++)
        if (ref_event(m, &g->stream[i])->type == type)
            add_candidate(c, g->stream[i].proc, g->stream[i].event);
}

static bool find_seq(const struct gm_model *m, uint32_t gpu, const struct moment_spec *at,
                     struct moment *out)
{
    const struct gm_gpu *g = &m->gpus[gpu];
    int64_t chosen = -1;
    for (size_t k = 0; k < g->nprocs; k++) {
        const struct gm_process *p = &m->procs[g->procs[k]];
        if (at->pid > 0 ? p->pid == at->pid : g->nprocs == 1)
            chosen = g->procs[k];
    }
    if (chosen < 0)
        return false;
    /* The last event of the process on this GPU at or before that call. */
    const struct gm_process *p = &m->procs[chosen];
    bool found = false;
    for (size_t i = 0; i < p->nevents; i++) {
        const struct gm_event *e = &p->events[i];
        if (e->gpu != gpu || e->type == GM_EV_END || e->seq > at->seq)
            continue;
        if (!found || e->pos > out->pos) {
            found = true;
            out->pos = e->pos;
            out->ref = (struct gm_ref){(uint32_t)chosen, (uint32_t)i};
        }
    }
    return found;
}

static bool find_extreme(const struct gm_model *m, uint32_t gpu, bool peak, struct moment *out)
{
    struct gm_walk w;
    gm_walk_init(&w, m, gpu);
    const struct gm_ref *ref;
    int64_t best = -1;
    bool found = false;
    for (size_t i = 0; (ref = gm_walk_step(&w)) != NULL; i++) {
        int64_t traced = gm_traced(w.live);
        bool end = ref_event(m, ref)->type == GM_EV_END;
        if (peak ? traced > best : !end) {
            best = traced;
            out->pos = i;
            out->ref = *ref;
            found = true;
        }
    }
    gm_walk_free(&w);
    return found;
}

bool moment_find(const struct gm_model *m, uint32_t gpu, const struct moment_spec *at,
                 struct moment *out)
{
    memset(out, 0, sizeof(*out));
    const struct gm_gpu *g = &m->gpus[gpu];
    bool found = false;
    struct candidates c = {0};
    switch (at->kind) {
    case MOMENT_PEAK:
    case MOMENT_END:
        found = find_extreme(m, gpu, at->kind == MOMENT_PEAK, out);
        break;
    case MOMENT_SEQ:
        found = find_seq(m, gpu, at, out);
        break;
    case MOMENT_PRE:
    case MOMENT_POST:
        weight_candidates(m, gpu, at, &c);
        break;
    case MOMENT_MILESTONE:
        if (at->ms == MS_WEIGHT_BEGIN || at->ms == MS_WEIGHT_END)
            weight_candidates(m, gpu, at, &c);
        else if (at->ms == MS_CAPTURE_BEGIN || at->ms == MS_CAPTURE_END)
            capture_candidates(m, gpu, at->ms == MS_CAPTURE_BEGIN, &c);
        else {
            assert(kinds[at->ms].event_type >= 0);
            event_candidates(m, gpu, kinds[at->ms].event_type, &c);
        }
        break;
    }
    int64_t index;
    if (at->kind != MOMENT_PEAK && at->kind != MOMENT_END && at->kind != MOMENT_SEQ &&
        pick(at->n, (int64_t)c.n, &index)) {
        found = true;
        out->ref = c.refs[index];
        out->pos = ref_event(m, &out->ref)->pos;
    }
    free(c.refs);
    out->found = found && g->nstream > 0;
    if (out->found) {
        /* The traced bytes then, from a walk up to the moment. */
        struct gm_walk w;
        gm_walk_init(&w, m, gpu);
        for (uint64_t i = 0; i <= out->pos && gm_walk_step(&w); i++)
            ;
        out->traced = gm_traced(w.live);
        gm_walk_free(&w);
    }
    return out->found;
}
