/*
 * scenarios.c - the canned traces described in scenarios.h.
 */
#include "scenarios.h"

#include "trace_fixture.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define PTR_A 0x7f0000000000ll
#define PTR_B 0x7f0000100000ll
#define PTR_C 0x7f0000400000ll
#define PTR_H 0x7f1000000000ll
#define PTR_I 0x7f2000000000ll
#define PTR_M 0x7f3000000000ll

char *scenario_normal(const char *dir)
{
    char *path = fixture_trace_path(dir, "node1", NORMAL_PID, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = NORMAL_PID,
                                .ppid = 1,
                                .host = "node1",
                                .cmdline = "python3 -m sglang.launch_server --model-path llama",
                                .exe = "/usr/bin/python3.12",
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = NORMAL_START_MONO,
                                .cuda_runtime_version = 12080,
                                .cuda_driver_version = 12090};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_env(f, "CUDA_VISIBLE_DEVICES", "0");

    fixture_call(f, CT_API_cudaSetDevice, -1, 0, 0, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, PTR_A, 1 * MiB, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, PTR_B, 2 * MiB, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, 0, 100 * GiB, 2);
    struct fixture_event free_a = {
        .api = CT_API_cudaFree, .ptr = PTR_A, .dur_ns = 100, .wait_ns = 5000};
    fixture_event(f, &free_a);
    fixture_meminfo(f, 0, 70 * GiB, 80 * GiB);
    fixture_call(f, CT_API_cudaMalloc, 0, PTR_C, 4 * MiB, 0);
    fixture_call(f, CT_API_cudaMallocHost, 0, PTR_H, 8 * MiB, 0);
    fixture_call(f, CT_API_cudaFree, 0, PTR_C, 0, 0);
    fixture_call(f, CT_API_cudaFree, 0, 0xdead, 0, 1);
    unsigned char handle[64] = {1, 2, 3};
    struct fixture_event ipc = {.api = CT_API_cudaIpcOpenMemHandle,
                                .ptr = PTR_I,
                                .size = 16 * MiB,
                                .dur_ns = 100,
                                .handle = handle,
                                .handle_len = sizeof(handle)};
    fixture_event(f, &ipc);
    int64_t managed = fixture_call(f, CT_API_cudaMallocManaged, 0, PTR_M, 1 * MiB, 0);
    struct fixture_event nested = {.api = CT_API_cudaMalloc,
                                   .parent_seq = managed,
                                   .depth = 1,
                                   .ptr = PTR_M,
                                   .size = 1 * MiB,
                                   .dur_ns = 50};
    fixture_event(f, &nested);
    fixture_close(f);
    return path;
}

