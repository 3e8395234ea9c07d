/*
 * test_ring.c - the lock-free record ring: order, wrap-around, back-pressure,
 * recovery scan, many producers at once, and a signal handler that pushes
 * while its own thread is inside a push.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cutrace/ring.h"
#include "suites.h"
#include "testutil.h"

static bool alive(void)
{
    return true;
}

static bool dead(void)
{
    return false;
}

static void *make_ring(struct ct_ring *ring, uint64_t capacity)
{
    size_t bytes = ct_ring_bytes(capacity);
    void *mem = calloc(1, bytes);
    ck_assert_ptr_nonnull(mem);
    struct ct_ring_owner owner = {42, 1, 2, "x.db", "boot"};
    ct_ring_format(mem, capacity, &owner);
    ck_assert(ct_ring_attach(ring, mem, bytes));
    return mem;
}

static struct ct_record rec_with(uint64_t seq)
{
    struct ct_record r;
    memset(&r, 0, sizeof r);
    r.seq = seq;
    r.size = seq * 10;
    return r;
}

START_TEST(test_fifo_and_wraparound)
{
    struct ct_ring ring;
    void *mem = make_ring(&ring, 8);
    uint64_t cursor = 0;
    uint64_t next = 1;
    for (int round = 0; round < 50; round++) {
        int batch = 1 + round % 8;
        for (int i = 0; i < batch; i++) {
            struct ct_record r = rec_with(next + (uint64_t)i);
            ck_assert_uint_eq(ct_ring_push(&ring, &r, alive), 0);
        }
        for (int i = 0; i < batch; i++) {
            const struct ct_record *got = ct_ring_peek(&ring, &cursor);
            ck_assert_ptr_nonnull(got);
            ck_assert_uint_eq(got->seq, next);
            ck_assert_uint_eq(got->size, next * 10);
            next++;
        }
        ck_assert_ptr_null(ct_ring_peek(&ring, &cursor));
        ct_ring_release(&ring, cursor);
        ck_assert_uint_eq(ct_ring_committed(&ring), cursor);
    }
    ck_assert_uint_eq(ct_ring_claimed(&ring), next - 1);
    free(mem);
}
END_TEST

static void collect(const struct ct_record *r, void *arg)
{
    uint64_t *seen = arg;
    seen[r->seq] = 1;
}

START_TEST(test_scan_finds_exactly_unreleased_complete_records)
{
    struct ct_ring ring;
    void *mem = make_ring(&ring, 16);
    for (uint64_t s = 1; s <= 12; s++) {
        struct ct_record r = rec_with(s);
        ct_ring_push(&ring, &r, alive);
    }
    /* The writer consumed and committed the first 5. */
    uint64_t cursor = 0;
    for (int i = 0; i < 5; i++)
        ck_assert_ptr_nonnull(ct_ring_peek(&ring, &cursor));
    ct_ring_release(&ring, cursor);
    /* A producer claimed ticket 12 and died half-way through its copy. */
    uint64_t ticket = __atomic_fetch_add(&ring.hdr->head, 1, __ATOMIC_RELAXED);
    ring.slots[ticket & ring.mask].rec.seq = 99;

    uint64_t seen[100] = {0};
    size_t n = ct_ring_scan(&ring, collect, seen);
    ck_assert_uint_eq(n, 7);
    for (uint64_t s = 1; s <= 12; s++)
        ck_assert_uint_eq(seen[s], s > 5);
    ck_assert_uint_eq(seen[99], 0);
    free(mem);
}
END_TEST

struct pusher {
    struct ct_ring *ring;
    uint64_t seq;
    uint64_t waited;
};

static void *push_one(void *arg)
{
    struct pusher *p = arg;
    struct ct_record r = rec_with(p->seq);
    p->waited = ct_ring_push(p->ring, &r, alive);
    return NULL;
}

/* Fills a ring of 4 (records 1..4), then pushes record 5 in thread *t,
 * which has been waiting for 30 ms on return. */
static void *start_waiting_push(struct ct_ring *ring, struct pusher *p, pthread_t *t)
{
    void *mem = make_ring(ring, 4);
    for (uint64_t s = 1; s <= 4; s++) {
        struct ct_record r = rec_with(s);
        ct_ring_push(ring, &r, alive);
    }
    *p = (struct pusher){ring, 5, 0};
    pthread_create(t, NULL, push_one, p);
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return mem;
}

