/*
 * budget_vllm_out.c - `cutrace budget`'s vLLM lines (budget_vllm_out.h): the
 * code path and the KV cache's inputs, each rank's arithmetic with the bound
 * on torch's counters, the job's verdict over that bound, and the keys the
 * vLLM replay adds to the JSON. cmd/budget.c prints everything around them.
 */
#include "cmd/budget_vllm_out.h"
#include "cli.h"
#include "out/table.h"
#include "out/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "<prefix> <text>", wrapped to the report's width. */
static void say(FILE *out, size_t indent, const char *prefix, const char *text)
{
    char *line = xasprintf("%s %s", prefix, text);
    text_print_wrapped(out, line, indent);
    free(line);
}

/* vLLM: one input of its block arithmetic and where it came from. */
static char *vllm_input_text(const char *flag, const struct budget_count *c)
{
    char source[96];
    if (!c->has)
        return xasprintf("%s not given", flag);
    if (strcmp(c->source, "cmdline") == 0)
        return xasprintf("%s %" PRId64 " (from %s)", flag, c->value,
                         budget_count_source_text(c, source, sizeof(source)));
    return xasprintf("%s %" PRId64 "%s", flag, c->value,
                     strcmp(c->source, "default") == 0 ? " (vLLM's default on CUDA)" : "");
}

/* vLLM: the code path replayed and why, and the KV cache's inputs. */
void budget_vllm_print_header(const struct budget_analysis *r, FILE *out)
{
    const struct budget_options *o = r->o;
    bool current = budget_vllm_current(r);
    char *path = xasprintf("vLLM %s (%s, requested %s); %s: %s", current ? "current" : "older",
                           current ? "U default 0.92" : "U default 0.9",
                           current ? "= ceil(total x U)" : "truncated",
                           r->server.path_source ? r->server.path_source : "default",
                           r->server.path_why ? r->server.path_why : "");
    say(out, 2, "code path replayed:", path);
    free(path);
    char *inputs[4] = {vllm_input_text("--block-size", &o->block_size),
                       vllm_input_text("--num-layers", &o->num_layers),
                       vllm_input_text("--block-bytes", &o->block_bytes),
                       vllm_input_text("--max-model-len", &o->max_model_len)};
    char *line = xasprintf("%s, %s, %s, %s", inputs[0], inputs[1], inputs[2], inputs[3]);
    say(out, 2, "KV cache:", line);
    free(line);
    for (int i = 0; i < 4; i++)
        free(inputs[i]);
}

/* vLLM: one rank's arithmetic, in words. */
static void print_rank(const struct budget_analysis *r, const struct budget_rank *rk, FILE *out)
{
    char a[UNITS_BUF], b[UNITS_BUF], c[UNITS_BUF], d[UNITS_BUF], e[UNITS_BUF], f[UNITS_BUF];
    char who[64];
    gm_process_name(who, sizeof(who), &r->m->procs[rk->proc]);
    const char *rounding = budget_vllm_current(r) ? "ceil(total x U)" : "total x U, truncated";
    if (rk->s0_only) {
        char *line = xasprintf("%s: S0 only: free %s of total %s; requested %s = %s", who,
                               format_bytes_signed(a, sizeof(a), rk->pre_free),
                               format_bytes_signed(b, sizeof(b), rk->pre_total),
                               format_bytes_signed(c, sizeof(c), rk->requested), rounding);
        text_print_wrapped(out, line, 4);
        free(line);
        return;
    }
    char graphs[3 * UNITS_BUF + 96] = "";
    if (rk->graph_applied || rk->graph_brackets)
        snprintf(graphs, sizeof(graphs), ", CUDA graphs %s (%s; measured %s in %zu capture%s)",
                 format_bytes_signed(f, sizeof(f), rk->graph_applied),
                 rk->graph_why ? rk->graph_why : "-",
                 format_bytes_signed(e, sizeof(e), rk->graph_measured), rk->graph_brackets,
                 rk->graph_brackets == 1 ? "" : "s");
    char *line = xasprintf("%s: requested %s = %s of total %s; weights %s, torch peak increase %s, "
                           "non-torch increase %s%s",
                           who, format_bytes_signed(a, sizeof(a), rk->requested), rounding,
                           format_bytes_signed(b, sizeof(b), rk->pre_total),
                           format_bytes_signed(c, sizeof(c), rk->weights),
                           format_bytes_signed(d, sizeof(d), rk->peak_activation),
                           format_bytes_signed(e, sizeof(e), rk->non_torch_increase), graphs);
    text_print_wrapped(out, line, 4);
    free(line);
    fprintf(out, "      available for the KV cache: %s%s\n",
            format_bytes_signed(a, sizeof(a), rk->available),
            rk->early_failure ? "; free memory at S0 is below requested" : "");
    line = xasprintf("torch's allocated counters are bounds, not in a cudaMalloc trace: its "
                     "segments less up to %s at S0 and %s at the peak give available in "
                     "[%s, %s]",
                     format_bytes_signed(a, sizeof(a), rk->torch_slack_s0),
                     format_bytes_signed(b, sizeof(b), rk->torch_slack_peak),
                     format_bytes_signed(c, sizeof(c), rk->available_low),
                     format_bytes_signed(d, sizeof(d), rk->available_high));
    text_print_wrapped(out, line, 6);
    free(line);
}

