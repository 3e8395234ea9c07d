/*
 * unwind.c - native stacks through libunwind, opened at run time (unwind.h).
 *
 * libunwind is used only once its memory-validation pipe is cutrace's
 * (unwpipe.h): otherwise it would read, close and write the program's files.
 */
#include "unwind.h"

#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <execinfo.h>
#include <libunwind.h>
#include <stddef.h>

#include "resolve.h"
#include "unwpipe.h"

#define CT_UNW_STR2(x) #x
#define CT_UNW_STR(x)  CT_UNW_STR2(x)

enum { UNWINDER_NONE, UNWINDER_LIBUNWIND, UNWINDER_BACKTRACE };

static int unwinder; /* written once, by the constructor */
static bool have_backtrace;
static int (*unw_backtrace_fn)(void **buffer, int size);

_Static_assert(sizeof(void *) == sizeof(uint64_t), "return addresses travel as uint64_t");

static void *lookup(void *handle, const char *name)
{
    if (!ct_real_dlsym)
        ct_dlsym_init();
    return ct_real_dlsym ? ct_real_dlsym(handle, name) : NULL;
}

/*
 * libunwind's set-up (its first call, which opens its validation pipe) made
 * here, watched, so that the pipe is cutrace's (unwpipe.h). Setting the
 * caching policy is such a first call too.
 */
static bool set_up_watched(int (*backtrace_fn)(void **, int),
                           int (*policy)(unw_addr_space_t, unw_caching_policy_t),
                           unw_addr_space_t *local)
{
    Dl_info info;
    if (!dladdr((void *)backtrace_fn, &info) || !info.dli_fbase)
        return false;
    ct_unwpipe_watch(info.dli_fbase);
    /* The global cache takes a lock (and blocks signals) on every step;
     * per-thread caches take none. */
    if (policy)
        policy(*local, UNW_CACHE_PER_THREAD);
    void *warm[4];
    backtrace_fn(warm, 4);
    return ct_unwpipe_unwatch();
}

bool ct_unwind_init(void)
{
    if (unwinder != UNWINDER_NONE)
        return true;
    /* The first backtrace() loads libgcc_s: done here, not inside a CUDA
     * call. It is also libunwind's stand-in (ct_unwind_fallback). */
    void *warm[4];
    have_backtrace = backtrace(warm, 4) > 0;
    /* A program that uses libunwind itself keeps its caching policy. */
    void *shared = dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD);
    void *h = shared ? shared : dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        int (*backtrace_fn)(void **, int) = (int (*)(void **, int))lookup(h, "unw_backtrace");
        int (*policy)(unw_addr_space_t, unw_caching_policy_t) = (int (*)(
            unw_addr_space_t, unw_caching_policy_t))lookup(h, CT_UNW_STR(unw_set_caching_policy));
        unw_addr_space_t *local = (unw_addr_space_t *)lookup(h, CT_UNW_STR(unw_local_addr_space));
        /* A libunwind set up before us (by the program) has its pipe on
         * descriptors we cannot guard: then backtrace() instead. */
        bool adopted = backtrace_fn && policy && local &&
                       set_up_watched(backtrace_fn, shared ? NULL : policy, local);
        if (adopted && ct_unwpipe_ready()) {
            unw_backtrace_fn = backtrace_fn;
            unwinder = UNWINDER_LIBUNWIND;
            return true;
        }
        /* Adopted but without a pipe (no room for one): kept loaded, since
         * its array's address stays claimed. */
        if (!adopted)
            dlclose(h);
    }
    if (have_backtrace) {
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
        /* Tail calls, both: no frame of ours for the unwinder to walk. */
        if (ct_unwpipe_ready())
            return unw_backtrace_fn((void **)ips, max);
        return have_backtrace ? backtrace((void **)ips, max) : 0;
    case UNWINDER_BACKTRACE:
        return backtrace((void **)ips, max);
    default:
        return 0;
    }
}

int ct_unwind_fallback(uint64_t *ips, int max)
{
    if (max <= 0 || unwinder != UNWINDER_LIBUNWIND || !have_backtrace)
        return 0;
    return backtrace((void **)ips, max);
}
