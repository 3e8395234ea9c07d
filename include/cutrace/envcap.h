/*
 * envcap.h - which environment variables a trace keeps, with secrets redacted.
 *
 * The variables that shape GPU memory (allocator settings, NCCL tuning,
 * server switches such as SGLANG_FORCE_CUSTOM_AR_PCIE) are what a user
 * compares first between a working and a failing run, so they are stored in
 * every trace. Values of names that look like credentials, and passwords in
 * URLs, never leave the process (the rule is redact.h's).
 *
 * Shared (include/cutrace/): `cutrace run` records the same variables, the
 * same way, in the run manifest (analyzer/model/manifest.h), so the list of
 * names exists once.
 */
#ifndef CUTRACE_ENVCAP_H
#define CUTRACE_ENVCAP_H

#include <stdbool.h>
#include <stddef.h>

#include "cutrace/redact.h"
#include "cutrace/store.h"

/*
 * Longer values are stored cut to this many bytes: the trace must still fit
 * where a small file-size limit or a nearly full disk leaves room for it
 * (three 100 KB CUDA_ variables once left none under 256 KiB).
 */
#define CT_ENV_VALUE_MAX 4096

struct ct_env_capture {
    struct ct_env_var *vars;
    size_t count;
};

/* True if a variable of this name is recorded. `name` ends at '=' or NUL. */
bool ct_env_is_recorded(const char *name);
/* True if its value must be replaced by CT_REDACTED (ct_redact_secret_name). */
bool ct_env_is_secret(const char *name);

/* Copies the recorded variables of envp (NAME=VALUE strings), sorted by name. */
int ct_env_capture(char *const *envp, struct ct_env_capture *out);
void ct_env_capture_free(struct ct_env_capture *cap);

#endif
