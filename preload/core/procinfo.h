/*
 * procinfo.h - facts about the traced process, gathered once per trace.
 */
#ifndef CUTRACE_PROCINFO_H
#define CUTRACE_PROCINFO_H

#include <stddef.h>

#include "cutrace/store.h"

/* Fills everything but the start times and the ancestors (ancestry.h);
 * info->cmdline is malloc'd. */
void ct_procinfo_collect(struct ct_process_info *info);
void ct_procinfo_free(struct ct_process_info *info);

/* The kernel's boot id: processes of one host and boot share CLOCK_MONOTONIC. */
void ct_procinfo_boot_id(char *out, size_t cap);

/* Reads up to cap bytes of a (/proc) file, opened O_CLOEXEC and closed
 * again; returns how many (0 when it cannot be read). */
size_t ct_procinfo_read(const char *path, char *buf, size_t cap);

/* The command line in a /proc/<pid>/cmdline file, redacted (redact.h) and
 * shell-quoted (malloc'd; "" when unreadable, NULL only without memory). */
char *ct_procinfo_cmdline(const char *path);

/* Joins NUL-separated argv bytes into one shell-quoted line (malloc'd). */
char *ct_quote_argv(const char *args, size_t len);

#endif
