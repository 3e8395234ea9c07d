/*
 * warn.c - once-per-problem warnings on stderr.
 */
#include "warn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static unsigned reported; /* bit per enum ct_problem */

void ct_warn_once(enum ct_problem problem, const char *fmt, ...)
{
    unsigned bit = 1u << problem;
    if (__atomic_fetch_or(&reported, bit, __ATOMIC_RELAXED) & bit)
        return;
    int saved_errno = errno;
    char line[512] = "cutrace: ";
    size_t used = 9;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + used, sizeof line - used - 1, fmt, ap);
    va_end(ap);
    if (n > 0)
        used += (size_t)n < sizeof line - used - 1 ? (size_t)n : sizeof line - used - 2;
    line[used++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, used);
    (void)ignored;
    errno = saved_errno;
}

void ct_warn_reset(void)
{
    __atomic_store_n(&reported, 0, __ATOMIC_RELAXED);
}
