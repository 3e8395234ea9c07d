/*
 * collectives.c - `cutrace collectives [options] DIR`: the options and
 * the three renderings (text tables, one JSON document, CSV tables) of the
 * report that
 * analysis/collectives.c builds from the run model: the NCCL communicators
 * of every traced process joined into groups by communicator, each with its
 * ranks, its calls per op, datatype and size, its point-to-point pairs and
 * the problems found (ranks whose call counts differ, ranks without a
 * trace, unmatched sends and receives).
 *
 * The filters (--rank, --pid, --host, --gpu) choose which ranks are listed,
 * never what is checked: whether a rank fell behind is decided against all
 * of its peers, listed or not.
 */
#include "analysis/coll_inflight.h"
#include "analysis/coll_listing.h"
#include "analysis/collectives.h"
#include "cli.h"
#include "model/clocks.h"
#include "model/errnames.h"
#include "model/filter.h"
#include "model/nccl.h"
#include "model/traceset.h"
#include "out/csv.h"
#include "out/json.h"
#include "out/table.h"
#include "out/units.h"

#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MIN_W 12 /* columns of the header's path on the narrowest terminal */

/* The first line is the synopsis of the plain report, kept as it was; the
 * second has every option. */
static const char usage[] =
    "usage: cutrace collectives [--json] DIR...\n"
    "       cutrace collectives [options] DIR...\n"
    "\n" CLI_PATHS_HELP "\n"
    "Join the NCCL communicators of every trace in DIR (or one trace file) by\n"
    "their unique id: per communicator its ranks (process, host, GPU, init\n"
    "result, lifetime) and which ranks have no trace, then its collective calls\n"
    "per operation, datatype and message size (calls per rank, bytes, host time,\n"
    "captured into CUDA graphs or not, inside ncclGroupStart/End, failed), and\n"
    "sends and receives per pair of ranks. Ranks whose call counts differ, ranks\n"
    "without a trace and unmatched sends/receives are flagged.\n"
    "\n"
    "options:\n" CLI_FILTER_HELP CLI_FORMAT_HELP CLI_HELP_HELP "\n"
    "--rank, --pid, --host and --gpu list those ranks (the members of each\n"
    "communicator, their point-to-point pairs, their processes) and the\n"
    "communicators they are in; counts and checks stay over every rank.\n"
    "Tables for --csv: communicators (one row per communicator), members (one\n"
    "row per rank of each), ops (one row per operation, datatype and size of\n"
    "each), pairs (one row per pair of point-to-point ranks), problems.\n"
    "\n" CLI_EXIT_HELP("a problem in a communicator listed (call counts that\n"
                       "     differ between ranks, ranks without a trace, unmatched sends or\n"
                       "     receives, failed calls or inits), or in a process listed\n"
                       "exit 0 also when there are no NCCL calls");

static const char *const csv_tables[] = {"communicators", "members",  "ops",
                                         "pairs",         "problems", NULL};
enum csv_table { CSV_COMMUNICATORS, CSV_MEMBERS, CSV_OPS, CSV_PAIRS, CSV_PROBLEMS };

/* A rank of g that a listed member holds. */
static bool rank_listed(const struct coll_listing *ls, const struct coll_group *g, int64_t rank)
{
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct nccl_comm *c = ls->r->members[g->members[k]].comm;
        if (ls->member[g->members[k]] && c->has_rank && c->rank == rank)
            return true;
    }
    return false;
}

/* A pair with a listed rank on either side. */
static bool pair_listed(const struct coll_listing *ls, const struct coll_group *g,
                        const struct coll_pair *p)
{
    return rank_listed(ls, g, p->from) || rank_listed(ls, g, p->to);
}

/* ---- text rendering ---- */

static void print_members(const struct coll_listing *ls, const struct coll_group *g)
{
    const struct coll_report *r = ls->r;
    static const struct table_column columns[] = {
        {"rank", TABLE_RIGHT, 0},     {"pid", TABLE_RIGHT, 0},      {"host", TABLE_LEFT, 16},
        {"device", TABLE_RIGHT, 0},   {"gpu uuid", TABLE_LEFT, 40}, {"init", TABLE_LEFT, 16},
        {"lifetime", TABLE_RIGHT, 0}, {"", TABLE_LEFT, 24},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF], result[64];
    for (size_t k = 0; k < g->nmembers; k++) {
        if (!ls->member[g->members[k]])
            continue;
        const struct coll_member *m = &r->members[g->members[k]];
        const struct coll_proc *p = &r->procs[m->proc];
        const struct nccl_comm *c = m->comm;
        if (c->has_rank)
            table_cellf(tab, "%" PRId64, c->rank);
        else
            table_cell(tab, "?");
        if (p->has_pid)
            table_cellf(tab, "%" PRId64, p->pid);
        else
            table_cell(tab, "?");
        table_cell(tab, p->host && p->host[0] ? p->host : "?");
        if (c->device >= 0)
            table_cellf(tab, "%" PRId64, c->device);
        else
            table_cell(tab, "?");
        table_cell(tab, m->uuid);
        if (c->init_result == 0)
            table_cell(tab, "ok");
        else
            table_cell(tab, result_describe(result, sizeof(result), LAYER_NCCL, c->init_result));
        /* The duration in a number column (never cut), how it ended beside it. */
        if (c->init_result != 0) {
            table_cell(tab, "-");
            table_cell(tab, "");
        } else if (c->destroyed) {
            table_cellf(tab, "%s,",
                        format_duration(buf, sizeof(buf), gm_sub(c->t_destroy_ns, c->t_init_ns)));
            table_cell(tab, nccl_end_text(c));
        } else {
            table_cell(tab, "");
            table_cell(tab, nccl_end_text(c));
        }
    }
    table_print(tab, stdout, 2);
    table_free(tab);
}

