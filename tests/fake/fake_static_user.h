/*
 * fake_static_user.h - API of build/fake/libfake_static_user.so, a library
 * shaped like one that links the CUDA runtime statically (cuBLAS, NCCL, any
 * program built with -cudart static).
 *
 * Such a library never calls a cuda* symbol and has no DT_NEEDED on libcudart
 * or libcuda: it dlopen()s libcuda.so.1 and reaches every driver function
 * through cuGetProcAddress. A tracer that only interposes symbols sees none of
 * these calls; tests use this library to make sure cutrace sees them anyway.
 *
 * Every function returns 0 on success, otherwise the CUresult of the driver
 * call that failed. CUDA_ERROR_INVALID_VALUE means a bad argument (a NULL out
 * pointer, a pointer this library did not hand out); CUDA_ERROR_NOT_INITIALIZED
 * means libcuda.so.1 could not be loaded or lacks cuGetProcAddress_v2.
 * Thread-safe. See docs/fakes.md.
 */
#ifndef CUTRACE_FAKE_STATIC_USER_H
#define CUTRACE_FAKE_STATIC_USER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * cuMemAlloc of bytes in the calling thread's current context; without one,
 * device 0's primary context is retained (once per process, never released)
 * and made current first, as the static runtime does.
 */
int fsu_alloc(size_t bytes, void **ptr);

/* cuMemFree of a pointer from fsu_alloc (or any cuMemAlloc pointer). */
int fsu_free(void *ptr);

/* cuMemGetInfo of the current context's device (made current as fsu_alloc does). */
int fsu_free_memory(size_t *free_bytes, size_t *total);

/*
 * The VMM sequence: cuMemGetAllocationGranularity, cuMemAddressReserve,
 * cuMemCreate on device, cuMemMap, cuMemSetAccess (read/write for device).
 * bytes is rounded up to the granularity, and that much is charged to the
 * device. Needs no context. On failure whatever was done is undone.
 */
int fsu_vmm_alloc(size_t bytes, int device, void **ptr);

/* cuMemUnmap, cuMemRelease and cuMemAddressFree of a pointer from fsu_vmm_alloc. */
int fsu_vmm_free(void *ptr);

/*
 * cuMemCreate of one granularity at CU_MEM_LOCATION_TYPE_HOST_NUMA node 0,
 * then cuMemRelease, as NCCL probes for host memory support. Not device memory.
 */
int fsu_host_numa_probe(void);

#ifdef __cplusplus
}
#endif

#endif
