/*
 * diff_analysis.h - `cutrace diff` without its printing: two runs (A, the
 * baseline, and B, the other) loaded into models (gpumodel.h) and compared
 * by what happened in them, never by when:
 *
 *   - GPUs are paired by the NCCL rank of the process using them, else by
 *     device ordinal, else by uuid (uuids differ between machines, and
 *     CUDA_VISIBLE_DEVICES renumbers ordinals);
 *   - each pair's milestones (milestones.h) are aligned by identity: a
 *     milestone is its kind and its occurrence on the GPU ("measurement 2"),
 *     and the longest common subsequence of the two lists is what both runs
 *     did; the rest happened in one run only;
 *   - at each aligned milestone, live bytes by category and free memory on
 *     both sides, and the first milestone that diverges by more than a
 *     threshold;
 *   - the allocations of each pair grouped by phase (the stretch between
 *     two aligned milestones) x api x issuing module x size x category, and
 *     the groups whose counts differ: what one run made that the other did
 *     not, with its cost;
 *   - IPC lineage, communicators with their memory and collectives, the
 *     server's KV-cache budget (budget_analysis.h) and the configuration
 *     (command lines, recorded environment) on each side.
 *
 * The report filters (--rank, --pid, --host, --gpu: diff_filter.c) choose
 * the pairs right after pairing: what is aligned, grouped and summed over
 * pairs is then over the listed pairs only; a GPU's own numbers, and what
 * belongs to a run as a whole (IPC, communicators, budget, configuration),
 * stay computed over everything.
 *
 * Nothing compared depends on pids, pointers, timestamps, hashes or file
 * names, so two identical runs compare equal; they are kept only as context.
 */
#ifndef CUTRACE_ANALYZER_DIFF_ANALYSIS_H
#define CUTRACE_ANALYZER_DIFF_ANALYSIS_H

#include "analysis/budget_analysis.h"
#include "cli.h"
#include "model/gpumodel.h"
#include "model/milestones.h"
#include "symbols/stacks.h"
#include "model/trace.h"
#include "model/traceset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DIFF_THRESHOLD_DEFAULT (16ll << 20)
/* Failed calls kept as milestones per GPU: a run that fails in a loop
 * should not drown the alignment (the rest is counted). */
#define DIFF_MAX_FAILED_MILESTONES 50

enum { DIFF_A = 0, DIFF_B = 1 }; /* baseline, other */

/* What the user asked for (cmd/diff.c parses it). */
struct diff_options {
    const char *paths[2];
    int64_t threshold; /* a milestone diverges when a delta exceeds it */
    bool budget;       /* --framework given: compare the budgets */
    struct budget_options budget_options;
    bool json;
    const struct cli_report_opts *filters; /* --rank/--pid/--host/--gpu; NULL: none */
};

/* One milestone of one GPU of one run. */
struct diff_milestone {
    uint8_t kind;        /* enum ms_kind (milestones.h) */
    uint8_t order;       /* 0 before its event, 1 the event, 2 after it (burst ends) */
    uint8_t tag;         /* measurements: enum ms_tag (around the weight burst) */
    uint32_t occurrence; /* 1-based among the GPU's milestones of its kind (and api) */
    uint32_t sub;        /* failed calls: the diff-wide id of the api; else 0 */
    uint32_t proc, event;
    uint64_t pos; /* its event's position in the GPU's stream */
    int64_t live[GM_CATEGORIES];
    bool measured; /* a measurement: free and total are known */
    int64_t free_bytes, total_bytes;
    int64_t detail; /* comm init: nranks; capture end: graphs; failed: result; end: exited */
};

/* A GPU of one run. */
struct diff_gpu {
    uint32_t gpu;  /* index into the model's gpus */
    uint32_t proc; /* the process that used it most (GM_NONE: none) */
    bool has_rank; /* the NCCL rank of the processes whose GPU it is, when one */
    int64_t rank, world;
    int64_t ordinal;
    struct diff_milestone *ms;
    size_t nms;
    int64_t failed_dropped; /* failed calls past DIFF_MAX_FAILED_MILESTONES */
    uint32_t pair;          /* index into the diff's pairs, GM_NONE when unpaired, DIFF_UNLISTED */
};

/* diff_gpu.pair of a GPU (paired or not) that the filters do not list. */
#define DIFF_UNLISTED (GM_NONE - 1)

enum diff_match_by { DIFF_BY_RANK, DIFF_BY_ORDINAL, DIFF_BY_UUID };
extern const char *const diff_match_keys[]; /* "rank", "ordinal", "uuid" */

/* One step of a pair's aligned milestones: a milestone of A, of B, or both. */
struct diff_step {
    int32_t ms[2]; /* index into each side's gpu ms, -1 absent */
    uint32_t row;  /* the diff's row */
};

struct diff_pair {
    uint32_t gpu[2]; /* index into each run's gpus */
    uint8_t by;      /* enum diff_match_by */
    uint32_t index;  /* among all pairs, before the filters: what --gpu INDEX names */
    struct diff_step *steps;
    size_t nsteps;
    int64_t first_div; /* the first step whose deltas exceed the threshold, -1 none */
};

