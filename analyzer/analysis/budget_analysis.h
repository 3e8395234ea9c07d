/*
 * budget_analysis.h - `cutrace budget` without its printing: finds each
 * rank's measurements in a loaded model (gpumodel.h), groups ranks into
 * jobs by their NCCL communicators and replays the server's arithmetic
 * (budget.h) per job, with the decomposition of SGLang's rest by category.
 * cmd/budget.c prints the result; cmd/diff.c puts two runs' side by side.
 */
#ifndef CUTRACE_ANALYZER_BUDGET_ANALYSIS_H
#define CUTRACE_ANALYZER_BUDGET_ANALYSIS_H

#include "replay/budget.h"
#include "replay/sglang_fraction.h"
#include "model/gpumodel.h"

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum budget_framework { BUDGET_SGLANG, BUDGET_VLLM };

/*
 * Which of a server's code paths a trace comes from (docs/budget.md, "Code
 * paths"): the measurements it takes, its formula, rounding and messages.
 * Recognised from the Python functions and modules on the measurements'
 * stacks, else given by --server-version, else the framework's default.
 */
enum budget_path {
    BUDGET_PATH_UNKNOWN = 0,
    BUDGET_PATH_SGLANG_OLDER,   /* profile_max_num_token: RuntimeError "Not enough memory" only */
    BUDGET_PATH_SGLANG_CURRENT, /* _profile_available_bytes: ValueError when rest <= 0 */
    BUDGET_PATH_VLLM_OLDER,     /* U 0.9, requested truncated */
    BUDGET_PATH_VLLM_CURRENT,   /* U 0.92, requested = ceil(total * U) */
};

/* The server a trace shows and the path replayed, with why (said in the report). */
struct budget_server {
    const char *framework_source; /* "option" (--framework) or "trace" */
    char *framework_why;          /* malloc'd, NULL when given */
    enum budget_path path;
    const char *path_source; /* "option" (--server-version), "trace" or "default" */
    char *path_why;          /* malloc'd */
};

/*
 * A whole-number SGLang input (--page-size, --max-total-tokens) and where
 * it came from: source is "option", "cmdline" (whose line as for F below),
 * "default" (page size 1) or "none" (no cap; has is false).
 */
struct budget_count {
    bool has;
    int64_t value;
    const char *source;
    int64_t source_pid;
    const char *source_process;
};

/* SGLang's own choice of F, replayed (budget_fraction.c), when nothing gives F. */
struct budget_fraction_derivation {
    bool has, known; /* known: from the GPU's memory, not SGLang's fallback constant */
    enum sglang_fraction_rule rule;
    double gpu_mem_mib;
    int64_t tp_size;
    struct sglang_fraction_reserve reserve;
    char *defaulted; /* the flags SGLang's defaults stood for, ", "-separated */
    char *why;       /* the report's sentence */
};

/* What the user asked for (cmd/budget.c parses it; cutrace diff fills it). */
struct budget_options {
    enum budget_framework framework;
    bool has_fraction, has_util, has_pre;
    double fraction, util; /* F and U */
    const char *fraction_source, *util_source;
    /* For a value from a command line ("cmdline"): whose line it was.
     * source_process is "own" (a traced process's), "launcher" (an ancestor
     * of one, as the trace recorded it: source_pid is the ancestor's) or
     * "run" (the command `cutrace run` launched; source_pid 0). */
    int64_t source_pid;
    const char *source_process;
    /* SGLang: the pool's tokens are capped, then floored to whole pages. */
    struct budget_count page_size, max_total_tokens;
    /* SGLang with EAGLE or STANDALONE speculative decoding: the target's
     * cell size is scaled by (1 + draft layers / layers). */
    struct budget_count draft_layers; /* the model's layers: num_layers below */
    char spec_algorithm[24];          /* the launch lines' --speculative-algorithm, "": none */
    int64_t spec_pid;                 /* whose line, as source_pid/source_process below */
    const char *spec_process;
    /* SGLang's multimodal reserve in GiB (current path, --multimodal) and its source text */
    double mm_reserve_gib;
    char *mm_reserve_why;
    bool has_cell_size; /* --cell-size given */
    struct budget_fraction_derivation derived;
    int64_t cell_size, burst_min, graph_estimate;
    int64_t pre_seq, post_seq;
    const char *server_version; /* --server-version, NULL when absent */
    /* vLLM (budget_vllm.c): the inputs of its block arithmetic and of the
     * max_model_len check (--block-size, --num-layers, --block-bytes,
     * --max-model-len; block size and max_model_len also from the launch
     * lines), and where the CUDA-graph estimate came from: "option"
     * (--cuda-graph-estimate), "trace" (profile_cudagraph_memory's
     * measurements, applied as VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
     * says) or NULL before the analysis. */
    struct budget_count block_size, num_layers, block_bytes, max_model_len;
    /* num_layers (--num-layers) is both servers': SGLang's draft scale
     * divides by it too */
    const char *graph_estimate_source;
    bool multimodal; /* --multimodal: SGLang reserves its multimodal caches */
    bool json;
    const char *path;
};

