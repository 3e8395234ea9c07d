/*
 * test_creation_kill.c - SIGKILL while a process is creating its trace.
 *
 * A process makes its trace files at its first CUDA call: the hidden
 * .<base>.db.tmp (SQLite, with its -wal and -shm while it is written), then
 * <base>.db, then the hidden .<base>.ring.tmp, then <base>.ring. A kill
 * between any two of these steps leaves a state no clean run leaves, and
 * `cutrace recover` must turn every one of them into a directory with no
 * temporary file left and no trace that says `running`, every trace readable
 * by `cutrace summary`.
 *
 * The moments are random but aimed: the test watches the trace directory
 * with inotify and kills rt_counter (whose first CUDA call comes right away)
 * at a random delay after its first trace file appears, spread over how long
 * creating the files takes on this machine (measured first), with some runs
 * killed at a random delay after the spawn instead, so that the moments just
 * before and after are covered too.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

#define MAX_RUNS      200
#define RUNS_BUDGET_S 16 /* the kills; recovery and the checks come after */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL);
}

static bool has_suffix(const char *name, const char *suffix)
{
    size_t len = strlen(name), slen = strlen(suffix);
    return len >= slen && strcmp(name + len - slen, suffix) == 0;
}

/* A temporary file of trace creation: .X.db.tmp, its SQLite side files, .X.ring.tmp. */
static bool is_creation_temp(const char *name)
{
    return strstr(name, ".db.tmp") != NULL || strstr(name, ".ring.tmp") != NULL;
}

/*
 * Waits (at most timeout_ms) for a file whose name ends in suffix to be
 * created in or moved into the watched directory; returns when it was seen
 * (mono_ns), or 0 on timeout. Events of other names are consumed.
 */
/*
 * Events read but not looked at yet: one read can hold several files'
 * events (a fast creation makes the .db.tmp and the .ring within one), and
 * the next wait must still see those after the one it returned on.
 */
static struct {
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t len, off;
    uint64_t seen; /* when they were read */
} pending;

static uint64_t wait_for_file(int inotify_fd, const char *suffix, int timeout_ms)
{
    uint64_t deadline = mono_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        while (pending.off < pending.len) {
            const struct inotify_event *e =
                (const struct inotify_event *)(pending.buf + pending.off);
            pending.off += (ssize_t)(sizeof *e + e->len);
            if (e->len && has_suffix(e->name, suffix))
                return pending.seen;
        }
        uint64_t now = mono_ns();
        if (now >= deadline)
            return 0;
        struct pollfd p = {inotify_fd, POLLIN, 0};
        if (poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) <= 0)
            continue;
        ssize_t n = read(inotify_fd, pending.buf, sizeof pending.buf);
        pending.len = n > 0 ? n : 0;
        pending.off = 0;
        pending.seen = mono_ns();
    }
}

static void drain(int inotify_fd)
{
    while (read(inotify_fd, pending.buf, sizeof pending.buf) > 0) {
    }
    pending.len = pending.off = 0;
}

/* What creation left in the directory: the files a clean run never leaves. */
struct leftovers {
    int temps;      /* creation temporaries */
    int dbs, rings; /* published files */
    int dbs_without_ring;
};

static struct leftovers survey(const char *dir)
{
    struct leftovers l = {0};
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (is_creation_temp(e->d_name)) {
            l.temps++;
        } else if (has_suffix(e->d_name, ".db")) {
            l.dbs++;
            char ring[4200];
            snprintf(ring, sizeof ring, "%s/%.*s.ring", dir, (int)(strlen(e->d_name) - 3),
                     e->d_name);
            struct stat st;
            if (lstat(ring, &st) != 0)
                l.dbs_without_ring++;
        } else if (has_suffix(e->d_name, ".ring")) {
            l.rings++;
        }
    }
    closedir(d);
    return l;
}

/* Every trace's end_state; fails the test on one that says running or nothing. */
static void assert_every_trace_ended(struct world *w)
{
    char **files;
    size_t n = list_traces(w, &files);
    for (size_t i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        const char *state = tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'");
        ck_assert_msg(strcmp(state, "running") != 0 && strcmp(state, "") != 0 &&
                          strcmp(state, "<none>") != 0,
                      "%s says end_state '%s' after recovery", files[i], state);
        sqlite3_close(db);
    }
    free_list(files, n);
}

/* One traced rt_counter, killed `delay_ns` after its spawn, or after its first
 * trace file appeared when after_first_file (or at once if none appears). */
