/*
 * ls.c - `cutrace ls DIR`: one line per traced process, to find the trace
 * one wants before asking a report about it: host, pid, its NCCL rank (as
 * every report and --rank know it; else the launcher's RANK, in
 * parentheses), the launcher's LOCAL_RANK and WORLD_SIZE, the
 * GPUs it used (their index in every report), how it ended, its calls, the
 * most GPU memory it held at once, and its command line, shortened to the
 * terminal. --json and --csv carry the raw numbers and the whole command
 * line. Everything comes from the run model (gm_load), like every report.
 * The exit status is the run manifest's for the process `cutrace run`
 * launched, else the one its trace recorded (meta exit_status).
 *
 * Given a directory of several runs (model/runs.h), it lists the runs
 * instead, one line each: where, when, how it ended, how many traces, what
 * was launched (a directory of one run is that run, as for every report).
 */
#include "cli.h"
#include "model/filter.h"
#include "model/gpumodel.h"
#include "model/manifest.h"
#include "model/runs.h"
#include "model/traceset.h"
#include "out/csv.h"
#include "out/json.h"
#include "out/table.h"
#include "out/units.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: cutrace ls [options] DIR...\n"
    "\n" CLI_PATHS_HELP "\n"
    "One line per traced process of DIR (the directory of one run of `cutrace\n"
    "run`, or one trace file): host, pid, rank (its NCCL rank, which --rank matches;\n"
    "else, in parentheses, the RANK its launcher set), LOCAL_RANK and WORLD_SIZE\n"
    "as the launcher set them (else the communicator's size), the GPUs\n"
    "it used (their index in every report), how it ended and its exit status\n"
    "(or the signal that killed it) where known, its calls, the most GPU memory\n"
    "it held at once, and its command line.\n"
    "\n"
    "Given a directory of several runs (the -o DIR of `cutrace run`; of one run\n"
    "with --csv=runs), one line per run: its directory, when it started, how it\n"
    "ended, its traces, its command. A directory of one run lists its processes.\n"
    "\n"
    "options:\n" CLI_FILTER_HELP CLI_FORMAT_HELP CLI_HELP_HELP "\n"
    "Tables for --csv: processes (one row per process listed), runs (one row\n"
    "per run of a directory of runs).\n"
    "\n" CLI_EXIT_HELP("a process or run listed was killed or is still running");

static const char *const csv_tables[] = {"processes", "runs", NULL};
#define CSV_PROCESSES 0
#define CSV_RUNS      1

/* How a process ended, in words: meta end_state after its ring was folded. */
static const char *ended(const struct gm_process *p)
{
    if (!p->end_state)
        return "running";
    if (strcmp(p->end_state, "exit") == 0)
        return "exited";
    if (strcmp(p->end_state, "_exit") == 0)
        return "exited (_exit)";
    if (strcmp(p->end_state, "exec") == 0)
        return "exec'd";
    if (strcmp(p->end_state, "killed") == 0)
        return "killed";
    return p->end_state;
}

static bool ended_cleanly(const struct gm_process *p)
{
    return p->exited;
}

/* How a process's exit is known: from the manifest (the process `cutrace
 * run` launched), from its own trace, or not at all. */
struct exit_info {
    const char *from; /* "manifest", "trace", NULL unknown */
    bool has_status, has_signal;
    int status, signal;
};

static struct exit_info exit_of(const struct gm_model *m, const struct gm_process *p)
{
    struct exit_info e = {0};
    const struct run_manifest *r = m->manifest;
    if (r && r->ended && manifest_launched(r, p->host, p->pid)) {
        e.from = "manifest";
        e.has_status = r->has_exit_status;
        e.status = r->exit_status;
        e.has_signal = r->has_signal;
        e.signal = r->signal;
    } else if (p->has_exit_status) {
        e.from = "trace";
        e.has_status = true;
        e.status = p->exit_status;
    }
    return e;
}

