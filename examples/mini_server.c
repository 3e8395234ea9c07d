/*
 * mini_server.c - a two-rank "server startup" for the fake GPU stack.
 *
 * Each rank is a forked process on its own simulated GPU. It measures free
 * memory, loads "weights" in caching-allocator shapes (20 MiB segments),
 * exports a buffer for its peer over CUDA IPC and opens the peer's, measures
 * again, and sizes a KV cache from what is left. Rank 1 asks for 64 MiB more
 * than is free, so the trace shows a failed allocation with the free memory
 * the server saw just before it: what `make demo` summarizes.
 *
 *   mini_server [--weights-gib N] [--kv-fraction F]
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static double weights_gib = 60.0;
static double kv_fraction = 0.9;
static char exchange_dir[] = "/tmp/cutrace-mini-server-XXXXXX";

static void handle_path(char *out, size_t cap, int rank)
{
    snprintf(out, cap, "%s/rank%d.handle", exchange_dir, rank);
}

static int publish_handle(int rank, const cudaIpcMemHandle_t *h)
{
    char path[256], tmp[300];
    handle_path(path, sizeof path, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(h, sizeof *h, 1, f) != 1 || fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

static int read_handle(int rank, cudaIpcMemHandle_t *h)
{
    char path[256];
    handle_path(path, sizeof path, rank);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(h, sizeof *h, 1, f);
            fclose(f);
            if (n == 1)
                return 0;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static int run_rank(int rank, int world)
{
    size_t free0, total, free1;
    if (cudaSetDevice(rank) != cudaSuccess || cudaMemGetInfo(&free0, &total) != cudaSuccess)
        return 10;

    /* Peer buffer exchange, as a custom all-reduce does it. */
    void *shared = NULL, *peer = NULL;
    cudaIpcMemHandle_t mine, theirs;
    if (cudaMalloc(&shared, 8 * MIB) != cudaSuccess || cudaIpcGetMemHandle(&mine, shared) ||
        publish_handle(rank, &mine) != 0)
        return 11;
    int other = (rank + 1) % world;
    if (read_handle(other, &theirs) != 0 ||
        cudaIpcOpenMemHandle(&peer, theirs, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess)
        return 12;

    /* Weights: caching-allocator segments of 20 MiB. */
    size_t segments = (size_t)(weights_gib * GIB / (20 * MIB));
    for (size_t i = 0; i < segments; i++) {
        void *p;
        if (cudaMalloc(&p, 20 * MIB) != cudaSuccess)
            return 13;
    }
    if (cudaMemGetInfo(&free1, &total) != cudaSuccess)
        return 14;

    /* The KV cache: rank 1 forgets that its peer buffer exists and asks for too much. */
    size_t kv = (size_t)((double)free1 * kv_fraction) / (2 * MIB) * (2 * MIB);
    if (rank == 1)
        kv = free1 + 64 * MIB;
    void *pool = NULL;
    cudaError_t rc = cudaMalloc(&pool, kv);
    printf("rank %d: free before weights %.2f GiB, after %.2f GiB, KV cache %.2f GiB: %s\n", rank,
           (double)free0 / GIB, (double)free1 / GIB, (double)kv / GIB,
           rc == cudaSuccess ? "ok" : cudaGetErrorString(rc));
    fflush(stdout);
    cudaIpcCloseMemHandle(peer);
    return rc == cudaSuccess ? 0 : 1;
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--weights-gib") == 0)
            weights_gib = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--kv-fraction") == 0)
            kv_fraction = atof(argv[i + 1]);
    }
    if (!mkdtemp(exchange_dir))
        return 2;
    const int world = 2;
    pid_t pids[2];
    for (int rank = 0; rank < world; rank++) {
        pids[rank] = fork();
        if (pids[rank] == 0)
            exit(run_rank(rank, world));
    }
    int failed = 0;
    for (int rank = 0; rank < world; rank++) {
        int status = 0;
        waitpid(pids[rank], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed++;
    }
    for (int rank = 0; rank < world; rank++) {
        char path[256];
        handle_path(path, sizeof path, rank);
        unlink(path);
    }
    rmdir(exchange_dir);
    printf("%d of %d ranks started\n", world - failed, world);
    return failed ? 1 : 0;
}
