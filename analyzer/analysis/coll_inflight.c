/*
 * coll_inflight.c - calls that never returned, in `cutrace collectives`
 * (coll_inflight.h).
 *
 * A call in flight names its communicator by handle; the model ties it to
 * the init it belongs to (comm_id) and numbers it among that process's
 * calls of the op that returned (nth). Ranks of one group inside the same
 * op and number are waiting for each other; a member of that group that
 * is not inside it never entered it, which is what holds the others.
 */
#include "analysis/coll_inflight.h"

#include "cli.h"
#include "out/table.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct gm_process *proc_of(const struct coll_report *r, uint32_t proc)
{
    return &r->model.procs[proc];
}

/* The member of the report that is process `proc`'s communicator comm_id. */
static const struct coll_member *member_of(const struct coll_report *r, uint32_t proc,
                                           int64_t comm_id)
{
    for (size_t i = 0; i < r->nmembers; i++) {
        const struct coll_member *m = &r->members[i];
        if (r->procs[m->proc].model_proc == proc && m->comm->comm_id == comm_id)
            return m;
    }
    return NULL;
}

static void add_stuck_init(struct coll_inflight *x, uint32_t proc, const struct gm_inflight *c)
{
    struct coll_stuck_init *s = NULL;
    for (size_t i = 0; i < x->ninits && !s; i++)
        if (x->inits[i].hash == c->hash)
            s = &x->inits[i];
    if (!s) {
        x->inits = xgrow(x->inits, &x->inits_cap, x->ninits + 1, sizeof(*x->inits));
        s = &x->inits[x->ninits++];
        memset(s, 0, sizeof(*s));
        s->hash = c->hash;
        s->nranks = c->nranks > 0 ? c->nranks : -1;
    }
    s->ranks = xgrow(s->ranks, &s->cap, s->count + 1, sizeof(*s->ranks));
    s->ranks[s->count++] = (struct coll_inside){proc, c};
}

static void add_hang(struct coll_inflight *x, size_t group, uint32_t proc,
                     const struct gm_inflight *c)
{
    struct coll_hang *h = NULL;
    for (size_t i = 0; i < x->nhangs && !h; i++)
        if (x->hangs[i].group == group && x->hangs[i].op == c->api && x->hangs[i].nth == c->nth)
            h = &x->hangs[i];
    if (!h) {
        x->hangs = xgrow(x->hangs, &x->hangs_cap, x->nhangs + 1, sizeof(*x->hangs));
        h = &x->hangs[x->nhangs++];
        memset(h, 0, sizeof(*h));
        h->group = group;
        h->op = c->api;
        h->nth = c->nth;
    }
    h->inside = xgrow(h->inside, &h->inside_cap, h->ninside + 1, sizeof(*h->inside));
    h->inside[h->ninside++] = (struct coll_inside){proc, c};
}

/* Members of the hang's group not inside it. */
static void find_absent(struct coll_hang *h, const struct coll_report *r)
{
    const struct coll_group *g = &r->groups[h->group];
    for (size_t k = 0; k < g->nmembers; k++) {
        size_t mi = g->members[k];
        uint32_t proc = r->procs[r->members[mi].proc].model_proc;
        bool inside = false;
        for (size_t i = 0; i < h->ninside && !inside; i++)
            inside = h->inside[i].proc == proc;
        if (inside)
            continue;
        h->absent = xgrow(h->absent, &h->absent_cap, h->nabsent + 1, sizeof(*h->absent));
        h->absent[h->nabsent++] = mi;
    }
}

