/*
 * ring.c - bounded MPSC queue of trace records over caller-provided memory.
 *
 * The protocol is Vyukov's bounded queue specialised to one consumer. Each
 * slot carries a `turn`: slot i is free for ticket t when turn == t, holds the
 * published record of ticket t when turn == t + 1, and is handed back for
 * ticket t + capacity when the consumer stores turn = t + capacity. A producer
 * claims ticket t = head with a compare-and-swap on head, and only once it
 * has seen slot t free; it copies the record and publishes it with a release
 * store. Nothing here takes a lock, so a thread that forks, or is
 * interrupted by a signal, while inside a push cannot wedge other threads
 * behind a mutex.
 *
 * Claiming only a free slot (rather than taking a ticket with fetch-add and
 * then waiting for its slot) matters for signal handlers. A producer that
 * waits for space holds no ticket, so a handler that interrupts it and makes
 * calls of its own waits like any producer. The one window in which a thread
 * holds a ticket it has not published is the copy between claim and
 * publish; this thread's `t_window` says so. A handler running inside that
 * window must not wait for a slot that only frees once the writer passes the
 * interrupted ticket (it would wait for itself, for ever): that record is
 * dropped and counted in the header, never lost silently.
 *
 * Because slots are released only after the writer has committed them to
 * SQLite, a crash at any moment leaves every record that is not yet in the
 * database in a published slot, and the turn tells a complete record from a
 * half-written one (see ct_ring_scan).
 */
#include "cutrace/ring.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

#include "clock.h"

/*
 * The ticket this thread may hold unpublished, and in which ring: set just
 * before the claim is tried and restored after the publish, so a handler
 * that runs anywhere in between sees it (then or a little earlier than
 * needed: a handler that sees a ticket not yet claimed may drop a record it
 * could have waited for, never the reverse). Only this thread and its
 * signal handlers touch it, so signal fences order it. initial-exec, like
 * ct_self: one instruction, no __tls_get_addr inside an intercepted call.
 */
struct push_window {
    const struct ct_ring_header *ring; /* NULL: no push of this thread is in its window */
    uint64_t ticket;
};
static __thread struct push_window t_window __attribute__((tls_model("initial-exec")));

/* The ticket is written before the ring that makes it count, and the ring is
 * cleared first when the window closes: a handler never reads a ticket of
 * another window. */
static void window_open(const struct ct_ring *ring, uint64_t ticket)
{
    t_window.ticket = ticket;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_window.ring = ring->hdr;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static void window_restore(const struct push_window *outer)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_window.ring = outer->ring;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_window.ticket = outer->ticket;
}

size_t ct_ring_file_bytes(uint32_t version, uint64_t capacity)
{
    size_t marks = version >= 7 ? CT_RING_MARKS * sizeof(struct ct_mark) : 0;
    return CT_RING_HEADER_BYTES + (size_t)capacity * sizeof(struct ct_slot) + marks;
}

size_t ct_ring_bytes(uint64_t capacity)
{
    return ct_ring_file_bytes(CT_RING_VERSION, capacity);
}

/* Bounded copy that always terminates (the header is read by other programs). */
static void copy_text(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strnlen(src, cap - 1) : 0;
    memcpy(dst, src ? src : "", n);
    memset(dst + n, 0, cap - n);
}

static void write_header(struct ct_ring_header *hdr, uint64_t capacity,
                         const struct ct_ring_owner *owner)
{
    memcpy(hdr->magic, CT_RING_MAGIC, sizeof hdr->magic);
    hdr->version = CT_RING_VERSION;
    hdr->slot_size = sizeof(struct ct_slot);
    hdr->capacity = capacity;
    hdr->pid = owner->pid;
    hdr->start_wall_ns = owner->start_wall_ns;
    hdr->start_mono_ns = owner->start_mono_ns;
    copy_text(hdr->db_name, sizeof hdr->db_name, owner->db_name);
    copy_text(hdr->boot_id, sizeof hdr->boot_id, owner->boot_id);
    hdr->head = 0;
    hdr->tail = 0;
    hdr->dropped = 0;
}

