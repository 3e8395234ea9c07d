/*
 * recover.c - `cutrace recover DIR|FILE.db [--json]`: folds the crash
 * buffers (.ring files) that killed processes left beside their traces into
 * those traces, and says what it did for each (recover.h does the work).
 *
 * Then it cleans what processes killed while creating their trace files
 * left (leftovers.h) and says so, one line each.
 *
 * Every report folds rings by itself before reading; this command exists to
 * do it explicitly, to see what was recovered, and to fold where a report
 * could not (it fails loudly where a report only warns).
 */
#include "cli.h"
#include "out/csv.h"
#include "out/json.h"
#include "recover/leftovers.h"
#include "recover/recover.h"
#include "out/table.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TEXT_MAX_COLUMNS 300 /* longer than any name or message of a ring */

static const char usage[] =
    "usage: cutrace recover [options] DIR|FILE.db\n"
    "\n"
    "Fold the crash buffers of killed processes into their traces: for every\n"
    "*.ring file in DIR (or the ring beside FILE.db), add the records that had\n"
    "not reached the trace, note how the process ended (meta end_state\n"
    "'killed' unless the ring says otherwise) and delete the ring. A ring of a\n"
    "process that is still running is left alone. Then clean what processes\n"
    "killed while creating their traces left: remove their .db.tmp and .ring.tmp\n"
    "files, and mark a trace with no ring that still says running 'killed',\n"
    "once its process is gone. Running it again is a no-op. Reports (cutrace\n"
    "summary) do the same by themselves before reading.\n"
    "\n"
    "options:\n" CLI_FORMAT_HELP CLI_HELP_HELP "\n"
    "Tables for --csv: rings (one row per ring), leftovers (one row per file cleaned).\n"
    "\n" CLI_EXIT_HELP("a ring was folded or a trace marked killed: a\n"
                       "     process of the run died without closing its trace\n"
                       "exit 0 also means every ring was folded or skipped as live; 1 also a ring\n"
                       "or trace that could not be written, or a leftover not removed");

static const char *const csv_tables[] = {"rings", "leftovers", NULL};

/* How the rings and leftovers are reported: text, JSON, or a CSV table. */
struct output {
    enum cli_format format;
    size_t csv_table; /* 0 rings, 1 leftovers */
    struct json_writer json;
    struct csv_writer csv;
};

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static const char *status_key(enum recover_status status)
{
    switch (status) {
    case RECOVER_FOLDED:
        return "recovered";
    case RECOVER_LIVE:
        return "live";
    case RECOVER_GONE:
        return "gone";
    case RECOVER_NOT_FOLDED:
        return "not_folded";
    case RECOVER_BAD:
        return "error";
    }
    return "error";
}

/* Names and messages from the directory and the ring's header, made
 * terminal-safe (control characters and invalid UTF-8 print as '?'). */
static void print_safe(const char *text)
{
    text_print(stdout, text, TEXT_MAX_COLUMNS, 0);
}

/* The one line of text for a ring handled without error. */
static void print_text(const struct recover_result *r)
{
    switch (r->status) {
    case RECOVER_FOLDED: {
        fputs("recovered ", stdout);
        print_safe(base_name(r->db_path));
        printf(": %" PRId64 " records from its ring", r->new_records);
        int64_t already = (int64_t)r->ring_records - r->new_records;
        if (already > 0)
            printf(", %" PRId64 " already in it", already);
        if (r->created_db)
            fputs(", into a trace made from the ring's header", stdout);
        if (r->inflight_records > 0)
            printf(", %" PRId64 " call%s it never returned from", r->inflight_records,
                   r->inflight_records == 1 ? "" : "s");
        printf(" (process %" PRId64 ", ended: ", r->pid);
        print_safe(r->end_state ? r->end_state : "?");
        putchar(')');
        if (r->writer_error) {
            fputs("; trace stopped early: ", stdout);
            print_safe(r->writer_error);
            printf(", after seq %" PRId64, r->writer_stopped_after);
        }
        putchar('\n');
        break;
    }
    case RECOVER_LIVE:
        fputs("skipped ", stdout);
        print_safe(base_name(r->ring_path));
        if (r->pid > 0)
            printf(": process %" PRId64 " still running; its ring is left alone\n", r->pid);
        else
            fputs(": its process is still running; its ring is left alone\n", stdout);
        break;
    case RECOVER_GONE:
        fputs("skipped ", stdout);
        print_safe(base_name(r->ring_path));
        fputs(": already folded by another cutrace\n", stdout);
        break;
    case RECOVER_NOT_FOLDED:
    case RECOVER_BAD:
        break; /* stderr only */
    }
}

