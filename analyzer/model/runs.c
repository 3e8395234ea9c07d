/*
 * runs.c - the runs inside one directory (runs.h): listed for `cutrace ls`,
 * resolved or refused for every report.
 */
#include "model/runs.h"

#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A trace of the directory itself: a database, or the crash buffer of a
 * process killed before its database was made. */
static bool is_trace_file(const char *name)
{
    size_t len = strlen(name);
    return (len > 3 && strcmp(name + len - 3, ".db") == 0) ||
           (len > 5 && strcmp(name + len - 5, ".ring") == 0);
}

static bool is_run_dir(const char *dir, const char *name)
{
    if (name[0] == '.')
        return false;
    char *sub = cli_path_join(dir, name);
    char *file = cli_path_join(sub, MANIFEST_NAME);
    struct stat st, fst;
    bool yes = stat(sub, &st) == 0 && S_ISDIR(st.st_mode) && lstat(file, &fst) == 0;
    free(file);
    free(sub);
    return yes;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of dir's runs, sorted; 0 (none) when dir holds traces itself or
 * cannot be listed (the report that reads it then says why). */
static size_t run_names(const char *dir, char ***names)
{
    *names = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t count = 0, cap = 0;
    bool own_traces = false;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL && !own_traces) {
        if (is_trace_file(entry->d_name)) {
            own_traces = true;
        } else if (is_run_dir(dir, entry->d_name)) {
            *names = xgrow(*names, &cap, count + 1, sizeof(**names));
            (*names)[count++] = xstrdup(entry->d_name);
        }
    }
    closedir(d);
    if (own_traces) {
        for (size_t i = 0; i < count; i++)
            free((*names)[i]);
        free(*names);
        *names = NULL;
        return 0;
    }
    if (count > 1)
        qsort(*names, count, sizeof(**names), by_name);
    return count;
}

static void free_names(char **names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

size_t runs_trace_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        size_t len = strlen(entry->d_name);
        n += len > 3 && strcmp(entry->d_name + len - 3, ".db") == 0;
    }
    closedir(d);
    return n;
}

ssize_t runs_list(const char *dir, struct run_entry **runs)
{
    char **names;
    size_t count = run_names(dir, &names);
    *runs = count ? xcalloc(count, sizeof(**runs)) : NULL;
    for (size_t i = 0; i < count; i++) {
        struct run_entry *r = &(*runs)[i];
        r->path = cli_path_join(dir, names[i]);
        r->traces = runs_trace_files(r->path);
        if (manifest_find(r->path, &r->manifest) != 1) {
            runs_free(*runs, i + 1);
            *runs = NULL;
            free_names(names, count);
            return -1;
        }
    }
    free_names(names, count);
    return (ssize_t)count;
}

void runs_free(struct run_entry *runs, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free(runs[i].path);
        manifest_free(&runs[i].manifest);
    }
    free(runs);
}

/* Named in the refusal; the latest last, since that is the one most often wanted. */
#define RUNS_NAMED 4

int runs_resolve(const char *path, char **run_dir)
{
    *run_dir = NULL;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return 0;
    char **names;
    size_t count = run_names(path, &names);
    if (count == 1)
        *run_dir = cli_path_join(path, names[0]);
    if (count > 1) {
        char *list = xstrdup("");
        size_t first = count > RUNS_NAMED ? count - RUNS_NAMED : 0;
        for (size_t i = first; i < count; i++) {
            char *run = cli_path_join(path, names[i]);
            char *longer = xasprintf("%s%s%s", list, i > first ? ", " : "", run);
            free(run);
            free(list);
            list = longer;
        }
        char older[64] = "";
        if (first)
            snprintf(older, sizeof older, " and %zu older", first);
        cli_error(path, "holds %zu runs; name one: %s%s (cutrace ls %s lists them)", count, list,
                  older, path);
        free(list);
    }
    free_names(names, count);
    return count > 1 ? -1 : 0;
}