void ct_ring_format_start(void *mem, uint64_t capacity, const struct ct_ring_owner *owner,
                          uint64_t ready)
{
    assert(capacity >= 2 && (capacity & (capacity - 1)) == 0);
    _Static_assert(CT_MARK_FREE == 0, "marks of a zero-filled ring must read free");
    write_header(mem, capacity, owner);
    struct ct_slot *slots = (struct ct_slot *)((char *)mem + CT_RING_HEADER_BYTES);
    if (ready > capacity)
        ready = capacity;
    for (uint64_t i = 0; i < ready; i++)
        slots[i].turn = i;
    /* A zero turn reads as the published ticket capacity - 1 in the last slot
     * only (scan: (turn - 1) & mask == index): that one is never left so. */
    slots[capacity - 1].turn = capacity - 1;
}

/* All of buf at off, or an errno. */
static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO;
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

/*
 * Through write(2), not the mapping: a write fault on a page of the file
 * that is not in the page cache yet costs milliseconds on ext4 (measured:
 * 9-19 ms for the first of them on a busy disk), a write of the same page
 * tens of microseconds; the mapping then finds the pages in the cache.
 */
int ct_ring_format_file(int fd, uint64_t capacity, const struct ct_ring_owner *owner,
                        uint64_t ready)
{
    assert(capacity >= 2 && (capacity & (capacity - 1)) == 0);
    if (ready > capacity - 1)
        ready = capacity - 1;
    const size_t slot = sizeof(struct ct_slot);
    size_t first = CT_RING_HEADER_BYTES + (size_t)ready * slot;
    size_t marks = CT_RING_MARKS * sizeof(struct ct_mark);
    size_t cap = first > marks + slot ? first : marks + slot;
    char *buf = calloc(1, cap);
    if (!buf)
        return ENOMEM;
    write_header((struct ct_ring_header *)buf, capacity, owner);
    struct ct_slot *slots = (struct ct_slot *)(buf + CT_RING_HEADER_BYTES);
    for (uint64_t i = 0; i < ready; i++)
        slots[i].turn = i;
    int rc = pwrite_all(fd, buf, first, 0);
    /* The last slot (see ct_ring_format_start) and the marks, free (zero). */
    memset(buf, 0, cap);
    ((struct ct_slot *)buf)->turn = capacity - 1;
    if (!rc)
        rc = pwrite_all(fd, buf, marks + slot,
                        (off_t)(CT_RING_HEADER_BYTES + (capacity - 1) * slot));
    free(buf);
    return rc;
}

void ct_ring_format_rest(struct ct_ring *ring, int fd, uint64_t ready)
{
    /* Zeros, as the file already holds: they bring a chunk's pages into the
     * page cache (fd >= 0) before its turns are set, so that no write of
     * them can land after a producer took one of its slots. Producers may
     * be waiting on these slots already: each turn is a release store. */
    static const struct ct_slot zeros[256];
    uint64_t last = ring->mask; /* the last slot is formatted already */
    for (uint64_t i = ready; i < last;) {
        uint64_t n = last - i < 256 ? last - i : 256;
        if (fd >= 0)
            (void)pwrite_all(fd, zeros, n * sizeof zeros[0],
                             (off_t)(CT_RING_HEADER_BYTES + i * sizeof zeros[0]));
        for (uint64_t end = i + n; i < end; i++)
            __atomic_store_n(&ring->slots[i].turn, i, __ATOMIC_RELEASE);
    }
}

void ct_ring_format(void *mem, uint64_t capacity, const struct ct_ring_owner *owner)
{
    ct_ring_format_start(mem, capacity, owner, capacity);
    struct ct_mark *marks =
        (struct ct_mark *)((char *)mem + CT_RING_HEADER_BYTES + capacity * sizeof(struct ct_slot));
    for (unsigned i = 0; i < CT_RING_MARKS; i++)
        marks[i].state = CT_MARK_FREE;
}

