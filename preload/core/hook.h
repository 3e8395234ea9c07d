/*
 * hook.h - what a hook file includes: the event API and real-function lookup.
 *
 * CT_REAL(fn) declares `real`, a pointer typed exactly like the official
 * prototype of `fn` (from the CUDA or NCCL header the hook file includes):
 * the real function, resolved once by the registry (registry.h), which also
 * hands the hook out on the other roads (dlsym, cuGetProcAddress). A hook
 * whose definition does not match the prototype does not compile.
 */
#ifndef CUTRACE_HOOK_H
#define CUTRACE_HOOK_H

#include <stdint.h>

#include "event.h"
#include "registry.h"
#include "resolve.h"
#include "warn.h"

#define CT_EXPORT __attribute__((visibility("default")))

#define CT_REAL(fn) __typeof__(&fn) real = (__typeof__(&fn))ct_real_fast(CT_API_##fn)

/*
 * The body of a typical hook: trace `call` (which uses `real`) as one event of
 * `api`, then run the remaining arguments (statements that may read `rc` and
 * set fields of `ev.rec`), and return what the real function returned. When
 * the loaded library lacks the function (an older NCCL), the call is still
 * recorded, with `missing` as its result, and `missing` is returned.
 * CT_TRACE_AS is for helpers shared by twin hooks (cudaMallocAsync and
 * cudaMallocAsync_ptsz), which pass on the caller their hook saw.
 */
#define CT_TRACE(api, type, missing, call, ...)                                                    \
    CT_TRACE_AS(CT_CALLER, api, type, missing, call, __VA_ARGS__)

#define CT_TRACE_AS(caller, api, type, missing, call, ...)                                         \
    do {                                                                                           \
        struct ct_event ev;                                                                        \
        ct_event_begin(&ev, api, caller);                                                          \
        type rc = real ? call : (missing);                                                         \
        ct_event_returned(&ev);                                                                    \
        __VA_ARGS__;                                                                               \
        ct_event_end(&ev, (int)rc);                                                                \
        return rc;                                                                                 \
    } while (0)

/*
 * The same for a call that can block (NCCL inits and collectives, group
 * end, synchronisations): `before` fills what the record knows before the
 * call (the arguments), then the call is marked as entered (event.h) so
 * that a process killed inside it still says where it was. The mark is
 * freed once the record is in the ring.
 */
#define CT_TRACE_BLOCKING(api, type, missing, before, call, ...)                                   \
    CT_TRACE_BLOCKING_AS(CT_CALLER, api, type, missing, before, call, __VA_ARGS__)

#define CT_TRACE_BLOCKING_AS(caller, api, type, missing, before, call, ...)                        \
    do {                                                                                           \
        struct ct_event ev;                                                                        \
        ct_event_begin(&ev, api, caller);                                                          \
        before;                                                                                    \
        ct_event_enter(&ev);                                                                       \
        type rc = real ? call : (missing);                                                         \
        ct_event_returned(&ev);                                                                    \
        __VA_ARGS__;                                                                               \
        ct_event_end(&ev, (int)rc);                                                                \
        ct_event_leave(&ev);                                                                       \
        return rc;                                                                                 \
    } while (0)

static inline uint64_t ct_addr(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

#endif
