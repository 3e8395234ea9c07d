/*
 * milestones.h - the names of a run's milestones and moments, in one place,
 * for every report and every option that asks for a moment.
 *
 * A milestone kind has a key (JSON, options: "comm_init"), a label (text:
 * "NCCL init") and a numbering: the kinds a GPU sees many times (NCCL
 * inits, measurements, captures, failed calls, bursts) are numbered by
 * their occurrence on the GPU ("NCCL init 2", `comm_init:2`); the kinds each
 * process has once (first call, IPC export, weight burst, last event, ...)
 * by the process, in the order the GPU's stream reaches them ("weight burst
 * begins, process 2", `weight_burst_begin:2`). `cutrace timeline` shows the
 * label with its details, `cutrace diff` the numbered name, `cutrace sites
 * --at` takes the key with its number; all three read this table.
 *
 * A moment is a point of a GPU's stream a report can be asked about:
 *   peak           the GPU's highest traced bytes
 *   end            after the last call, before the processes' exit
 *   KEY[:N]        the N-th milestone of that kind on the GPU (1 first, -1 last)
 *   pre[:N], post[:N]  the measurements (cudaMemGetInfo) before and after
 *                  the N-th process's weight burst, chosen as `cutrace budget`
 *                  chooses them without --framework (gm_weight_burst)
 *   seq:N, seq:PID:N   right after call N of the GPU's one process (of PID)
 */
#ifndef CUTRACE_ANALYZER_MILESTONES_H
#define CUTRACE_ANALYZER_MILESTONES_H

#include "model/gpumodel.h"

#include <stdbool.h>
#include <stdint.h>

/* In the order rows of one event sort by (burst begins before ends). */
enum ms_kind {
    MS_FIRST_CALL,
    MS_COMM_INIT,
    MS_IPC_EXPORT,
    MS_IPC_OPEN,
    MS_MEASUREMENT,
    MS_WEIGHT_BEGIN,
    MS_WEIGHT_END,
    MS_BURST_BEGIN,
    MS_BURST_END,
    MS_FREE_BURST,
    MS_CAPTURE_BEGIN,
    MS_CAPTURE_END,
    MS_COLLECTIVE,
    MS_FAILED,
    MS_NVTX_MARK, /* the program's NVTX marks and ranges (docs/nvtx.md) */
    MS_NVTX_BEGIN,
    MS_NVTX_END,
    MS_END,
};
#define MS_KINDS 18

enum ms_numbering {
    MS_BY_OCCURRENCE, /* the N-th of its kind on the GPU */
    MS_BY_PROCESS,    /* once per process: the N-th process to reach it */
};

/* "comm_init", "weight_burst_begin", ... (JSON and options). */
const char *ms_key(enum ms_kind kind);
/* "NCCL init", "weight burst begins", ... (text). */
const char *ms_label(enum ms_kind kind);
enum ms_numbering ms_numbering(enum ms_kind kind);
/* The kind whose key is `key` (length len), false when none. */
bool ms_kind_of_key(const char *key, size_t len, enum ms_kind *out);

/*
 * The text name of the n-th (1-based) milestone of a kind on a GPU: "NCCL
 * init 2", "CUDA-graph capture 1 begins", "weight burst begins" (the first
 * process), "last event, process 2". `sub` names the call of a failed one
 * ("failed cudaMalloc 1", numbered among that api's) and the message of an
 * NVTX one ("NVTX load_weights 1 begins", "NVTX mark ready 1", numbered
 * among that message's), NULL otherwise. Allocated.
 */
char *ms_name(enum ms_kind kind, uint32_t n, const char *sub);
/* Whether milestones of the kind are named and numbered by a `sub`. */
bool ms_has_sub(enum ms_kind kind);

/* The measurements around a weight burst. */
enum ms_tag { MS_TAG_NONE, MS_TAG_PRE, MS_TAG_POST };
/* "pre", "post"; "" for none. */
const char *ms_tag_key(enum ms_tag tag);

/* ---- moments ---- */

enum moment_kind { MOMENT_PEAK, MOMENT_END, MOMENT_MILESTONE, MOMENT_PRE, MOMENT_POST, MOMENT_SEQ };

struct moment_spec {
    enum moment_kind kind;
    const char *text;  /* as the user wrote it, for messages */
    enum ms_kind ms;   /* MOMENT_MILESTONE */
    int64_t n;         /* 1-based; negative from the last */
    int64_t pid, seq;  /* MOMENT_SEQ; pid -1 when not given */
    int64_t burst_min; /* the weight burst's minimum (GM_BURST_MIN_DEFAULT) */
};

/* The help of an option that takes a moment, each line indented by 22
 * columns (a usage text's second column); milestones.c's table and the
 * kinds listed here are checked against each other by test_milestones. */
#define MOMENT_HELP                                                                                \
    "                      peak (the GPU's highest traced bytes), end (after the last\n"           \
    "                      call, before the processes' exit); a milestone with an\n"               \
    "                      optional :N, the N-th on the GPU (1 first, -1 last):\n"                 \
    "                      " MOMENT_KEYS ";\n"                                                     \
    "                      pre, post (the measurements before and after the weight\n"              \
    "                      burst, as `cutrace budget` picks them; :N the N-th\n"                   \
    "                      process's); seq:N (right after call N; seq:PID:N with\n"                \
    "                      several processes)\n"
#define MOMENT_KEYS                                                                                \
    "first_call, comm_init, ipc_export,\n"                                                         \
    "                      ipc_open, measurement, weight_burst_begin, weight_burst_end,\n"         \
    "                      capture_begin, capture_end, first_collective, failed_call,\n"           \
    "                      nvtx_mark, nvtx_begin, nvtx_end, process_end"

/* Parses a moment; false (with *why, a static phrase) when it is none. */
bool moment_parse(const char *arg, struct moment_spec *out, const char **why);

/* A moment found on one GPU: an event of its stream, with it applied. */
struct moment {
    bool found;
    uint64_t pos;      /* its position in the GPU's stream */
    struct gm_ref ref; /* the event */
    int64_t traced;    /* traced GPU bytes live then */
};

/* Finds a moment on one GPU; false when the GPU has none such. */
bool moment_find(const struct gm_model *m, uint32_t gpu, const struct moment_spec *at,
                 struct moment *out);

#endif