static void print_op(const struct coll_group *g, const struct coll_op *op)
{
    putchar('\n');
    char line[512];
    if (op->p2p)
        snprintf(line, sizeof(line), "%s: %" PRId64 " call%s (point-to-point: pairs below)", op->op,
                 op->calls, op->calls == 1 ? "" : "s");
    else if (g->nactive > 0 && op->min_calls == op->max_calls)
        snprintf(line, sizeof(line), "%s: %" PRId64 " call%s, %" PRId64 " on each of %zu rank%s",
                 op->op, op->calls, op->calls == 1 ? "" : "s", op->max_calls, g->nactive,
                 g->nactive == 1 ? "" : "s");
    else
        snprintf(line, sizeof(line),
                 "%s: %" PRId64 " calls; RANKS DIFFER, %" PRId64 " to %" PRId64 " per rank", op->op,
                 op->calls, op->min_calls, op->max_calls);
    text_print_wrapped(stdout, line, 2);

    static const struct table_column columns[] = {
        {"type", TABLE_LEFT, 12},    {"size", TABLE_RIGHT, 0},      {"calls/rank", TABLE_RIGHT, 0},
        {"bytes", TABLE_RIGHT, 0},   {"host time", TABLE_RIGHT, 0}, {"mean", TABLE_RIGHT, 0},
        {"max", TABLE_RIGHT, 0},     {"graph", TABLE_RIGHT, 0},     {"eager", TABLE_RIGHT, 0},
        {"grouped", TABLE_RIGHT, 0}, {"failed", TABLE_RIGHT, 0},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF];
    for (size_t ri = op->first_row; ri < op->first_row + op->nrows; ri++) {
        const struct coll_row *row = &g->rows[ri];
        const struct coll_cell *first = &g->cells[row->first_cell];
        table_cell(tab, first->datatype);
        table_cell(tab, nccl_bucket_label(buf, sizeof(buf), first->bucket));
        if (row->min_calls == row->max_calls)
            table_cellf(tab, "%" PRId64, row->max_calls);
        else
            table_cellf(tab, "%" PRId64 "-%" PRId64 "%s", row->min_calls, row->max_calls,
                        op->p2p ? "" : " !");
        table_cell(tab, format_bytes(buf, sizeof(buf), (uint64_t)row->bytes));
        table_cell(tab, format_duration(buf, sizeof(buf), row->dur_ns));
        table_cell(tab, format_duration(buf, sizeof(buf), coll_mean(row->dur_ns, row->calls)));
        table_cell(tab, format_duration(buf, sizeof(buf), row->max_dur_ns));
        table_cellf(tab, "%" PRId64, row->captured);
        table_cellf(tab, "%" PRId64, coll_nonneg(gm_sub(row->calls, row->captured)));
        table_cellf(tab, "%" PRId64, row->in_group);
        table_cellf(tab, "%" PRId64, row->failed);
    }
    table_print(tab, stdout, 4);
    table_free(tab);
}

static void print_pairs(const struct coll_listing *ls, const struct coll_group *g)
{
    static const struct table_column columns[] = {
        {"point-to-point", TABLE_RIGHT, 0}, {"sends", TABLE_RIGHT, 0},
        {"recvs", TABLE_RIGHT, 0},          {"bytes sent", TABLE_RIGHT, 0},
        {"bytes received", TABLE_RIGHT, 0}, {"", TABLE_LEFT, 0},
    };
    struct table *tab = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    char buf[UNITS_BUF];
    for (size_t i = 0; i < g->npairs; i++) {
        const struct coll_pair *p = &g->pairs[i];
        if (!pair_listed(ls, g, p))
            continue;
        table_cellf(tab, "%" PRId64 " -> %" PRId64, p->from, p->to);
        if (p->sender_traced)
            table_cellf(tab, "%" PRId64, p->sends);
        else
            table_cell(tab, "-");
        if (p->receiver_traced)
            table_cellf(tab, "%" PRId64, p->recvs);
        else
            table_cell(tab, "-");
        table_cell(tab, p->sender_traced ? format_bytes(buf, sizeof(buf), (uint64_t)p->send_bytes)
                                         : "-");
        table_cell(tab, p->receiver_traced ? format_bytes(buf, sizeof(buf), (uint64_t)p->recv_bytes)
                                           : "-");
        if (!p->sender_traced || !p->receiver_traced)
            table_cell(tab, "(a side without trace)");
        else
            table_cell(tab, p->sends == p->recvs ? "" : "UNMATCHED");
    }
    if (table_rows(tab) > 0) {
        putchar('\n');
        table_print(tab, stdout, 2);
    }
    table_free(tab);
}

