/*
 * session.c - lifecycle of a traced process.
 *
 * States: IDLE (library loaded, no CUDA event yet, no file), ON (trace
 * files exist, writer running), OFF (not traced: disabled by the user, a
 * setuid program, or the tracer could not write; the program runs on
 * untouched). The only lock, start_mu, is taken to leave IDLE and around
 * fork(); the steady state reads `state` with one atomic load.
 *
 * Two callers must not be left to the steady state:
 *   - a signal handler that makes a CUDA call while its thread is creating
 *     the trace (start_mu held, or being waited for) cannot wait for it:
 *     ct_self.starting says so, and the call's record is dropped and
 *     counted (start_drops, moved into the ring's `dropped` once the ring
 *     exists);
 *   - a child made without the fork handlers (syscall(SYS_fork), clone)
 *     holds a copy of the parent's session, whose ring is not mapped in it.
 *     A page that reads 0 in every child (MADV_WIPEONFORK, `owner`) tells
 *     it, for one load at each end of a call, and the child takes the
 *     session over as after_fork_child does.
 *
 * Files are created lazily so that the many processes of a server that never
 * touch CUDA (tokenizers, shell wrappers) leave nothing behind. Each is made
 * with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600, relative to the checked trace
 * directory (tracedir.h): never overwriting, never following a planted
 * symlink, never in a directory another user controls. Every write to them
 * happens on a thread that blocks all signals (sigfree.h), so a file-size
 * limit never kills the program with SIGXFSZ.
 */
#include "session.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sched.h>
#include <unistd.h>

#include "ancestry.h"
#include "clock.h"
#include "device.h"
#include "cutrace/envcap.h"
#include "execfold.h"
#include "cutrace/store.h"
#include "procinfo.h"
#include "cutrace/ring.h"
#include "schema_image.h"
#include "sigfree.h"
#include "sqlfiles.h"
#include "stacks.h"
#include "thread.h"
#include "tracedir.h"
#include "tracefile.h"
#include "versions.h"
#include "warn.h"
#include "writer.h"

#define CT_DEFAULT_BUFFER_MB 8  /* 32,768 records: the slots; the header page is extra */
#define CT_MAX_BUFFER_MB     64 /* the memory a tracer may take from a process */
#define CT_MIN_SLOTS         64
#define CT_FLUSH_TIMEOUT_MS  3000
#define CT_DEFAULT_DIR       "cutrace-trace"
/* Slots formatted before the first call returns (64 pages of them): a
 * program making more calls than that before the writer has formatted the
 * rest waits for it as for a full ring. */
#define CT_RING_READY_SLOTS 1024
/* The descriptors the writer adds to the trace file's, which the first call holds: -wal, -shm. */
#define CT_TRACE_FILE_FDS 2

enum ct_state { CT_IDLE = 0, CT_ON, CT_OFF };

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18 /* Linux 4.14; older C libraries lack the name */
#endif

/* The owner page's word: what a child reads (0) until it takes over. */
enum { OWNER_WIPED = 0, OWNER_TAKING_OVER, OWNER_THIS_PROCESS };

/* Whether the session in memory is this process's (ownership()). */
enum ct_ownership { CT_OURS, CT_TAKEN_OVER, CT_NOT_OURS };

extern char **environ;

static struct {
    int state; /* atomic enum ct_state */
    bool configured;
    bool disabled_by_config;
    uint64_t seq; /* atomic */
    int finished; /* atomic: the final flush ran; later records are flushed one by one */
    pthread_mutex_t start_mu;
    int64_t pid;
    uint64_t start_wall_ns;
    uint64_t start_mono_ns;
    size_t buffer_bytes;
    char dir[PATH_MAX];
    char ring_path[PATH_MAX];
    int ring_fd; /* open, with a POSIX write lock on it, while the process lives */
    struct ct_ring ring;
    struct ct_writer *writer;
    /* An exec is under way and its marker made (execfold.h); the exec-ing thread's only. */
    bool exec_marked;
    uint64_t start_drops; /* atomic: records dropped before the ring existed */
    uint64_t *owner;      /* MADV_WIPEONFORK word; NULL where the kernel has none */
    int exit_status;      /* atomic: 1 + the status given to exit(), 0 unknown */
    /* What the first call made and the writer takes over at its start
     * (make_store); a forked child abandons it. */
    struct pending_trace {
        struct ct_tracefile files;
        struct ct_process_info proc;
        struct ct_env_capture env;
        struct ct_store *store; /* the trace file, made by the first call */
        uint64_t ring_ready;    /* slots ct_ring_format_start made */
    } pending;
} S = {.start_mu = PTHREAD_MUTEX_INITIALIZER, .ring_fd = -1};

