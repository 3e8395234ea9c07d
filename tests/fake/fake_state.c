/*
 * fake_state.c - the shared state file behind the fake libcuda's memory
 * accounting (see fake_state.h for the model).
 *
 * Design choices, and why:
 *   - A robust, process-shared mutex inside the mapping rather than a file
 *     lock: it costs two atomic operations when uncontended (cudaMalloc stays
 *     cheap for the benchmarks) and the kernel hands it over when its owner
 *     dies, which a SIGKILLed rank does all the time in tests.
 *   - Each update writes the owner's slot and the device total together, and
 *     a locker that inherits a dead owner's mutex recomputes the totals from
 *     the slots, so a process killed between the two writes cannot leave the
 *     totals wrong.
 *   - flock() is used only while creating and initialising the file, so two
 *     processes starting together cannot both initialise the mutex.
 */
#include "fake_state.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#define FS_MAGIC   0x4354464b53544154ull /* "CTFKSTAT" */
#define FS_VERSION 2u

enum { SLOT_FREE = 0, SLOT_LIVE = 1 };

struct fs_slot {
    uint32_t state;
    int32_t pid;
    uint64_t start;
    uint64_t image; /* which exec() of that process claimed the slot */
    uint64_t used[FS_MAX_DEVICES];
};

struct fs_export {
    uint32_t live;
    struct fs_export_info info;
};

struct fs_shared {
    uint64_t magic;
    uint32_t version;
    uint32_t layout_size; /* sizeof(struct fs_shared) of the creator */
    pthread_mutex_t mu;
    uint32_t slot_hwm; /* slots at or above this index were never used */
    uint32_t export_hwm;
    uint64_t dev_used[FS_MAX_DEVICES]; /* == sum of slots[*].used[d] */
    struct fs_slot slots[FS_MAX_PROCS];
    struct fs_export exports[FS_MAX_EXPORTS];
};

static struct fs_shared *g_fs;
static int g_slot = -1;
static int32_t g_pid;
static uint64_t g_start;
static uint64_t g_image;

/* Fields of /proc/pid/stat: state (3), num_threads (20), starttime (22). */
static uint64_t read_stat(int32_t pid, char *state, long *threads)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* comm may contain spaces and parentheses: fields resume after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    while (*p == ' ')
        p++;
    if (state)
        *state = *p;
    for (int field = 3; field < 22; field++) {
        if (field == 20 && threads)
            *threads = strtol(p, NULL, 10);
        p = strchr(p, ' ');
        if (!p)
            return 0;
        p++;
    }
    return strtoull(p, NULL, 10);
}

uint64_t fs_proc_start_time(int32_t pid, char *state)
{
    return read_stat(pid, state, NULL);
}

static int proc_alive(int32_t pid, uint64_t start)
{
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    char state = 0;
    long threads = 0;
    uint64_t now = read_stat(pid, &state, &threads);
    if (now == 0) /* gone meanwhile, or no /proc at all: then kill() is all we have */
        return start == 0;
    /*
     * A zombie has already given its GPU memory back on a real system, unless
     * only its main thread exited (pthread_exit) and others still run.
     */
    if (state == 'X' || state == 'x' || (state == 'Z' && threads <= 1))
        return 0;
    return now == start;
}

/*
 * The kernel gives every exec() 16 fresh random bytes (AT_RANDOM): they tell
 * a previous image of this process (gone, its slot reusable) from another
 * copy of this library in the current image (alive, hands off).
 */
