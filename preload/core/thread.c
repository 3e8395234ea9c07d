/*
 * thread.c - per-thread hot-path state.
 */
#include "thread.h"

#include <string.h>
#include <unistd.h>

__thread struct ct_thread ct_self __attribute__((tls_model("initial-exec")));

int32_t ct_thread_id_slow(void)
{
    if (ct_self.tid == 0)
        ct_self.tid = (int32_t)gettid();
    return ct_self.tid;
}

void ct_thread_after_fork_child(void)
{
    /* The child's thread has a new tid; its CUDA state is not inherited. */
    bool internal = ct_self.internal;
    bool starting = ct_self.starting;
    memset(&ct_self, 0, sizeof ct_self);
    ct_self.internal = internal;
    ct_self.starting = starting;
}