START_TEST(test_full_ring_makes_producer_wait_and_records_wait)
{
    struct ct_ring ring;
    struct pusher p;
    pthread_t t;
    void *mem = start_waiting_push(&ring, &p, &t);
    uint64_t cursor = 0;
    ck_assert_ptr_nonnull(ct_ring_peek(&ring, &cursor));
    /* Not yet released: the fifth record must still be waiting. */
    ck_assert_uint_eq(__atomic_load_n(&p.waited, __ATOMIC_RELAXED), 0);
    ct_ring_release(&ring, cursor);
    pthread_join(t, NULL);
    ck_assert_uint_ge(p.waited, 20 * 1000 * 1000);
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(ct_ring_peek(&ring, &cursor));
    const struct ct_record *fifth = ct_ring_peek(&ring, &cursor);
    ck_assert_ptr_nonnull(fifth);
    ck_assert_uint_eq(fifth->seq, 5);
    ck_assert_uint_eq(fifth->wait_ns, p.waited);
    free(mem);
}
END_TEST

START_TEST(test_full_ring_with_dead_writer_drops_instead_of_hanging)
{
    struct ct_ring ring;
    void *mem = make_ring(&ring, 2);
    struct ct_record r = rec_with(1);
    ct_ring_push(&ring, &r, alive);
    ct_ring_push(&ring, &r, alive);
    ck_assert_uint_eq(ct_ring_push(&ring, &r, dead), UINT64_MAX);
    /* Counted, and no ticket left claimed that no one will publish. */
    ck_assert_uint_eq(ct_ring_dropped(&ring), 1);
    ck_assert_uint_eq(ct_ring_claimed(&ring), 2);
    free(mem);
}
END_TEST

/* A producer waiting for space has claimed nothing: a signal handler that
 * interrupts it may push (and wait) too, and a flush does not wait for it. */
START_TEST(test_waiting_producer_holds_no_ticket)
{
    struct ct_ring ring;
    struct pusher p;
    pthread_t t;
    void *mem = start_waiting_push(&ring, &p, &t);
    ck_assert_uint_eq(ct_ring_claimed(&ring), 4);
    uint64_t cursor = 0;
    ck_assert_ptr_nonnull(ct_ring_peek(&ring, &cursor));
    ct_ring_release(&ring, cursor);
    pthread_join(t, NULL);
    ck_assert_uint_eq(ct_ring_claimed(&ring), 5);
    ck_assert_uint_ge(p.waited, 20 * 1000 * 1000);
    ck_assert_uint_eq(ct_ring_dropped(&ring), 0);
    free(mem);
}
END_TEST

/*
 * A signal handler that runs while its thread is between claim and publish.
 * The slots' page is made read-only, so the producer's copy into its claimed
 * slot faults: the SIGSEGV handler then runs exactly inside that window. It
 * makes the page writable again (the copy resumes when it returns) and
 * pushes HANDLER_PUSHES records, as a handler making CUDA calls would.
 */
enum { WINDOW_CAP = 16, HANDLER_PUSHES = WINDOW_CAP };

static struct {
    struct ct_ring ring;
    void *slots_page;
    size_t page_bytes;
    uint64_t results[HANDLER_PUSHES];
    int unprotected; /* atomic: the handler ran, the consumer may start */
    int stop;        /* atomic */
} W;

static void push_inside_window(int sig)
{
    (void)sig;
    mprotect(W.slots_page, W.page_bytes, PROT_READ | PROT_WRITE);
    __atomic_store_n(&W.unprotected, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < HANDLER_PUSHES; i++) {
        struct ct_record r = rec_with(100 + (uint64_t)i);
        W.results[i] = ct_ring_push(&W.ring, &r, alive);
    }
}

/* The writer: drains and releases all that is published, in ticket order. */
static void *consume_in_order(void *arg)
{
    uint64_t *seqs = arg;
    while (!__atomic_load_n(&W.unprotected, __ATOMIC_ACQUIRE))
        sched_yield();
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL); /* the handler's first push finds the ring full */
    uint64_t cursor = 0;
    for (;;) {
        bool stopping = __atomic_load_n(&W.stop, __ATOMIC_ACQUIRE);
        const struct ct_record *r;
        while ((r = ct_ring_peek(&W.ring, &cursor)) != NULL)
            seqs[cursor - 1] = r->seq;
        ct_ring_release(&W.ring, cursor);
        if (stopping)
            break;
        sched_yield();
    }
    return NULL;
}

