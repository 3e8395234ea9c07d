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

static const char *const FAMILY_PREFIX[] = {
    [CT_LIB_CUDART] = "libcudart.so",
    [CT_LIB_CUDA] = "libcuda.so",
    [CT_LIB_NCCL] = "libnccl.so",
};

struct search {
    const char *prefix;
    const char *name;
    void *found;
};

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct search *s = arg;
    const char *path = info->dlpi_name;
    if (!path || !*path)
        return 0;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, s->prefix, strlen(s->prefix)) != 0)
        return 0;
    /* RTLD_NOLOAD: a handle to what is already there, never a new load. */
    void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    s->found = dlsym(h, s->name);
    dlclose(h);
    return s->found != NULL;
}

void *ct_resolve_loaded(enum ct_lib lib, const char *name)
{
    struct search s = {FAMILY_PREFIX[lib], name, NULL};
    dl_iterate_phdr(visit, &s);
    return s.found;
}

void *ct_resolve(enum ct_lib lib, const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);
    return fn ? fn : ct_resolve_loaded(lib, name);
}
