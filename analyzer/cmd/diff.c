/*
 * cmd_diff.c - `cutrace diff BASELINE OTHER [--json]`: what the second run
 * does differently from the first and what it costs, aligned by phase, not
 * by wall time (the comparison itself is diff_analysis.c's).
 *
 * The text report reads like `heaptrack_print --diff`: a short summary
 * first (the verdict, the first milestone that diverges, what each phase
 * made more or less of, the budget and configuration changes), then the
 * details: the milestones of one pair of GPUs side by side, the
 * allocation groups that differ ranked by their cost to local GPU memory,
 * IPC lineage, communicators and collectives, the budget, the
 * configuration. A is the baseline, B the other run; deltas are B - A,
 * signed. Lines fit 120 columns. --json carries every pair, every step and
 * every group with raw numbers.
 *
 * Nothing that makes two identical runs differ (pids, pointers, times, file
 * names, communicator hashes) is compared; pids and seqs appear in JSON as
 * context only.
 */
#include "cli.h"
#include "analysis/diff_analysis.h"
#include "out/csv.h"
#include "out/json.h"
#include "out/table.h"
#include "out/units.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_ALLOC_ROWS 40 /* allocation groups in text; JSON has all */
#define TEXT_PAIR_LINES 8  /* pairs whose milestones differ from the one shown */
#define LABEL_MAX       40 /* milestone column */

static const char usage[] =
    "usage: cutrace diff [options] BASELINE_DIR OTHER_DIR\n"
    "\n"
    "What the other run does differently from the baseline, and what it costs.\n"
    "GPUs are paired by NCCL rank (else device ordinal, else uuid); their\n"
    "milestones (NCCL init, IPC setup, each cudaMemGetInfo, weight burst, graph\n"
    "capture, ...) are aligned by what they are, not by time. Reported: live and\n"
    "free memory at each milestone and the first that diverges; allocations one\n"
    "run made and the other did not, by phase, api, issuing module and size; IPC\n"
    "lineage; communicators and collectives; the KV-cache budget (--framework);\n"
    "command lines and recorded environment. A = baseline, B = other, deltas B - A.\n"
    "\n"
    "options:\n"
    "  --threshold BYTES             a milestone diverges past this (default 16M)\n"
    "  --framework sglang|vllm       compare the budgets, as `cutrace budget` does\n"
    "  --mem-fraction-static F       SGLang's F (else each run's command line)\n"
    "  --gpu-memory-utilization U    vLLM's U (else the command line's, else 0.9)\n"
    "  --cell-size BYTES             KV bytes per token (default 70272)\n"
    "  --burst-min BYTES             smallest weight burst (default 1 GiB)\n"
    "  --cuda-graph-estimate BYTES   vLLM: subtract this for CUDA graphs\n" CLI_FORMAT_HELP
        CLI_HELP_HELP "\n"
    "Tables for --csv: milestones (one row per aligned milestone of each GPU pair),\n"
    "allocations (one row per allocation group that differs).\n"
    "\n" CLI_EXIT_HELP("a milestone diverges past --threshold\n"
                       "exit 0 when compared, whether or not the runs differ");

static const char *const csv_tables[] = {"milestones", "allocations", NULL};

/* ---- options ---- */

static bool parse_bytes_opt(const char *text, int64_t *out, bool positive)
{
    uint64_t v;
    if (parse_size(text, &v) != 0 || v > INT64_MAX || (positive && v == 0))
        return false;
    *out = (int64_t)v;
    return true;
}