static void become_child_session(void);

/*
 * The page is private, so a vfork child (which runs in our memory and must
 * leave our session alone) reads our mark, and any other child reads 0.
 */
static void mark_owner_page(void)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t bytes = page > 0 ? (size_t)page : 4096;
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return;
    if (madvise(mem, bytes, MADV_WIPEONFORK) != 0) {
        munmap(mem, bytes);
        return;
    }
    S.owner = mem;
    __atomic_store_n(S.owner, OWNER_THIS_PROCESS, __ATOMIC_RELEASE);
}

/*
 * A child that no fork handler told: the first of its threads to notice
 * takes the session over, the others wait for it (no system call, no lock:
 * a thread that waits may be interrupted by a handler, whose call is then
 * dropped like any made during setup).
 */
static void take_over_after_raw_fork(void)
{
    ct_self.starting = true;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint64_t wiped = OWNER_WIPED;
    if (__atomic_compare_exchange_n(S.owner, &wiped, OWNER_TAKING_OVER, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        become_child_session();
        __atomic_store_n(S.owner, OWNER_THIS_PROCESS, __ATOMIC_RELEASE);
    } else {
        while (__atomic_load_n(S.owner, __ATOMIC_ACQUIRE) != OWNER_THIS_PROCESS)
            sched_yield();
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    ct_self.starting = false;
}

/*
 * Checked at both ends of every call: CT_TAKEN_OVER when this call found a
 * raw fork's child and took the session over (at the end of a call, the
 * record was begun in the parent's session). Without MADV_WIPEONFORK (Linux before
 * 4.14) a pid that is not the session's - a raw fork's child or a vfork
 * child, which cannot be told apart - is not traced at all (one getpid()
 * per call there): taking over in a vfork child would wreck its parent's
 * session.
 */
static enum ct_ownership ownership(void)
{
    if (__builtin_expect(S.owner != NULL, 1)) {
        if (__builtin_expect(__atomic_load_n(S.owner, __ATOMIC_ACQUIRE) == OWNER_THIS_PROCESS, 1))
            return CT_OURS;
        /* A handler on the thread taking over: it cannot wait for its own thread. */
        if (!ct_self.starting)
            take_over_after_raw_fork();
        return CT_TAKEN_OVER;
    }
    return !S.configured || getpid() == S.pid ? CT_OURS : CT_NOT_OURS;
}

bool ct_session_tracing(void)
{
    if (__builtin_expect(ownership() == CT_NOT_OURS, 0))
        return false;
    return __atomic_load_n(&S.state, __ATOMIC_ACQUIRE) != CT_OFF;
}

uint64_t ct_session_next_seq(void)
{
    return __atomic_add_fetch(&S.seq, 1, __ATOMIC_RELAXED);
}

/*
 * Relaxed is enough: a call whose effect another thread depends on (a free
 * whose pointer a later allocation gets) happens-before that thread's load
 * through the library's own synchronization, and a load then sees that
 * call's add or a later value (read coherence of one atomic).
 */
uint64_t ct_session_seq_now(void)
{
    return __atomic_load_n(&S.seq, __ATOMIC_RELAXED);
}

static bool env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/*
 * Reads the environment once. An unset CUTRACE_DIR becomes ./cutrace-trace of
 * this (the first traced) process and is exported as an absolute path, so all
 * processes of one launch write into one directory whatever their cwd. Each
 * process resolves and checks it itself, at its first CUDA event
 * (ct_tracedir_use).
 */
static void configure(void)
{
    if (S.configured)
        return;
    S.configured = true;
    S.pid = getpid();
    mark_owner_page();
    S.start_wall_ns = ct_wall_ns();
    S.start_mono_ns = ct_now_ns();

    if (getauxval(AT_SECURE) || env_flag("CUTRACE_DISABLE")) {
        S.disabled_by_config = true;
        __atomic_store_n(&S.state, CT_OFF, __ATOMIC_RELEASE);
        return;
    }

    const char *dir = getenv("CUTRACE_DIR");
    if (!dir || !*dir)
        dir = CT_DEFAULT_DIR;
    char cwd[PATH_MAX];
    if (dir[0] == '/' || !getcwd(cwd, sizeof cwd))
        snprintf(S.dir, sizeof S.dir, "%s", dir);
    else if ((size_t)snprintf(S.dir, sizeof S.dir, "%s/%s", cwd, dir) >= sizeof S.dir)
        snprintf(S.dir, sizeof S.dir, "%s", dir);
    const char *current = getenv("CUTRACE_DIR");
    if (!current || strcmp(current, S.dir) != 0)
        setenv("CUTRACE_DIR", S.dir, 1);

    /* Digits only: strtoul would take " 8", "+8", "8MB" and "-1" (as a huge number). */
    unsigned long mb = CT_DEFAULT_BUFFER_MB;
    const char *b = getenv("CUTRACE_BUFFER_MB");
    if (b && *b) {
        size_t len = strlen(b);
        unsigned long v = strspn(b, "0123456789") == len && len <= 4 ? strtoul(b, NULL, 10) : 0;
        if (v >= 1 && v <= CT_MAX_BUFFER_MB)
            mb = v;
        else
            ct_warn_once(
                CT_PROBLEM_BUFFER_SIZE,
                "CUTRACE_BUFFER_MB=%.20s is not a whole number of MiB from 1 to %d; "
                "using %d (%d records)",
                b, CT_MAX_BUFFER_MB, CT_DEFAULT_BUFFER_MB,
                (int)(((unsigned long)CT_DEFAULT_BUFFER_MB << 20) / sizeof(struct ct_slot)));
    }
    S.buffer_bytes = mb << 20;
}

/*
 * The ring is a file mapping so that records survive a SIGKILL. Blocks are
 * reserved up front (posix_fallocate): a full disk must fail here, not as a
 * SIGBUS inside the program's cudaMalloc. It is formatted and locked under a
 * hidden name and only then published, so `cutrace recover` never sees a
 * half-made ring; the lock tells it the process is alive. Where any of this
 * fails, an anonymous mapping keeps the program traced without crash safety.
 *
 * The lock is a POSIX record lock (F_SETLK): it belongs to this process and
 * no child inherits it, however the child is made, so it is free exactly
 * when this process is gone (flock and OFD locks belong to the open file,
 * which a raw fork's child shares and keeps). POSIX locks are also dropped
 * when the process closes any descriptor of the file, so the tracer never
 * opens a ring file a second time.
 */
static void *file_ring(const struct ct_tracefile *files, size_t bytes, uint64_t capacity,
                       const struct ct_ring_owner *owner, const char **why)
{
    int fd = ct_tracefile_open_new(files->ring_tmp_path, O_RDWR);
    if (fd < 0) {
        *why = strerror(errno);
        return MAP_FAILED;
    }
    void *mem = MAP_FAILED;
    int rc = posix_fallocate(fd, 0, (off_t)bytes);
    /* Formatted by write(2) before it is mapped (ring.c says why), and only
     * its header, first slots, last slot and marks: the rest of the slots
     * is the writer's first job (make_store). */
    if (rc == 0)
        rc = ct_ring_format_file(fd, capacity, owner, CT_RING_READY_SLOTS);
    if (rc == 0) {
        mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        rc = mem == MAP_FAILED ? errno : 0;
    }
    struct flock alive = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (rc == 0 && fcntl(fd, F_SETLK, &alive) != 0)
        rc = errno;
    if (rc == 0) {
        S.pending.ring_ready = CT_RING_READY_SLOTS;
        if (ct_tracefile_publish(files->ring_tmp_path, files->ring_path) != 0)
            rc = errno;
    }
    if (rc != 0) {
        *why = strerror(rc);
        if (mem != MAP_FAILED)
            munmap(mem, bytes);
        ct_tracefile_remove(files->ring_tmp_path);
        close(fd);
        errno = rc;
        return MAP_FAILED;
    }
    S.ring_fd = fd;
    return mem;
}

/* Failures more room would cure: disk full, quota, file-size limit. */
static bool out_of_room(int err)
{
    return err == ENOSPC || err == EDQUOT || err == EFBIG;
}

enum ring_outcome { RING_MAPPED, RING_NO_ROOM, RING_FAILED };

/* RING_NO_ROOM: not even the smallest ring file fits (*why says why). */
static enum ring_outcome map_ring(const struct ct_tracefile *files, const char **why)
{
    /* CUTRACE_BUFFER_MB is the slots' size (the header page is extra), in
     * records rounded down to a power of two: 8 MiB holds 32,768. */
    uint64_t capacity = CT_MIN_SLOTS;
    while (capacity * 2 * sizeof(struct ct_slot) <= S.buffer_bytes)
        capacity *= 2;
    /* Under a file-size limit the ring shrinks to fit in half of it rather than giving up. */
    size_t budget = SIZE_MAX;
    struct rlimit fsize;
    if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY)
        budget = fsize.rlim_cur / 2;
    /* And to half the room left on its file system: the other half is the
     * database's, so that a nearly full disk still gets calls committed. */
    const char *self, *limit = "file size limit";
    int dir = ct_tracedir_at(ct_tracedir_path(), &self);
    struct statvfs fs;
    if (dir >= 0 && fstatvfs(dir, &fs) == 0 && fs.f_frsize > 0 &&
        fs.f_bavail / 2 < budget / fs.f_frsize) {
        budget = (size_t)(fs.f_bavail / 2) * fs.f_frsize;
        limit = strerror(ENOSPC);
    }
    while (capacity > CT_MIN_SLOTS && ct_ring_bytes(capacity) > budget)
        capacity /= 2;
    size_t bytes = ct_ring_bytes(capacity);

    char boot_id[40];
    ct_procinfo_boot_id(boot_id, sizeof boot_id);
    struct ct_ring_owner owner = {S.pid, S.start_wall_ns, S.start_mono_ns, files->db_name, boot_id};
    /* So does it on a disk too full for it: a smaller ring makes the program
     * wait for the writer sooner, but keeps it crash-safe, and keeps the
     * place where a writer that runs out of room says why (writer.c). */
    void *mem = MAP_FAILED;
    int err = bytes > budget ? EFBIG : 0;
    *why = limit;
    while (!err) {
        mem = file_ring(files, bytes, capacity, &owner, why);
        if (mem != MAP_FAILED)
            break;
        err = errno;
        if (out_of_room(err) && capacity > CT_MIN_SLOTS) {
            capacity /= 2;
            bytes = ct_ring_bytes(capacity);
            err = 0;
        }
    }
    if (out_of_room(err)) {
        S.ring_path[0] = '\0';
        return RING_NO_ROOM;
    }
    if (mem == MAP_FAILED) {
        ct_warn_once(CT_PROBLEM_RING,
                     "no crash-safe buffer in %s (%s); records not yet written are lost if the "
                     "process is killed",
                     S.dir, *why);
        S.ring_path[0] = '\0';
        mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            return RING_FAILED;
        ct_ring_format_start(mem, capacity, &owner, CT_RING_READY_SLOTS);
        S.pending.ring_ready = CT_RING_READY_SLOTS;
    }
    /* A forked child must not write into its parent's ring. */
    madvise(mem, bytes, MADV_DONTFORK);
    bool attached = ct_ring_attach(&S.ring, mem, bytes);
    assert(attached);
    return attached ? RING_MAPPED : RING_FAILED;
}

/* A trace database and what SQLite may have left beside it. */
static void remove_db(const char *path)
{
    char side[PATH_MAX + 8];
    ct_tracefile_remove(path);
    snprintf(side, sizeof side, "%s-wal", path);
    ct_tracefile_remove(side);
    snprintf(side, sizeof side, "%s-shm", path);
    ct_tracefile_remove(side);
}

/*
 * Not even the smallest ring fits: the disk (or the file-size limit) is full
 * right after the trace was made, and the writer would stop at its first
 * commit. Instead of a trace that would say only "still running, or
 * killed", the trace says why it holds no calls (meta writer_error, as a
 * writer that stops says it), and the process is not traced; where even
 * that cannot be written, there is no trace.
 */
static void stop_for_lack_of_room(const struct ct_tracefile *files, struct ct_store *st,
                                  const char *why)
{
    char reason[256];
    snprintf(reason, sizeof reason, "no room for the crash buffer (%s)", why);
    int rc = ct_store_begin(st);
    if (!rc)
        rc = ct_store_set_meta_text(st, "writer_error", reason);
    if (!rc)
        rc = ct_store_set_meta_int(st, "writer_stopped_after", 0);
    if (!rc)
        rc = ct_store_commit(st);
    if (!rc)
        rc = ct_store_finish_private(st);
    if (!rc)
        rc = ct_store_seal(st);
    ct_store_close(st);
    if (rc)
        remove_db(files->db_path);
    ct_warn_once(CT_PROBLEM_TRACE_DIR, "cannot write a trace in %s: %s; not tracing", S.dir,
                 reason);
}

/*
 * Makes the trace file complete (schema, process, environment) under its
 * hidden name, then publishes it: a reader never meets an empty trace.
 */
/*
 * Makes the trace file complete (schema, process, environment) under its
 * hidden name, then publishes it: a reader never meets an empty trace. The
 * connection that made it is returned, open on it (NULL on failure, err
 * saying why): its schema is not parsed a second time by another open.
 */
static struct ct_store *make_trace_file(const struct ct_tracefile *files,
                                        const struct ct_process_info *proc,
                                        const struct ct_env_capture *env, char *err, size_t errlen)
{
    /* Named after the final name, opened under the hidden one (sqlfiles.h). */
    const char *tmp_name = strrchr(files->db_tmp_path, '/');
    tmp_name = tmp_name ? tmp_name + 1 : files->db_tmp_path;
    /* The schema comes as the build's image of a new trace file (schema_image.h). */
    if (ct_tracefile_fill(files->db_tmp_path, ct_schema_image, ct_schema_image_size) != 0) {
        snprintf(err, errlen, "%.200s: %s", tmp_name, strerror(errno));
        remove_db(files->db_tmp_path);
        return NULL;
    }
    ct_sqlfiles_redirect(files->db_name, tmp_name);
    struct ct_store *st = ct_store_open_private(files->db_path, err, errlen);
    ct_sqlfiles_redirect(NULL, NULL);
    if (!st) {
        remove_db(files->db_tmp_path);
        return NULL;
    }
    int rc = ct_store_begin(st);
    if (!rc)
        rc = ct_store_write_process(st, proc);
    if (!rc)
        rc = ct_store_write_env(st, env->vars, env->count);
    if (!rc)
        rc = ct_store_set_meta_text(st, "stacks", ct_stacks_describe());
    /* In the .db itself, before any call: a copy of the .db alone still
     * says that a -wal and a ring stood beside it while the process ran
     * (the analyzer warns when they are missing, model/sidefiles.h). */
    const char *ring_name = strrchr(files->ring_path, '/');
    if (!rc)
        rc = ct_store_set_meta_text(st, "crash_buffer",
                                    ring_name ? ring_name + 1 : files->ring_path);
    /* No sync: a killed process's page cache survives it; the file's one
     * sync is the writer's, when it switches the file to WAL (make_store). */
    if (!rc)
        rc = ct_store_commit(st);
    if (rc)
        snprintf(err, errlen, "%s", ct_store_error(st));
    if (!rc && ct_tracefile_publish(files->db_tmp_path, files->db_path) != 0) {
        snprintf(err, errlen, "%s: %s", files->db_name, strerror(errno));
        rc = -1;
    }
    if (rc) {
        ct_store_close(st);
        remove_db(files->db_tmp_path);
        return NULL;
    }
    return st;
}

static void pending_free(struct pending_trace *p)
{
    ct_store_close(p->store);
    ct_env_capture_free(&p->env);
    ct_procinfo_free(&p->proc);
    ct_ancestry_free(p->proc.ancestors, p->proc.nancestors);
    memset(p, 0, sizeof *p);
}

/*
 * The writer's first job (ct_writer_config.make_store), under its work lock:
 * the rest of the ring, then the trace file the first call made is switched
 * to WAL (its -wal and -shm made beside it, under its final name, and the
 * file's one sync) and kept as the writer's connection: its schema is
 * parsed once. On failure the writer stops (and says why in the ring).
 */
static struct ct_store *make_store(void *arg, char *err, size_t errlen)
{
    struct pending_trace *p = arg;
    assert(p == &S.pending && S.ring.hdr && p->store);
    ct_ring_format_rest(&S.ring, S.ring_fd, p->ring_ready);
    struct ct_store *st = p->store;
    p->store = NULL;
    if (ct_store_finish_private(st) != 0) {
        snprintf(err, errlen, "%s", ct_store_error(st));
        ct_store_close(st);
        st = NULL;
    }
    pending_free(p);
    return st;
}

/*
 * Whether n more descriptors can be opened now (errno says why not), asked
 * by duplicating the trace directory's: closing a duplicate of any other
 * (the ring's, or one of the program's) would drop the POSIX locks its
 * process holds on that file.
 */
static bool descriptors_left(int n)
{
    int fds[8];
    assert(n <= 8);
    const char *self;
    int dir = ct_tracedir_at(ct_tracedir_path(), &self);
    if (dir < 0)
        return false;
    int got = 0;
    while (got < n && (fds[got] = fcntl(dir, F_DUPFD_CLOEXEC, 0)) >= 0)
        got++;
    int err = errno;
    for (int i = 0; i < got; i++)
        close(fds[i]);
    errno = err;
    return got == n;
}

/* The ring, published but not to be used: no record was pushed into it. */
static void abandon_ring(void)
{
    if (S.ring_path[0])
        ct_tracefile_remove(S.ring_path);
    S.ring_path[0] = '\0';
    if (S.ring.hdr)
        munmap(S.ring.hdr, ct_ring_bytes(S.ring.mask + 1));
    memset(&S.ring, 0, sizeof S.ring);
    if (S.ring_fd >= 0)
        close(S.ring_fd);
    S.ring_fd = -1;
}

/*
 * The trace's files and writer. This is the process's first CUDA event,
 * never the steady state; start_mu is held, so fork() waits for it. Runs on
 * a signal-free thread (start_locked). The trace file is made whole here,
 * so that a process killed right after its first call leaves its process
 * row and environment and not only its records, but with no journal, no
 * sync and no second parse of its schema; the ring is written with pwrite,
 * only its header and first slots. The rest of both is the writer's first
 * job (make_store).
 */
static bool start_trace(void)
{
    char why[PATH_MAX + 128];
    if (ct_tracedir_use(S.dir, why, sizeof why) != 0) {
        ct_warn_once(CT_PROBLEM_TRACE_DIR, "%s; not tracing", why);
        return false;
    }
    struct pending_trace *p = &S.pending;
    memset(p, 0, sizeof *p);
    ct_procinfo_collect(&p->proc);
    p->proc.nancestors =
        ct_ancestry_walk("/proc", p->proc.ppid, p->proc.ancestors, CT_ANCESTORS_MAX);
    p->proc.start_wall_ns = S.start_wall_ns;
    p->proc.start_mono_ns = S.start_mono_ns;
    struct ct_tracefile *files = &p->files;
    if (ct_tracefile_create(p->proc.host, S.pid, S.start_wall_ns, files) != 0) {
        ct_warn_once(CT_PROBLEM_TRACE_DIR, "cannot create a trace file in %s: %s; not tracing",
                     S.dir, strerror(errno));
        pending_free(p);
        return false;
    }
    if (ct_env_capture(environ, &p->env) != 0)
        p->env.count = 0;
    char err[512];
    p->store = make_trace_file(files, &p->proc, &p->env, err, sizeof err);
    if (!p->store) {
        ct_warn_once(CT_PROBLEM_TRACE_DIR, "cannot write a trace in %s: %s; not tracing", S.dir,
                     err);
        pending_free(p);
        return false;
    }

    snprintf(S.ring_path, sizeof S.ring_path, "%s", files->ring_path);
    const char *ring_why = "";
    enum ring_outcome ring = map_ring(files, &ring_why);
    if (ring == RING_NO_ROOM) {
        stop_for_lack_of_room(files, p->store, ring_why);
        p->store = NULL;
    }
    if (ring != RING_MAPPED) {
        pending_free(p);
        return false;
    }
    /* The writer's connection will also hold the file's -wal and -shm:
     * without descriptors for those (a tiny RLIMIT_NOFILE), the program's
     * last ones would be taken from it for a trace that cannot be written. */
    if (!descriptors_left(CT_TRACE_FILE_FDS)) {
        ct_warn_once(CT_PROBLEM_TRACE_DIR, "cannot write a trace in %s: %s; not tracing", S.dir,
                     strerror(errno));
        abandon_ring();
        pending_free(p);
        remove_db(files->db_path);
        return false;
    }

    struct ct_writer_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.db_path, sizeof cfg.db_path, "%s", files->db_path);
    cfg.make_store = make_store;
    cfg.make_arg = p;
    cfg.ring = &S.ring;
    cfg.probes.describe_device = ct_device_describe;
    cfg.probes.versions = ct_library_versions;
    cfg.probes.objects_changed = ct_stacks_objects_changed;
    cfg.record_objects = ct_stacks_enabled();
    cfg.interval_ms = 20;
    S.writer = ct_writer_start(&cfg, err, sizeof err);
    if (!S.writer) {
        ct_warn_once(CT_PROBLEM_WRITER, "%s; not tracing", err);
        abandon_ring();
        pending_free(p);
        return false;
    }
    return true;
}

