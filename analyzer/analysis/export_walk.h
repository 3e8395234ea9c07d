/*
 * export_walk.h - the state of one `cutrace export` walk and the
 * primitives its parts share (export.c walks the processes, calls,
 * collectives, flows and GPUs; export_nvtx.c the NVTX ranges), so that
 * every part writes its streams, tracks and events the same way: times on
 * the run's one axis, never back within a stream, the first write error
 * kept. Internal to the export: export.h is its interface.
 */
#ifndef CUTRACE_ANALYZER_EXPORT_WALK_H
#define CUTRACE_ANALYZER_EXPORT_WALK_H

#include "analysis/export_sink.h"
#include "model/filter.h"
#include "model/gpumodel.h"
#include "model/trace.h"
#include "model/traceset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One end of an IPC flow: the call (process, seq) that starts or ends it. */
struct flow_end {
    uint32_t proc;
    int64_t seq;
    uint64_t id;
    bool terminating;
};

/* A communicator group, by unique-id hash. */
struct comm_group {
    char *hash;
    uint64_t uuid;
};

struct walk {
    const struct gm_model *m;
    struct trace_set *set;
    const struct gm_filter *f; /* what is drawn */
    const struct ex_sink *s;
    int status;
    uint64_t next_uuid;
    uint64_t *proc_uuid;
    int64_t *pid_shift; /* per process: added to its pid and tids */
    int64_t last_ts;    /* of the current stream */
    struct flow_end *flows;
    size_t nflows, flows_cap;
    struct comm_group *groups;
    size_t ngroups, groups_cap;
    int64_t *ends; /* the open slices' ends on the current track, innermost last */
    size_t nends, ends_cap;
    uint64_t *starts, *stops; /* the flows of the current call */
    size_t starts_cap, stops_cap;
};

/* Whether the walk goes on: no write or read has failed. */
bool export_ok(const struct walk *w);
/* Prints t's one-line error and stops the walk; returns -1. */
int export_fail_read(struct walk *w, struct trace *t);
/* A new stream (packet sequence): its time starts again at 0. */
void export_stream_begin(struct walk *w);
/* Declares a track in the current stream; returns its uuid. */
uint64_t export_track(struct walk *w, enum ex_track_kind kind, uint64_t parent, const char *name,
                      int64_t pid, int64_t tid);
/* Writes e at no earlier than the stream's last time (export.h says why). */
void export_emit(struct walk *w, struct ex_event *e);
/* A time of process p on the run's axis, never negative. */
int64_t export_axis(const struct walk *w, const struct gm_process *p, int64_t t);
/* The trace process proc of the model was read from. */
struct trace *export_trace_of(struct walk *w, uint32_t proc);
/* Adds the integer argument name = v to args[*n] (when v is not 0, or always). */
void export_arg_int(struct ex_arg *args, size_t *n, const char *name, int64_t v, bool always);

/* The NVTX ranges and marks of process proc, on its tracks (export_nvtx.c). */
int export_process_nvtx(struct walk *w, uint32_t proc);

#endif
