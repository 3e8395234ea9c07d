/*
 * tp_collectives.c - a short "tensor-parallel" job: one process per rank, each
 * on its own GPU, talking through NCCL.
 *
 *   tp_collectives NRANKS ITERS [SHORT_RANK]
 *
 * Rank 0 makes the unique id and hands it to the others through a file.
 * Every rank then: ncclCommInitRank; ncclCommSplit by rank parity; ITERS
 * rounds of an eager allreduce, an allgather + reducescatter in a group, a
 * send/recv ring in a group, an allreduce captured into a CUDA graph, and an
 * allreduce on the split communicator; then ncclMemAlloc, a registration of
 * that buffer, and frees; then destroys both communicators. SHORT_RANK, if
 * given, skips its last eager allreduce, as a rank that left early would.
 * Exit 0 when every rank succeeded.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "share_id.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            fprintf(stderr, "rank %d: %s failed at line %d\n", rank, #call, __LINE__);             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int run_rank(int rank, int nranks, int iters, int short_rank)
{
    ncclUniqueId id;
    CHECK(cudaSetDevice(rank));
    CHECK(share_id(rank, &id));
    ncclComm_t world, half;
    CHECK(ncclCommInitRank(&world, nranks, id, rank));
    CHECK(ncclCommSplit(world, rank % 2, rank, &half, NULL));

    const size_t count = 1 << 20;
    float *send, *recv;
    CHECK(cudaMalloc((void **)&send, count * sizeof(float)));
    CHECK(cudaMalloc((void **)&recv, count * sizeof(float) * (size_t)nranks));
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;

    for (int i = 0; i < iters; i++) {
        if (!(rank == short_rank && i == iters - 1))
            CHECK(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, world, stream));
        CHECK(ncclGroupStart());
        CHECK(ncclAllGather(send, recv, count / 4, ncclBfloat16, world, stream));
        CHECK(ncclReduceScatter(send, recv, count / (size_t)nranks, ncclFloat32, ncclSum, world,
                                stream));
        CHECK(ncclGroupEnd());
        CHECK(ncclGroupStart());
        CHECK(ncclSend(send, 4096, ncclInt8, next, world, stream));
        CHECK(ncclRecv(recv, 4096, ncclInt8, prev, world, stream));
        CHECK(ncclGroupEnd());
        cudaGraph_t graph;
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        CHECK(ncclAllReduce(send, recv, 1024, ncclFloat16, ncclMax, world, stream));
        CHECK(cudaStreamEndCapture(stream, &graph));
        CHECK(ncclAllReduce(send, recv, 256, ncclFloat32, ncclSum, half, stream));
    }
    /* NCCL's own allocator and a registration of its buffer. */
    void *nccl_buf, *reg;
    CHECK(ncclMemAlloc(&nccl_buf, 4 << 20));
    CHECK(ncclCommRegister(world, nccl_buf, 4 << 20, &reg));
    CHECK(ncclCommDeregister(world, reg));
    CHECK(ncclMemFree(nccl_buf));
    CHECK(ncclCommDestroy(half));
    CHECK(ncclCommDestroy(world));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int nranks = atoi(argv[1]), iters = atoi(argv[2]);
    int short_rank = argc > 3 ? atoi(argv[3]) : -1;
    if (nranks < 2 || nranks > 64 || iters < 1)
        return 2;
    char dir[] = "/tmp/cutrace-tp-XXXXXX";
    if (!mkdtemp(dir))
        return 3;
    snprintf(id_path, sizeof id_path, "%s/unique-id", dir);
    pid_t pids[64];
    for (int rank = 0; rank < nranks; rank++) {
        pids[rank] = fork();
        if (pids[rank] == 0)
            exit(run_rank(rank, nranks, iters, short_rank));
    }
    int failed = 0;
    for (int rank = 0; rank < nranks; rank++) {
        int status = 0;
        waitpid(pids[rank], &status, 0);
        failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    unlink(id_path);
    rmdir(dir);
    printf("%d ranks, %d failed\n", nranks, failed);
    return failed ? 1 : 0;
}
