/*
 * inflight_calls.c - the model's calls in flight (gpumodel.h, struct
 * gm_inflight): what a killed or hung process was inside when its trace
 * ended, read from the trace's `inflight` table (format 7, folded by
 * recover) and, for a process that still runs, from the entered marks of
 * its ring (recover/inflight.h), with the heartbeat that dates them.
 *
 * They are read after the calls pass, so that a call on a communicator can
 * be tied to the init it belongs to and numbered among the calls of its
 * api that returned (the call "#1234" the other ranks are inside too).
 */
#include "model/gpumodel.h"
#include "model/loader.h"
#include "recover/inflight.h"

#include "cli.h"
#include "out/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct inflight_list {
    struct pass *s;
    struct gm_inflight *items;
    size_t count, cap;
};

/* One call in flight from its record at entry (a row or a mark). */
static void add_call(struct inflight_list *l, const struct call_row *r, int64_t tid, int64_t depth,
                     int64_t stream, int64_t arg4, bool live)
{
    for (size_t i = 0; i < l->count; i++)
        if (l->items[i].seq == r->seq)
            return; /* folded, and still in a ring not yet deleted */
    const struct api_info *info = r->info;
    l->items = xgrow(l->items, &l->cap, l->count + 1, sizeof(*l->items));
    struct gm_inflight *c = &l->items[l->count++];
    memset(c, 0, sizeof(*c));
    c->seq = r->seq;
    c->t_ns = r->t_ns;
    c->tid = tid;
    c->depth = depth;
    c->parent_seq = r->parent_seq;
    c->device = r->device;
    c->api = info->name;
    c->role = info->role_text;
    c->live = live;
    c->nccl = info->nccl_layer;
    c->handle = r->arg0;
    c->nranks = r->arg1;
    c->rank = r->arg2;
    c->hash = (uint64_t)r->arg3;
    c->count = r->arg1;
    c->peer = arg4;
    c->stream = stream;
    c->comm_id = -1;
}

static int read_table(struct inflight_list *l, struct trace *t)
{
    sqlite3_stmt *q =
        trace_query(t, "SELECT count(*) FROM sqlite_schema WHERE name = 'inflight'", "");
    if (!q)
        return -1;
    int rc = trace_step(t, q);
    bool present = rc == 1 && col_int(q, 0, 0) > 0;
    sqlite3_finalize(q);
    if (rc < 0)
        return -1;
    if (!present)
        return 0; /* format 6 and older: none */
    q = trace_query(t,
                    "SELECT seq, t_ns, tid, api_id, device, depth, parent_seq, stream, arg0, arg1,"
                    " arg2, arg3, arg4 FROM inflight ORDER BY seq",
                    "");
    if (!q)
        return -1;
    while ((rc = trace_step(t, q)) == 1) {
        struct call_row r = {.seq = col_int(q, 0, 0), .t_ns = col_int(q, 1, 0)};
        r.info = ld_api_by_id(l->s, col_int(q, 3, -1));
        if (!r.info)
            continue; /* an api the trace does not name: nothing to say of it */
        r.device = col_int(q, 4, -1);
        r.parent_seq = col_int(q, 6, 0);
        r.arg0 = col_int(q, 8, 0);
        r.arg1 = col_int(q, 9, -1);
        r.arg2 = col_int(q, 10, -1);
        r.arg3 = col_int(q, 11, 0);
        add_call(l, &r, col_int(q, 2, 0), col_int(q, 5, 0), col_int(q, 7, 0), col_int(q, 12, -1),
                 false);
    }
    sqlite3_finalize(q);
    return rc < 0 ? -1 : 0;
}

static void take_mark(const struct ct_record *rec, void *arg)
{
    struct inflight_list *l = arg;
    if (rec->seq == 0 || rec->seq > INT64_MAX)
        return;
    struct call_row r = {.seq = (int64_t)rec->seq, .t_ns = (int64_t)rec->t_ns};
    r.info = ld_api_by_id(l->s, rec->api);
    if (!r.info)
        return;
    r.device = rec->device;
    r.parent_seq = (int64_t)rec->parent_seq;
    r.arg0 = (int64_t)rec->arg[0];
    r.arg1 = (int64_t)rec->arg[1];
    r.arg2 = (int64_t)rec->arg[2];
    r.arg3 = (int64_t)rec->arg[3];
    add_call(l, &r, rec->tid, rec->depth, (int64_t)rec->stream, (int64_t)rec->arg[4], true);
}

/* The live ring beside the trace (FILE.db -> FILE.ring), if any. */
static void read_live_ring(struct inflight_list *l, const struct trace *t)
{
    size_t len = strlen(t->path);
    if (len <= 3 || strcmp(t->path + len - 3, ".db") != 0)
        return;
    char *ring = xasprintf("%.*s.ring", (int)(len - 3), t->path);
    inflight_read_ring(ring, take_mark, l);
    free(ring);
}