static void print_problems(const struct coll_problem *list, size_t count, size_t indent)
{
    for (size_t i = 0; i < count; i++)
        text_print_wrapped(stdout, list[i].message, indent);
}

static void print_group(const struct coll_listing *ls, const struct coll_group *g)
{
    char line[512];
    putchar('\n');
    if (!g->has_nranks)
        snprintf(line, sizeof(line), "Communicator %s: size unknown, %" PRId64 " rank%s traced",
                 g->hash, g->ranks_traced, g->ranks_traced == 1 ? "" : "s");
    else if (g->missing_count == 0)
        snprintf(line, sizeof(line), "Communicator %s: %" PRId64 " rank%s, all traced", g->hash,
                 g->nranks, g->nranks == 1 ? "" : "s");
    else
        snprintf(line, sizeof(line),
                 "Communicator %s: %" PRId64 " ranks, %" PRId64 " traced, %" PRId64
                 " WITHOUT TRACE",
                 g->hash, g->nranks, g->ranks_traced, g->missing_count);
    text_print_wrapped(stdout, line, 0);
    if (g->has_parent) {
        char color[48] = "";
        if (g->has_color)
            snprintf(color, sizeof(color), " with color %" PRId64, g->color);
        snprintf(line, sizeof(line), "split from communicator %s%s",
                 g->parent_hash ? g->parent_hash : "(not in the trace)", color);
        text_print_wrapped(stdout, line, 2);
    }
    print_members(ls, g);
    for (size_t o = 0; o < g->nops; o++)
        print_op(g, &g->ops[o]);
    if (g->nops == 0)
        printf("\n  no collective or point-to-point calls\n");
    if (g->npairs > 0)
        print_pairs(ls, g);
    if (g->nproblems > 0) {
        printf("\n  problems:\n");
        print_problems(g->problems, g->nproblems, 4);
    }
}

static void print_text(const struct coll_listing *ls)
{
    const struct coll_report *r = ls->r;
    char version[32], suffix[160];
    bool none = r->ngroups == 0 && r->collective_calls == 0 && r->p2p_calls == 0 &&
                !coll_inflight_any(&ls->inflight);
    int64_t v = coll_common_version(r);
    if (none)
        snprintf(suffix, sizeof(suffix), ": no NCCL communicators or calls in %zu process%s",
                 r->nprocs, r->nprocs == 1 ? "" : "es");
    else
        snprintf(suffix, sizeof(suffix), ": %zu process%s, %zu communicator%s, NCCL %s", r->nprocs,
                 r->nprocs == 1 ? "" : "es", r->ngroups, r->ngroups == 1 ? "" : "s",
                 v < 0 ? "versions differ" : nccl_format_version(version, sizeof(version), v));
    /* The path gets what the line has left (at least PATH_MIN_W columns);
     * the counts are never cut: a narrow terminal gets a longer line. */
    static const char prefix[] = "cutrace collectives of ";
    size_t width = table_width(), used = (sizeof(prefix) - 1) + strlen(suffix);
    size_t room = width > used + PATH_MIN_W ? width - used : PATH_MIN_W;
    printf("%s", prefix);
    text_print(stdout, r->path, room, 0);
    printf("%s\n", suffix);
    if (none)
        return;
    printf("  calls      %" PRId64 " collective, %" PRId64 " point-to-point (%" PRId64 " failed)\n",
           r->collective_calls, r->p2p_calls, r->failed_calls);
    if (r->total_problems == 0)
        printf("  problems   none found\n");
    else if (ls->problems == r->total_problems)
        printf("  problems   %zu (listed under each communicator)\n", r->total_problems);
    else
        printf("  problems   %zu where the ranks listed are, of %zu in all\n", ls->problems,
               r->total_problems);
    bool any_listed = false;
    for (size_t i = 0; i < r->nproblems; i++)
        any_listed = any_listed || coll_listing_run_problem(ls, &r->problems[i]);
    if (any_listed) {
        putchar('\n');
        for (size_t i = 0; i < r->nproblems; i++)
            if (coll_listing_run_problem(ls, &r->problems[i]))
                print_problems(&r->problems[i], 1, 2);
    }
    coll_inflight_print(&ls->inflight, r);
    bool any_calls = false;
    for (size_t gi = 0; gi < r->ngroups; gi++) {
        if (!ls->group[gi])
            continue;
        print_group(ls, &r->groups[gi]);
        any_calls = any_calls || r->groups[gi].nops > 0;
    }
    if (!any_calls)
        return;
    printf("\ncalls/rank: calls each rank made (\"9-10 !\": the ranks differ); bytes and times:"
           " all ranks together;\n"
           "graph: captured into a CUDA graph (runs at every replay, counted once); eager: the"
           " rest;\n"
           "grouped: issued between ncclGroupStart and ncclGroupEnd\n");
}