static void kill_one(struct world *w, int inotify_fd, const char *counter, bool after_first_file,
                     uint64_t delay_ns)
{
    const char *argv[] = {build_path("progs/rt_counter"), counter, "200", NULL};
    drain(inotify_fd);
    pid_t pid = spawn_prog(w, true, argv);
    if (after_first_file)
        wait_for_file(inotify_fd, ".db.tmp", 5000);
    sleep_ns(delay_ns);
    kill(pid, SIGKILL);
    ck_assert_int_eq(wait_prog(pid, 30), 128 + SIGKILL);
}

START_TEST(test_sigkill_during_trace_creation_leaves_nothing_behind)
{
    unsigned seed = (unsigned)time(NULL);
    srand(seed);
    struct world w;
    world_init(&w);
    ck_assert_int_eq(mkdir(w.trace_dir, 0700), 0);
    int inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    ck_assert_int_ge(inotify_fd, 0);
    ck_assert_int_ge(inotify_add_watch(inotify_fd, w.trace_dir, IN_CREATE | IN_MOVED_TO), 0);
    char counter[4096];
    snprintf(counter, sizeof counter, "%s/counter", w.root);
    int fd = open(counter, O_RDWR | O_CREAT, 0600);
    ck_assert_int_eq(ftruncate(fd, 8), 0);
    close(fd);

    /* How long creation takes here: first file to published ring, and spawn
     * to first file, the longest of three runs (they are killed too). */
    uint64_t creation_ns = 0, startup_ns = 0;
    const char *argv[] = {build_path("progs/rt_counter"), counter, "200", NULL};
    for (int i = 0; i < 3; i++) {
        drain(inotify_fd);
        uint64_t spawned = mono_ns();
        pid_t pid = spawn_prog(&w, true, argv);
        uint64_t first = wait_for_file(inotify_fd, ".db.tmp", 10000);
        uint64_t ring = first ? wait_for_file(inotify_fd, ".ring", 10000) : 0;
        kill(pid, SIGKILL);
        ck_assert_int_eq(wait_prog(pid, 30), 128 + SIGKILL);
        ck_assert_msg(first && ring, "rt_counter made no trace files");
        if (ring - first > creation_ns)
            creation_ns = ring - first;
        if (first - spawned > startup_ns)
            startup_ns = first - spawned;
    }

    uint64_t budget_end = mono_ns() + (uint64_t)RUNS_BUDGET_S * 1000000000u;
    int runs = 0;
    for (; runs < MAX_RUNS && mono_ns() < budget_end; runs++) {
        /* Three in four aimed at the creation itself, a little past its end;
         * the others anywhere from the spawn to just after creation. */
        bool aimed = runs % 4 != 0;
        uint64_t span = aimed ? creation_ns + creation_ns / 4 : startup_ns + creation_ns * 2;
        uint64_t delay = (uint64_t)((double)rand() / RAND_MAX * (double)span);
        kill_one(&w, inotify_fd, counter, aimed, delay);
    }
    close(inotify_fd);

    struct leftovers before = survey(w.trace_dir);
    /* The test is about creation: it must have caught some (about one run in
     * three does, where creation takes a few milliseconds). */
    ck_assert_msg(before.temps + before.dbs_without_ring > 0,
                  "seed %u: %d runs, no kill during creation (creation %llu us)", seed, runs,
                  (unsigned long long)(creation_ns / 1000));

    const char *recover[] = {build_path("cutrace"), "recover", w.trace_dir, NULL};
    struct run r = run_prog(&w, false, recover, 60);
    ck_assert_msg(r.status == 0, "seed %u: cutrace recover failed (%d):\n%.3000s", seed, r.status,
                  r.err);
    run_free(&r);

    struct leftovers after = survey(w.trace_dir);
    ck_assert_msg(after.temps == 0 && after.rings == 0,
                  "seed %u: after recover %d temporary files and %d rings remain (before: %d "
                  "temporary, %d traces without a ring, %d rings, of %d runs)",
                  seed, after.temps, after.rings, before.temps, before.dbs_without_ring,
                  before.rings, runs);
    ck_assert_int_ge(after.dbs, before.dbs);
    assert_every_trace_ended(&w);

    const char *summary[] = {build_path("cutrace"), "summary", w.trace_dir, NULL};
    r = run_prog(&w, false, summary, 60);
    ck_assert_msg(r.status == 0 && r.err_len == 0, "seed %u: cutrace summary (%d):\n%.3000s", seed,
                  r.status, r.err);
    ck_assert_ptr_null(strstr(r.out, "still running"));
    run_free(&r);
    world_free(&w);
}
END_TEST

Suite *creation_kill_suite(void)
{
    Suite *s = suite_create("creation_kill");
    TCase *tc = tcase_create("creation_kill");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_sigkill_during_trace_creation_leaves_nothing_behind);
    suite_add_tcase(s, tc);
    return s;
}
