/*
 * fake_state.h - memory accounting shared by every process that uses the fake
 * libcuda.so.1 with the same state file.
 *
 * A real GPU is one pool of memory that every process on the machine draws
 * from, so cuMemGetInfo in one rank sees what the other ranks allocated. The
 * fake reproduces that with a small file mapped MAP_SHARED by all of them:
 *
 *   - one slot per live process, keyed by (pid, start time), holding the bytes
 *     that process has charged to each physical device;
 *   - per-device totals, always equal to the sum over the live slots;
 *   - a table of IPC exports, so another process can open a handle.
 *
 * Everything in the file is read and written under one process-shared, robust
 * pthread mutex that lives in the file itself. Robust, because tests SIGKILL
 * processes: the next locker gets EOWNERDEAD and recomputes the totals from the
 * slots, which every update keeps correct on its own. A slot whose owner is
 * dead (kill(pid, 0) fails with ESRCH, /proc/pid/stat is gone or shows a
 * zombie, or the start time differs because the pid was reused) is released by
 * whichever process notices it first.
 *
 * These functions are internal to libcuda.so.1 (hidden visibility) and are
 * always called with the driver's own process mutex held, so they need no
 * locking against other threads of the same process beyond the shared mutex.
 */
#ifndef CUTRACE_FAKE_STATE_H
#define CUTRACE_FAKE_STATE_H

#include <stddef.h>
#include <stdint.h>

#define FS_HIDDEN __attribute__((visibility("hidden")))

/* Fixed sizes keep the file layout identical in every process. */
#define FS_MAX_DEVICES 64
#define FS_MAX_PROCS   512
#define FS_MAX_EXPORTS 4096

/* What another process needs to know to open an IPC handle. */
struct fs_export_info {
    int32_t pid;       /* exporting process */
    int32_t dev;       /* physical device index */
    uint64_t start;    /* exporter's start time (clock ticks since boot) */
    uint64_t alloc_id; /* exporter-local allocation id */
    uint64_t size;     /* bytes */
};

/*
 * Maps the state file at path, creating it (and missing parent directories,
 * mode 0700; the file 0600) when needed. Returns 0 or a negative errno, with a
 * human-readable reason in err.
 */
FS_HIDDEN int fs_attach(const char *path, char *err, size_t errlen);

/* True once fs_attach succeeded in this process (or its parent, before fork). */
FS_HIDDEN int fs_attached(void);

/*
 * Claims the slot of the calling process. Called lazily by the functions
 * below; returns 0 or -ENOSPC when every slot belongs to a live process.
 */
FS_HIDDEN int fs_join(void);

/* In a forked child: forget the parent's slot without touching it. */
FS_HIDDEN void fs_forget_after_fork(void);

/* Releases this process's slot and its exports (normal exit). */
FS_HIDDEN void fs_leave(void);

/*
 * Charges bytes to physical device dev for this process, unless that would
 * take the device past total: then dead processes are reaped and the check
 * repeated. Returns 0, -ENOMEM (nothing changed) or -ENOSPC (no slot).
 */
FS_HIDDEN int fs_charge(int dev, uint64_t bytes, uint64_t total);

/* Returns bytes previously charged by this process. */
FS_HIDDEN void fs_uncharge(int dev, uint64_t bytes);

/* Bytes in use on physical device dev by all live processes (reaps first). */
FS_HIDDEN uint64_t fs_used(int dev);

/* Registers an export of this process. 0 or -ENOSPC (table full). */
FS_HIDDEN int fs_export_add(const struct fs_export_info *e);

/* Unregisters an export of this process (no-op when absent). */
FS_HIDDEN void fs_export_remove(uint64_t alloc_id);

/*
 * Finds a live export. Returns 0 and fills out, or -ENOENT when unknown or its
 * exporter is dead (the export is then released).
 */
FS_HIDDEN int fs_export_lookup(int32_t pid, uint64_t start, uint64_t alloc_id,
                               struct fs_export_info *out);

/* The identity of the calling process, as recorded in its slot. */
FS_HIDDEN void fs_self(int32_t *pid, uint64_t *start);

/*
 * Start time of pid from /proc/pid/stat (field 22), or 0 when unreadable;
 * state receives the state letter ('R', 'S', 'Z', ...) when non-NULL.
 */
FS_HIDDEN uint64_t fs_proc_start_time(int32_t pid, char *state);

#endif
