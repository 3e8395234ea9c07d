/*
 * budget_sglang_out.c - the SGLang part of `cutrace budget`'s report, text
 * and JSON (cmd/budget.c prints the rest and calls these in its SGLang
 * branches; cmd/budget_vllm_out.c is vLLM's): the inputs and where each
 * came from, the replayed path's arithmetic step by step, the verdict,
 * the decomposition of rest and its conclusion.
 */
#include "cmd/budget_sglang_out.h"
#include "cli.h"
#include "out/table.h"
#include "out/units.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "<prefix> <text>" wrapped to the report's width. */
static void wrapped_line(FILE *out, size_t indent, const char *prefix, const char *text)
{
    char *line = xasprintf("%s %s", prefix, text);
    text_print_wrapped(out, line, indent);
    free(line);
}

/* "--page-size 64 (from launcher pid 7's command line)", "(SGLang's default)", "none". */
static void print_count_text(const char *flag, const struct budget_count *c, FILE *out)
{
    char source[96];
    if (!c->has) {
        fprintf(out, "%s none", flag);
        return;
    }
    fprintf(out, "%s %" PRId64, flag, c->value);
    if (strcmp(c->source, "cmdline") == 0)
        fprintf(out, " (from %s)", budget_count_source_text(c, source, sizeof(source)));
    else if (strcmp(c->source, "default") == 0)
        fputs(" (SGLang's default)", out);
}

void budget_sglang_print_header(const struct budget_analysis *r, FILE *out)
{
    const struct budget_options *o = r->o;
    char source[96];
    fputs("  ", out);
    print_count_text("--page-size", &o->page_size, out);
    fputs(", ", out);
    print_count_text("--max-total-tokens", &o->max_total_tokens, out);
    fputc('\n', out);
    if (o->spec_algorithm[0]) {
        char *line =
            xasprintf("--speculative-algorithm %s (from %s): a draft model's weights "
                      "count against rest",
                      o->spec_algorithm,
                      budget_count_source_text(
                          &(struct budget_count){true, 0, "cmdline", o->spec_pid, o->spec_process},
                          source, sizeof(source)));
        text_print_wrapped(out, line, 2);
        free(line);
    }
    if (o->mm_reserve_why)
        wrapped_line(out, 2, "multimodal reserve:", o->mm_reserve_why);
    if (o->derived.has)
        wrapped_line(out, 2, "mem-fraction-static:", o->derived.why);
    if (r->server.path_why) {
        char *line = xasprintf("%s (%s)", budget_path_name(r->server.path), r->server.path_why);
        wrapped_line(out, 2, "code path replayed:", line);
        free(line);
    }
}

static void print_decomposition(const struct budget_analysis *r, const struct budget_job *g,
                                FILE *out)
{
    const struct gm_model *m = r->m;
    const struct budget_rank *rk = &g->ranks[g->post_rank];
    char who[64], buf[UNITS_BUF], cost[UNITS_BUF];
    gm_process_name(who, sizeof(who), &m->procs[rk->proc]);
    fprintf(out, "\n  What took rest on %s (the smallest post), ranked by cost:\n", who);
    static const struct table_column cols[] = {
        {"part", TABLE_LEFT, 0},
        {"when", TABLE_LEFT, 0},
        {"bytes", TABLE_RIGHT, 0},
        {"cost to rest", TABLE_RIGHT, 0},
    };
    struct table *t = table_new(cols, sizeof(cols) / sizeof(cols[0]));
    for (size_t i = 0; i < rk->nrows; i++) {
        const struct budget_row *d = &rk->rows[i];
        char *label = budget_part_label(d);
        table_cell(t, label);
        free(label);
        table_cell(t, budget_part_when(d->part));
        table_cell(t, format_bytes_signed(buf, sizeof(buf), d->bytes));
        table_cell(
            t, format_bytes_signed(cost, sizeof(cost), (int64_t)llround(d->cost_gib * BUDGET_GIB)));
    }
    table_print(t, out, 4);
    table_free(t);
    char *ledger =
        xasprintf("F x total = %.6f GiB, minus these costs%s = rest of this rank "
                  "%.6f GiB (its own numbers, before MIN and float32)",
                  rk->ledger_budget, fabs(rk->ledger_other) > 1e-9 ? ", minus other changes" : "",
                  rk->rest_own);
    text_print_wrapped(out, ledger, 4);
    free(ledger);
    if (g->conclusion)
        wrapped_line(out, 2, "conclusion:", g->conclusion);
}

