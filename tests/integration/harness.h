/*
 * harness.h - runs test programs under (or without) libcutrace.so on the fake
 * GPU stack and inspects the traces they leave.
 *
 * Paths come from the environment `make integration-tests` sets:
 * CUTRACE_TEST_BUILD (the build directory, absolute).
 */
#ifndef CUTRACE_HARNESS_H
#define CUTRACE_HARNESS_H

#include "../support/testsql.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct run {
    int status; /* exit code, or 128 + signal */
    char *out;  /* stdout, NUL-terminated */
    size_t out_len;
    char *err; /* stderr */
    size_t err_len;
};

/* A scratch world: a trace dir and a fake-GPU state file of its own. */
struct world {
    char *root;
    char *trace_dir;
    char *state;
    char *cwd; /* working directory for spawned programs */
    const char *extra_env[8];
    long fsize_limit; /* RLIMIT_FSIZE for spawned programs, 0 = unlimited */
    /* RLIMIT_NOFILE for spawned programs, 0 = inherited; with a limit they
     * start with descriptors 0, 1 and 2 only, as from a shell's ulimit -n. */
    long nofile_limit;
};

void world_init(struct world *w);
void world_free(struct world *w);

/* build/<rel>, absolute. Static buffer per call slot (up to 8 live). */
const char *build_path(const char *rel);

/*
 * Runs argv[0] (absolute) with the fake stack's environment. `traced`
 * preloads libcutrace.so. Fails the test if it runs over timeout_s.
 */
struct run run_prog(struct world *w, bool traced, const char *const argv[], int timeout_s);

/* The same in two halves, for a test that acts while the program runs. */
struct running {
    pid_t pid;
    FILE *out;
    FILE *err;
};
struct running start_prog(struct world *w, bool traced, const char *const argv[]);
struct run finish_prog(struct running *p, int timeout_s);
pid_t spawn_prog(struct world *w, bool traced, const char *const argv[]);
int wait_prog(pid_t pid, int timeout_s);
void run_free(struct run *r);

/* Trace files (*.db) in the world's trace dir, sorted; returns the count. */
size_t list_traces(struct world *w, char ***paths);
void free_list(char **paths, size_t n);

/* Number of non-empty lines in s. */
size_t count_lines(const char *s);

/* How many times needle occurs in text (not overlapping). */
size_t count_occurrences(const char *text, const char *needle);

/* text with every `from` replaced by `to` (malloc'd). */
char *replace_all(const char *text, const char *from, const char *to);

/* <source tree>/<rel>, absolute (CUTRACE_TEST_SRC). Static buffer per call
 * slot (up to 8 live). */
const char *source_path(const char *rel);

/* `build/cutrace args...` (NULL-ended, at most 10), untraced, within 120 s. */
struct run harness_cutrace(struct world *w, const char *const args[]);

/*
 * `cutrace ARGS... PATH`'s stdout with its spellings of where the run is
 * taken out, so that the reports of one run read from two places (a
 * directory, a pack of it copied elsewhere) compare equal: "PATH: " becomes
 * "RUN: ", trace_prefix (the traces' prefix in file names: "DIR/",
 * "PACK:") "RUN/", PATH and the world's trace directory (CUTRACE_DIR in
 * the traces' environment) "RUN". Malloc'd; *status is cutrace's.
 */
char *report_without_paths(struct world *w, const char *const args[], const char *path,
                           const char *trace_prefix, int *status);

/*
 * The value at a JSON path ("$.jobs[0].ranks[0].pre.seq", SQLite's
 * json_extract) of a report: an integer, or text (malloc'd; NULL when it is
 * JSON null). Fails the test when json is not JSON or the path holds
 * something else.
 */
int64_t report_json_int(const char *json, const char *path);
char *report_json_text(const char *json, const char *path);

#endif
