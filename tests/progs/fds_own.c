/*
 * fds_own.c - a program that owns its descriptor table, for test_fds.c: the
 * tracer (its unwinder included) must never use a descriptor number of the
 * program's, nor keep one the program expects free.
 *
 *   fds_own daemon DIR   closes every inherited descriptor >= 3 (as daemons
 *                        do), opens DIR/a.log and DIR/b.log, then writes a
 *                        known line to each around every CUDA call (from
 *                        several call sites: each new stack is unwound anew)
 *   fds_own late DIR     makes CUDA calls first (stacks are being captured),
 *                        then closes every descriptor >= 3, opens the two
 *                        files, moves b.log to the highest number its
 *                        RLIMIT_NOFILE allows (as a shell moves a script to
 *                        255) and goes on as daemon does, each round in a
 *                        thread of its own (whose stacks the unwinder walks
 *                        anew, validating addresses with no cache of them)
 *   fds_own limit        for a tiny RLIMIT_NOFILE: the number its first
 *                        open() returns, and what each CUDA call returns
 *
 * Every write's return value is checked. Prints what it saw (daemon: the
 * numbers the files got); exits 0 when every write and call succeeded, 1
 * otherwise. The files' content is for the test to compare.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define ROUNDS   40

static int failures;
static void *volatile kept;

static void check_write(int fd, const char *file, int round)
{
    char line[96];
    int n = snprintf(line, sizeof line, "%s round %d: the program's own data\n", file, round);
    ssize_t w = write(fd, line, (size_t)n);
    if (w != n) {
        printf("write to %s in round %d returned %zd (%s)\n", file, round, w,
               w < 0 ? strerror(errno) : "short");
        failures++;
    }
}

/* Distinct call sites, so that stacks keep being new ones. */
static NOINLINE int alloc_weights(void)
{
    void *p;
    int rc = cudaMalloc(&p, (size_t)1 << 20);
    kept = p;
    return rc;
}

static NOINLINE int alloc_cache(void)
{
    void *p;
    int rc = cudaMalloc(&p, (size_t)2 << 20);
    kept = p;
    return rc;
}

static NOINLINE int measure(void)
{
    size_t free_b, total;
    int rc = cudaMemGetInfo(&free_b, &total);
    kept = NULL;
    return rc;
}

static NOINLINE int release(void)
{
    int rc = cudaFree(kept);
    kept = NULL;
    return rc;
}

static int (*const sites[])(void) = {alloc_weights, release, alloc_cache, measure, release};

static int open_log(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

static int log_a = -1, log_b = -1;

static void one_round(int round)
{
    check_write(log_a, "a.log", round);
    int rc = sites[round % (sizeof sites / sizeof sites[0])]();
    if (rc != cudaSuccess) {
        printf("CUDA call of round %d returned %d\n", round, rc);
        failures++;
    }
    check_write(log_b, "b.log", round);
}

static void *round_in_thread(void *round)
{
    one_round((int)(intptr_t)round);
    return NULL;
}

static int write_around_calls(const char *dir, bool late)
{
    log_a = open_log(dir, "a.log");
    log_b = open_log(dir, "b.log");
    if (log_a < 0 || log_b < 0) {
        printf("open failed: %s\n", strerror(errno));
        return 1;
    }
    struct rlimit nofile;
    if (late && getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur <= INT_MAX) {
        int top = (int)nofile.rlim_cur - 1;
        if (dup2(log_b, top) != top || close(log_b) != 0) {
            printf("dup2 to %d failed: %s\n", top, strerror(errno));
            return 1;
        }
        log_b = top;
    }
    if (!late)
        printf("a.log on %d, b.log on %d\n", log_a, log_b);
    for (int round = 0; round < ROUNDS; round++) {
        pthread_t worker;
        if (!late)
            one_round(round);
        else if (pthread_create(&worker, NULL, round_in_thread, (void *)(intptr_t)round) != 0 ||
                 pthread_join(worker, NULL) != 0)
            return 1;
    }
    if (close(log_a) != 0 || close(log_b) != 0) {
        printf("close failed: %s\n", strerror(errno));
        failures++;
    }
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}

static int limit_mode(void)
{
    int fd = open("/dev/null", O_RDONLY);
    printf("first open: %d\n", fd);
    if (fd >= 0)
        close(fd);
    int count = -1;
    printf("cudaGetDeviceCount: %d\n", (int)cudaGetDeviceCount(&count));
    void *p = NULL;
    int rc = cudaMalloc(&p, 4096);
    printf("cudaMalloc: %d\n", rc);
    if (rc == cudaSuccess)
        printf("cudaFree: %d\n", (int)cudaFree(p));
    size_t free_b, total;
    printf("cudaMemGetInfo: %d\n", (int)cudaMemGetInfo(&free_b, &total));
    fd = open("/dev/null", O_RDONLY);
    printf("open after the calls: %d\n", fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "daemon") == 0) {
        closefrom(3);
        return write_around_calls(argv[2], false);
    }
    if (argc == 3 && strcmp(argv[1], "late") == 0) {
        for (int i = 0; i < 3; i++)
            if (alloc_weights() != cudaSuccess || release() != cudaSuccess)
                return 1;
        /* The tracer's own trace files go too: the numbers the program's
         * files get then depend on when its writer reopens them, so they are
         * not printed. */
        closefrom(3);
        return write_around_calls(argv[2], true);
    }
    if (argc == 2 && strcmp(argv[1], "limit") == 0)
        return limit_mode();
    fprintf(stderr, "usage: fds_own daemon|late DIR | fds_own limit\n");
    return 2;
}
