/*
 * test_hotpath.c - the hot path where a program does what a tracer would
 * rather it did not: CUDA calls from signal handlers (through a full ring,
 * and while the first call creates the trace), children made by the fork
 * system call itself, and the ring's size (CUTRACE_BUFFER_MB). Each test
 * runs the program untraced too and wants the same stdout and exit status;
 * a hang is a failure (run_prog kills a program that runs over its time).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cutrace/format.h"
#include "harness.h"
#include "suites.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* LD_PRELOAD of build/ libraries, colon-separated, into buf. */
static const char *preload_env(char *buf, size_t cap, const char *const libs[])
{
    size_t used = (size_t)snprintf(buf, cap, "LD_PRELOAD=");
    for (int i = 0; libs[i]; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ":" : "", build_path(libs[i]));
    ck_assert_uint_lt(used, cap);
    return buf;
}

static void assert_same_run(const struct run *traced, const struct run *plain)
{
    ck_assert_int_eq(traced->status, plain->status);
    ck_assert_str_eq(traced->out, plain->out);
    ck_assert_msg(traced->err_len == 0, "stderr: %s", traced->err);
}

/* Runs argv with exactly the libraries `libs` preloaded (libcutrace.so among them or not). */
static struct run run_with(struct world *w, const char *const libs[], const char *const argv[],
                           int timeout_s)
{
    char env[8192];
    w->extra_env[0] = preload_env(env, sizeof env, libs);
    struct run r = run_prog(w, false, argv, timeout_s);
    w->extra_env[0] = NULL;
    return r;
}

/*
 * Runs argv with the test shims `shims` preloaded, untraced, then traced
 * (libcutrace.so first): the same stdout (`want_out`) and exit status 0,
 * nothing on stderr. Returns the one trace, open, and its path in *path.
 */
static sqlite3 *run_alike(struct world *w, const char *const shims[], const char *const argv[],
                          int timeout_s, const char *want_out, char **path)
{
    const char *traced_libs[8] = {"libcutrace.so"};
    for (int i = 0; shims[i]; i++) {
        ck_assert_int_lt(i, 6);
        traced_libs[i + 1] = shims[i];
    }
    struct run plain = run_with(w, shims, argv, timeout_s);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_str_eq(plain.out, want_out);
    struct run traced = run_with(w, traced_libs, argv, timeout_s);
    assert_same_run(&traced, &plain);
    run_free(&plain);
    run_free(&traced);
    char **files;
    ck_assert_uint_eq(list_traces(w, &files), 1);
    *path = strdup(files[0]);
    free_list(files, 1);
    return tsql_open(*path, SQLITE_OPEN_READONLY);
}

/* Every sequence number is a recorded call or a counted drop: nothing silent. */
static int64_t assert_no_silent_gap(sqlite3 *db)
{
    int64_t dropped = tsql_int(db, "SELECT coalesce((SELECT value FROM meta WHERE "
                                   "key = 'dropped_records'), 0)");
    ck_assert_int_ge(dropped, 0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls") + dropped,
                     tsql_int(db, "SELECT max(seq) FROM calls"));
    return dropped;
}

/*
 * A handler that makes more calls than the ring has slots, sent to threads
 * that are waiting for ring space most of the time. Before the fix a thread
 * waiting for space held a claimed ticket, its handler's calls took the
 * tickets behind it, and once they wrapped round to its own slot nothing
 * could move: every run hung.
 */
START_TEST(test_handler_calls_through_a_full_ring_never_hang)
{
    struct world w;
    world_init(&w);
    w.extra_env[1] = "CUTRACE_BUFFER_MB=1"; /* 4,096 slots; a handler makes 5,000 calls */
    const char *argv[] = {build_path("progs/rt_sigcalls"), "8", "5000", "20", "2500", NULL};
    const char *shims[] = {"progs/libsigsafe_cuda.so", NULL};
    char *path;
    sqlite3 *db =
        run_alike(&w, shims, argv, 60,
                  "8 threads made 80000 calls; 20 handlers made 100000 calls; 0 failed\n", &path);
    int64_t dropped = assert_no_silent_gap(db);
    /* The handlers' calls are the only ones that may be dropped. */
    int64_t made = 8 * 5000 * 2 + 20 * 2500 * 2;
    ck_assert_int_eq(
        tsql_int(db, "SELECT count(*) FROM calls WHERE api IN ('cudaMalloc', 'cudaFree')") +
            dropped,
        made);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "exit");
    sqlite3_close(db);
    free(path);
    world_free(&w);
}
END_TEST

