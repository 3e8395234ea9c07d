/*
 * report_coll.c - the collectives of the HTML report (report.h): one table
 * per NCCL communicator (the groups of analysis/collectives.h) with its
 * calls per op, the fewest and most any member made, and its problems, the
 * rows of an op that has one highlighted; the run's own problems (about no
 * one communicator) after them.
 */
#include "analysis/report.h"

#include "cli.h"
#include "out/html.h"
#include "out/units.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static bool op_has_problem(const struct coll_group *g, const char *op)
{
    for (size_t i = 0; i < g->nproblems; i++)
        if (g->problems[i].op && op && strcmp(g->problems[i].op, op) == 0)
            return true;
    return false;
}

/* The problems of p[0..n) that listed passes (NULL: all), as one list. */
static void problems(FILE *out, const struct coll_problem *p, size_t n,
                     const struct coll_listing *listed)
{
    bool open = false;
    for (size_t i = 0; i < n; i++) {
        if (listed && !coll_listing_run_problem(listed, &p[i]))
            continue;
        if (!open)
            fputs("<ul class=\"problem\">\n", out);
        open = true;
        fputs("<li>", out);
        html_text(out, coll_problem_keys[p[i].kind]);
        fputs(": ", out);
        html_text(out, p[i].message);
        fputs("</li>\n", out);
    }
    if (open)
        fputs("</ul>\n", out);
}

void report_collectives(FILE *out, const struct coll_listing *ls)
{
    const struct coll_report *r = ls->r;
    if (r->ngroups == 0) {
        html_elem(out, "p", "note", "no NCCL communicator in these traces");
        problems(out, r->problems, r->nproblems, ls);
        return;
    }
    size_t listed = 0;
    for (size_t i = 0; i < r->ngroups; i++)
        listed += ls->group[i];
    html_textf(out,
               "%zu communicators, %" PRId64 " collective and %" PRId64
               " point-to-point calls, %" PRId64 " failed, %zu problems",
               r->ngroups, r->collective_calls, r->p2p_calls, r->failed_calls, r->total_problems);
    if (ls->filtered)
        html_textf(out, "; listed: the %zu communicators of the listed processes, %zu problems",
                   listed, ls->problems);
    fputs("\n<table class=\"collectives\"><tr><th>communicator</th><th class=\"n\">ranks</th>"
          "<th class=\"n\">traced</th><th>op</th><th class=\"n\">calls</th>"
          "<th class=\"n\">per rank (min-max)</th><th class=\"n\">failed</th></tr>\n",
          out);
    for (size_t i = 0; i < r->ngroups; i++) {
        const struct coll_group *g = &r->groups[i];
        if (!ls->group[i])
            continue;
        size_t rows = g->nops ? g->nops : 1;
        for (size_t k = 0; k < rows; k++) {
            const struct coll_op *op = g->nops ? &g->ops[k] : NULL;
            bool bad =
                op ? op_has_problem(g, op->op) || op->failed > 0 || op->min_calls != op->max_calls
                   : g->nproblems > 0;
            fprintf(out, "<tr%s>", bad ? " class=\"problem\"" : "");
            if (k == 0) {
                fprintf(out, "<td class=\"mono\" rowspan=\"%zu\">", rows);
                html_text(out, g->hash);
                if (g->has_nranks)
                    fprintf(out, "</td><td class=\"n\" rowspan=\"%zu\">%" PRId64 "</td>", rows,
                            g->nranks);
                else
                    fprintf(out, "</td><td class=\"n\" rowspan=\"%zu\">?</td>", rows);
                fprintf(out, "<td class=\"n\" rowspan=\"%zu\">%" PRId64 "</td>", rows,
                        g->ranks_traced);
            }
            if (op) {
                fputs("<td>", out);
                html_text(out, op->op);
                fprintf(out,
                        "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">%" PRId64 "-%" PRId64
                        "</td><td class=\"n\">%" PRId64 "</td>",
                        op->calls, op->min_calls, op->max_calls, op->failed);
            } else {
                fputs("<td>(no calls)</td><td></td><td></td><td></td>", out);
            }
            fputs("</tr>\n", out);
        }
    }
    fputs("</table>\n", out);
    for (size_t i = 0; i < r->ngroups; i++) {
        const struct coll_group *g = &r->groups[i];
        if (g->nproblems == 0 || !ls->group[i])
            continue;
        fputs("<p class=\"problem\">communicator <span class=\"mono\">", out);
        html_text(out, g->hash);
        fputs("</span>:</p>\n", out);
        problems(out, g->problems, g->nproblems, NULL);
    }
    problems(out, r->problems, r->nproblems, ls);
}