char *scenario_pointer_reuse(const char *dir)
{
    char *path = fixture_trace_path(dir, "node1", 777, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 777,
                                .ppid = 1,
                                .host = "node1",
                                .cmdline = "reuse",
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = NORMAL_START_MONO,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_call(f, CT_API_cudaMalloc, 0, PTR_A, 1 * MiB, 0);     /* seq 1 */
    fixture_call(f, CT_API_cudaMalloc, 0, PTR_A, 2 * MiB, 0);     /* seq 2: ends seq 1 */
    fixture_call(f, CT_API_cudaMallocHost, 0, PTR_A, 4 * MiB, 0); /* seq 3: other space */
    fixture_call(f, CT_API_cudaFree, 0, PTR_A, 0, 0);             /* seq 4: ends seq 2 */
    fixture_close(f);
    return path;
}

/* A call of thread tid that returned when `ret` calls had started. */
static int64_t threaded_call(struct fixture *f, int64_t tid, enum ct_api api, int64_t ptr,
                             int64_t size, int64_t ret)
{
    struct fixture_event e = {.api = api,
                              .tid = tid,
                              .device = 0,
                              .ptr = ptr,
                              .size = size,
                              .dur_ns = 100,
                              .ret_seq = ret};
    return fixture_event(f, &e);
}

char *scenario_crossing(const char *dir)
{
    char *path = fixture_trace_path(dir, "node1", CROSSING_PID, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = CROSSING_PID,
                                .ppid = 1,
                                .host = "node1",
                                .cmdline = "crossing",
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = NORMAL_START_MONO,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    threaded_call(f, 1, CT_API_cudaMalloc, PTR_A, 1 * MiB, 1);
    threaded_call(f, 2, CT_API_cudaMalloc, PTR_C, 16 * MiB, 2);
    threaded_call(f, 2, CT_API_cudaMalloc, PTR_A, 32 * MiB, 4);
    threaded_call(f, 1, CT_API_cudaFree, PTR_A, 0, 4);
    threaded_call(f, 1, CT_API_cudaMalloc, PTR_C, 8 * MiB, 6);
    threaded_call(f, 2, CT_API_cudaFree, PTR_C, 0, 6);
    threaded_call(f, 1, CT_API_cudaFree, PTR_C, 0, 7);
    struct fixture_event meminfo = {.api = CT_API_cudaMemGetInfo,
                                    .tid = 2,
                                    .device = 0,
                                    .dur_ns = 100,
                                    .arg = {80 * GiB - CROSSING_USED, 80 * GiB}};
    fixture_event(f, &meminfo);
    fixture_close(f);
    return path;
}

char *scenario_shared_gpu_first(const char *dir, int first_exits)
{
    const int64_t wall = NORMAL_START_WALL, mono = 5000000000ll;
    char *path = fixture_trace_path(dir, "node1", 100, wall);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 100,
                                .ppid = 1,
                                .host = "node1",
                                .cmdline = "worker 0",
                                .start_wall_ns = wall,
                                .start_mono_ns = mono,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_meta(f, "end_state", first_exits ? "exit" : "running");
    fixture_device(f, 0, SHARED_UUID, "NVIDIA A100-SXM4-80GB", 80 * GiB);
    fixture_call(f, CT_API_cudaMalloc, 0, PTR_A, 1 * GiB, 0);
    fixture_meminfo(f, 0, 78 * GiB, 80 * GiB);
    fixture_close(f);
    return path;
}

char *scenario_shared_gpu_second(const char *dir)
{
    /* Another clock base: only wall time relates the two processes. */
    const int64_t wall = NORMAL_START_WALL + 10000000, mono = 9000000000ll;
    char *path = fixture_trace_path(dir, "node1", 200, wall);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 200,
                                .ppid = 1,
                                .host = "node1",
                                .cmdline = "worker 1",
                                .start_wall_ns = wall,
                                .start_mono_ns = mono,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 3, SHARED_UUID, "NVIDIA A100-SXM4-80GB", 80 * GiB);
    fixture_call(f, CT_API_cudaMalloc, 3, PTR_B, 2 * GiB, 0);
    fixture_set_clock(f, mono + 5000000);
    fixture_meminfo(f, 3, 75 * GiB, 80 * GiB);
    fixture_close(f);
    return path;
}

/* One rank's trace of the NCCL scenario (see scenarios.h). */
static void nccl_rank(const char *dir, int rank, unsigned flags)
{
    const char *host = rank < 2 ? "node1" : "node2";
    const int64_t wall = NORMAL_START_WALL + rank * 1000000ll, mono = 2000000000ll + rank;
    char *path = fixture_trace_path(dir, host, NCCL_PID(rank), wall);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = NCCL_PID(rank),
                                .ppid = 999,
                                .host = host,
                                .cmdline = "python3 -m sglang.launch_server --tp 4",
                                .start_wall_ns = wall,
                                .start_mono_ns = mono,
                                .cuda_runtime_version = 12080,
                                .cuda_driver_version = 12090,
                                .nccl_version = NCCL_VERSION};
    fixture_process(f, &p);
    char uuid[64];
    snprintf(uuid, sizeof(uuid), NCCL_UUID_FORMAT, rank);
    int device = rank % 2;
    fixture_device(f, device, uuid, "NVIDIA H100 80GB HBM3", 80 * GiB);
    const int64_t world = 0x7e0000001000 + rank, tp = 0x7e0000002000 + rank;

    struct fixture_nccl_init init = {
        .comm = world, .nranks = 4, .rank = rank, .hash = NCCL_WORLD_HASH, .device = device};
    fixture_nccl_init(f, &init);
    bool in_tp = rank < 2;
    bool tp_fails = rank == 1 && (flags & NCCL_SCENARIO_FAILED_INIT);
    struct fixture_nccl_init split = {.comm = in_tp && !tp_fails ? tp : 0,
                                      .nranks = 2,
                                      .rank = rank,
                                      .hash = in_tp ? NCCL_TP_HASH : 0,
                                      .parent = world,
                                      .color = in_tp ? 0 : -1,
                                      .key = rank,
                                      .device = device,
                                      .result = tp_fails ? 2 : 0};
    fixture_nccl_init(f, &split);

    int eager = rank == 3 && (flags & NCCL_SCENARIO_SHORT_RANK) ? 5 : 6;
    for (int i = 0; i < eager; i++) {
        int64_t seq = fixture_nccl_collective(f, CT_API_ncclAllReduce, world, NCCL_BFLOAT16,
                                              3 * MiB / 2, 0, 0);
        if (rank == 0 && i == 0)
            fixture_exec_int(f, "UPDATE events SET dur_ns = 50000 WHERE seq = ?", seq);
    }
    for (int i = 0; i < 4; i++)
        fixture_nccl_collective(f, CT_API_ncclAllReduce, world, NCCL_BFLOAT16, 3 * MiB / 2, 0, 1);
    fixture_nccl_group(f, CT_API_ncclGroupStart);
    for (int i = 0; i < 2; i++)
        fixture_nccl_collective(f, CT_API_ncclAllReduce, world, NCCL_FLOAT32, 4096, 1, 0);
    for (int i = 0; i < 3; i++)
        fixture_nccl_collective(f, CT_API_ncclAllGather, world, NCCL_BFLOAT16, 256 * 1024, 1, 0);
    fixture_nccl_group(f, CT_API_ncclGroupEnd);
    for (int i = 0; i < 2; i++) {
        int64_t seq =
            fixture_nccl_collective(f, CT_API_ncclReduceScatter, world, NCCL_BFLOAT16, MiB, 0, 0);
        if (rank == 1 && i == 1 && (flags & NCCL_SCENARIO_FAILED_CALL))
            fixture_exec_int(f, "UPDATE events SET result = 5 WHERE seq = ?", seq);
    }
    int recvs = rank == 1 && (flags & NCCL_SCENARIO_UNMATCHED) ? 1 : 2;
    for (int i = 0; i < 2; i++) {
        fixture_nccl_group(f, CT_API_ncclGroupStart);
        fixture_nccl_p2p(f, CT_API_ncclSend, world, (rank + 1) % 4, 64 * 1024, 1);
        if (i < recvs)
            fixture_nccl_p2p(f, CT_API_ncclRecv, world, (rank + 3) % 4, 64 * 1024, 1);
        fixture_nccl_group(f, CT_API_ncclGroupEnd);
    }
    if (in_tp && !tp_fails) {
        for (int i = 0; i < 5; i++)
            fixture_nccl_collective(f, CT_API_ncclAllReduce, tp, NCCL_BFLOAT16, MiB, 0, 0);
        fixture_nccl_end(f, CT_API_ncclCommDestroy, tp);
    }
    fixture_nccl_end(f, rank == 3 ? CT_API_ncclCommAbort : CT_API_ncclCommDestroy, world);
    fixture_close(f);
    free(path);
}

