/*
 * nvcc_shim.c - what nvcc-generated host code needs from libcudart.so.13,
 * for the fake libcudart.so.13 (tests/gpu/fakecuda13/fakecuda13.mk links it
 * with tests/fake/fake_runtime.c), so that examples/real_gpu/real_gpu_check,
 * built by nvcc 13 with -cudart shared, runs on the fake stack.
 *
 * What nvcc emits, and what it gets here:
 *
 *   - before main, per translation unit: __cudaRegisterFatBinary(&wrapper),
 *     one __cudaRegisterFunction(handle, host launcher, device name, ...) per
 *     kernel, __cudaRegisterFatBinaryEnd(handle); at exit
 *     __cudaUnregisterFatBinary(handle). The fake keeps the table of
 *     registered kernels (host launcher address -> device name); the device code
 *     itself is never loaded (there is no GPU to load it on).
 *   - a launch `k<<<grid, block, shmem, stream>>>(args)`: the caller pushes the
 *     configuration (__cudaPushCallConfiguration), the host launcher pops it
 *     (__cudaPopCallConfiguration), then, CUDA 13, asks once for the kernel's
 *     handle (__cudaGetKernel) and launches it (__cudaLaunchKernel or
 *     __cudaLaunchKernel_ptsz). With -D__NV_LEGACY_LAUNCH the launcher calls
 *     cudaLaunchKernel(host launcher, ...) instead.
 *
 * A launch checks what the real runtime checks before it reaches the GPU: a
 * registered kernel (cudaErrorInvalidDeviceFunction otherwise), a non-empty
 * grid and block within the limits (cudaErrorInvalidConfiguration), a valid
 * stream. Then it is stream work like a cudaMemsetAsync (fake_runtime.c): on
 * a capturing stream it is recorded into the graph being captured, otherwise
 * it runs at once, and a kernel "running" on the fake does nothing (fake
 * device memory is bookkeeping only). The fake driver has no cuLaunchKernel,
 * so its graph's node count does not include kernels; nothing reads that
 * count.
 *
 * Exported names: __cuda* and cuda*, all under the version node
 * libcudart.so.13 (libcudart13.map), as in the real library.
 */
#define __CUDA_API_VERSION_INTERNAL 1 /* declares the _ptsz variants */
#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* From fake_runtime.c (hidden): stream work, and the per-thread last error. */
__attribute__((visibility("hidden"))) cudaError_t fake_rt_stream_work(cudaStream_t stream, int ptsz,
                                                                      int *captured);
__attribute__((visibility("hidden"))) cudaError_t fake_rt_error(cudaError_t e);

/* The glue's prototypes (crt/host_runtime.h and crt/device_functions.h are C++). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *funcAddr);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream);

/* What nvcc passes to __cudaRegisterFatBinary (crt/host_runtime.h's wrapper). */
#define FATBIN_WRAPPER_MAGIC 0x466243b1

struct fatbin_wrapper {
    int magic;
    int version;
    const void *data;
    void *filename_or_fatbins;
};

/* One registered fat binary; its handle is &module->handle_slot. */
struct kernel;
struct module {
    void *handle_slot; /* what the handle points at: the wrapper, as the runtime keeps it */
    int ended;         /* __cudaRegisterFatBinaryEnd seen: its kernels may launch */
    struct kernel *kernels;
    struct module *next;
};

/* A registered kernel: its cudaKernel_t is the address of this struct. */
struct kernel {
    const void *host_fun; /* the host launcher nvcc made */
    struct module *module;
    struct kernel *next;
};

static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct module *g_modules;

/* Launch limits of the fake device (an H200: what fake_driver.c reports). */
#define MAX_THREADS_PER_BLOCK 1024u
#define MAX_BLOCK_Z           64u
#define MAX_GRID_X            2147483647u
#define MAX_GRID_YZ           65535u
#define MAX_SHARED_PER_BLOCK  (227u * 1024u)

/* The configurations pushed and not yet popped, per thread (launches nest
 * only through argument evaluation, so a few suffice). */
#define CONFIG_DEPTH 16

struct config {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
};

static __thread struct config t_configs[CONFIG_DEPTH];
static __thread int t_depth;

void **__cudaRegisterFatBinary(void *fatCubin)
{
    const struct fatbin_wrapper *w = (const struct fatbin_wrapper *)fatCubin;
    /* The real runtime aborts the program on a binary it cannot read. */
    if (!w || w->magic != FATBIN_WRAPPER_MAGIC)
        abort();
    struct module *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->handle_slot = fatCubin;
    pthread_mutex_lock(&g_reg_mu);
    m->next = g_modules;
    g_modules = m;
    pthread_mutex_unlock(&g_reg_mu);
    return &m->handle_slot;
}

static struct module *module_of(void **handle)
{
    for (struct module *m = g_modules; m; m = m->next)
        if (&m->handle_slot == handle)
            return m;
    return NULL;
}

void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    pthread_mutex_lock(&g_reg_mu);
    struct module *m = module_of(fatCubinHandle);
    if (m)
        m->ended = 1;
    pthread_mutex_unlock(&g_reg_mu);
}