static uint64_t image_id(void)
{
    const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; r && i < 16; i++) {
        h ^= r[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void self_identity(void)
{
    if (g_pid != 0)
        return;
    g_pid = (int32_t)getpid();
    g_start = fs_proc_start_time(g_pid, NULL);
    g_image = image_id();
}

void fs_self(int32_t *pid, uint64_t *start)
{
    self_identity();
    *pid = g_pid;
    *start = g_start;
}

/* Totals are derived data: rebuild them from the slots. */
static void repair_locked(void)
{
    memset(g_fs->dev_used, 0, sizeof g_fs->dev_used);
    for (uint32_t i = 0; i < g_fs->slot_hwm && i < FS_MAX_PROCS; i++) {
        struct fs_slot *s = &g_fs->slots[i];
        if (s->state != SLOT_LIVE)
            continue;
        for (int d = 0; d < FS_MAX_DEVICES; d++)
            g_fs->dev_used[d] += s->used[d];
    }
}

static void lock_shared(void)
{
    int r = pthread_mutex_lock(&g_fs->mu);
    if (r == EOWNERDEAD) {
        repair_locked();
        r = pthread_mutex_consistent(&g_fs->mu);
    }
    if (r != 0) {
        fprintf(stderr, "cutrace fake libcuda: state mutex unusable: %s\n", strerror(r));
        abort();
    }
}

static void unlock_shared(void)
{
    int r = pthread_mutex_unlock(&g_fs->mu);
    assert(r == 0);
    (void)r;
}

static void remove_exports_of_locked(int32_t pid, uint64_t start)
{
    for (uint32_t i = 0; i < g_fs->export_hwm && i < FS_MAX_EXPORTS; i++) {
        struct fs_export *e = &g_fs->exports[i];
        if (e->live && e->info.pid == pid && e->info.start == start)
            memset(e, 0, sizeof *e);
    }
}

static void release_slot_locked(int i)
{
    struct fs_slot *s = &g_fs->slots[i];
    for (int d = 0; d < FS_MAX_DEVICES; d++) {
        assert(g_fs->dev_used[d] >= s->used[d]);
        g_fs->dev_used[d] -= s->used[d];
    }
    remove_exports_of_locked(s->pid, s->start);
    memset(s, 0, sizeof *s);
}

/* Releases the slots of processes that died without cleaning up. */
static void reap_locked(void)
{
    for (uint32_t i = 0; i < g_fs->slot_hwm && i < FS_MAX_PROCS; i++) {
        struct fs_slot *s = &g_fs->slots[i];
        if (s->state != SLOT_LIVE || (int)i == g_slot)
            continue;
        if (!proc_alive(s->pid, s->start))
            release_slot_locked((int)i);
    }
}

static int mkdir_parents(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int r = mkdir(path, 0700);
        int e = errno;
        *p = '/';
        if (r != 0 && e != EEXIST)
            return -e;
    }
    return 0;
}

static void init_file_locked(struct fs_shared *fs)
{
    memset(fs, 0, sizeof *fs);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int r = pthread_mutex_init(&fs->mu, &a);
    assert(r == 0);
    (void)r;
    pthread_mutexattr_destroy(&a);
    fs->version = FS_VERSION;
    fs->layout_size = (uint32_t)sizeof *fs;
    /* Written last: a reader that sees the magic sees an initialised mutex. */
    __atomic_store_n(&fs->magic, FS_MAGIC, __ATOMIC_RELEASE);
}

int fs_attached(void)
{
    return g_fs != NULL;
}

int fs_attach(const char *path, char *err, size_t errlen)
{
    assert(g_fs == NULL);
    char *dir = strdup(path);
    if (!dir) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int r = mkdir_parents(dir);
    free(dir);
    if (r < 0) {
        snprintf(err, errlen, "cannot create the directories of %s: %s", path, strerror(-r));
        return r;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = -errno;
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return r;
    }
    /* Only creation needs this lock; afterwards the mutex in the file rules. */
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
        ;
    struct stat st;
    int fresh = 0;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != sizeof(struct fs_shared)) {
        if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)sizeof(struct fs_shared)) != 0) {
            r = -errno;
            snprintf(err, errlen, "cannot size %s: %s", path, strerror(errno));
            close(fd);
            return r;
        }
        fresh = 1;
    }
    void *m = mmap(NULL, sizeof(struct fs_shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        r = -errno;
        snprintf(err, errlen, "cannot map %s: %s", path, strerror(errno));
        close(fd);
        return r;
    }
    struct fs_shared *fs = m;
    if (fresh || __atomic_load_n(&fs->magic, __ATOMIC_ACQUIRE) != FS_MAGIC ||
        fs->version != FS_VERSION || fs->layout_size != sizeof *fs)
        init_file_locked(fs);
    flock(fd, LOCK_UN);
    close(fd); /* the mapping keeps the file */
    g_fs = fs;
    return 0;
}

static int slot_is_mine(int i)
{
    const struct fs_slot *s = &g_fs->slots[i];
    return s->state == SLOT_LIVE && s->pid == g_pid && s->start == g_start && s->image == g_image;
}

static int join_locked(void)
{
    self_identity();
    if (g_slot >= 0 && slot_is_mine(g_slot))
        return 0;
    /* Never had one, or it was taken by a process that thought we were dead. */
    g_slot = -1;
    reap_locked();
    int free_slot = -1;
    for (uint32_t i = 0; i < FS_MAX_PROCS; i++) {
        struct fs_slot *s = &g_fs->slots[i];
        if (s->state == SLOT_LIVE && s->pid == g_pid && s->start == g_start &&
            s->image != g_image) {
            /* A previous image of this process, replaced by exec: its memory died with it. */
            release_slot_locked((int)i);
        }
        if (s->state != SLOT_LIVE && free_slot < 0)
            free_slot = (int)i;
    }
    if (free_slot < 0)
        return -ENOSPC;
    struct fs_slot *s = &g_fs->slots[free_slot];
    memset(s, 0, sizeof *s);
    s->pid = g_pid;
    s->start = g_start;
    s->image = g_image;
    s->state = SLOT_LIVE;
    if ((uint32_t)free_slot >= g_fs->slot_hwm)
        g_fs->slot_hwm = (uint32_t)free_slot + 1;
    g_slot = free_slot;
    return 0;
}