static void print_json_ring(struct json_writer *w, const struct recover_result *r)
{
    bool folded = r->status == RECOVER_FOLDED;
    json_object_begin(w);
    json_kv_string(w, "ring", base_name(r->ring_path));
    json_kv_string(w, "db", r->db_path ? base_name(r->db_path) : NULL);
    json_kv_string(w, "status", status_key(r->status));
    bool failed = r->status == RECOVER_BAD || r->status == RECOVER_NOT_FOLDED;
    json_kv_string(w, "error", failed ? r->error : NULL);
    if (failed)
        json_kv_string(w, "error_file", r->error_path);
    else
        json_kv_null(w, "error_file");
    json_kv_opt_int(w, "pid", r->pid > 0, r->pid);
    json_kv_opt_int(w, "start_wall_ns", r->has_header, (int64_t)r->start_wall_ns);
    json_kv_opt_int(w, "start_mono_ns", r->has_header, (int64_t)r->start_mono_ns);
    json_kv_string(w, "boot_id", r->boot_id);
    if (folded)
        json_kv_bool(w, "created_db", r->created_db);
    else
        json_kv_null(w, "created_db");
    json_kv_opt_int(w, "ring_records", folded, (int64_t)r->ring_records);
    json_kv_opt_int(w, "new_records", folded, r->new_records);
    json_kv_opt_int(w, "already_in_trace", folded, (int64_t)r->ring_records - r->new_records);
    json_kv_opt_int(w, "recovered_records", folded, r->recovered_total);
    json_kv_string(w, "end_state_before", folded ? r->end_state_before : NULL);
    json_kv_string(w, "end_state", folded ? r->end_state : NULL);
    json_kv_string(w, "writer_error", r->writer_error);
    json_kv_opt_int(w, "writer_stopped_after", r->writer_error != NULL, r->writer_stopped_after);
    json_kv_bool(w, "ring_deleted", folded && !r->unlink_error);
    json_object_end(w);
}

/* ---- leftovers of trace creation ---- */

static const char *leftover_kind_key(enum leftover_kind kind)
{
    switch (kind) {
    case LEFTOVER_DB_TMP:
        return "db_tmp";
    case LEFTOVER_RING_TMP:
        return "ring_tmp";
    case LEFTOVER_TRACE:
        return "trace";
    }
    return "trace";
}

static const char *leftover_status_key(const struct leftover *l)
{
    switch (l->status) {
    case LEFTOVER_CLEANED:
        return l->kind == LEFTOVER_TRACE ? "marked" : "removed";
    case LEFTOVER_LIVE:
        return "live";
    case LEFTOVER_FOREIGN:
        return "foreign";
    case LEFTOVER_FAILED:
    case LEFTOVER_NONE:
        break;
    }
    return "error";
}

/* The one line of text for a leftover handled without error. */
static void print_leftover_text(const struct leftover *l)
{
    const char *name = base_name(l->path);
    switch (l->status) {
    case LEFTOVER_CLEANED:
        if (l->kind == LEFTOVER_TRACE) {
            fputs("marked ", stdout);
            print_safe(name);
            printf(" ended: killed (process %" PRId64 " %s and left no ring: ", l->pid, l->why);
            print_safe(l->end_note);
            fputs(")\n", stdout);
            break;
        }
        fputs("removed ", stdout);
        print_safe(name);
        if (l->side_files[0]) {
            fputs(" (and its ", stdout);
            print_safe(l->side_files);
            putchar(')');
        }
        printf(": the unfinished %s of process %" PRId64 ", which %s\n",
               l->kind == LEFTOVER_DB_TMP ? "trace" : "crash buffer", l->pid, l->why);
        break;
    case LEFTOVER_LIVE:
        fputs("skipped ", stdout);
        print_safe(name);
        printf(": process %" PRId64 " may still be running; left alone\n", l->pid);
        break;
    case LEFTOVER_FOREIGN:
        fputs("skipped ", stdout);
        print_safe(name);
        fputs(": made on ", stdout);
        if (l->host) {
            fputs("host ", stdout);
            print_safe(l->host);
        } else {
            fputs("another host", stdout);
        }
        fputs(", where its process may still run; left alone\n", stdout);
        break;
    case LEFTOVER_NONE:
    case LEFTOVER_FAILED:
        break; /* nothing, or stderr only */
    }
}

