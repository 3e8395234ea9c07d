/*
 * sigfree.c - threads that block every signal (see sigfree.h for why).
 */
#include "sigfree.h"

#include <errno.h>
#include <signal.h>

#include "thread.h"

int ct_sigfree_create(pthread_t *thread, void *(*fn)(void *), void *arg)
{
    /* A new thread starts with its creator's mask: block all around the
     * creation, for the few instructions it takes, and restore it. A signal
     * arriving meanwhile stays pending and is delivered at the restore. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(thread, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

struct job {
    void (*fn)(void *);
    void *arg;
};

static void *run_job(void *p)
{
    struct job *job = p;
    ct_self.internal = true; /* the tracer's own thread: nothing it calls is traced */
    job->fn(job->arg);
    return NULL;
}

bool ct_sigfree_run(void (*fn)(void *), void *arg)
{
    struct job job = {fn, arg};
    pthread_t t;
    int rc = ct_sigfree_create(&t, run_job, &job);
    if (rc != 0) {
        errno = rc;
        return false;
    }
    int saved = errno; /* the caller's errno is the program's */
    pthread_join(t, NULL);
    errno = saved;
    return true;
}
