/*
 * stk_plugin.c - a library that stk_native loads with dlopen: its
 * allocation's stack must name plugin_alloc_workspace, in a module that was
 * not loaded when the process started.
 */
#include <cuda_runtime_api.h>

static volatile int plugin_calls;

__attribute__((noinline)) int plugin_alloc_workspace(void **out);
__attribute__((noinline)) int plugin_alloc_workspace(void **out)
{
    int rc = cudaMalloc(out, (size_t)16 << 20);
    plugin_calls++;
    return rc;
}
