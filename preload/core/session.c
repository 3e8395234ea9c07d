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
#include <unistd.h>

#include "clock.h"
#include "device.h"
#include "envcap.h"
#include "procinfo.h"
#include "ring.h"
#include "thread.h"
#include "warn.h"
#include "writer.h"

#define CT_DEFAULT_BUFFER_MB 8
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
    struct ct_ring ring;
    struct ct_writer *writer;
} S = {.start_mu = PTHREAD_MUTEX_INITIALIZER};

bool ct_session_tracing(void)
{
    return __atomic_load_n(&S.state, __ATOMIC_ACQUIRE) != CT_OFF;
}

uint64_t ct_session_next_seq(void)
{
    return __atomic_add_fetch(&S.seq, 1, __ATOMIC_RELAXED);
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
        if (*end == '\0' && v >= 1 && v <= 1024)
            mb = v;
    }
    S.buffer_bytes = mb << 20;
}

static int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(tmp, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* out = dir/base+suffix; false (errno ENAMETOOLONG) if it does not fit. */
static bool trace_path(char *out, size_t cap, const char *base, const char *suffix)
{
    int n = snprintf(out, cap, "%s/%s%s", S.dir, base, suffix);
    if (n < 0 || (size_t)n >= cap) {
        errno = ENAMETOOLONG;
        return false;
    }
    return true;
}

/* Creates dir/<base>.db exclusively; on a name clash tries <base>-1, -2, ... */
static int create_db_file(char *base, size_t cap, char *db_path)
{
    char first[200];
    if ((size_t)snprintf(first, sizeof first, "%s", base) >= sizeof first)
        return -1;
    for (int attempt = 0; attempt < 100; attempt++) {
        if (attempt && (size_t)snprintf(base, cap, "%s-%d", first, attempt) >= cap)
            return -1;
        if (!trace_path(db_path, PATH_MAX, base, ".db"))
            return -1;
        int fd = open(db_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

static void base_name(char *out, size_t cap)
{
    char host[100];
    if (gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "host");
    host[sizeof host - 1] = '\0';
    for (char *h = host; *h; h++) {
        if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') || (*h >= '0' && *h <= '9') ||
              *h == '-' || *h == '.'))
            *h = '_';
    }
    snprintf(out, cap, "%s-%lld-%llu", host, (long long)S.pid, (unsigned long long)S.start_wall_ns);
}

/*
 * The ring is a file mapping so that records survive a SIGKILL. Blocks are
 * reserved up front (posix_fallocate): a full disk must fail here, not as a
 * SIGBUS inside the program's cudaMalloc. Where a file cannot be had, an
 * anonymous mapping keeps the program traced without crash safety.
 */
static bool map_ring(const char *db_name)
{
    uint64_t capacity = CT_MIN_SLOTS;
    while (ct_ring_bytes(capacity * 2) <= S.buffer_bytes)
        capacity *= 2;
    size_t bytes = ct_ring_bytes(capacity);

    void *mem = MAP_FAILED;
    const char *why = NULL;
    struct rlimit fsize;
    if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
        fsize.rlim_cur < bytes) {
        why = "file size limit";
    } else {
        int fd = open(S.ring_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int rc = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)bytes);
        if (rc == 0)
            mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (mem == MAP_FAILED)
            why = strerror(rc ? rc : errno);
        if (fd >= 0)
            close(fd);
        if (mem == MAP_FAILED && fd >= 0)
            unlink(S.ring_path);
    }
    if (mem == MAP_FAILED) {
        ct_warn_once(CT_PROBLEM_RING,
                     "no crash-safe buffer in %s (%s); records not yet written are lost if the "
                     "process is killed",
                     S.dir, why);
        S.ring_path[0] = '\0';
        mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            return false;
    }
    /* A forked child must not write into its parent's ring. */
    madvise(mem, bytes, MADV_DONTFORK);
    ct_ring_format(mem, capacity, S.pid, S.start_wall_ns, S.start_mono_ns, db_name);
    bool ok = ct_ring_attach(&S.ring, mem, bytes);
    (void)ok;
    return true;
}

static bool start_locked(void)
{
    configure();
    if (S.disabled_by_config)
        return false;
    if (mkdir_p(S.dir) != 0) {
        ct_warn_once(CT_PROBLEM_TRACE_DIR, "cannot create trace directory %s: %s; not tracing",
                     S.dir, strerror(errno));
        return false;
    }
    char base[256];
    struct ct_writer_config cfg = {0};
    base_name(base, sizeof base);
    if (create_db_file(base, sizeof base, cfg.db_path) != 0) {
        ct_warn_once(CT_PROBLEM_TRACE_DIR, "cannot create a trace file in %s: %s; not tracing",
                     S.dir, strerror(errno));
        return false;
    }
    char db_name[sizeof base + 4];
    snprintf(db_name, sizeof db_name, "%s.db", base);
    if (!trace_path(S.ring_path, sizeof S.ring_path, base, ".ring") || !map_ring(db_name)) {
        unlink(cfg.db_path);
        return false;
    }

    cfg.ring = &S.ring;
    ct_procinfo_collect(&cfg.process);
    cfg.process.start_wall_ns = S.start_wall_ns;
    cfg.process.start_mono_ns = S.start_mono_ns;
    if (ct_env_capture(environ, &cfg.env) != 0)
        cfg.env.count = 0;
    cfg.probes.describe_device = ct_device_describe;
    cfg.probes.versions = ct_cuda_versions;
    cfg.interval_ms = 20;

    char err[256];
    S.writer = ct_writer_start(&cfg, err, sizeof err);
    if (!S.writer) {
        ct_warn_once(CT_PROBLEM_WRITER, "%s; not tracing", err);
        ct_procinfo_free(&cfg.process);
        ct_env_capture_free(&cfg.env);
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
    if (S.pid != getpid() || __atomic_load_n(&S.state, __ATOMIC_ACQUIRE) != CT_ON)
        return;
    if (!ct_writer_flush(S.writer, end_state, CT_FLUSH_TIMEOUT_MS)) {
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
    if (S.pid != getpid())
        return;
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