void scenario_nccl(const char *dir, unsigned flags)
{
    for (int rank = 0; rank < 4; rank++)
        if (!(rank == 2 && (flags & NCCL_SCENARIO_NO_RANK_2)))
            nccl_rank(dir, rank, flags);
}

/* Where each module of the driver scenario is mapped, and a return address
 * inside it. */
#define EXE_START    0x400000ll
#define EXE_END      0x500000ll
#define CUDART_START 0x7f1000000000ll
#define CUDART_END   0x7f1000200000ll
#define NCCL_START   0x7f2000000000ll
#define NCCL_END     0x7f2004000000ll
#define TORCH_START  0x7f3000000000ll
#define TORCH_END    0x7f3010000000ll
#define CUDA_START   0x7f4000000000ll
#define CUDA_END     0x7f4002000000ll
#define IN_EXE       (EXE_START + 0x1234)
#define IN_CUDART    (CUDART_START + 0x5678)
#define IN_NCCL      (NCCL_START + 0x9abc)
#define IN_TORCH     (TORCH_START + 0xdef0)

/* CUmemLocationType: where cuMemCreate puts the memory (arg1). */
#define LOCATION_DEVICE    1
#define LOCATION_HOST_NUMA 3

/* One driver or runtime call of the scenario: ptr, size, parent (0: top
 * level), issuing module, arg1. */
