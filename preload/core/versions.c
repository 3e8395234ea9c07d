/*
 * versions.c - library versions of the traced process, for the process table.
 */
#include "versions.h"

#include <stdbool.h>

#include "resolve.h"

typedef int (*version_fn)(int *);

static int ask(enum ct_lib lib, const char *name, bool loaded_only)
{
    version_fn fn =
        (version_fn)(loaded_only ? ct_resolve_loaded(lib, name) : ct_resolve(lib, name));
    int v = 0;
    if (!fn || fn(&v) != 0)
        return 0;
    return v;
}

void ct_library_versions(struct ct_versions *out)
{
    /* The runtime the program's calls reach first, as the hooks resolve it. */
    out->runtime = ask(CT_LIB_CUDART, "cudaRuntimeGetVersion", false);
    out->driver = ask(CT_LIB_CUDA, "cuDriverGetVersion", true);
    out->nccl = ask(CT_LIB_NCCL, "ncclGetVersion", false);
}
