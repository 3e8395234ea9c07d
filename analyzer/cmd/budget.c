/*
 * budget.c - `cutrace budget DIR --framework sglang|vllm ...`: replays
 * the KV-cache sizing an inference server did at startup (docs/budget.md),
 * from the cudaMemGetInfo answers its ranks got and the allocations around
 * them, and says what pushed it under.
 *
 * The analysis is budget_analysis.c's; this file parses the options and
 * prints the result as text or JSON.
 *
 * Exit 0 when some rank was analysed (a "Not enough memory" verdict is a
 * result, not an error), 1 on bad input or when no rank could be, 2 usage.
 */
#include "analysis/budget_analysis.h"
#include "analysis/budget_detect.h"
#include "cmd/budget_sglang_out.h"
#include "cmd/budget_vllm_out.h"
#include "cli.h"
#include "model/clocks.h"
#include "model/filter.h"
#include "out/csv.h"
#include "out/json.h"
#include "out/table.h"
#include "model/trace.h"
#include "model/traceset.h"
#include "out/units.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: cutrace budget [--framework sglang|vllm] [options] DIR...\n"
    "\n" CLI_PATHS_HELP "\n"
    "Replay how the inference server sized its KV cache at startup from the\n"
    "cudaMemGetInfo answers its ranks got (docs/budget.md): the measurements\n"
    "chosen, the server's own arithmetic, the verdict, the smallest fraction\n"
    "that fits, and what took the memory.\n"
    "\n"
    "options:\n"
    "  --framework sglang|vllm       whose arithmetic to replay (default: what the\n"
    "                                trace shows)\n"
    "  --server-version V            the server's release, for its code path when the\n"
    "                                stacks cannot tell (0.5.16)\n"
    "  --mem-fraction-static F       SGLang's F (else the launch lines', else SGLang's\n"
    "                                own derivation, replayed)\n"
    "  --gpu-memory-utilization U    vLLM's U (else the command line's, else 0.9;\n"
    "                                0.92 on the current path)\n"
    "  --cell-size BYTES             KV bytes per token (default 70272)\n"
    "  --page-size N                 SGLang: tokens per KV page (else the command\n"
    "                                line's, else 1)\n"
    "  --max-total-tokens N          SGLang: cap on the pool (else the command line's)\n"
    "  --num-layers L                SGLang: the model's layers and its draft model's,\n"
    "  --draft-num-layers D          to scale the cell size for EAGLE/STANDALONE\n"
    "  --multimodal                  SGLang: the model is multimodal (the current path\n"
    "                                reserves SGLANG_VLM_CACHE_SIZE_MB)\n"
    "  --pre SEQ --post SEQ          use these measurements (seqs in one rank's\n"
    "                                trace; other ranks use theirs of the same index)\n"
    "  --burst-min BYTES             smallest weight burst (default 1 GiB)\n"
    "  --cuda-graph-estimate BYTES   vLLM: subtract this for CUDA graphs (else the\n"
    "                                traced profile_cudagraph_memory's, when the\n"
    "                                environment applies it)\n"
    "  --server-version X.Y.Z        the server's release: chooses its code path\n"
    "  --block-size N                vLLM: tokens per KV block (else the command\n"
    "                                line's, else 16)\n"
    "  --num-layers N                vLLM: attention layers holding a KV cache\n"
    "  --block-bytes BYTES           vLLM: one layer's bytes per block (page size)\n"
    "  --max-model-len N             vLLM: for its one-request check (else the\n"
    "                                command line's)\n" CLI_FILTER_HELP CLI_FORMAT_HELP
        CLI_HELP_HELP "\n"
    "--rank, --pid, --host and --gpu list those ranks (and the jobs they are in);\n"
    "a job's arithmetic stays over all its ranks.\n"
    "Tables for --csv: ranks (one row per rank), jobs (one row per job).\n"
    "\n" CLI_EXIT_HELP("the verdict of a job listed does not fit\n"
                       "exit 0 when analysed, whatever the verdict; 1 also when no rank could be\n"
                       "analysed");

static const char *const csv_tables[] = {"ranks", "jobs", NULL};

/* The ranks the filters list (NULL: every rank). The analysis is over every
 * rank; this chooses only what is printed. */
static const struct gm_filter *listed;

static bool rank_listed(const struct budget_rank *rk)
{
    return !listed || gm_filter_proc(listed, rk->proc);
}

static bool job_listed(const struct budget_job *g)
{
    for (size_t k = 0; k < g->nranks; k++)
        if (rank_listed(&g->ranks[k]))
            return true;
    return !listed || !listed->gpus_filtered;
}

/* ---- options ---- */

static bool parse_seq(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v <= 0)
        return false;
    *out = v;
    return true;
}

