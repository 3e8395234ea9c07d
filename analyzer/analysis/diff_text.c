/*
 * diff_text.c - `cutrace diff`'s text report (diff_report.h): a short summary first
 * (the verdict, the first milestone that diverges, what each phase made
 * more or less of, the budget and configuration changes), then the
 * details: one pair's milestones side by side, the allocation groups that
 * differ, IPC lineage, communicators and collectives, the budget, the
 * configuration. Lines fit 120 columns.
 */
#include "analysis/diff_words.h"

#include "cli.h"
#include "model/filter.h"
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

#define TEXT_ALLOC_ROWS 40 /* allocation groups in text; JSON has all */
#define TEXT_PAIR_LINES 8  /* pairs whose milestones differ from the one shown */
#define LABEL_MAX       44 /* milestone column: a line of the table fits 120 columns */

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
    diff_emit(out, 2, "%s: %zu process%s (%s), %zu GPU%s, %s", diff_side_name(side), r->m.nprocs,
              r->m.nprocs == 1 ? "" : "es", ends, r->ngpus, r->ngpus == 1 ? "" : "s", nccl);
    free(nccl);
    free(ends);
}

static void print_statements(const struct diff *d, FILE *out)
{
    const struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    if (A->world != B->world)
        diff_emit(out, 2,
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
            diff_emit(out, 2, "only in %s: %zu GPU%s (%s)", diff_side_name(side), n,
                      n == 1 ? "" : "s", names);
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
            diff_emit(out, 2,
                      "%s has no trace of rank%s %s (its communicator has %" PRId64 " ranks)",
                      diff_side_name(side), r->nmissing == 1 ? "" : "s", list, r->world);
            free(list);
            free(ids);
        }
        for (size_t pi = 0; pi < r->m.nprocs; pi++) {
            const struct gm_process *p = &r->m.procs[pi];
            if (p->exited || !p->has_calls)
                continue;
            char who[64];
            gm_process_name(who, sizeof(who), p);
            const struct diff_milestone *last = diff_last_milestone(r, (uint32_t)pi);
            char *label = last ? diff_ms_label(d, last) : NULL;
            diff_emit(out, 2, "%s: %s %s%s%s%s", diff_side_name(side), who,
                      strcmp(diff_end_word(p), "killed") == 0
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
        diff_emit(out, 2, "no milestone diverges by more than %s", t);
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
    char *changes = diff_live_changes(a->live, b->live);
    char f[DIFF_SIZE_BUF], tr[DIFF_SIZE_BUF], u[DIFF_SIZE_BUF];
    char *pair_name = diff_pair_name(d, d->first_div_pair);
    int64_t dtraced = gm_sub(diff_ms_traced(b), diff_ms_traced(a));
    if (a->measured && b->measured) {
        int64_t dused =
            gm_sub(gm_sub(b->total_bytes, b->free_bytes), gm_sub(a->total_bytes, a->free_bytes));
        diff_emit(out, 2,
                  "first divergence > %s: %s on %s (%s: free %s, traced %s, unexplained %s; %s)", t,
                  row->label, who, pair_name,
                  diff_signed_size(f, sizeof(f), gm_sub(b->free_bytes, a->free_bytes)),
                  diff_signed_size(tr, sizeof(tr), dtraced),
                  diff_signed_size(u, sizeof(u), gm_sub(dused, dtraced)), changes);
    } else {
        diff_emit(out, 2, "first divergence > %s: %s on %s (%s: traced %s; %s)", t, row->label, who,
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
            diff_emit(out, 2, "milestones only in %s%s: %s", diff_side_name(side),
                      d->npairs < 2 ? ""
                      : d->filtered ? " (every listed rank unless said)"
                                    : " (every rank unless said)",
                      list);
        free(list);
    }
}

static void print_phases(const struct diff *d, FILE *out)
{
    size_t n;
    struct diff_phase_sum *sums = diff_phase_sums(d, &n);
    for (size_t i = 0; i < n; i++) {
        const struct diff_phase_sum *s = &sums[i];
        bool uniform = diff_phase_uniform(d, s);
        int64_t total[PS_KINDS][3] = {{0}};
        for (size_t p = 0; p < d->npairs; p++)
            for (int k = 0; k < PS_KINDS; k++)
                for (int j = 0; j < 3; j++)
                    total[k][j] = gm_add(total[k][j], s->v[p][k][j]);
        uint32_t *changed;
        bool alike;
        size_t nchanged = diff_phase_pairs(d, s, &changed, &alike);
        const int64_t(*v)[3] = uniform             ? (const int64_t(*)[3])s->v[0]
                               : alike && nchanged ? (const int64_t(*)[3])s->v[changed[0]]
                                                   : (const int64_t(*)[3])total;
        char *who = uniform             ? xstrdup(d->npairs > 1 ? ", per rank" : "")
                    : alike && nchanged ? diff_pairs_text(d, changed, nchanged)
                    : d->filtered       ? xstrdup(", all listed ranks together")
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
            char *phrase = diff_alloc_phrase(v[k], what[k]);
            char *joined = xasprintf("%s%s%s%s%s", text, *text ? "; " : "",
                                     k == PS_GPU ? "GPU memory " : "", phrase, after[k]);
            free(phrase);
            free(text);
            text = joined;
        }
        char *phase = diff_phase_text(d, s->phase, s->end);
        diff_emit(out, 2, "%s%s: %s", phase, who, text);
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
        diff_emit(
            out, 2, "budget (%s, %s): %s", sglang ? "sglang" : "vllm", param,
            "not comparable: a run has no rank whose budget could be replayed (details below)");
        free(param);
        return;
    }
    const struct budget_job *x = &a->groups[0], *y = &b->groups[0];
    char delta[DIFF_SIZE_BUF];
    if (sglang)
        diff_emit(out, 2, "budget (sglang, %s): rest %.6f -> %.6f GiB (%s); A: %s; B: %s", param,
                  x->rest, y->rest,
                  diff_signed_size(delta, sizeof(delta),
                                   (int64_t)llround((y->rest - x->rest) * BUDGET_GIB)),
                  x->verdict, y->verdict);
    else
        diff_emit(out, 2, "budget (vllm, %s): available KV %s -> %s (%s); A: %s; B: %s", param,
                  gm_format_size((char[DIFF_SIZE_BUF]){0}, DIFF_SIZE_BUF, x->available),
                  gm_format_size((char[DIFF_SIZE_BUF]){0}, DIFF_SIZE_BUF, y->available),
                  diff_signed_size(delta, sizeof(delta), gm_sub(y->available, x->available)),
                  x->verdict, y->verdict);
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
        diff_emit(
            out, 2,
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
    diff_emit(out, 2, "the runs differ: %s", kinds);
    free(kinds);
    print_statements(d, out);
    print_first_divergence(d, out);
    print_one_sided(d, out);
    print_phases(d, out);
    if (d->differences & (1u << DIFF_D_IPC)) {
        const struct diff_ipc *a = &d->run[DIFF_A].ipc, *b = &d->run[DIFF_B].ipc;
        diff_emit(out, 2,
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
        diff_emit(out, 2,
                  "NCCL: A %zu communicator%s, %" PRId64 " collective calls (%" PRId64
                  " captured); B %zu, %" PRId64 " (%" PRId64 " captured)",
                  d->run[DIFF_A].ncomms, d->run[DIFF_A].ncomms == 1 ? "" : "s", calls[0],
                  captured[0], d->run[DIFF_B].ncomms, calls[1], captured[1]);
    }
    if (d->o->budget)
        budget_summary(d, out);
    if (d->differences & (1u << DIFF_D_CMDLINE)) {
        char *added = words_text(d->cmd_added, d->ncmd_added);
        char *removed = words_text(d->cmd_removed, d->ncmd_removed);
        diff_emit(out, 2, "command line: %s%s%s%s%s", d->ncmd_added ? "B adds " : "", added,
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
        diff_emit(out, 2, "environment: %zu variable%s differ%s: %s", d->nenv_changes,
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
    uint32_t shown = diff_shown_pair(d);
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
        if (a && b && a->kind == MS_COMM_INIT && a->detail != b->detail)
            extra = xasprintf(" (%" PRId64 " | %" PRId64 " ranks)", a->detail, b->detail);
        else if ((a ? a : b)->kind == MS_COMM_INIT)
            extra = xasprintf(" (%" PRId64 " ranks)", (a ? a : b)->detail);
        else if ((a ? a : b)->kind == MS_CAPTURE_END)
            extra = a && b && a->detail != b->detail
                        ? xasprintf(", %" PRId64 " | %" PRId64 " graphs", a->detail, b->detail)
                        : xasprintf(", %" PRId64 " graph%s", (a ? a : b)->detail,
                                    (a ? a : b)->detail == 1 ? "" : "s");
        else if ((a ? a : b)->kind == MS_END)
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
            char *changes = diff_live_changes(a->live, b->live);
            if (*changes)
                diff_emit(out, 6, "%s", changes);
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
        struct diff_row_sig *ref = diff_pair_sigs(d, shown);
        char **what = xcalloc(d->npairs, sizeof(*what));
        size_t same = 0;
        for (uint32_t q = 0; q < d->npairs; q++) {
            if (q == shown)
                continue;
            struct diff_row_sig *mine = diff_pair_sigs(d, q);
            size_t r = 0;
            while (r < d->nrows && diff_sig_equal(&mine[r], &ref[r]))
                r++;
            if (r == d->nrows) {
                same++;
            } else {
                char *how = diff_sig_difference(&mine[r], &ref[r]);
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
                diff_emit(out, 2, "%s differ%s from %s %s", who, n == 1 ? "s" : "", name, what[q]);
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
            diff_emit(out, 2, "... and %zu more pairs that differ from %s (--json has every pair)",
                      unlisted, name);
        if (same)
            diff_emit(out, 2, "%s%zu other pair%s: the same deltas at every milestone",
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
        char *change = diff_count_range(row->dmin, row->dmax);
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
        table_cell(t, diff_category_key(row->category));
        char *phase = row->phase >= 0 ? xasprintf("after %s", d->rows[row->phase].label)
                                      : diff_phase_text(d, row->phase, row->phase_end);
        table_cell(t, phase);
        free(phase);
        int64_t bytes = uniform ? diff_sat_mul_bytes(row->dmin, row->size)
                                : gm_sub(row->bytes[1], row->bytes[0]);
        char *cell = xasprintf("%s%s", diff_signed_size(buf, sizeof(buf), bytes),
                               uniform || d->npairs < 2 ? "" : " (all)");
        table_cell(t, cell);
        free(cell);
    }
    table_print(t, out, 2);
    table_free(t);
    if (d->nallocs > TEXT_ALLOC_ROWS)
        diff_emit(out, 2, "... and %zu more groups (--json lists every one)",
                  d->nallocs - TEXT_ALLOC_ROWS);
    bool unpaired = false;
    for (int side = 0; side < 2; side++)
        for (size_t g = 0; g < d->run[side].ngpus; g++)
            unpaired |= d->run[side].gpus[g].pair == GM_NONE;
    if (unpaired)
        diff_emit(out, 2, "(GPUs without a partner are not compared here)");
}

static void print_ipc_side(const struct diff *d, int side, FILE *out)
{
    const struct diff_ipc *ipc = &d->run[side].ipc;
    if (ipc->nbuffers == 0 && ipc->opens == 0) {
        diff_emit(out, 2, "%s: nothing exported, no IPC mappings", diff_side_name(side));
        return;
    }
    diff_emit(out, 2, "%s: %zu buffer%s exported, %" PRId64 " IPC mapping%s made%s",
              diff_side_name(side), ipc->nbuffers, ipc->nbuffers == 1 ? "" : "s", ipc->opens,
              ipc->opens == 1 ? "" : "s",
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
        diff_emit(out, 2, "B: the same");
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
        diff_emit(out, 2, "no NCCL communicator in either run%s",
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
        diff_emit(out, 2, "NCCL memory made before any communicator: A %s, B %s",
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
        diff_emit(out, 2, "no collective calls in either run");
    table_free(t);
    for (int side = 0; side < 2; side++)
        if (d->run[side].unattributed_calls)
            diff_emit(out, 2,
                      "%s: %" PRId64 " collective calls on communicators whose init the trace "
                      "lacks",
                      diff_side_name(side), d->run[side].unattributed_calls);
    free(pa);
    free(pb);
}

/* The lines a command line's processes were launched by (a spawned
 * worker's launcher holds the flags). */
static void print_launched_by(const struct diff_count *c, FILE *out)
{
    for (size_t i = 0; i < c->nlaunched_by; i++)
        diff_emit(out, 4, "launched by: %s", c->launched_by[i]);
}

static void print_config(const struct diff *d, FILE *out)
{
    const struct diff_run *A = &d->run[DIFF_A];
    fputs("\nConfiguration\n", out);
    if (!(d->differences & (1u << DIFF_D_CMDLINE))) {
        diff_emit(out, 2, "command line%s: the same in both runs", A->ncmdlines == 1 ? "" : "s");
        if (A->ncmdlines > 0) {
            diff_emit(out, 4, "%s",
                      A->cmdlines[0].text[0] ? A->cmdlines[0].text : "(not recorded)");
            print_launched_by(&A->cmdlines[0], out);
        }
    } else {
        for (int side = 0; side < 2; side++) {
            const struct diff_run *r = &d->run[side];
            if (r->ncmdlines == 0)
                continue;
            diff_emit(out, 2, "%s (%zu process%s): %s", diff_side_name(side), r->cmdlines[0].count,
                      r->cmdlines[0].count == 1 ? "" : "es",
                      r->cmdlines[0].text[0] ? r->cmdlines[0].text : "(not recorded)");
            print_launched_by(&r->cmdlines[0], out);
            if (r->ncmdlines > 1)
                diff_emit(out, 4, "and %zu other command line%s (--json lists them)",
                          r->ncmdlines - 1, r->ncmdlines == 2 ? "" : "s");
        }
        char *added = words_text(d->cmd_added, d->ncmd_added);
        char *removed = words_text(d->cmd_removed, d->ncmd_removed);
        if (d->ncmd_added)
            diff_emit(out, 2, "B adds: %s", added);
        if (d->ncmd_removed)
            diff_emit(out, 2, "B drops: %s", removed);
        free(added);
        free(removed);
    }
    if (d->nenv_changes == 0) {
        diff_emit(out, 2, "environment: %zu recorded variable%s, the same in both runs",
                  d->env_compared, d->env_compared == 1 ? "" : "s");
        return;
    }
    diff_emit(out, 2, "environment: %zu of %zu recorded variable%s differ%s:", d->nenv_changes,
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

void diff_print_text(const struct diff *d, FILE *out)
{
    fputs("cutrace diff: A = ", out);
    text_print(out, d->run[DIFF_A].path, 48, 0);
    fputs(" (baseline), B = ", out);
    text_print(out, d->run[DIFF_B].path, 48, 0);
    fputc('\n', out);
    print_run_line(d, DIFF_A, out);
    print_run_line(d, DIFF_B, out);
    diff_emit(out, 2, "GPUs paired: %zu by NCCL rank, %zu by device ordinal, %zu by uuid",
              d->paired_by[DIFF_BY_RANK], d->paired_by[DIFF_BY_ORDINAL],
              d->paired_by[DIFF_BY_UUID]);
    if (d->filtered) {
        char given[256];
        gm_filter_given(given, sizeof(given), d->o->filters);
        diff_emit(out, 2,
                  "listed (%s): %zu pair%s of %zu; IPC, NCCL, budget and configuration are the "
                  "whole runs'",
                  given, d->npairs, d->npairs == 1 ? "" : "s", d->pairs_total);
    }
    print_summary(d, out);
    print_milestones(d, out);
    print_allocations(d, out);
    print_ipc(d, out);
    print_comms(d, out);
    if (d->o->budget)
        diff_print_budget(d, out);
    print_config(d, out);
    if (d->nnotes)
        fputc('\n', out);
    for (size_t i = 0; i < d->nnotes; i++)
        diff_emit(out, 0, "note: %s", d->notes[i]);
}
