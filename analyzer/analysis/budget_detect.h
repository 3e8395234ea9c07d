/*
 * budget_detect.h - which server a trace comes from, and which of SGLang's
 * code paths (docs/budget.md, "Which server and code path"), read from what
 * the trace recorded: the Python modules and functions on the stacks of its
 * measurements, else the launch lines (gm_launch_line). `cutrace budget`
 * defaults --framework to it and warns when the option disagrees; the SGLang
 * replay picks its formula and message by the path.
 */
#ifndef CUTRACE_ANALYZER_BUDGET_DETECT_H
#define CUTRACE_ANALYZER_BUDGET_DETECT_H

#include "analysis/budget_analysis.h"
#include "model/gpumodel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The first release whose SGLang is known to raise the ValueError "Loaded
 * weights leave no GPU memory for the KV cache" (KVCacheConfigurator). */
#define BUDGET_SGLANG_CURRENT_SINCE "0.5.16"

/* "sglang" or "vllm". */
const char *budget_framework_name(enum budget_framework f);

/*
 * The server the trace shows, and why (*why malloc'd: "the measurements'
 * Python stacks are in sglang/srt/... (pid 12)", "launcher pid 7's command
 * line runs sglang.launch_server"). The stacks win over the launch lines,
 * and why says so when they disagree. False (and *why NULL) when the trace
 * shows neither.
 */
bool budget_detect_framework(const struct gm_model *m, enum budget_framework *out, char **why);

/*
 * The warning when --framework `given` disagrees with the trace
 * (malloc'd: "--framework vllm, but the trace shows sglang: ..."), NULL
 * when it agrees or the trace shows neither.
 */
char *budget_framework_mismatch(const struct gm_model *m, enum budget_framework given);

/*
 * Which SGLang path a trace comes from. The stacks decide where they can:
 * KVCacheConfigurator._profile_available_bytes (kv_cache_configurator.py)
 * or init_torch_distributed in distributed/bootstrap.py is the current
 * path; profile_max_num_token (model_runner.py, or the first KV-cache
 * mixin's) the older. The mixin's _profile_available_bytes was there both
 * before and after the ValueError, so there, and where the stacks show no
 * function of either, server_version (NULL: not given) decides, else the
 * current path. *source is "trace", "option" or "default"; *why malloc'd.
 * A server_version that is not a version number is said in why and not
 * used (budget_parse_server_version checks it first).
 */
enum budget_path budget_sglang_path(const struct gm_model *m, const char *server_version,
                                    const char **source, char **why);

/*
 * A flag lookup over the launch lines of every process of a model, for
 * sglang_fraction_from_flags (replay/sglang_fraction.h): ctx is a struct
 * budget_launch_flags with m set. Finds `--name V` or `--name=V` as a word
 * of a line (shell quotes around it allowed), its own line before its
 * launchers' and the run's, and sets *value to what follows it on that
 * line (NULL when nothing does); pid and owner say whose line it was
 * ("own", "launcher", "run").
 */
struct budget_launch_flags {
    const struct gm_model *m;
    int64_t pid;
    const char *owner;
};
bool budget_launch_flag(void *ctx, const char *name, const char **value);

#endif
