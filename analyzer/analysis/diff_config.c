/*
 * diff_config.c - the configuration of each run (command lines, recorded environment) and
 * the words that differ (step 6 of diff_run.c).
 */
#include "analysis/diff_build.h"

#include "cli.h"
#include "model/nccl.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration ---- */

static int compare_counts(const void *x, const void *y)
{
    const struct diff_count *a = x, *b = y;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return strcmp(a->text, b->text);
}

/* Whether process p's launch lines (own, then the rest) are those of c. */
static bool same_launch(const struct gm_model *m, const struct gm_process *p,
                        const struct diff_count *c)
{
    if (strcmp(gm_launch_line(m, p, 0), c->text) != 0)
        return false;
    size_t i = 0;
    for (const char *line; (line = gm_launch_line(m, p, i + 1)) != NULL; i++)
        if (i == c->nlaunched_by || strcmp(line, c->launched_by[i]) != 0)
            return false;
    return i == c->nlaunched_by;
}

/* The distinct command lines of a run, each with the lines its processes
 * were launched by: a worker's flags may be only on its launcher's. */
void diff_build_cmdlines(struct diff_run *r)
{
    const struct gm_model *m = &r->m;
    size_t cap = 0;
    for (size_t pi = 0; pi < m->nprocs; pi++) {
        const struct gm_process *p = &m->procs[pi];
        size_t i = 0;
        while (i < r->ncmdlines && !same_launch(m, p, &r->cmdlines[i]))
            i++;
        if (i == r->ncmdlines) {
            r->cmdlines = xgrow(r->cmdlines, &cap, r->ncmdlines + 1, sizeof(*r->cmdlines));
            struct diff_count *c = &r->cmdlines[r->ncmdlines++];
            *c = (struct diff_count){.text = xstrdup(p->cmdline)};
            size_t lcap = 0;
            for (const char *line; (line = gm_launch_line(m, p, c->nlaunched_by + 1)) != NULL;) {
                c->launched_by = xgrow(c->launched_by, &lcap, c->nlaunched_by + 1, sizeof(char *));
                c->launched_by[c->nlaunched_by++] = xstrdup(line);
            }
        }
        r->cmdlines[i].count++;
    }
    if (r->ncmdlines > 1)
        qsort(r->cmdlines, r->ncmdlines, sizeof(*r->cmdlines), compare_counts);
}

struct env_pair {
    char *name, *value;
};

static int compare_env_pairs(const void *x, const void *y)
{
    const struct env_pair *a = x, *b = y;
    int c = strcmp(a->name, b->name);
    return c ? c : strcmp(a->value, b->value);
}

/*
 * The recorded environment of a run: per variable its distinct values over
 * the processes that recorded any. The tracer's own CUTRACE_* variables
 * are left out: they name this run's trace and scratch directories.
 * Returns -1 after printing the error of a damaged trace.
 */
int diff_build_env(struct diff_run *r)
{
    const struct gm_model *m = &r->m;
    struct env_pair *all = NULL;
    size_t n = 0, cap = 0, with_env = 0;
    int rc = 0;
    for (size_t pi = 0; pi < m->nprocs && rc == 0; pi++) {
        struct trace *t = (struct trace *)m->procs[pi].trace;
        sqlite3_stmt *stmt = trace_query(t, "SELECT name, value FROM env ORDER BY name", "");
        if (!stmt) {
            rc = -1;
        } else {
            size_t before = n;
            int step;
            while ((step = trace_step(t, stmt)) == 1) {
                char *name = col_text(stmt, 0);
                if (!name || strncmp(name, "CUTRACE_", 8) == 0) {
                    free(name);
                    continue;
                }
                char *value = col_text(stmt, 1);
                all = xgrow(all, &cap, n + 1, sizeof(*all));
                all[n++] = (struct env_pair){name, value ? value : xstrdup("")};
            }
            sqlite3_finalize(stmt);
            with_env += n > before;
            if (step < 0)
                rc = -1;
        }
        if (rc != 0)
            trace_report_error(t);
    }
    if (n > 1)
        qsort(all, n, sizeof(*all), compare_env_pairs);
    size_t ecap = 0;
    for (size_t i = 0; i < n;) {
        size_t k = i, procs = 0;
        char *value = NULL;
        for (; k < n && strcmp(all[k].name, all[i].name) == 0; k++) {
            procs++;
            if (k > i && strcmp(all[k].value, all[k - 1].value) == 0)
                continue;
            char *joined =
                value ? xasprintf("%s | %s", value, all[k].value) : xstrdup(all[k].value);
            free(value);
            value = joined;
        }
        if (procs < with_env) {
            char *joined = xasprintf("%s | (unset)", value);
            free(value);
            value = joined;
        }
        r->env = xgrow(r->env, &ecap, r->nenv + 1, sizeof(*r->env));
        r->env[r->nenv++] = (struct diff_env){xstrdup(all[i].name), value};
        i = k;
    }
    for (size_t i = 0; i < n; i++) {
        free(all[i].name);
        free(all[i].value);
    }
    free(all);
    return rc;
}

/* A command line's words appended to words[0..n), split at blanks outside
 * quotes (quotes kept); an option and the value after it are one word
 * ("--tp 4"), so that a changed value reads as the option that changed. */
