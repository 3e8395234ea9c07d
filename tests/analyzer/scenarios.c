/*
 * scenarios.c - the canned traces described in scenarios.h.
 */
#include "scenarios.h"

#include "trace_fixture.h"

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