void coll_inflight_build(struct coll_inflight *x, const struct coll_report *r,
                         const struct gm_filter *f)
{
    memset(x, 0, sizeof(*x));
    if (!r->has_model)
        return;
    for (uint32_t pi = 0; pi < r->model.nprocs; pi++) {
        if (f && !gm_filter_proc(f, pi))
            continue;
        const struct gm_process *p = proc_of(r, pi);
        const struct gm_inflight *stuck = gm_stuck_call(p);
        if (stuck) {
            x->stuck = xgrow(x->stuck, &x->stuck_cap, x->nstuck + 1, sizeof(*x->stuck));
            x->stuck[x->nstuck++] = (struct coll_inside){pi, stuck};
        }
        for (size_t i = 0; i < p->ninflight; i++) {
            const struct gm_inflight *c = &p->inflight[i];
            if (c->init && c->depth == 0) {
                add_stuck_init(x, pi, c);
                continue;
            }
            if (!c->nccl || c->comm_id < 0 || c->nth <= 0)
                continue;
            const struct coll_member *m = member_of(r, pi, c->comm_id);
            if (m)
                add_hang(x, m->group, pi, c);
        }
    }
    for (size_t i = 0; i < x->nhangs; i++)
        find_absent(&x->hangs[i], r);
}

void coll_inflight_free(struct coll_inflight *x)
{
    for (size_t i = 0; i < x->ninits; i++)
        free(x->inits[i].ranks);
    for (size_t i = 0; i < x->nhangs; i++) {
        free(x->hangs[i].inside);
        free(x->hangs[i].absent);
    }
    free(x->inits);
    free(x->hangs);
    free(x->stuck);
    memset(x, 0, sizeof(*x));
}

bool coll_inflight_any(const struct coll_inflight *x)
{
    return x->nstuck > 0;
}

/* Where a process was last seen: the call it is inside, or its last record. */
static void last_seen(char *buf, size_t size, const struct coll_report *r, uint32_t proc)
{
    const struct gm_process *p = proc_of(r, proc);
    const struct gm_inflight *c = gm_stuck_call(p);
    if (c) {
        gm_inflight_text(buf, size, &r->model, p, c);
        return;
    }
    if (!p->has_calls) {
        snprintf(buf, size, "no call recorded");
        return;
    }
    snprintf(buf, size, "last call returned %.1f s before the end, inside none",
             (double)gm_sub(gm_process_end_ns(p), p->last_end_ns) / 1e9);
}

void coll_inflight_print(const struct coll_inflight *x, const struct coll_report *r)
{
    if (!coll_inflight_any(x))
        return;
    char line[768], name[96], what[320];
    printf("\nCalls that never returned:\n");
    for (size_t i = 0; i < x->nstuck; i++) {
        const struct gm_process *p = proc_of(r, x->stuck[i].proc);
        gm_process_name(name, sizeof(name), p);
        gm_inflight_text(what, sizeof(what), &r->model, p, x->stuck[i].call);
        snprintf(line, sizeof(line), "%s: %s", name, what);
        text_print_wrapped(stdout, line, 2);
    }
    for (size_t i = 0; i < x->ninits; i++) {
        const struct coll_stuck_init *s = &x->inits[i];
        char size_text[64] = "size unknown";
        if (s->nranks > 0)
            snprintf(size_text, sizeof(size_text), "%" PRId64 " ranks", s->nranks);
        putchar('\n');
        snprintf(line, sizeof(line),
                 "Communicator %016" PRIx64 " (%s) never finished its init: %zu rank%s inside %s",
                 s->hash, size_text, s->count, s->count == 1 ? "" : "s",
                 gm_api_name(&r->model, s->ranks[0].call->api));
        text_print_wrapped(stdout, line, 0);
        for (size_t k = 0; k < s->count; k++) {
            const struct gm_process *p = proc_of(r, s->ranks[k].proc);
            snprintf(line, sizeof(line),
                     "rank %" PRId64 " (pid %" PRId64 "): entered %.1f s before the end",
                     s->ranks[k].call->rank, p->pid,
                     (double)gm_sub(gm_process_end_ns(p), s->ranks[k].call->t_ns) / 1e9);
            text_print_wrapped(stdout, line, 2);
        }
        if (s->nranks > 0 && (int64_t)s->count < s->nranks) {
            int64_t absent = s->nranks - (int64_t)s->count;
            snprintf(line, sizeof(line), "%" PRId64 " %s never entered it (or %s not traced)",
                     absent, absent == 1 ? "rank" : "ranks", absent == 1 ? "is" : "are");
            text_print_wrapped(stdout, line, 2);
        }
    }
    for (size_t i = 0; i < x->nhangs; i++) {
        const struct coll_hang *h = &x->hangs[i];
        const struct coll_group *g = &r->groups[h->group];
        putchar('\n');
        snprintf(line, sizeof(line),
                 "Communicator %s: %zu of %zu traced rank%s inside %s #%" PRId64 "%s", g->hash,
                 h->ninside, g->nmembers, g->nmembers == 1 ? "" : "s",
                 gm_api_name(&r->model, h->op), h->nth,
                 h->nabsent > 0 ? "; ranks that never entered it:" : "");
        text_print_wrapped(stdout, line, 0);
        for (size_t k = 0; k < h->nabsent; k++) {
            const struct coll_member *m = &r->members[h->absent[k]];
            uint32_t proc = r->procs[m->proc].model_proc;
            last_seen(what, sizeof(what), r, proc);
            snprintf(line, sizeof(line),
                     "rank %" PRId64 " (pid %" PRId64 ") never entered it; last seen: %s",
                     m->comm->rank, proc_of(r, proc)->pid, what);
            text_print_wrapped(stdout, line, 2);
        }
    }
}