/*
 * The handler runs inside the process's first CUDA call, while libcutrace
 * creates the trace (libraise_in_fallocate.so raises it from the ring's
 * posix_fallocate, with the start lock held). Before the fix its call
 * waited for that lock, held by its own thread: a hang every run. Now its
 * calls (and the calls the runtime makes inside them) are counted as
 * dropped, and `cutrace summary` says so.
 */
START_TEST(test_handler_call_during_trace_creation_is_counted_not_waited_for)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_sigfirst"), "10", NULL};
    const char *shims[] = {"progs/libsigsafe_cuda.so", "progs/libraise_in_fallocate.so", NULL};
    char *path;
    sqlite3 *db = run_alike(&w, shims, argv, 30, "handled 1 signal(s), 10 more pairs\n", &path);
    int64_t dropped = assert_no_silent_gap(db);
    /* The program's 23 calls: all but the handler's two are there. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE api IN ('cudaMalloc', "
                                  "'cudaFree') AND NOT nested"),
                     21);
    ck_assert_int_ge(dropped, 2);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE size = 512"), 0);
    sqlite3_close(db);

    const char *args[] = {"summary", path, NULL};
    struct run summary = harness_cutrace(&w, args);
    ck_assert_int_eq(summary.status, 0);
    char want[128];
    snprintf(want, sizeof want, "%" PRId64 " calls not recorded", dropped);
    ck_assert_msg(strstr(summary.out, want), "summary lacks '%s':\n%s", want, summary.out);
    run_free(&summary);
    free(path);
    world_free(&w);
}
END_TEST

static sqlite3 *trace_of_pid(char **files, size_t n, int64_t pid)
{
    for (size_t i = 0; i < n; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        if (tsql_int(db, "SELECT pid FROM process") == pid)
            return db;
        sqlite3_close(db);
    }
    ck_abort_msg("no trace of process %lld", (long long)pid);
    return NULL;
}

/*
 * syscall(SYS_fork): no pthread_atfork handler runs in the child. Before
 * the fix it still used its parent's session, and its first CUDA call
 * wrote into the parent's ring, which is not mapped in it: SIGSEGV.
 */
START_TEST(test_raw_fork_child_traces_into_its_own_file)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_rawfork"), "wait", "5", NULL};
    struct run plain = run_prog(&w, false, argv, 30);
    ck_assert_int_eq(plain.status, 0);
    ck_assert_str_eq(plain.out, "child exited 0\nparent made 5 pairs, then 5 more\n");
    struct run traced = run_prog(&w, true, argv, 30);
    assert_same_run(&traced, &plain);

    char **files;
    size_t n = list_traces(&w, &files);
    ck_assert_uint_eq(n, 2);
    int64_t pids[2];
    for (size_t i = 0; i < 2; i++) {
        sqlite3 *db = tsql_open(files[i], SQLITE_OPEN_READONLY);
        pids[i] = tsql_int(db, "SELECT pid FROM process");
        sqlite3_close(db);
    }
    ck_assert_int_ne(pids[0], pids[1]);
    /* The parent is the one whose pid is the other's ppid. */
    sqlite3 *first = trace_of_pid(files, n, pids[0]);
    bool first_is_parent = tsql_int(first, "SELECT ppid FROM process") != pids[1];
    sqlite3_close(first);
    sqlite3 *parent = trace_of_pid(files, n, pids[first_is_parent ? 0 : 1]);
    sqlite3 *child = trace_of_pid(files, n, pids[first_is_parent ? 1 : 0]);
    ck_assert_int_eq(tsql_int(child, "SELECT ppid FROM process"),
                     tsql_int(parent, "SELECT pid FROM process"));
    const char *ours = "SELECT count(*) FROM calls WHERE api IN ('cudaMalloc', 'cudaFree') "
                       "AND NOT nested";
    ck_assert_int_eq(tsql_int(parent, ours), 20);
    ck_assert_int_eq(tsql_int(child, ours), 10);
    /* The child's trace is its own from its first call: numbered from 1. */
    ck_assert_int_eq(tsql_int(child, "SELECT min(seq) FROM calls"), 1);
    assert_no_silent_gap(child);
    ck_assert_str_eq(tsql_text(child, "SELECT value FROM meta WHERE key = 'end_state'"), "exit");
    ck_assert_str_eq(tsql_text(parent, "SELECT value FROM meta WHERE key = 'end_state'"), "exit");
    sqlite3_close(parent);
    sqlite3_close(child);
    free_list(files, n);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

