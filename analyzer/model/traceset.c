/*
 * traceset.c - opening a run's traces as one set: fold the crash buffers of
 * killed processes, list the *.db files in name order, open and validate
 * each (traceset.h).
 */
#include "model/traceset.h"

#include "cli.h"
#include "model/runs.h"
#include "recover/recover.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool trace_set_is_trace_name(const char *name)
{
    size_t len = strlen(name);
    return len > 3 && strcmp(name + len - 3, ".db") == 0;
}

/* The *.db names in dir, sorted; -1 with an error printed if unreadable. */
static int list_trace_files(const char *dir, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        cli_error(dir, "cannot read directory: %s", strerror(errno));
        return -1;
    }
    size_t cap = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (!trace_set_is_trace_name(entry->d_name))
            continue;
        *names = xgrow(*names, &cap, *count + 1, sizeof(**names));
        (*names)[(*count)++] = xstrdup(entry->d_name);
    }
    closedir(d);
    if (*count > 1)
        qsort(*names, *count, sizeof(**names), compare_names);
    return 0;
}

static int open_resolved(struct trace_set *set, const char *path);

int trace_set_open(struct trace_set *set, const char *path)
{
    memset(set, 0, sizeof(*set));
    /* A directory of `cutrace run`'s runs is read as its one run, or refused
     * (runs.h): two runs' processes are never one set. */
    char *run_dir = NULL;
    if (runs_resolve(path, &run_dir) != 0)
        return -1;
    int rc = open_resolved(set, run_dir ? run_dir : path);
    free(run_dir);
    return rc;
}

static int open_resolved(struct trace_set *set, const char *path)
{
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

    char **names = NULL;
    size_t count = 0;
    if (S_ISREG(st.st_mode)) {
        /* A single trace file is accepted where a directory is expected. */
        names = xmalloc(sizeof(*names));
        names[0] = NULL;
        count = 1;
    } else if (!S_ISDIR(st.st_mode)) {
        cli_error(path, "not a directory");
        return -1;
    } else {
        if (list_trace_files(path, &names, &count) != 0)
            return -1;
        if (count == 0) {
            free(names);
            cli_error(path, "no cutrace traces in this directory (no *.db files)");
            return -1;
        }
    }

    set->path = xstrdup(path);
    set->traces = xcalloc(count, sizeof(*set->traces));
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        char *file_path;
        if (!names[i])
            file_path = xstrdup(path);
        else
            file_path = cli_path_join(path, names[i]);
        set->count = i + 1;
        if (trace_open(&set->traces[i], file_path) != 0) {
            trace_report_error(&set->traces[i]);
            rc = -1;
        }
        free(file_path);
    }
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    if (rc != 0)
        trace_set_close(set);
    return rc;
}

void trace_set_close(struct trace_set *set)
{
    for (size_t i = 0; i < set->count; i++)
        trace_close(&set->traces[i]);
    free(set->traces);
    free(set->path);
    memset(set, 0, sizeof(*set));
}
