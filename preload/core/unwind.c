/*
 * unwind.c - native stacks through libunwind, opened at run time (unwind.h).
 */
#include "unwind.h"

#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <execinfo.h>
#include <libunwind.h>
#include <stddef.h>

#include "resolve.h"

#define CT_UNW_STR2(x) #x
#define CT_UNW_STR(x)  CT_UNW_STR2(x)

enum { UNWINDER_NONE, UNWINDER_LIBUNWIND, UNWINDER_BACKTRACE };

static int unwinder; /* written once, by the constructor */
static int (*unw_backtrace_fn)(void **buffer, int size);

_Static_assert(sizeof(void *) == sizeof(uint64_t), "return addresses travel as uint64_t");

static void *lookup(void *handle, const char *name)
{
    if (!ct_real_dlsym)
        ct_dlsym_init();
    return ct_real_dlsym ? ct_real_dlsym(handle, name) : NULL;
}

bool ct_unwind_init(void)
{
    if (unwinder != UNWINDER_NONE)
        return true;
    /* A program that uses libunwind itself keeps its caching policy. */
    void *shared = dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD);
    void *h = shared ? shared : dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        int (*backtrace_fn)(void **, int) = (int (*)(void **, int))lookup(h, "unw_backtrace");
        int (*policy)(unw_addr_space_t, unw_caching_policy_t) = (int (*)(
            unw_addr_space_t, unw_caching_policy_t))lookup(h, CT_UNW_STR(unw_set_caching_policy));
        unw_addr_space_t *local = (unw_addr_space_t *)lookup(h, CT_UNW_STR(unw_local_addr_space));
        if (backtrace_fn && policy && local) {
            /* The global cache takes a lock (and blocks signals) on every step;
             * per-thread caches take none. */
            if (!shared)
                policy(*local, UNW_CACHE_PER_THREAD);
            unw_backtrace_fn = backtrace_fn;
            unwinder = UNWINDER_LIBUNWIND;
            return true;
        }
        dlclose(h);
    }
    /* The first backtrace() loads libgcc_s: done here, not inside a CUDA call. */
    void *warm[4];
    if (backtrace(warm, 4) > 0) {
        unwinder = UNWINDER_BACKTRACE;
        return true;
    }
    return false;
}

const char *ct_unwind_name(void)
{
    switch (unwinder) {
    case UNWINDER_LIBUNWIND:
        return "libunwind";
    case UNWINDER_BACKTRACE:
        return "backtrace";
    default:
        return "none";
    }
}

int ct_unwind(uint64_t *ips, int max)
{
    if (max <= 0)
        return 0;
    switch (unwinder) {
    case UNWINDER_LIBUNWIND:
        return unw_backtrace_fn((void **)ips, max);
    case UNWINDER_BACKTRACE:
        return backtrace((void **)ips, max);
    default:
        return 0;
    }
}