/* One part of SGLang's rest, for the decomposition. */
enum budget_part {
    BUDGET_PART_BEFORE,       /* live at pre: costs bytes * F */
    BUDGET_PART_UNEXPLAINED,  /* unexplained at pre: costs bytes * F */
    BUDGET_PART_WEIGHTS,      /* the weight burst, live at post: costs bytes */
    BUDGET_PART_BETWEEN,      /* other memory made between pre and post, live at post */
    BUDGET_PART_FREED,        /* live at pre, freed before post: gives back */
    BUDGET_PART_UNEXPL_DELTA, /* unexplained memory that appeared between pre and post */
    BUDGET_PART_DRAFT,        /* made by the draft worker (speculative decoding), live at post */
    BUDGET_PART_RESERVE,      /* the multimodal reserve (current path, --multimodal) */
};
/* "before_pre", "unexplained_at_pre", ...: the JSON names of the parts */
extern const char *const budget_part_keys[];

struct budget_row {
    enum budget_part part;
    int category; /* enum gm_category, -1 when none */
    int64_t bytes;
    double cost_gib;
};

/* One rank: the measurements chosen, what was live at each, the arithmetic. */
struct budget_rank {
    uint32_t proc, gpu;
    bool analysed;
    char *problem; /* why not */
    bool has_burst;
    bool by_names; /* pre and post chosen by the Python functions that made them */
    struct gm_burst burst;
    uint32_t pre, post; /* measurement events */
    char *choice;
    int64_t pre_free, pre_total, post_free, post_total;
    int64_t live_pre[GM_CATEGORIES], live_post[GM_CATEGORIES];
    int64_t unexpl_pre, unexpl_post;
    int64_t between[GM_GPU_CATEGORIES], weights_live, freed_between;
    double rest_own;
    struct budget_row rows[2 * GM_GPU_CATEGORIES + 4];
    size_t nrows;
    double ledger_budget, ledger_other;
    /* vLLM */
    int64_t requested, weights, torch_pre, torch_post, non_torch_pre, non_torch_post;
    int64_t non_torch_increase, runtime_at_burst_end, runtime_peak, peak_activation, available;
    bool early_failure;
    bool has_u_min, has_u_max;
    double u_min, u_max;
    bool s0_only;           /* only S0: the worker stopped after it (its early failure) */
    int64_t device_ordinal; /* the cuda:N of S0, -1 unknown */
    /* torch's allocated counters bounded by its segments (budget_vllm.c):
     * allocated can be below reserved by at most these at S0 and at the peak */
    int64_t torch_slack_s0, torch_slack_peak;
    int64_t available_low, available_high; /* available over the bound */
    /* the CUDA-graph estimate from profile_cudagraph_memory's measurements */
    size_t graph_brackets;
    int64_t graph_measured, graph_applied;
    const char *graph_why; /* "option", "environment", "release default", "not applied: ..." */
    int64_t blocks;        /* available // block bytes // layers, when both are known */
    /* the KV pool seen after post */
    bool has_kv;
    int64_t kv_count, kv_size;
    /* SGLang: where the draft worker began (its first measurement), GM_NONE
     * when none; what it made that is live at post */
    uint32_t draft_from;
    int64_t draft_live;
};