static int parse_options(int argc, char **argv, struct diff_options *o, struct cli_report_opts *rep)
{
    static const struct option options[] = {
        BUDGET_LONG_OPTIONS, {"threshold", required_argument, NULL, 't'},
        CLI_FORMAT_OPTIONS,  {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = argv[0];
    *o = (struct diff_options){.threshold = DIFF_THRESHOLD_DEFAULT};
    struct budget_options *b = &o->budget_options;
    struct budget_option_state st;
    budget_options_init(b, &st);
    cli_report_init(rep);
    int c;
    while ((c = cli_getopt(argc, argv, "h", options, usage)) != -1) {
        if (cli_report_option(rep, c, optarg))
            continue;
        int taken = budget_option(cmd, c, optarg, b, &st);
        if (taken > 1)
            return taken;
        if (taken == 1)
            continue;
        switch (c) {
        case 't':
            if (!parse_bytes_opt(optarg, &o->threshold, false))
                return cli_usage_error(cmd, "--threshold %s: expected a size in bytes", optarg);
            break;
        case 'h':
            return CLI_EXIT_OK;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    int finished = budget_options_finish(cmd, false, b, &st);
    if (finished != CLI_PARSED)
        return finished;
    finished = cli_report_finish(rep, cmd, csv_tables);
    if (finished != CLI_PARSED)
        return finished;
    o->json = rep->format == CLI_FORMAT_JSON;
    o->budget = st.framework != NULL;
    b->json = o->json;
    if (argc - optind < 2)
        return cli_usage_error(cmd, "two trace directories expected (baseline, other), got %d",
                               argc - optind);
    if (argc - optind > 2)
        return cli_usage_error(cmd, "two trace directories expected, got %d arguments",
                               argc - optind);
    o->paths[0] = argv[optind];
    o->paths[1] = argv[optind + 1];
    return CLI_PARSED;
}

/* ---- shared wording ---- */

static const char *side_name(int side)
{
    return side == DIFF_A ? "A" : "B";
}

/* Prints a sentence wrapped at blanks to table_width() columns;
 * continuation lines are indented 4 more. Trace text is made safe. */
static void emit(FILE *out, size_t indent, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void emit(FILE *out, size_t indent, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    va_end(ap);
    if (!text)
        return;
    const char *p = text;
    bool first = true;
    while (*p) {
        size_t ind = first ? indent : indent + 4;
        size_t limit = table_width();
        size_t room = limit > ind + 20 ? limit - ind : 20;
        /* the longest run of whole words that fits */
        size_t len = strlen(p), cut = 0;
        for (size_t i = 0; i <= len; i++) {
            if (p[i] != ' ' && p[i] != '\0')
                continue;
            char *chunk = xstrndup(p, i);
            size_t w = text_width(chunk);
            free(chunk);
            if (w > room)
                break;
            cut = i;
        }
        if (cut == 0) /* one word longer than the line: cut it */
            cut = strcspn(p, " ");
        char *chunk = xstrndup(p, cut);
        fprintf(out, "%*s", (int)ind, "");
        text_print(out, chunk, room, 0);
        fputc('\n', out);
        free(chunk);
        p += cut;
        while (*p == ' ')
            p++;
        first = false;
    }
    free(text);
}

static int64_t sat_mul_bytes(int64_t count, int64_t size)
{
    int64_t r;
    if (__builtin_mul_overflow(count, size, &r))
        return (count < 0) != (size < 0) ? INT64_MIN : INT64_MAX;
    return r;
}

static char *signed_count(int64_t n)
{
    return xasprintf("%s%" PRId64, n > 0 ? "+" : "", n);
}

/* A count delta over pairs: "+1", or "0..+2" when they differ. */
static char *count_range(int64_t lo, int64_t hi)
{
    if (lo == hi)
        return signed_count(lo);
    char *a = signed_count(lo), *b = signed_count(hi);
    char *out = xasprintf("%s..%s", a, b);
    free(a);
    free(b);
    return out;
}

static const char *category_key(uint8_t category)
{
    return gm_category_key((enum gm_category)category);
}

/* "ipc_exported +512.0 MiB, runtime +20.0 MiB" for live deltas; "" none. */
static char *live_changes(const int64_t *a, const int64_t *b)
{
    char *out = xstrdup("");
    for (int c = 0; c < GM_CATEGORIES; c++) {
        int64_t delta = gm_sub(b[c], a[c]);
        if (delta == 0)
            continue;
        char buf[DIFF_SIZE_BUF];
        char *joined =
            xasprintf("%s%s%s %s", out, *out ? ", " : "", gm_category_key((enum gm_category)c),
                      diff_signed_size(buf, sizeof(buf), delta));
        free(out);
        out = joined;
    }
    return out;
}

/* "NCCL init 2 -> measurement 2 (pre)": a phase of the allocations. */
static char *phase_text(const struct diff *d, int64_t phase, int64_t end)
{
    if (phase < 0)
        return end >= 0 ? xasprintf("before %s", d->rows[end].label)
                        : xstrdup("before any common milestone");
    if (end < 0)
        return xasprintf("after %s", d->rows[phase].label);
    return xasprintf("%s -> %s", d->rows[phase].label, d->rows[end].label);
}

static const char *end_word(const struct gm_process *p)
{
    if (p->exited)
        return "exited";
    if (p->end_state && strcmp(p->end_state, "killed") == 0)
        return "killed";
    return "running or killed";
}

/* The last milestone (not its end) of a process on its GPU, NULL if none. */
static const struct diff_milestone *last_milestone(const struct diff_run *r, uint32_t proc)
{
    const struct diff_milestone *last = NULL;
    for (size_t g = 0; g < r->ngpus; g++) {
        if (r->gpus[g].proc != proc)
            continue;
        for (size_t i = 0; i < r->gpus[g].nms; i++)
            if (r->gpus[g].ms[i].proc == proc && r->gpus[g].ms[i].kind != DIFF_MS_END)
                last = &r->gpus[g].ms[i];
    }
    return last;
}

/* ---- the pair shown, and how the others compare with it ---- */

struct row_sig {
    bool has[2], measured;
    int64_t dlive[GM_CATEGORIES];
    int64_t dfree;
    int64_t end[2];
};

static struct row_sig *pair_sigs(const struct diff *d, uint32_t pair)
{
    const struct diff_pair *p = &d->pairs[pair];
    struct row_sig *sigs = xcalloc(d->nrows ? d->nrows : 1, sizeof(*sigs));
    for (size_t s = 0; s < p->nsteps; s++) {
        const struct diff_step *st = &p->steps[s];
        struct row_sig *sig = &sigs[st->row];
        const struct diff_milestone *ms[2] = {diff_step_ms(d, p, st, DIFF_A),
                                              diff_step_ms(d, p, st, DIFF_B)};
        for (int side = 0; side < 2; side++)
            if (ms[side]) {
                sig->has[side] = true;
                sig->end[side] = ms[side]->kind == DIFF_MS_END ? ms[side]->detail : 0;
            }
        if (!ms[0] || !ms[1])
            continue;
        for (int c = 0; c < GM_CATEGORIES; c++)
            sig->dlive[c] = gm_sub(ms[1]->live[c], ms[0]->live[c]);
        sig->measured = ms[0]->measured && ms[1]->measured;
        if (sig->measured)
            sig->dfree = gm_sub(ms[1]->free_bytes, ms[0]->free_bytes);
    }
    return sigs;
}

static bool sig_equal(const struct row_sig *a, const struct row_sig *b)
{
    if (a->has[0] != b->has[0] || a->has[1] != b->has[1] || a->measured != b->measured ||
        a->dfree != b->dfree || a->end[0] != b->end[0] || a->end[1] != b->end[1])
        return false;
    return memcmp(a->dlive, b->dlive, sizeof(a->dlive)) == 0;
}

/* The pair whose milestones are shown: where the runs first diverge, else
 * the first with a milestone of one run only, else the first. */
static uint32_t shown_pair(const struct diff *d)
{
    if (d->first_div_row >= 0)
        return d->first_div_pair;
    for (uint32_t p = 0; p < d->npairs; p++)
        for (size_t s = 0; s < d->pairs[p].nsteps; s++)
            if (d->pairs[p].steps[s].ms[0] < 0 || d->pairs[p].steps[s].ms[1] < 0)
                return p;
    return 0;
}

/* How pair q's row differs from the shown pair's, in words (malloc'd). */
static char *sig_difference(const struct row_sig *mine, const struct row_sig *shown)
{
    if (mine->has[0] != shown->has[0] || mine->has[1] != shown->has[1]) {
        if (!mine->has[0] && !mine->has[1])
            return xstrdup("not reached in either run");
        if (mine->has[0] && mine->has[1])
            return xstrdup("in both runs");
        return xasprintf("only in %s", mine->has[0] ? "A" : "B");
    }
    if (mine->end[0] != shown->end[0] || mine->end[1] != shown->end[1])
        return xasprintf("processes end %s in A, %s in B", mine->end[0] ? "exited" : "killed",
                         mine->end[1] ? "exited" : "killed");
    char t[DIFF_SIZE_BUF], f[DIFF_SIZE_BUF];
    return xasprintf("traced %s%s%s", diff_signed_size(t, sizeof(t), gm_traced(mine->dlive)),
                     mine->measured ? ", free " : "",
                     mine->measured ? diff_signed_size(f, sizeof(f), mine->dfree) : "");
}

/* ---- per phase: what the allocation groups add up to ---- */

/* What the allocation groups of a phase add up to: GPU memory, IPC
 * mappings of peers' memory, pinned host memory. */
enum { PS_GPU, PS_PEER, PS_HOST, PS_KINDS };
enum { PS_ADDED, PS_REMOVED, PS_BYTES };

struct phase_sum {
    int64_t phase, end;
    int64_t (*v)[PS_KINDS][3]; /* per pair: added and removed allocations, bytes */
};

static int ps_kind(uint8_t category)
{
    return category < GM_GPU_CATEGORIES ? PS_GPU : category == GM_CAT_PEER ? PS_PEER : PS_HOST;
}

static struct phase_sum *phase_sums(const struct diff *d, size_t *count)
{
    struct phase_sum *sums = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < d->nallocs; i++) {
        const struct diff_alloc_row *row = &d->allocs[i];
        size_t k = 0;
        while (k < n && sums[k].phase != row->phase)
            k++;
        if (k == n) {
            sums = xgrow(sums, &cap, n + 1, sizeof(*sums));
            sums[n] = (struct phase_sum){.phase = row->phase, .end = row->phase_end};
            sums[n].v = xcalloc(d->npairs ? d->npairs : 1, sizeof(*sums[n].v));
            n++;
        } else if (sums[k].end != row->phase_end) {
            sums[k].end = -1; /* pairs disagree on where it ends: "after ..." */
        }
        int kind = ps_kind(row->category);
        for (size_t j = 0; j < row->nper; j++) {
            const struct diff_alloc_pair *pp = &row->per_pair[j];
            int64_t delta = gm_sub(pp->count[1], pp->count[0]);
            int64_t(*v)[3] = sums[k].v[pp->pair];
            if (delta > 0)
                v[kind][PS_ADDED] = gm_add(v[kind][PS_ADDED], delta);
            else
                v[kind][PS_REMOVED] = gm_sub(v[kind][PS_REMOVED], delta);
            v[kind][PS_BYTES] =
                gm_add(v[kind][PS_BYTES], gm_sub(sat_mul_bytes(pp->count[1], row->size),
                                                 sat_mul_bytes(pp->count[0], row->size)));
        }
    }
    /* in the order of the milestones */
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && sums[k].phase < sums[k - 1].phase; k--) {
            struct phase_sum t = sums[k];
            sums[k] = sums[k - 1];
            sums[k - 1] = t;
        }
    *count = n;
    return sums;
}

static bool phase_uniform(const struct diff *d, const struct phase_sum *s)
{
    for (size_t p = 1; p < d->npairs; p++)
        if (memcmp(s->v[p], s->v[0], sizeof(s->v[0])) != 0)
            return false;
    return true;
}

/* The pairs where a phase changed anything, and whether they changed the
 * same; returns how many (*pairs malloc'd). */
static size_t phase_pairs(const struct diff *d, const struct phase_sum *s, uint32_t **pairs,
                          bool *alike)
{
    static const int64_t zero[PS_KINDS][3];
    *pairs = xcalloc(d->npairs ? d->npairs : 1, sizeof(**pairs));
    size_t n = 0;
    *alike = true;
    for (uint32_t p = 0; p < d->npairs; p++) {
        if (memcmp(s->v[p], zero, sizeof(zero)) == 0)
            continue;
        if (n > 0 && memcmp(s->v[p], s->v[(*pairs)[0]], sizeof(zero)) != 0)
            *alike = false;
        (*pairs)[n++] = p;
    }
    return n;
}

/* "+3 allocations (+532.0 MiB)", "+61 -61 allocations (+183.0 KiB)". */
static char *alloc_phrase(const int64_t v[3], const char *what)
{
    char b[DIFF_SIZE_BUF];
    char *counts;
    if (v[PS_ADDED] && v[PS_REMOVED])
        counts = xasprintf("+%" PRId64 " -%" PRId64, v[PS_ADDED], v[PS_REMOVED]);
    else if (v[PS_ADDED])
        counts = xasprintf("+%" PRId64, v[PS_ADDED]);
    else
        counts = xasprintf("-%" PRId64, v[PS_REMOVED]);
    int64_t n = v[PS_ADDED] + v[PS_REMOVED];
    char *out = xasprintf("%s %s%s (%s)", counts, what, n == 1 ? "" : "s",
                          diff_signed_size(b, sizeof(b), v[PS_BYTES]));
    assert(n > 0);
    free(counts);
    return out;
}

/* ---- text ---- */

static void print_run_line(const struct diff *d, int side, FILE *out)
{
    const struct diff_run *r = &d->run[side];
    char *ends;
    size_t other = r->m.nprocs - r->exited - r->killed;
    if (r->exited == r->m.nprocs)
        ends = xasprintf("all exited");
    else
        ends = xasprintf("%zu exited, %zu killed%s", r->exited, r->killed,
                         other ? ", others running or killed" : "");
    char *nccl = r->ncomms == 0 ? xstrdup("no NCCL communicator")
                                : xasprintf("%zu rank%s of %" PRId64 ", %zu NCCL communicator%s",
                                            r->ranks, r->ranks == 1 ? "" : "s", r->world, r->ncomms,
                                            r->ncomms == 1 ? "" : "s");
    emit(out, 2, "%s: %zu process%s (%s), %zu GPU%s, %s", side_name(side), r->m.nprocs,
         r->m.nprocs == 1 ? "" : "es", ends, r->ngpus, r->ngpus == 1 ? "" : "s", nccl);
    free(nccl);
    free(ends);
}

static void print_statements(const struct diff *d, FILE *out)
{
    const struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    if (A->world != B->world)
        emit(out, 2,
             "the runs have different rank counts: A %" PRId64 ", B %" PRId64
             "; GPUs without a partner are compared with nothing",
             A->world, B->world);
    for (int side = 0; side < 2; side++) {
        const struct diff_run *r = &d->run[side];
        uint32_t *unpaired = xcalloc(r->ngpus ? r->ngpus : 1, sizeof(*unpaired));
        size_t n = 0;
        for (size_t g = 0; g < r->ngpus; g++)
            if (r->gpus[g].pair == GM_NONE)
                unpaired[n++] = (uint32_t)g;
        if (n) {
            char *names = xstrdup("");
            for (size_t i = 0; i < n; i++) {
                char *name = diff_gpu_name(d, side, unpaired[i]);
                char *joined = xasprintf("%s%s%s", names, i ? ", " : "", name);
                free(name);
                free(names);
                names = joined;
            }
            emit(out, 2, "only in %s: %zu GPU%s (%s)", side_name(side), n, n == 1 ? "" : "s",
                 names);
            free(names);
        }
        free(unpaired);
        if (r->nmissing) {
            int64_t *ids = xcalloc(r->nmissing, sizeof(*ids));
            memcpy(ids, r->missing, r->nmissing * sizeof(*ids));
            char *list = xstrdup("");
            for (size_t i = 0; i < r->nmissing; i++) {
                char *joined = xasprintf("%s%s%" PRId64, list, i ? ", " : "", ids[i]);
                free(list);
                list = joined;
                if (i == 15 && r->nmissing > 16) {
                    joined = xasprintf("%s, ...", list);
                    free(list);
                    list = joined;
                    break;
                }
            }
            emit(out, 2, "%s has no trace of rank%s %s (its communicator has %" PRId64 " ranks)",
                 side_name(side), r->nmissing == 1 ? "" : "s", list, r->world);
            free(list);
            free(ids);
        }
        for (size_t pi = 0; pi < r->m.nprocs; pi++) {
            const struct gm_process *p = &r->m.procs[pi];
            if (p->exited || !p->has_calls)
                continue;
            char who[64];
            gm_process_name(who, sizeof(who), p);
            const struct diff_milestone *last = last_milestone(r, (uint32_t)pi);
            char *label = last ? diff_ms_label(d, last) : NULL;
            emit(out, 2, "%s: %s %s%s%s%s", side_name(side), who,
                 strcmp(end_word(p), "killed") == 0
                     ? "was killed (no clean exit)"
                     : "did not finish its trace (running or killed)",
                 label ? " after " : "", label ? label : "",
                 label ? ": its later milestones are missing" : "");
            free(label);
        }
    }
}

static void print_first_divergence(const struct diff *d, FILE *out)
{
    char t[DIFF_SIZE_BUF];
    gm_format_size(t, sizeof(t), d->o->threshold);
    if (d->first_div_row < 0) {
        emit(out, 2, "no milestone diverges by more than %s", t);
        return;
    }
    const struct diff_row *row = &d->rows[d->first_div_row];
    uint32_t *pairs;
    size_t n;
    const struct diff_step *shown = diff_first_divergence(d, &pairs, &n);
    const struct diff_pair *sp = &d->pairs[d->first_div_pair];
    const struct diff_milestone *a = diff_step_ms(d, sp, shown, DIFF_A);
    const struct diff_milestone *b = diff_step_ms(d, sp, shown, DIFF_B);
    char *who = diff_pairs_text(d, pairs, n);
    char *changes = live_changes(a->live, b->live);
    char f[DIFF_SIZE_BUF], tr[DIFF_SIZE_BUF], u[DIFF_SIZE_BUF];
    char *pair_name = diff_pair_name(d, d->first_div_pair);
    int64_t dtraced = gm_sub(diff_ms_traced(b), diff_ms_traced(a));
    if (a->measured && b->measured) {
        int64_t dused =
            gm_sub(gm_sub(b->total_bytes, b->free_bytes), gm_sub(a->total_bytes, a->free_bytes));
        emit(out, 2, "first divergence > %s: %s on %s (%s: free %s, traced %s, unexplained %s; %s)",
             t, row->label, who, pair_name,
             diff_signed_size(f, sizeof(f), gm_sub(b->free_bytes, a->free_bytes)),
             diff_signed_size(tr, sizeof(tr), dtraced),
             diff_signed_size(u, sizeof(u), gm_sub(dused, dtraced)), changes);
    } else {
        emit(out, 2, "first divergence > %s: %s on %s (%s: traced %s; %s)", t, row->label, who,
             pair_name, diff_signed_size(tr, sizeof(tr), dtraced), changes);
    }
    free(pair_name);
    free(changes);
    free(who);
    free(pairs);
}

/* Milestones that some pair has on one side only, one line per side. */
static void print_one_sided(const struct diff *d, FILE *out)
{
    for (int side = 0; side < 2; side++) {
        char *list = xstrdup("");
        size_t count = 0;
        for (size_t r = 0; r < d->nrows; r++) {
            const struct diff_row *row = &d->rows[r];
            if (row->present[side] <= row->matched)
                continue;
            char *who = NULL;
            if (row->present[side] - row->matched != d->npairs) {
                uint32_t *pairs = xcalloc(d->npairs, sizeof(*pairs));
                size_t n = 0;
                for (uint32_t p = 0; p < d->npairs; p++)
                    for (size_t s = 0; s < d->pairs[p].nsteps; s++) {
                        const struct diff_step *st = &d->pairs[p].steps[s];
                        if (st->row == r && st->ms[side] >= 0 && st->ms[!side] < 0)
                            pairs[n++] = p;
                    }
                who = diff_pairs_text(d, pairs, n);
                free(pairs);
            }
            char *joined = xasprintf("%s%s%s%s%s%s", list, count ? ", " : "", row->label,
                                     who ? " (" : "", who ? who : "", who ? ")" : "");
            free(who);
            free(list);
            list = joined;
            count++;
        }
        if (count)
            emit(out, 2, "milestones only in %s%s: %s", side_name(side),
                 d->npairs > 1 ? " (every rank unless said)" : "", list);
        free(list);
    }
}

static void print_phases(const struct diff *d, FILE *out)
{
    size_t n;
    struct phase_sum *sums = phase_sums(d, &n);
    for (size_t i = 0; i < n; i++) {
        const struct phase_sum *s = &sums[i];
        bool uniform = phase_uniform(d, s);
        int64_t total[PS_KINDS][3] = {{0}};
        for (size_t p = 0; p < d->npairs; p++)
            for (int k = 0; k < PS_KINDS; k++)
                for (int j = 0; j < 3; j++)
                    total[k][j] = gm_add(total[k][j], s->v[p][k][j]);
        uint32_t *changed;
        bool alike;
        size_t nchanged = phase_pairs(d, s, &changed, &alike);
        const int64_t(*v)[3] = uniform             ? (const int64_t(*)[3])s->v[0]
                               : alike && nchanged ? (const int64_t(*)[3])s->v[changed[0]]
                                                   : (const int64_t(*)[3])total;
        char *who = uniform             ? xstrdup(d->npairs > 1 ? ", per rank" : "")
                    : alike && nchanged ? diff_pairs_text(d, changed, nchanged)
                                        : xstrdup(", all ranks together");
        if (!uniform && alike && nchanged) {
            char *on = xasprintf(" on %s", who);
            free(who);
            who = on;
        }
        free(changed);
        static const char *const what[PS_KINDS] = {"allocation", "IPC mapping",
                                                   "pinned host allocation"};
        static const char *const after[PS_KINDS] = {"", " of peers' memory, not this GPU's", ""};
        char *text = xstrdup("");
        for (int k = 0; k < PS_KINDS; k++) {
            if (!v[k][PS_ADDED] && !v[k][PS_REMOVED])
                continue;
            char *phrase = alloc_phrase(v[k], what[k]);
            char *joined = xasprintf("%s%s%s%s%s", text, *text ? "; " : "",
                                     k == PS_GPU ? "GPU memory " : "", phrase, after[k]);
            free(phrase);
            free(text);
            text = joined;
        }
        char *phase = phase_text(d, s->phase, s->end);
        emit(out, 2, "%s%s: %s", phase, who, text);
        free(who);
        free(phase);
        free(text);
    }
    for (size_t i = 0; i < n; i++)
        free(sums[i].v);
    free(sums);
}

static void budget_summary(const struct diff *d, FILE *out)
{
    const struct budget_analysis *a = &d->run[DIFF_A].budget, *b = &d->run[DIFF_B].budget;
    const struct budget_options *oa = &d->run[DIFF_A].budget_options,
                                *ob = &d->run[DIFF_B].budget_options;
    bool sglang = oa->framework == BUDGET_SGLANG;
    char *param =
        sglang ? (oa->fraction == ob->fraction ? xasprintf("F %g", oa->fraction)
                                               : xasprintf("F %g | %g", oa->fraction, ob->fraction))
               : (oa->util == ob->util ? xasprintf("U %g", oa->util)
                                       : xasprintf("U %g | %g", oa->util, ob->util));
    if (a->ngroups == 0 || b->ngroups == 0 || !a->groups[0].analysed || !b->groups[0].analysed) {
        emit(out, 2, "budget (%s, %s): %s", sglang ? "sglang" : "vllm", param,
             "not comparable: a run has no rank whose budget could be replayed (details below)");
        free(param);
        return;
    }
    const struct budget_job *x = &a->groups[0], *y = &b->groups[0];
    char delta[DIFF_SIZE_BUF];
    if (sglang)
        emit(out, 2, "budget (sglang, %s): rest %.6f -> %.6f GiB (%s); A: %s; B: %s", param,
             x->rest, y->rest,
             diff_signed_size(delta, sizeof(delta),
                              (int64_t)llround((y->rest - x->rest) * BUDGET_GIB)),
             x->verdict, y->verdict);
    else
        emit(out, 2, "budget (vllm, %s): available KV %s -> %s (%s); A: %s; B: %s", param,
             gm_format_size((char[DIFF_SIZE_BUF]){0}, DIFF_SIZE_BUF, x->available),
             gm_format_size((char[DIFF_SIZE_BUF]){0}, DIFF_SIZE_BUF, y->available),
             diff_signed_size(delta, sizeof(delta), gm_sub(y->available, x->available)), x->verdict,
             y->verdict);
    free(param);
}

static char *words_text(char **words, size_t n)
{
    char *out = xstrdup("");
    for (size_t i = 0; i < n; i++) {
        char *joined = xasprintf("%s%s%s", out, i ? " " : "", words[i]);
        free(out);
        out = joined;
    }
    return out;
}

static void print_summary(const struct diff *d, FILE *out)
{
    fputs("\nSummary\n", out);
    if (d->differences == 0) {
        char t[DIFF_SIZE_BUF];
        emit(out, 2,
             "the runs match: the same GPUs, milestones, memory (within %s), allocations, IPC, "
             "communicators, collectives%s and configuration",
             gm_format_size(t, sizeof(t), d->o->threshold), d->o->budget ? ", budget" : "");
        return;
    }
    char *kinds = xstrdup("");
    for (int k = 0; k < DIFF_D_COUNT; k++)
        if (d->differences & (1u << k)) {
            char *joined = xasprintf("%s%s%s", kinds, *kinds ? ", " : "", diff_difference_keys[k]);
            free(kinds);
            kinds = joined;
        }
    emit(out, 2, "the runs differ: %s", kinds);
    free(kinds);
    print_statements(d, out);
    print_first_divergence(d, out);
    print_one_sided(d, out);
    print_phases(d, out);
    if (d->differences & (1u << DIFF_D_IPC)) {
        const struct diff_ipc *a = &d->run[DIFF_A].ipc, *b = &d->run[DIFF_B].ipc;
        emit(out, 2,
             "IPC: A exported %zu buffer%s, mapped %" PRId64 " time%s; B %zu, mapped %" PRId64
             " time%s",
             a->nbuffers, a->nbuffers == 1 ? "" : "s", a->opens, a->opens == 1 ? "" : "s",
             b->nbuffers, b->opens, b->opens == 1 ? "" : "s");
    }
    if (d->differences & ((1u << DIFF_D_COLLECTIVES) | (1u << DIFF_D_COMMUNICATORS))) {
        int64_t calls[2] = {0}, captured[2] = {0};
        for (int side = 0; side < 2; side++)
            for (size_t c = 0; c < d->run[side].ncomms; c++)
                for (size_t k = 0; k < d->run[side].comms[c].nops; k++) {
                    calls[side] = gm_add(calls[side], d->run[side].comms[c].ops[k].calls);
                    captured[side] = gm_add(captured[side], d->run[side].comms[c].ops[k].captured);
                }
        emit(out, 2,
             "NCCL: A %zu communicator%s, %" PRId64 " collective calls (%" PRId64
             " captured); B %zu, %" PRId64 " (%" PRId64 " captured)",
             d->run[DIFF_A].ncomms, d->run[DIFF_A].ncomms == 1 ? "" : "s", calls[0], captured[0],
             d->run[DIFF_B].ncomms, calls[1], captured[1]);
    }
    if (d->o->budget)
        budget_summary(d, out);
    if (d->differences & (1u << DIFF_D_CMDLINE)) {
        char *added = words_text(d->cmd_added, d->ncmd_added);
        char *removed = words_text(d->cmd_removed, d->ncmd_removed);
        emit(out, 2, "command line: %s%s%s%s%s", d->ncmd_added ? "B adds " : "", added,
             d->ncmd_added && d->ncmd_removed ? "; " : "", d->ncmd_removed ? "B drops " : "",
             removed);
        free(added);
        free(removed);
    }
    if (d->nenv_changes) {
        char *names = xstrdup("");
        for (size_t i = 0; i < d->nenv_changes; i++) {
            char *joined = xasprintf("%s%s%s", names, i ? ", " : "", d->env_changes[i].name);
            free(names);
            names = joined;
        }
        emit(out, 2, "environment: %zu variable%s differ%s: %s", d->nenv_changes,
             d->nenv_changes == 1 ? "" : "s", d->nenv_changes == 1 ? "s" : "", names);
        free(names);
    }
}

/* One pair's milestones side by side. */
static void print_milestones(const struct diff *d, FILE *out)
{
    if (d->npairs == 0) {
        fputs("\nMilestones: no GPU of A has a partner in B\n", out);
        return;
    }
    uint32_t shown = shown_pair(d);
    const struct diff_pair *p = &d->pairs[shown];
    char *name = diff_pair_name(d, shown);
    fprintf(out,
            "\nMilestones of %s, aligned (traced: live GPU memory after each; free: at "
            "cudaMemGetInfo)\n",
            name);
    char **labels = xcalloc(p->nsteps ? p->nsteps : 1, sizeof(*labels));
    size_t label_w = strlen("milestone");
    for (size_t s = 0; s < p->nsteps; s++) {
        const struct diff_step *st = &p->steps[s];
        const struct diff_milestone *a = diff_step_ms(d, p, st, DIFF_A);
        const struct diff_milestone *b = diff_step_ms(d, p, st, DIFF_B);
        const char *mark =
            a && b ? (diff_step_diverges(d, p, st) ? "! " : "  ") : (a ? "A " : "B ");
        char *extra = NULL;
        if (a && b && a->kind == DIFF_MS_COMM_INIT && a->detail != b->detail)
            extra = xasprintf(" (%" PRId64 " | %" PRId64 " ranks)", a->detail, b->detail);
        else if ((a ? a : b)->kind == DIFF_MS_COMM_INIT)
            extra = xasprintf(" (%" PRId64 " ranks)", (a ? a : b)->detail);
        else if ((a ? a : b)->kind == DIFF_MS_CAPTURE_END)
            extra = a && b && a->detail != b->detail
                        ? xasprintf(", %" PRId64 " | %" PRId64 " graphs", a->detail, b->detail)
                        : xasprintf(", %" PRId64 " graph%s", (a ? a : b)->detail,
                                    (a ? a : b)->detail == 1 ? "" : "s");
        else if ((a ? a : b)->kind == DIFF_MS_END)
            extra = a && b && a->detail != b->detail
                        ? xasprintf(": %s | %s", a->detail ? "exited" : "killed",
                                    b->detail ? "exited" : "killed")
                        : xasprintf(": %s", (a ? a : b)->detail ? "exited" : "killed");
        labels[s] = xasprintf("%s%s%s", mark, d->rows[st->row].label, extra ? extra : "");
        free(extra);
        size_t w = text_width(labels[s]);
        if (w > label_w)
            label_w = w;
    }
    if (label_w > LABEL_MAX)
        label_w = LABEL_MAX;
    const int nw = 10;
    fprintf(out, "  %-*s  %*s  %*s  %*s  %*s  %*s  %*s\n", (int)label_w, "milestone", nw,
            "traced A", nw, "traced B", nw + 1, "delta", nw, "free A", nw, "free B", nw + 1,
            "delta");
    for (size_t s = 0; s < p->nsteps; s++) {
        const struct diff_step *st = &p->steps[s];
        const struct diff_milestone *a = diff_step_ms(d, p, st, DIFF_A);
        const struct diff_milestone *b = diff_step_ms(d, p, st, DIFF_B);
        char ta[DIFF_SIZE_BUF] = "-", tb[DIFF_SIZE_BUF] = "-", td[DIFF_SIZE_BUF] = "";
        char fa[DIFF_SIZE_BUF] = "", fb[DIFF_SIZE_BUF] = "", fd[DIFF_SIZE_BUF] = "";
        if (a)
            gm_format_size(ta, sizeof(ta), diff_ms_traced(a));
        if (b)
            gm_format_size(tb, sizeof(tb), diff_ms_traced(b));
        if (a && b)
            diff_signed_size(td, sizeof(td), gm_sub(diff_ms_traced(b), diff_ms_traced(a)));
        if (a && a->measured)
            gm_format_size(fa, sizeof(fa), a->free_bytes);
        if (b && b->measured)
            gm_format_size(fb, sizeof(fb), b->free_bytes);
        if (a && b && a->measured && b->measured)
            diff_signed_size(fd, sizeof(fd), gm_sub(b->free_bytes, a->free_bytes));
        fputs("  ", out);
        text_print(out, labels[s], label_w, label_w);
        char line[256];
        snprintf(line, sizeof(line), "  %*s  %*s  %*s  %*s  %*s  %*s", nw, ta, nw, tb, nw + 1, td,
                 nw, fa, nw, fb, nw + 1, fd);
        size_t len = strlen(line);
        while (len > 0 && line[len - 1] == ' ')
            len--;
        fprintf(out, "%.*s\n", (int)len, line);
        if (a && b) {
            char *changes = live_changes(a->live, b->live);
            if (*changes)
                emit(out, 6, "%s", changes);
            free(changes);
        }
    }
    fputs("  !: diverges by more than the threshold; A, B: only in that run\n", out);
    for (size_t s = 0; s < p->nsteps; s++)
        free(labels[s]);
    free(labels);

    /* The other pairs, compared with the one shown. */
    if (d->npairs > 1) {
        /* Pairs grouped by how they first differ from the one shown. */
        struct row_sig *ref = pair_sigs(d, shown);
        char **what = xcalloc(d->npairs, sizeof(*what));
        size_t same = 0;
        for (uint32_t q = 0; q < d->npairs; q++) {
            if (q == shown)
                continue;
            struct row_sig *mine = pair_sigs(d, q);
            size_t r = 0;
            while (r < d->nrows && sig_equal(&mine[r], &ref[r]))
                r++;
            if (r == d->nrows) {
                same++;
            } else {
                char *how = sig_difference(&mine[r], &ref[r]);
                what[q] = xasprintf("first at %s: %s", d->rows[r].label, how);
                free(how);
            }
            free(mine);
        }
        size_t lines = 0, unlisted = 0;
        uint32_t *group = xcalloc(d->npairs, sizeof(*group));
        for (uint32_t q = 0; q < d->npairs; q++) {
            if (!what[q])
                continue;
            size_t n = 0;
            for (uint32_t k = q; k < d->npairs; k++)
                if (what[k] && strcmp(what[k], what[q]) == 0)
                    group[n++] = k;
            if (lines++ < TEXT_PAIR_LINES) {
                char *who = diff_pairs_text(d, group, n);
                emit(out, 2, "%s differ%s from %s %s", who, n == 1 ? "s" : "", name, what[q]);
                free(who);
            } else {
                unlisted += n;
            }
            for (size_t i = n; i-- > 1;) {
                free(what[group[i]]);
                what[group[i]] = NULL;
            }
            free(what[q]);
            what[q] = NULL;
        }
        free(group);
        free(what);
        if (unlisted)
            emit(out, 2, "... and %zu more pairs that differ from %s (--json has every pair)",
                 unlisted, name);
        if (same)
            emit(out, 2, "%s%zu other pair%s: the same deltas at every milestone",
                 same == d->npairs - 1 ? "the " : "", same, same == 1 ? "" : "s");
        free(ref);
    }
    free(name);
}

/*
 * A call site as the allocations table shows it: without its module when
 * that is the issuing module the row names anyway, and a function GCC
 * cloned (f.constprop.0, f.isra.0, f.part.0, f.cold) under its own name.
 */
static char *site_text(const char *site, const char *module)
{
    char *s = xstrdup(site);
    size_t n = strlen(s), m = strlen(module);
    if (m && n > m + 3 && s[n - 1] == ')' && strncmp(s + n - 1 - m, module, m) == 0 &&
        strncmp(s + n - 3 - m, " (", 2) == 0)
        s[n - 3 - m] = '\0';
    static const char *const clones[] = {".constprop.", ".isra.", ".part.", ".cold"};
    for (size_t i = 0; i < sizeof(clones) / sizeof(clones[0]); i++) {
        char *at = strstr(s, clones[i]);
        if (!at)
            continue;
        char *end = at + 1;
        while (*end && *end != ' ' && *end != '(')
            end++;
        memmove(at, end, strlen(end) + 1);
    }
    return s;
}

static void print_allocations(const struct diff *d, FILE *out)
{
    fprintf(out, "\nAllocations that differ (B - A per rank where the ranks agree; this GPU's "
                 "memory first, largest first;\n  phase: made after that milestone, before the "
                 "next both runs share)\n");
    if (d->nallocs == 0) {
        fputs("  none: every group (phase x api x module x size) has the same count in both "
              "runs\n",
              out);
        return;
    }
    /* Where traces carry stacks, the call site takes the issuing module's
     * column (naming the module when it is another); allocations without
     * one keep the module. */
    bool sites = false;
    for (size_t i = 0; i < d->nallocs; i++)
        sites |= diff_string(d, d->allocs[i].site)[0] != '\0';
    /* clang-format off */
    const struct table_column cols[] = {
        {"change", TABLE_RIGHT, 0},
        {"size", TABLE_RIGHT, 0},
        {"api", TABLE_LEFT, 0},
        {sites ? "call site" : "issued by", TABLE_LEFT, 0},
        {"category", TABLE_LEFT, 0},
        {"phase", TABLE_LEFT, 0},
        {"bytes", TABLE_RIGHT, 0},
    };
    /* clang-format on */
    struct table *t = table_new(cols, sizeof(cols) / sizeof(cols[0]));
    char buf[DIFF_SIZE_BUF];
    for (size_t i = 0; i < d->nallocs && i < TEXT_ALLOC_ROWS; i++) {
        const struct diff_alloc_row *row = &d->allocs[i];
        bool uniform = row->dmin == row->dmax;
        char *change = count_range(row->dmin, row->dmax);
        table_cell(t, change);
        free(change);
        table_cell(t, diff_exact_size(buf, sizeof(buf), row->size));
        table_cell(t, diff_string(d, row->api));
        const char *module = diff_string(d, row->module);
        const char *site = diff_string(d, row->site);
        if (*site) {
            char *shown = site_text(site, module);
            table_cell(t, shown);
            free(shown);
        } else {
            table_cell(t, *module ? module : "(unknown)");
        }
        table_cell(t, category_key(row->category));
        char *phase = row->phase >= 0 ? xasprintf("after %s", d->rows[row->phase].label)
                                      : phase_text(d, row->phase, row->phase_end);
        table_cell(t, phase);
        free(phase);
        int64_t bytes =
            uniform ? sat_mul_bytes(row->dmin, row->size) : gm_sub(row->bytes[1], row->bytes[0]);
        char *cell = xasprintf("%s%s", diff_signed_size(buf, sizeof(buf), bytes),
                               uniform || d->npairs < 2 ? "" : " (all)");
        table_cell(t, cell);
        free(cell);
    }
    table_print(t, out, 2);
    table_free(t);
    if (d->nallocs > TEXT_ALLOC_ROWS)
        emit(out, 2, "... and %zu more groups (--json lists every one)",
             d->nallocs - TEXT_ALLOC_ROWS);
    bool unpaired = false;
    for (int side = 0; side < 2; side++)
        for (size_t g = 0; g < d->run[side].ngpus; g++)
            unpaired |= d->run[side].gpus[g].pair == GM_NONE;
    if (unpaired)
        emit(out, 2, "(GPUs without a partner are not compared here)");
}

static void print_ipc_side(const struct diff *d, int side, FILE *out)
{
    const struct diff_ipc *ipc = &d->run[side].ipc;
    if (ipc->nbuffers == 0 && ipc->opens == 0) {
        emit(out, 2, "%s: nothing exported, no IPC mappings", side_name(side));
        return;
    }
    emit(out, 2, "%s: %zu buffer%s exported, %" PRId64 " IPC mapping%s made%s", side_name(side),
         ipc->nbuffers, ipc->nbuffers == 1 ? "" : "s", ipc->opens, ipc->opens == 1 ? "" : "s",
         ipc->foreign_opens > 0 ? " (some of handles no trace of this run exported)" : "");
    if (ipc->ngroups == 0)
        return;
    static const struct table_column cols[] = {
        {"exported by", TABLE_LEFT, 0}, {"made with", TABLE_LEFT, 0}, {"issued by", TABLE_LEFT, 0},
        {"size", TABLE_RIGHT, 0},       {"buffers", TABLE_RIGHT, 0},  {"opened by", TABLE_LEFT, 0},
        {"mappings", TABLE_RIGHT, 0},
    };
    struct table *t = table_new(cols, sizeof(cols) / sizeof(cols[0]));
    char buf[DIFF_SIZE_BUF];
    for (size_t i = 0; i < ipc->ngroups; i++) {
        const struct diff_ipc_group *g = &ipc->groups[i];
        table_cell(t, g->exporters);
        table_cell(t, diff_string(d, g->api));
        const char *module = diff_string(d, g->module);
        table_cell(t, *module ? module : "(unknown)");
        table_cell(t, diff_exact_size(buf, sizeof(buf), g->size));
        table_cellf(t, "%" PRId64, g->buffers);
        table_cell(t, g->openers);
        table_cellf(t, "%" PRId64, g->opens);
    }
    table_print(t, out, 4);
    table_free(t);
}

static void print_ipc(const struct diff *d, FILE *out)
{
    fputs("\nIPC lineage (buffers exported with cudaIpcGetMemHandle and who mapped them)\n", out);
    print_ipc_side(d, DIFF_A, out);
    if (d->differences & (1u << DIFF_D_IPC))
        print_ipc_side(d, DIFF_B, out);
    else
        emit(out, 2, "B: the same");
}

static char *nccl_memory_text(const struct diff_comm *c)
{
    char a[DIFF_SIZE_BUF], b[DIFF_SIZE_BUF];
    if (c->members > 1 && c->nccl_min == c->nccl_max)
        return xasprintf("%s (%s/rank)", gm_format_size(a, sizeof(a), c->nccl_bytes),
                         gm_format_size(b, sizeof(b), c->nccl_min));
    return xstrdup(gm_format_size(a, sizeof(a), c->nccl_bytes));
}

static void print_comms(const struct diff *d, FILE *out)
{
    const struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    fputs("\nCommunicators and collectives (summed over traced ranks; NCCL memory: made from its "
          "init until the next)\n",
          out);
    if (A->ncomms == 0 && B->ncomms == 0) {
        emit(out, 2, "no NCCL communicator in either run%s",
             A->nccl_recorded || B->nccl_recorded ? "" : " (traces of a format without NCCL)");
        return;
    }
    /* A's communicators in order with their partners, then B's alone. */
    size_t n = A->ncomms;
    for (size_t k = 0; k < B->ncomms; k++)
        n += B->comms[k].match == GM_NONE;
    const struct diff_comm **pa = xcalloc(n, sizeof(*pa)), **pb = xcalloc(n, sizeof(*pb));
    size_t m = 0;
    for (size_t i = 0; i < A->ncomms; i++, m++) {
        pa[m] = &A->comms[i];
        pb[m] = A->comms[i].match == GM_NONE ? NULL : &B->comms[A->comms[i].match];
    }
    for (size_t k = 0; k < B->ncomms; k++)
        if (B->comms[k].match == GM_NONE)
            pb[m++] = &B->comms[k];
    assert(m == n);
    static const struct table_column ccols[] = {
        {"comm", TABLE_RIGHT, 0},          {"ranks A", TABLE_RIGHT, 0},
        {"ranks B", TABLE_RIGHT, 0},       {"NCCL memory A", TABLE_RIGHT, 0},
        {"NCCL memory B", TABLE_RIGHT, 0}, {"delta", TABLE_RIGHT, 0},
    };
    struct table *t = table_new(ccols, sizeof(ccols) / sizeof(ccols[0]));
    char buf[DIFF_SIZE_BUF];
    for (size_t i = 0; i < n; i++) {
        const struct diff_comm *a = pa[i], *b = pb[i];
        table_cellf(t, "%" PRId64, (a ? a : b)->ordinal);
        for (int side = 0; side < 2; side++) {
            const struct diff_comm *c = side ? b : a;
            if (c)
                table_cellf(t, "%zu/%" PRId64, c->members, c->nranks);
            else
                table_cell(t, NULL);
        }
        for (int side = 0; side < 2; side++) {
            const struct diff_comm *c = side ? b : a;
            char *text = c ? nccl_memory_text(c) : NULL;
            table_cell(t, text);
            free(text);
        }
        table_cell(t, diff_signed_size(buf, sizeof(buf),
                                       gm_sub(b ? b->nccl_bytes : 0, a ? a->nccl_bytes : 0)));
    }
    table_print(t, out, 2);
    table_free(t);
    if (A->nccl_outside_bytes || B->nccl_outside_bytes)
        emit(out, 2, "NCCL memory made before any communicator: A %s, B %s",
             gm_format_size((char[DIFF_SIZE_BUF]){0}, DIFF_SIZE_BUF, A->nccl_outside_bytes),
             gm_format_size((char[DIFF_SIZE_BUF]){0}, DIFF_SIZE_BUF, B->nccl_outside_bytes));

    static const struct table_column ocols[] = {
        {"comm", TABLE_RIGHT, 0},    {"op", TABLE_LEFT, 0},       {"calls A", TABLE_RIGHT, 0},
        {"calls B", TABLE_RIGHT, 0}, {"bytes A", TABLE_RIGHT, 0}, {"bytes B", TABLE_RIGHT, 0},
        {"graph A", TABLE_RIGHT, 0}, {"graph B", TABLE_RIGHT, 0}, {"eager A", TABLE_RIGHT, 0},
        {"eager B", TABLE_RIGHT, 0}, {"", TABLE_LEFT, 0},
    };
    t = table_new(ocols, sizeof(ocols) / sizeof(ocols[0]));
    for (size_t i = 0; i < n; i++) {
        const struct diff_comm *c[2] = {pa[i], pb[i]};
        /* the union of their ops, in name order (both lists are sorted) */
        size_t ia = 0, ib = 0;
        size_t na = c[0] ? c[0]->nops : 0, nb = c[1] ? c[1]->nops : 0;
        while (ia < na || ib < nb) {
            int cmp = ia == na   ? 1
                      : ib == nb ? -1
                                 : strcmp(diff_string(d, c[0]->ops[ia].op),
                                          diff_string(d, c[1]->ops[ib].op));
            const struct diff_op *o[2] = {cmp <= 0 ? &c[0]->ops[ia] : NULL,
                                          cmp >= 0 ? &c[1]->ops[ib] : NULL};
            ia += cmp <= 0;
            ib += cmp >= 0;
            table_cellf(t, "%" PRId64, (c[0] ? c[0] : c[1])->ordinal);
            table_cell(t, diff_string(d, (o[0] ? o[0] : o[1])->op));
            for (int side = 0; side < 2; side++)
                table_cellf(t, "%" PRId64, o[side] ? o[side]->calls : 0);
            for (int side = 0; side < 2; side++)
                table_cell(
                    t, format_bytes(buf, sizeof(buf), (uint64_t)(o[side] ? o[side]->bytes : 0)));
            for (int side = 0; side < 2; side++)
                table_cellf(t, "%" PRId64, o[side] ? o[side]->captured : 0);
            for (int side = 0; side < 2; side++)
                table_cellf(t, "%" PRId64, o[side] ? gm_sub(o[side]->calls, o[side]->captured) : 0);
            bool same = o[0] && o[1] && o[0]->calls == o[1]->calls && o[0]->bytes == o[1]->bytes &&
                        o[0]->captured == o[1]->captured && o[0]->failed == o[1]->failed;
            table_cell(t, same ? "" : "!");
        }
    }
    if (table_rows(t) > 0)
        table_print(t, out, 2);
    else
        emit(out, 2, "no collective calls in either run");
    table_free(t);
    for (int side = 0; side < 2; side++)
        if (d->run[side].unattributed_calls)
            emit(out, 2,
                 "%s: %" PRId64 " collective calls on communicators whose init the trace "
                 "lacks",
                 side_name(side), d->run[side].unattributed_calls);
    free(pa);
    free(pb);
}

/* ---- budget ---- */

struct effect {
    enum budget_part part;
    int category;
    int64_t bytes[2];
    double cost[2];
};

/* The parts of rest on the binding rank of each side, joined by part and category. */
static struct effect *effects(const struct budget_rank *a, const struct budget_rank *b, size_t *n)
{
    size_t cap = a->nrows + b->nrows;
    struct effect *out = xcalloc(cap ? cap : 1, sizeof(*out));
    size_t count = 0;
    const struct budget_rank *rk[2] = {a, b};
    for (int side = 0; side < 2; side++)
        for (size_t i = 0; i < rk[side]->nrows; i++) {
            const struct budget_row *row = &rk[side]->rows[i];
            size_t k = 0;
            while (k < count && !(out[k].part == row->part && out[k].category == row->category))
                k++;
            if (k == count) {
                assert(count < cap);
                out[count++] = (struct effect){.part = row->part, .category = row->category};
            }
            out[k].bytes[side] = row->bytes;
            out[k].cost[side] = row->cost_gib;
        }
    /* largest effect first */
    for (size_t i = 1; i < count; i++)
        for (size_t k = i; k > 0; k--) {
            double x = fabs(out[k].cost[1] - out[k].cost[0]);
            double y = fabs(out[k - 1].cost[1] - out[k - 1].cost[0]);
            if (x <= y)
                break;
            struct effect t = out[k];
            out[k] = out[k - 1];
            out[k - 1] = t;
        }
    *n = count;
    return out;
}

static char *gib_delta(double gib)
{
    char buf[DIFF_SIZE_BUF];
    return xstrdup(diff_signed_size(buf, sizeof(buf), (int64_t)llround(gib * BUDGET_GIB)));
}

static void print_sglang_job(const struct diff *d, const struct budget_job *x,
                             const struct budget_job *y, FILE *out)
{
    static const struct table_column cols[] = {
        {"", TABLE_LEFT, 0},
        {"A", TABLE_RIGHT, 0},
        {"B", TABLE_RIGHT, 0},
        {"B - A", TABLE_RIGHT, 0},
    };
    struct table *t = table_new(cols, sizeof(cols) / sizeof(cols[0]));
    char *delta;
    table_cell(t, "pre (MIN free)");
    table_cellf(t, "%.6f GiB", x->pre_gib);
    table_cellf(t, "%.6f GiB", y->pre_gib);
    delta = gib_delta(y->pre_gib - x->pre_gib);
    table_cell(t, delta);
    free(delta);
    table_cell(t, "post (MIN free)");
    table_cellf(t, "%.6f GiB", x->post_gib);
    table_cellf(t, "%.6f GiB", y->post_gib);
    delta = gib_delta(y->post_gib - x->post_gib);
    table_cell(t, delta);
    free(delta);
    table_cell(t, "rest");
    table_cellf(t, "%.6f GiB", x->rest);
    table_cellf(t, "%.6f GiB", y->rest);
    delta = gib_delta(y->rest - x->rest);
    table_cell(t, delta);
    free(delta);
    table_cell(t, "tokens");
    table_cellf(t, "%" PRId64, x->tokens);
    table_cellf(t, "%" PRId64, y->tokens);
    delta = signed_count(gm_sub(y->tokens, x->tokens));
    table_cell(t, delta);
    free(delta);
    table_cell(t, "smallest F that fits");
    if (x->has_f_min)
        table_cellf(t, "%.3f", x->f_min_rounded);
    else
        table_cell(t, "none");
    if (y->has_f_min)
        table_cellf(t, "%.3f", y->f_min_rounded);
    else
        table_cell(t, "none");
    if (x->has_f_min && y->has_f_min)
        table_cellf(t, "%+.3f", y->f_min_rounded - x->f_min_rounded);
    else
        table_cell(t, NULL);
    table_print(t, out, 2);
    table_free(t);
    emit(out, 2, "A: %s", x->verdict);
    emit(out, 2, "B: %s", y->verdict);

    const struct budget_rank *ra = &x->ranks[x->post_rank], *rb = &y->ranks[y->post_rank];
    size_t n;
    struct effect *e = effects(ra, rb, &n);
    char who[2][64];
    gm_process_name(who[0], sizeof(who[0]), &d->run[DIFF_A].m.procs[ra->proc]);
    gm_process_name(who[1], sizeof(who[1]), &d->run[DIFF_B].m.procs[rb->proc]);
    emit(out, 2, "what moved rest (on the rank with the smallest post: A %s, B %s):", who[0],
         who[1]);
    static const struct table_column ecols[] = {
        {"part", TABLE_LEFT, 0}, {"when", TABLE_LEFT, 0},   {"A", TABLE_RIGHT, 0},
        {"B", TABLE_RIGHT, 0},   {"B - A", TABLE_RIGHT, 0}, {"effect on rest", TABLE_RIGHT, 0},
    };
    t = table_new(ecols, sizeof(ecols) / sizeof(ecols[0]));
    char buf[DIFF_SIZE_BUF];
    double explained = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].bytes[0] == e[i].bytes[1])
            continue;
        struct budget_row row = {.part = e[i].part, .category = e[i].category};
        char *label = budget_part_label(&row);
        table_cell(t, label);
        free(label);
        table_cell(t, budget_part_when(e[i].part));
        table_cell(t, gm_format_size(buf, sizeof(buf), e[i].bytes[0]));
        table_cell(t, gm_format_size(buf, sizeof(buf), e[i].bytes[1]));
        table_cell(t, diff_signed_size(buf, sizeof(buf), gm_sub(e[i].bytes[1], e[i].bytes[0])));
        double effect = -(e[i].cost[1] - e[i].cost[0]);
        explained += effect;
        delta = gib_delta(effect);
        table_cell(t, delta);
        free(delta);
    }
    double other = (y->rest - x->rest) - explained;
    if (fabs(other) * BUDGET_GIB >= 64 * 1024) {
        table_cell(t, "float32, MIN over ranks and the rest");
        for (int i = 0; i < 4; i++)
            table_cell(t, "");
        delta = gib_delta(other);
        table_cell(t, delta);
        free(delta);
    }
    if (table_rows(t) > 0)
        table_print(t, out, 4);
    else
        emit(out, 4, "no part of rest changed");
    table_free(t);
    free(e);
}

