/*
 * resolve.c - looks up real functions without loading or initializing CUDA.
 *
 * dlsym takes the dynamic loader's lock, so hooks call ct_resolve once and
 * cache the result; nothing here runs in the steady state.
 */
#include "resolve.h"

#include <dlfcn.h>
#include <limits.h>
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

/*
 * The search only copies a path out of dl_iterate_phdr, and the lookup runs
 * after it returns. dl_iterate_phdr holds the loader's write lock while its
 * callback runs, and dlopen, dlsym and dlclose take the loader's main lock:
 * from inside the callback, that is the reverse of a concurrent dlopen's
 * order (main lock, then the write lock to add the object), and both
 * threads hang for good. A spawned Python importing its extension modules
 * while the writer asks the driver for devices did exactly that.
 */
struct family_search {
    enum ct_lib lib;
    unsigned skip; /* objects of the family to pass over first */
    bool found;
    char path[PATH_MAX];
};

static int find_family_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct family_search *s = arg;
    const char *path = info->dlpi_name;
    if (!path || !*path || !ct_is_family_path(s->lib, path))
        return 0;
    if (s->skip > 0) {
        s->skip--;
        return 0;
    }
    size_t n = strlen(path);
    if (n >= sizeof s->path)
        return 1; /* no such path can be opened by name: the search ends */
    memcpy(s->path, path, n + 1);
    s->found = true;
    return 1;
}

/* A process has a handful of a family's objects at most (renamed wheel copies). */
#define MAX_FAMILY_OBJECTS 16

void *ct_resolve_loaded(enum ct_lib lib, const char *name)
{
    for (unsigned k = 0; k < MAX_FAMILY_OBJECTS; k++) {
        struct family_search s = {.lib = lib, .skip = k};
        ct_dl_iterate(find_family_object,
                      &s); /* fork-safe: the writer's probes come here (objects.h) */
        if (!s.found)
            return NULL;
        /* RTLD_NOLOAD: a handle to what is still there, never a new load. */
        void *h = dlopen(s.path, RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue; /* unloaded since the search */
        void *fn = real_dlsym(h, name);
        dlclose(h);
        if (fn)
            return fn;
    }
    return NULL;
}

void *ct_resolve(enum ct_lib lib, const char *name)
{
    /* Called from here, RTLD_NEXT means "after libcutrace.so". */
    void *fn = real_dlsym(RTLD_NEXT, name);
    return fn ? fn : ct_resolve_loaded(lib, name);
}