int fs_join(void)
{
    assert(g_fs);
    lock_shared();
    int r = join_locked();
    unlock_shared();
    return r;
}

void fs_forget_after_fork(void)
{
    g_slot = -1;
    g_pid = 0;
    g_start = 0;
}

void fs_leave(void)
{
    if (!g_fs || g_slot < 0)
        return;
    /* Only the process that claimed the slot may give it back. */
    if (g_pid != (int32_t)getpid())
        return;
    lock_shared();
    if (slot_is_mine(g_slot))
        release_slot_locked(g_slot);
    unlock_shared();
    g_slot = -1;
}

int fs_charge(int dev, uint64_t bytes, uint64_t total)
{
    assert(g_fs && dev >= 0 && dev < FS_MAX_DEVICES);
    lock_shared();
    int r = join_locked();
    if (r == 0) {
        uint64_t used = g_fs->dev_used[dev];
        if (bytes > total || used > total - bytes) {
            /* Memory of dead processes is only worth looking for when short. */
            reap_locked();
            used = g_fs->dev_used[dev];
        }
        if (bytes > total || used > total - bytes) {
            r = -ENOMEM;
        } else {
            g_fs->slots[g_slot].used[dev] += bytes;
            g_fs->dev_used[dev] += bytes;
        }
    }
    unlock_shared();
    return r;
}

void fs_uncharge(int dev, uint64_t bytes)
{
    assert(g_fs && dev >= 0 && dev < FS_MAX_DEVICES);
    if (bytes == 0 || g_slot < 0)
        return;
    lock_shared();
    if (slot_is_mine(g_slot)) {
        struct fs_slot *s = &g_fs->slots[g_slot];
        /*
         * Only short if our slot was once taken from us (another process
         * believed we were dead) and charges made before that come back now.
         */
        if (bytes > s->used[dev])
            bytes = s->used[dev];
        assert(g_fs->dev_used[dev] >= bytes);
        s->used[dev] -= bytes;
        g_fs->dev_used[dev] -= bytes;
    }
    unlock_shared();
}

uint64_t fs_used(int dev)
{
    assert(g_fs && dev >= 0 && dev < FS_MAX_DEVICES);
    lock_shared();
    reap_locked();
    uint64_t used = g_fs->dev_used[dev];
    unlock_shared();
    return used;
}

int fs_export_add(const struct fs_export_info *e)
{
    assert(g_fs);
    lock_shared();
    int r = join_locked();
    if (r == 0) {
        r = -ENOSPC;
        for (int pass = 0; pass < 2 && r != 0; pass++) {
            if (pass == 1)
                reap_locked();
            for (uint32_t i = 0; i < FS_MAX_EXPORTS; i++) {
                struct fs_export *x = &g_fs->exports[i];
                if (x->live)
                    continue;
                x->info = *e;
                x->info.pid = g_pid;
                x->info.start = g_start;
                x->live = 1;
                if (i >= g_fs->export_hwm)
                    g_fs->export_hwm = i + 1;
                r = 0;
                break;
            }
        }
    }
    unlock_shared();
    return r;
}

void fs_export_remove(uint64_t alloc_id)
{
    assert(g_fs);
    lock_shared();
    self_identity();
    for (uint32_t i = 0; i < g_fs->export_hwm && i < FS_MAX_EXPORTS; i++) {
        struct fs_export *x = &g_fs->exports[i];
        if (x->live && x->info.pid == g_pid && x->info.start == g_start &&
            x->info.alloc_id == alloc_id)
            memset(x, 0, sizeof *x);
    }
    unlock_shared();
}

int fs_export_lookup(int32_t pid, uint64_t start, uint64_t alloc_id, struct fs_export_info *out)
{
    assert(g_fs);
    int r = -ENOENT;
    lock_shared();
    for (uint32_t i = 0; i < g_fs->export_hwm && i < FS_MAX_EXPORTS; i++) {
        struct fs_export *x = &g_fs->exports[i];
        if (!x->live || x->info.pid != pid || x->info.start != start ||
            x->info.alloc_id != alloc_id)
            continue;
        if (proc_alive(pid, start)) {
            *out = x->info;
            r = 0;
        } else {
            reap_locked();
            memset(x, 0, sizeof *x); /* even if its exporter never had a slot */
        }
        break;
    }
    unlock_shared();
    return r;
}
