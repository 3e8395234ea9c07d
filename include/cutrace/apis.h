/*
 * apis.h - every API cutrace knows, with what it means for memory accounting.
 *
 * One list drives three things so they cannot drift apart:
 *   - enum ct_api, the compact id stored in each ring record;
 *   - the `apis` table written into every trace, which maps those ids back to
 *     names. The analyzer and the SQL views only ever use that table, so ids
 *     may be renumbered between builds without breaking old traces;
 *   - the roles the views use to derive allocations, meminfo and ipc.
 *
 * Columns of CT_API_LIST(X): X(name, layer, role, space, kind)
 *   layer: runtime | driver | nccl | nvtx
 *   role:  alloc | free | reset | meminfo | ipc_export | set_device |
 *          capture_begin | capture_end | graph_instantiate | graph_launch |
 *          version | unique_id | comm_init | comm_init_all | comm_finalize | comm_destroy |
 *          collective | p2p | group_start | group_end | register | deregister |
 *          lookup | map | unmap | set_access | vmm_export | ctx_create | ctx_destroy |
 *          synchronize | nvtx_mark | nvtx_start | nvtx_end | nvtx_push | nvtx_pop |
 *          nvtx_domain
 *
 * The nvtx layer is not interposed: libcutrace.so is NVTX's injection
 * library (preload/hooks/hook_nvtx.c), and its records take these names,
 * which no NVTX header declares (nvtxRangePush stands for nvtxRangePushA,
 * W, Ex and nvtxDomainRangePushEx alike), so the registry has no hook for
 * them.
 *
 * ncclCommInitAll_comm is not a symbol: ncclCommInitAll makes several
 * communicators in one call, and each gets a record of its own under that
 * name, nested in the call's record, so that every communicator has one
 * comm_init row.
 *   space: for alloc/free, the address namespace a free must match to end an
 *          allocation (a cudaFreeHost never ends a cudaMalloc; a cuMemRelease
 *          ends the physical handle of a cuMemCreate, vmm_handle, and a
 *          cuMemAddressFree a reserved range, va); "" otherwise
 *   kind:  for alloc, the allocations.kind value (device, managed, host, ipc,
 *          vmm = physical memory of cuMemCreate, reserve = address space)
 *
 * To add an API: append an X() line here and write its hook in the hook file
 * of its family (preload/hooks/); nothing else needs to know.
 */
#ifndef CUTRACE_APIS_H
#define CUTRACE_APIS_H