static int compare_seq(const void *a, const void *b)
{
    const struct gm_inflight *x = a, *y = b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The communicator of a call on a handle, and its number among the calls
 * of its api on it that returned. */
static void tie_to_communicator(struct gm_process *p, struct gm_inflight *c)
{
    for (size_t i = 0; i < p->communicators.ncomms; i++) {
        const struct nccl_comm *k = &p->communicators.comms[i];
        if (k->init_result == 0 && k->handle == c->handle && k->comm_id < c->seq)
            c->comm_id = k->comm_id; /* ordered by comm_id: the latest wins */
    }
    if (c->comm_id < 0)
        return;
    int64_t done = 0;
    for (size_t i = 0; i < p->nccl_calls.ncells; i++) {
        const struct cc_cell *cell = &p->nccl_calls.cells[i];
        if (cell->has_comm && cell->comm_id == c->comm_id && cell->op == c->api)
            done = gm_add(done, cell->calls);
    }
    c->nth = gm_add(done, 1);
}

int ld_read_inflight(struct pass *s)
{
    struct gm_process *p = s->p;
    struct trace *t = (struct trace *)p->trace;
    struct inflight_list l = {.s = s};
    if (read_table(&l, t) != 0) {
        free(l.items);
        return -1;
    }
    read_live_ring(&l, t);
    if (l.count > 1)
        qsort(l.items, l.count, sizeof(*l.items), compare_seq);
    for (size_t i = 0; i < l.count; i++) {
        struct gm_inflight *c = &l.items[i];
        /* The model's texts are handed over at the end of the load: the loader's own. */
        const char *role = c->role != GM_NONE ? s->L->texts.strings[c->role] : NULL;
        c->init = role && (strcmp(role, "comm_init") == 0 || strcmp(role, "comm_init_all") == 0);
        if (c->nccl && !c->init)
            tie_to_communicator(p, c);
        if (!c->nccl || c->init)
            c->peer = -1;
    }
    p->inflight = l.items;
    p->ninflight = l.count;

    bool found = false, is_int = false;
    char *text = NULL;
    int64_t alive = 0;
    if (trace_meta_get(t->db, "alive_mono_ns", &found, &text, &alive, &is_int) == SQLITE_OK &&
        found && is_int && alive > 0) {
        p->has_alive = true;
        p->alive_mono_ns = alive;
    }
    free(text);
    return 0;
}

int64_t gm_process_end_ns(const struct gm_process *p)
{
    int64_t end = p->has_calls ? p->last_end_ns : 0;
    if (p->has_alive && p->alive_mono_ns > end)
        end = p->alive_mono_ns;
    for (size_t i = 0; i < p->ninflight; i++)
        if (p->inflight[i].t_ns > end)
            end = p->inflight[i].t_ns;
    return end;
}

const struct gm_inflight *gm_stuck_call(const struct gm_process *p)
{
    const struct gm_inflight *top = NULL;
    for (size_t i = 0; i < p->ninflight; i++) {
        const struct gm_inflight *c = &p->inflight[i];
        if (c->depth == 0 && c->nccl)
            return c;
        if (c->depth == 0 && !top)
            top = c;
    }
    return top ? top : p->ninflight ? &p->inflight[0] : NULL;
}

char *gm_inflight_text(char *buf, size_t size, const struct gm_model *m, const struct gm_process *p,
                       const struct gm_inflight *c)
{
    double before = (double)gm_sub(gm_process_end_ns(p), c->t_ns) / 1e9;
    char nth[48] = "";
    if (c->nth > 0)
        snprintf(nth, sizeof nth, " #%lld", (long long)c->nth);
    if (c->live)
        snprintf(buf, size, "inside %s%s, entered %.1f s before its last heartbeat (still running)",
                 gm_api_name(m, c->api), nth, before);
    else if (p->exited)
        snprintf(buf, size, "still inside %s%s when it ended (%s), entered %.1f s before the end",
                 gm_api_name(m, c->api), nth, p->end_state, before);
    else
        snprintf(buf, size, "died inside %s%s, entered %.1f s before the end",
                 gm_api_name(m, c->api), nth, before);
    return buf;
}

void gm_inflight_json(struct json_writer *w, const struct gm_model *m, const struct gm_process *p,
                      const struct gm_inflight *c)
{
    char text[320];
    json_object_begin(w);
    json_kv_int(w, "pid", p->pid);
    json_kv_opt_int(w, "rank", p->has_rank, p->rank);
    json_kv_string(w, "file", p->trace->file);
    json_kv_string(w, "api", gm_api_name(m, c->api));
    json_kv_int(w, "seq", c->seq);
    json_kv_int(w, "tid", c->tid);
    json_kv_bool(w, "nested", c->depth > 0);
    json_kv_bool(w, "still_running", c->live);
    json_kv_int(w, "t_entered_ns", c->t_ns);
    json_kv_int(w, "entered_before_end_ns", gm_sub(gm_process_end_ns(p), c->t_ns));
    json_kv_opt_int(w, "nth", c->nth > 0, c->nth);
    json_kv_opt_int(w, "comm_id", c->comm_id >= 0, c->comm_id);
    if (c->init) {
        char hash[24];
        snprintf(hash, sizeof(hash), "%016" PRIx64, c->hash);
        json_kv_string(w, "unique_id_hash", hash);
        json_kv_int(w, "init_rank", c->rank);
        json_kv_int(w, "init_nranks", c->nranks);
    }
    json_kv_string(w, "text", gm_inflight_text(text, sizeof(text), m, p, c));
    json_object_end(w);
}
