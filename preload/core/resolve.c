/*
 * resolve.c - looks up real functions without loading or initializing CUDA.
 *
 * dlsym takes the dynamic loader's lock, so hooks call ct_resolve once and
 * cache the result; nothing here runs in the steady state.
 */
#include "resolve.h"

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

#include "objects.h"

/* Wheels ship renamed copies (libcudart-d0da41ae.so.12), hence prefixes. */
static const char *const FAMILY_PREFIX[] = {
    [CT_LIB_CUDART] = "libcudart",
    [CT_LIB_CUDA] = "libcuda.so",
    [CT_LIB_NCCL] = "libnccl",
};

void *(*ct_real_dlsym)(void *handle, const char *name);

/*
 * The versioned lookup finds libc's dlsym whatever overrides it; glibc 2.34
 * moved it from libdl (GLIBC_2.2.5, GLIBC_2.17 on aarch64) to libc.
 */
void ct_dlsym_init(void)
{
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    for (size_t i = 0; i < sizeof versions / sizeof *versions; i++) {
        void *fn = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        if (fn) {
            __atomic_store_n(&ct_real_dlsym, (void *(*)(void *, const char *))fn, __ATOMIC_RELEASE);
            return;
        }
    }
}

static void *real_dlsym(void *handle, const char *name)
{
    if (!__atomic_load_n(&ct_real_dlsym, __ATOMIC_ACQUIRE))
        ct_dlsym_init();
    return ct_real_dlsym ? ct_real_dlsym(handle, name) : NULL;
}

bool ct_is_family_path(enum ct_lib lib, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* "libcuda.so" must not claim "libcudart...": the prefix includes ".so". */
    return strncmp(base, FAMILY_PREFIX[lib], strlen(FAMILY_PREFIX[lib])) == 0;
}

struct search {
    enum ct_lib lib;
    const char *name;
    void *found;
};

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct search *s = arg;
    const char *path = info->dlpi_name;
    if (!path || !*path || !ct_is_family_path(s->lib, path))
        return 0;
    /* RTLD_NOLOAD: a handle to what is already there, never a new load. */
    void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    s->found = real_dlsym(h, s->name);
    dlclose(h);
    return s->found != NULL;
}

void *ct_resolve_loaded(enum ct_lib lib, const char *name)
{
    struct search s = {lib, name, NULL};
    ct_dl_iterate(visit, &s); /* fork-safe: the writer's probes come here (objects.h) */
    return s.found;
}

void *ct_resolve(enum ct_lib lib, const char *name)
{
    /* Called from here, RTLD_NEXT means "after libcutrace.so". */
    void *fn = real_dlsym(RTLD_NEXT, name);
    return fn ? fn : ct_resolve_loaded(lib, name);
}