/* ended() with the exit status where known: "exited 3", "exited 3 (_exit)",
 * "killed by SIGKILL". Returns buf. */
static const char *ended_text(const struct gm_process *p, const struct exit_info *e, char *buf,
                              size_t size)
{
    const char *how = ended(p);
    bool by_exit = p->end_state && p->end_state[0] == '_';
    if (e->has_status && (!p->end_state || p->exited))
        snprintf(buf, size, "exited %d%s", e->status, by_exit ? " (_exit)" : "");
    else if (e->has_signal && sigabbrev_np(e->signal))
        snprintf(buf, size, "killed by SIG%s", sigabbrev_np(e->signal));
    else if (e->has_signal)
        snprintf(buf, size, "killed by signal %d", e->signal);
    else
        snprintf(buf, size, "%s", how);
    return buf;
}

/* The launcher's value of an integer variable (RANK=3), if recorded. */
static bool env_int(const struct gm_process *p, const char *name, int64_t *out)
{
    for (size_t i = 0; i < p->nenv; i++) {
        if (strcmp(p->env[i].name, name) != 0 || !p->env[i].value)
            continue;
        char *end;
        long long v = strtoll(p->env[i].value, &end, 10);
        if (end == p->env[i].value || *end)
            return false;
        *out = v;
        return true;
    }
    return false;
}

/* The most GPU memory (the GPU categories of docs/budget.md) the process had
 * live at once, over its own allocations and frees in effect order. */
static int64_t peak_gpu_bytes(const struct gm_process *p)
{
    int64_t live = 0, peak = 0;
    for (size_t i = 0; i < p->nevents; i++) {
        const struct gm_event *e = &p->events[i];
        if (e->type != GM_EV_ALLOC && e->type != GM_EV_FREE)
            continue;
        if (e->a < 0 || (size_t)e->a >= p->nallocs)
            continue;
        const struct gm_alloc *a = &p->allocs[e->a];
        if (a->category >= GM_GPU_CATEGORIES)
            continue;
        live = e->type == GM_EV_ALLOC ? gm_add(live, a->size) : gm_sub(live, a->size);
        if (live < 0)
            live = 0;
        if (live > peak)
            peak = live;
    }
    return peak;
}

struct row {
    uint32_t proc;
    bool has_rank, has_env_rank, has_local, has_world;
    int64_t rank, env_rank, local_rank, world;
    char gpus[64];
    int64_t peak;
};

static void fill_row(const struct gm_model *m, uint32_t proc, struct row *r)
{
    const struct gm_process *p = &m->procs[proc];
    r->proc = proc;
    int64_t nranks = -1;
    r->has_rank = gm_process_rank(p, &r->rank, &nranks);
    r->has_env_rank = env_int(p, "RANK", &r->env_rank);
    r->has_local = env_int(p, "LOCAL_RANK", &r->local_rank);
    r->has_world = env_int(p, "WORLD_SIZE", &r->world);
    if (!r->has_world && r->has_rank) {
        r->has_world = true;
        r->world = nranks;
    }
    size_t o = 0;
    r->gpus[0] = '\0';
    for (size_t i = 0; i < p->ngpus && o + 12 < sizeof(r->gpus); i++)
        o += (size_t)snprintf(r->gpus + o, sizeof(r->gpus) - o, "%s%" PRIu32, i ? "," : "",
                              p->gpus[i]);
    r->peak = peak_gpu_bytes(p);
}

