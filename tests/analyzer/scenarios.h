/*
 * scenarios.h - canned traces with known answers, shared by the summary,
 * trace and bad-input suites. Each writes one complete trace file into dir
 * and returns its path (malloc'd); the constants are what a correct summary
 * must report for it.
 */
#ifndef CUTRACE_TESTS_SCENARIOS_H
#define CUTRACE_TESTS_SCENARIOS_H

#include <stdint.h>

#define MiB (1ll << 20)
#define GiB (1ll << 30)

/*
 * One process (pid 4242) on one H100 (device 0):
 *   seq 1  cudaSetDevice (no device current yet: device -1)
 *   seq 2  cudaMalloc A 1 MiB            live 1 MiB
 *   seq 3  cudaMalloc B 2 MiB            live 3 MiB
 *   seq 4  cudaMalloc 100 GiB fails with 2 (cudaErrorMemoryAllocation)
 *   seq 5  cudaFree A                    live 2 MiB (waited 5 us for the ring)
 *   seq 6  cudaMemGetInfo free 70 GiB of 80 GiB: used 10 GiB, traced 2 MiB
 *   seq 7  cudaMalloc C 4 MiB            live 6 MiB = the peak
 *   seq 8  cudaMallocHost H 8 MiB        (host, not GPU memory)
 *   seq 9  cudaFree C                    live 2 MiB
 *   seq 10 cudaFree of an unknown pointer fails with 1 (cudaErrorInvalidValue)
 *   seq 11 cudaIpcOpenMemHandle I 16 MiB (a peer's memory)
 *   seq 12 cudaMallocManaged M 1 MiB, which calls
 *   seq 13   cudaMalloc 1 MiB nested (depth 1): the same memory, counted once
 */
#define NORMAL_PID          4242
#define NORMAL_START_WALL   1736071872345000000ll /* 2025-01-05T10:11:12.345Z */
#define NORMAL_START_MONO   1000000000ll
#define NORMAL_UUID         "GPU-11111111-2222-3333-4444-555555555555"
#define NORMAL_CALLS        13
#define NORMAL_FAILED       2
#define NORMAL_PEAK         (6 * MiB)
#define NORMAL_PEAK_SEQ     7
#define NORMAL_LIVE_DEVICE  (2 * MiB)
#define NORMAL_MEMINFO_USED (10 * GiB)
#define NORMAL_UNEXPLAINED  (10 * GiB - 2 * MiB)
char *scenario_normal(const char *dir);

/*
 * Pointer reuse: P allocated (1 MiB), handed out again without a free
 * (2 MiB, ends the first implicitly), then freed; a host allocation at the
 * same address as a device one is not ended by cudaFree. Device: 2 allocs,
 * 3 MiB allocated, 2 frees, 3 MiB freed, 0 live, peak 2 MiB at seq 2.
 */
char *scenario_pointer_reuse(const char *dir);

/*
 * Frees crossing allocations of another thread (pid 888, threads 1 and 2;
 * ret: the calls started by the time the call returned):
 *   seq 1  T1 cudaMalloc A at P, 1 MiB          ret 1
 *   seq 2  T2 cudaMalloc R0 at R, 16 MiB        ret 2
 *   seq 3  T2 cudaMalloc B 32 MiB, returns P    ret 4: after T1 freed A
 *   seq 4  T1 cudaFree P: ends A                ret 4
 *   seq 5  T1 cudaMalloc D 8 MiB, returns R     ret 6: after T2 freed R0
 *   seq 6  T2 cudaFree R: ends R0               ret 6
 *   seq 7  T1 cudaFree R: ends D                ret 7
 *   seq 8  T2 cudaMemGetInfo: used 1 GiB
 * In effect order: +A 1, +R0 17, -A 16, +B 48 (the peak, at seq 3), -R0 32,
 * +D 40, -D 32. B stays live: 32 MiB at the measurement and at the end. By
 * seq, B would end A (implicit), A's free would end B, D would end R0 and
 * R0's free D, leaving nothing live and a double free.
 */