/* ---- JSON rendering ---- */

/* A group's problems, or with ls the directory's ones listed. */
static void json_problems(struct json_writer *w, const struct coll_problem *list, size_t count,
                          const struct coll_listing *ls)
{
    json_array_begin(w);
    for (size_t i = 0; i < count; i++) {
        const struct coll_problem *p = &list[i];
        if (ls && !coll_listing_run_problem(ls, p))
            continue;
        json_object_begin(w);
        json_kv_string(w, "kind", coll_problem_keys[p->kind]);
        json_kv_string(w, "message", p->message);
        json_kv_string(w, "op", p->op);
        json_kv_opt_int(w, "expected", p->has_expected, p->expected);
        json_key(w, "ranks");
        json_array_begin(w);
        for (size_t k = 0; k < p->nranks; k++) {
            json_object_begin(w);
            json_kv_opt_int(w, "rank", p->ranks[k].has_rank, p->ranks[k].rank);
            json_kv_opt_int(w, "pid", p->ranks[k].has_pid, p->ranks[k].pid);
            json_kv_int(w, "value", p->ranks[k].value);
            json_object_end(w);
        }
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
}

static void json_member(struct json_writer *w, const struct coll_report *r,
                        const struct coll_member *m)
{
    const struct coll_proc *p = &r->procs[m->proc];
    const struct nccl_comm *c = m->comm;
    char result[64];
    int64_t origin = coll_time_origin(p);
    json_object_begin(w);
    json_kv_opt_int(w, "rank", c->has_rank, c->rank);
    json_kv_opt_int(w, "nranks", c->has_nranks, c->nranks);
    json_kv_opt_int(w, "pid", p->has_pid, p->pid);
    json_kv_string(w, "host", p->host);
    json_kv_string(w, "file", p->trace->file);
    json_kv_int(w, "comm_id", c->comm_id);
    json_kv_address(w, "comm", (uint64_t)c->handle);
    json_kv_int(w, "device", c->device);
    json_kv_string(w, "gpu_uuid", m->uuid);
    json_kv_string(w, "api", c->api);
    json_kv_int(w, "init_result", c->init_result);
    json_kv_string(w, "init_result_name",
                   result_describe(result, sizeof(result), LAYER_NCCL, c->init_result));
    json_kv_int(w, "t_init_ns", c->t_init_ns);
    json_kv_int(w, "init_at_ns", gm_sub(c->t_init_ns, origin));
    json_kv_string(w, "end", c->aborted ? "abort" : c->destroyed ? "destroy" : NULL);
    json_kv_opt_int(w, "end_at_ns", c->destroyed, gm_sub(c->t_destroy_ns, origin));
    json_kv_opt_int(w, "lifetime_ns", c->destroyed, gm_sub(c->t_destroy_ns, c->t_init_ns));
    json_kv_opt_int(w, "finalize_at_ns", c->finalized, gm_sub(c->t_finalize_ns, origin));
    json_kv_opt_int(w, "parent_comm_id", c->has_parent, c->parent_comm_id);
    json_kv_opt_int(w, "color", c->has_color, c->color);
    json_kv_opt_int(w, "key", c->has_key, c->key);
    json_kv_int(w, "calls", c->calls);
    json_kv_int(w, "failed_calls", c->failed_calls);
    json_object_end(w);
}

static void json_rank_ref(struct json_writer *w, const struct coll_report *r,
                          const struct coll_member *m)
{
    const struct coll_proc *p = &r->procs[m->proc];
    json_kv_opt_int(w, "rank", m->comm->has_rank, m->comm->rank);
    json_kv_opt_int(w, "pid", p->has_pid, p->pid);
    json_kv_int(w, "comm_id", m->comm->comm_id);
}

static void json_op(struct json_writer *w, const struct coll_listing *ls,
                    const struct coll_group *g, const struct coll_op *op)
{
    const struct coll_report *r = ls->r;
    char label[UNITS_BUF];
    json_object_begin(w);
    json_kv_string(w, "op", op->op);
    json_kv_string(w, "kind", op->p2p ? "p2p" : "collective");
    json_kv_int(w, "calls", op->calls);
    json_kv_int(w, "failed", op->failed);
    json_kv_int(w, "min_calls_per_rank", op->min_calls);
    json_kv_int(w, "max_calls_per_rank", op->max_calls);
    if (op->p2p)
        json_kv_null(w, "ranks_agree");
    else
        json_kv_bool(w, "ranks_agree", op->min_calls == op->max_calls);
    json_key(w, "per_rank");
    json_array_begin(w);
    for (size_t k = 0; k < g->nmembers; k++) {
        const struct coll_member *m = &r->members[g->members[k]];
        if (!m->active || !ls->member[g->members[k]])
            continue;
        json_object_begin(w);
        json_rank_ref(w, r, m);
        json_kv_int(w, "calls", op->member_calls[k]);
        json_object_end(w);
    }
    json_array_end(w);
    json_key(w, "rows");
    json_array_begin(w);
    for (size_t ri = op->first_row; ri < op->first_row + op->nrows; ri++) {
        const struct coll_row *row = &g->rows[ri];
        const struct coll_cell *first = &g->cells[row->first_cell];
        json_object_begin(w);
        json_kv_string(w, "datatype", first->datatype);
        json_kv_string(w, "size_bucket", nccl_bucket_label(label, sizeof(label), first->bucket));
        json_kv_opt_int(w, "size_min", first->bucket >= 0, nccl_bucket_min(first->bucket));
        json_kv_opt_int(w, "size_max", first->bucket >= 0, nccl_bucket_max(first->bucket));
        json_kv_int(w, "calls", row->calls);
        json_kv_int(w, "min_calls_per_rank", row->min_calls);
        json_kv_int(w, "max_calls_per_rank", row->max_calls);
        if (op->p2p)
            json_kv_null(w, "ranks_agree");
        else
            json_kv_bool(w, "ranks_agree", row->min_calls == row->max_calls);
        json_kv_int(w, "bytes", row->bytes);
        json_kv_int(w, "dur_ns", row->dur_ns);
        json_kv_int(w, "mean_dur_ns", coll_mean(row->dur_ns, row->calls));
        json_kv_int(w, "max_dur_ns", row->max_dur_ns);
        json_kv_int(w, "captured", row->captured);
        json_kv_int(w, "eager", coll_nonneg(gm_sub(row->calls, row->captured)));
        json_kv_int(w, "in_group", row->in_group);
        json_kv_int(w, "failed", row->failed);
        json_key(w, "per_rank");
        json_array_begin(w);
        for (size_t ci = row->first_cell; ci < row->first_cell + row->ncells; ci++) {
            const struct coll_cell *c = &g->cells[ci];
            if (!ls->member[c->member])
                continue;
            json_object_begin(w);
            json_rank_ref(w, r, &r->members[c->member]);
            json_kv_int(w, "calls", c->calls);
            json_kv_int(w, "bytes", c->bytes);
            json_kv_int(w, "dur_ns", c->dur_ns);
            json_kv_int(w, "max_dur_ns", c->max_dur_ns);
            json_kv_int(w, "captured", c->captured);
            json_kv_int(w, "in_group", c->in_group);
            json_kv_int(w, "failed", c->failed);
            json_object_end(w);
        }
        json_array_end(w);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_end(w);
}

static void json_group(struct json_writer *w, const struct coll_listing *ls,
                       const struct coll_group *g)
{
    const struct coll_report *r = ls->r;
    json_object_begin(w);
    json_kv_string(w, "unique_id_hash", g->hash);
    json_kv_opt_int(w, "nranks", g->has_nranks, g->nranks);
    json_kv_int(w, "ranks_traced", g->ranks_traced);
    json_kv_int(w, "missing_ranks_count", g->missing_count);
    json_key(w, "missing_ranks");
    json_array_begin(w);
    for (size_t i = 0; i < g->nmissing; i++) {
        json_object_begin(w);
        json_kv_int(w, "first", g->missing[i].first);
        json_kv_int(w, "last", g->missing[i].last);
        json_object_end(w);
    }
    json_array_end(w);
    json_kv_bool(w, "complete", g->has_nranks && g->missing_count == 0);
    json_key(w, "parent");
    if (g->has_parent) {
        json_object_begin(w);
        json_kv_string(w, "unique_id_hash", g->parent_hash);
        json_kv_opt_int(w, "color", g->has_color, g->color);
        json_object_end(w);
    } else {
        json_null(w);
    }
    json_kv_int(w, "collective_calls", g->calls);
    json_kv_int(w, "p2p_calls", g->p2p_calls);
    json_kv_int(w, "failed_calls", g->failed);
    json_key(w, "members");
    json_array_begin(w);
    for (size_t k = 0; k < g->nmembers; k++)
        if (ls->member[g->members[k]])
            json_member(w, r, &r->members[g->members[k]]);
    json_array_end(w);
    json_key(w, "ops");
    json_array_begin(w);
    for (size_t o = 0; o < g->nops; o++)
        json_op(w, ls, g, &g->ops[o]);
    json_array_end(w);
    json_key(w, "p2p");
    json_array_begin(w);
    for (size_t i = 0; i < g->npairs; i++) {
        const struct coll_pair *p = &g->pairs[i];
        if (!pair_listed(ls, g, p))
            continue;
        json_object_begin(w);
        json_kv_int(w, "from_rank", p->from);
        json_kv_int(w, "to_rank", p->to);
        json_kv_opt_int(w, "sends", p->sender_traced, p->sends);
        json_kv_opt_int(w, "send_bytes", p->sender_traced, p->send_bytes);
        json_kv_opt_int(w, "recvs", p->receiver_traced, p->recvs);
        json_kv_opt_int(w, "recv_bytes", p->receiver_traced, p->recv_bytes);
        if (p->sender_traced && p->receiver_traced)
            json_kv_bool(w, "matched", p->sends == p->recvs);
        else
            json_kv_null(w, "matched");
        json_object_end(w);
    }
    json_array_end(w);
    json_key(w, "problems");
    json_problems(w, g->problems, g->nproblems, NULL);
    json_object_end(w);
}

static void print_json(const struct coll_listing *ls)
{
    const struct coll_report *r = ls->r;
    struct json_writer w;
    json_init(&w, stdout);
    json_object_begin(&w);
    json_kv_string(&w, "cutrace_version", CUTRACE_VERSION);
    json_kv_string(&w, "report", "collectives");
    json_kv_string(&w, "path", r->path);
    gm_clocks_json(&w, &r->model);
    json_key(&w, "processes");
    json_array_begin(&w);
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct coll_proc *p = &r->procs[i];
        if (!ls->proc[i])
            continue;
        json_object_begin(&w);
        json_kv_string(&w, "file", p->trace->file);
        json_kv_opt_int(&w, "pid", p->has_pid, p->pid);
        json_kv_string(&w, "host", p->host);
        json_kv_opt_int(&w, "nccl_version", p->nccl.has_version, p->nccl.version);
        json_kv_uint(&w, "communicator_count", p->nccl.ncomms);
        json_kv_int(&w, "calls", p->nccl.calls);
        json_kv_int(&w, "failed_calls", p->nccl.failed_calls);
        json_kv_int(&w, "unattributed_calls", p->nccl.unattributed_calls);
        json_key(&w, "unattributed");
        json_array_begin(&w);
        for (size_t o = 0; o < p->norphans; o++) {
            json_object_begin(&w);
            json_kv_string(&w, "op", p->orphans[o].op);
            json_kv_int(&w, "calls", p->orphans[o].calls);
            json_object_end(&w);
        }
        json_array_end(&w);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_key(&w, "communicators");
    json_array_begin(&w);
    for (size_t gi = 0; gi < r->ngroups; gi++)
        if (ls->group[gi])
            json_group(&w, ls, &r->groups[gi]);
    json_array_end(&w);
    json_key(&w, "problems");
    json_problems(&w, r->problems, r->nproblems, ls);
    json_key(&w, "totals");
    json_object_begin(&w);
    json_kv_uint(&w, "processes", r->nprocs);
    json_kv_uint(&w, "communicators", r->ngroups);
    json_kv_uint(&w, "members", r->nmembers);
    json_kv_int(&w, "collective_calls", r->collective_calls);
    json_kv_int(&w, "p2p_calls", r->p2p_calls);
    json_kv_int(&w, "failed_calls", r->failed_calls);
    json_kv_int(&w, "unattributed_calls", r->unattributed_calls);
    json_kv_uint(&w, "problems", r->total_problems);
    json_object_end(&w);
    /* After the totals, where the keys of older reports end. */
    json_key(&w, "in_flight");
    coll_inflight_json(&w, &ls->inflight, r);
    json_object_end(&w);
    json_finish(&w);
}

/* ---- CSV rendering ---- */

/* One row per communicator listed. */
static void csv_communicators(const struct coll_listing *ls, struct csv_writer *w)
{
    static const char *const head[] = {
        "unique_id_hash", "nranks",           "ranks_traced",
        "missing_ranks",  "complete",         "parent_unique_id_hash",
        "color",          "collective_calls", "p2p_calls",
        "failed_calls",   "problems"};
    csv_begin(w, stdout, head, sizeof(head) / sizeof(head[0]));
    for (size_t gi = 0; gi < ls->r->ngroups; gi++) {
        const struct coll_group *g = &ls->r->groups[gi];
        if (!ls->group[gi])
            continue;
        csv_string(w, g->hash);
        csv_opt_int(w, g->has_nranks, g->nranks);
        csv_int(w, g->ranks_traced);
        csv_int(w, g->missing_count);
        csv_int(w, g->has_nranks && g->missing_count == 0);
        csv_string(w, g->has_parent ? g->parent_hash : NULL);
        csv_opt_int(w, g->has_parent && g->has_color, g->color);
        csv_int(w, g->calls);
        csv_int(w, g->p2p_calls);
        csv_int(w, g->failed);
        csv_uint(w, g->nproblems);
        csv_end_row(w);
    }
}

/* One row per rank listed of each communicator. */
static void csv_members(const struct coll_listing *ls, struct csv_writer *w)
{
    static const char *const head[] = {
        "unique_id_hash", "rank",        "nranks",           "pid",
        "host",           "file",        "comm_id",          "device",
        "gpu_uuid",       "init_result", "init_result_name", "end",
        "lifetime_ns",    "calls",       "failed_calls"};
    csv_begin(w, stdout, head, sizeof(head) / sizeof(head[0]));
    const struct coll_report *r = ls->r;
    char result[64];
    for (size_t gi = 0; gi < r->ngroups; gi++) {
        const struct coll_group *g = &r->groups[gi];
        for (size_t k = 0; k < g->nmembers; k++) {
            if (!ls->member[g->members[k]])
                continue;
            const struct coll_member *m = &r->members[g->members[k]];
            const struct coll_proc *p = &r->procs[m->proc];
            const struct nccl_comm *c = m->comm;
            csv_string(w, g->hash);
            csv_opt_int(w, c->has_rank, c->rank);
            csv_opt_int(w, c->has_nranks, c->nranks);
            csv_opt_int(w, p->has_pid, p->pid);
            csv_string(w, p->host);
            csv_string(w, p->trace->file);
            csv_int(w, c->comm_id);
            csv_opt_int(w, c->device >= 0, c->device);
            csv_string(w, m->uuid);
            csv_int(w, c->init_result);
            csv_string(w, result_describe(result, sizeof(result), LAYER_NCCL, c->init_result));
            csv_string(w, c->aborted ? "abort" : c->destroyed ? "destroy" : NULL);
            csv_opt_int(w, c->destroyed, gm_sub(c->t_destroy_ns, c->t_init_ns));
            csv_int(w, c->calls);
            csv_int(w, c->failed_calls);
            csv_end_row(w);
        }
    }
}

/* One row per op, datatype and size of each communicator listed: all its
 * ranks together, as in the text. */
static void csv_ops(const struct coll_listing *ls, struct csv_writer *w)
{
    static const char *const head[] = {"unique_id_hash",
                                       "op",
                                       "kind",
                                       "datatype",
                                       "size_bucket",
                                       "size_min",
                                       "size_max",
                                       "calls",
                                       "min_calls_per_rank",
                                       "max_calls_per_rank",
                                       "ranks_agree",
                                       "bytes",
                                       "dur_ns",
                                       "mean_dur_ns",
                                       "max_dur_ns",
                                       "captured",
                                       "eager",
                                       "in_group",
                                       "failed"};
    csv_begin(w, stdout, head, sizeof(head) / sizeof(head[0]));
    char label[UNITS_BUF];
    for (size_t gi = 0; gi < ls->r->ngroups; gi++) {
        const struct coll_group *g = &ls->r->groups[gi];
        if (!ls->group[gi])
            continue;
        for (size_t o = 0; o < g->nops; o++) {
            const struct coll_op *op = &g->ops[o];
            for (size_t ri = op->first_row; ri < op->first_row + op->nrows; ri++) {
                const struct coll_row *row = &g->rows[ri];
                const struct coll_cell *first = &g->cells[row->first_cell];
                csv_string(w, g->hash);
                csv_string(w, op->op);
                csv_string(w, op->p2p ? "p2p" : "collective");
                csv_string(w, first->datatype);
                csv_string(w, nccl_bucket_label(label, sizeof(label), first->bucket));
                csv_opt_int(w, first->bucket >= 0, nccl_bucket_min(first->bucket));
                csv_opt_int(w, first->bucket >= 0, nccl_bucket_max(first->bucket));
                csv_int(w, row->calls);
                csv_int(w, row->min_calls);
                csv_int(w, row->max_calls);
                csv_opt_int(w, !op->p2p, row->min_calls == row->max_calls);
                csv_int(w, row->bytes);
                csv_int(w, row->dur_ns);
                csv_int(w, coll_mean(row->dur_ns, row->calls));
                csv_int(w, row->max_dur_ns);
                csv_int(w, row->captured);
                csv_int(w, coll_nonneg(gm_sub(row->calls, row->captured)));
                csv_int(w, row->in_group);
                csv_int(w, row->failed);
                csv_end_row(w);
            }
        }
    }
}

/* One row per point-to-point pair with a rank listed. */
static void csv_pairs(const struct coll_listing *ls, struct csv_writer *w)
{
    static const char *const head[] = {"unique_id_hash", "from_rank", "to_rank",    "sends",
                                       "send_bytes",     "recvs",     "recv_bytes", "matched"};
    csv_begin(w, stdout, head, sizeof(head) / sizeof(head[0]));
    for (size_t gi = 0; gi < ls->r->ngroups; gi++) {
        const struct coll_group *g = &ls->r->groups[gi];
        for (size_t i = 0; i < g->npairs; i++) {
            const struct coll_pair *p = &g->pairs[i];
            if (!ls->group[gi] || !pair_listed(ls, g, p))
                continue;
            csv_string(w, g->hash);
            csv_int(w, p->from);
            csv_int(w, p->to);
            csv_opt_int(w, p->sender_traced, p->sends);
            csv_opt_int(w, p->sender_traced, p->send_bytes);
            csv_opt_int(w, p->receiver_traced, p->recvs);
            csv_opt_int(w, p->receiver_traced, p->recv_bytes);
            csv_opt_int(w, p->sender_traced && p->receiver_traced, p->sends == p->recvs);
            csv_end_row(w);
        }
    }
}

static void csv_problem(struct csv_writer *w, const char *hash, const struct coll_problem *p)
{
    csv_string(w, hash);
    csv_string(w, coll_problem_keys[p->kind]);
    csv_string(w, p->op);
    csv_opt_int(w, p->has_expected, p->expected);
    char *ranks = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&ranks, &len);
    const char *sep = ""; /* the ranks named, as "1 3" */
    for (size_t k = 0; out && k < p->nranks; k++)
        if (p->ranks[k].has_rank) {
            fprintf(out, "%s%" PRId64, sep, p->ranks[k].rank);
            sep = " ";
        }
    if (out)
        fclose(out);
    csv_string(w, ranks);
    free(ranks);
    csv_string(w, p->message);
    csv_end_row(w);
}

/* Every problem listed: the directory's (no communicator), then each
 * communicator's. */
static void csv_problems(const struct coll_listing *ls, struct csv_writer *w)
{
    static const char *const head[] = {"unique_id_hash", "kind",  "op",
                                       "expected",       "ranks", "message"};
    csv_begin(w, stdout, head, sizeof(head) / sizeof(head[0]));
    const struct coll_report *r = ls->r;
    for (size_t i = 0; i < r->nproblems; i++)
        if (coll_listing_run_problem(ls, &r->problems[i]))
            csv_problem(w, NULL, &r->problems[i]);
    for (size_t gi = 0; gi < r->ngroups; gi++)
        for (size_t i = 0; ls->group[gi] && i < r->groups[gi].nproblems; i++)
            csv_problem(w, r->groups[gi].hash, &r->groups[gi].problems[i]);
}

/* The writers of csv_tables, in its order. */
static void (*const csv_writers[])(const struct coll_listing *, struct csv_writer *) = {
    [CSV_COMMUNICATORS] = csv_communicators,
    [CSV_MEMBERS] = csv_members,
    [CSV_OPS] = csv_ops,
    [CSV_PAIRS] = csv_pairs,
    [CSV_PROBLEMS] = csv_problems,
};

static void print_csv(const struct coll_listing *ls, size_t table)
{
    assert(table < sizeof(csv_writers) / sizeof(csv_writers[0]) && csv_tables[table]);
    struct csv_writer w;
    csv_writers[table](ls, &w);
}

/* ---- the command ---- */

int cmd_collectives(int argc, char **argv)
{
    struct cli_report_opts o;
    const char *path;
    int parsed = cli_report_parse(argc, argv, usage, csv_tables, &o, &path);
    if (parsed != CLI_PARSED)
        return parsed;

    struct trace_set set;
    if (trace_set_open_paths(&set, o.paths, o.npaths) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct coll_report report;
    int status = CLI_EXIT_OK;
    if (coll_build(&report, &set, set.path) != 0) {
        status = CLI_EXIT_BAD_INPUT;
    } else {
        struct gm_filter f;
        status = gm_filter_init(&f, &report.model, &o, "collectives");
        if (status == CLI_EXIT_OK) {
            struct coll_listing ls;
            coll_listing_init(&ls, &report, &f);
            if (o.format == CLI_FORMAT_JSON)
                print_json(&ls);
            else if (o.format == CLI_FORMAT_CSV)
                print_csv(&ls, o.csv_table);
            else
                print_text(&ls);
            /* A call that never returned is a problem too: the run hung or died in it. */
            if (o.fail_on_problem && (ls.problems > 0 || coll_inflight_any(&ls.inflight)))
                status = CLI_EXIT_PROBLEM;
            coll_listing_free(&ls);
            if (fflush(stdout) != 0 || ferror(stdout)) {
                cli_error(NULL, "cannot write the report to standard output");
                status = CLI_EXIT_BAD_INPUT;
            }
        }
        gm_filter_free(&f);
    }
    coll_free(&report);
    trace_set_close(&set);
    return status;
}