static void print_text(const struct gm_model *m, const struct row *rows, size_t n, FILE *out)
{
    static const struct table_column columns[] = {
        {"HOST", TABLE_LEFT, 24},   {"PID", TABLE_RIGHT, 0},   {"RANK", TABLE_RIGHT, 0},
        {"LOCAL", TABLE_RIGHT, 0},  {"WORLD", TABLE_RIGHT, 0}, {"GPUS", TABLE_LEFT, 0},
        {"ENDED", TABLE_LEFT, 0},   {"CALLS", TABLE_RIGHT, 0}, {"PEAK GPU", TABLE_RIGHT, 0},
        {"COMMAND", TABLE_LEFT, 0},
    };
    struct table *t = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    for (size_t i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        const struct gm_process *p = &m->procs[r->proc];
        char buf[UNITS_BUF];
        table_cell(t, p->host[0] ? p->host : NULL);
        table_cellf(t, "%" PRId64, p->pid);
        if (r->has_rank)
            table_cellf(t, "%" PRId64, r->rank);
        else if (r->has_env_rank)
            table_cellf(t, "(%" PRId64 ")", r->env_rank);
        else
            table_cell(t, NULL);
        if (r->has_local)
            table_cellf(t, "%" PRId64, r->local_rank);
        else
            table_cell(t, NULL);
        if (r->has_world)
            table_cellf(t, "%" PRId64, r->world);
        else
            table_cell(t, NULL);
        table_cell(t, r->gpus[0] ? r->gpus : NULL);
        struct exit_info e = exit_of(m, p);
        char how[64];
        table_cell(t, ended_text(p, &e, how, sizeof how));
        table_cellf(t, "%" PRId64, p->calls);
        table_cell(t, format_bytes(buf, sizeof(buf), (uint64_t)r->peak));
        table_cell(t, p->cmdline[0] ? p->cmdline : NULL);
    }
    table_print(t, out, 0);
    table_free(t);
}