/* Polls the program's stdout (a file) for its first line. */
static char *first_line_of(struct running *p, int timeout_s)
{
    static char line[256];
    for (int waited = 0; waited < timeout_s * 1000; waited += 10) {
        ssize_t n = pread(fileno(p->out), line, sizeof line - 1, 0);
        if (n > 0) {
            line[n] = '\0';
            char *nl = strchr(line, '\n');
            if (nl) {
                *nl = '\0';
                return line;
            }
        }
        sleep_ms(10);
    }
    kill(p->pid, SIGKILL);
    ck_abort_msg("no line from program %d in %d s", (int)p->pid, timeout_s);
    return NULL;
}

static size_t count_rings(struct world *w)
{
    DIR *d = opendir(w->trace_dir);
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        n += e->d_name[0] != '.' && len > 5 && strcmp(e->d_name + len - 5, ".ring") == 0;
    }
    closedir(d);
    return n;
}

/*
 * The parent is SIGKILLed while its raw-forked child (which made no CUDA
 * call) lives. Before the fix the child's copy of the ring's descriptor
 * kept the parent's flock, so `cutrace recover` took the dead parent for
 * alive and left its ring and its end state ("running") as they were.
 */
START_TEST(test_raw_fork_child_does_not_keep_dead_parents_ring_locked)
{
    /* The orphaned child becomes ours to reap. */
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/rt_rawfork"), "orphan", "5", NULL};
    struct running p = start_prog(&w, true, argv);
    int child = 0;
    ck_assert_int_eq(sscanf(first_line_of(&p, 30), "child %d", &child), 1);
    ck_assert_int_gt(child, 0);
    kill(p.pid, SIGKILL);
    struct run parent = finish_prog(&p, 30);
    ck_assert_int_eq(parent.status, 128 + SIGKILL);
    ck_assert_int_eq(kill(child, 0), 0); /* still alive */
    ck_assert_uint_eq(count_rings(&w), 1);

    const char *args[] = {"recover", w.trace_dir, NULL};
    struct run rec = harness_cutrace(&w, args);
    ck_assert_msg(rec.status == 0, "cutrace recover: %s", rec.err);
    ck_assert_msg(strstr(rec.out, "recovered "), "cutrace recover: %s", rec.out);
    ck_assert_uint_eq(count_rings(&w), 0);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'end_state'"), "killed");
    ck_assert_int_eq(
        tsql_int(db, "SELECT count(*) FROM calls WHERE api IN ('cudaMalloc', 'cudaFree')"), 10);
    sqlite3_close(db);
    free_list(files, 1);

    kill(child, SIGKILL);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    run_free(&rec);
    run_free(&parent);
    world_free(&w);
}
END_TEST

