/*
 * export_sink.h - what `cutrace export` hands its output formats: tracks
 * and the events on them, in the terms Perfetto's TrackEvent uses, so that
 * the walk over a run (analysis/export.c) is written once and the formats
 * (out/export_proto.c, out/export_json.c) only encode.
 *
 * The walk promises every sink: a track is declared before the first event
 * on it and before its children; events come in streams (stream_begin), and
 * within one stream timestamps never decrease; on one track, slices nest
 * (an END closes the last BEGIN still open on that track) and every BEGIN
 * has its END in the same stream; counter tracks get only counter events;
 * each flow id is started by exactly one event (flows) and ended by exactly
 * one later-declared event (terminating). A sink may assert these.
 */
#ifndef CUTRACE_ANALYZER_EXPORT_SINK_H
#define CUTRACE_ANALYZER_EXPORT_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ex_track_kind {
    EX_TRACK_PROCESS, /* a traced process: pid, name */
    EX_TRACK_THREAD,  /* one of its threads: pid, tid, name; parent the process */
    EX_TRACK_GROUP,   /* a named group of tracks not of a process (a GPU, a communicator) */
    EX_TRACK_SLICES,  /* slices and instants in a group or a process: parent it */
    EX_TRACK_COUNTER, /* a counter in a group, in bytes: parent the group */
};

struct ex_track {
    uint64_t uuid;   /* never 0 */
    uint64_t parent; /* 0: none (processes and groups) */
    enum ex_track_kind kind;
    const char *name;
    int64_t pid, tid; /* processes and threads, as shown (export.h: pids made unique) */
};

enum ex_arg_type { EX_ARG_INT, EX_ARG_STRING, EX_ARG_POINTER };
#define EX_MAX_ARGS 24 /* per event */

/* One argument of an event ("debug annotation"). */
struct ex_arg {
    const char *name;
    enum ex_arg_type type;
    int64_t i;     /* INT; POINTER: the 64 bits */
    const char *s; /* STRING */
};

enum ex_event_type { EX_BEGIN, EX_END, EX_INSTANT, EX_COUNTER };

struct ex_event {
    enum ex_event_type type;
    uint64_t track;
    int64_t ts;           /* ns, CLOCK_MONOTONIC of the run's reference host; >= 0 */
    const char *name;     /* BEGIN and INSTANT */
    const char *category; /* BEGIN and INSTANT; NULL none */
    int64_t value;        /* COUNTER */
    const struct ex_arg *args;
    size_t nargs;
    const uint64_t *flows, *terminating; /* flow ids this event starts, ends */
    size_t nflows, nterminating;
};

struct ex_sink {
    void *state;
    /* Each returns 0, or -1 once the output cannot be written. */
    int (*stream_begin)(void *state);
    int (*track)(void *state, const struct ex_track *t);
    int (*event)(void *state, const struct ex_event *e);
};

#endif