void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    pthread_mutex_lock(&g_reg_mu);
    for (struct module **pp = &g_modules; *pp; pp = &(*pp)->next) {
        struct module *m = *pp;
        if (&m->handle_slot != fatCubinHandle)
            continue;
        *pp = m->next;
        for (struct kernel *k = m->kernels, *next; k; k = next) {
            next = k->next;
            free(k);
        }
        free(m);
        break;
    }
    pthread_mutex_unlock(&g_reg_mu);
}

void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)deviceFun; /* the device code is never loaded: only the launcher is looked up */
    (void)deviceName;
    (void)thread_limit;
    (void)tid;
    (void)bid;
    (void)bDim;
    (void)gDim;
    (void)wSize;
    struct kernel *k = calloc(1, sizeof *k);
    if (!k)
        abort();
    k->host_fun = hostFun;
    pthread_mutex_lock(&g_reg_mu);
    struct module *m = module_of(fatCubinHandle);
    if (m) {
        k->module = m;
        k->next = m->kernels;
        m->kernels = k;
    }
    pthread_mutex_unlock(&g_reg_mu);
    if (!m)
        free(k);
}

/* The kernel registered for host launcher fn, or NULL. Called with g_reg_mu held. */
static struct kernel *kernel_by_launcher(const void *fn)
{
    for (struct module *m = g_modules; m; m = m->next)
        for (struct kernel *k = m->kernels; k; k = k->next)
            if (k->host_fun == fn && m->ended)
                return k;
    return NULL;
}

static int kernel_known(const struct kernel *want)
{
    for (struct module *m = g_modules; m; m = m->next)
        for (struct kernel *k = m->kernels; k; k = k->next)
            if (k == want && m->ended)
                return 1;
    return 0;
}

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream)
{
    /* Non-zero: the launch expression skips the call of the launcher. */
    if (t_depth == CONFIG_DEPTH)
        return 1;
    t_configs[t_depth++] = (struct config){gridDim, blockDim, sharedMem, stream};
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream)
{
    if (t_depth == 0)
        return cudaErrorInvalidConfiguration;
    const struct config *c = &t_configs[--t_depth];
    *gridDim = c->grid;
    *blockDim = c->block;
    *sharedMem = c->shmem;
    memcpy(stream, &c->stream, sizeof c->stream);
    return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *funcAddr)
{
    if (!kernel)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_reg_mu);
    struct kernel *k = kernel_by_launcher(funcAddr);
    pthread_mutex_unlock(&g_reg_mu);
    *kernel = (cudaKernel_t)k;
    return k ? cudaSuccess : cudaErrorInvalidDeviceFunction;
}

static int config_valid(dim3 grid, dim3 block, size_t shmem)
{
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
        return 0;
    if (grid.x > MAX_GRID_X || grid.y > MAX_GRID_YZ || grid.z > MAX_GRID_YZ)
        return 0;
    if (block.z > MAX_BLOCK_Z || block.x > MAX_THREADS_PER_BLOCK ||
        block.y > MAX_THREADS_PER_BLOCK ||
        (uint64_t)block.x * block.y * block.z > MAX_THREADS_PER_BLOCK)
        return 0;
    return shmem <= MAX_SHARED_PER_BLOCK;
}

/* A launch of a known kernel: checked, then stream work (see the header). */
static cudaError_t launch(int known, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                          int ptsz)
{
    int captured = 0;
    if (!known)
        return fake_rt_error(cudaErrorInvalidDeviceFunction);
    if (!config_valid(grid, block, shmem))
        return fake_rt_error(cudaErrorInvalidConfiguration);
    return fake_rt_stream_work(stream, ptsz, &captured);
}

static cudaError_t launch_kernel(cudaKernel_t kernel, dim3 grid, dim3 block, size_t shmem,
                                 cudaStream_t stream, int ptsz)
{
    pthread_mutex_lock(&g_reg_mu);
    int known = kernel && kernel_known((const struct kernel *)kernel);
    pthread_mutex_unlock(&g_reg_mu);
    return launch(known, grid, block, shmem, stream, ptsz);
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream)
{
    (void)args; /* a fake kernel reads nothing */
    return launch_kernel(kernel, gridDim, blockDim, sharedMem, stream, 0);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream)
{
    (void)args;
    return launch_kernel(kernel, gridDim, blockDim, sharedMem, stream, 1);
}

static cudaError_t launch_registered(const void *func, dim3 grid, dim3 block, size_t shmem,
                                     cudaStream_t stream, int ptsz)
{
    pthread_mutex_lock(&g_reg_mu);
    int known = kernel_by_launcher(func) != NULL;
    pthread_mutex_unlock(&g_reg_mu);
    return launch(known, grid, block, shmem, stream, ptsz);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                             size_t sharedMem, cudaStream_t stream)
{
    (void)args;
    return launch_registered(func, gridDim, blockDim, sharedMem, stream, 0);
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                  size_t sharedMem, cudaStream_t stream)
{
    (void)args;
    return launch_registered(func, gridDim, blockDim, sharedMem, stream, 1);
}
