/*
 * owner.c - is the process that wrote a trace file gone? (see owner.h)
 *
 * The evidence, strongest first:
 *   - a boot id other than this host's: it ran before the last boot;
 *   - kill(pid, 0) says ESRCH: no such process (unlike /proc, kill is not
 *     hidden by hidepid=, and EPERM still means the process exists);
 *   - /proc/PID/stat says zombie: it has exited, only its parent has not
 *     reaped it;
 *   - the process now at that pid started after the owner did, so the pid
 *     was reused. /proc/PID/stat gives its start in clock ticks of
 *     CLOCK_BOOTTIME (rounded down). The owner started at or before the
 *     moment its tracer read CLOCK_MONOTONIC (start_mono_ns) and
 *     CLOCK_REALTIME (start_wall_ns); on the boottime clock that moment is at
 *     most start_mono_ns plus all the time this host has been suspended
 *     (boottime - monotonic now), so a start later than that, plus slack, is
 *     another process. Without the boot id (a file named but not yet written)
 *     only the wall clock is known, which can be stepped: its slack is wide.
 * A process in another pid namespace of the same host is not visible by its
 * pid here; files on a shared file system are judged by their host's name,
 * by the caller, before this is asked.
 */
#include "recover/owner.h"

#include "cutrace/ring.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define MONO_SLACK_NS (10 * 1000 * 1000ull) /* one tick of a 100 Hz clock */
/* The wall clock steps we tolerate between the owner's start and now. Wide:
 * it is used only for files of the few milliseconds of creation, and a wide
 * slack only keeps such a file until the pid's new process is gone too. */
#define WALL_SLACK_NS (60 * 1000 * 1000 * 1000ull)

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Reads at most cap - 1 bytes of a small /proc file, NUL-terminated; -1 if unreadable. */
static ssize_t read_proc(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

static const char *this_boot_id(void)
{
    static char id[64];
    static bool read_once;
    if (!read_once) {
        read_once = true;
        if (read_proc("/proc/sys/kernel/random/boot_id", id, sizeof(id)) < 0)
            id[0] = '\0';
        id[strcspn(id, "\n")] = '\0';
    }
    return id;
}

const char *owner_host(void)
{
    static char host[256];
    if (!host[0] && gethostname(host, sizeof(host) - 1) != 0)
        strcpy(host, "unknown");
    return host;
}

/*
 * The state letter and start time (clock ticks since boot) of pid, from
 * /proc/PID/stat; false if it cannot be read. The command name, field 2, may
 * hold anything, spaces and parentheses included: the fields after it start
 * after its last ')'.
 */
static bool process_stat(int64_t pid, char *state, unsigned long long *start_ticks)
{
    char path[64], buf[2048];
    snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
    if (read_proc(path, buf, sizeof(buf)) <= 0)
        return false;
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2])
        return false;
    *state = p[2];
    p += 2; /* field 3, the state */
    /* Fields 3..21 come before starttime (22). */
    for (int field = 3; field <= 21; field++) {
        p = strchr(p, ' ');
        if (!p)
            return false;
        p++;
    }
    char *end;
    errno = 0;
    *start_ticks = strtoull(p, &end, 10);
    return end != p && errno == 0;
}

/* The latest CLOCK_BOOTTIME (ns) at which the owner can have started. */
static uint64_t latest_start(const struct owner *o, bool same_boot)
{
    uint64_t boot_now = clock_ns(CLOCK_BOOTTIME);
    if (same_boot) {
        uint64_t mono_now = clock_ns(CLOCK_MONOTONIC);
        uint64_t suspended = boot_now > mono_now ? boot_now - mono_now : 0;
        return o->start_mono_ns + suspended + MONO_SLACK_NS;
    }
    uint64_t wall_now = clock_ns(CLOCK_REALTIME);
    uint64_t wall_at_boot = wall_now > boot_now ? wall_now - boot_now : 0;
    uint64_t latest_wall = o->start_wall_ns + WALL_SLACK_NS;
    return latest_wall > wall_at_boot ? latest_wall - wall_at_boot : 0;
}

enum owner_state owner_judge(const struct owner *o, const char **why)
{
    *why = NULL;
    /* kill(0 or negative) would address process groups: never asked. */
    assert(o->pid > 0 && o->pid <= INT32_MAX);
    if (o->pid <= 0 || o->pid > INT32_MAX)
        return OWNER_MAY_LIVE;
    const char *ours = this_boot_id();
    bool boot_known = o->boot_id && o->boot_id[0] && ours[0];
    if (boot_known && strcmp(o->boot_id, ours) != 0) {
        *why = "ran before this host's last boot";
        return OWNER_GONE;
    }
    if (kill((pid_t)o->pid, 0) != 0 && errno == ESRCH) {
        *why = "has exited";
        return OWNER_GONE;
    }
    char state;
    unsigned long long ticks;
    if (!process_stat(o->pid, &state, &ticks))
        return OWNER_MAY_LIVE;
    if (state == 'Z' || state == 'X') {
        *why = "has exited (not yet reaped)";
        return OWNER_GONE;
    }
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        return OWNER_MAY_LIVE;
    unsigned long long started_ns;
    if (__builtin_mul_overflow(ticks / (unsigned long long)hz, 1000000000ull, &started_ns))
        return OWNER_MAY_LIVE;
    started_ns += ticks % (unsigned long long)hz * (1000000000ull / (unsigned long long)hz);
    if (started_ns > latest_start(o, boot_known)) {
        *why = "has exited (its pid now belongs to a later process)";
        return OWNER_GONE;
    }
    return OWNER_MAY_LIVE;
}

/*
 * A live process holds a POSIX write lock on its ring (ring 6 on): it is the
 * process's own, so no child keeps it after the process dies, however the
 * child was made. F_GETLK only asks and needs no write access. The flock
 * after it is what builds before ring 6 hold for their life, and what two
 * cutraces folding at once exclude each other with.
 */
enum owner_ring owner_ring_lock(int fd)
{
    int held = ct_ring_lock_held(fd);
    if (held != 0)
        return held > 0 ? OWNER_RING_HELD : OWNER_RING_FAILED;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return OWNER_RING_TAKEN;
    return errno == EWOULDBLOCK ? OWNER_RING_HELD : OWNER_RING_FAILED;
}