#define CROSSING_PID       888
#define CROSSING_LIVE      (32 * MiB)
#define CROSSING_PEAK      (48 * MiB)
#define CROSSING_PEAK_SEQ  3
#define CROSSING_ALLOCATED (57 * MiB)
#define CROSSING_FREED     (25 * MiB)
#define CROSSING_USED      (1 * GiB)
char *scenario_crossing(const char *dir);

/*
 * Two processes on one GPU uuid: pid 100 allocates 1 GiB and keeps it
 * ('running'); pid 200 starts 10 ms later, allocates 2 GiB and calls
 * cudaMemGetInfo last (free 75 GiB of 80 GiB: used 5 GiB). Directory-wide:
 * traced live 3 GiB, unexplained 2 GiB. With first_exits, pid 100 exits
 * before that moment and its gigabyte no longer counts (unexplained 3 GiB).
 */
char *scenario_shared_gpu_first(const char *dir, int first_exits);
char *scenario_shared_gpu_second(const char *dir);
#define SHARED_UUID "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

/*
 * The driver API with issuing modules (format 3): one process (pid 5150,
 * /opt/app/mini_server, NCCL 2.28.9) on one H100 (device 0), every call
 * with the module it came from (E the program, R libcudart.so.12, N
 * libnccl.so.2, T libtorch_cuda.so; libcuda.so.1 is loaded but issues
 * nothing). Nested calls are indented under the call they were made in.
 *   seq 1  cudaSetDevice (E)
 *   seq 2    cuDevicePrimaryCtxRetain (R)
 *   seq 3-7  cuGetProcAddress_v2 (R): cuMemAlloc_v2 and cuMemFree_v2
 *            (wrapped), cuLaunchKernel, cuMemAlloc_v2 again (wrapped),
 *            cuFutureThing (fails: 500, not found)
 *   seq 8  cudaGetDriverEntryPoint cuMemCreate (T, wrapped)
 *          = 6 lookups of 5 symbols, 4 wrapped, 1 failed
 *   seq 9  cudaMalloc A 1 GiB (E)              seq 10 cuMemAlloc_v2 A (R): counted once
 *   seq 11 cudaMalloc B 512 MiB (T)            seq 12 cuMemAlloc_v2 B (R): counted once
 *   seq 13 cuMemAllocManaged 16 MiB (E)
 *   seq 14 cuMemAllocHost_v2 64 MiB (E)        host, not GPU memory
 *   seq 15 ncclCommInitRank (T), inside it, all from N:
 *     16 cuMemCreate 200 MiB on the device, 17 cuMemAddressReserve 200 MiB,
 *     18 cuMemMap, 19 cuMemSetAccess, 20 cuMemCreate 8 MiB,
 *     21 cuMemAddressReserve 8 MiB, 22 cuMemMap, 23 cuMemAlloc_v2 4 MiB
 *     (counted: its parent allocates nothing), 24 cuMemCreate 2 MiB at
 *     host NUMA node 0 (vmm_host), 25 cuMemRelease of it,
 *     26 cuMemImportFromShareableHandle 200 MiB (a peer's: ipc)
 *   seq 27 cudaGraphInstantiate (E)            seq 28 cuMemAlloc_v2 G 6 MiB (R): counted
 *   seq 29 cuMemAddressReserve 8 GiB (T), then a PyTorch expandable-segment
 *          grow and shrink: 30 cuMemCreate 20 MiB, 31 cuMemMap, 32 cuMemSetAccess,
 *          33 cuMemCreate 20 MiB (the peak of vmm), 34 cuMemMap, 35 cuMemUnmap,
 *          36 cuMemRelease of the second
 *   seq 37 cudaMalloc X 100 MiB (E): the peak  seq 38 cuMemAlloc_v2 X (R)
 *   seq 39 cudaFree X (E)                      seq 40 cuMemFree_v2 X (R)
 *   seq 41 cudaMemGetInfo (E): free 79620 MiB of 80 GiB, used 2300 MiB
 * GPU memory live at the end (and at seq 41): device 1546 MiB (A, B, NCCL's
 * 4 MiB, G), managed 16 MiB, vmm 228 MiB (NCCL 208, PyTorch 20) = 1790 MiB;
 * unexplained 510 MiB. By module: mini_server 1040 MiB (peak 1140),
 * libtorch_cuda.so 532 (peak 552), libnccl.so.2 212, libcudart.so.12 6.
 */
