/*
 * test_support.h - what the analyzer's test suites share: the list of
 * suites, scratch directories, running the built `cutrace` binary as a
 * subprocess and capturing its output, file damage helpers and a strict JSON
 * validator for checking report output.
 */
#ifndef CUTRACE_TESTS_TEST_SUPPORT_H
#define CUTRACE_TESTS_TEST_SUPPORT_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

Suite *units_suite(void);
Suite *json_suite(void);
Suite *table_suite(void);
Suite *errnames_suite(void);
Suite *trace_suite(void);
Suite *summary_suite(void);
Suite *summary_driver_suite(void);
Suite *bad_input_suite(void);
Suite *run_suite(void);
Suite *recover_suite(void);
Suite *collectives_suite(void);
Suite *pack_suite(void); /* test_pack.c */

/* A fresh directory under $TMPDIR (or /tmp), removed by scratch_remove. */
char *scratch_dir(void);
void scratch_remove(char *dir);

struct proc_result {
    int status; /* exit code, or 128+N when killed by signal N */
    bool signaled;
    char *out, *err; /* NUL-terminated */
    size_t out_len, err_len;
};

/*
 * Runs `cutrace args...` ($CUTRACE_BIN, default build/cutrace) with the
 * environment changed by env ("NAME=value" sets, "NAME" unsets; NULL-ended,
 * may be NULL) and captures stdout and stderr.
 */
struct proc_result run_cutrace(const char *const *args, const char *const *env);
/* The same, run as user `uid` (and group uid) when not (uid_t)-1: the test
 * process must be root for that. */
struct proc_result run_cutrace_as(const char *const *args, const char *const *env, uid_t uid);
void proc_result_free(struct proc_result *r);

/* Lines in text (a last line without '\n' counts). */
size_t count_lines(const char *text);
/* Aborts the test unless: exit 1, empty stdout, exactly one stderr line that
 * starts with "cutrace: " and contains `needle` (and `needle2` if not NULL). */
void assert_one_line_error(const struct proc_result *r, const char *needle, const char *needle2);

/* File helpers; each aborts the test on failure. */
void write_file(const char *path, const void *data, size_t len);
void copy_file(const char *from, const char *to);
size_t file_size(const char *path);
void truncate_file(const char *path, size_t size);
void flip_bit(const char *path, size_t byte, int bit);

/* Report text helpers (malloc'd results): the JSON without whitespace
 * outside strings, so tests can look for exact fragments regardless of
 * indentation; the text with runs of blanks squeezed to one, so tests can
 * check a table row's cells without depending on column widths. */
char *compact(const char *json);
char *squeeze(const char *text);
/* Aborts the test if a line of text is wider than limit columns (code points). */
void assert_width(const char *text, size_t limit);
#define assert_contains(haystack, needle)                                                          \
    ck_assert_msg(strstr((haystack), (needle)) != NULL, "missing:\n%s\nin:\n%.3000s", (needle),    \
                  (haystack))

/* True when text is one complete, valid JSON document (RFC 8259). */
bool json_valid(const char *text);

/* The path of the dummy libcutrace.so ($CUTRACE_TEST_LIB). */
const char *dummy_library(void);

/* The runs `cutrace run -o dir` made in dir (their paths, dir/run-..., in
 * name order, which is start order; *runs malloc'd, free with free_runs). */
size_t list_runs(const char *dir, char ***runs);
void free_runs(char **runs, size_t count);
/* The path of dir's only run; aborts the test unless it holds exactly one. */
char *only_run(const char *dir);

#endif