static void print_vllm_job(const struct diff *d, const struct budget_job *x,
                           const struct budget_job *y, FILE *out)
{
    const struct budget_rank *ra = &x->ranks[x->available_rank], *rb = &y->ranks[y->available_rank];
    char who[2][64];
    gm_process_name(who[0], sizeof(who[0]), &d->run[DIFF_A].m.procs[ra->proc]);
    gm_process_name(who[1], sizeof(who[1]), &d->run[DIFF_B].m.procs[rb->proc]);
    emit(out, 2, "on the rank with the least available (A %s, B %s):", who[0], who[1]);
    static const struct table_column cols[] = {
        {"", TABLE_LEFT, 0},
        {"A", TABLE_RIGHT, 0},
        {"B", TABLE_RIGHT, 0},
        {"B - A", TABLE_RIGHT, 0},
    };
    struct table *t = table_new(cols, sizeof(cols) / sizeof(cols[0]));
    const struct {
        const char *name;
        int64_t a, b;
    } rows[] = {
        {"requested (total x U)", ra->requested, rb->requested},
        {"weights", ra->weights, rb->weights},
        {"activation peak", ra->peak_activation, rb->peak_activation},
        {"non-torch increase", ra->non_torch_increase, rb->non_torch_increase},
        {"available for the KV cache", ra->available, rb->available},
    };
    char buf[DIFF_SIZE_BUF];
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        table_cell(t, rows[i].name);
        table_cell(t, gm_format_size(buf, sizeof(buf), rows[i].a));
        table_cell(t, gm_format_size(buf, sizeof(buf), rows[i].b));
        table_cell(t, diff_signed_size(buf, sizeof(buf), gm_sub(rows[i].b, rows[i].a)));
    }
    table_print(t, out, 4);
    table_free(t);
    emit(out, 2, "A: %s", x->verdict);
    emit(out, 2, "B: %s", y->verdict);
}