static void json_call(struct json_writer *w, const struct coll_report *r, uint32_t proc,
                      const struct gm_inflight *c)
{
    gm_inflight_json(w, &r->model, proc_of(r, proc), c);
}

void coll_inflight_json(struct json_writer *w, const struct coll_inflight *x,
                        const struct coll_report *r)
{
    json_object_begin(w);
    json_key(w, "calls");
    json_array_begin(w);
    /* Every call in flight of the listed processes (those with one are in stuck). */
    for (size_t s = 0; s < x->nstuck; s++) {
        const struct gm_process *p = proc_of(r, x->stuck[s].proc);
        for (size_t i = 0; i < p->ninflight; i++)
            json_call(w, r, x->stuck[s].proc, &p->inflight[i]);
    }
    json_array_end(w);
    json_key(w, "unfinished_inits");
    json_array_begin(w);
    for (size_t i = 0; i < x->ninits; i++) {
        char hash[24];
        snprintf(hash, sizeof(hash), "%016" PRIx64, x->inits[i].hash);
        json_object_begin(w);
        json_kv_string(w, "unique_id_hash", hash);
        json_kv_opt_int(w, "nranks", x->inits[i].nranks > 0, x->inits[i].nranks);
        json_kv_uint(w, "ranks_inside", x->inits[i].count);
        json_key(w, "ranks");
        json_array_begin(w);
        for (size_t k = 0; k < x->inits[i].count; k++)
            json_call(w, r, x->inits[i].ranks[k].proc, x->inits[i].ranks[k].call);
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
    json_key(w, "hangs");
    json_array_begin(w);
    for (size_t i = 0; i < x->nhangs; i++) {
        const struct coll_hang *h = &x->hangs[i];
        json_object_begin(w);
        json_kv_string(w, "communicator", r->groups[h->group].hash);
        json_kv_string(w, "op", gm_api_name(&r->model, h->op));
        json_kv_int(w, "nth", h->nth);
        json_key(w, "inside");
        json_array_begin(w);
        for (size_t k = 0; k < h->ninside; k++)
            json_call(w, r, h->inside[k].proc, h->inside[k].call);
        json_array_end(w);
        json_key(w, "never_entered");
        json_array_begin(w);
        for (size_t k = 0; k < h->nabsent; k++) {
            const struct coll_member *m = &r->members[h->absent[k]];
            uint32_t proc = r->procs[m->proc].model_proc;
            char seen[320];
            last_seen(seen, sizeof(seen), r, proc);
            json_object_begin(w);
            json_kv_int(w, "rank", m->comm->rank);
            json_kv_int(w, "pid", proc_of(r, proc)->pid);
            json_kv_string(w, "last_seen", seen);
            json_object_end(w);
        }
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}