void budget_sglang_print_job(const struct budget_analysis *r, const struct budget_job *g, FILE *out)
{
    const struct budget_options *o = r->o;
    const struct budget_rank *pre = &g->ranks[g->pre_rank], *post = &g->ranks[g->post_rank];
    fprintf(out, "\n  SGLang's arithmetic (free bytes%s, MIN over the ranks, in GiB):\n",
            g->float_ranks > 1 ? " as float32" : "");
    fprintf(out, "    pre    = %.6f GiB   (MIN %" PRIu64 " B, pid %" PRId64 ")\n", g->pre_gib,
            g->min_pre, r->m->procs[pre->proc].pid);
    fprintf(out, "    post   = %.6f GiB   (MIN %" PRIu64 " B, pid %" PRId64 ")\n", g->post_gib,
            g->min_post, r->m->procs[post->proc].pid);
    bool current = r->server.path == BUDGET_PATH_SGLANG_CURRENT;
    if (g->mm_reserve_gib > 0)
        fprintf(out, "    rest   = post - pre * (1 - %g) - %.6f (multimodal reserve) = %.6f GiB\n",
                o->fraction, g->mm_reserve_gib, g->rest);
    else
        fprintf(out, "    rest   = post - pre * (1 - %g) = %.6f GiB\n", o->fraction, g->rest);
    if (current && !g->has_kv_budget)
        fputs("    rest <= 0: _profile_available_bytes raises before counting tokens\n", out);
    else if (current)
        fprintf(out,
                "    bytes  = int(rest * 2^30) = %" PRId64 "\n    tokens = bytes // %" PRId64
                " = %" PRId64 "\n",
                g->kv_budget_bytes, g->cell_size, g->tokens_profiled);
    else
        fprintf(out, "    tokens = floor(rest * 2^30 / %" PRId64 ") = %" PRId64 "\n", g->cell_size,
                g->tokens_profiled);

    if (o->max_total_tokens.has || o->page_size.value > 1) {
        fputs("    pool   = ", out);
        if (o->max_total_tokens.has)
            fprintf(out, "min(tokens, %" PRId64 ")", o->max_total_tokens.value);
        else
            fputs("tokens", out);
        fprintf(out, " // %" PRId64 " * %" PRId64 " = %" PRId64 " tokens\n", o->page_size.value,
                o->page_size.value, g->tokens);
    }
    fprintf(out, "  verdict: %s\n", g->verdict);
    if (g->error_type)
        fprintf(out, "  (raised by SGLang as a %s)\n", g->error_type);
    wrapped_line(out, 2, "cell size:", g->cell_why);
    if (g->has_f_min)
        fprintf(out, "  smallest --mem-fraction-static that fits: %.3f (exactly %.6f)\n",
                g->f_min_rounded, g->f_min);
    else
        fputs("  no --mem-fraction-static up to 1 fits\n", out);
    print_decomposition(r, g, out);
}

void budget_sglang_json_inputs(struct json_writer *w, const struct budget_job *g)
{
    /* the steps the path replayed adds to the older arithmetic below */
    json_kv_double(w, "mm_reserve_gib", g->mm_reserve_gib);
    json_kv_int(w, "cell_size", g->cell_size);
    json_kv_string(w, "cell_size_source", g->cell_source);
    json_kv_string(w, "cell_size_why", g->cell_why);
    json_kv_string(w, "kv_pool_check", g->pool_check);
    if (g->has_kv_budget)
        json_kv_int(w, "available_bytes", g->kv_budget_bytes);
    else
        json_kv_null(w, "available_bytes");
    /* the ValueError is raised before any token is counted */
    if (g->error_type && strcmp(g->error_type, "ValueError") == 0)
        json_kv_null(w, "tokens_profiled");
    else
        json_kv_int(w, "tokens_profiled", g->tokens_profiled);
    json_kv_string(w, "error_type", g->error_type);
}

void budget_sglang_json_job(struct json_writer *w, const struct budget_analysis *r,
                            const struct budget_job *g, bool any)
{
    json_kv_int(w, "float32_ranks", g->float_ranks);
    json_kv_bool(w, "float32", g->float_ranks > 1);
    if (any) {
        json_kv_uint(w, "min_pre_free_bytes", g->min_pre);
        json_kv_int(w, "min_pre_pid", r->m->procs[g->ranks[g->pre_rank].proc].pid);
        json_kv_uint(w, "min_post_free_bytes", g->min_post);
        json_kv_int(w, "min_post_pid", r->m->procs[g->ranks[g->post_rank].proc].pid);
        json_kv_double(w, "pre_gib", g->pre_gib);
        json_kv_double(w, "post_gib", g->post_gib);
        json_kv_double(w, "rest_gib", g->rest);
        json_kv_int(w, "tokens", g->tokens);
        json_kv_bool(w, "fits", g->fits);
        json_kv_string(w, "verdict", g->verdict);
        json_kv_double(w, "f_min", g->f_min);
        if (g->has_f_min)
            json_kv_double(w, "f_min_rounded", g->f_min_rounded);
        else
            json_kv_null(w, "f_min_rounded");
        json_kv_string(w, "conclusion", g->conclusion);
        if (g->tokens > 0 && g->tokens <= INT64_MAX / g->cell_size)
            json_kv_int(w, "kv_predicted_bytes", g->tokens * g->cell_size);
        else
            json_kv_null(w, "kv_predicted_bytes");
    }
}

void budget_sglang_json_derivation(struct json_writer *w,
                                   const struct budget_fraction_derivation *d)
{
    json_key(w, "mem_fraction_static_derivation");
    json_object_begin(w);
    json_kv_string(w, "rule",
                   !d->known                   ? "constant"
                   : d->rule == SGLANG_F_BY_TP ? "tp_size"
                                               : "reserve");
    json_kv_double(w, "gpu_mem_mib", d->gpu_mem_mib);
    json_kv_int(w, "tp_size", d->tp_size);
    json_kv_double(w, "reserved_mib", d->reserve.total);
    json_key(w, "terms_mib");
    json_object_begin(w);
    json_kv_double(w, "base", d->reserve.base);
    json_kv_double(w, "activation", d->reserve.activation);
    json_kv_double(w, "cuda_graph", d->reserve.cuda_graph);
    json_kv_double(w, "parallel", d->reserve.parallel);
    json_kv_double(w, "dp_attention", d->reserve.dp_attention);
    json_kv_double(w, "piecewise", d->reserve.piecewise);
    json_kv_double(w, "floor", d->reserve.floor_applied);
    json_kv_double(w, "speculative", d->reserve.speculative);
    json_object_end(w);
    json_kv_int(w, "chunked_prefill_size", d->reserve.chunked_prefill_size);
    json_kv_int(w, "cuda_graph_max_bs", d->reserve.cuda_graph_max_bs);
    json_kv_string(w, "defaulted", d->defaulted);
    json_kv_string(w, "why", d->why);
    json_object_end(w);
}
