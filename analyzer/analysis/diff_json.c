/*
 * diff_json.c - `cutrace diff --json` (diff_report.h): every pair, every step and every
 * group with raw numbers.
 */
#include "analysis/diff_words.h"

#include "cli.h"
#include "model/clocks.h"
#include "out/json.h"
#include "out/table.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON ---- */

static void json_live(struct json_writer *w, const char *key, const int64_t *live)
{
    json_key(w, key);
    json_object_begin(w);
    for (int c = 0; c < GM_CATEGORIES; c++)
        json_kv_int(w, gm_category_key((enum gm_category)c), live[c]);
    json_object_end(w);
}

static void json_ms(struct json_writer *w, const struct diff *d, int side,
                    const struct diff_milestone *ms)
{
    if (!ms) {
        json_null(w);
        return;
    }
    const struct gm_model *m = &d->run[side].m;
    const struct gm_process *p = &m->procs[ms->proc];
    json_object_begin(w);
    char *label = diff_ms_label(d, ms);
    json_kv_string(w, "label", label);
    free(label);
    json_kv_int(w, "seq", p->events[ms->event].seq);
    json_kv_int(w, "pid", p->pid);
    json_kv_opt_int(w, "rank", p->has_rank, p->rank);
    json_live(w, "live", ms->live);
    json_kv_int(w, "traced_bytes", diff_ms_traced(ms));
    json_kv_opt_int(w, "free_bytes", ms->measured, ms->free_bytes);
    json_kv_opt_int(w, "total_bytes", ms->measured, ms->total_bytes);
    json_kv_opt_int(w, "unexplained_bytes", ms->measured,
                    gm_sub(gm_sub(ms->total_bytes, ms->free_bytes), diff_ms_traced(ms)));
    switch ((enum ms_kind)ms->kind) {
    case MS_COMM_INIT:
        json_kv_int(w, "nranks", ms->detail);
        break;
    case MS_CAPTURE_END:
        json_kv_int(w, "graphs", ms->detail);
        break;
    case MS_FAILED:
        json_kv_int(w, "result", ms->detail);
        break;
    case MS_END:
        json_kv_bool(w, "exited", ms->detail != 0);
        break;
    default:
        break;
    }
    json_object_end(w);
}

static void json_gpu(struct json_writer *w, const struct diff *d, int side, uint32_t gpu)
{
    const struct diff_run *r = &d->run[side];
    const struct diff_gpu *g = &r->gpus[gpu];
    const struct gm_gpu *mg = &r->m.gpus[g->gpu];
    json_object_begin(w);
    char *name = diff_gpu_name(d, side, gpu);
    json_kv_string(w, "name", name);
    free(name);
    json_kv_int(w, "index", g->gpu);
    json_kv_string(w, "uuid", mg->uuid);
    json_kv_string(w, "model", mg->name[0] ? mg->name : NULL);
    json_kv_int(w, "ordinal", g->ordinal);
    json_kv_opt_int(w, "rank", g->has_rank, g->rank);
    json_kv_opt_int(w, "world", g->has_rank, g->world);
    const struct gm_process *p = g->proc == GM_NONE ? NULL : &r->m.procs[g->proc];
    json_kv_opt_int(w, "pid", p != NULL, p ? p->pid : 0);
    json_kv_string(w, "end", p ? diff_end_word(p) : NULL);
    json_kv_uint(w, "milestones", g->nms);
    json_kv_int(w, "failed_calls_not_aligned", g->failed_dropped);
    json_object_end(w);
}