static int parse_options(int argc, char **argv, struct budget_options *o,
                         struct cli_report_opts *rep, struct budget_option_state *st_out)
{
    static const struct option options[] = {
        BUDGET_LONG_OPTIONS,
        {"pre", required_argument, NULL, 'p'},
        {"post", required_argument, NULL, 'P'},
        CLI_FILTER_OPTIONS,
        CLI_FORMAT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = argv[0];
    bool has_post = false;
    struct budget_option_state st;
    budget_options_init(o, &st);
    cli_report_init(rep);
    int c;
    while ((c = cli_getopt(argc, argv, "h", options, usage)) != -1) {
        if (cli_report_option(rep, c, optarg))
            continue;
        int taken = budget_option(cmd, c, optarg, o, &st);
        if (taken > 1)
            return taken;
        if (taken == 1)
            continue;
        switch (c) {
        case 'p':
            if (!parse_seq(optarg, &o->pre_seq))
                return cli_usage_error(cmd, "--pre %s: expected a sequence number", optarg);
            o->has_pre = true;
            break;
        case 'P':
            if (!parse_seq(optarg, &o->post_seq))
                return cli_usage_error(cmd, "--post %s: expected a sequence number", optarg);
            has_post = true;
            break;
        case 'h':
            return CLI_EXIT_OK;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    st.detect = true;
    int finished = budget_options_finish(cmd, false, o, &st);
    if (finished != CLI_PARSED)
        return finished;
    finished = cli_report_finish(rep, cmd, csv_tables);
    if (finished != CLI_PARSED)
        return finished;
    o->json = rep->format == CLI_FORMAT_JSON;
    if (o->has_pre != has_post)
        return cli_usage_error(cmd, "--pre and --post go together");
    if (o->has_pre && o->pre_seq == o->post_seq)
        return cli_usage_error(cmd, "--pre and --post name the same seq");
    if (cli_report_operands(rep, argc, argv, optind) != CLI_PARSED)
        return CLI_EXIT_USAGE;
    o->path = rep->paths[0];
    *st_out = st;
    return CLI_PARSED;
}

/*
 * The server, from --framework or the trace (budget_detect.h), and the
 * framework's option checks; a --framework the trace contradicts is a
 * warning, said once on stderr and kept in the report's notes. Returns
 * CLI_PARSED or the exit status of a usage error.
 */
static int settle_server(const char *cmd, struct budget_analysis *r,
                         const struct budget_option_state *st)
{
    struct budget_options *o = r->o;
    if (st->framework) {
        r->server.framework_source = "option";
        char *warning = budget_framework_mismatch(r->m, o->framework);
        if (warning) {
            cli_error(o->path, "warning: %s", warning);
            budget_add_note(r, warning);
        }
    } else {
        enum budget_framework fw;
        char *why = NULL;
        if (!budget_detect_framework(r->m, &fw, &why))
            return cli_usage_error(cmd, "the traces do not show which server made them (no "
                                        "server's Python frames or launch line): --framework "
                                        "sglang|vllm says it");
        o->framework = fw;
        r->server.framework_source = "trace";
        r->server.framework_why = why;
        int checked = budget_options_framework(cmd, o, st);
        if (checked != CLI_PARSED)
            return checked;
    }
    return CLI_PARSED;
}

/* ---- text ---- */

/* "<prefix> <text>" wrapped to the report's width: texts name files, hosts
 * and APIs from the traces, of any length. */
static void wrapped_line(FILE *out, size_t indent, const char *prefix, const char *text)
{
    char *line = xasprintf("%s %s", prefix, text);
    text_print_wrapped(out, line, indent);
    free(line);
}

/* A line with its sequence numbers masked ("seq 141", "seq 143-735"): the
 * lines of two ranks that differ only there say the same thing. */
static char *masked(const char *text)
{
    char *m = xstrdup(text);
    for (char *c = strstr(m, "seq "); c; c = strstr(c, "seq ")) {
        c += 4;
        while ((*c >= '0' && *c <= '9') || (*c == '-' && c[1] >= '0' && c[1] <= '9'))
            *c++ = '#';
    }
    return m;
}

/*
 * Per-rank lines "<who>: <text>", wrapped. A run of ranks whose lines say the
 * same (equal but for numbers) is one line for the first rank and one for
 * the rest: eight ranks of one job usually do exactly the same thing.
 */
static void print_rank_lines(FILE *out, const struct gm_model *m, const uint32_t *procs,
                             char **texts, size_t n)
{
    for (size_t i = 0; i < n;) {
        char *key = masked(texts[i]);
        size_t j = i + 1;
        bool identical = true;
        for (; j < n; j++) {
            char *other = masked(texts[j]);
            bool same = strcmp(key, other) == 0;
            free(other);
            if (!same)
                break;
            identical &= strcmp(texts[i], texts[j]) == 0;
        }
        free(key);
        char who[64];
        gm_process_name(who, sizeof(who), &m->procs[procs[i]]);
        strcat(who, ":");
        wrapped_line(out, 2, who, texts[i]);
        if (j - i == 2) { /* one other process: named alone, not as a range of one */
            gm_process_name(who, sizeof(who), &m->procs[procs[i + 1]]);
            strcat(who, ":");
            wrapped_line(out, 2, who,
                         identical ? "the same" : "the same, at their own seq numbers");
        } else if (j - i > 2) {
            const struct gm_process *first = &m->procs[procs[i + 1]];
            const struct gm_process *last = &m->procs[procs[j - 1]];
            char *others =
                first->has_rank && last->has_rank
                    ? xasprintf("ranks %" PRId64 "-%" PRId64 " (pids %" PRId64 "-%" PRId64 "):",
                                first->rank, last->rank, first->pid, last->pid)
                    : xasprintf("pids %" PRId64 "-%" PRId64 ":", first->pid, last->pid);
            wrapped_line(out, 2, others,
                         identical ? "the same" : "the same, at their own seq numbers");
            free(others);
        }
        i = j;
    }
}

static const char *framework_name(enum budget_framework f)
{
    return f == BUDGET_SGLANG ? "sglang" : "vllm";
}

static char *gpu_short(const struct gm_model *m, uint32_t gpu)
{
    if (gpu == GM_NONE)
        return xstrdup("-");
    const char *key = m->gpus[gpu].key;
    size_t len = strlen(key);
    if (strncmp(key, "GPU-", 4) == 0 && len > 12)
        len = 12;
    return xstrndup(key, len);
}

static int64_t at_ns(const struct gm_process *p, int64_t t_ns)
{
    return gm_sub(t_ns, p->has_start_mono ? p->start_mono_ns : p->first_t_ns);
}

static char *rank_label(const struct gm_process *p)
{
    return p->has_rank ? xasprintf("%" PRId64, p->rank) : xstrdup("-");
}

static void print_ranks_table(const struct budget_analysis *r, const struct budget_job *g,
                              FILE *out)
{
    const struct gm_model *m = r->m;
    bool vllm = r->o->framework == BUDGET_VLLM;
    static const struct table_column cols[] = {
        {"rank", TABLE_RIGHT, 0},         {"pid", TABLE_RIGHT, 0}, {"gpu", TABLE_LEFT, 0},
        {"pre seq", TABLE_RIGHT, 0},      {"at", TABLE_RIGHT, 0},  {"free", TABLE_RIGHT, 0},
        {"post seq", TABLE_RIGHT, 0},     {"at", TABLE_RIGHT, 0},  {"free", TABLE_RIGHT, 0},
        {"weight burst", TABLE_RIGHT, 0},
    };
    struct table *t = table_new(cols, sizeof(cols) / sizeof(cols[0]));
    (void)vllm; /* same columns; S0 and S1 are vLLM's names for pre and post */
    char buf[UNITS_BUF];
    for (size_t k = 0; k < g->nranks; k++) {
        const struct budget_rank *rk = &g->ranks[k];
        if (!rank_listed(rk))
            continue;
        const struct gm_process *p = &m->procs[rk->proc];
        char *label = rank_label(p), *gpu = gpu_short(m, rk->gpu);
        table_cell(t, label);
        table_cellf(t, "%" PRId64, p->pid);
        table_cell(t, gpu);
        free(label);
        free(gpu);
        if (!rk->analysed) {
            for (int i = 0; i < 7; i++)
                table_cell(t, NULL);
            continue;
        }
        if (rk->s0_only) { /* vLLM: the worker stopped after S0 */
            const struct gm_event *s0 = &p->events[rk->pre];
            table_cellf(t, "%" PRId64, s0->seq);
            table_cell(t, format_offset(buf, sizeof(buf), at_ns(p, s0->t_ns)));
            table_cell(t, format_bytes(buf, sizeof(buf), (uint64_t)rk->pre_free));
            for (int i = 0; i < 4; i++)
                table_cell(t, NULL);
            continue;
        }
        const struct gm_event *pre = &p->events[rk->pre], *post = &p->events[rk->post];
        table_cellf(t, "%" PRId64, pre->seq);
        table_cell(t, format_offset(buf, sizeof(buf), at_ns(p, pre->t_ns)));
        table_cell(t, format_bytes(buf, sizeof(buf), (uint64_t)rk->pre_free));
        table_cellf(t, "%" PRId64, post->seq);
        table_cell(t, format_offset(buf, sizeof(buf), at_ns(p, post->t_ns)));
        table_cell(t, format_bytes(buf, sizeof(buf), (uint64_t)rk->post_free));
        table_cell(t, rk->has_burst ? format_bytes(buf, sizeof(buf), (uint64_t)rk->burst.bytes)
                                    : NULL);
    }
    table_print(t, out, 2);
    table_free(t);
    uint32_t *procs = xcalloc(g->nranks ? g->nranks : 1, sizeof(*procs));
    char **texts = xcalloc(g->nranks ? g->nranks : 1, sizeof(*texts));
    size_t n = 0;
    for (size_t k = 0; k < g->nranks; k++) {
        if (!rank_listed(&g->ranks[k]))
            continue;
        procs[n] = g->ranks[k].proc;
        texts[n++] = xstrdup(g->ranks[k].analysed ? g->ranks[k].choice : g->ranks[k].problem);
    }
    print_rank_lines(out, m, procs, texts, n);
    for (size_t k = 0; k < n; k++)
        free(texts[k]);
    free(texts);
    free(procs);
}

static void print_kv(const struct budget_analysis *r, const struct budget_job *g, FILE *out)
{
    const struct gm_model *m = r->m;
    char a[UNITS_BUF], b[UNITS_BUF], c[UNITS_BUF];
    uint32_t *procs = xcalloc(g->nranks ? g->nranks : 1, sizeof(*procs));
    char **texts = xcalloc(g->nranks ? g->nranks : 1, sizeof(*texts));
    size_t n = 0;
    for (size_t k = 0; k < g->nranks; k++) {
        const struct budget_rank *rk = &g->ranks[k];
        if (!rk->analysed || (!rk->has_kv && !g->fits))
            continue;
        int64_t predicted =
            r->o->framework == BUDGET_SGLANG
                ? (g->tokens > 0 && g->tokens <= INT64_MAX / g->cell_size ? g->tokens * g->cell_size
                                                                          : 0)
                : rk->available;
        procs[n] = rk->proc;
        if (rk->has_kv)
            texts[n++] = xasprintf(
                "KV pool seen after post: %" PRId64 " x %s = %s; predicted %s", rk->kv_count,
                format_bytes(a, sizeof(a), (uint64_t)rk->kv_size),
                format_bytes(b, sizeof(b),
                             (uint64_t)(rk->kv_size > 0 && rk->kv_count > INT64_MAX / rk->kv_size
                                            ? INT64_MAX
                                            : rk->kv_count * rk->kv_size)),
                format_bytes_signed(c, sizeof(c), predicted));
        else
            texts[n++] = xasprintf("no KV pool seen after post (predicted %s)",
                                   format_bytes_signed(c, sizeof(c), predicted));
    }
    print_rank_lines(out, m, procs, texts, n);
    for (size_t k = 0; k < n; k++)
        free(texts[k]);
    free(texts);
    free(procs);
}

static void print_group_text(const struct budget_analysis *r, const struct budget_job *g,
                             size_t index, FILE *out)
{
    const struct budget_options *o = r->o;
    fprintf(out, "\nJob %zu", index + 1);
    if (g->has_hash)
        fprintf(out, " (communicator %016" PRIx64 ", %" PRId64 " ranks)", g->hash, g->world);
    fprintf(out, ": %zu rank%s traced, %zu analysed\n", g->nranks, g->nranks == 1 ? "" : "s",
            g->analysed);
    if (g->nmissing) {
        fputs("  no trace for rank", out);
        for (size_t i = 0; i < g->nmissing && i < 16; i++)
            fprintf(out, "%s %" PRId64, i ? "," : (g->nmissing > 1 ? "s" : ""), g->missing[i]);
        fprintf(out, "%s: the MIN covers only the traced ranks\n", g->nmissing > 16 ? ", ..." : "");
    }
    print_ranks_table(r, g, out);
    if (g->analysed == 0) {
        fputs("  no rank of this job could be analysed\n", out);
        return;
    }
    if (o->framework == BUDGET_SGLANG) {
        budget_sglang_print_job(r, g, out);
        print_kv(r, g, out);
        return;
    }
    budget_vllm_print_job(r, g, rank_listed, out);
    print_kv(r, g, out);
}

/* The JSON of one SGLang count: its value (null when none) and its source. */
static void print_count_json(struct json_writer *w, const char *key, const struct budget_count *c)
{
    char name[64];
    if (c->has)
        json_kv_int(w, key, c->value);
    else
        json_kv_null(w, key);
    snprintf(name, sizeof(name), "%s_source", key);
    json_kv_string(w, name, c->source);
    snprintf(name, sizeof(name), "%s_source_pid", key);
    if (c->source_pid)
        json_kv_int(w, name, c->source_pid);
    else
        json_kv_null(w, name);
    snprintf(name, sizeof(name), "%s_source_process", key);
    if (c->source_process)
        json_kv_string(w, name, c->source_process);
    else
        json_kv_null(w, name);
}

static void print_text(const struct budget_analysis *r, FILE *out)
{
    const struct budget_options *o = r->o;
    char cell[UNITS_BUF], burst[UNITS_BUF], source[96];
    fputs("cutrace budget of ", out);
    text_print(out, o->path, 60, 0);
    fprintf(out, ": %s, %zu job%s, %zu rank%s analysed\n", framework_name(o->framework), r->ngroups,
            r->ngroups == 1 ? "" : "s", r->analysed, r->analysed == 1 ? "" : "s");
    if (o->framework == BUDGET_SGLANG) {
        fprintf(out, "  --mem-fraction-static %g", o->fraction);
        if (strcmp(o->fraction_source, "cmdline") == 0)
            fprintf(out, " (from %s)", budget_source_text(o, source, sizeof(source)));
        else if (o->derived.has)
            fputs(" (derived as SGLang does: below)", out);
    } else {
        fprintf(out, "  --gpu-memory-utilization %g", o->util);
        if (strcmp(o->util_source, "cmdline") == 0)
            fprintf(out, " (from %s)", budget_source_text(o, source, sizeof(source)));
        else if (strcmp(o->util_source, "default") == 0)
            fputs(" (vLLM's default)", out);
    }
    fprintf(out, ", cell size %s, burst min %s\n",
            format_bytes(cell, sizeof(cell), (uint64_t)o->cell_size),
            format_bytes(burst, sizeof(burst), (uint64_t)o->burst_min));
    if (o->framework == BUDGET_SGLANG)
        budget_sglang_print_header(r, out);
    else
        budget_vllm_print_header(r, out);
    if (r->server.framework_why)
        wrapped_line(out, 2, "framework from the trace:", r->server.framework_why);
    for (size_t i = 0; i < r->ngroups; i++)
        if (job_listed(&r->groups[i]))
            print_group_text(r, &r->groups[i], i, out);
    if (r->ngroups == 0)
        fputs("\nno rank: no process made a weight burst with measurements around it\n", out);
    const struct gm_model *m = r->m;
    if (m->nnotes || r->nnotes)
        fputc('\n', out);
    for (size_t i = 0; i < r->nnotes; i++)
        wrapped_line(out, 0, "note:", r->notes[i]);
    for (size_t i = 0; i < m->nnotes; i++)
        wrapped_line(out, 0, "note:", m->notes[i]);
}

/* ---- JSON ---- */

static void json_measure(struct json_writer *w, const char *key, const struct gm_process *p,
                         uint32_t event, const int64_t *live, int64_t unexplained)
{
    const struct gm_event *e = &p->events[event];
    json_key(w, key);
    json_object_begin(w);
    json_kv_int(w, "seq", e->seq);
    json_kv_int(w, "t_ns", e->t_ns);
    json_kv_int(w, "at_ns", at_ns(p, e->t_ns));
    json_kv_int(w, "free_bytes", e->a);
    json_kv_int(w, "total_bytes", e->b);
    json_kv_int(w, "used_bytes", gm_sub(e->b, e->a));
    json_kv_int(w, "traced_bytes", gm_traced(live));
    json_kv_int(w, "unexplained_bytes", unexplained);
    json_key(w, "live");
    json_object_begin(w);
    for (int c = 0; c < GM_CATEGORIES; c++)
        json_kv_int(w, gm_category_key((enum gm_category)c), live[c]);
    json_object_end(w);
    json_object_end(w);
}

static void json_rank(struct json_writer *w, const struct budget_analysis *r,
                      const struct budget_job *g, const struct budget_rank *rk)
{
    const struct gm_model *m = r->m;
    const struct gm_process *p = &m->procs[rk->proc];
    json_object_begin(w);
    if (p->has_rank)
        json_kv_int(w, "rank", p->rank);
    else
        json_kv_null(w, "rank");
    json_kv_int(w, "pid", p->pid);
    json_kv_string(w, "file", p->trace->file);
    json_kv_string(w, "host", p->host);
    json_kv_string(w, "gpu", rk->gpu == GM_NONE ? NULL : m->gpus[rk->gpu].key);
    if (rk->gpu == GM_NONE)
        json_kv_null(w, "gpu_index");
    else
        json_kv_int(w, "gpu_index", rk->gpu);
    json_kv_bool(w, "analysed", rk->analysed);
    json_kv_string(w, "problem", rk->problem);
    json_kv_string(w, "choice", rk->choice);
    json_key(w, "weight_burst");
    if (rk->has_burst) {
        json_object_begin(w);
        json_kv_int(w, "first_seq", m->procs[rk->proc].events[rk->burst.first].seq);
        json_kv_int(w, "last_seq", m->procs[rk->proc].events[rk->burst.last].seq);
        json_kv_int(w, "allocations", rk->burst.count);
        json_kv_int(w, "bytes", rk->burst.bytes);
        if (rk->burst.kv_like_skipped)
            json_kv_int(w, "passed_over_kv_like_bytes", rk->burst.skipped_bytes);
        else
            json_kv_null(w, "passed_over_kv_like_bytes");
        json_object_end(w);
    } else {
        json_null(w);
    }
    if (!rk->analysed) {
        json_object_end(w);
        return;
    }
    json_measure(w, "pre", p, rk->pre, rk->live_pre, rk->unexpl_pre);
    if (rk->s0_only)
        json_kv_null(w, "post"); /* vLLM: the worker stopped after S0 */
    else
        json_measure(w, "post", p, rk->post, rk->live_post, rk->unexpl_post);
    json_key(w, "made_between_live_at_post");
    json_object_begin(w);
    for (int c = 0; c < GM_GPU_CATEGORIES; c++)
        json_kv_int(w, gm_category_key((enum gm_category)c), rk->between[c]);
    json_object_end(w);
    json_kv_int(w, "weights_live_at_post_bytes", rk->weights_live);
    json_kv_int(w, "freed_between_bytes", rk->freed_between);
    if (r->o->framework == BUDGET_SGLANG) {
        json_kv_double(w, "rest_gib_own", rk->rest_own);
        json_key(w, "decomposition");
        json_array_begin(w);
        for (size_t i = 0; i < rk->nrows; i++) {
            const struct budget_row *d = &rk->rows[i];
            json_object_begin(w);
            json_kv_string(w, "part", budget_part_keys[d->part]);
            json_kv_string(w, "category",
                           d->category >= 0 ? gm_category_key((enum gm_category)d->category)
                                            : NULL);
            json_kv_int(w, "bytes", d->bytes);
            json_kv_double(w, "cost_gib", d->cost_gib);
            json_object_end(w);
        }
        json_array_end(w);
        json_kv_double(w, "budget_gib", rk->ledger_budget);
        json_kv_double(w, "other_gib", rk->ledger_other);
    } else {
        json_kv_int(w, "requested_bytes", rk->requested);
        json_kv_bool(w, "early_failure", rk->early_failure);
        json_kv_int(w, "weights_bytes", rk->weights);
        json_kv_int(w, "torch_pre_bytes", rk->torch_pre);
        json_kv_int(w, "torch_post_bytes", rk->torch_post);
        json_kv_int(w, "non_torch_pre_bytes", rk->non_torch_pre);
        json_kv_int(w, "non_torch_post_bytes", rk->non_torch_post);
        json_kv_int(w, "non_torch_increase_bytes", rk->non_torch_increase);
        json_kv_int(w, "runtime_at_burst_end_bytes", rk->runtime_at_burst_end);
        json_kv_int(w, "runtime_peak_bytes", rk->runtime_peak);
        json_kv_int(w, "peak_activation_bytes", rk->peak_activation);
        json_kv_int(w, "cuda_graph_estimate_bytes", rk->graph_applied);
        json_kv_int(w, "available_kv_bytes", rk->available);
        budget_vllm_json_rank(w, rk);
    }
    json_key(w, "kv_pool");
    if (rk->has_kv) {
        json_object_begin(w);
        json_kv_int(w, "count", rk->kv_count);
        json_kv_int(w, "size", rk->kv_size);
        json_kv_int(w, "bytes",
                    rk->kv_count > INT64_MAX / rk->kv_size ? INT64_MAX
                                                           : rk->kv_count * rk->kv_size);
        json_object_end(w);
    } else {
        json_null(w);
    }
    (void)g;
    json_object_end(w);
}

static void json_group(struct json_writer *w, const struct budget_analysis *r,
                       const struct budget_job *g)
{
    const struct budget_options *o = r->o;
    char hash[24];
    json_object_begin(w);
    snprintf(hash, sizeof(hash), "%016" PRIx64, g->hash);
    json_kv_string(w, "communicator", g->has_hash ? hash : NULL);
    if (g->has_hash)
        json_kv_int(w, "nranks", g->world);
    else
        json_kv_null(w, "nranks");
    json_kv_uint(w, "ranks_traced", g->nranks);
    json_kv_uint(w, "ranks_analysed", g->analysed);
    json_key(w, "missing_ranks");
    json_array_begin(w);
    for (size_t i = 0; i < g->nmissing; i++)
        json_int(w, g->missing[i]);
    json_array_end(w);
    if (o->framework == BUDGET_SGLANG && g->analysed > 0)
        budget_sglang_json_inputs(w, g);
    json_key(w, "ranks");
    json_array_begin(w);
    for (size_t k = 0; k < g->nranks; k++)
        if (rank_listed(&g->ranks[k]))
            json_rank(w, r, g, &g->ranks[k]);
    json_array_end(w);
    bool any = g->analysed > 0;
    if (o->framework == BUDGET_SGLANG) {
        budget_sglang_json_job(w, r, g, any);
    } else if (any) {
        budget_vllm_json_job(w, g);
        json_kv_int(w, "available_kv_bytes", g->available);
        json_kv_int(w, "available_kv_pid", r->m->procs[g->ranks[g->available_rank].proc].pid);
        json_kv_bool(w, "early_failure", g->early_failure);
        json_kv_bool(w, "fits", g->fits);
        if (g->fits)
            json_kv_int(w, "tokens", g->tokens);
        else
            json_kv_null(w, "tokens");
        json_kv_string(w, "verdict", g->verdict);
        if (g->has_u_min)
            json_kv_double(w, "u_min", g->u_min);
        else
            json_kv_null(w, "u_min");
        if (g->has_u_max)
            json_kv_double(w, "u_max", g->u_max);
        else
            json_kv_null(w, "u_max");
    }
    json_object_end(w);
}

static void print_json(const struct budget_analysis *r, FILE *out)
{
    const struct budget_options *o = r->o;
    struct json_writer w;
    json_init(&w, out);
    json_object_begin(&w);
    json_kv_string(&w, "cutrace_version", CUTRACE_VERSION);
    json_kv_string(&w, "report", "budget");
    json_kv_string(&w, "path", o->path);
    gm_clocks_json(&w, r->m);
    json_kv_string(&w, "framework", framework_name(o->framework));
    json_key(&w, "parameters");
    json_object_begin(&w);
    if (o->framework == BUDGET_SGLANG) {
        json_kv_double(&w, "mem_fraction_static", o->fraction);
        json_kv_string(&w, "mem_fraction_static_source", o->fraction_source);
    } else {
        json_kv_double(&w, "gpu_memory_utilization", o->util);
        json_kv_string(&w, "gpu_memory_utilization_source", o->util_source);
        json_kv_int(&w, "cuda_graph_estimate", o->graph_estimate);
        json_kv_string(&w, "cuda_graph_estimate_source",
                       o->graph_estimate_source ? o->graph_estimate_source : "trace");
        bool current = budget_vllm_current(r);
        json_kv_string(&w, "vllm_path", current ? "current" : "older");
        json_kv_string(&w, "vllm_path_source", r->server.path_source);
        json_kv_string(&w, "vllm_path_why", r->server.path_why);
    }
    if (o->source_pid)
        json_kv_int(&w, "source_pid", o->source_pid);
    else
        json_kv_null(&w, "source_pid");
    if (o->source_process)
        json_kv_string(&w, "source_process", o->source_process);
    json_kv_int(&w, "cell_size", o->cell_size);
    json_kv_int(&w, "burst_min", o->burst_min);
    if (o->has_pre) {
        json_kv_int(&w, "pre_seq", o->pre_seq);
        json_kv_int(&w, "post_seq", o->post_seq);
    } else {
        json_kv_null(&w, "pre_seq");
        json_kv_null(&w, "post_seq");
    }
    json_object_end(&w);
    json_key(&w, "server");
    json_object_begin(&w);
    json_kv_string(&w, "framework", framework_name(o->framework));
    json_kv_string(&w, "framework_source", r->server.framework_source);
    json_kv_string(&w, "framework_why", r->server.framework_why);
    json_kv_string(&w, "path", budget_path_name(r->server.path));
    json_kv_string(&w, "path_source", r->server.path_source);
    json_kv_string(&w, "why", r->server.path_why);
    if (o->framework == BUDGET_SGLANG) {
        json_kv_string(&w, "speculative_algorithm",
                       o->spec_algorithm[0] ? o->spec_algorithm : NULL);
        json_kv_string(&w, "multimodal_reserve", o->mm_reserve_why);
    }
    json_object_end(&w);
    if (o->framework == BUDGET_SGLANG && o->derived.has)
        budget_sglang_json_derivation(&w, &o->derived);
    if (o->framework == BUDGET_SGLANG) {
        /* Beside "parameters", whose members the reports' readers know. */
        json_key(&w, "pool");
        json_object_begin(&w);
        print_count_json(&w, "page_size", &o->page_size);
        print_count_json(&w, "max_total_tokens", &o->max_total_tokens);
        json_object_end(&w);
    } else {
        json_key(&w, "kv_cache");
        json_object_begin(&w);
        print_count_json(&w, "block_size", &o->block_size);
        print_count_json(&w, "num_layers", &o->num_layers);
        print_count_json(&w, "block_bytes", &o->block_bytes);
        print_count_json(&w, "max_model_len", &o->max_model_len);
        json_object_end(&w);
    }
    json_key(&w, "jobs");
    json_array_begin(&w);
    for (size_t i = 0; i < r->ngroups; i++)
        if (job_listed(&r->groups[i]))
            json_group(&w, r, &r->groups[i]);
    json_array_end(&w);
    json_kv_uint(&w, "ranks_analysed", r->analysed);
    json_key(&w, "notes");
    json_array_begin(&w);
    for (size_t i = 0; i < r->nnotes; i++)
        json_string(&w, r->notes[i]);
    for (size_t i = 0; i < r->m->nnotes; i++)
        json_string(&w, r->m->notes[i]);
    json_array_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

/* ---- CSV ---- */

static void csv_job_key(struct csv_writer *w, size_t index, const struct budget_job *g)
{
    char hash[24];
    snprintf(hash, sizeof(hash), "%016" PRIx64, g->hash);
    csv_uint(w, index + 1);
    csv_string(w, g->has_hash ? hash : NULL);
}

/* One row per rank listed: what it measured. */
static void print_csv_ranks(const struct budget_analysis *r, FILE *out)
{
    static const char *const head[] = {"job",
                                       "communicator",
                                       "rank",
                                       "pid",
                                       "file",
                                       "host",
                                       "gpu",
                                       "analysed",
                                       "problem",
                                       "pre_seq",
                                       "pre_t_ns",
                                       "pre_free_bytes",
                                       "pre_total_bytes",
                                       "post_seq",
                                       "post_t_ns",
                                       "post_free_bytes",
                                       "post_total_bytes",
                                       "weight_burst_bytes",
                                       "weights_live_at_post_bytes"};
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    const struct gm_model *m = r->m;
    for (size_t i = 0; i < r->ngroups; i++) {
        const struct budget_job *g = &r->groups[i];
        for (size_t k = 0; k < g->nranks; k++) {
            const struct budget_rank *rk = &g->ranks[k];
            if (!rank_listed(rk))
                continue;
            const struct gm_process *p = &m->procs[rk->proc];
            csv_job_key(&w, i, g);
            csv_opt_int(&w, p->has_rank, p->rank);
            csv_int(&w, p->pid);
            csv_string(&w, p->trace->file);
            csv_string(&w, p->host);
            csv_opt_int(&w, rk->gpu != GM_NONE, rk->gpu);
            csv_int(&w, rk->analysed);
            csv_string(&w, rk->analysed ? NULL : rk->problem);
            if (rk->analysed) {
                const struct gm_event *pre = &p->events[rk->pre], *post = &p->events[rk->post];
                csv_int(&w, pre->seq);
                csv_int(&w, pre->t_ns);
                csv_int(&w, rk->pre_free);
                csv_int(&w, rk->pre_total);
                csv_int(&w, post->seq);
                csv_int(&w, post->t_ns);
                csv_int(&w, rk->post_free);
                csv_int(&w, rk->post_total);
                csv_opt_int(&w, rk->has_burst, rk->burst.bytes);
                csv_int(&w, rk->weights_live);
            } else {
                for (int c = 0; c < 10; c++)
                    csv_null(&w);
            }
            csv_end_row(&w);
        }
    }
}

/* One row per job listed: the server's verdict. */
static void print_csv_jobs(const struct budget_analysis *r, FILE *out)
{
    static const char *const head[] = {
        "job",    "communicator", "nranks",   "ranks_traced",  "ranks_analysed",    "fits",
        "tokens", "verdict",      "rest_gib", "f_min_rounded", "available_kv_bytes"};
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    bool sglang = r->o->framework == BUDGET_SGLANG;
    for (size_t i = 0; i < r->ngroups; i++) {
        const struct budget_job *g = &r->groups[i];
        if (!job_listed(g))
            continue;
        bool any = g->analysed > 0;
        csv_job_key(&w, i, g);
        csv_opt_int(&w, g->has_hash, g->world);
        csv_uint(&w, g->nranks);
        csv_uint(&w, g->analysed);
        if (any) {
            csv_int(&w, g->fits);
            csv_int(&w, g->tokens);
            csv_string(&w, g->verdict);
        } else {
            csv_null(&w);
            csv_null(&w);
            csv_null(&w);
        }
        if (any && sglang)
            csv_double(&w, g->rest);
        else
            csv_null(&w);
        if (any && sglang && g->has_f_min)
            csv_double(&w, g->f_min_rounded);
        else
            csv_null(&w);
        csv_opt_int(&w, any && !sglang, g->available);
        csv_end_row(&w);
    }
}

/* --fail-on-problem: a job listed whose verdict does not fit. */
static bool found_problem(const struct budget_analysis *r)
{
    for (size_t i = 0; i < r->ngroups; i++)
        if (job_listed(&r->groups[i]) && r->groups[i].analysed > 0 && !r->groups[i].fits)
            return true;
    return false;
}

int cmd_budget(int argc, char **argv)
{
    struct budget_options o;
    struct cli_report_opts rep;
    struct budget_option_state st;
    int parsed = parse_options(argc, argv, &o, &rep, &st);
    if (parsed != CLI_PARSED)
        return parsed;
    struct trace_set set;
    struct gm_model m;
    if (gm_open_run(&m, &set, rep.paths, rep.npaths, 0) != 0)
        return CLI_EXIT_BAD_INPUT;
    o.path = set.path; /* every path of the run, as the report names it */
    struct budget_analysis r = {.m = &m, .o = &o};
    struct gm_filter f;
    int status = gm_filter_init(&f, &m, &rep, "budget");
    listed = &f;
    int settled = status == CLI_EXIT_OK ? settle_server(argv[0], &r, &st) : CLI_PARSED;
    if (settled != CLI_PARSED)
        status = settled;
    else if (status == CLI_EXIT_OK)
        budget_values_from_cmdlines(&r);
    if (status != CLI_EXIT_OK) {
        /* the usage error is said */
    } else if (budget_derive_fraction(&r) != 0 || budget_analyse(&r) != 0) {
        status = CLI_EXIT_BAD_INPUT;
    } else {
        if (rep.format == CLI_FORMAT_JSON)
            print_json(&r, stdout);
        else if (rep.format == CLI_FORMAT_CSV && rep.csv_table == 1)
            print_csv_jobs(&r, stdout);
        else if (rep.format == CLI_FORMAT_CSV)
            print_csv_ranks(&r, stdout);
        else
            print_text(&r, stdout);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            cli_error(NULL, "cannot write the report to standard output");
            status = CLI_EXIT_BAD_INPUT;
        } else if (r.analysed == 0) {
            cli_error(o.path, "no rank could be analysed (see the report)");
            status = CLI_EXIT_BAD_INPUT;
        } else if (rep.fail_on_problem && found_problem(&r)) {
            status = CLI_EXIT_PROBLEM;
        }
    }
    listed = NULL;
    gm_filter_free(&f);
    budget_analysis_free(&r);
    gm_free(&m);
    trace_set_close(&set);
    return status;
}