/* A milestone in the order of all pairs (kind, sub and occurrence). */
struct diff_row {
    uint8_t kind, tag;
    uint32_t sub, occurrence;
    char *label;       /* "measurement 2 (pre)", "NCCL init 1", ... */
    size_t present[2]; /* pairs with it on that side */
    size_t matched;    /* pairs with it on both */
    size_t diverged;   /* pairs whose deltas exceed the threshold there */
};

/* Allocations of one group, over every pair. */
struct diff_alloc_row {
    int64_t phase;        /* the row that starts the phase; -1 before the first common milestone */
    int64_t phase_end;    /* the next row matched somewhere, -1 none */
    uint32_t api, module; /* diff-wide string ids (module "" unknown) */
    uint32_t site;        /* the call site, diff-wide; "" when sites are not compared */
    int64_t size;
    uint8_t category;
    int64_t count[2], bytes[2]; /* summed over pairs */
    int64_t dmin, dmax;         /* per-pair count delta (B - A), pairs without it count 0 */
    size_t changed;             /* pairs where it differs */
    struct diff_alloc_pair {
        uint32_t pair;
        int64_t count[2];
    } * per_pair; /* pairs where it differs */
    size_t nper;
};

/* IPC: one exported allocation and who mapped it. */
struct diff_ipc_buffer {
    uint32_t proc, alloc; /* the exporter's allocation */
    uint32_t api, module; /* diff-wide ids */
    int64_t size;
    char *exporter;        /* "rank 3" or "pid 4242" */
    char *openers;         /* "every other rank (7)", "ranks 1-2", "nobody" */
    int64_t opens;         /* mappings made of it */
    int64_t nopeners;      /* distinct processes that made them */
    int64_t *opener_ranks; /* their ranks (or -pid - 1 without a rank), ascending */
};

/* Buffers that share everything but their exporter, for the text. */
struct diff_ipc_group {
    uint32_t api, module;
    int64_t size;
    const char *openers; /* borrowed from the first buffer */
    char *exporters;     /* "ranks 0-7" */
    int64_t buffers, opens;
};

struct diff_ipc {
    struct diff_ipc_buffer *buffers;
    size_t nbuffers;
    struct diff_ipc_group *groups;
    size_t ngroups;
    int64_t opens;         /* every IPC mapping made */
    int64_t foreign_opens; /* ... of handles no trace of the run exported */
};

/* Collectives of one op on one communicator, summed over its ranks. */
struct diff_op {
    uint32_t op; /* diff-wide id */
    int64_t calls, bytes, captured, failed;
    int64_t rank_min, rank_max; /* calls per traced member */
    int64_t ranks;              /* members that made any */
};

/* One NCCL communicator of a run: its inits joined by unique-id hash. */
struct diff_comm {
    uint64_t hash;   /* differs between runs: context only */
    int64_t ordinal; /* 1-based order of its init in its ranks' processes */
    int64_t nranks;
    size_t members;     /* traced ranks (successful inits) */
    int64_t nccl_bytes; /* NCCL memory its ranks made from its init on (before the next init) */
    int64_t nccl_min, nccl_max; /* ... per member */
    struct diff_op *ops;
    size_t nops;
    int64_t min_rank; /* its lowest traced rank, for a stable order */
    uint32_t match;   /* the other run's communicator of the same ordinal, GM_NONE */
};

struct diff_count {
    char *text;
    size_t count;
    /* For a command line: the further lines whose flags hold for its
     * processes (gm_launch_line: the launcher's and its ancestors', parent
     * first, then the run's), where a spawned worker's flags are. */
    char **launched_by;
    size_t nlaunched_by;
};

/* A recorded environment variable: its values over a run's processes. */
struct diff_env {
    char *name;
    char *value; /* NULL: unset in every process; several values joined by " | " */
};

/* One side. */
struct diff_run {
    const char *path;
    struct trace_set set;
    bool set_open;
    struct gm_model m;
    bool loaded;
    struct diff_gpu *gpus;
    size_t ngpus;
    size_t ranks;     /* GPUs with a rank */
    int64_t world;    /* nranks of the largest successful communicator, 0 none */
    int64_t *missing; /* ranks 0..world-1 no GPU of the run has */
    size_t nmissing;
    size_t exited, killed; /* processes; the others still running or unknown */
    struct diff_comm *comms;
    size_t ncomms;
    int64_t nccl_outside_bytes; /* NCCL memory made before any communicator */
    int64_t unattributed_calls; /* collectives on no known communicator */
    bool nccl_recorded;
    struct diff_ipc ipc;
    struct diff_count *cmdlines; /* distinct command lines, most common first */
    size_t ncmdlines;
    struct diff_env *env; /* by name */
    size_t nenv;
    struct budget_options budget_options;
    struct budget_analysis budget;
    bool budget_ok;
    struct stack_set *stacks; /* per process of m, loaded on first use (call sites) */
    bool *stacks_loaded;
};