static int64_t driver_call(struct fixture *f, enum ct_api api, int64_t ptr, int64_t size,
                           int64_t parent, int64_t caller, int64_t arg1)
{
    struct fixture_event e = {.api = api,
                              .device = 0,
                              .ptr = ptr,
                              .size = size,
                              .parent_seq = parent,
                              .depth = parent ? 1 : 0,
                              .caller = caller,
                              .dur_ns = parent ? 100 : 1000,
                              .arg = {0, arg1}};
    return fixture_event(f, &e);
}

char *scenario_driver(const char *dir)
{
    char *path = fixture_trace_path(dir, "node1", DRIVER_PID, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = DRIVER_PID,
                                .ppid = 1,
                                .host = "node1",
                                .cmdline = "mini_server --tp 1",
                                .exe = DRIVER_EXE,
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = NORMAL_START_MONO,
                                .cuda_runtime_version = 12080,
                                .cuda_driver_version = 12090,
                                .nccl_version = NCCL_VERSION};
    fixture_process(f, &p);
    fixture_device(f, 0, DRIVER_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_module(f, DRIVER_EXE, EXE_START, EXE_END);
    fixture_module(f, DRIVER_CUDART, CUDART_START, CUDART_END);
    fixture_module(f, DRIVER_NCCL, NCCL_START, NCCL_END);
    fixture_module(f, DRIVER_TORCH, TORCH_START, TORCH_END);
    fixture_module(f, DRIVER_LIBCUDA, CUDA_START, CUDA_END);

    const int64_t ptr_a = 0x7e0000000000, ptr_b = 0x7e0040000000, ptr_m = 0x7e0060000000,
                  ptr_h = 0x7d0000000000, ptr_n = 0x7e0070000000, ptr_g = 0x7e0080000000,
                  ptr_x = 0x7e0090000000, va_n1 = 0x7c0000000000, va_n2 = 0x7c0010000000,
                  va_t = 0x7b0000000000;

    int64_t set = driver_call(f, CT_API_cudaSetDevice, 0, 0, 0, IN_EXE, 0);
    driver_call(f, CT_API_cuDevicePrimaryCtxRetain, 0, 0, set, IN_CUDART, 0);
    fixture_lookup(f, CT_API_cuGetProcAddress_v2, "cuMemAlloc_v2", 1, 0, set, IN_CUDART);
    fixture_lookup(f, CT_API_cuGetProcAddress_v2, "cuMemFree_v2", 1, 0, set, IN_CUDART);
    fixture_lookup(f, CT_API_cuGetProcAddress_v2, "cuLaunchKernel", 0, 0, set, IN_CUDART);
    fixture_lookup(f, CT_API_cuGetProcAddress_v2, "cuMemAlloc_v2", 1, 0, set, IN_CUDART);
    fixture_lookup(f, CT_API_cuGetProcAddress_v2, "cuFutureThing", 0, 500, set, IN_CUDART);
    fixture_lookup(f, CT_API_cudaGetDriverEntryPoint, "cuMemCreate", 1, 0, 0, IN_TORCH);

    int64_t a = driver_call(f, CT_API_cudaMalloc, ptr_a, 1 * GiB, 0, IN_EXE, 0);
    driver_call(f, CT_API_cuMemAlloc_v2, ptr_a, 1 * GiB, a, IN_CUDART, 0);
    int64_t b = driver_call(f, CT_API_cudaMalloc, ptr_b, 512 * MiB, 0, IN_TORCH, 0);
    driver_call(f, CT_API_cuMemAlloc_v2, ptr_b, 512 * MiB, b, IN_CUDART, 0);
    driver_call(f, CT_API_cuMemAllocManaged, ptr_m, 16 * MiB, 0, IN_EXE, 0);
    driver_call(f, CT_API_cuMemAllocHost_v2, ptr_h, 64 * MiB, 0, IN_EXE, 0);

    struct fixture_nccl_init init = {
        .comm = 0x5555000, .nranks = 2, .hash = NCCL_WORLD_HASH, .caller = IN_TORCH};
    int64_t comm = fixture_nccl_init(f, &init);
    driver_call(f, CT_API_cuMemCreate, 0xa1, 200 * MiB, comm, IN_NCCL, LOCATION_DEVICE);
    driver_call(f, CT_API_cuMemAddressReserve, va_n1, 200 * MiB, comm, IN_NCCL, 0);
    driver_call(f, CT_API_cuMemMap, va_n1, 200 * MiB, comm, IN_NCCL, 0);
    driver_call(f, CT_API_cuMemSetAccess, va_n1, 200 * MiB, comm, IN_NCCL, 0);
    driver_call(f, CT_API_cuMemCreate, 0xa2, 8 * MiB, comm, IN_NCCL, LOCATION_DEVICE);
    driver_call(f, CT_API_cuMemAddressReserve, va_n2, 8 * MiB, comm, IN_NCCL, 0);
    driver_call(f, CT_API_cuMemMap, va_n2, 8 * MiB, comm, IN_NCCL, 0);
    driver_call(f, CT_API_cuMemAlloc_v2, ptr_n, 4 * MiB, comm, IN_NCCL, 0);
    driver_call(f, CT_API_cuMemCreate, 0xa3, 2 * MiB, comm, IN_NCCL, LOCATION_HOST_NUMA);
    driver_call(f, CT_API_cuMemRelease, 0xa3, 0, comm, IN_NCCL, 0);
    driver_call(f, CT_API_cuMemImportFromShareableHandle, 0xb1, 200 * MiB, comm, IN_NCCL, 0);

    int64_t graph = driver_call(f, CT_API_cudaGraphInstantiate, 0x6000, 0, 0, IN_EXE, 0);
    driver_call(f, CT_API_cuMemAlloc_v2, ptr_g, 6 * MiB, graph, IN_CUDART, 0);

    driver_call(f, CT_API_cuMemAddressReserve, va_t, 8 * GiB, 0, IN_TORCH, 0);
    driver_call(f, CT_API_cuMemCreate, 0xc1, 20 * MiB, 0, IN_TORCH, LOCATION_DEVICE);
    driver_call(f, CT_API_cuMemMap, va_t, 20 * MiB, 0, IN_TORCH, 0);
    driver_call(f, CT_API_cuMemSetAccess, va_t, 40 * MiB, 0, IN_TORCH, 0);
    driver_call(f, CT_API_cuMemCreate, 0xc2, 20 * MiB, 0, IN_TORCH, LOCATION_DEVICE);
    driver_call(f, CT_API_cuMemMap, va_t + 20 * MiB, 20 * MiB, 0, IN_TORCH, 0);
    driver_call(f, CT_API_cuMemUnmap, va_t + 20 * MiB, 20 * MiB, 0, IN_TORCH, 0);
    driver_call(f, CT_API_cuMemRelease, 0xc2, 0, 0, IN_TORCH, 0);

    int64_t x = driver_call(f, CT_API_cudaMalloc, ptr_x, 100 * MiB, 0, IN_EXE, 0);
    driver_call(f, CT_API_cuMemAlloc_v2, ptr_x, 100 * MiB, x, IN_CUDART, 0);
    int64_t free_x = driver_call(f, CT_API_cudaFree, ptr_x, 0, 0, IN_EXE, 0);
    driver_call(f, CT_API_cuMemFree_v2, ptr_x, 0, free_x, IN_CUDART, 0);
    struct fixture_event meminfo = {.api = CT_API_cudaMemGetInfo,
                                    .dur_ns = 1000,
                                    .caller = IN_EXE,
                                    .arg = {80 * GiB - DRIVER_MEMINFO_USED, 80 * GiB}};
    fixture_event(f, &meminfo);
    fixture_close(f);
    return path;
}