/* The ranks of one job (a tensor-parallel group) and the server's verdict. */
struct budget_job {
    struct budget_rank *ranks;
    size_t nranks, cap;
    bool has_hash;
    uint64_t hash;
    int64_t world; /* nranks of its largest communicator, 0 unknown */
    int64_t *missing;
    size_t nmissing, missing_cap;
    size_t analysed;
    /* SGLang */
    uint64_t min_pre, min_post;
    size_t pre_rank, post_rank; /* the ranks holding the MINs; post_rank is the binding one */
    int float_ranks;
    double pre_gib, post_gib, rest;
    int64_t tokens_profiled; /* int(rest * 2^30) // cell_size, before the cap and the page floor */
    int64_t tokens;
    bool fits;
    double f_min, f_min_rounded;
    bool has_f_min;
    char *conclusion;
    /* SGLang's inputs and steps as the path replayed has them */
    double mm_reserve_gib;
    int64_t cell_size;       /* bytes per token, after the speculative scale */
    const char *cell_source; /* "option" or "default" */
    const char *pool_check;  /* the KV pool seen after post: "matches", "differs", NULL */
    int64_t page_size;
    char *cell_why;
    bool has_kv_budget;      /* current path with rest > 0 */
    int64_t kv_budget_bytes; /* int(rest * 2^30) */
    const char *error_type;  /* "ValueError", "RuntimeError", NULL when it fits */
    /* vLLM */
    int64_t available;
    size_t available_rank, early_rank;
    bool early_failure, has_u_min, has_u_max;
    double u_min, u_max;
    char *verdict;
    int64_t available_low, available_high; /* MIN over the ranks of each end */
    const char *range_verdict;             /* "fits for all", "fails for all", "depends" */
    bool has_blocks, max_len_failure;
    int64_t blocks, needed_bytes, estimated_max_len;
    char *missing_inputs; /* which options would supply what the trace lacks, NULL none */
};

/* Every job of a run. */
struct budget_analysis {
    const struct gm_model *m;
    struct budget_options *o;
    struct budget_server server;
    struct budget_job *groups;
    size_t ngroups;
    size_t analysed;
    size_t groups_cap;
    char **notes;
    size_t nnotes, notes_cap;
};

/* true when text is a number in (0, 1] (a fraction or a utilization). */
bool budget_parse_fraction(const char *text, double *out);

/*
 * The options `cutrace budget` and `cutrace diff` share, parsed once: put
 * BUDGET_LONG_OPTIONS in the getopt table, hand every option to
 * budget_option, then call budget_options_finish.
 */
#define BUDGET_LONG_OPTIONS                                                                        \
    {"framework", required_argument, NULL, 'f'},                                                   \
        {"mem-fraction-static", required_argument, NULL, 'F'},                                     \
        {"gpu-memory-utilization", required_argument, NULL, 'U'},                                  \
        {"cell-size", required_argument, NULL, 'c'}, {"burst-min", required_argument, NULL, 'b'},  \
        {"cuda-graph-estimate", required_argument, NULL, 'g'},                                     \
        {"page-size", required_argument, NULL, 'k'},                                               \
        {"max-total-tokens", required_argument, NULL, 'T'},                                        \
        {"server-version", required_argument, NULL, 'V'},                                          \
        {"draft-num-layers", required_argument, NULL, 'D'}, BUDGET_VLLM_LONG_OPTIONS,              \
    {                                                                                              \
        "multimodal", no_argument, NULL, 'M'                                                       \
    }
/* vLLM's: the block arithmetic's inputs (codes above any other option's). */
enum budget_vllm_option_code {
    BUDGET_OPT_BLOCK_SIZE = 0x300,
    BUDGET_OPT_NUM_LAYERS,
    BUDGET_OPT_BLOCK_BYTES,
    BUDGET_OPT_MAX_MODEL_LEN,
};
#define BUDGET_VLLM_LONG_OPTIONS                                                                   \
    {"block-size", required_argument, NULL, BUDGET_OPT_BLOCK_SIZE},                                \
        {"num-layers", required_argument, NULL, BUDGET_OPT_NUM_LAYERS},                            \
        {"block-bytes", required_argument, NULL, BUDGET_OPT_BLOCK_BYTES},                          \
    {                                                                                              \
        "max-model-len", required_argument, NULL, BUDGET_OPT_MAX_MODEL_LEN                         \
    }

struct budget_option_state {
    const char *framework; /* as given, NULL when absent */
    bool has_graph;
    bool budget_only;        /* an option that means nothing without --framework */
    const char *sglang_only; /* --page-size or --max-total-tokens, when given */
    /* `cutrace budget`: without --framework, the trace tells it after
     * loading (budget_detect.h); budget_options_framework checks then. */
    bool detect;
    const char *vllm_only; /* --block-size, --block-bytes, ... when given */
};

/* The checks of budget_options_finish that need the framework, for a
 * framework found after the options (st->detect). */
int budget_options_framework(const char *cmd, struct budget_options *o,
                             const struct budget_option_state *st);