static void print_leftover_json(struct json_writer *w, const struct leftover *l)
{
    bool cleaned = l->status == LEFTOVER_CLEANED;
    json_object_begin(w);
    json_kv_string(w, "file", base_name(l->path));
    json_kv_string(w, "kind", leftover_kind_key(l->kind));
    json_kv_string(w, "status", leftover_status_key(l));
    json_kv_string(w, "error", l->status == LEFTOVER_FAILED ? l->error : NULL);
    json_kv_opt_int(w, "pid", l->pid > 0, l->pid);
    json_kv_string(w, "host", l->host);
    json_kv_string(w, "why_gone", l->why);
    json_kv_string(w, "side_files_removed", cleaned && l->side_files[0] ? l->side_files : NULL);
    bool marked = cleaned && l->kind == LEFTOVER_TRACE;
    json_kv_string(w, "end_state", marked ? "killed" : NULL);
    json_kv_string(w, "end_note", marked ? l->end_note : NULL);
    json_object_end(w);
}

/* Cleans every leftover of path, reporting each; returns how many were
 * reported, and sets *failures to how many could not be cleaned. */
static void print_leftover_csv(struct csv_writer *w, const struct leftover *l)
{
    bool marked = l->status == LEFTOVER_CLEANED && l->kind == LEFTOVER_TRACE;
    csv_string(w, base_name(l->path));
    csv_string(w, leftover_kind_key(l->kind));
    csv_string(w, leftover_status_key(l));
    csv_opt_int(w, l->pid > 0, l->pid);
    csv_string(w, marked ? "killed" : NULL);
    csv_string(w, l->status == LEFTOVER_FAILED ? l->error : NULL);
    csv_end_row(w);
}

static void print_ring_csv(struct csv_writer *w, const struct recover_result *r)
{
    bool folded = r->status == RECOVER_FOLDED;
    bool failed = r->status == RECOVER_BAD || r->status == RECOVER_NOT_FOLDED;
    csv_string(w, base_name(r->ring_path));
    csv_string(w, r->db_path ? base_name(r->db_path) : NULL);
    csv_string(w, status_key(r->status));
    csv_opt_int(w, r->pid > 0, r->pid);
    if (folded) {
        csv_uint(w, r->ring_records);
        csv_int(w, r->new_records);
        csv_string(w, r->end_state);
    } else {
        csv_null(w);
        csv_null(w);
        csv_null(w);
    }
    csv_string(w, failed ? r->error : NULL);
    csv_end_row(w);
}

/* Cleans every leftover of path, reporting each; returns how many were
 * reported, and sets *failures to how many could not be cleaned and
 * *marked to how many traces were marked killed. */
static size_t recover_leftovers(const char *path, struct output *o, size_t *failures,
                                size_t *marked)
{
    struct leftover *items;
    size_t count, reported = 0;
    char err[256];
    *failures = 0;
    *marked = 0;
    if (leftovers_find(path, &items, &count, err, sizeof(err)) != 0) {
        cli_error(path, "%s", err);
        (*failures)++;
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        struct leftover *l = &items[i];
        leftover_clean(l);
        if (l->status == LEFTOVER_NONE)
            continue;
        reported++;
        if (l->status == LEFTOVER_FAILED) {
            (*failures)++;
            if (l->read_only)
                cli_error(l->path, "%s; run cutrace recover where it is writable", l->error);
            else
                cli_error(l->path, "%s", l->error);
        }
        if (l->status == LEFTOVER_CLEANED && l->kind == LEFTOVER_TRACE)
            (*marked)++;
        if (o->format == CLI_FORMAT_JSON)
            print_leftover_json(&o->json, l);
        else if (o->format == CLI_FORMAT_CSV && o->csv_table == 1)
            print_leftover_csv(&o->csv, l);
        else if (o->format == CLI_FORMAT_TEXT)
            print_leftover_text(l);
    }
    leftovers_free(items, count);
    return reported;
}

/* Reports a failed ring on stderr, one line; returns true if it failed. */
static bool report_failure(const struct recover_result *r)
{
    switch (r->status) {
    case RECOVER_BAD:
        cli_error(r->error_path, "%s", r->error);
        return true;
    case RECOVER_NOT_FOLDED:
        if (r->read_only)
            cli_error(r->ring_path,
                      "not folded: %s; run cutrace recover where the directory is writable",
                      r->error);
        else
            cli_error(r->ring_path, "not folded: %s", r->error);
        return true;
    case RECOVER_FOLDED:
        if (r->unlink_error) {
            cli_error(r->ring_path, "folded into %s, but the ring could not be deleted: %s",
                      base_name(r->db_path), r->unlink_error);
            return true;
        }
        return false;
    case RECOVER_LIVE:
    case RECOVER_GONE:
        return false;
    }
    return true;
}

