/*
 * session.c - lifecycle of a traced process.
 *
 * States: IDLE (library loaded, no CUDA event yet, no file), ON (trace
 * files exist, writer running), OFF (not traced: disabled by the user, a
 * setuid program, or the tracer could not write; the program runs on
 * untouched). The only lock, start_mu, is taken to leave IDLE and around
 * fork(); the steady state reads `state` with one atomic load.
 *
 * Files are created lazily so that the many processes of a server that never
 * touch CUDA (tokenizers, shell wrappers) leave nothing behind. Each is made
 * with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600: never overwriting, never
 * following a planted symlink.
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
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "device.h"
#include "envcap.h"
#include "store.h"
#include "procinfo.h"
#include "ring.h"
#include "stacks.h"
#include "thread.h"
#include "tracefile.h"
#include "versions.h"
#include "warn.h"
#include "writer.h"

#define CT_DEFAULT_BUFFER_MB 8
#define CT_MAX_BUFFER_MB     64 /* the memory a tracer may take from a process */
#define CT_MIN_SLOTS         64
#define CT_FLUSH_TIMEOUT_MS  3000
#define CT_DEFAULT_DIR       "cutrace-trace"

enum ct_state { CT_IDLE = 0, CT_ON, CT_OFF };

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
    int ring_fd; /* open and flock()ed while the process lives */
    struct ct_ring ring;
    struct ct_writer *writer;
} S = {.start_mu = PTHREAD_MUTEX_INITIALIZER, .ring_fd = -1};

