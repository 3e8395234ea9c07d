/*
 * registry.c - real addresses and hooks of the traced functions (registry.h).
 *
 * The hooks are declared here as weak references generated from apis.h, so
 * this file needs no CUDA header and an API without a hook (the
 * ncclCommInitAll_comm pseudo-record) simply has none. Real addresses are
 * cached in one slot per API, written once with an atomic store; a slot is
 * never changed once set, so a hook always calls the same function.
 */
#include "registry.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cudalibs.h"
#include "resolve.h"
#include "warn.h"

/* By layer: the nvtx layer's records are named after no symbol (apis.h),
 * so they get no reference that another library's symbol could bind. */
#define CT_WEAK_HOOK_runtime(name) extern void name(void) __attribute__((weak));
#define CT_WEAK_HOOK_driver(name)  CT_WEAK_HOOK_runtime(name)
#define CT_WEAK_HOOK_nccl(name)    CT_WEAK_HOOK_runtime(name)
#define CT_WEAK_HOOK_nvtx(name)
#define CT_HOOK_OF_runtime(name) name
#define CT_HOOK_OF_driver(name)  name
#define CT_HOOK_OF_nccl(name)    name
#define CT_HOOK_OF_nvtx(name)    NULL

#define CT_DECLARE_HOOK(name, layer, role, space, kind) CT_WEAK_HOOK_##layer(name)
CT_API_LIST(CT_DECLARE_HOOK)
#undef CT_DECLARE_HOOK

/* Our hook of each API (NULL for pseudo-records), indexed by enum ct_api. */
static void (*const HOOKS[CT_API_COUNT])(void) = {NULL,
#define CT_HOOK_ADDRESS(name, layer, role, space, kind) CT_HOOK_OF_##layer(name),
                                                  CT_API_LIST(CT_HOOK_ADDRESS)
#undef CT_HOOK_ADDRESS
};

void *ct_real_slot[CT_API_COUNT];
/* Set when resolution failed, so a missing function costs no lookup per call. */
static int missing[CT_API_COUNT];

static enum ct_lib library_of(enum ct_api api)
{
    switch (ct_api_table[api].layer_id) {
    case CT_LAYER_driver:
        return CT_LIB_CUDA;
    case CT_LAYER_nccl:
        return CT_LIB_NCCL;
    case CT_LAYER_runtime:
    default:
        return CT_LIB_CUDART;
    }
}

/* Sets the slot unless another thread already did; returns what the slot holds.
 * The library behind it is learned as the CUDA stack's (cudalibs.h) before
 * any hook can call it, so that its own calls nest in the call in progress. */
static void *settle(enum ct_api api, void *candidate)
{
    ct_cudalibs_learn(candidate);
    void *expected = NULL;
    if (__atomic_compare_exchange_n(&ct_real_slot[api], &expected, candidate, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return candidate;
    return expected;
}

static void *resolve(enum ct_api api, bool warn)
{
    void *fn = __atomic_load_n(&ct_real_slot[api], __ATOMIC_ACQUIRE);
    if (fn || __atomic_load_n(&missing[api], __ATOMIC_RELAXED))
        return fn;
    fn = ct_resolve(library_of(api), ct_api_table[api].name);
    if (fn)
        return settle(api, fn);
    __atomic_store_n(&missing[api], 1, __ATOMIC_RELAXED);
    if (warn)
        ct_warn_once(CT_PROBLEM_MISSING_REAL, "cannot find the real %s (calls fail)",
                     ct_api_table[api].name);
    return NULL;
}

void *ct_real(enum ct_api api)
{
    return resolve(api, true);
}

/* API ids sorted by name, for dlsym's lookups (built once, without locks). */
static enum ct_api by_name[CT_API_COUNT];
static int by_name_ready;

static int compare_names(const void *a, const void *b)
{
    return strcmp(ct_api_table[*(const enum ct_api *)a].name,
                  ct_api_table[*(const enum ct_api *)b].name);
}

static enum ct_api find_api(const char *name)
{
    if (!__atomic_load_n(&by_name_ready, __ATOMIC_ACQUIRE)) {
        enum ct_api sorted[CT_API_COUNT - 1];
        for (int i = 1; i < CT_API_COUNT; i++)
            sorted[i - 1] = (enum ct_api)i;
        qsort(sorted, CT_API_COUNT - 1, sizeof sorted[0], compare_names);
        /* Racing builders write the same values. */
        for (int i = 0; i < CT_API_COUNT - 1; i++)
            __atomic_store_n(&by_name[i], sorted[i], __ATOMIC_RELAXED);
        __atomic_store_n(&by_name_ready, 1, __ATOMIC_RELEASE);
    }
    int lo = 0, hi = CT_API_COUNT - 2;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        enum ct_api api = __atomic_load_n(&by_name[mid], __ATOMIC_RELAXED);
        int c = strcmp(name, ct_api_table[api].name);
        if (c == 0)
            return api;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return CT_API_NONE;
}

/* Whether `fn` lives in a library of the family the API belongs to. */
static bool in_family(enum ct_api api, void *fn)
{
    Dl_info info;
    if (!dladdr(fn, &info) || !info.dli_fname)
        return false;
    return ct_is_family_path(library_of(api), info.dli_fname);
}

void *ct_registry_for_symbol(const char *name, void *found)
{
    /* Cheap refusal for the great majority of dlsym calls. */
    if (!name || !found || (name[0] != 'c' && name[0] != 'n'))
        return found;
    enum ct_api api = find_api(name);
    if (api == CT_API_NONE || !HOOKS[api])
        return found;
    void *real = resolve(api, false);
    /*
     * A library the hooks could not see yet (opened RTLD_LOCAL under an
     * unusual name) is adopted, if it really is of the family: the hook then
     * calls exactly what the program asked for.
     */
    if (!real && in_family(api, found))
        real = found;
    if (real)
        real = settle(api, real);
    if (real)
        __atomic_store_n(&missing[api], 0, __ATOMIC_RELAXED);
    if (real == found)
        return (void *)HOOKS[api];
    if (real)
        ct_warn_once(CT_PROBLEM_SECOND_COPY,
                     "a second copy of %s's library is loaded; its calls found with dlsym are "
                     "not traced",
                     name);
    return found;
}

void *ct_registry_for_driver_pointer(void *found)
{
    if (!found)
        return found;
    for (int api = 1; api < CT_API_COUNT; api++) {
        if (ct_api_table[api].layer_id != CT_LAYER_driver || !HOOKS[api])
            continue;
        void *real = resolve((enum ct_api)api, false);
        if (real == found)
            return (void *)HOOKS[api];
    }
    return found;
}
