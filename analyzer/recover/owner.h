/*
 * owner.h - whether the process that wrote a trace file may still be alive,
 * judged from what the file says about it (pid, start times, boot id) and
 * the process table of this host.
 *
 * A ring's lock answers that question exactly, but the files a process makes
 * before its ring exists (the hidden .db.tmp, an unlocked .ring.tmp, a
 * published trace whose ring was never made) have no lock: recovery must
 * tell from the process table whether their owner is gone before it removes
 * or finishes them. The judgement errs one way only: OWNER_GONE is said only
 * on evidence (another boot, no such pid, a zombie, or a pid that now
 * belongs to a process started after the owner), everything else is
 * OWNER_MAY_LIVE, so a live process's files are never touched.
 */
#ifndef CUTRACE_ANALYZER_OWNER_H
#define CUTRACE_ANALYZER_OWNER_H

#include <stdbool.h>
#include <stdint.h>

struct owner {
    int64_t pid;            /* > 0 */
    uint64_t start_wall_ns; /* CLOCK_REALTIME when its tracer started */
    uint64_t start_mono_ns; /* CLOCK_MONOTONIC then; used only with boot_id */
    const char *boot_id;    /* NULL or "": not known (then only the wall clock is) */
};

enum owner_state {
    OWNER_GONE,     /* certainly not running any more */
    OWNER_MAY_LIVE, /* running, or nothing proves otherwise */
};

/*
 * Judges o, a process of this host. *why says, for OWNER_GONE, how we know
 * ("it ran before this host's last boot", "process N has exited", ...; a
 * static string).
 */
enum owner_state owner_judge(const struct owner *o, const char **why);

/* This host's name as the tracer records it (gethostname; "unknown" when
 * that fails). Static storage. */
const char *owner_host(void);

/*
 * The liveness test of a ring file open at fd: its process holds the ring's
 * lock from before the ring is formatted until it dies, and the kernel drops
 * it then. OWNER_RING_TAKEN: the process is gone, and the lock is now ours
 * until fd is closed, so no other cutrace works on the file meanwhile;
 * OWNER_RING_HELD: it is alive; OWNER_RING_FAILED: errno says why.
 */
enum owner_ring { OWNER_RING_TAKEN, OWNER_RING_HELD, OWNER_RING_FAILED };
enum owner_ring owner_ring_lock(int fd);

#endif
