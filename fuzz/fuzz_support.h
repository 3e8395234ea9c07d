/*
 * fuzz_support.h - what the libFuzzer targets (fuzz_trace.c, fuzz_ring.c)
 * share: a private scratch directory, writing an input there as a file, and
 * running cutrace subcommands in-process with their report thrown away.
 */
#ifndef CUTRACE_FUZZ_SUPPORT_H
#define CUTRACE_FUZZ_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

/* Creates the scratch directory (once; removed at exit) and points stdout at
 * /dev/null, so reports cost no terminal I/O. Returns the directory. */
const char *fuzz_setup(void);

/* Removes every file in the scratch directory (traces, -wal/-shm, rings). */
void fuzz_clean(void);

/* "<scratch>/<name>" in a static buffer, valid until the next call. */
const char *fuzz_path(const char *name);

/* Writes bytes to <scratch>/<name>; aborts on failure (a harness bug). */
void fuzz_write(const char *name, const uint8_t *data, size_t size);

/* Runs `cutrace <command> [--json] <path>` in-process; returns its status.
 * Any exit status is fine: only crashes, sanitizer reports and leaks count. */
int fuzz_run(int (*command)(int, char **), const char *name, const char *path, int json);
/* The same with any arguments (NULL-terminated, argv[0] the command's name). */
int fuzz_run_args(int (*command)(int, char **), const char *const *args);

#endif
