/*
 * thread.h - the per-thread state of the hot path.
 *
 * initial-exec TLS: the preload is loaded at startup, so its TLS block is
 * static and an access is one instruction, with no __tls_get_addr call that
 * could allocate inside an intercepted call.
 */
#ifndef CUTRACE_THREAD_H
#define CUTRACE_THREAD_H

#include <stdbool.h>
#include <stdint.h>

struct ct_thread {
    int32_t tid;           /* 0 until first needed */
    int32_t device;        /* valid only when device_known */
    bool device_known;     /* device learned from cudaSetDevice or a probe */
    bool internal;         /* the tracer's own thread: its calls are not traced */
    bool starting;         /* inside session setup (session.c): a signal handler's call
                              on this thread cannot wait for it, and is dropped */
    uint16_t depth;        /* traced calls in progress on this thread */
    uint64_t current_seq;  /* innermost traced call in progress, 0 = none */
    uint8_t current_level; /* that call's record depth (calls it is nested in) */
};

extern __thread struct ct_thread ct_self __attribute__((tls_model("initial-exec")));

/* The calling thread's kernel tid: a TLS load once known (the hot path's
 * case), a gettid() the first time only. */
int32_t ct_thread_id_slow(void);
static inline int32_t ct_thread_id(void)
{
    int32_t tid = ct_self.tid;
    return __builtin_expect(tid != 0, 1) ? tid : ct_thread_id_slow();
}

/* A forked child's only thread is a new thread with the forking thread's
 * memory; what its own call stack is doing (internal, starting) stays. */
void ct_thread_after_fork_child(void);

#endif