START_TEST(test_handler_inside_a_push_waits_for_space_but_never_for_itself)
{
    W.page_bytes = (size_t)sysconf(_SC_PAGESIZE);
    ck_assert_uint_eq(W.page_bytes, WINDOW_CAP * sizeof(struct ct_slot));
    size_t bytes = ct_ring_bytes(WINDOW_CAP);
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(mem, MAP_FAILED);
    struct ct_ring_owner owner = {42, 1, 2, "x.db", "boot"};
    ct_ring_format(mem, WINDOW_CAP, &owner);
    ck_assert(ct_ring_attach(&W.ring, mem, bytes));
    W.slots_page = W.ring.slots;

    /* Tickets 0..14 published, not yet released: one slot left. */
    for (uint64_t s = 1; s < WINDOW_CAP; s++) {
        struct ct_record r = rec_with(s);
        ck_assert_uint_eq(ct_ring_push(&W.ring, &r, alive), 0);
    }
    uint64_t seqs[2 * WINDOW_CAP] = {0};
    pthread_t consumer;
    pthread_create(&consumer, NULL, consume_in_order, seqs);

    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = push_inside_window;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old);
    ck_assert_int_eq(mprotect(W.slots_page, W.page_bytes, PROT_READ), 0);
    struct ct_record mine = rec_with(WINDOW_CAP); /* ticket 15 */
    uint64_t waited = ct_ring_push(&W.ring, &mine, alive);
    sigaction(SIGSEGV, &old, NULL);
    ck_assert_uint_eq(waited, 0);
    ck_assert(__atomic_load_n(&W.unprotected, __ATOMIC_ACQUIRE));

    /* Tickets 16..30 needed slots the writer could free: they waited. */
    ck_assert_uint_gt(W.results[0], 0);
    for (int i = 0; i < HANDLER_PUSHES - 1; i++)
        ck_assert_uint_ne(W.results[i], UINT64_MAX);
    /* Ticket 31's slot is behind ticket 15, which the handler's own thread
     * holds: dropped and counted instead of waiting for ever. */
    ck_assert_uint_eq(W.results[HANDLER_PUSHES - 1], UINT64_MAX);
    ck_assert_uint_eq(ct_ring_dropped(&W.ring), 1);
    ck_assert_uint_eq(ct_ring_claimed(&W.ring), 2 * WINDOW_CAP - 1);

    __atomic_store_n(&W.stop, 1, __ATOMIC_RELEASE);
    pthread_join(consumer, NULL);
    ck_assert_uint_eq(ct_ring_committed(&W.ring), 2 * WINDOW_CAP - 1);
    for (uint64_t t = 0; t < WINDOW_CAP; t++)
        ck_assert_uint_eq(seqs[t], t + 1);
    for (uint64_t t = WINDOW_CAP; t < 2 * WINDOW_CAP - 1; t++)
        ck_assert_uint_eq(seqs[t], 100 + (t - WINDOW_CAP));
    munmap(mem, bytes);
}
END_TEST

START_TEST(test_attach_rejects_foreign_memory)
{
    struct ct_ring ring;
    size_t bytes = ct_ring_bytes(8);
    char *mem = calloc(1, bytes);
    ck_assert(!ct_ring_attach(&ring, mem, bytes));
    struct ct_ring_owner owner = {1, 1, 1, "a.db", "boot"};
    ct_ring_format(mem, 8, &owner);
    ck_assert(ct_ring_attach(&ring, mem, bytes));
    ck_assert(!ct_ring_attach(&ring, mem, bytes - 1));
    ((struct ct_ring_header *)mem)->version = CT_RING_VERSION + 1;
    ck_assert(!ct_ring_attach(&ring, mem, bytes));
    ((struct ct_ring_header *)mem)->version = CT_RING_VERSION;
    ((struct ct_ring_header *)mem)->capacity = 6;
    ck_assert(!ct_ring_attach(&ring, mem, bytes));
    free(mem);
}
END_TEST

static void count_mark(const struct ct_record *rec, void *arg)
{
    uint64_t *seqs = arg;
    seqs[seqs[0]++ + 1] = rec->seq;
}

/* Entered marks: taken, found by a scan (never a mark half written or
 * freed), freed, counted when there is none left; a ring 6 has none. */