int ct_ring_lock_held(int fd)
{
    struct flock probe = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_GETLK, &probe) != 0)
        return -1;
    return probe.l_type != F_UNLCK;
}

bool ct_ring_attach(struct ct_ring *ring, void *mem, size_t bytes)
{
    struct ct_ring_header *hdr = mem;
    if (bytes < CT_RING_HEADER_BYTES || memcmp(hdr->magic, CT_RING_MAGIC, sizeof hdr->magic) != 0)
        return false;
    if (hdr->version < CT_RING_VERSION_OLDEST || hdr->version > CT_RING_VERSION ||
        hdr->slot_size != sizeof(struct ct_slot))
        return false;
    uint64_t cap = hdr->capacity;
    if (cap < 2 || (cap & (cap - 1)) != 0 ||
        cap > (bytes - CT_RING_HEADER_BYTES) / sizeof(struct ct_slot) ||
        bytes < ct_ring_file_bytes(hdr->version, cap))
        return false;
    ring->hdr = hdr;
    ring->slots = (struct ct_slot *)((char *)mem + CT_RING_HEADER_BYTES);
    ring->mask = cap - 1;
    ring->marks = hdr->version >= 7 ? (struct ct_mark *)(ring->slots + cap) : NULL;
    return true;
}

/* Back-off for a full ring: spin briefly, then yield, then sleep. */
static void wait_a_little(unsigned attempt)
{
    if (attempt < 64) {
        ct_cpu_relax();
    } else if (attempt < 128) {
        sched_yield();
    } else {
        struct timespec ts = {0, 50 * 1000};
        nanosleep(&ts, NULL);
    }
}

/*
 * True when a push that finds slot `head` taken must not wait: it would wait
 * for the writer to pass ticket head - capacity (the slot's holder), and
 * the writer stops at the ticket `outer` this thread holds unpublished.
 */
static bool waits_on_itself(const struct ct_ring *ring, const struct push_window *outer,
                            uint64_t head)
{
    return outer->ring == ring->hdr && head - outer->ticket > ring->mask;
}

/* Ticket `head` is this thread's: fills its slot, publishes it and closes
 * the window ct_ring_push opened for it (if it was the one that did). */
static inline uint64_t publish(struct ct_ring *ring, struct ct_slot *slot, uint64_t head,
                               const struct ct_record *rec, uint64_t waited,
                               const struct push_window *outer)
{
    /* No one else may touch the slot until we publish. */
    assert(__atomic_load_n(&slot->turn, __ATOMIC_RELAXED) == head);
    memcpy(&slot->rec, rec, sizeof *rec);
    slot->rec.wait_ns = waited;
    __atomic_store_n(&slot->turn, head + 1, __ATOMIC_RELEASE);
    if (outer->ring != ring->hdr)
        window_restore(outer);
    return waited;
}

/*
 * The claim when the first try did not succeed: another producer took the
 * ticket, or the ring is full. `head` is the ticket to try next. Out of
 * line, so that the usual push saves no registers for it.
 */