/* Defaults: SGLang's DeepSeek cell size, a 1 GiB weight burst. */
void budget_options_init(struct budget_options *o, struct budget_option_state *st);

/* Returns 1 when c is one of BUDGET_LONG_OPTIONS and arg was taken, 0 when
 * c is not one of them, or the exit status of a usage error. */
int budget_option(const char *cmd, int c, const char *arg, struct budget_options *o,
                  struct budget_option_state *st);

/* After the options: the framework and the combinations that make no sense.
 * Returns CLI_PARSED, or the exit status of a usage error. */
int budget_options_finish(const char *cmd, bool framework_required, struct budget_options *o,
                          struct budget_option_state *st);

/* F or U from the traced command lines, when the options do not give it;
 * vLLM falls back on its default U. SGLang's page size (default 1) and
 * --max-total-tokens (default none) are found the same way. */
void budget_values_from_cmdlines(struct budget_analysis *r);
/* SGLang's F when no option or launch line gives it: SGLang's own
 * derivation replayed (o->derived). 0, or -1 after an error line. */
int budget_derive_fraction(struct budget_analysis *r);
/* Where a value from a command line came from, for a report (as below). */
char *budget_count_source_text(const struct budget_count *c, char *buf, size_t size);
/* Where a value from a command line came from, for a report: "the command
 * line of pid 17", "launcher pid 4242's command line", "the command cutrace
 * run launched". Returns buf. */
char *budget_source_text(const struct budget_options *o, char *buf, size_t size);

/*
 * Finds the ranks and jobs of r->m and analyses each (r->m and r->o set,
 * the rest zero). Returns 0, or -1 after printing the one-line error of
 * bad input (a --pre/--post that names no measurement). r->analysed counts
 * the ranks that could be analysed.
 */
int budget_analyse(struct budget_analysis *r);
/* SGLang's path into r->server, from the trace or --server-version
 * (budget_detect.c): budget_analyse calls it when the path is unknown. */
void budget_choose_path(struct budget_analysis *r);
void budget_analysis_free(struct budget_analysis *r);

/* "sglang-current", "vllm-older", ...: a path's name in reports. */
const char *budget_path_name(enum budget_path path);

/* A decomposition row's words: "custom all-reduce buffers (ipc_exported)"
 * (malloc'd), and when it was made: "made before pre". */
char *budget_part_label(const struct budget_row *d);
const char *budget_part_when(enum budget_part part);

/* Between the analysis's two files: budget_ranks.c finds the ranks and jobs
 * (-1 after an error line when --pre/--post name no measurement), and both
 * add notes (text malloc'd, owned by r from then on). */
int budget_find_groups(struct budget_analysis *r);
void budget_add_note(struct budget_analysis *r, char *text);
/* Between budget_analysis.c and budget_vllm.c: a rank's two measurements
 * (the GPU's live bytes at each, what was made between), their Python
 * functions added to its choice, and an option value from the launch lines
 * (source "cmdline"), else fallback ("default"; none when <= 0). */
void budget_measure_rank(const struct budget_analysis *r, struct budget_rank *rk);
void budget_name_measurements(const struct budget_analysis *r, struct budget_rank *rk);
void budget_count_from_cmdlines(struct budget_analysis *r, const char *flag, struct budget_count *c,
                                int64_t fallback);

/* ---- vLLM (budget_vllm.c) ---- */

/*
 * The vLLM code path a trace comes from: --server-version (about 0.18 and
 * later: current), else a measurement made in profile_cudagraph_memory on a
 * Python stack (current), else the older path by default. *source is
 * "option", "trace" or "default"; *why is malloc'd.
 */
enum budget_path budget_vllm_path(const struct budget_analysis *r, const char **source, char **why);
/* The path replayed: r->server.path when the analysis set it, else the above. */
bool budget_vllm_current(const struct budget_analysis *r);
/* The code path (into r->server when unset) and the KV cache's inputs from
 * the launch lines; U's default then follows the path. */
void budget_vllm_values_from_cmdlines(struct budget_analysis *r);
/* vLLM's own options (BUDGET_VLLM_LONG_OPTIONS), as budget_option. */
int budget_vllm_option(const char *cmd, int c, const char *arg, struct budget_options *o,
                       struct budget_option_state *st);
/* One job replayed as vLLM does (all its ranks measured here). */
void budget_vllm_analyse_job(struct budget_analysis *r, struct budget_job *g);

#endif
