/*
 * event.c - the hot path shared by every hook.
 */
#include "event.h"

#include <errno.h>
#include <string.h>

#include "clock.h"
#include "cudalibs.h"
#include "device.h"
#include "session.h"
#include "stacks.h"
#include "thread.h"

/*
 * A call is nested in the thread's call in progress only when the CUDA stack
 * made it (its caller lies in the stack's code, cudalibs.h) or the hook
 * says it is part of that call. Anything else that runs in the middle of a
 * call - a signal handler of the program - makes top-level calls of its
 * own. Either way the thread's nesting state is saved here and put back
 * exactly at the end, so the interrupted call carries on as it was.
 */
/* Inlined into both entry points: one prologue per call, not a wrapper's
 * and then a split-off body's. */
static inline __attribute__((always_inline)) void begin(struct ct_event *ev, enum ct_api api,
                                                        const void *caller, bool part)
{
    ev->traced = !ct_self.internal && ct_session_tracing();
    if (!ev->traced)
        return;
    ev->returned = false;
    ev->device_given = false;
    ev->stacked = ct_stacks_enter(api);
    uint64_t seq = ct_session_next_seq();
    uint16_t outer_depth = ct_self.depth;
    uint8_t outer_level = ct_self.current_level;
    uint64_t outer_seq = ct_self.current_seq;
    ev->outer_seq = outer_seq;
    ev->outer_depth = outer_depth;
    ev->outer_level = outer_level;
    bool nested = outer_depth > 0 && (part || ct_cudalibs_contains((uint64_t)(uintptr_t)caller));
    uint8_t depth = !nested ? 0 : outer_level == UINT8_MAX ? UINT8_MAX : (uint8_t)(outer_level + 1);
    /*
     * Every field written once, here or later on every path (dur_ns and
     * ret_seq by take_return, tid, result and device by end), with no memset
     * of the whole record first: these become a few wide stores, where a
     * 248-byte memset was a string instruction and every field then written
     * twice. The record is whole from here on (an entered mark copies it).
     */
    struct ct_record *r = &ev->rec;
    r->seq = seq;
    r->parent_seq = nested ? outer_seq : 0;
    r->dur_ns = 0;
    r->wait_ns = 0;
    r->ptr = 0;
    r->size = 0;
    r->flags = 0;
    r->stream = 0;
    memset(r->arg, 0, sizeof r->arg);
    r->caller = (uint64_t)(uintptr_t)caller;
    r->stack_id = 0;
    r->tid = 0;
    r->device = -1;
    r->result = 0;
    r->api = (uint16_t)api;
    r->depth = depth;
    r->has_handle = 0;
    memset(r->handle, 0, sizeof r->handle);
    r->ret_seq = 0;
    memset(r->reserved, 0, sizeof r->reserved);
    ct_self.depth = outer_depth == UINT16_MAX ? UINT16_MAX : (uint16_t)(outer_depth + 1);
    ct_self.current_seq = seq;
    ct_self.current_level = depth;
    r->t_ns = ct_now_ns();
}

void ct_event_begin(struct ct_event *ev, enum ct_api api, const void *caller)
{
    begin(ev, api, caller, false);
}

void ct_event_begin_part(struct ct_event *ev, enum ct_api api, const void *caller)
{
    begin(ev, api, caller, true);
}

/*
 * Whose device a call ran on. A driver call: the driver context's. Any other:
 * the runtime's notion, which may be asked of the runtime only for a call
 * that succeeded with no other call of the thread in progress - a nested
 * call can be the runtime's own, made while it holds its locks or is still
 * initializing, and a signal handler's may have interrupted one that does.
 * A nested runtime call that succeeded left the runtime's device's context
 * current on the thread (the runtime binds it before it works, and the
 * driver is up), so the driver is asked instead, as it is for the driver
 * calls nested in it: a handler's allocation inside the process's first
 * call is then on its GPU, not on none. Only then: a top-level call that
 * succeeded without the driver (cudaRuntimeGetVersion, any NCCL call) must
 * not reach a driver that may never have been loaded, or was unloaded.
 */
static int device_of(const struct ct_event *ev, int result)
{
    enum ct_layer layer = ct_api_table[ev->rec.api].layer_id;
    if (layer == CT_LAYER_driver)
        return ct_device_of_context();
    /* ct_device_current's own first test, inline: the usual case, once known. */
    int device = ct_self.device_known ? ct_self.device
                                      : ct_device_current(result == 0 && ev->outer_depth == 0);
    if (device < 0 && result == 0 && ev->outer_depth > 0 && layer == CT_LAYER_runtime)
        device = ct_device_of_context();
    return device;
}

/* Shared by ct_event_returned and ct_event_end (whichever comes first). */
static inline void take_return(struct ct_event *ev)
{
    ev->rec.dur_ns = ct_now_ns() - ev->rec.t_ns;
    /* A load, not a sequence number: no gap in seq, no contention added.
     * Never below seq: a fork in the call restarts the child's count. */
    uint64_t now = ct_session_seq_now();
    ev->rec.ret_seq = now > ev->rec.seq ? now : ev->rec.seq;
    ev->returned = true;
}

void ct_event_returned(struct ct_event *ev)
{
    if (ev->traced && !ev->returned)
        take_return(ev);
}

void ct_event_set_device(struct ct_event *ev, int device)
{
    if (!ev->traced)
        return;
    ev->rec.device = device;
    ev->device_given = true;
}

void ct_event_end(struct ct_event *ev, int result)
{
    if (!ev->traced)
        return;
    int saved_errno = errno;
    if (!ev->returned)
        take_return(ev);
    ct_self.depth = ev->outer_depth;
    ct_self.current_seq = ev->outer_seq;
    ct_self.current_level = ev->outer_level;
    /* After the nesting is undone: a call Python makes while we read its
     * frames (a garbage collection's cudaFree) is a call of its own. */
    if (ev->stacked) {
        ev->rec.stack_id = ct_stacks_capture();
        ct_stacks_leave();
    }
    ev->rec.result = result;
    ev->rec.tid = ct_thread_id();
    if (!ev->device_given)
        ev->rec.device = device_of(ev, result);
    ct_session_append(&ev->rec);
    errno = saved_errno;
}

void ct_event_set_handle(struct ct_event *ev, const void *handle)
{
    if (!ev->traced)
        return;
    memcpy(ev->rec.handle, handle, CT_IPC_HANDLE_BYTES);
    ev->rec.has_handle = 1;
}

void ct_event_enter(struct ct_event *ev)
{
    ev->mark = NULL;
    if (!ev->traced)
        return;
    int saved_errno = errno;
    ev->rec.tid = ct_thread_id();
    ev->mark = ct_session_mark_enter(&ev->rec);
    errno = saved_errno;
}

void ct_event_leave(struct ct_event *ev)
{
    if (ev->mark)
        ct_session_mark_leave(ev->mark);
}
