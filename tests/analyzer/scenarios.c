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
