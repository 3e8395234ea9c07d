/*
 * hang_ranks.c - ranks of an NCCL job that never get out of a blocking
 * call, to be killed there (tests/integration/test_entered.c).
 *
 *   hang_ranks init NRANKS PIDFILE
 *     NRANKS processes call ncclCommInitRank for a communicator of
 *     NRANKS + 1 ranks: the last rank never comes, so all wait in the init
 *     (run with a long CUTRACE_FAKE_NCCL_TIMEOUT).
 *   hang_ranks coll NRANKS PIDFILE SKIP_RANK
 *     NRANKS processes make a communicator, then rounds of ncclAllReduce +
 *     cudaStreamSynchronize; rank SKIP_RANK skips the third allreduce and
 *     goes straight to its synchronisation (run with
 *     CUTRACE_FAKE_BLOCK=ncclAllReduce@3,cudaStreamSynchronize@3: the others
 *     wait inside allreduce #3, it inside its third synchronisation).
 *
 *   hang_ranks exit 1 PIDFILE
 *     one process whose second thread waits inside cudaStreamSynchronize
 *     (run with CUTRACE_FAKE_BLOCK=cudaStreamSynchronize and
 *     CUTRACE_FAKE_BLOCK_NOTE=FILE) while its main thread exits, once FILE
 *     says the other is inside.
 *
 * The parent writes every rank's pid to PIDFILE, one a line, then waits
 * for them (for ever, unless they are killed).
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "share_id.h"

static void *synchronize(void *arg)
{
    (void)arg;
    cudaStreamSynchronize(NULL); /* never returns */
    return NULL;
}

/* Exits while another thread is inside a blocking call. */
static int exit_while_inside(void)
{
    const char *note = getenv("CUTRACE_FAKE_BLOCK_NOTE");
    pthread_t t;
    if (!note || pthread_create(&t, NULL, synchronize, NULL) != 0)
        return 1;
    struct stat st;
    for (int i = 0; i < 60000 && (stat(note, &st) != 0 || st.st_size == 0); i++) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    exit(0);
}

static int run_rank(const char *mode, int rank, int nranks, int skip_rank)
{
    ncclUniqueId id;
    ncclComm_t comm;
    void *buf;
    if (cudaSetDevice(rank) != cudaSuccess || cudaMalloc(&buf, 1 << 20) != cudaSuccess)
        return 1;
    if (strcmp(mode, "exit") == 0)
        return exit_while_inside();
    if (share_id(rank, &id) != 0)
        return 1;
    if (strcmp(mode, "init") == 0) {
        ncclCommInitRank(&comm, nranks + 1, id, rank); /* never returns */
        return 1;
    }
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess)
        return 1;
    for (int round = 1;; round++) {
        if (!(round == 3 && rank == skip_rank) &&
            ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
            return 1;
        if (cudaStreamSynchronize(NULL) != cudaSuccess)
            return 1;
    }
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    const char *mode = argv[1];
    int nranks = atoi(argv[2]);
    int skip_rank = argc > 4 ? atoi(argv[4]) : -1;
    if (nranks < 1 || nranks > 64)
        return 2;
    char dir[] = "/tmp/cutrace-hang-XXXXXX";
    if (!mkdtemp(dir))
        return 3;
    snprintf(id_path, sizeof id_path, "%s/unique-id", dir);
    FILE *pids = fopen(argv[3], "w");
    if (!pids)
        return 3;
    for (int rank = 0; rank < nranks; rank++) {
        pid_t pid = fork();
        if (pid == 0) {
            fclose(pids);
            _exit(run_rank(mode, rank, nranks, skip_rank));
        }
        fprintf(pids, "%d\n", (int)pid);
    }
    fclose(pids);
    while (wait(NULL) > 0)
        ;
    unlink(id_path);
    rmdir(dir);
    return 0;
}