START_TEST(test_entered_marks)
{
    struct ct_ring ring;
    void *mem = make_ring(&ring, 8);
    ck_assert_uint_eq(ct_ring_marks_taken(&ring), 0);
    struct ct_record a = rec_with(7), b = rec_with(9);
    struct ct_mark *ma = ct_ring_mark_enter(&ring, &a);
    struct ct_mark *mb = ct_ring_mark_enter(&ring, &b);
    ck_assert_ptr_nonnull(ma);
    ck_assert_ptr_nonnull(mb);
    ck_assert_ptr_ne(ma, mb);
    ck_assert_uint_eq(ct_ring_marks_taken(&ring), 2);
    uint64_t seqs[CT_RING_MARKS + 1] = {0};
    ck_assert_uint_eq(ct_ring_scan_marks(&ring, count_mark, seqs), 2);
    ck_assert(seqs[0] == 2 && seqs[1] + seqs[2] == 16);
    /* A mark being written (or whose state and record disagree) is skipped. */
    __atomic_store_n(&mb->state, CT_MARK_WRITING, __ATOMIC_RELEASE);
    memset(seqs, 0, sizeof seqs);
    ck_assert_uint_eq(ct_ring_scan_marks(&ring, count_mark, seqs), 1);
    ck_assert_uint_eq(seqs[1], 7);
    __atomic_store_n(&mb->state, CT_MARK_STATE(10), __ATOMIC_RELEASE);
    ck_assert_uint_eq(ct_ring_scan_marks(&ring, count_mark, seqs), 1);
    ct_ring_mark_leave(ma);
    ct_ring_mark_leave(mb);
    ck_assert_uint_eq(ct_ring_marks_taken(&ring), 0);
    ck_assert_uint_eq(ct_ring_scan_marks(&ring, count_mark, seqs), 0);
    /* Every mark taken: the next blocking call gets none, and is counted. */
    struct ct_mark *all[CT_RING_MARKS];
    for (unsigned i = 0; i < CT_RING_MARKS; i++) {
        struct ct_record r = rec_with(100 + i);
        all[i] = ct_ring_mark_enter(&ring, &r);
        ck_assert_ptr_nonnull(all[i]);
    }
    ck_assert_ptr_null(ct_ring_mark_enter(&ring, &a));
    ck_assert_uint_eq(((struct ct_ring_header *)mem)->unmarked, 1);
    for (unsigned i = 0; i < CT_RING_MARKS; i++)
        ct_ring_mark_leave(all[i]);
    /* A ring 6 (no marks after its slots) attaches with none. */
    ((struct ct_ring_header *)mem)->version = 6;
    ck_assert(ct_ring_attach(&ring, mem, ct_ring_file_bytes(6, 8)));
    ck_assert_ptr_null(ring.marks);
    ck_assert_ptr_null(ct_ring_mark_enter(&ring, &a));
    ck_assert_uint_eq(ct_ring_scan_marks(&ring, count_mark, seqs), 0);
    free(mem);
}
END_TEST

enum { PRODUCERS = 32, PER_PRODUCER = 20000 };

struct producer {
    struct ct_ring *ring;
    uint64_t *seq_counter;
    int id;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    for (uint64_t i = 0; i < PER_PRODUCER; i++) {
        struct ct_record r;
        memset(&r, 0, sizeof r);
        r.seq = __atomic_add_fetch(p->seq_counter, 1, __ATOMIC_RELAXED);
        r.tid = p->id;
        r.size = i;
        ct_ring_push(p->ring, &r, alive);
    }
    return NULL;
}

START_TEST(test_many_producers_lose_nothing_and_keep_thread_order)
{
    struct ct_ring ring;
    void *mem = make_ring(&ring, 1024);
    uint64_t seq_counter = 0;
    pthread_t threads[PRODUCERS];
    struct producer args[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        args[i] = (struct producer){&ring, &seq_counter, i};
        pthread_create(&threads[i], NULL, produce, &args[i]);
    }
    uint64_t next_index[PRODUCERS] = {0};
    uint64_t last_seq[PRODUCERS] = {0};
    uint8_t *seen = calloc(PRODUCERS * PER_PRODUCER + 1, 1);
    uint64_t cursor = 0, total = 0;
    while (total < (uint64_t)PRODUCERS * PER_PRODUCER) {
        const struct ct_record *r = ct_ring_peek(&ring, &cursor);
        if (!r) {
            ct_ring_release(&ring, cursor);
            continue;
        }
        ck_assert_int_lt(r->tid, PRODUCERS);
        ck_assert_uint_eq(r->size, next_index[r->tid]);
        ck_assert_uint_gt(r->seq, last_seq[r->tid]);
        ck_assert(!seen[r->seq]);
        seen[r->seq] = 1;
        next_index[r->tid]++;
        last_seq[r->tid] = r->seq;
        total++;
    }
    ct_ring_release(&ring, cursor);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(threads[i], NULL);
    ck_assert_ptr_null(ct_ring_peek(&ring, &cursor));
    free(seen);
    free(mem);
}
END_TEST

