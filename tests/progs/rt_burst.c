/*
 * rt_burst.c - N calls as fast as possible, then the process's peak memory.
 *
 *   rt_burst N REPORT_FILE: writes VmHWM (kB, from /proc/self/status) to
 *   REPORT_FILE so a test can compare traced and untraced peaks.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long n = atol(argv[1]);
    for (long i = 0; i < n; i += 2) {
        void *p;
        if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return 3;
    }
    FILE *status = fopen("/proc/self/status", "r");
    FILE *report = fopen(argv[2], "w");
    if (!status || !report)
        return 4;
    char line[256];
    while (fgets(line, sizeof line, status)) {
        if (strncmp(line, "VmHWM:", 6) == 0)
            fprintf(report, "%ld\n", atol(line + 6));
    }
    fclose(status);
    fclose(report);
    printf("%ld calls\n", n);
    return 0;
}
