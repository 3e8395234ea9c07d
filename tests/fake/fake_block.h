/*
 * fake_block.h - CUTRACE_FAKE_BLOCK: makes a fake call block for ever, as
 * a real one does when a peer rank never arrives or a kernel never ends, so
 * that tests can kill a process inside it (docs/fakes.md).
 *
 *   CUTRACE_FAKE_BLOCK=name[@n][,name[@n]...]
 *
 * The n-th call (1 = the first; no @n: every call) of the function `name`
 * in the process sleeps until the process is killed. Included by each fake
 * library, which marks its blocking points with FAKE_BLOCK_POINT(name).
 * With CUTRACE_FAKE_BLOCK_NOTE=path, a call that blocks first appends
 * "<pid> <name>" and a newline to that file, so a test (or the program)
 * knows it is inside without guessing how long to wait.
 */
#ifndef CUTRACE_FAKE_BLOCK_H
#define CUTRACE_FAKE_BLOCK_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Whether CUTRACE_FAKE_BLOCK asks the nth call of `name` to block. */
static inline int fake_block_wanted(const char *name, unsigned long nth)
{
    const char *list = getenv("CUTRACE_FAKE_BLOCK");
    size_t len = strlen(name);
    while (list && *list) {
        const char *end = strchr(list, ',');
        size_t item = end ? (size_t)(end - list) : strlen(list);
        if (item >= len && strncmp(list, name, len) == 0) {
            if (item == len)
                return 1;
            if (list[len] == '@' && strtoul(list + len + 1, NULL, 10) == nth)
                return 1;
        }
        list = end ? end + 1 : NULL;
    }
    return 0;
}

static inline void fake_block_forever(const char *name)
{
    const char *note = getenv("CUTRACE_FAKE_BLOCK_NOTE");
    int fd = note ? open(note, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;
    if (fd >= 0) {
        char line[160];
        int n = snprintf(line, sizeof line, "%d %s\n", (int)getpid(), name);
        if (n > 0 && write(fd, line, (size_t)n) < 0)
            n = 0; /* a note that cannot be written: the call blocks all the same */
        close(fd);
    }
    for (;;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

/*
 * A blocking point: counts the calls of `name` (a string literal, compared
 * by address: each function passes its own) and blocks the chosen one.
 * Nothing is counted while CUTRACE_FAKE_BLOCK is unset.
 */
static inline void FAKE_BLOCK_POINT(const char *name)
{
    enum { NAMES = 64 };
    static const char *names[NAMES];
    static unsigned long calls[NAMES];
    if (!getenv("CUTRACE_FAKE_BLOCK"))
        return;
    for (int i = 0; i < NAMES; i++) {
        const char *seen = __atomic_load_n(&names[i], __ATOMIC_ACQUIRE);
        if (!seen) {
            const char *expected = NULL;
            if (!__atomic_compare_exchange_n(&names[i], &expected, name, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE) &&
                strcmp(expected, name) != 0)
                continue;
            seen = name;
        }
        if (strcmp(seen, name) != 0)
            continue;
        if (fake_block_wanted(name, __atomic_add_fetch(&calls[i], 1, __ATOMIC_RELAXED)))
            fake_block_forever(name);
        return;
    }
}

#endif
