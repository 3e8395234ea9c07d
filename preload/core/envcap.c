/*
 * envcap.c - selects and redacts the environment variables stored in a trace.
 *
 * Runs once per process, when its trace is created, never on the hot path.
 */
#include "cutrace/envcap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Families that decide how much GPU memory a server uses, and the tracer's own. */
static const char *const RECORDED_PREFIXES[] = {
    "CUDA_",   "NCCL_",   "PYTORCH_", "TORCH_",  "SGLANG_",  "VLLM_",
    "TRTLLM_", "CUBLAS_", "CUDNN_",   "NVIDIA_", "CUTRACE_",
};
/* Which rank a process is, as launchers tell their workers (torchrun, the
 * servers' own spawners): the trace of a worker that never initialises NCCL
 * still says which rank of how many it was. */
static const char *const RECORDED_NAMES[] = {"OMP_NUM_THREADS", "LD_PRELOAD", "RANK",
                                             "LOCAL_RANK",      "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                             "NODE_RANK",       "GROUP_RANK"};

static size_t name_length(const char *name)
{
    const char *eq = strchr(name, '=');
    return eq ? (size_t)(eq - name) : strlen(name);
}

bool ct_env_is_recorded(const char *name)
{
    size_t len = name_length(name);
    for (size_t i = 0; i < sizeof RECORDED_PREFIXES / sizeof *RECORDED_PREFIXES; i++) {
        size_t plen = strlen(RECORDED_PREFIXES[i]);
        if (len > plen && strncmp(name, RECORDED_PREFIXES[i], plen) == 0)
            return true;
    }
    for (size_t i = 0; i < sizeof RECORDED_NAMES / sizeof *RECORDED_NAMES; i++) {
        if (len == strlen(RECORDED_NAMES[i]) && strncmp(name, RECORDED_NAMES[i], len) == 0)
            return true;
    }
    return false;
}

bool ct_env_is_secret(const char *name)
{
    return ct_redact_secret_name(name, name_length(name));
}

/*
 * A (redacted, malloc'd) value as stored, taking it over: one over
 * CT_ENV_VALUE_MAX keeps its head and says how long it was.
 */
static char *stored_value(char *value)
{
    size_t len = value ? strlen(value) : 0;
    if (len <= CT_ENV_VALUE_MAX)
        return value;
    size_t cap = CT_ENV_VALUE_MAX + 48;
    char *out = malloc(cap);
    if (out)
        snprintf(out, cap, "%.*s...<cut: %zu bytes>", CT_ENV_VALUE_MAX, value, len);
    free(value);
    return out;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct ct_env_var *)a)->name, ((const struct ct_env_var *)b)->name);
}

int ct_env_capture(char *const *envp, struct ct_env_capture *out)
{
    out->vars = NULL;
    out->count = 0;
    size_t n = 0;
    for (char *const *e = envp; e && *e; e++)
        n += ct_env_is_recorded(*e) && strchr(*e, '=');
    if (n == 0)
        return 0;
    out->vars = calloc(n, sizeof *out->vars);
    if (!out->vars)
        return -1;
    for (char *const *e = envp; e && *e && out->count < n; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !ct_env_is_recorded(*e))
            continue;
        char *name = strndup(*e, (size_t)(eq - *e));
        char *value = ct_env_is_secret(*e) ? strdup(CT_REDACTED) : ct_redact_value(eq + 1);
        value = stored_value(value);
        if (!name || !value) {
            free(name);
            free(value);
            ct_env_capture_free(out);
            return -1;
        }
        out->vars[out->count].name = name;
        out->vars[out->count].value = value;
        out->count++;
    }
    qsort(out->vars, out->count, sizeof *out->vars, by_name);
    return 0;
}

void ct_env_capture_free(struct ct_env_capture *cap)
{
    for (size_t i = 0; i < cap->count; i++) {
        free((char *)cap->vars[i].name);
        free((char *)cap->vars[i].value);
    }
    free(cap->vars);
    cap->vars = NULL;
    cap->count = 0;
}