static void print_budget(const struct diff *d, FILE *out)
{
    const struct budget_options *oa = &d->run[DIFF_A].budget_options,
                                *ob = &d->run[DIFF_B].budget_options;
    bool sglang = oa->framework == BUDGET_SGLANG;
    char cell[UNITS_BUF];
    bool same = sglang ? oa->fraction == ob->fraction &&
                             strcmp(oa->fraction_source, ob->fraction_source) == 0
                       : oa->util == ob->util && strcmp(oa->util_source, ob->util_source) == 0;
    const char *flag = sglang ? "--mem-fraction-static" : "--gpu-memory-utilization";
    double va = sglang ? oa->fraction : oa->util, vb = sglang ? ob->fraction : ob->util;
    const char *sa = sglang ? oa->fraction_source : oa->util_source;
    const char *sb = sglang ? ob->fraction_source : ob->util_source;
    /* where the value came from: an option says nothing more */
    char from_a[64] = "", from_b[64] = "";
    if (strcmp(sa, "option") != 0)
        snprintf(from_a, sizeof(from_a), " (%s)",
                 strcmp(sa, "cmdline") == 0 ? "from the command line" : "the default");
    if (strcmp(sb, "option") != 0)
        snprintf(from_b, sizeof(from_b), " (%s)",
                 strcmp(sb, "cmdline") == 0 ? "from the command line" : "the default");
    if (same)
        fprintf(out, "\nBudget (%s, %s %g%s, cell size %s)\n", sglang ? "sglang" : "vllm", flag, va,
                from_a, format_bytes(cell, sizeof(cell), (uint64_t)oa->cell_size));
    else
        fprintf(out, "\nBudget (%s, %s: A %g%s, B %g%s, cell size %s)\n",
                sglang ? "sglang" : "vllm", flag, va, from_a, vb, from_b,
                format_bytes(cell, sizeof(cell), (uint64_t)oa->cell_size));
    const struct budget_analysis *a = &d->run[DIFF_A].budget, *b = &d->run[DIFF_B].budget;
    size_t jobs = a->ngroups > b->ngroups ? a->ngroups : b->ngroups;
    if (a->ngroups != b->ngroups)
        emit(out, 2, "A has %zu job%s, B %zu: jobs are compared in order", a->ngroups,
             a->ngroups == 1 ? "" : "s", b->ngroups);
    if (jobs == 0)
        emit(out, 2, "no rank of either run made a weight burst with measurements around it");
    for (size_t j = 0; j < jobs; j++) {
        const struct budget_job *x = j < a->ngroups ? &a->groups[j] : NULL;
        const struct budget_job *y = j < b->ngroups ? &b->groups[j] : NULL;
        emit(out, 2, "job %zu: A %zu of %zu traced rank%s analysed, B %zu of %zu", j + 1,
             x ? x->analysed : 0, x ? x->nranks : 0, x && x->nranks == 1 ? "" : "s",
             y ? y->analysed : 0, y ? y->nranks : 0);
        if (!x || !y || !x->analysed || !y->analysed) {
            emit(out, 2, "not comparable: %s has no analysed rank in this job (see cutrace budget)",
                 !x || !x->analysed ? "A" : "B");
            continue;
        }
        if (sglang)
            print_sglang_job(d, x, y, out);
        else
            print_vllm_job(d, x, y, out);
    }
}