static void start_trace_job(void *started)
{
    *(bool *)started = start_trace();
    /* Not traced: nothing of the tracer's stays open in the program. */
    if (!*(bool *)started)
        ct_tracedir_release();
}

static bool start_locked(void)
{
    configure();
    if (S.disabled_by_config)
        return false;
    bool started = false;
    if (!ct_sigfree_run(start_trace_job, &started)) {
        ct_warn_once(CT_PROBLEM_WRITER, "cannot start a thread to write the trace: %s; not tracing",
                     strerror(errno));
        return false;
    }
    return started;
}

/*
 * ct_self.starting covers the lock's acquisition too: a handler that
 * arrives once the mutex is ours but before a flag set after it could be
 * would wait on its own thread.
 */
static int start(void)
{
    ct_self.starting = true;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pthread_mutex_lock(&S.start_mu);
    int state = __atomic_load_n(&S.state, __ATOMIC_ACQUIRE);
    if (state == CT_IDLE) {
        state = start_locked() ? CT_ON : CT_OFF;
        __atomic_store_n(&S.state, state, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&S.start_mu);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    ct_self.starting = false;
    /* After the flag is down: whatever this thread's handlers dropped is in. */
    uint64_t dropped = __atomic_exchange_n(&S.start_drops, 0, __ATOMIC_RELAXED);
    if (dropped && state == CT_ON)
        ct_ring_count_dropped(&S.ring, dropped);
    return state;
}

static bool writer_alive(void)
{
    return ct_writer_alive(S.writer);
}

void ct_session_append(struct ct_record *rec)
{
    /* A signal handler's call while its thread sets the session up: its seq
     * is this session's, so the gap is counted. */
    if (__builtin_expect(ct_self.starting, 0)) {
        __atomic_fetch_add(&S.start_drops, 1, __ATOMIC_RELAXED);
        return;
    }
    /* A call begun before a raw fork: its seq is the parent's, whose copy of
     * the call the parent records itself. */
    if (__builtin_expect(ownership() != CT_OURS, 0))
        return;
    int state = __atomic_load_n(&S.state, __ATOMIC_ACQUIRE);
    if (state == CT_IDLE)
        state = start();
    if (state != CT_ON)
        return;
    if (!writer_alive()) {
        __atomic_store_n(&S.state, CT_OFF, __ATOMIC_RELEASE);
        ct_ring_count_dropped(&S.ring, 1);
        return;
    }
    ct_ring_push(&S.ring, rec, writer_alive);
    if (__atomic_load_n(&S.finished, __ATOMIC_ACQUIRE))
        ct_writer_flush(S.writer, NULL, CT_FLUSH_TIMEOUT_MS);
}

struct ct_mark *ct_session_mark_enter(const struct ct_record *rec)
{
    /* As for a record: a handler of the thread setting the session up, or
     * a call begun before a raw fork, takes no mark. */
    if (__builtin_expect(ct_self.starting, 0) || __builtin_expect(ownership() != CT_OURS, 0))
        return NULL;
    int state = __atomic_load_n(&S.state, __ATOMIC_ACQUIRE);
    if (state == CT_IDLE)
        state = start();
    /* An anonymous ring (no file) would not outlive the process: no mark. */
    if (state != CT_ON || !S.ring_path[0])
        return NULL;
    return ct_ring_mark_enter(&S.ring, rec);
}

void ct_session_mark_leave(struct ct_mark *mark)
{
    /* A child made by fork inside the call has no mapping of the ring the
     * mark is in (MADV_DONTFORK): only a mark of this session's ring is freed. */
    if (!mark || ownership() != CT_OURS || !S.ring.marks)
        return;
    if (mark >= S.ring.marks && mark < S.ring.marks + CT_RING_MARKS)
        ct_ring_mark_leave(mark);
}

/* A process ends or execs; next_traced: exec's new image completes the trace. */
static void finish(const char *end_state, bool next_traced)
{
    /* A vfork child runs in our memory but is not this process. */
    if (S.pid != getpid())
        return;
    /* Said in the ring too (even after the writer failed): recovery stores it. */
    if (S.ring.hdr)
        ct_ring_note_end(&S.ring, end_state);
    /*
     * An exec may fail, and the process go on. So the ring file stays (a
     * successful exec closes its descriptor, O_CLOEXEC, which drops its
     * lock), and the trace is not told "exec" before that is true: the new
     * image, or `cutrace recover`, tells it from the ring (execfold.h).
     * Without a ring file it is told now, and told "running" again if the
     * exec fails (ct_session_resume).
     */
    bool hand_over = strcmp(end_state, "exec") == 0 && S.ring.hdr && S.ring_path[0] &&
                     !__atomic_load_n(&S.finished, __ATOMIC_ACQUIRE);
    if (hand_over && next_traced)
        S.exec_marked = ct_execfold_mark(S.dir, S.pid, S.ring_path) == 0;
    if (__atomic_load_n(&S.state, __ATOMIC_ACQUIRE) != CT_ON || !ct_writer_alive(S.writer))
        return; /* reported when the writer stopped; the ring keeps what it did not write */
    int status = __atomic_load_n(&S.exit_status, __ATOMIC_ACQUIRE);
    if (status && !hand_over)
        ct_writer_note_exit_status(S.writer, status - 1);
    if (!ct_writer_flush(S.writer, hand_over ? NULL : end_state, CT_FLUSH_TIMEOUT_MS)) {
        if (!ct_writer_alive(S.writer))
            return; /* it stopped while we waited, and said so */
        ct_warn_once(CT_PROBLEM_FLUSH_TIMEOUT,
                     "could not write the last records before %s; they stay in %s", end_state,
                     S.ring_path[0] ? S.ring_path : "memory (lost)");
        return;
    }
    if (hand_over)
        return;
    /* Everything is in the database; records made from now on are flushed one by one.
     * A thread still inside a blocking call keeps the ring: its mark is how
     * the trace learns (from `cutrace recover`, once this process is gone)
     * which call it never returned from. */
    if (S.ring_path[0] && !__atomic_load_n(&S.finished, __ATOMIC_ACQUIRE) &&
        ct_ring_marks_taken(&S.ring) == 0)
        ct_tracefile_remove(S.ring_path);
    __atomic_store_n(&S.finished, 1, __ATOMIC_RELEASE);
}

void ct_session_finish(const char *end_state)
{
    finish(end_state, false);
}

void ct_session_note_exit_status(int status)
{
    /* A vfork child runs in our memory: its status is not ours. */
    if (S.pid != getpid())
        return;
    /* What the parent's wait sees: the low 8 bits. */
    __atomic_store_n(&S.exit_status, 1 + (status & 0377), __ATOMIC_RELEASE);
}

/* NAME's value in envp, or NULL. */
static const char *env_value(char *const envp[], const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = envp; e && *e; e++) {
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    }
    return NULL;
}