/*
 * The first call's ring (session.c): header, first slots and last slot
 * written into the file, the rest formatted later through the mapping while
 * a producer already uses it. Each step leaves a ring that recovery reads
 * right (no record in an unformatted slot, none where there is none), and
 * the two steps together are byte for byte ct_ring_format.
 */
static void count_record(const struct ct_record *rec, void *arg)
{
    (void)arg;
    ck_assert_uint_ne(rec->seq, 0); /* a zero slot never reads as a record */
}

START_TEST(test_ring_formatted_in_two_steps_is_the_whole_format)
{
    enum { CAP = 256, READY = 16 };
    size_t bytes = ct_ring_bytes(CAP);
    struct ct_ring_owner owner = {42, 1, 2, "x.db", "boot"};
    void *whole = calloc(1, bytes);
    ck_assert_ptr_nonnull(whole);
    ct_ring_format(whole, CAP, &owner);

    char *dir = tu_tmpdir(), *path = tu_empty_file(dir, "ring");
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    rmdir(dir);
    free(path);
    free(dir);
    ck_assert_int_eq(ftruncate(fd, (off_t)bytes), 0);
    ck_assert_int_eq(ct_ring_format_file(fd, CAP, &owner, READY), 0);
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(mem, MAP_FAILED);
    struct ct_ring ring;
    ck_assert(ct_ring_attach(&ring, mem, bytes));
    ck_assert_uint_eq(ct_ring_scan(&ring, count_record, NULL), 0);

    /* A producer uses the ready slots before the rest is formatted. */
    for (uint64_t seq = 1; seq <= READY; seq++) {
        struct ct_record r = rec_with(seq);
        ck_assert_uint_eq(ct_ring_push(&ring, &r, alive), 0);
    }
    ck_assert_uint_eq(ct_ring_scan(&ring, count_record, NULL), READY);
    ct_ring_format_rest(&ring, fd, READY);
    ck_assert_uint_eq(ct_ring_scan(&ring, count_record, NULL), READY);
    uint64_t cursor = 0;
    for (uint64_t seq = 1; seq <= READY; seq++) {
        const struct ct_record *got = ct_ring_peek(&ring, &cursor);
        ck_assert_ptr_nonnull(got);
        ck_assert_uint_eq(got->seq, seq);
    }
    ct_ring_release(&ring, cursor);
    /* Released, the ring is the freshly formatted one but for its counters
     * and the turns of the slots used (one lap ahead). */
    struct ct_ring fresh;
    ck_assert(ct_ring_attach(&fresh, whole, bytes));
    for (uint64_t i = READY; i < CAP; i++)
        ck_assert_uint_eq(ring.slots[i].turn, fresh.slots[i].turn);
    for (uint64_t i = 0; i < READY; i++)
        ck_assert_uint_eq(ring.slots[i].turn, i + CAP);
    ck_assert_int_eq(memcmp(ring.marks, fresh.marks, CT_RING_MARKS * sizeof *ring.marks), 0);
    ck_assert_int_eq(memcmp(ring.hdr->db_name, fresh.hdr->db_name, sizeof ring.hdr->db_name), 0);
    ck_assert_uint_eq(ring.hdr->capacity, CAP);
    munmap(mem, bytes);
    close(fd);
    free(whole);
}
END_TEST

Suite *ring_suite(void)
{
    Suite *s = suite_create("ring");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fifo_and_wraparound);
    tcase_add_test(tc, test_ring_formatted_in_two_steps_is_the_whole_format);
    tcase_add_test(tc, test_scan_finds_exactly_unreleased_complete_records);
    tcase_add_test(tc, test_full_ring_makes_producer_wait_and_records_wait);
    tcase_add_test(tc, test_full_ring_with_dead_writer_drops_instead_of_hanging);
    tcase_add_test(tc, test_waiting_producer_holds_no_ticket);
    tcase_add_test(tc, test_handler_inside_a_push_waits_for_space_but_never_for_itself);
    tcase_add_test(tc, test_attach_rejects_foreign_memory);
    tcase_add_test(tc, test_entered_marks);
    tcase_add_test(tc, test_many_producers_lose_nothing_and_keep_thread_order);
    suite_add_tcase(s, tc);
    return s;
}