static void print_config(const struct diff *d, FILE *out)
{
    const struct diff_run *A = &d->run[DIFF_A];
    fputs("\nConfiguration\n", out);
    if (!(d->differences & (1u << DIFF_D_CMDLINE))) {
        emit(out, 2, "command line%s: the same in both runs", A->ncmdlines == 1 ? "" : "s");
        if (A->ncmdlines > 0)
            emit(out, 4, "%s", A->cmdlines[0].text[0] ? A->cmdlines[0].text : "(not recorded)");
    } else {
        for (int side = 0; side < 2; side++) {
            const struct diff_run *r = &d->run[side];
            if (r->ncmdlines == 0)
                continue;
            emit(out, 2, "%s (%zu process%s): %s", side_name(side), r->cmdlines[0].count,
                 r->cmdlines[0].count == 1 ? "" : "es",
                 r->cmdlines[0].text[0] ? r->cmdlines[0].text : "(not recorded)");
            if (r->ncmdlines > 1)
                emit(out, 4, "and %zu other command line%s (--json lists them)", r->ncmdlines - 1,
                     r->ncmdlines == 2 ? "" : "s");
        }
        char *added = words_text(d->cmd_added, d->ncmd_added);
        char *removed = words_text(d->cmd_removed, d->ncmd_removed);
        if (d->ncmd_added)
            emit(out, 2, "B adds: %s", added);
        if (d->ncmd_removed)
            emit(out, 2, "B drops: %s", removed);
        free(added);
        free(removed);
    }
    if (d->nenv_changes == 0) {
        emit(out, 2, "environment: %zu recorded variable%s, the same in both runs", d->env_compared,
             d->env_compared == 1 ? "" : "s");
        return;
    }
    emit(out, 2, "environment: %zu of %zu recorded variable%s differ%s:", d->nenv_changes,
         d->env_compared, d->env_compared == 1 ? "" : "s", d->nenv_changes == 1 ? "s" : "");
    static const struct table_column cols[] = {
        {"variable", TABLE_LEFT, 0},
        {"A", TABLE_LEFT, 0},
        {"B", TABLE_LEFT, 0},
    };
    struct table *t = table_new(cols, sizeof(cols) / sizeof(cols[0]));
    for (size_t i = 0; i < d->nenv_changes; i++) {
        const struct diff_env_change *c = &d->env_changes[i];
        table_cell(t, c->name);
        table_cell(t, c->value[0] ? c->value[0] : "(unset)");
        table_cell(t, c->value[1] ? c->value[1] : "(unset)");
    }
    table_print(t, out, 4);
    table_free(t);
}

