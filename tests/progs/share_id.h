/*
 * share_id.h - how the ranks of a test job agree on one ncclUniqueId, as a
 * launcher's store does for real ranks: rank 0 makes it and publishes it in
 * the file id_path (written under another name, then renamed, so no rank
 * reads half of it); the others wait for the file. Shared by the NCCL test
 * programs (tp_collectives.c, hang_ranks.c).
 */
#ifndef CUTRACE_TESTS_SHARE_ID_H
#define CUTRACE_TESTS_SHARE_ID_H

#include <nccl.h>
#include <stdio.h>
#include <time.h>

static char id_path[4096];

/* 0 once *id is the job's id; -1 if it cannot be made or never came (20 s). */
static int share_id(int rank, ncclUniqueId *id)
{
    char tmp[4200];
    if (rank == 0) {
        if (ncclGetUniqueId(id) != ncclSuccess)
            return -1;
        snprintf(tmp, sizeof tmp, "%s.tmp", id_path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0)
            return -1;
        return rename(tmp, id_path);
    }
    for (int i = 0; i < 4000; i++) {
        FILE *f = fopen(id_path, "rb");
        if (f) {
            size_t n = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (n == 1)
                return 0;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

#endif
