/*
 * sidefiles.c - warning about a trace copied without its -wal or .ring
 * (sidefiles.h says which checks and why).
 */
#include "model/sidefiles.h"

#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool exists(const char *path, const char *suffix)
{
    char *name = xasprintf("%s%s", path, suffix);
    struct stat st;
    /* A name that cannot be checked counts as there: no warning on a guess. */
    bool there = lstat(name, &st) == 0 || errno != ENOENT;
    free(name);
    return there;
}

static bool is_db_name(const char *name)
{
    size_t len = strlen(name);
    return len > 3 && strcmp(name + len - 3, ".db") == 0;
}

/* <base>.ring for <base>.db. */
static bool ring_exists(const char *db_path)
{
    size_t len = strlen(db_path);
    if (!is_db_name(db_path))
        return true; /* no ring name to look for */
    char *base = xstrndup(db_path, len - 3);
    bool there = exists(base, ".ring");
    free(base);
    return there;
}

static const char *file_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool already(const struct sidefiles_warned *w, const char *file)
{
    for (size_t i = 0; i < w->count; i++)
        if (strcmp(w->files[i], file) == 0)
            return true;
    return false;
}

static void remember(struct sidefiles_warned *w, const char *file)
{
    w->files = xgrow(w->files, &w->cap, w->count + 1, sizeof(*w->files));
    w->files[w->count++] = xstrdup(file);
}

/* Whether meta end_state, as the main file holds it without the -wal that
 * is missing anyway, says 'running', or cannot be read at all: a main
 * file caught halfway through a checkpoint is inconsistent without its
 * -wal, and the report's error about it then needs this line's reason. */
static bool says_running(const char *db_path)
{
    sqlite3 *db = NULL;
    bool running = true;
    if (trace_sqlite_open_readonly(db_path, &db) == SQLITE_OK) {
        bool found = false, is_integer = false;
        char *state = NULL;
        int64_t integer = 0;
        if (trace_meta_get(db, "end_state", &found, &state, &integer, &is_integer) == SQLITE_OK)
            running = found && state && strcmp(state, "running") == 0;
        free(state);
    }
    sqlite3_close(db);
    return running;
}

static void check_before_folding(const char *db_path, struct sidefiles_warned *warned)
{
    if (already(warned, file_name(db_path)) || exists(db_path, "-wal") ||
        !trace_file_in_wal_mode(db_path) || !says_running(db_path))
        return;
    bool ring = ring_exists(db_path);
    cli_error(db_path,
              "warning: its process did not end cleanly and its %s missing: the calls it "
              "recorded last are not here (copy a run's directory with its *.db-wal and *.ring "
              "files, or use cutrace pack)",
              ring ? "-wal file is" : "-wal and .ring files are");
    remember(warned, file_name(db_path));
}

void sidefiles_warn_before_folding(const char *path, struct sidefiles_warned *warned)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    if (S_ISREG(st.st_mode)) {
        check_before_folding(path, warned);
        return;
    }
    DIR *d = S_ISDIR(st.st_mode) ? opendir(path) : NULL;
    if (!d)
        return;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (!is_db_name(entry->d_name))
            continue;
        char *db_path = cli_path_join(path, entry->d_name);
        check_before_folding(db_path, warned);
        free(db_path);
    }
    closedir(d);
}

static bool meta_present(struct trace *t, const char *key)
{
    bool found = false, is_integer = false;
    char *text = NULL;
    int64_t integer = 0;
    int rc = trace_meta_get(t->db, key, &found, &text, &integer, &is_integer);
    free(text);
    return rc == SQLITE_OK && found;
}

static bool has_calls(struct trace *t)
{
    sqlite3_stmt *stmt = trace_query(t, "SELECT EXISTS (SELECT 1 FROM events)", "");
    bool any = stmt && trace_step(t, stmt) == 1 && col_int(stmt, 0, 0) != 0;
    sqlite3_finalize(stmt);
    t->error[0] = '\0'; /* a damaged table is the loader's to report */
    return any;
}

void sidefiles_warn_opened(struct trace *t, struct sidefiles_warned *warned)
{
    if (!t->end_state || already(warned, t->file) || t->has_recovered_records)
        return;
    /* A packed process has no side files: packing folded its ring. */
    bool no_ring = t->packed || !ring_exists(t->path);
    if (strcmp(t->end_state, "running") == 0 && no_ring && !t->packed)
        cli_error(t->path,
                  "warning: the trace says its process is still running, but its .ring file is "
                  "not here: if the process is gone, the calls it recorded last are lost");
    else if (strcmp(t->end_state, "killed") == 0 && no_ring && meta_present(t, "end_note") &&
             has_calls(t))
        cli_error(t->path, "warning: its process was killed and left no .ring file to fold: the "
                           "calls it recorded last are lost");
    else
        return;
    remember(warned, t->file);
}

void sidefiles_warned_free(struct sidefiles_warned *warned)
{
    for (size_t i = 0; i < warned->count; i++)
        free(warned->files[i]);
    free(warned->files);
    memset(warned, 0, sizeof(*warned));
}
