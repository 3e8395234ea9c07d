/*
 * registry.h - every traced function's real address and its hook, by API.
 *
 * One table serves every road by which a program reaches CUDA or NCCL. A hook
 * finds the real function it wraps here (CT_REAL); and wherever a pointer to
 * a real traced function surfaces - dlsym() on a library handle (ctypes),
 * cuGetProcAddress, cudaGetDriverEntryPoint - the registry hands back the
 * hook instead, but only when that pointer is exactly the one the hook
 * calls. Anything else passes through untouched: the program's calls are
 * never redirected, at worst not traced.
 */
#ifndef CUTRACE_REGISTRY_H
#define CUTRACE_REGISTRY_H

#include <stddef.h>

#include "cutrace/apis.h"

/* The real function behind the hook of `api`, resolved once; NULL if absent. */
void *ct_real(enum ct_api api);

/*
 * The slots ct_real fills, one per API: a hook reads its own inline (one
 * acquire load on the hot path, no call) and calls ct_real only while the
 * slot is still empty. A slot is written once and never changed.
 */
extern void *ct_real_slot[CT_API_COUNT];

static inline void *ct_real_fast(enum ct_api api)
{
    void *fn = __atomic_load_n(&ct_real_slot[api], __ATOMIC_ACQUIRE);
    return __builtin_expect(fn != NULL, 1) ? fn : ct_real(api);
}

/*
 * dlsym() found `found` under `name` in a library: the hook to return in its
 * place, or `found` itself when the name is not traced or `found` is not the
 * function the hook calls (another copy of the library).
 */
void *ct_registry_for_symbol(const char *name, void *found);

/* The same for a pointer the driver handed out (cuGetProcAddress & co.). */
void *ct_registry_for_driver_pointer(void *found);

#endif
