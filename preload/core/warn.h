/*
 * warn.h - the tracer's only voice: one line on stderr per problem, ever.
 *
 * A tracer that floods stderr changes what the user sees of their program,
 * so each kind of problem is reported once per process, prefixed "cutrace:".
 * Output goes straight to fd 2 with write(2): no stdio buffers or locks are
 * shared with the program, and errno is preserved.
 */
#ifndef CUTRACE_WARN_H
#define CUTRACE_WARN_H

enum ct_problem {
    CT_PROBLEM_TRACE_DIR,     /* cannot create the trace directory or files */
    CT_PROBLEM_RING,          /* crash-safe buffer unavailable */
    CT_PROBLEM_WRITER,        /* the writer thread could not start or write */
    CT_PROBLEM_MISSING_REAL,  /* a real function could not be found */
    CT_PROBLEM_FLUSH_TIMEOUT, /* exit/exec flush gave up waiting */
    CT_PROBLEM_SECOND_COPY,   /* another copy of a traced library, not wrapped */
    CT_PROBLEM_STACKS,        /* call stacks misconfigured or unavailable (stacks.c) */
    CT_PROBLEM_PYFRAMES,      /* Python frames cannot be read without the GIL (pyframes.c) */
    CT_PROBLEM_BUFFER_SIZE,   /* CUTRACE_BUFFER_MB is not a size cutrace takes */
    CT_PROBLEM_NVTX_CHAIN,    /* the NVTX injection library to chain to is unusable */
    CT_PROBLEM_COUNT
};

void ct_warn_once(enum ct_problem problem, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Forgets which problems were reported (a forked child reports its own). */
void ct_warn_reset(void);

#endif
