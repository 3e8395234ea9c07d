/*
 * stk_native.c - allocations from distinctly named functions, for the stack
 * tests: each CUDA call of a function below must come back from the trace,
 * after offline symbolization, with that function in its stack, including
 * one in a library loaded with dlopen (stk_plugin.c).
 *
 *   stk_native PLUGIN_PATH    prints "ok" and exits 0
 *
 * The functions are not inlined and do work after their call, so that no
 * compiler turns the call into a tail call (which would drop their frame).
 * load_weights is static: only the symbol table (.symtab) names it.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void *volatile kept[64];
static volatile int calls;

#define NOINLINE __attribute__((noinline))

static NOINLINE int load_weights(int i)
{
    int rc = cudaMalloc((void **)&kept[i], (size_t)8 << 20);
    calls++;
    return rc;
}

NOINLINE int make_kv_cache(void);
NOINLINE int make_kv_cache(void)
{
    int rc = cudaMalloc((void **)&kept[40], (size_t)64 << 20);
    calls++;
    return rc;
}

NOINLINE int measure_free_memory(void);
NOINLINE int measure_free_memory(void)
{
    size_t free_bytes, total;
    int rc = cudaMemGetInfo(&free_bytes, &total);
    calls++;
    return rc;
}

NOINLINE int release_workspace(void);
NOINLINE int release_workspace(void)
{
    int rc = cudaFree(kept[41]);
    calls++;
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int rc = measure_free_memory();
    for (int i = 0; i < 4 && !rc; i++)
        rc = load_weights(i);
    if (!rc)
        rc = make_kv_cache();
    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    int (*plugin_alloc)(void **) = (int (*)(void **))dlsym(plugin, "plugin_alloc_workspace");
    if (!plugin_alloc)
        return 4;
    if (!rc)
        rc = plugin_alloc((void **)&kept[41]);
    if (!rc)
        rc = release_workspace();
    if (!rc)
        rc = measure_free_memory();
    if (rc)
        return 5;
    printf("ok\n");
    return 0;
}