static __attribute__((noinline)) uint64_t
push_contended(struct ct_ring *ring, const struct ct_record *rec, bool (*writer_alive)(void),
               const struct push_window *outer, uint64_t head)
{
    uint64_t t0 = 0;
    bool waited_any = false;
    struct ct_slot *slot;
    for (unsigned attempt = 0;;) {
        slot = &ring->slots[head & ring->mask];
        uint64_t turn = __atomic_load_n(&slot->turn, __ATOMIC_ACQUIRE);
        int64_t ahead = (int64_t)(turn - head);
        if (ahead == 0) {
            /* Marked before the claim: a handler must never meet a claimed
             * ticket it cannot see. The outer window, if any, stays in force
             * (its ticket is the older one). */
            bool nested = outer->ring == ring->hdr;
            if (!nested)
                window_open(ring, head);
            if (__atomic_compare_exchange_n(&ring->hdr->head, &head, head + 1, true,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                break;
            if (!nested)
                window_restore(outer);
            continue; /* head now holds the current value */
        }
        if (ahead > 0) {
            /* Another producer claimed this ticket first. */
            head = __atomic_load_n(&ring->hdr->head, __ATOMIC_RELAXED);
            continue;
        }
        /* Full: the slot still holds ticket head - capacity. */
        if (waits_on_itself(ring, outer, head) || !writer_alive()) {
            __atomic_fetch_add(&ring->hdr->dropped, 1, __ATOMIC_RELAXED);
            return UINT64_MAX;
        }
        if (!waited_any) {
            t0 = ct_now_ns();
            waited_any = true;
        }
        wait_a_little(attempt++);
        head = __atomic_load_n(&ring->hdr->head, __ATOMIC_RELAXED);
    }
    return publish(ring, slot, head, rec, waited_any ? ct_now_ns() - t0 : 0, outer);
}

uint64_t ct_ring_push(struct ct_ring *ring, const struct ct_record *rec, bool (*writer_alive)(void))
{
    const struct push_window outer = t_window;
    uint64_t head = __atomic_load_n(&ring->hdr->head, __ATOMIC_RELAXED);
    struct ct_slot *slot = &ring->slots[head & ring->mask];
    /* The usual case, the first try: the slot is free and the claim
     * succeeds. The window is opened before the claim, as in the loop. */
    if (__builtin_expect(__atomic_load_n(&slot->turn, __ATOMIC_ACQUIRE) == head, 1)) {
        bool nested = outer.ring == ring->hdr;
        if (!nested)
            window_open(ring, head);
        if (__atomic_compare_exchange_n(&ring->hdr->head, &head, head + 1, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return publish(ring, slot, head, rec, 0, &outer);
        if (!nested)
            window_restore(&outer);
    }
    return push_contended(ring, rec, writer_alive, &outer, head);
}

void ct_ring_count_dropped(struct ct_ring *ring, uint64_t n)
{
    __atomic_fetch_add(&ring->hdr->dropped, n, __ATOMIC_RELAXED);
}

uint64_t ct_ring_dropped(const struct ct_ring *ring)
{
    return __atomic_load_n(&ring->hdr->dropped, __ATOMIC_RELAXED);
}

const struct ct_record *ct_ring_peek(struct ct_ring *ring, uint64_t *cursor)
{
    struct ct_slot *slot = &ring->slots[*cursor & ring->mask];
    if (__atomic_load_n(&slot->turn, __ATOMIC_ACQUIRE) != *cursor + 1)
        return NULL;
    (*cursor)++;
    return &slot->rec;
}

void ct_ring_release(struct ct_ring *ring, uint64_t upto)
{
    uint64_t cap = ring->mask + 1;
    uint64_t tail = __atomic_load_n(&ring->hdr->tail, __ATOMIC_RELAXED);
    assert(upto >= tail && upto - tail <= cap);
    for (uint64_t t = tail; t < upto; t++) {
        struct ct_slot *slot = &ring->slots[t & ring->mask];
        assert(__atomic_load_n(&slot->turn, __ATOMIC_RELAXED) == t + 1);
        __atomic_store_n(&slot->turn, t + cap, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&ring->hdr->tail, upto, __ATOMIC_RELEASE);
}

void ct_ring_note_end(struct ct_ring *ring, const char *end_state)
{
    copy_text(ring->hdr->end_state, sizeof ring->hdr->end_state, end_state);
}

void ct_ring_note_writer_failure(struct ct_ring *ring, uint64_t last_seq, const char *why)
{
    copy_text(ring->hdr->writer_error, sizeof ring->hdr->writer_error, why);
    ring->hdr->writer_stopped_after = last_seq;
}

uint64_t ct_ring_claimed(const struct ct_ring *ring)
{
    return __atomic_load_n(&ring->hdr->head, __ATOMIC_ACQUIRE);
}

uint64_t ct_ring_committed(const struct ct_ring *ring)
{
    return __atomic_load_n(&ring->hdr->tail, __ATOMIC_ACQUIRE);
}

size_t ct_ring_scan(const struct ct_ring *ring, void (*fn)(const struct ct_record *, void *),
                    void *arg)
{
    size_t found = 0;
    for (uint64_t i = 0; i <= ring->mask; i++) {
        const struct ct_slot *slot = &ring->slots[i];
        uint64_t turn = __atomic_load_n(&slot->turn, __ATOMIC_ACQUIRE);
        /* Published and unreleased: turn == ticket + 1 with ticket == i (mod capacity). */
        if (((turn - 1) & ring->mask) != i)
            continue;
        fn(&slot->rec, arg);
        found++;
    }
    return found;
}

/*
 * The mark this thread took last: a thread's blocking calls find their mark
 * free again and its cache line already theirs. A hint only, so a handler
 * that changes it under the thread costs a longer search, nothing more.
 */
static __thread unsigned t_mark_hint __attribute__((tls_model("initial-exec")));

struct ct_mark *ct_ring_mark_enter(struct ct_ring *ring, const struct ct_record *rec)
{
    assert(rec->seq != 0);
    if (!ring->marks)
        return NULL;
    unsigned first = t_mark_hint;
    for (unsigned i = 0; i < CT_RING_MARKS; i++) {
        unsigned at = (first + i) % CT_RING_MARKS;
        struct ct_mark *mark = &ring->marks[at];
        uint64_t expected = CT_MARK_FREE;
        if (__atomic_load_n(&mark->state, __ATOMIC_RELAXED) != CT_MARK_FREE ||
            !__atomic_compare_exchange_n(&mark->state, &expected, CT_MARK_WRITING, false,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;
        t_mark_hint = at;
        memcpy(&mark->rec, rec, sizeof *rec);
        __atomic_store_n(&mark->state, CT_MARK_STATE(rec->seq), __ATOMIC_RELEASE);
        return mark;
    }
    __atomic_fetch_add(&ring->hdr->unmarked, 1, __ATOMIC_RELAXED);
    return NULL;
}

void ct_ring_mark_leave(struct ct_mark *mark)
{
    __atomic_store_n(&mark->state, CT_MARK_FREE, __ATOMIC_RELEASE);
}

unsigned ct_ring_marks_taken(const struct ct_ring *ring)
{
    unsigned taken = 0;
    for (unsigned i = 0; ring->marks && i < CT_RING_MARKS; i++)
        taken += __atomic_load_n(&ring->marks[i].state, __ATOMIC_ACQUIRE) != CT_MARK_FREE;
    return taken;
}

void ct_ring_note_alive(struct ct_ring *ring, uint64_t mono_ns)
{
    __atomic_store_n(&ring->hdr->alive_mono_ns, mono_ns, __ATOMIC_RELAXED);
}

size_t ct_ring_scan_marks(const struct ct_ring *ring, void (*fn)(const struct ct_record *, void *),
                          void *arg)
{
    size_t found = 0;
    for (unsigned i = 0; ring->marks && i < CT_RING_MARKS; i++) {
        const struct ct_mark *mark = &ring->marks[i];
        uint64_t before = __atomic_load_n(&mark->state, __ATOMIC_ACQUIRE);
        if (before == CT_MARK_FREE || (before & 1) != 0)
            continue;
        struct ct_record copy;
        memcpy(&copy, &mark->rec, sizeof copy);
        /* The copy's loads come before the second look at the state (a
         * seqlock's read side). ThreadSanitizer has no fences: its builds
         * (unit tests only) make that look sequentially consistent instead. */
#if defined(__SANITIZE_THREAD__)
        uint64_t after = __atomic_load_n(&mark->state, __ATOMIC_SEQ_CST);
#else
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        uint64_t after = __atomic_load_n(&mark->state, __ATOMIC_RELAXED);
#endif
        if (after != before || CT_MARK_STATE(copy.seq) != before)
            continue;
        fn(&copy, arg);
        found++;
    }
    return found;
}
