/*
 * timeline.h - the rows of `cutrace timeline`: per physical GPU, every
 * milestone of every process using it (milestones.h names them), in the
 * order of the GPU's stream, each with the live bytes per category at that
 * moment. Computed from the run model (gpumodel.h) alone, with no hint from
 * the user; cmd/timeline.c chooses the GPUs and prints.
 */
#ifndef CUTRACE_ANALYZER_TIMELINE_H
#define CUTRACE_ANALYZER_TIMELINE_H

#include "model/filter.h"
#include "model/gpumodel.h"
#include "model/milestones.h"

#include <stddef.h>
#include <stdint.h>

struct row {
    enum ms_kind kind;
    uint32_t proc, event;
    uint64_t pos;
    int order; /* within one event: burst begins, the event, burst ends */
    int64_t live[GM_CATEGORIES];
    int64_t count, bytes, first_seq, last_seq; /* bursts; count = graphs for captures */
    uint8_t tag;    /* measurements: enum ms_tag (around the process's weight burst) */
    uint32_t n;     /* 1-based among the GPU's rows of its kind (milestones.h) */
    uint32_t n_api; /* failed calls: 1-based among the GPU's failed calls of its api;
                       NVTX milestones: among the GPU's of their kind and message */
};

struct gpu_report {
    uint32_t gpu;
    struct row *rows;
    size_t nrows, cap;
    int64_t peak[GM_CATEGORIES]; /* over the rows */
    int64_t first_t_ns;
};

/* Fills g->rows for GPU g->gpu (g zeroed but for gpu), sorted by position. */
void timeline_build_gpu(const struct gm_model *m, struct gpu_report *g);
/* Keeps the rows of the processes f passes (the pictures' milestones, as
 * `cutrace timeline` lists them); the live bytes in each row and g->peak
 * stay the whole GPU's. */
void timeline_keep_listed(struct gpu_report *g, const struct gm_filter *f);

/* The model event a row stands at. */
const struct gm_event *timeline_row_event(const struct gm_model *m, const struct row *r);
/* What names a row besides its kind (ms_name's sub): a failed call's api,
 * an NVTX milestone's message; NULL for the others. */
const char *timeline_row_sub(const struct gm_model *m, const struct row *r);

#endif
