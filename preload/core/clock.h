/*
 * clock.h - the two clocks a trace uses, and a CPU spin hint.
 *
 * Event times are CLOCK_MONOTONIC (vDSO, no system call), which all processes
 * of one host share, so traces of the ranks of one server line up without
 * any clock exchange. The wall clock is read once per process, next to a
 * monotonic reading, only to place the process in calendar time.
 */
#ifndef CUTRACE_CLOCK_H
#define CUTRACE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t ct_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ct_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void ct_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