/* What differs, for the verdict (bits of diff.differences). */
enum diff_difference {
    DIFF_D_GPUS,        /* a GPU of one run has no partner */
    DIFF_D_ENDS,        /* processes ended differently */
    DIFF_D_MILESTONES,  /* a milestone of one run only */
    DIFF_D_MEMORY,      /* a milestone diverges by more than the threshold */
    DIFF_D_ALLOCATIONS, /* allocation groups differ */
    DIFF_D_IPC,
    DIFF_D_COMMUNICATORS,
    DIFF_D_COLLECTIVES,
    DIFF_D_BUDGET,
    DIFF_D_CMDLINE,
    DIFF_D_ENV,
    DIFF_D_COUNT,
};
extern const char *const diff_difference_keys[]; /* "gpus", "ends", ... */

struct diff_env_change {
    const char *name;     /* borrowed */
    const char *value[2]; /* borrowed; NULL unset */
};

struct diff {
    struct diff_options *o;
    struct diff_run run[2];
    struct symbolizer *sym;  /* names native frames of both runs, with one cache */
    bool sites_compared;     /* every process of both runs has call stacks */
    struct diff_pair *pairs; /* ranks first, ascending, then ordinals, then uuids */
    size_t npairs;           /* the listed ones (all without a filter) */
    bool filtered;           /* a filter was given */
    size_t pairs_total;      /* pairs before the filters */
    size_t paired_by[3];     /* ... by enum diff_match_by */
    struct diff_row *rows;
    size_t nrows, rows_cap;
    int64_t first_div_row; /* the earliest row where some pair diverges, -1 none */
    uint32_t first_div_pair;
    struct diff_alloc_row *allocs; /* by impact: |bytes B - bytes A| over pairs, largest first */
    size_t nallocs;
    char **strings; /* diff-wide names (apis, modules, ops) */
    size_t nstrings, strings_cap;
    /* configuration */
    char **cmd_added, **cmd_removed; /* words of B's main command line that A's lacks, and back */
    size_t ncmd_added, ncmd_removed;
    struct diff_env_change *env_changes;
    size_t nenv_changes;
    size_t env_compared;
    unsigned differences; /* bits of enum diff_difference */
    char **notes;
    size_t nnotes, notes_cap;
};

/*
 * Opens, loads and compares the two runs. Returns 0, or the exit status
 * after printing one line: CLI_EXIT_BAD_INPUT for traces that cannot be
 * read, CLI_EXIT_USAGE when the budget needs a fraction no command line
 * gives or the filters list no GPU. diff_free releases what was made either way.
 */
int diff_run_all(struct diff *d, struct diff_options *o);
void diff_free(struct diff *d);

/* A diff-wide name ("" for an id out of range). */
const char *diff_string(const struct diff *d, uint32_t id);

/* "rank 3", "device 3" or the first 12 characters of the uuid: how a pair
 * or an unpaired GPU is named. Malloc'd. */
char *diff_gpu_name(const struct diff *d, int side, uint32_t gpu);
char *diff_pair_name(const struct diff *d, uint32_t pair);
/* "ranks 0-3, 5" for a set of pairs (indexes, ascending), "every pair" for
 * all of them. Malloc'd. */
char *diff_pairs_text(const struct diff *d, const uint32_t *pairs, size_t count);

/* The milestone of a pair's step on a side, NULL when that side lacks it. */
const struct diff_milestone *diff_step_ms(const struct diff *d, const struct diff_pair *p,
                                          const struct diff_step *s, int side);
/* A milestone's words: "measurement 2 (pre)", "NCCL init 1", "failed
 * cudaMalloc 1", ... (malloc'd): the same for the same milestone of any
 * run. */
char *diff_ms_label(const struct diff *d, const struct diff_milestone *ms);
/* Traced GPU bytes at a milestone. */
int64_t diff_ms_traced(const struct diff_milestone *ms);
/* Whether a matched step's deltas exceed the threshold. */
bool diff_step_diverges(const struct diff *d, const struct diff_pair *p, const struct diff_step *s);

/*
 * The step of the first divergence (d->first_div_row) in the pair the
 * report shows (d->first_div_pair), and in *pairs (malloc'd, *n of them)
 * every pair that diverges at that milestone. NULL when nothing diverges.
 */
const struct diff_step *diff_first_divergence(const struct diff *d, uint32_t **pairs, size_t *n);

/* A size, exactly: "256 MiB + 5 KiB", "20 MiB" (at most two whole
 * units), else "2776320 B". Returns buf. */
#define DIFF_SIZE_BUF 64
char *diff_exact_size(char *buf, size_t size, int64_t bytes);
/* A signed size for deltas: "+532.0 MiB", "-20.0 MiB", "0". Returns buf. */
char *diff_signed_size(char *buf, size_t size, int64_t bytes);

#endif