#define CT_API_LIST(X)                                                                             \
    X(cudaMalloc, runtime, alloc, device, device)                                                  \
    X(cudaFree, runtime, free, device, )                                                           \
    X(cudaMallocAsync, runtime, alloc, device, device)                                             \
    X(cudaMallocAsync_ptsz, runtime, alloc, device, device)                                        \
    X(cudaFreeAsync, runtime, free, device, )                                                      \
    X(cudaFreeAsync_ptsz, runtime, free, device, )                                                 \
    X(cudaMallocFromPoolAsync, runtime, alloc, device, device)                                     \
    X(cudaMallocFromPoolAsync_ptsz, runtime, alloc, device, device)                                \
    X(cudaMallocManaged, runtime, alloc, device, managed)                                          \
    X(cudaMallocPitch, runtime, alloc, device, device)                                             \
    X(cudaMalloc3D, runtime, alloc, device, device)                                                \
    X(cudaMallocHost, runtime, alloc, host, host)                                                  \
    X(cudaHostAlloc, runtime, alloc, host, host)                                                   \
    X(cudaFreeHost, runtime, free, host, )                                                         \
    X(cudaMemGetInfo, runtime, meminfo, , )                                                        \
    X(cudaIpcGetMemHandle, runtime, ipc_export, , )                                                \
    X(cudaIpcOpenMemHandle, runtime, alloc, ipc, ipc)                                              \
    X(cudaIpcCloseMemHandle, runtime, free, ipc, )                                                 \
    X(cudaSetDevice, runtime, set_device, , )                                                      \
    X(cudaDeviceReset, runtime, reset, , )                                                         \
    X(cudaStreamBeginCapture, runtime, capture_begin, , )                                          \
    X(cudaStreamBeginCapture_ptsz, runtime, capture_begin, , )                                     \
    X(cudaStreamEndCapture, runtime, capture_end, , )                                              \
    X(cudaStreamEndCapture_ptsz, runtime, capture_end, , )                                         \
    X(cudaGraphInstantiate, runtime, graph_instantiate, , )                                        \
    X(cudaGraphInstantiateWithFlags, runtime, graph_instantiate, , )                               \
    X(cudaGraphLaunch, runtime, graph_launch, , )                                                  \
    X(cudaGraphLaunch_ptsz, runtime, graph_launch, , )                                             \
    X(cudaGetDriverEntryPoint, runtime, lookup, , )                                                \
    X(cudaGetDriverEntryPointByVersion, runtime, lookup, , )                                       \
    X(cuMemAlloc_v2, driver, alloc, device, device)                                                \
    X(cuMemAllocPitch_v2, driver, alloc, device, device)                                           \
    X(cuMemFree_v2, driver, free, device, )                                                        \
    X(cuMemAllocManaged, driver, alloc, device, managed)                                           \
    X(cuMemAllocAsync, driver, alloc, device, device)                                              \
    X(cuMemAllocAsync_ptsz, driver, alloc, device, device)                                         \
    X(cuMemFreeAsync, driver, free, device, )                                                      \
    X(cuMemFreeAsync_ptsz, driver, free, device, )                                                 \
    X(cuMemAllocFromPoolAsync, driver, alloc, device, device)                                      \
    X(cuMemAllocFromPoolAsync_ptsz, driver, alloc, device, device)                                 \
    X(cuMemAllocHost_v2, driver, alloc, host, host)                                                \
    X(cuMemHostAlloc, driver, alloc, host, host)                                                   \
    X(cuMemFreeHost, driver, free, host, )                                                         \
    X(cuMemCreate, driver, alloc, vmm_handle, vmm)                                                 \
    X(cuMemRelease, driver, free, vmm_handle, )                                                    \
    X(cuMemAddressReserve, driver, alloc, va, reserve)                                             \
    X(cuMemAddressFree, driver, free, va, )                                                        \
    X(cuMemMap, driver, map, , )                                                                   \
    X(cuMemUnmap, driver, unmap, , )                                                               \
    X(cuMemSetAccess, driver, set_access, , )                                                      \
    X(cuMemGetInfo_v2, driver, meminfo, , )                                                        \
    X(cuIpcGetMemHandle, driver, ipc_export, , )                                                   \
    X(cuIpcOpenMemHandle_v2, driver, alloc, ipc, ipc)                                              \
    X(cuIpcCloseMemHandle, driver, free, ipc, )                                                    \
    X(cuMemExportToShareableHandle, driver, vmm_export, , )                                        \
    X(cuMemImportFromShareableHandle, driver, alloc, vmm_handle, ipc)                              \
    X(cuDevicePrimaryCtxRetain, driver, ctx_create, , )                                            \
    X(cuDevicePrimaryCtxRelease_v2, driver, ctx_destroy, , )                                       \
    X(cuDevicePrimaryCtxReset_v2, driver, reset, , )                                               \
    X(cuCtxCreate, driver, ctx_create, , )                                                         \
    X(cuCtxCreate_v2, driver, ctx_create, , )                                                      \
    X(cuCtxCreate_v3, driver, ctx_create, , )                                                      \
    X(cuCtxCreate_v4, driver, ctx_create, , )                                                      \
    X(cuCtxDestroy_v2, driver, ctx_destroy, , )                                                    \
    X(cuGetProcAddress, driver, lookup, , )                                                        \
    X(cuGetProcAddress_v2, driver, lookup, , )                                                     \
    X(ncclGetVersion, nccl, version, , )                                                           \
    X(ncclGetUniqueId, nccl, unique_id, , )                                                        \
    X(ncclCommInitRank, nccl, comm_init, , )                                                       \
    X(ncclCommInitRankConfig, nccl, comm_init, , )                                                 \
    X(ncclCommInitRankScalable, nccl, comm_init, , )                                               \
    X(ncclCommInitAll, nccl, comm_init_all, , )                                                    \
    X(ncclCommInitAll_comm, nccl, comm_init, , )                                                   \
    X(ncclCommSplit, nccl, comm_init, , )                                                          \
    X(ncclCommFinalize, nccl, comm_finalize, , )                                                   \
    X(ncclCommDestroy, nccl, comm_destroy, , )                                                     \
    X(ncclCommAbort, nccl, comm_destroy, , )                                                       \
    X(ncclAllReduce, nccl, collective, , )                                                         \
    X(ncclBroadcast, nccl, collective, , )                                                         \
    X(ncclBcast, nccl, collective, , )                                                             \
    X(ncclReduce, nccl, collective, , )                                                            \
    X(ncclAllGather, nccl, collective, , )                                                         \
    X(ncclReduceScatter, nccl, collective, , )                                                     \
    X(ncclAlltoAll, nccl, collective, , )                                                          \
    X(ncclGather, nccl, collective, , )                                                            \
    X(ncclScatter, nccl, collective, , )                                                           \
    X(ncclSend, nccl, p2p, , )                                                                     \
    X(ncclRecv, nccl, p2p, , )                                                                     \
    X(ncclGroupStart, nccl, group_start, , )                                                       \
    X(ncclGroupEnd, nccl, group_end, , )                                                           \
    X(ncclMemAlloc, nccl, alloc, device, device)                                                   \
    X(ncclMemFree, nccl, free, device, )                                                           \
    X(ncclCommRegister, nccl, register, , )                                                        \
    X(ncclCommDeregister, nccl, deregister, , )                                                    \
    X(ncclCommWindowRegister, nccl, register, , )                                                  \
    X(ncclCommWindowDeregister, nccl, deregister, , )                                              \
    X(cudaDeviceSynchronize, runtime, synchronize, , )                                             \
    X(cudaStreamSynchronize, runtime, synchronize, , )                                             \
    X(cudaStreamSynchronize_ptsz, runtime, synchronize, , )                                        \
    X(cudaEventSynchronize, runtime, synchronize, , )                                              \
    X(cuCtxSynchronize, driver, synchronize, , )                                                   \
    X(cuCtxSynchronize_v2, driver, synchronize, , )                                                \
    X(cuStreamSynchronize, driver, synchronize, , )                                                \
    X(cuStreamSynchronize_ptsz, driver, synchronize, , )                                           \
    X(cuEventSynchronize, driver, synchronize, , )                                                 \
    X(nvtxMark, nvtx, nvtx_mark, , )                                                               \
    X(nvtxRangeStart, nvtx, nvtx_start, , )                                                        \
    X(nvtxRangeEnd, nvtx, nvtx_end, , )                                                            \
    X(nvtxRangePush, nvtx, nvtx_push, , )                                                          \
    X(nvtxRangePop, nvtx, nvtx_pop, , )                                                            \
    X(nvtxDomainCreate, nvtx, nvtx_domain, , )

enum ct_api {
    CT_API_NONE = 0,
#define CT_API_ENUM(name, layer, role, space, kind) CT_API_##name,
    CT_API_LIST(CT_API_ENUM)
#undef CT_API_ENUM
        CT_API_COUNT
};

enum ct_layer { CT_LAYER_runtime, CT_LAYER_driver, CT_LAYER_nccl, CT_LAYER_nvtx };

struct ct_api_info {
    const char *name;
    enum ct_layer layer_id;
    const char *layer;
    const char *role;
    const char *space; /* "" when not a memory API */
    const char *kind;  /* "" when not an allocation */
};

/* Indexed by enum ct_api; entry 0 is CT_API_NONE. */
/* clang-format off */
static const struct ct_api_info ct_api_table[CT_API_COUNT] = {
    {"", CT_LAYER_runtime, "", "", "", ""},
#define CT_API_INFO(name, layer, role, space, kind) \
    {#name, CT_LAYER_##layer, #layer, #role, #space, #kind},
    CT_API_LIST(CT_API_INFO)
#undef CT_API_INFO
};
/* clang-format on */

#endif