bool ct_session_tracing(void)
{
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
 * processes of one launch write into one directory whatever their cwd.
 */
static void configure(void)
{
    if (S.configured)
        return;
    S.configured = true;
    S.pid = getpid();
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

    unsigned long mb = CT_DEFAULT_BUFFER_MB;
    const char *b = getenv("CUTRACE_BUFFER_MB");
    if (b && *b) {
        char *end;
        unsigned long v = strtoul(b, &end, 10);
        if (*end == '\0' && v >= 1 && v <= CT_MAX_BUFFER_MB)
            mb = v;
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
 */
static void *file_ring(const struct ct_tracefile *files, size_t bytes, uint64_t capacity,
                       const struct ct_ring_owner *owner, const char **why)
{
    int fd = open(files->ring_tmp_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        *why = strerror(errno);
        return MAP_FAILED;
    }
    void *mem = MAP_FAILED;
    int rc = posix_fallocate(fd, 0, (off_t)bytes);
    if (rc == 0) {
        mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        rc = mem == MAP_FAILED ? errno : 0;
    }
    if (rc == 0 && flock(fd, LOCK_EX | LOCK_NB) != 0)
        rc = errno;
    if (rc == 0) {
        ct_ring_format(mem, capacity, owner);
        if (ct_tracefile_publish(files->ring_tmp_path, files->ring_path) != 0)
            rc = errno;
    }
    if (rc != 0) {
        *why = strerror(rc);
        if (mem != MAP_FAILED)
            munmap(mem, bytes);
        unlink(files->ring_tmp_path);
        close(fd);
        return MAP_FAILED;
    }
    S.ring_fd = fd;
    return mem;
}

static bool map_ring(const struct ct_tracefile *files)
{
    /* Under a file-size limit the ring shrinks to fit in it rather than giving up. */
    size_t budget = S.buffer_bytes;
    struct rlimit fsize;
    if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
        fsize.rlim_cur / 2 < budget)
        budget = fsize.rlim_cur / 2;
    uint64_t capacity = CT_MIN_SLOTS;
    while (ct_ring_bytes(capacity * 2) <= budget)
        capacity *= 2;
    size_t bytes = ct_ring_bytes(capacity);

    char boot_id[40];
    ct_procinfo_boot_id(boot_id, sizeof boot_id);
    struct ct_ring_owner owner = {S.pid, S.start_wall_ns, S.start_mono_ns, files->db_name, boot_id};
    const char *why = "file size limit";
    void *mem = bytes > budget ? MAP_FAILED : file_ring(files, bytes, capacity, &owner, &why);
    if (mem == MAP_FAILED) {
        ct_warn_once(CT_PROBLEM_RING,
                     "no crash-safe buffer in %s (%s); records not yet written are lost if the "
                     "process is killed",
                     S.dir, why);
        S.ring_path[0] = '\0';
        mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            return false;
        ct_ring_format(mem, capacity, &owner);
    }
    /* A forked child must not write into its parent's ring. */
    madvise(mem, bytes, MADV_DONTFORK);
    bool attached = ct_ring_attach(&S.ring, mem, bytes);
    assert(attached);
    return attached;
}

/*
 * Makes the trace file complete (schema, process, environment) under its
 * hidden name in this thread, then publishes it: a reader never meets an
 * empty trace. This is the process's first CUDA event, never the steady
 * state; start_mu is held, so fork() waits for it.
 */
static bool make_trace_file(const struct ct_tracefile *files, struct ct_process_info *proc)
{
    char err[512];
    struct ct_store *st = ct_store_create(files->db_tmp_path, err, sizeof err);
    if (!st) {
        ct_warn_once(CT_PROBLEM_TRACE_DIR, "cannot write a trace in %s: %s; not tracing", S.dir,
                     err);
        unlink(files->db_tmp_path);
        return false;
    }
    struct ct_env_capture env = {0};
    if (ct_env_capture(environ, &env) != 0)
        env.count = 0;
    int rc = ct_store_begin(st);
    if (!rc)
        rc = ct_store_write_process(st, proc);
    if (!rc)
        rc = ct_store_write_env(st, env.vars, env.count);
    if (!rc)
        rc = ct_store_set_meta_text(st, "stacks", ct_stacks_describe());
    if (!rc)
        rc = ct_store_commit(st);
    if (rc)
        snprintf(err, sizeof err, "%s", ct_store_error(st));
    ct_env_capture_free(&env);
    ct_store_close(st);
    if (!rc && ct_tracefile_publish(files->db_tmp_path, files->db_path) != 0) {
        snprintf(err, sizeof err, "%s: %s", files->db_name, strerror(errno));
        rc = -1;
    }
    if (rc) {
        ct_warn_once(CT_PROBLEM_TRACE_DIR, "cannot write a trace in %s: %s; not tracing", S.dir,
                     err);
        unlink(files->db_tmp_path);
        return false;
    }
    return true;
}

static bool start_locked(void)
{
    configure();
    if (S.disabled_by_config)
        return false;
    if (ct_tracefile_mkdir(S.dir) != 0) {
        ct_warn_once(CT_PROBLEM_TRACE_DIR, "cannot create trace directory %s: %s; not tracing",
                     S.dir, strerror(errno));
        return false;
    }
    struct ct_process_info proc;
    memset(&proc, 0, sizeof proc);
    ct_procinfo_collect(&proc);
    proc.start_wall_ns = S.start_wall_ns;
    proc.start_mono_ns = S.start_mono_ns;
    struct ct_tracefile files;
    bool made = false;
    if (ct_tracefile_create(S.dir, proc.host, S.pid, S.start_wall_ns, &files) != 0)
        ct_warn_once(CT_PROBLEM_TRACE_DIR, "cannot create a trace file in %s: %s; not tracing",
                     S.dir, strerror(errno));
    else
        made = make_trace_file(&files, &proc);
    ct_procinfo_free(&proc);
    if (!made)
        return false;

    snprintf(S.ring_path, sizeof S.ring_path, "%s", files.ring_path);
    if (!map_ring(&files))
        return false;

    struct ct_writer_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.db_path, sizeof cfg.db_path, "%s", files.db_path);
    cfg.ring = &S.ring;
    cfg.probes.describe_device = ct_device_describe;
    cfg.probes.versions = ct_library_versions;
    cfg.probes.objects_changed = ct_stacks_objects_changed;
    cfg.record_objects = ct_stacks_enabled();
    cfg.interval_ms = 20;
    char err[256];
    S.writer = ct_writer_start(&cfg, err, sizeof err);
    if (!S.writer) {
        ct_warn_once(CT_PROBLEM_WRITER, "%s; not tracing", err);
        return false;
    }
    return true;
}

static int start(void)
{
    pthread_mutex_lock(&S.start_mu);
    int state = __atomic_load_n(&S.state, __ATOMIC_ACQUIRE);
    if (state == CT_IDLE) {
        state = start_locked() ? CT_ON : CT_OFF;
        __atomic_store_n(&S.state, state, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&S.start_mu);
    return state;
}

static bool writer_alive(void)
{
    return ct_writer_alive(S.writer);
}

void ct_session_append(struct ct_record *rec)
{
    int state = __atomic_load_n(&S.state, __ATOMIC_ACQUIRE);
    if (state == CT_IDLE)
        state = start();
    if (state != CT_ON)
        return;
    if (!writer_alive()) {
        __atomic_store_n(&S.state, CT_OFF, __ATOMIC_RELEASE);
        return;
    }
    ct_ring_push(&S.ring, rec, writer_alive);
    if (__atomic_load_n(&S.finished, __ATOMIC_ACQUIRE))
        ct_writer_flush(S.writer, NULL, CT_FLUSH_TIMEOUT_MS);
}

void ct_session_finish(const char *end_state)
{
    /* A vfork child runs in our memory but is not this process. */
    if (S.pid != getpid())
        return;
    /* Said in the ring too (even after the writer failed): recovery stores it. */
    if (S.ring.hdr)
        ct_ring_note_end(&S.ring, end_state);
    if (__atomic_load_n(&S.state, __ATOMIC_ACQUIRE) != CT_ON || !ct_writer_alive(S.writer))
        return; /* reported when the writer stopped; the ring keeps what it did not write */
    if (!ct_writer_flush(S.writer, end_state, CT_FLUSH_TIMEOUT_MS)) {
        if (!ct_writer_alive(S.writer))
            return; /* it stopped while we waited, and said so */
        ct_warn_once(CT_PROBLEM_FLUSH_TIMEOUT,
                     "could not write the last records before %s; they stay in %s", end_state,
                     S.ring_path[0] ? S.ring_path : "memory (lost)");
        return;
    }
    /* Everything is in the database; records made from now on are flushed one by one. */
    if (S.ring_path[0] && !__atomic_load_n(&S.finished, __ATOMIC_ACQUIRE))
        unlink(S.ring_path);
    __atomic_store_n(&S.finished, 1, __ATOMIC_RELEASE);
}

void ct_session_resume(void)
{
    if (S.pid != getpid() || !S.ring.hdr)
        return;
    ct_ring_note_end(&S.ring, "");
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
 * own at its first CUDA event.
 */
static void after_fork_child(void)
{
    pthread_mutex_init(&S.start_mu, NULL);
    S.writer = NULL;
    memset(&S.ring, 0, sizeof S.ring);
    S.ring_path[0] = '\0';
    /* Our copy of the parent's ring fd would keep its lock (its "alive" flag) held. */
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

__attribute__((constructor)) static void session_load(void)
{
    configure();
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

__attribute__((destructor)) static void session_unload(void)
{
    ct_session_finish("exit");
}