static void print_text(const struct diff *d, FILE *out)
{
    fputs("cutrace diff: A = ", out);
    text_print(out, d->run[DIFF_A].path, 48, 0);
    fputs(" (baseline), B = ", out);
    text_print(out, d->run[DIFF_B].path, 48, 0);
    fputc('\n', out);
    print_run_line(d, DIFF_A, out);
    print_run_line(d, DIFF_B, out);
    size_t by[3] = {0};
    for (size_t p = 0; p < d->npairs; p++)
        by[d->pairs[p].by]++;
    emit(out, 2, "GPUs paired: %zu by NCCL rank, %zu by device ordinal, %zu by uuid", by[0], by[1],
         by[2]);
    print_summary(d, out);
    print_milestones(d, out);
    print_allocations(d, out);
    print_ipc(d, out);
    print_comms(d, out);
    if (d->o->budget)
        print_budget(d, out);
    print_config(d, out);
    if (d->nnotes)
        fputc('\n', out);
    for (size_t i = 0; i < d->nnotes; i++)
        emit(out, 0, "note: %s", d->notes[i]);
}

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
    switch ((enum diff_ms_kind)ms->kind) {
    case DIFF_MS_COMM_INIT:
        json_kv_int(w, "nranks", ms->detail);
        break;
    case DIFF_MS_CAPTURE_END:
        json_kv_int(w, "graphs", ms->detail);
        break;
    case DIFF_MS_FAILED:
        json_kv_int(w, "result", ms->detail);
        break;
    case DIFF_MS_END:
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
    json_kv_string(w, "end", p ? end_word(p) : NULL);
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
    json_key(w, "unfinished_processes");
    json_array_begin(w);
    for (size_t pi = 0; pi < r->m.nprocs; pi++) {
        const struct gm_process *p = &r->m.procs[pi];
        if (p->exited || !p->has_calls)
            continue;
        json_object_begin(w);
        json_kv_int(w, "pid", p->pid);
        json_kv_opt_int(w, "rank", p->has_rank, p->rank);
        json_kv_string(w, "end", end_word(p));
        const struct diff_milestone *last = last_milestone(r, (uint32_t)pi);
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
        json_kv_string(w, "kind", diff_ms_keys[d->rows[d->first_div_row].kind]);
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
    struct phase_sum *sums = phase_sums(d, &n);
    json_key(w, "phases");
    json_array_begin(w);
    for (size_t i = 0; i < n; i++) {
        const struct phase_sum *s = &sums[i];
        json_object_begin(w);
        char *phase = phase_text(d, s->phase, s->end);
        json_kv_string(w, "phase", phase);
        free(phase);
        json_kv_opt_int(w, "from_row", s->phase >= 0, s->phase);
        json_kv_opt_int(w, "to_row", s->end >= 0, s->end);
        bool uniform = phase_uniform(d, s);
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
        json_kv_string(w, "kind", diff_ms_keys[row->kind]);
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
            json_kv_string(w, "kind", diff_ms_keys[d->rows[st->row].kind]);
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
        char *phase = phase_text(d, row->phase, row->phase_end);
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
        json_kv_string(w, "category", category_key(row->category));
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
                struct effect *e = effects(&x->ranks[x->post_rank], &y->ranks[y->post_rank], &n);
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

static void print_json(const struct diff *d, FILE *out)
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

/* ---- CSV ---- */

static void csv_side(struct csv_writer *w, const struct diff_milestone *ms)
{
    if (!ms) {
        for (int c = 0; c < 3; c++)
            csv_null(w);
        return;
    }
    csv_int(w, diff_ms_traced(ms));
    if (ms->measured) {
        csv_int(w, ms->free_bytes);
        csv_int(w, gm_sub(gm_sub(ms->total_bytes, ms->free_bytes), diff_ms_traced(ms)));
    } else {
        csv_null(w);
        csv_null(w);
    }
}

/* One row per step of each pair's alignment: traced, free and unexplained
 * bytes on both sides. */
static void print_csv_milestones(const struct diff *d, FILE *out)
{
    static const char *const head[] = {"pair",
                                       "row",
                                       "milestone",
                                       "kind",
                                       "baseline_traced_bytes",
                                       "baseline_free_bytes",
                                       "baseline_unexplained_bytes",
                                       "other_traced_bytes",
                                       "other_free_bytes",
                                       "other_unexplained_bytes",
                                       "delta_traced_bytes",
                                       "diverges"};
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    for (uint32_t p = 0; p < d->npairs; p++) {
        const struct diff_pair *pr = &d->pairs[p];
        char *name = diff_pair_name(d, p);
        for (size_t k = 0; k < pr->nsteps; k++) {
            const struct diff_step *st = &pr->steps[k];
            const struct diff_milestone *a = diff_step_ms(d, pr, st, DIFF_A);
            const struct diff_milestone *b = diff_step_ms(d, pr, st, DIFF_B);
            csv_string(&w, name);
            csv_uint(&w, st->row);
            csv_string(&w, d->rows[st->row].label);
            csv_string(&w, diff_ms_keys[d->rows[st->row].kind]);
            csv_side(&w, a);
            csv_side(&w, b);
            if (a && b)
                csv_int(&w, gm_sub(diff_ms_traced(b), diff_ms_traced(a)));
            else
                csv_null(&w);
            csv_int(&w, diff_step_diverges(d, pr, st));
            csv_end_row(&w);
        }
        free(name);
    }
}

/* One row per allocation group that differs, in the report's order. */
static void print_csv_allocations(const struct diff *d, FILE *out)
{
    static const char *const head[] = {"phase",          "api",         "module",
                                       "site",           "size",        "category",
                                       "baseline_count", "other_count", "delta_count",
                                       "baseline_bytes", "other_bytes", "delta_bytes",
                                       "pairs_changed"};
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    for (size_t i = 0; i < d->nallocs; i++) {
        const struct diff_alloc_row *row = &d->allocs[i];
        csv_string(&w, row->phase >= 0 ? d->rows[row->phase].label : NULL);
        csv_string(&w, diff_string(d, row->api));
        csv_string(&w, diff_string(d, row->module));
        csv_string(&w, d->sites_compared ? diff_string(d, row->site) : NULL);
        csv_int(&w, row->size);
        csv_string(&w, gm_category_key((enum gm_category)row->category));
        csv_int(&w, row->count[DIFF_A]);
        csv_int(&w, row->count[DIFF_B]);
        csv_int(&w, row->count[DIFF_B] - row->count[DIFF_A]);
        csv_int(&w, row->bytes[DIFF_A]);
        csv_int(&w, row->bytes[DIFF_B]);
        csv_int(&w, gm_sub(row->bytes[DIFF_B], row->bytes[DIFF_A]));
        csv_uint(&w, row->changed);
        csv_end_row(&w);
    }
}

int cmd_diff(int argc, char **argv)
{
    struct diff_options o;
    struct cli_report_opts rep;
    int parsed = parse_options(argc, argv, &o, &rep);
    if (parsed != CLI_PARSED)
        return parsed;
    struct diff d;
    int status = diff_run_all(&d, &o);
    if (status == 0) {
        if (rep.format == CLI_FORMAT_JSON)
            print_json(&d, stdout);
        else if (rep.format == CLI_FORMAT_CSV && rep.csv_table == 1)
            print_csv_allocations(&d, stdout);
        else if (rep.format == CLI_FORMAT_CSV)
            print_csv_milestones(&d, stdout);
        else
            print_text(&d, stdout);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            cli_error(NULL, "cannot write the report to standard output");
            status = CLI_EXIT_BAD_INPUT;
        } else if (rep.fail_on_problem && d.first_div_row >= 0) {
            status = CLI_EXIT_PROBLEM; /* a milestone diverges past --threshold */
        }
    }
    diff_free(&d);
    return status;
}
