/*
 * unwpipe.h - libunwind's memory-validation pipe, held by cutrace on
 * descriptors the program does not use, and checked before each (re)use.
 *
 * libunwind (1.6.x, x86_64 Ginit.c) validates a stack address it is unsure
 * of (a frame without unwind information, the end of a stack) by writing one
 * byte of it into a pipe it keeps in a static array, opened at its set-up on
 * the lowest free descriptors; before each write it reads a byte back, and
 * when that read fails it closes both descriptors and opens the pipe again.
 * A program that closes the descriptors it inherited (as daemons do) and
 * opens its own files gets those numbers: libunwind then reads from, closes
 * and writes to the program's files.
 *
 * So the interposers in hooks/hook_fds.c:
 *  - pipe()/pipe2(): learn the array's address at libunwind's set-up (made
 *    by cutrace's constructor) and from then on answer libunwind's every
 *    (re)open with cutrace's own pipe: on the two highest descriptors below
 *    min(RLIMIT_NOFILE, 4096), close-on-exec, non-blocking, checked (fstat:
 *    the same pipe inode) each time it is handed out, remade when the
 *    program closed it;
 *  - close(), close_range(), closefrom(), dup2(), dup3(): when the program is
 *    about to close or replace a number the array holds, the array is set to
 *    {-1, -1} first, so that libunwind's next validation fails its read at
 *    once (no close, no write) and asks for the pipe again.
 * Nothing is added to a capture: in the steady state libunwind validates
 * nothing (its cached frames need none, and validated pages are cached), and
 * the array keeps a pipe that is known to be ours.
 *
 * When no such descriptors exist (RLIMIT_NOFILE below 64, or the top ones
 * are the program's) libunwind gets no pipe. libunwind 1.6.2 then returns
 * no frame at all from an unwind that needed a validation (and would try
 * again, system calls included, at every capture), so the unwinder is not
 * used without one (ct_unwpipe_ready).
 */
#ifndef CUTRACE_UNWPIPE_H
#define CUTRACE_UNWPIPE_H

#include <stdbool.h>

/*
 * Between these two calls (made by the thread that sets libunwind up), a
 * pipe()/pipe2() into the data of the object loaded at lib_base is
 * libunwind's set-up, and its array is adopted. unwatch tells whether it
 * was: when not (libunwind was set up before, or opens no pipe that way),
 * cutrace cannot keep the program's descriptors safe from it.
 */
void ct_unwpipe_watch(const void *lib_base);
bool ct_unwpipe_unwatch(void);

/* For pipe()/pipe2(): whether fds is libunwind's array... */
bool ct_unwpipe_claims(const int *fds);
/* ...and, if so, the pipe for it: 0, or -1 with errno set (nothing opened). */
int ct_unwpipe_give(int fds[2]);

/*
 * Whether libunwind may be used: its array was adopted and the last
 * hand-out gave it a pipe. Once false, it stays so until a hand-out
 * succeeds, which only an unwind through libunwind can ask for: its users
 * stop using it for good. Two loads.
 */
bool ct_unwpipe_ready(void);

/*
 * For the close family: the program is about to close or replace the
 * descriptors from lo to hi (inclusive). No system call.
 */
void ct_unwpipe_closing(unsigned lo, unsigned hi);

#endif
