/*
 * traceset.c - opening a run's traces as one set: for each path given,
 * fold the crash buffers of killed processes, list the *.db files of a
 * directory in name order (or take the one trace file, or every process
 * of a packed run), open and validate each, refuse a trace given twice,
 * and warn about traces that lost their side files (traceset.h).
 */
#include "model/traceset.h"

#include "cli.h"
#include "model/packed.h"
#include "model/sidefiles.h"
#include "model/runs.h"
#include "recover/recover.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A trace to open: a file, or a process of a packed run. */
struct source {
    char *path;      /* the trace file, or the packed file */
    int64_t process; /* 0 for a trace file */
    char *file;      /* a packed process's trace file name */
};

struct sources {
    struct source *items;
    size_t count, cap;
};

static void add_source(struct sources *s, char *path, int64_t process, const char *file)
{
    s->items = xgrow(s->items, &s->cap, s->count + 1, sizeof(*s->items));
    s->items[s->count++] =
        (struct source){.path = path, .process = process, .file = file ? xstrdup(file) : NULL};
}

static void free_sources(struct sources *s)
{
    for (size_t i = 0; i < s->count; i++) {
        free(s->items[i].path);
        free(s->items[i].file);
    }
    free(s->items);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool trace_set_is_trace_name(const char *name)
{
    size_t len = strlen(name);
    return len > 3 && strcmp(name + len - 3, ".db") == 0;
}

/* The *.db files of dir, in name order; -1 with an error printed. */
static int list_directory(const char *dir, struct sources *s)
{
    DIR *d = opendir(dir);
    if (!d) {
        cli_error(dir, "cannot read directory: %s", strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (!trace_set_is_trace_name(entry->d_name))
            continue;
        names = xgrow(names, &cap, count + 1, sizeof(*names));
        names[count++] = xstrdup(entry->d_name);
    }
    closedir(d);
    if (count > 1)
        qsort(names, count, sizeof(*names), compare_names);
    for (size_t i = 0; i < count; i++) {
        add_source(s, cli_path_join(dir, names[i]), 0, NULL);
        free(names[i]);
    }
    free(names);
    if (count == 0) {
        cli_error(dir, "no cutrace traces in this directory (no *.db files)");
        return -1;
    }
    return 0;
}

/* A regular file: a packed run's processes, or one trace. */
static int list_file(const char *path, struct sources *s)
{
    char err[512] = "";
    int packed = packed_probe(path, err, sizeof(err));
    if (packed < 0) {
        cli_error(path, "%s", err);
        return -1;
    }
    if (packed == 0) {
        add_source(s, xstrdup(path), 0, NULL);
        return 0;
    }
    struct packed_entry *entries;
    size_t count;
    if (packed_list(path, &entries, &count, err, sizeof(err)) != 0) {
        cli_error(path, "%s", err);
        return -1;
    }
    for (size_t i = 0; i < count; i++)
        add_source(s, xstrdup(path), entries[i].process, entries[i].file);
    packed_list_free(entries, count);
    return 0;
}

/* Folds the rings of path, then lists what it holds. */
static int list_resolved(const char *path, struct sources *s)
{
    sidefiles_warn(path);
    /* Before listing: folding may create the trace of a process that was
     * killed before its writer made one. */
    if (recover_fold_quietly(path) != 0)
        return -1;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            cli_error(path, "no such file or directory");
        else
            cli_error(path, "cannot open: %s", strerror(errno));
        return -1;
    }
    if (S_ISREG(st.st_mode))
        return list_file(path, s); /* a trace file, or a packed run */
    if (!S_ISDIR(st.st_mode)) {
        cli_error(path, "not a directory");
        return -1;
    }
    return list_directory(path, s);
}

/* A directory of `cutrace run`'s runs is read as its one run, or refused
 * (runs.h): two runs' processes are never one set. */
static int list_path(const char *path, struct sources *s)
{
    char *run_dir = NULL;
    if (runs_resolve(path, &run_dir) != 0)
        return -1;
    int rc = list_resolved(run_dir ? run_dir : path, s);
    free(run_dir);
    return rc;
}

/* The trace of the set already opened that is the same as t (its file
 * name is the process's identity, <host>-<pid>-<start_wall_ns>.db). */
static const struct trace *same_trace(const struct trace_set *set, const struct trace *t)
{
    for (size_t i = 0; i + 1 < set->count; i++)
        if (strcmp(set->traces[i].file, t->file) == 0)
            return &set->traces[i];
    return NULL;
}

static char *joined(const char *const *paths, size_t npaths)
{
    char *all = xstrdup(paths[0]);
    for (size_t i = 1; i < npaths; i++) {
        char *more = xasprintf("%s %s", all, paths[i]);
        free(all);
        all = more;
    }
    return all;
}

int trace_set_open_paths(struct trace_set *set, const char *const *paths, size_t npaths)
{
    assert(npaths >= 1);
    memset(set, 0, sizeof(*set));
    struct sources s = {0};
    int rc = 0;
    for (size_t i = 0; i < npaths && rc == 0; i++)
        rc = list_path(paths[i], &s);
    if (rc == 0) {
        set->path = joined(paths, npaths);
        set->traces = xcalloc(s.count, sizeof(*set->traces));
    }
    for (size_t i = 0; i < s.count && rc == 0; i++) {
        const struct source *src = &s.items[i];
        struct trace *t = &set->traces[i];
        set->count = i + 1;
        if ((src->process ? trace_open_packed(t, src->path, src->process, src->file)
                          : trace_open(t, src->path)) != 0) {
            trace_report_error(t);
            rc = -1;
            break;
        }
        const struct trace *twin = same_trace(set, t);
        if (twin) {
            cli_error(t->path, "the same trace as %s: a trace given twice would count twice",
                      twin->path);
            rc = -1;
            break;
        }
    }
    free_sources(&s);
    if (rc != 0)
        trace_set_close(set);
    return rc;
}

int trace_set_open(struct trace_set *set, const char *path)
{
    return trace_set_open_paths(set, &path, 1);
}

void trace_set_close(struct trace_set *set)
{
    for (size_t i = 0; i < set->count; i++)
        trace_close(&set->traces[i]);
    free(set->traces);
    free(set->path);
    memset(set, 0, sizeof(*set));
}