static void print_json(const struct gm_model *m, const char *path, const struct row *rows, size_t n,
                       FILE *out)
{
    struct json_writer w;
    json_init(&w, out);
    json_object_begin(&w);
    json_kv_string(&w, "report", "ls");
    json_kv_string(&w, "path", path);
    json_key(&w, "processes");
    json_array_begin(&w);
    for (size_t i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        const struct gm_process *p = &m->procs[r->proc];
        json_object_begin(&w);
        json_kv_string(&w, "file", p->trace->file);
        json_kv_string(&w, "host", p->host[0] ? p->host : NULL);
        json_kv_int(&w, "pid", p->pid);
        json_kv_opt_int(&w, "rank", r->has_rank, r->rank);
        json_kv_opt_int(&w, "env_rank", r->has_env_rank, r->env_rank);
        json_kv_opt_int(&w, "local_rank", r->has_local, r->local_rank);
        json_kv_opt_int(&w, "world_size", r->has_world, r->world);
        json_key(&w, "gpus");
        json_array_begin(&w);
        for (size_t g = 0; g < p->ngpus; g++)
            json_uint(&w, p->gpus[g]);
        json_array_end(&w);
        json_kv_string(&w, "end_state", p->end_state);
        json_kv_bool(&w, "ended_cleanly", ended_cleanly(p));
        json_kv_int(&w, "calls", p->calls);
        json_kv_int(&w, "peak_gpu_bytes", r->peak);
        json_kv_string(&w, "cmdline", p->cmdline);
        struct exit_info e = exit_of(m, p);
        json_kv_opt_int(&w, "exit_status", e.has_status, e.status);
        json_kv_opt_int(&w, "signal", e.has_signal, e.signal);
        json_kv_string(&w, "exit_from", e.from);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

static void print_csv(const struct gm_model *m, const struct row *rows, size_t n, FILE *out)
{
    static const char *const head[] = {
        "file", "host",      "pid",   "rank",           "env_rank", "local_rank",  "world_size",
        "gpus", "end_state", "calls", "peak_gpu_bytes", "cmdline",  "exit_status", "signal"};
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    for (size_t i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        const struct gm_process *p = &m->procs[r->proc];
        csv_string(&w, p->trace->file);
        csv_string(&w, p->host[0] ? p->host : NULL);
        csv_int(&w, p->pid);
        csv_opt_int(&w, r->has_rank, r->rank);
        csv_opt_int(&w, r->has_env_rank, r->env_rank);
        csv_opt_int(&w, r->has_local, r->local_rank);
        csv_opt_int(&w, r->has_world, r->world);
        csv_string(&w, r->gpus);
        csv_string(&w, p->end_state);
        csv_int(&w, p->calls);
        csv_int(&w, r->peak);
        csv_string(&w, p->cmdline);
        struct exit_info e = exit_of(m, p);
        csv_opt_int(&w, e.has_status, e.status);
        csv_opt_int(&w, e.has_signal, e.signal);
        csv_end_row(&w);
    }
}

/* ---- a directory of runs ---- */

static bool run_problem(const struct run_entry *r)
{
    return !r->manifest.ended || r->manifest.has_signal;
}

static void print_runs_text(const struct run_entry *runs, size_t n, FILE *out)
{
    static const struct table_column columns[] = {
        {"RUN", TABLE_LEFT, 0},     {"STARTED", TABLE_LEFT, 0}, {"ENDED", TABLE_LEFT, 0},
        {"TRACES", TABLE_RIGHT, 0}, {"COMMAND", TABLE_LEFT, 0},
    };
    struct table *t = table_new(columns, sizeof(columns) / sizeof(columns[0]));
    for (size_t i = 0; i < n; i++) {
        const struct run_manifest *m = &runs[i].manifest;
        char when[UNITS_BUF], how[64];
        /* Its name: the path is DIR/name, and a long DIR would crowd out the command. */
        const char *slash = strrchr(runs[i].path, '/');
        table_cell(t, slash ? slash + 1 : runs[i].path);
        table_cell(t, format_wall_time(when, sizeof when, m->start_wall_ns, 0));
        table_cell(t, manifest_ending(m, how, sizeof how));
        table_cellf(t, "%zu", runs[i].traces);
        table_cell(t, m->cmdline);
    }
    table_print(t, out, 0);
    table_free(t);
}

static void print_runs_json(const char *path, const struct run_entry *runs, size_t n, FILE *out)
{
    struct json_writer w;
    json_init(&w, out);
    json_object_begin(&w);
    json_kv_string(&w, "report", "ls");
    json_kv_string(&w, "path", path);
    json_key(&w, "runs");
    json_array_begin(&w);
    for (size_t i = 0; i < n; i++) {
        const struct run_manifest *m = &runs[i].manifest;
        json_object_begin(&w);
        json_kv_string(&w, "dir", runs[i].path);
        json_kv_string(&w, "host", m->host);
        json_kv_int(&w, "pid", m->pid);
        json_kv_int(&w, "start_wall_ns", m->start_wall_ns);
        json_kv_opt_int(&w, "end_wall_ns", m->ended, m->end_wall_ns);
        json_kv_opt_int(&w, "exit_status", m->has_exit_status, m->exit_status);
        json_kv_opt_int(&w, "signal", m->has_signal, m->signal);
        json_kv_uint(&w, "traces", runs[i].traces);
        json_kv_string(&w, "cmdline", m->cmdline);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

static void print_runs_csv(const struct run_entry *runs, size_t n, FILE *out)
{
    static const char *const head[] = {"dir",           "host",        "pid",
                                       "start_wall_ns", "end_wall_ns", "exit_status",
                                       "signal",        "traces",      "cmdline"};
    struct csv_writer w;
    csv_begin(&w, out, head, sizeof(head) / sizeof(head[0]));
    for (size_t i = 0; i < n; i++) {
        const struct run_manifest *m = &runs[i].manifest;
        csv_string(&w, runs[i].path);
        csv_string(&w, m->host);
        csv_int(&w, m->pid);
        csv_int(&w, m->start_wall_ns);
        csv_opt_int(&w, m->ended, m->end_wall_ns);
        csv_opt_int(&w, m->has_exit_status, m->exit_status);
        csv_opt_int(&w, m->has_signal, m->signal);
        csv_uint(&w, runs[i].traces);
        csv_string(&w, m->cmdline);
        csv_end_row(&w);
    }
}

static int finish_output(const struct cli_report_opts *o, bool problem)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(NULL, "cannot write the report to standard output");
        return CLI_EXIT_BAD_INPUT;
    }
    return o->fail_on_problem && problem ? CLI_EXIT_PROBLEM : CLI_EXIT_OK;
}

/* The runs of a directory of runs; its processes are one run's business. */
static int list_runs(const struct cli_report_opts *o, const char *path, struct run_entry *runs,
                     size_t n)
{
    if (cli_report_filtered(o))
        return cli_usage_error("ls", "%s holds runs; filters select the processes of one: name it",
                               path);
    if (o->format == CLI_FORMAT_CSV && o->csv_arg && o->csv_table != CSV_RUNS)
        return cli_usage_error("ls", "%s holds runs: its table is runs", path);
    bool problem = false;
    for (size_t i = 0; i < n; i++)
        problem |= run_problem(&runs[i]);
    if (o->format == CLI_FORMAT_JSON)
        print_runs_json(path, runs, n, stdout);
    else if (o->format == CLI_FORMAT_CSV)
        print_runs_csv(runs, n, stdout);
    else
        print_runs_text(runs, n, stdout);
    return finish_output(o, problem);
}

int cmd_ls(int argc, char **argv)
{
    struct cli_report_opts o;
    const char *path;
    int parsed = cli_report_parse(argc, argv, usage, csv_tables, &o, &path);
    if (parsed != CLI_PARSED)
        return parsed;
    struct run_entry *runs = NULL;
    /* Runs are listed for one directory of runs; several paths are one
     * run's, and a directory of runs among them is refused (runs.h). */
    ssize_t nruns = o.npaths == 1 ? runs_list(path, &runs) : 0;
    if (nruns < 0)
        return CLI_EXIT_BAD_INPUT;
    /* One run is read as the run, as every report reads it; --csv=runs
     * lists it as a run. */
    bool as_runs = nruns > 1 || (nruns == 1 && o.format == CLI_FORMAT_CSV && o.csv_arg &&
                                 o.csv_table == CSV_RUNS);
    if (as_runs) {
        int rc = list_runs(&o, path, runs, (size_t)nruns);
        runs_free(runs, (size_t)nruns);
        return rc;
    }
    runs_free(runs, nruns > 0 ? (size_t)nruns : 0);
    if (o.format == CLI_FORMAT_CSV && o.csv_table == CSV_RUNS)
        return cli_usage_error("ls", "%s is no directory of runs: its table is processes", path);
    struct trace_set set;
    struct gm_model m;
    if (gm_open_run(&m, &set, o.paths, o.npaths, 0) != 0)
        return CLI_EXIT_BAD_INPUT;
    struct gm_filter f;
    int status = gm_filter_init(&f, &m, &o, "ls");
    if (status == CLI_EXIT_OK) {
        struct row *rows = xcalloc(m.nprocs ? m.nprocs : 1, sizeof(*rows));
        size_t n = 0;
        bool problem = false;
        for (uint32_t i = 0; i < m.nprocs; i++) {
            if (!gm_filter_proc(&f, i))
                continue;
            fill_row(&m, i, &rows[n++]);
            problem |= !ended_cleanly(&m.procs[i]);
        }
        if (o.format == CLI_FORMAT_JSON)
            print_json(&m, path, rows, n, stdout);
        else if (o.format == CLI_FORMAT_CSV)
            print_csv(&m, rows, n, stdout);
        else
            print_text(&m, rows, n, stdout);
        free(rows);
        status = finish_output(&o, problem);
    }
    gm_filter_free(&f);
    gm_free(&m);
    trace_set_close(&set);
    return status;
}