static bool same_value(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/*
 * Whether the image an exec starts with envp loads this tracer and looks in
 * this trace directory, so that it can complete the trace: only then is the
 * marker worth leaving (execfold.h). Otherwise `cutrace recover` does it.
 */
void ct_session_before_exec(char *const envp[])
{
    bool traced =
        envp == environ || (same_value(getenv("LD_PRELOAD"), env_value(envp, "LD_PRELOAD")) &&
                            same_value(S.dir, env_value(envp, "CUTRACE_DIR")));
    finish("exec", traced);
}

void ct_session_resume(void)
{
    if (S.pid != getpid() || !S.ring.hdr)
        return;
    ct_ring_note_end(&S.ring, "");
    if (S.exec_marked)
        ct_execfold_unmark(S.dir, S.pid);
    S.exec_marked = false;
    /* Told "exec" (there was no ring file to hand over): it goes on after all. */
    if (__atomic_load_n(&S.finished, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&S.state, __ATOMIC_ACQUIRE) == CT_ON && ct_writer_alive(S.writer))
        ct_writer_flush(S.writer, "running", CT_FLUSH_TIMEOUT_MS);
    __atomic_store_n(&S.finished, 0, __ATOMIC_RELEASE);
}

static void before_fork(void)
{
    pthread_mutex_lock(&S.start_mu);
    if (S.writer)
        ct_writer_before_fork(S.writer);
}

static void after_fork_parent(void)
{
    if (S.writer)
        ct_writer_after_fork_parent(S.writer);
    pthread_mutex_unlock(&S.start_mu);
}

/*
 * The child has one thread and a copy of our memory. The writer (its thread
 * is gone, its SQLite handle is the parent's) and the ring (not mapped here:
 * MADV_DONTFORK) are abandoned, not freed; the child starts a session of its
 * own at its first CUDA event. Also what a raw fork's child does when it
 * notices (take_over_after_raw_fork); start_drops is kept there, since a
 * handler of the thread taking over may have counted into it already.
 */
static void become_child_session(void)
{
    pthread_mutex_init(&S.start_mu, NULL);
    S.writer = NULL;
    memset(&S.ring, 0, sizeof S.ring);
    S.ring_path[0] = '\0';
    /* The parent's descriptor is not ours to keep open (the lock on it is the
     * parent's and stays so: POSIX locks are not inherited). */
    if (S.ring_fd >= 0)
        close(S.ring_fd);
    S.ring_fd = -1;
    S.seq = 0;
    S.finished = 0;
    S.pid = getpid();
    S.start_wall_ns = ct_wall_ns();
    S.start_mono_ns = ct_now_ns();
    __atomic_store_n(&S.state, S.disabled_by_config ? CT_OFF : CT_IDLE, __ATOMIC_RELEASE);
    ct_thread_after_fork_child();
    ct_warn_reset();
}

static void after_fork_child(void)
{
    __atomic_store_n(&S.start_drops, 0, __ATOMIC_RELAXED);
    become_child_session();
    /* The page was wiped by the fork: this child's session is its own now. */
    if (S.owner)
        __atomic_store_n(S.owner, OWNER_THIS_PROCESS, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void session_load(void)
{
    configure();
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    /* This image may have replaced a traced one by exec: one readlink tells. */
    if (!S.disabled_by_config)
        ct_execfold_complete(S.dir, S.pid);
}

__attribute__((destructor)) static void session_unload(void)
{
    ct_session_finish("exit");
}