static void json_run(struct json_writer *w, const struct diff *d, int side)
{
    const struct diff_run *r = &d->run[side];
    json_object_begin(w);
    json_kv_string(w, "path", r->path);
    json_kv_uint(w, "processes", r->m.nprocs);
    json_kv_uint(w, "exited", r->exited);
    json_kv_uint(w, "killed", r->killed);
    json_kv_uint(w, "gpus", r->ngpus);
    json_kv_uint(w, "ranks", r->ranks);
    json_kv_int(w, "world", r->world);
    json_key(w, "missing_ranks");
    json_array_begin(w);
    for (size_t i = 0; i < r->nmissing; i++)
        json_int(w, r->missing[i]);
    json_array_end(w);
    json_kv_uint(w, "communicators", r->ncomms);
    gm_clocks_json(w, &r->m);
    json_key(w, "unfinished_processes");
    json_array_begin(w);
    for (size_t pi = 0; pi < r->m.nprocs; pi++) {
        const struct gm_process *p = &r->m.procs[pi];
        if (p->exited || !p->has_calls)
            continue;
        json_object_begin(w);
        json_kv_int(w, "pid", p->pid);
        json_kv_opt_int(w, "rank", p->has_rank, p->rank);
        json_kv_string(w, "end", diff_end_word(p));
        const struct diff_milestone *last = diff_last_milestone(r, (uint32_t)pi);
        char *label = last ? diff_ms_label(d, last) : NULL;
        json_kv_string(w, "last_milestone", label);
        free(label);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

static void json_summary(struct json_writer *w, const struct diff *d)
{
    json_key(w, "summary");
    json_object_begin(w);
    json_key(w, "first_divergence");
    if (d->first_div_row < 0) {
        json_null(w);
    } else {
        const struct diff_pair *p = &d->pairs[d->first_div_pair];
        uint32_t *pairs;
        size_t n;
        const struct diff_step *st = diff_first_divergence(d, &pairs, &n);
        const struct diff_milestone *a = diff_step_ms(d, p, st, DIFF_A);
        const struct diff_milestone *b = diff_step_ms(d, p, st, DIFF_B);
        json_object_begin(w);
        json_kv_int(w, "row", d->first_div_row);
        json_kv_string(w, "milestone", d->rows[d->first_div_row].label);
        json_kv_string(w, "kind", ms_key(d->rows[d->first_div_row].kind));
        char *name = diff_pair_name(d, d->first_div_pair);
        json_kv_string(w, "pair", name);
        free(name);
        json_key(w, "pairs");
        json_array_begin(w);
        for (size_t i = 0; i < n; i++) {
            char *pn = diff_pair_name(d, pairs[i]);
            json_string(w, pn);
            free(pn);
        }
        json_array_end(w);
        int64_t delta[GM_CATEGORIES];
        for (int c = 0; c < GM_CATEGORIES; c++)
            delta[c] = gm_sub(b->live[c], a->live[c]);
        json_live(w, "delta_live", delta);
        json_kv_int(w, "delta_traced_bytes", gm_sub(diff_ms_traced(b), diff_ms_traced(a)));
        bool measured = a->measured && b->measured;
        json_kv_opt_int(w, "delta_free_bytes", measured, gm_sub(b->free_bytes, a->free_bytes));
        json_object_end(w);
        free(pairs);
    }
    for (int side = 0; side < 2; side++) {
        json_key(w, side ? "milestones_only_in_other" : "milestones_only_in_baseline");
        json_array_begin(w);
        for (size_t r = 0; r < d->nrows; r++)
            if (d->rows[r].present[side] > d->rows[r].matched) {
                json_object_begin(w);
                json_kv_string(w, "milestone", d->rows[r].label);
                json_kv_uint(w, "pairs", d->rows[r].present[side] - d->rows[r].matched);
                json_object_end(w);
            }
        json_array_end(w);
    }
    size_t n;
    struct diff_phase_sum *sums = diff_phase_sums(d, &n);
    json_key(w, "phases");
    json_array_begin(w);
    for (size_t i = 0; i < n; i++) {
        const struct diff_phase_sum *s = &sums[i];
        json_object_begin(w);
        char *phase = diff_phase_text(d, s->phase, s->end);
        json_kv_string(w, "phase", phase);
        free(phase);
        json_kv_opt_int(w, "from_row", s->phase >= 0, s->phase);
        json_kv_opt_int(w, "to_row", s->end >= 0, s->end);
        bool uniform = diff_phase_uniform(d, s);
        json_kv_bool(w, "same_on_every_pair", uniform);
        static const char *const keys[PS_KINDS][3] = {
            {"gpu_allocations_added", "gpu_allocations_removed", "gpu_delta_bytes"},
            {"peer_mappings_added", "peer_mappings_removed", "peer_delta_bytes"},
            {"host_allocations_added", "host_allocations_removed", "host_delta_bytes"}};
        int64_t total[PS_KINDS][3] = {{0}};
        for (size_t p = 0; p < d->npairs; p++)
            for (int k = 0; k < PS_KINDS; k++)
                for (int j = 0; j < 3; j++)
                    total[k][j] = gm_add(total[k][j], s->v[p][k][j]);
        json_key(w, "per_pair");
        if (uniform && d->npairs > 0) {
            json_object_begin(w);
            for (int k = 0; k < PS_KINDS; k++)
                for (int j = 0; j < 3; j++)
                    json_kv_int(w, keys[k][j], s->v[0][k][j]);
            json_object_end(w);
        } else {
            json_null(w);
        }
        json_key(w, "total");
        json_object_begin(w);
        for (int k = 0; k < PS_KINDS; k++)
            for (int j = 0; j < 3; j++)
                json_kv_int(w, keys[k][j], total[k][j]);
        json_object_end(w);
        json_object_end(w);
    }
    json_array_end(w);
    for (size_t i = 0; i < n; i++)
        free(sums[i].v);
    free(sums);
    json_object_end(w);
}

static void json_gpus(struct json_writer *w, const struct diff *d)
{
    json_key(w, "gpus");
    json_object_begin(w);
    json_key(w, "pairs");
    json_array_begin(w);
    for (uint32_t p = 0; p < d->npairs; p++) {
        const struct diff_pair *pr = &d->pairs[p];
        json_object_begin(w);
        char *name = diff_pair_name(d, p);
        json_kv_string(w, "name", name);
        free(name);
        json_kv_uint(w, "index", pr->index);
        json_kv_string(w, "matched_by", diff_match_keys[pr->by]);
        json_key(w, "baseline");
        json_gpu(w, d, DIFF_A, pr->gpu[0]);
        json_key(w, "other");
        json_gpu(w, d, DIFF_B, pr->gpu[1]);
        json_key(w, "first_divergence");
        if (pr->first_div < 0)
            json_null(w);
        else
            json_string(w, d->rows[pr->steps[pr->first_div].row].label);
        json_object_end(w);
    }
    json_array_end(w);
    for (int side = 0; side < 2; side++) {
        json_key(w, side ? "only_in_other" : "only_in_baseline");
        json_array_begin(w);
        for (size_t g = 0; g < d->run[side].ngpus; g++)
            if (d->run[side].gpus[g].pair == GM_NONE)
                json_gpu(w, d, side, (uint32_t)g);
        json_array_end(w);
    }
    json_object_end(w);
}

static void json_milestones(struct json_writer *w, const struct diff *d)
{
    json_key(w, "milestones");
    json_array_begin(w);
    for (size_t r = 0; r < d->nrows; r++) {
        const struct diff_row *row = &d->rows[r];
        json_object_begin(w);
        json_kv_string(w, "label", row->label);
        json_kv_string(w, "kind", ms_key((enum ms_kind)row->kind));
        json_kv_int(w, "occurrence", row->occurrence);
        json_kv_uint(w, "pairs_with_baseline", row->present[0]);
        json_kv_uint(w, "pairs_with_other", row->present[1]);
        json_kv_uint(w, "pairs_with_both", row->matched);
        json_kv_uint(w, "pairs_diverging", row->diverged);
        json_object_end(w);
    }
    json_array_end(w);
    json_key(w, "alignment");
    json_array_begin(w);
    for (uint32_t p = 0; p < d->npairs; p++) {
        const struct diff_pair *pr = &d->pairs[p];
        json_object_begin(w);
        char *name = diff_pair_name(d, p);
        json_kv_string(w, "pair", name);
        free(name);
        json_key(w, "steps");
        json_array_begin(w);
        for (size_t s = 0; s < pr->nsteps; s++) {
            const struct diff_step *st = &pr->steps[s];
            const struct diff_milestone *a = diff_step_ms(d, pr, st, DIFF_A);
            const struct diff_milestone *b = diff_step_ms(d, pr, st, DIFF_B);
            json_object_begin(w);
            json_kv_int(w, "row", st->row);
            json_kv_string(w, "milestone", d->rows[st->row].label);
            json_kv_string(w, "kind", ms_key(d->rows[st->row].kind));
            json_key(w, "baseline");
            json_ms(w, d, DIFF_A, a);
            json_key(w, "other");
            json_ms(w, d, DIFF_B, b);
            json_key(w, "delta");
            if (a && b) {
                json_object_begin(w);
                int64_t delta[GM_CATEGORIES];
                for (int c = 0; c < GM_CATEGORIES; c++)
                    delta[c] = gm_sub(b->live[c], a->live[c]);
                json_live(w, "live", delta);
                int64_t dt = gm_sub(diff_ms_traced(b), diff_ms_traced(a));
                json_kv_int(w, "traced_bytes", dt);
                bool measured = a->measured && b->measured;
                int64_t dfree = gm_sub(b->free_bytes, a->free_bytes);
                int64_t dused = gm_sub(gm_sub(b->total_bytes, b->free_bytes),
                                       gm_sub(a->total_bytes, a->free_bytes));
                json_kv_opt_int(w, "free_bytes", measured, dfree);
                json_kv_opt_int(w, "unexplained_bytes", measured, gm_sub(dused, dt));
                json_object_end(w);
            } else {
                json_null(w);
            }
            json_kv_bool(w, "diverges", diff_step_diverges(d, pr, st));
            json_object_end(w);
        }
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
}

static void json_allocations(struct json_writer *w, const struct diff *d)
{
    json_key(w, "allocations");
    json_array_begin(w);
    for (size_t i = 0; i < d->nallocs; i++) {
        const struct diff_alloc_row *row = &d->allocs[i];
        json_object_begin(w);
        char *phase = diff_phase_text(d, row->phase, row->phase_end);
        json_kv_string(w, "phase", phase);
        free(phase);
        json_kv_opt_int(w, "phase_from_row", row->phase >= 0, row->phase);
        json_kv_opt_int(w, "phase_to_row", row->phase_end >= 0, row->phase_end);
        json_kv_string(w, "api", diff_string(d, row->api));
        const char *module = diff_string(d, row->module);
        json_kv_string(w, "module", *module ? module : NULL);
        const char *site = diff_string(d, row->site);
        json_kv_string(w, "site", *site ? site : NULL);
        json_kv_int(w, "size", row->size);
        json_kv_string(w, "category", diff_category_key(row->category));
        json_kv_bool(w, "gpu_memory", row->category < GM_GPU_CATEGORIES);
        json_kv_int(w, "baseline_count", row->count[0]);
        json_kv_int(w, "other_count", row->count[1]);
        json_kv_int(w, "delta_count", gm_sub(row->count[1], row->count[0]));
        json_kv_int(w, "baseline_bytes", row->bytes[0]);
        json_kv_int(w, "other_bytes", row->bytes[1]);
        json_kv_int(w, "delta_bytes", gm_sub(row->bytes[1], row->bytes[0]));
        json_kv_int(w, "pair_delta_min", row->dmin);
        json_kv_int(w, "pair_delta_max", row->dmax);
        json_kv_uint(w, "pairs_changed", row->changed);
        json_key(w, "per_pair");
        json_array_begin(w);
        for (size_t k = 0; k < row->nper; k++) {
            json_object_begin(w);
            char *name = diff_pair_name(d, row->per_pair[k].pair);
            json_kv_string(w, "pair", name);
            free(name);
            json_kv_int(w, "baseline", row->per_pair[k].count[0]);
            json_kv_int(w, "other", row->per_pair[k].count[1]);
            json_object_end(w);
        }
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
}

static void json_ipc(struct json_writer *w, const struct diff *d, int side)
{
    const struct diff_run *r = &d->run[side];
    const struct diff_ipc *ipc = &r->ipc;
    json_object_begin(w);
    json_kv_uint(w, "buffers_exported", ipc->nbuffers);
    json_kv_int(w, "mappings", ipc->opens);
    json_kv_int(w, "mappings_of_untraced_exports", ipc->foreign_opens);
    json_key(w, "buffers");
    json_array_begin(w);
    for (size_t i = 0; i < ipc->nbuffers; i++) {
        const struct diff_ipc_buffer *b = &ipc->buffers[i];
        const struct gm_process *p = &r->m.procs[b->proc];
        json_object_begin(w);
        json_kv_string(w, "exporter", b->exporter);
        json_kv_int(w, "pid", p->pid);
        json_kv_opt_int(w, "rank", p->has_rank, p->rank);
        json_kv_int(w, "seq", p->allocs[b->alloc].seq);
        json_kv_string(w, "api", diff_string(d, b->api));
        const char *module = diff_string(d, b->module);
        json_kv_string(w, "module", *module ? module : NULL);
        json_kv_int(w, "size", b->size);
        json_kv_string(w, "opened_by", b->openers);
        json_kv_int(w, "mappings", b->opens);
        json_key(w, "opener_ranks");
        json_array_begin(w);
        for (int64_t k = 0; k < b->nopeners; k++)
            if (b->opener_ranks[k] >= 0)
                json_int(w, b->opener_ranks[k]);
        json_array_end(w);
        json_key(w, "opener_pids_without_rank");
        json_array_begin(w);
        for (int64_t k = 0; k < b->nopeners; k++)
            if (b->opener_ranks[k] < 0)
                json_int(w, -(b->opener_ranks[k] + 1));
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
    json_key(w, "groups");
    json_array_begin(w);
    for (size_t i = 0; i < ipc->ngroups; i++) {
        const struct diff_ipc_group *g = &ipc->groups[i];
        json_object_begin(w);
        json_kv_string(w, "exporters", g->exporters);
        json_kv_string(w, "api", diff_string(d, g->api));
        const char *module = diff_string(d, g->module);
        json_kv_string(w, "module", *module ? module : NULL);
        json_kv_int(w, "size", g->size);
        json_kv_int(w, "buffers", g->buffers);
        json_kv_string(w, "opened_by", g->openers);
        json_kv_int(w, "mappings", g->opens);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

static void json_comm(struct json_writer *w, const struct diff *d, const struct diff_comm *c)
{
    if (!c) {
        json_null(w);
        return;
    }
    char hash[24];
    snprintf(hash, sizeof(hash), "%016" PRIx64, c->hash);
    json_object_begin(w);
    json_kv_string(w, "unique_id_hash", hash);
    json_kv_int(w, "nranks", c->nranks);
    json_kv_uint(w, "ranks_traced", c->members);
    json_kv_int(w, "nccl_bytes", c->nccl_bytes);
    json_kv_int(w, "nccl_bytes_rank_min", c->nccl_min);
    json_kv_int(w, "nccl_bytes_rank_max", c->nccl_max);
    json_key(w, "ops");
    json_array_begin(w);
    for (size_t i = 0; i < c->nops; i++) {
        const struct diff_op *o = &c->ops[i];
        json_object_begin(w);
        json_kv_string(w, "op", diff_string(d, o->op));
        json_kv_int(w, "calls", o->calls);
        json_kv_int(w, "bytes", o->bytes);
        json_kv_int(w, "captured", o->captured);
        json_kv_int(w, "eager", gm_sub(o->calls, o->captured));
        json_kv_int(w, "failed", o->failed);
        json_kv_int(w, "calls_per_rank_min", o->rank_min);
        json_kv_int(w, "calls_per_rank_max", o->rank_max);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

static void json_comms(struct json_writer *w, const struct diff *d)
{
    const struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    json_key(w, "communicators");
    json_array_begin(w);
    for (size_t i = 0; i < A->ncomms; i++) {
        const struct diff_comm *a = &A->comms[i];
        const struct diff_comm *b = a->match == GM_NONE ? NULL : &B->comms[a->match];
        json_object_begin(w);
        json_kv_int(w, "ordinal", a->ordinal);
        json_key(w, "baseline");
        json_comm(w, d, a);
        json_key(w, "other");
        json_comm(w, d, b);
        json_object_end(w);
    }
    for (size_t k = 0; k < B->ncomms; k++) {
        if (B->comms[k].match != GM_NONE)
            continue;
        json_object_begin(w);
        json_kv_int(w, "ordinal", B->comms[k].ordinal);
        json_kv_null(w, "baseline");
        json_key(w, "other");
        json_comm(w, d, &B->comms[k]);
        json_object_end(w);
    }
    json_array_end(w);
    json_key(w, "nccl");
    json_object_begin(w);
    json_kv_int(w, "baseline_outside_communicators_bytes", A->nccl_outside_bytes);
    json_kv_int(w, "other_outside_communicators_bytes", B->nccl_outside_bytes);
    json_kv_int(w, "baseline_unattributed_calls", A->unattributed_calls);
    json_kv_int(w, "other_unattributed_calls", B->unattributed_calls);
    json_object_end(w);
}

static void json_job(struct json_writer *w, const struct diff *d, int side,
                     const struct budget_job *g)
{
    if (!g) {
        json_null(w);
        return;
    }
    const struct diff_run *r = &d->run[side];
    json_object_begin(w);
    json_kv_uint(w, "ranks_traced", g->nranks);
    json_kv_uint(w, "ranks_analysed", g->analysed);
    if (g->analysed == 0) {
        json_object_end(w);
        return;
    }
    if (r->budget_options.framework == BUDGET_SGLANG) {
        json_kv_uint(w, "min_pre_free_bytes", g->min_pre);
        json_kv_uint(w, "min_post_free_bytes", g->min_post);
        json_kv_double(w, "pre_gib", g->pre_gib);
        json_kv_double(w, "post_gib", g->post_gib);
        json_kv_double(w, "rest_gib", g->rest);
        json_kv_int(w, "tokens", g->tokens);
        json_kv_bool(w, "fits", g->fits);
        json_kv_string(w, "verdict", g->verdict);
        if (g->has_f_min)
            json_kv_double(w, "f_min_rounded", g->f_min_rounded);
        else
            json_kv_null(w, "f_min_rounded");
        const struct budget_rank *rk = &g->ranks[g->post_rank];
        json_kv_int(w, "decomposition_pid", r->m.procs[rk->proc].pid);
        json_key(w, "decomposition");
        json_array_begin(w);
        for (size_t i = 0; i < rk->nrows; i++) {
            json_object_begin(w);
            json_kv_string(w, "part", budget_part_keys[rk->rows[i].part]);
            json_kv_string(w, "category",
                           rk->rows[i].category >= 0
                               ? gm_category_key((enum gm_category)rk->rows[i].category)
                               : NULL);
            json_kv_int(w, "bytes", rk->rows[i].bytes);
            json_kv_double(w, "cost_gib", rk->rows[i].cost_gib);
            json_object_end(w);
        }
        json_array_end(w);
    } else {
        const struct budget_rank *rk = &g->ranks[g->available_rank];
        json_kv_int(w, "available_kv_bytes", g->available);
        json_kv_int(w, "available_kv_pid", r->m.procs[rk->proc].pid);
        json_kv_int(w, "requested_bytes", rk->requested);
        json_kv_int(w, "weights_bytes", rk->weights);
        json_kv_int(w, "peak_activation_bytes", rk->peak_activation);
        json_kv_int(w, "non_torch_increase_bytes", rk->non_torch_increase);
        json_kv_bool(w, "early_failure", g->early_failure);
        json_kv_bool(w, "fits", g->fits);
        json_kv_opt_int(w, "tokens", g->fits, g->tokens);
        json_kv_string(w, "verdict", g->verdict);
    }
    json_object_end(w);
}

static void json_budget(struct json_writer *w, const struct diff *d)
{
    json_key(w, "budget");
    if (!d->o->budget) {
        json_null(w);
        return;
    }
    const struct budget_options *o[2] = {&d->run[DIFF_A].budget_options,
                                         &d->run[DIFF_B].budget_options};
    bool sglang = o[0]->framework == BUDGET_SGLANG;
    json_object_begin(w);
    json_kv_string(w, "framework", sglang ? "sglang" : "vllm");
    for (int side = 0; side < 2; side++) {
        json_key(w, side ? "other_parameters" : "baseline_parameters");
        json_object_begin(w);
        if (sglang) {
            json_kv_double(w, "mem_fraction_static", o[side]->fraction);
            json_kv_string(w, "mem_fraction_static_source", o[side]->fraction_source);
        } else {
            json_kv_double(w, "gpu_memory_utilization", o[side]->util);
            json_kv_string(w, "gpu_memory_utilization_source", o[side]->util_source);
            json_kv_int(w, "cuda_graph_estimate", o[side]->graph_estimate);
        }
        json_kv_int(w, "cell_size", o[side]->cell_size);
        json_kv_int(w, "burst_min", o[side]->burst_min);
        json_object_end(w);
    }
    const struct budget_analysis *a = &d->run[DIFF_A].budget, *b = &d->run[DIFF_B].budget;
    size_t jobs = a->ngroups > b->ngroups ? a->ngroups : b->ngroups;
    json_key(w, "jobs");
    json_array_begin(w);
    for (size_t j = 0; j < jobs; j++) {
        const struct budget_job *x = j < a->ngroups ? &a->groups[j] : NULL;
        const struct budget_job *y = j < b->ngroups ? &b->groups[j] : NULL;
        json_object_begin(w);
        json_key(w, "baseline");
        json_job(w, d, DIFF_A, x);
        json_key(w, "other");
        json_job(w, d, DIFF_B, y);
        json_key(w, "delta");
        if (x && y && x->analysed && y->analysed) {
            json_object_begin(w);
            if (sglang) {
                json_kv_double(w, "pre_gib", y->pre_gib - x->pre_gib);
                json_kv_double(w, "post_gib", y->post_gib - x->post_gib);
                json_kv_double(w, "rest_gib", y->rest - x->rest);
                json_kv_int(w, "tokens", gm_sub(y->tokens, x->tokens));
                json_kv_int(w, "min_pre_free_bytes", (int64_t)(y->min_pre - x->min_pre));
                json_kv_int(w, "min_post_free_bytes", (int64_t)(y->min_post - x->min_post));
                size_t n;
                struct diff_effect *e =
                    diff_effects(&x->ranks[x->post_rank], &y->ranks[y->post_rank], &n);
                json_key(w, "changes");
                json_array_begin(w);
                double explained = 0;
                for (size_t i = 0; i < n; i++) {
                    if (e[i].bytes[0] == e[i].bytes[1])
                        continue;
                    json_object_begin(w);
                    json_kv_string(w, "part", budget_part_keys[e[i].part]);
                    json_kv_string(w, "category",
                                   e[i].category >= 0
                                       ? gm_category_key((enum gm_category)e[i].category)
                                       : NULL);
                    json_kv_int(w, "baseline_bytes", e[i].bytes[0]);
                    json_kv_int(w, "other_bytes", e[i].bytes[1]);
                    json_kv_int(w, "delta_bytes", gm_sub(e[i].bytes[1], e[i].bytes[0]));
                    double effect = -(e[i].cost[1] - e[i].cost[0]);
                    explained += effect;
                    json_kv_double(w, "effect_on_rest_gib", effect);
                    json_object_end(w);
                }
                json_array_end(w);
                json_kv_double(w, "other_effect_on_rest_gib", (y->rest - x->rest) - explained);
                free(e);
            } else {
                json_kv_int(w, "available_kv_bytes", gm_sub(y->available, x->available));
            }
            json_object_end(w);
        } else {
            json_null(w);
        }
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

static void json_config(struct json_writer *w, const struct diff *d)
{
    json_key(w, "config");
    json_object_begin(w);
    json_key(w, "cmdline");
    json_object_begin(w);
    for (int side = 0; side < 2; side++) {
        const struct diff_run *r = &d->run[side];
        json_key(w, side ? "other" : "baseline");
        json_array_begin(w);
        for (size_t i = 0; i < r->ncmdlines; i++) {
            json_object_begin(w);
            json_kv_string(w, "cmdline", r->cmdlines[i].text);
            json_kv_uint(w, "processes", r->cmdlines[i].count);
            json_key(w, "launched_by");
            json_array_begin(w);
            for (size_t k = 0; k < r->cmdlines[i].nlaunched_by; k++)
                json_string(w, r->cmdlines[i].launched_by[k]);
            json_array_end(w);
            json_object_end(w);
        }
        json_array_end(w);
    }
    json_key(w, "added");
    json_array_begin(w);
    for (size_t i = 0; i < d->ncmd_added; i++)
        json_string(w, d->cmd_added[i]);
    json_array_end(w);
    json_key(w, "removed");
    json_array_begin(w);
    for (size_t i = 0; i < d->ncmd_removed; i++)
        json_string(w, d->cmd_removed[i]);
    json_array_end(w);
    json_object_end(w);
    json_key(w, "env");
    json_object_begin(w);
    json_kv_uint(w, "compared", d->env_compared);
    json_key(w, "changes");
    json_array_begin(w);
    for (size_t i = 0; i < d->nenv_changes; i++) {
        json_object_begin(w);
        json_kv_string(w, "name", d->env_changes[i].name);
        json_kv_string(w, "baseline", d->env_changes[i].value[0]);
        json_kv_string(w, "other", d->env_changes[i].value[1]);
        json_object_end(w);
    }
    json_array_end(w);
    for (int side = 0; side < 2; side++) {
        json_key(w, side ? "other" : "baseline");
        json_object_begin(w);
        for (size_t i = 0; i < d->run[side].nenv; i++)
            json_kv_string(w, d->run[side].env[i].name, d->run[side].env[i].value);
        json_object_end(w);
    }
    json_object_end(w);
    json_object_end(w);
}

void diff_print_json(const struct diff *d, FILE *out)
{
    struct json_writer w;
    json_init(&w, out);
    json_object_begin(&w);
    json_kv_string(&w, "cutrace_version", CUTRACE_VERSION);
    json_kv_string(&w, "report", "diff");
    json_key(&w, "baseline");
    json_run(&w, d, DIFF_A);
    json_key(&w, "other");
    json_run(&w, d, DIFF_B);
    json_key(&w, "parameters");
    json_object_begin(&w);
    json_kv_int(&w, "threshold", d->o->threshold);
    json_kv_string(&w, "framework",
                   !d->o->budget
                       ? NULL
                       : (d->o->budget_options.framework == BUDGET_SGLANG ? "sglang" : "vllm"));
    json_object_end(&w);
    /* What the filters kept: the pairs listed of all (--gpu INDEX counts in all). */
    json_key(&w, "listed");
    json_object_begin(&w);
    json_kv_uint(&w, "pairs", d->npairs);
    json_kv_uint(&w, "pairs_total", d->pairs_total);
    json_object_end(&w);
    json_kv_bool(&w, "match", d->differences == 0);
    json_key(&w, "differences");
    json_array_begin(&w);
    for (int k = 0; k < DIFF_D_COUNT; k++)
        if (d->differences & (1u << k))
            json_string(&w, diff_difference_keys[k]);
    json_array_end(&w);
    json_summary(&w, d);
    json_gpus(&w, d);
    json_milestones(&w, d);
    json_allocations(&w, d);
    json_key(&w, "ipc");
    json_object_begin(&w);
    json_key(&w, "baseline");
    json_ipc(&w, d, DIFF_A);
    json_key(&w, "other");
    json_ipc(&w, d, DIFF_B);
    json_object_end(&w);
    json_comms(&w, d);
    json_budget(&w, d);
    json_config(&w, d);
    json_key(&w, "notes");
    json_array_begin(&w);
    for (size_t i = 0; i < d->nnotes; i++)
        json_string(&w, d->notes[i]);
    json_array_end(&w);
    json_object_end(&w);
    json_finish(&w);
}