int cmd_recover(int argc, char **argv)
{
    static const struct option options[] = {
        CLI_FORMAT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct cli_report_opts rep;
    cli_report_init(&rep);
    int c;
    while ((c = cli_getopt(argc, argv, "h", options, usage)) != -1) {
        if (cli_report_option(&rep, c, optarg))
            continue;
        return c == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    if (optind >= argc)
        return cli_usage_error(argv[0], "missing trace directory or file");
    if (argc - optind > 1)
        return cli_usage_error(argv[0], "one trace directory or file expected, got %d arguments",
                               argc - optind);
    int finished = cli_report_finish(&rep, argv[0], csv_tables);
    if (finished != CLI_PARSED)
        return finished;
    const char *path = argv[optind];
    bool json = rep.format == CLI_FORMAT_JSON;
    struct output out = {.format = rep.format, .csv_table = rep.csv_table};

    struct stat st;
    bool exists = stat(path, &st) == 0;
    size_t len = strlen(path);
    bool db_name = len > 3 && strcmp(path + len - 3, ".db") == 0;
    if (!exists && (errno != ENOENT || !db_name)) {
        if (errno == ENOENT)
            cli_error(path, "no such file or directory");
        else
            cli_error(path, "cannot open: %s", strerror(errno));
        return CLI_EXIT_BAD_INPUT;
    }
    if (exists && !S_ISDIR(st.st_mode) && !(S_ISREG(st.st_mode) && db_name)) {
        cli_error(path, "not a trace directory or .db trace file");
        return CLI_EXIT_BAD_INPUT;
    }

    char **rings;
    size_t count;
    char err[256];
    if (recover_find_rings(path, &rings, &count, err, sizeof(err)) != 0) {
        cli_error(path, "%s", err);
        return CLI_EXIT_BAD_INPUT;
    }
    if (!exists && count == 0) {
        cli_error(path, "no such file or directory");
        return CLI_EXIT_BAD_INPUT;
    }

    int status = CLI_EXIT_OK;
    struct json_writer *w = &out.json;
    static const char *const ring_head[] = {"ring",         "db",          "status",    "pid",
                                            "ring_records", "new_records", "end_state", "error"};
    static const char *const leftover_head[] = {"file", "kind",      "status",
                                                "pid",  "end_state", "error"};
    if (rep.format == CLI_FORMAT_CSV && rep.csv_table == 0)
        csv_begin(&out.csv, stdout, ring_head, sizeof(ring_head) / sizeof(ring_head[0]));
    else if (rep.format == CLI_FORMAT_CSV)
        csv_begin(&out.csv, stdout, leftover_head,
                  sizeof(leftover_head) / sizeof(leftover_head[0]));
    if (json) {
        json_init(w, stdout);
        json_object_begin(w);
        json_kv_string(w, "cutrace_version", CUTRACE_VERSION);
        json_kv_string(w, "report", "recover");
        json_kv_string(w, "path", path);
        json_key(w, "rings");
        json_array_begin(w);
    }
    int64_t folded = 0, live = 0, failed = 0, new_records = 0;
    for (size_t i = 0; i < count; i++) {
        struct recover_result r;
        recover_ring(rings[i], &r);
        if (report_failure(&r)) {
            status = CLI_EXIT_BAD_INPUT;
            failed++;
        }
        if (r.status == RECOVER_FOLDED) {
            folded++;
            new_records += r.new_records;
        } else if (r.status == RECOVER_LIVE) {
            live++;
        }
        if (json)
            print_json_ring(w, &r);
        else if (rep.format == CLI_FORMAT_CSV && rep.csv_table == 0)
            print_ring_csv(&out.csv, &r);
        else if (rep.format == CLI_FORMAT_TEXT)
            print_text(&r);
        recover_result_free(&r);
    }
    recover_free_rings(rings, count);
    if (json) {
        json_array_end(w);
        json_key(w, "leftovers");
        json_array_begin(w);
    }
    size_t leftover_failures, marked;
    size_t leftovers = recover_leftovers(path, &out, &leftover_failures, &marked);
    if (leftover_failures)
        status = CLI_EXIT_BAD_INPUT;
    else if (status == CLI_EXIT_OK && rep.fail_on_problem && (folded > 0 || marked > 0))
        status = CLI_EXIT_PROBLEM;
    if (rep.format == CLI_FORMAT_TEXT && count == 0 && leftovers == 0)
        printf("nothing to recover in %s (no .ring files)\n", path);
    if (json) {
        json_array_end(w);
        json_key(w, "totals");
        json_object_begin(w);
        json_kv_uint(w, "rings", count);
        json_kv_int(w, "recovered", folded);
        json_kv_int(w, "live", live);
        json_kv_int(w, "failed", failed);
        json_kv_int(w, "new_records", new_records);
        json_object_end(w);
        json_object_end(w);
        json_finish(w);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(NULL, "cannot write the report to standard output");
        status = CLI_EXIT_BAD_INPUT;
    }
    return status;
}
