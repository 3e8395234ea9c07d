/*
 * stacks.c - call stacks of traced calls: configuration, capture, and the
 * per-process table of stacks already sent (stacks.h).
 *
 * fork() and the unwinder: libunwind keeps process-wide state behind locks
 * (its memory pool, and the dynamic loader's lock it takes through
 * dl_iterate_phdr for frames it has not cached). A fork while another
 * thread held one would leave it locked forever in the child. So a fork
 * waits, in our prepare handler, for the unwinds in progress to finish,
 * while new ones are skipped (their call is recorded without a stack): two
 * atomic operations per capture, and no thread ever waits for another
 * except fork itself. The forking thread's own unwind (a fork from a signal
 * handler that interrupted one) is not waited for.
 */
#include "stacks.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>

#include "objects.h"
#include "pyframes.h"
#include "session.h"
#include "cutrace/stackrec.h"
#include "unwind.h"
#include "warn.h"

#define DEFAULT_DEPTH 32
#define MAX_DEPTH     128
#define OWN_FRAMES    8     /* room for libcutrace's own frames, left out */
#define SEEN_SLOTS    65536 /* stacks remembered as sent; a power of two */
#define SEEN_PROBES   32
#define FORK_WAIT_NS  1000000000ull /* a thread stopped inside an unwind (a debugger) */

static struct {
    bool native, python;
    int depth;
    bool collectives;
    uint8_t wanted[CT_API_COUNT];
    uint64_t self_start, self_end; /* libcutrace's own loaded range */
    uint64_t *seen;                /* stack ids sent, 0 = free */
    char describe[128];
} C;

static int fork_pending; /* atomic */
static int unwinding;    /* atomic: unwinds in progress */

static __thread struct {
    uint16_t stacking; /* traced calls of this thread that will capture a stack */
    bool unwinding;
} T __attribute__((tls_model("initial-exec")));

static bool role_is(enum ct_api api, const char *role)
{
    return strcmp(ct_api_table[api].role, role) == 0;
}

/* The memory calls of the default, and the collectives on request. */
static void choose_apis(void)
{
    static const char *const memory[] = {"alloc",      "free",      "reset",        "meminfo",
                                         "ipc_export", "comm_init", "comm_init_all"};
    for (int api = 1; api < CT_API_COUNT; api++) {
        bool want = false;
        for (size_t i = 0; i < sizeof memory / sizeof memory[0]; i++)
            want = want || role_is((enum ct_api)api, memory[i]);
        if (C.collectives)
            want =
                want || role_is((enum ct_api)api, "collective") || role_is((enum ct_api)api, "p2p");
        C.wanted[api] = want;
    }
}

static int self_range(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uint64_t here = (uint64_t)(uintptr_t)arg;
    uint64_t lo, hi;
    ct_object_range(info, &lo, &hi);
    if (here < lo || here >= hi)
        return 0;
    C.self_start = lo;
    C.self_end = hi;
    return 1;
}

static bool env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static void configure(void)
{
    C.native = C.python = true;
    C.depth = DEFAULT_DEPTH;
    const char *mode = getenv("CUTRACE_STACKS");
    if (mode && *mode) {
        if (strcmp(mode, "none") == 0)
            C.native = C.python = false;
        else if (strcmp(mode, "native") == 0)
            C.python = false;
        else if (strcmp(mode, "python") == 0)
            C.native = false;
        else if (strcmp(mode, "all") != 0)
            ct_warn_once(CT_PROBLEM_STACKS,
                         "CUTRACE_STACKS=%.40s is not none, native, python or all; using all",
                         mode);
    }
    const char *depth = getenv("CUTRACE_STACK_DEPTH");
    if (depth && *depth) {
        char *end;
        long d = strtol(depth, &end, 10);
        if (*end == '\0' && d >= 1 && d <= MAX_DEPTH)
            C.depth = (int)d;
        else
            ct_warn_once(CT_PROBLEM_STACKS,
                         "CUTRACE_STACK_DEPTH=%.20s is not a number from 1 to %d; using %d", depth,
                         MAX_DEPTH, DEFAULT_DEPTH);
    }
    C.collectives = env_flag("CUTRACE_STACK_COLLECTIVES");
}

bool ct_stacks_enter(enum ct_api api)
{
    if ((unsigned)api >= CT_API_COUNT || !C.wanted[api] || T.stacking)
        return false;
    T.stacking++;
    return true;
}

void ct_stacks_leave(void)
{
    T.stacking--;
}

static bool begin_unwind(void)
{
    if (__atomic_load_n(&fork_pending, __ATOMIC_ACQUIRE))
        return false;
    __atomic_add_fetch(&unwinding, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&fork_pending, __ATOMIC_SEQ_CST)) {
        __atomic_sub_fetch(&unwinding, 1, __ATOMIC_RELEASE);
        return false;
    }
    T.unwinding = true;
    return true;
}

static void end_unwind(void)
{
    T.unwinding = false;
    __atomic_sub_fetch(&unwinding, 1, __ATOMIC_RELEASE);
}