/* The live ring's header and size while rt_pause waits after its first call. */
static void paused_ring(struct world *w, const char *const argv[], uint64_t *capacity,
                        off_t *file_size, struct run *out)
{
    char go[4200];
    snprintf(go, sizeof go, "%s/go", w->root);
    unlink(go);
    struct running p = start_prog(w, true, argv);
    char path[4200] = "";
    for (int waited = 0; !path[0]; waited += 10) {
        ck_assert_msg(waited < 20000, "no ring appeared");
        DIR *d = opendir(w->trace_dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if (e->d_name[0] != '.' && len > 5 && strcmp(e->d_name + len - 5, ".ring") == 0)
                snprintf(path, sizeof path, "%s/%s", w->trace_dir, e->d_name);
        }
        if (d)
            closedir(d);
        if (!path[0])
            sleep_ms(10);
    }
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    struct ct_ring_header h;
    ck_assert_int_eq(pread(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    close(fd);
    *capacity = h.capacity;
    *file_size = st.st_size;
    int gofd = open(go, O_WRONLY | O_CREAT, 0600);
    ck_assert_int_ge(gofd, 0);
    close(gofd);
    *out = finish_prog(&p, 30);
    ck_assert_int_eq(out->status, 0);
    ck_assert_str_eq(out->out, "done after 2 more pairs\n");
}

/*
 * CUTRACE_BUFFER_MB is the size of the ring's slots (the header page is
 * extra), rounded down to a power of two records: the default 8 MiB holds
 * the 32,768 records the README promises (before the fix the header came
 * out of it and left 16,384). A value that is not a whole number of MiB
 * from 1 to 64 gets one warning naming it and the default is used (before
 * the fix, silently).
 */
START_TEST(test_buffer_size_is_exact_and_bad_values_warn_once)
{
    struct world w;
    world_init(&w);
    char go[4200];
    snprintf(go, sizeof go, "%s/go", w.root);
    const char *argv[] = {build_path("progs/rt_pause"), go, "2", NULL};
    struct {
        const char *value; /* NULL: unset */
        uint64_t slots;
        bool warns;
    } cases[] = {
        {NULL, 32768, false},  {"8", 32768, false}, {"1", 4096, false},  {"3", 8192, false},
        {"64", 262144, false}, {"0", 32768, true},  {"65", 32768, true}, {"abc", 32768, true},
        {"1.5", 32768, true},  {"-1", 32768, true}, {" 8", 32768, true}, {"8MB", 32768, true},
        {"", 32768, false}, /* empty: unset, as for every CUTRACE_ variable */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char env[64];
        const char *env_argv[] = {
            "/usr/bin/env", "CUTRACE_BUFFER_MB=", argv[0], argv[1], argv[2], NULL};
        const char *const *run_argv = argv;
        if (cases[i].value && cases[i].value[0]) {
            snprintf(env, sizeof env, "CUTRACE_BUFFER_MB=%s", cases[i].value);
            w.extra_env[0] = env;
        } else if (cases[i].value) {
            run_argv = env_argv; /* the harness cannot set an empty value */
        }
        uint64_t slots;
        off_t size;
        struct run r;
        paused_ring(&w, run_argv, &slots, &size, &r);
        w.extra_env[0] = NULL;
        const char *shown = cases[i].value ? cases[i].value : "(unset)";
        ck_assert_msg(slots == cases[i].slots, "CUTRACE_BUFFER_MB=%s: %llu slots, want %llu", shown,
                      (unsigned long long)slots, (unsigned long long)cases[i].slots);
        /* Ring 7: the entered marks follow the slots. */
        ck_assert_int_eq(size, (off_t)(CT_RING_HEADER_BYTES + slots * sizeof(struct ct_slot) +
                                       CT_RING_MARKS * sizeof(struct ct_mark)));
        if (cases[i].warns) {
            char want[128];
            snprintf(want, sizeof want, "cutrace: CUTRACE_BUFFER_MB=%s is not", cases[i].value);
            ck_assert_msg(strncmp(r.err, want, strlen(want)) == 0, "stderr: %s", r.err);
            ck_assert_msg(strstr(r.err, "using 8 (32768 records)"), "stderr: %s", r.err);
            ck_assert_uint_eq(count_lines(r.err), 1);
        } else {
            ck_assert_msg(r.err_len == 0, "CUTRACE_BUFFER_MB=%s: stderr: %s", shown, r.err);
        }
        run_free(&r);
    }
    world_free(&w);
}
END_TEST

Suite *hotpath_suite(void)
{
    Suite *s = suite_create("hotpath");
    TCase *tc = tcase_create("hotpath");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_handler_calls_through_a_full_ring_never_hang);
    tcase_add_test(tc, test_handler_call_during_trace_creation_is_counted_not_waited_for);
    tcase_add_test(tc, test_raw_fork_child_traces_into_its_own_file);
    tcase_add_test(tc, test_raw_fork_child_does_not_keep_dead_parents_ring_locked);
    tcase_add_test(tc, test_buffer_size_is_exact_and_bad_values_warn_once);
    suite_add_tcase(s, tc);
    return s;
}
