/*
 * event.h - what a hook calls around the real function: the hot path.
 *
 *     struct ct_event ev;
 *     ct_event_begin(&ev, CT_API_cudaMalloc, CT_CALLER);
 *     cudaError_t rc = real(devPtr, size);
 *     ev.rec.size = size; ...
 *     ct_event_end(&ev, rc);
 *
 * begin takes a sequence number (one atomic add) and the entry time;
 * returned the duration and ret_seq (one atomic load); end fills in the
 * thread, device and result and appends the record to the ring. None does
 * I/O, allocates, or takes a lock once the process's trace exists; the
 * first event of a process creates it (ct_session_start). errno is the
 * program's when end returns.
 *
 * A call that can block (hook.h's CT_TRACE_BLOCKING) also calls
 * ct_event_enter once the record holds what is known before the call, and
 * ct_event_leave after end: its "entered" mark (session.h) survives a
 * SIGKILL while the call has not returned. Only those hooks pay for it;
 * every other hook's path is the same as without marks.
 */
#ifndef CUTRACE_EVENT_H
#define CUTRACE_EVENT_H

#include <stdbool.h>
#include <stdint.h>

#include "cutrace/apis.h"
#include "cutrace/format.h"

#define CT_CALLER __builtin_return_address(0)

struct ct_event {
    struct ct_record rec;
    bool traced;       /* false when tracing is off for this call */
    bool returned;     /* ct_event_returned() took the end time */
    bool device_given; /* the hook set rec.device itself */
    bool stacked;      /* captures a call stack at its end (stacks.h) */
    /* The thread's nesting state at begin, put back at end. */
    uint16_t outer_depth; /* traced calls of the thread already in progress */
    uint8_t outer_level;
    uint64_t outer_seq;
    struct ct_mark *mark; /* set by ct_event_enter only (blocking calls) */
};

/*
 * `caller` is the hook's return address: the code that called the API. The
 * call is nested in the thread's call in progress when that caller is the
 * CUDA stack's own code (cudalibs.h), top level otherwise.
 */
void ct_event_begin(struct ct_event *ev, enum ct_api api, const void *caller);
/* For a record a hook makes as part of its own call in progress
 * (ncclCommInitAll's one per communicator): nested in it, whoever called. */
void ct_event_begin_part(struct ct_event *ev, enum ct_api api, const void *caller);
/* The real function returned: its duration ends here, not at ct_event_end,
 * and so does what it did, for the order of effects (rec.ret_seq). */
void ct_event_returned(struct ct_event *ev);
void ct_event_end(struct ct_event *ev, int result);

/* Marks the call as entered (its record as filled so far, with its thread)
 * before a blocking call; ct_event_leave frees the mark after ct_event_end. */
void ct_event_enter(struct ct_event *ev);
void ct_event_leave(struct ct_event *ev);

/* For a record whose device is not the calling thread's current one. */
void ct_event_set_device(struct ct_event *ev, int device);

/* For hooks whose record carries an IPC handle. */
void ct_event_set_handle(struct ct_event *ev, const void *handle);

#endif