/* 63 bits, never 0: SQLite stores it as a positive integer. */
static uint64_t hash_frames(const uint64_t *frames, int n, int native)
{
    uint64_t h = 0x243f6a8885a308d3ull ^ ((uint64_t)native << 32) ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= frames[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    h &= INT64_MAX;
    return h ? h : 1;
}

/* True when the stack was already sent (or is being sent by another thread). */
static bool seen_or_claim(uint64_t id)
{
    if (!C.seen)
        return false;
    size_t i = (size_t)(id * 0x9e3779b97f4a7c15ull >> 40) & (SEEN_SLOTS - 1);
    for (int probe = 0; probe < SEEN_PROBES; probe++, i = (i + 1) & (SEEN_SLOTS - 1)) {
        uint64_t v = __atomic_load_n(&C.seen[i], __ATOMIC_ACQUIRE);
        if (v == id)
            return true;
        if (v == 0 && __atomic_compare_exchange_n(&C.seen[i], &v, id, false, __ATOMIC_ACQ_REL,
                                                  __ATOMIC_ACQUIRE))
            return false;
        if (v == id)
            return true;
    }
    /* Crowded: send it again; the store keeps one copy (INSERT OR IGNORE). */
    return false;
}

static void send_frames(uint64_t id, const uint64_t *frames, int n, int native)
{
    for (int first = 0; first < n; first += CT_AUX_FRAMES_PER) {
        int count = n - first < CT_AUX_FRAMES_PER ? n - first : CT_AUX_FRAMES_PER;
        union ct_any_record u;
        ct_aux_init(&u, CT_AUX_FRAMES, id);
        u.aux.first = (uint16_t)first;
        u.aux.count = (uint16_t)count;
        u.aux.total = (uint16_t)n;
        u.aux.native = (uint16_t)native;
        for (int i = 0; i < count; i++)
            ct_aux_set_frame(&u.aux, (unsigned)i, frames[first + i]);
        ct_session_append(&u.rec);
    }
}

uint64_t ct_stacks_capture(void)
{
    uint64_t frames[2 * MAX_DEPTH];
    int native = 0;
    if (C.native && begin_unwind()) {
        uint64_t raw[MAX_DEPTH + OWN_FRAMES];
        int got = ct_unwind(raw, C.depth + OWN_FRAMES);
        if (got <= 0)
            got = ct_unwind_fallback(raw, C.depth + OWN_FRAMES);
        end_unwind();
        int i = 0;
        while (i < got && raw[i] >= C.self_start && raw[i] < C.self_end)
            i++;
        for (; i < got && native < C.depth; i++)
            frames[native++] = raw[i];
    }
    int n = native;
    if (C.python)
        n += ct_py_capture(frames + native, C.depth);
    if (n == 0)
        return 0;
    uint64_t id = hash_frames(frames, n, native);
    if (!seen_or_claim(id))
        send_frames(id, frames, n, native);
    return id;
}

const char *ct_stacks_describe(void)
{
    return C.describe;
}

bool ct_stacks_enabled(void)
{
    return C.native || C.python;
}

void ct_stacks_objects_changed(void)
{
    if (C.python && !ct_py_present())
        ct_py_resolve();
}

/* fork(): see the header comment. */
static void before_fork(void)
{
    __atomic_store_n(&fork_pending, 1, __ATOMIC_SEQ_CST);
    int own = T.unwinding ? 1 : 0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (__atomic_load_n(&unwinding, __ATOMIC_ACQUIRE) > own) {
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t waited = (uint64_t)(now.tv_sec - start.tv_sec) * 1000000000ull +
                          (uint64_t)now.tv_nsec - (uint64_t)start.tv_nsec;
        if (waited > FORK_WAIT_NS)
            break; /* fork anyway */
    }
}

static void after_fork_parent(void)
{
    __atomic_store_n(&fork_pending, 0, __ATOMIC_RELEASE);
}

static void after_fork_child(void)
{
    /* The child's trace has none of the parent's stacks: forget them all. */
    if (C.seen)
        madvise(C.seen, SEEN_SLOTS * sizeof *C.seen, MADV_DONTNEED);
    ct_py_after_fork_child();
    __atomic_store_n(&unwinding, T.unwinding ? 1 : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fork_pending, 0, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void stacks_load(void)
{
    if (getauxval(AT_SECURE) || env_flag("CUTRACE_DISABLE"))
        return; /* not traced at all (session.c) */
    configure();
    if (C.native && !ct_unwind_init()) {
        ct_warn_once(CT_PROBLEM_STACKS, "no unwinder found (libunwind.so.8); no native stacks");
        C.native = false;
    }
    if (C.python)
        ct_py_resolve();
    if (C.native || C.python) {
        void *mem = mmap(NULL, SEEN_SLOTS * sizeof *C.seen, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        C.seen = mem == MAP_FAILED ? NULL : mem;
        dl_iterate_phdr(self_range, (void *)(uintptr_t)&ct_stacks_capture);
        choose_apis();
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    }
    snprintf(C.describe, sizeof C.describe, "native=%s python=%s depth=%d on=%s",
             C.native ? ct_unwind_name() : "off", C.python ? "on" : "off", C.depth,
             C.collectives ? "memory,collectives" : "memory");
}
