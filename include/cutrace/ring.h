/*
 * ring.h - the bounded multi-producer, single-consumer record queue.
 *
 * Producers are the program's threads, inside intercepted calls: a push is
 * a compare-and-swap, a 248-byte copy and a release store, with no lock, no
 * allocation and no system call unless the ring is full. The single consumer is the writer
 * thread. The ring lives in caller-provided memory, which in production is a
 * MAP_SHARED file mapping so that a killed process leaves its unwritten
 * records behind; ct_ring_scan() finds them again.
 *
 * Beside the queue, a ring 7 file holds CT_RING_MARKS "entered" marks
 * (format.h, struct ct_mark): a call that can block takes one before it
 * calls the real function and frees it after its record is pushed, so a
 * process killed inside such a call leaves the call behind
 * (ct_ring_scan_marks). Taking a mark is one compare-and-swap on a line
 * the thread usually took last time, a 248-byte copy and a release store.
 */
#ifndef CUTRACE_RING_H
#define CUTRACE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cutrace/format.h"

struct ct_ring {
    struct ct_ring_header *hdr;
    struct ct_slot *slots;
    uint64_t mask;         /* capacity - 1 */
    struct ct_mark *marks; /* CT_RING_MARKS of them; NULL in a ring older than 7 */
};

/* Bytes needed for a ring of `capacity` slots (a power of two), marks included. */
size_t ct_ring_bytes(uint64_t capacity);
/* The same for a ring file of format `version` (rings before 7 have no marks). */
size_t ct_ring_file_bytes(uint32_t version, uint64_t capacity);

/* Who owns a ring: written into its header. */
struct ct_ring_owner {
    int64_t pid;
    uint64_t start_wall_ns;
    uint64_t start_mono_ns;
    const char *db_name; /* the sibling trace file */
    const char *boot_id;
};

/* Formats `mem` (ct_ring_bytes(capacity), zero-filled) as an empty ring. */
void ct_ring_format(void *mem, uint64_t capacity, const struct ct_ring_owner *owner);

/*
 * The same in two steps, so that a process's first call touches only a few
 * pages of a file-backed ring: ct_ring_format_start writes the header, the
 * first `ready` slots and the last one, and returns the ring valid for
 * recovery and for producers (a producer that reaches a slot not yet
 * formatted waits, as for a full ring); ct_ring_format_rest, on the writer
 * thread, formats the slots in between. Marks need nothing: free is 0.
 */
void ct_ring_format_start(void *mem, uint64_t capacity, const struct ct_ring_owner *owner,
                          uint64_t ready);
/* ct_ring_format_start's part written into a ring file (fd, zero-filled,
 * ct_ring_bytes(capacity) long) by pwrite; 0 or an errno. */
int ct_ring_format_file(int fd, uint64_t capacity, const struct ct_ring_owner *owner,
                        uint64_t ready);
/* The rest, through the mapping; fd, when >= 0, is the ring's file. */
void ct_ring_format_rest(struct ct_ring *ring, int fd, uint64_t ready);

/* Post-mortem notes in the header (see struct ct_ring_header). */
void ct_ring_note_end(struct ct_ring *ring, const char *end_state);
void ct_ring_note_writer_failure(struct ct_ring *ring, uint64_t last_seq, const char *why);

/*
 * Whether another process holds the POSIX write lock a live ring's owner
 * keeps on its file (ring 6 on): 1 held, 0 not, -1 with errno when it cannot
 * be asked. F_GETLK only asks (no write access needed) and never reports the
 * caller's own locks. Shared by recovery and by an exec'd image's fold.
 */
int ct_ring_lock_held(int fd);

/* Attaches to a formatted ring; false if the header is not one we can read. */
bool ct_ring_attach(struct ct_ring *ring, void *mem, size_t bytes);

/*
 * Appends a copy of *rec. If the ring is full the caller waits for the writer
 * (the program is slowed, never silently missing records); the time waited is
 * stored in the copy's wait_ns and returned. A waiting caller holds no
 * ticket, so a signal handler that interrupts it can push (and wait) too.
 * The record is dropped instead, counted in the header's `dropped`, and
 * UINT64_MAX returned, when waiting could never end: the writer is dead
 * (`writer_alive` is polled while waiting), or the caller is a signal
 * handler that interrupted a push of its own thread between claim and
 * publish, and the slot it needs is behind that unpublished one.
 */
uint64_t ct_ring_push(struct ct_ring *ring, const struct ct_record *rec,
                      bool (*writer_alive)(void));

/* Records lost outside the ring (a call made while there was no ring to
 * take it, one that found the writer dead): added to the header's count. */
void ct_ring_count_dropped(struct ct_ring *ring, uint64_t n);
/* The header's count of dropped records. */
uint64_t ct_ring_dropped(const struct ct_ring *ring);

/*
 * Consumer side. ct_ring_peek returns the next published record after the
 * consumer's cursor `*cursor` (advancing it) or NULL when the next slot is not
 * published yet. Records stay owned by the ring until ct_ring_release(upto),
 * which the writer calls only after they are durably committed.
 */
const struct ct_record *ct_ring_peek(struct ct_ring *ring, uint64_t *cursor);
void ct_ring_release(struct ct_ring *ring, uint64_t upto);

/* Tickets claimed so far (an upper bound on what a flush must wait for). */
uint64_t ct_ring_claimed(const struct ct_ring *ring);
/* First ticket not yet released (everything before it is committed). */
uint64_t ct_ring_committed(const struct ct_ring *ring);

/*
 * Entered marks. ct_ring_mark_enter copies *rec (seq != 0) into a free
 * mark and returns it, or NULL when the ring has no marks or every mark is
 * taken (counted in the header's `unmarked`). ct_ring_mark_leave frees it.
 * Both are async-signal-safe: no lock, and a handler that interrupts a
 * thread between claim and publish takes another mark.
 */
struct ct_mark *ct_ring_mark_enter(struct ct_ring *ring, const struct ct_record *rec);
void ct_ring_mark_leave(struct ct_mark *mark);
/* How many marks are taken now: calls in flight (0 for a ring without marks). */
unsigned ct_ring_marks_taken(const struct ct_ring *ring);
/* The writer's heartbeat (struct ct_ring_header.alive_mono_ns). */
void ct_ring_note_alive(struct ct_ring *ring, uint64_t mono_ns);

/*
 * Calls fn with a copy of every complete record of a taken mark, in mark
 * order; returns how many. A mark being taken or freed while it is read is
 * skipped, so this is safe on the ring of a running process too.
 */
size_t ct_ring_scan_marks(const struct ct_ring *ring, void (*fn)(const struct ct_record *, void *),
                          void *arg);

/*
 * Recovery: calls fn for every slot holding a complete record that was never
 * released, in slot order. Safe on the memory of a dead process.
 */
size_t ct_ring_scan(const struct ct_ring *ring, void (*fn)(const struct ct_record *, void *),
                    void *arg);

#endif
