/*
 * resolve.h - finding the real CUDA and NCCL functions behind a hook.
 *
 * The preload links none of libcudart, libcuda or libnccl, so one build
 * serves programs built against CUDA 12 and 13. A hook resolves its real
 * function on first use and caches the pointer (CT_REAL in hook.h).
 */
#ifndef CUTRACE_RESOLVE_H
#define CUTRACE_RESOLVE_H

#include <stdbool.h>

enum ct_lib {
    CT_LIB_CUDART, /* libcudart.so.* */
    CT_LIB_CUDA,   /* libcuda.so.* (the driver) */
    CT_LIB_NCCL,   /* libnccl.so.* */
};

/*
 * The next definition of `name` after the preload (RTLD_NEXT: so shims
 * preloaded after cutrace stay in the chain); failing that, the definition
 * in an already-loaded library of the family, which covers libraries opened
 * with RTLD_LOCAL that RTLD_NEXT cannot see. Never loads anything.
 */
void *ct_resolve(enum ct_lib lib, const char *name);

/* Only in the family's already-loaded library (for the tracer's own queries). */
void *ct_resolve_loaded(enum ct_lib lib, const char *name);

/* Whether a loaded object's path names a library of the family. */
bool ct_is_family_path(enum ct_lib lib, const char *path);

/*
 * The C library's dlsym. libcutrace.so overrides dlsym (hook_lookup.c); its
 * own lookups must see what is really there.
 */
extern void *(*ct_real_dlsym)(void *handle, const char *name);
void ct_dlsym_init(void);

#endif