#define DRIVER_PID          5150
#define DRIVER_UUID         "GPU-d0d0d0d0-1111-2222-3333-444444444444"
#define DRIVER_EXE          "/opt/app/mini_server"
#define DRIVER_CUDART       "/usr/local/cuda-12.8/lib64/libcudart.so.12"
#define DRIVER_NCCL         "/usr/lib/x86_64-linux-gnu/libnccl.so.2"
#define DRIVER_TORCH        "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so"
#define DRIVER_LIBCUDA      "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
#define DRIVER_CALLS        41
#define DRIVER_NESTED       22
#define DRIVER_GPU_LIVE     (1790 * MiB)
#define DRIVER_GPU_PEAK     (1890 * MiB)
#define DRIVER_MEMINFO_USED (2300 * MiB)
#define DRIVER_UNEXPLAINED  (510 * MiB)
#define DRIVER_NCCL_BUFFERS (212 * MiB)
char *scenario_driver(const char *dir);

/*
 * Four ranks of one NCCL job (NCCL 2.28.9), one process each: pids
 * 1000-1003, ranks 0-3; ranks 0 and 1 on node1, 2 and 3 on node2, each on
 * its host's device 0 or 1. Communicators:
 *   world (NCCL_WORLD_HASH): ncclCommInitRank, 4 ranks; destroyed by ranks
 *     0-2, aborted by rank 3.
 *   tp (NCCL_TP_HASH): ncclCommSplit of world with color 0 by ranks 0 and 1
 *     (2 ranks); ranks 2 and 3 pass NCCL_SPLIT_NOCOLOR and get no
 *     communicator. Destroyed by both.
 * Calls of every rank on world:
 *   ncclAllReduce bfloat16 1.5 MiB x 10 (1-2 MiB): 6 eager, then 4 captured
 *     into a CUDA graph; rank 0's first takes 50 us, every other 2 us
 *   ncclAllReduce float32 4 KiB x 2 (4-8 KiB), inside ncclGroupStart/End
 *   ncclAllGather bfloat16 256 KiB x 3 (256-512 KiB), inside groups
 *   ncclReduceScatter bfloat16 1 MiB x 2 (1-2 MiB), eager
 *   ncclSend 64 KiB x 2 to rank+1 and ncclRecv 64 KiB x 2 from rank-1
 *     (a ring), inside groups
 * and of ranks 0 and 1 on tp: ncclAllReduce bfloat16 1 MiB x 5.
 * World totals: ncclAllReduce 48, ncclAllGather 12, ncclReduceScatter 8,
 * ncclSend 8, ncclRecv 8 (collective 68, p2p 16); tp: 10.
 */
enum nccl_scenario_flags {
    NCCL_SCENARIO_DEFAULT = 0,
    NCCL_SCENARIO_SHORT_RANK = 1 << 0,  /* rank 3 makes 5 eager bf16 allreduces, not 6 */
    NCCL_SCENARIO_NO_RANK_2 = 1 << 1,   /* rank 2 leaves no trace */
    NCCL_SCENARIO_UNMATCHED = 1 << 2,   /* rank 1 receives once from rank 0, not twice */
    NCCL_SCENARIO_FAILED_CALL = 1 << 3, /* rank 1's last ReduceScatter fails (ncclInvalidUsage) */
    NCCL_SCENARIO_FAILED_INIT = 1 << 4, /* rank 1's tp split fails: no tp calls on rank 1 */
};
#define NCCL_WORLD_HASH     0x1a2b3c4d5e6f7a8bull
#define NCCL_WORLD_HASH_HEX "1a2b3c4d5e6f7a8b"
#define NCCL_TP_HASH        0x9f8e7d6c5b4a3921ull
#define NCCL_TP_HASH_HEX    "9f8e7d6c5b4a3921"
#define NCCL_PID(rank)      (1000 + (rank))
#define NCCL_VERSION        22809
void scenario_nccl(const char *dir, unsigned flags);
/* The uuid of a rank's GPU: "GPU-0000000r-...". */
#define NCCL_UUID_FORMAT "GPU-%08d-0000-0000-0000-000000000000"

#endif
