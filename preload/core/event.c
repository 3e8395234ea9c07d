/*
 * event.c - the hot path shared by every hook.
 */
#include "event.h"

#include <errno.h>
#include <string.h>

#include "clock.h"
#include "device.h"
#include "session.h"
#include "stacks.h"
#include "thread.h"

void ct_event_begin(struct ct_event *ev, enum ct_api api, const void *caller)
{
    ev->traced = !ct_self.internal && ct_session_tracing();
    if (!ev->traced)
        return;
    ev->returned = false;
    ev->device_given = false;
    ev->stacked = ct_stacks_enter(api);
    memset(&ev->rec, 0, sizeof ev->rec);
    ev->rec.api = (uint16_t)api;
    ev->rec.caller = (uint64_t)(uintptr_t)caller;
    ev->rec.seq = ct_session_next_seq();
    ev->rec.parent_seq = ct_self.current_seq;
    ev->rec.depth = ct_self.depth > UINT8_MAX ? UINT8_MAX : (uint8_t)ct_self.depth;
    ev->rec.device = -1;
    ct_self.depth++;
    ct_self.current_seq = ev->rec.seq;
    ev->rec.t_ns = ct_now_ns();
}

/*
 * Whose device a call ran on. A driver call: the driver context's. Any other:
 * the runtime's notion, which may be asked of the runtime only for a
 * top-level call that succeeded - a nested call can be the runtime's own,
 * made while it holds its locks or is still initializing.
 */
static int device_of(const struct ct_event *ev, int result)
{
    if (ct_api_table[ev->rec.api].layer_id == CT_LAYER_driver)
        return ct_device_of_context();
    return ct_device_current(result == 0 && ev->rec.depth == 0);
}

void ct_event_returned(struct ct_event *ev)
{
    if (!ev->traced || ev->returned)
        return;
    ev->rec.dur_ns = ct_now_ns() - ev->rec.t_ns;
    ev->returned = true;
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
    ct_event_returned(ev);
    ct_self.depth--;
    ct_self.current_seq = ev->rec.parent_seq;
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