/* vLLM: the job's arithmetic, verdict and range. */
void budget_vllm_print_job(const struct budget_analysis *r, const struct budget_job *g,
                           bool (*listed)(const struct budget_rank *), FILE *out)
{
    const struct budget_options *o = r->o;
    char a[UNITS_BUF], b[UNITS_BUF];
    fprintf(out, "\n  vLLM's arithmetic per rank (S0 = pre, S1 = post; U = %g):\n", o->util);
    for (size_t k = 0; k < g->nranks; k++)
        if (g->ranks[k].analysed && listed(&g->ranks[k]))
            print_rank(r, &g->ranks[k], out);
    if (g->has_blocks)
        fprintf(out,
                "    blocks = available // %" PRId64 " B // %" PRId64 " layers = %" PRId64 "\n",
                o->block_bytes.value, o->num_layers.value, g->blocks);
    if (g->needed_bytes)
        fprintf(out, "    one request of max_model_len %" PRId64 " needs %s\n",
                o->max_model_len.value, format_bytes_signed(a, sizeof(a), g->needed_bytes));
    say(out, 2, "verdict:", g->verdict);
    if (!g->early_failure) {
        char *range =
            xasprintf("%s over available in [%s, %s] (torch's counters bounded)", g->range_verdict,
                      format_bytes_signed(a, sizeof(a), g->available_low),
                      format_bytes_signed(b, sizeof(b), g->available_high));
        say(out, 2, "verdict over the bound:", range);
        free(range);
    }
    if (g->missing_inputs)
        say(out, 2, "missing:", g->missing_inputs);
    if (g->has_u_min && (!g->has_u_max || g->u_min <= g->u_max))
        fprintf(out, "  --gpu-memory-utilization that fits: %.3f to %.3f\n", g->u_min,
                g->has_u_max ? g->u_max : 1.0);
    else if (g->early_failure && g->has_u_max && !g->has_u_min)
        fprintf(out, "  --gpu-memory-utilization that passes the S0 check: up to %.3f\n", g->u_max);
    else
        fputs("  no --gpu-memory-utilization fits\n", out);
}

/* vLLM: what a rank's replay adds after available_kv_bytes. */
void budget_vllm_json_rank(struct json_writer *w, const struct budget_rank *rk)
{
    json_kv_bool(w, "s0_only", rk->s0_only);
    if (rk->device_ordinal >= 0)
        json_kv_int(w, "device_ordinal", rk->device_ordinal);
    else
        json_kv_null(w, "device_ordinal");
    json_kv_int(w, "cuda_graph_measured_bytes", rk->graph_measured);
    json_kv_uint(w, "cuda_graph_captures", rk->graph_brackets);
    json_kv_string(w, "cuda_graph_estimate_by", rk->graph_why);
    /* torch's allocated and peak counters, bounded by its segments */
    json_key(w, "torch_bound");
    json_object_begin(w);
    json_kv_string(w, "bounded", "weights_bytes, peak_activation_bytes");
    json_kv_int(w, "allocated_below_reserved_at_s0_max", rk->torch_slack_s0);
    json_kv_int(w, "allocated_below_reserved_at_peak_max", rk->torch_slack_peak);
    json_kv_int(w, "available_kv_bytes_low", rk->available_low);
    json_kv_int(w, "available_kv_bytes_high", rk->available_high);
    json_object_end(w);
}

/* vLLM: what a job's replay adds, before the keys it always had. */
void budget_vllm_json_job(struct json_writer *w, const struct budget_job *g)
{
    json_key(w, "available_kv_range");
    json_object_begin(w);
    json_kv_string(w, "bounded", "torch's allocated and peak counters (from its segments)");
    json_kv_int(w, "low", g->available_low);
    json_kv_int(w, "high", g->available_high);
    json_kv_string(w, "verdict", g->range_verdict);
    json_object_end(w);
    if (g->has_blocks)
        json_kv_int(w, "blocks", g->blocks);
    else
        json_kv_null(w, "blocks");
    if (g->needed_bytes)
        json_kv_int(w, "max_model_len_needed_bytes", g->needed_bytes);
    else
        json_kv_null(w, "max_model_len_needed_bytes");
    json_kv_bool(w, "max_model_len_failure", g->max_len_failure);
    if (g->max_len_failure)
        json_kv_int(w, "estimated_max_model_len", g->estimated_max_len);
    else
        json_kv_null(w, "estimated_max_model_len");
    json_kv_string(w, "missing_inputs", g->missing_inputs);
}
