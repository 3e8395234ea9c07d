/*
 * unwind.h - the native unwinder, behind one small interface.
 *
 * libunwind (libunwind.so.8) is opened at load time with RTLD_LOCAL, never
 * linked: linked, it would enter the program's global symbol scope, where
 * its _Unwind_* functions would take over C++ exception handling from
 * libgcc_s in every library the program dlopens later (PyTorch's). Its
 * per-thread caches (UNW_CACHE_PER_THREAD) make a repeated stack a walk of
 * cached frames with no lock. A program that loaded libunwind itself shares
 * our copy (one soname, one instance): its caching policy is then left as
 * the program set it. libunwind's memory-validation pipe is kept off the
 * program's descriptors (unwpipe.h); a libunwind set up before cutrace
 * loaded, or one left without a pipe, is not used. Without libunwind the C
 * library's backtrace() (libgcc's unwinder) is used, slower but lock-free
 * on glibc 2.35+.
 */
#ifndef CUTRACE_UNWIND_H
#define CUTRACE_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

/* Loads the unwinder (the library's constructor calls it once). */
bool ct_unwind_init(void);

/* "libunwind", "backtrace" or "none". */
const char *ct_unwind_name(void);

/*
 * Return addresses of the calling thread, innermost first, the caller's own
 * frame included; at most max (<= 160). Returns how many, 0 without an
 * unwinder or when this unwind failed (see ct_unwind_fallback). No lock in
 * the steady state; the first call of a thread sets up its caches (one
 * mmap).
 */
int ct_unwind(uint64_t *ips, int max);

/*
 * The same through backtrace(), for an unwind of ct_unwind's that found
 * nothing: libunwind finds no frame at all when it could not validate an
 * address (unwpipe.h), as when it has just lost its pipe. 0 when ct_unwind
 * was not libunwind's.
 */
int ct_unwind_fallback(uint64_t *ips, int max);

#endif
