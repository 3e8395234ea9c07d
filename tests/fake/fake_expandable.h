/*
 * fake_expandable.h - API of build/fake/libfake_expandable.so, a library
 * shaped like PyTorch's expandable segments
 * (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True).
 *
 * It links libcudart dynamically, as PyTorch does, but gets the driver's VMM
 * functions (cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess,
 * cuMemUnmap, cuMemRelease, cuMemAddressFree, cuMemGetAllocationGranularity)
 * from cudaGetDriverEntryPointByVersion at version 12000 and calls them
 * through those pointers: no cu* symbol is ever bound by name. Tests use it to
 * make sure a tracer sees memory that never passes through cudaMalloc.
 *
 * One segment per process: a large virtual reservation that grows and shrinks
 * at its end in chunks of 20 MiB (rounded up to the granularity), each chunk a
 * cuMemCreate'd allocation on the segment's device. Thread-safe.
 *
 * Every int function returns 0 on success, otherwise the CUresult of the
 * driver call that failed, or: CUDA_ERROR_INVALID_VALUE for a bad argument
 * (growing past the reservation, shrinking more than is mapped),
 * CUDA_ERROR_ILLEGAL_STATE for reserving twice or using the segment before
 * fex_reserve, CUDA_ERROR_NOT_INITIALIZED when the runtime could not reach a
 * driver, CUDA_ERROR_NOT_FOUND when the driver lacks an entry point. See
 * docs/fakes.md.
 */
#ifndef CUTRACE_FAKE_EXPANDABLE_H
#define CUTRACE_FAKE_EXPANDABLE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reserves va_bytes (rounded up to whole chunks) of address space for device. */
int fex_reserve(size_t va_bytes, int device);

/*
 * Maps bytes more (rounded up to whole chunks) at the end of the segment:
 * cuMemCreate + cuMemMap + cuMemSetAccess per chunk. All or nothing: a chunk
 * that fails undoes the chunks of this call. bytes == 0 does nothing.
 */
int fex_grow(size_t bytes);

/* Unmaps and releases bytes (rounded up to whole chunks) from the end. */
int fex_shrink(size_t bytes);

/* Unmaps and releases every chunk and frees the reservation. */
int fex_release(void);

/* Bytes mapped now (whole chunks); 0 without a segment. */
size_t fex_mapped_bytes(void);

/* Start of the reservation, NULL without a segment (where a tracer should see the chunks). */
void *fex_base(void);

/* The chunk size: 20 MiB rounded up to the granularity; 0 without a segment. */
size_t fex_chunk_bytes(void);

#ifdef __cplusplus
}
#endif

#endif