static char **split_words_onto(char **words, size_t n, const char *text, size_t *count)
{
    size_t cap = n, first = n;
    const char *p = text;
    while (*p && n < MAX_CMD_WORDS) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *start = p;
        char quote = 0;
        for (; *p && (quote || (*p != ' ' && *p != '\t')); p++) {
            if (quote && *p == quote)
                quote = 0;
            else if (!quote && (*p == '\'' || *p == '"'))
                quote = *p;
        }
        words = xgrow(words, &cap, n + 1, sizeof(*words));
        words[n++] = xstrndup(start, (size_t)(p - start));
    }
    size_t k = first;
    for (size_t i = first; i < n; i++) {
        bool option = words[i][0] == '-' && words[i][1] && !strchr(words[i], '=');
        if (option && i + 1 < n && words[i + 1][0] != '-') {
            char *joined = xasprintf("%s %s", words[i], words[i + 1]);
            free(words[i]);
            free(words[i + 1]);
            words[k++] = joined;
            i++;
        } else {
            words[k++] = words[i];
        }
    }
    *count = k;
    return words;
}

/* The words of a command line and of every line it was launched by, in
 * order: a flag that moved from a worker's line to its launcher's is the
 * same word in the same place. */
static char **launch_words(const struct diff_count *c, size_t *count)
{
    *count = 0;
    if (!c)
        return NULL;
    char **words = split_words_onto(NULL, 0, c->text, count);
    for (size_t i = 0; i < c->nlaunched_by; i++)
        words = split_words_onto(words, *count, c->launched_by[i], count);
    return words;
}

void diff_free_words(char **words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(words[i]);
    free(words);
}

/* The words of B's command lines that A's lack and back, by LCS. */
static void diff_words(struct diff *d, const struct diff_count *a_line,
                       const struct diff_count *b_line)
{
    size_t na, nb;
    char **a = launch_words(a_line, &na), **b = launch_words(b_line, &nb);
    /* lcs[i][j]: LCS of a[i..] and b[j..] */
    size_t w = nb + 1;
    uint16_t *lcs = xcalloc((na + 1) * w, sizeof(*lcs));
    for (size_t i = na; i-- > 0;)
        for (size_t j = nb; j-- > 0;)
            lcs[i * w + j] = strcmp(a[i], b[j]) == 0
                                 ? (uint16_t)(lcs[(i + 1) * w + j + 1] + 1)
                                 : (lcs[(i + 1) * w + j] > lcs[i * w + j + 1] ? lcs[(i + 1) * w + j]
                                                                              : lcs[i * w + j + 1]);
    size_t i = 0, j = 0, acap = 0, rcap = 0;
    while (i < na || j < nb) {
        if (i < na && j < nb && strcmp(a[i], b[j]) == 0) {
            i++;
            j++;
        } else if (j < nb && (i == na || lcs[i * w + j + 1] >= lcs[(i + 1) * w + j])) {
            d->cmd_added = xgrow(d->cmd_added, &acap, d->ncmd_added + 1, sizeof(char *));
            d->cmd_added[d->ncmd_added++] = xstrdup(b[j++]);
        } else {
            d->cmd_removed = xgrow(d->cmd_removed, &rcap, d->ncmd_removed + 1, sizeof(char *));
            d->cmd_removed[d->ncmd_removed++] = xstrdup(a[i++]);
        }
    }
    free(lcs);
    diff_free_words(a, na);
    diff_free_words(b, nb);
}

static bool same_lines(const struct diff_count *a, const struct diff_count *b)
{
    if (strcmp(a->text, b->text) != 0 || a->nlaunched_by != b->nlaunched_by)
        return false;
    for (size_t i = 0; i < a->nlaunched_by; i++)
        if (strcmp(a->launched_by[i], b->launched_by[i]) != 0)
            return false;
    return true;
}

void diff_compare_config(struct diff *d)
{
    const struct diff_run *A = &d->run[DIFF_A], *B = &d->run[DIFF_B];
    bool same = A->ncmdlines == B->ncmdlines;
    for (size_t i = 0; same && i < A->ncmdlines; i++) {
        bool found = false;
        for (size_t k = 0; k < B->ncmdlines && !found; k++)
            found = same_lines(&A->cmdlines[i], &B->cmdlines[k]);
        same = found;
    }
    if (!same) {
        d->differences |= 1u << DIFF_D_CMDLINE;
        diff_words(d, A->ncmdlines ? &A->cmdlines[0] : NULL, B->ncmdlines ? &B->cmdlines[0] : NULL);
    }
    size_t i = 0, k = 0, cap = 0;
    while (i < A->nenv || k < B->nenv) {
        int c = i == A->nenv ? 1 : k == B->nenv ? -1 : strcmp(A->env[i].name, B->env[k].name);
        const struct diff_env *a = c <= 0 ? &A->env[i] : NULL, *b = c >= 0 ? &B->env[k] : NULL;
        i += c <= 0;
        k += c >= 0;
        d->env_compared++;
        if (a && b && strcmp(a->value, b->value) == 0)
            continue;
        d->env_changes = xgrow(d->env_changes, &cap, d->nenv_changes + 1, sizeof(*d->env_changes));
        d->env_changes[d->nenv_changes++] = (struct diff_env_change){
            a ? a->name : b->name, {a ? a->value : NULL, b ? b->value : NULL}};
    }
    if (d->nenv_changes)
        d->differences |= 1u << DIFF_D_ENV;
}
