/*
 * rt_ipc.c - one process exports a device buffer, another opens it.
 *
 *   rt_ipc export FILE   cudaMalloc + cudaIpcGetMemHandle, write the handle to
 *                        FILE, wait for FILE.done, free
 *   rt_ipc import FILE   wait for FILE, cudaIpcOpenMemHandle on device 1,
 *                        cudaIpcCloseMemHandle, create FILE.done
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int wait_for(const char *path)
{
    for (int i = 0; i < 2000; i++) {
        if (access(path, F_OK) == 0)
            return 0;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    char tmp[4096], done[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    snprintf(done, sizeof done, "%s.done", argv[2]);
    cudaIpcMemHandle_t h;
    if (strcmp(argv[1], "export") == 0) {
        void *p = NULL;
        if (cudaMalloc(&p, 2 << 20) || cudaIpcGetMemHandle(&h, p))
            return 3;
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&h, sizeof h, 1, f) != 1 || fclose(f) || rename(tmp, argv[2]))
            return 4;
        if (wait_for(done))
            return 5;
        return cudaFree(p) ? 6 : 0;
    }
    if (wait_for(argv[2]))
        return 7;
    FILE *f = fopen(argv[2], "rb");
    if (!f || fread(&h, sizeof h, 1, f) != 1)
        return 8;
    fclose(f);
    void *q = NULL;
    if (cudaSetDevice(1) || cudaIpcOpenMemHandle(&q, h, cudaIpcMemLazyEnablePeerAccess) ||
        cudaIpcCloseMemHandle(q))
        return 9;
    f = fopen(done, "w");
    return f && fclose(f) == 0 ? 0 : 10;
}
