/*
 * test_pack.c - the "pack" suite: a run with a process killed by SIGKILL
 * (its ring and -wal still there) packed by `cutrace pack`, the pack copied
 * elsewhere and read there by the reports with the directory's output,
 * queried across ranks with plain SQL, redacted as the traces are; the
 * warning when only the *.db files of such a run are copied; several
 * directories read as one run.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

#define SECRET "hunter2-pack-secret"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Runs a shell command (printf-style); it must succeed. */
static void shell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void shell(const char *fmt, ...)
{
    char cmd[9000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

/* Files in dir ending in suffix. */
static int count_suffix(const char *dir, const char *suffix)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls %s/*%s 2>/dev/null | wc -l", dir, suffix);
    FILE *p = popen(cmd, "r");
    int n = -1;
    ck_assert_int_eq(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

/*
 * A 4-rank NCCL job that finished, and one process killed by SIGKILL while
 * it makes calls, its ring and -wal left in the trace directory. The
 * secret is in an environment variable the traces record (redacted).
 */
static void killed_run(struct world *w)
{
    w->extra_env[0] = "CUTRACE_FAKE_GPUS=8";
    w->extra_env[1] = "NCCL_IB_PASSWD=" SECRET;
    w->extra_env[2] = "NCCL_PROXY=http://bob:" SECRET "@proxy:3128/";
    const char *job[] = {build_path("progs/tp_collectives"), "4", "3", NULL};
    struct run r = run_prog(w, true, job, 120);
    ck_assert_msg(r.status == 0, "tp_collectives: %s", r.err);
    run_free(&r);

    char counter_path[4096];
    snprintf(counter_path, sizeof counter_path, "%s/counter", w->root);
    int fd = open(counter_path, O_RDWR | O_CREAT, 0600);
    ck_assert_int_eq(ftruncate(fd, 8), 0);
    volatile uint64_t *counter = mmap(NULL, 8, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    /* Paced: its commits wait in the -wal (no checkpoint yet) when it dies. */
    const char *argv[] = {build_path("progs/rt_counter"), counter_path, "200", NULL};
    pid_t pid = spawn_prog(w, true, argv);
    /* Killed once its writer has committed (the -wal is there) and it went on. */
    for (int waited = 0;
         (*counter < 100 || count_suffix(w->trace_dir, ".db-wal") == 0) && waited < 2000; waited++)
        sleep_ms(5);
    sleep_ms(50);
    kill(pid, SIGKILL);
    ck_assert_int_eq(wait_prog(pid, 30), 128 + SIGKILL);
    ck_assert_uint_gt(*counter, 0);
    munmap((void *)counter, 8);
    ck_assert_int_eq(count_suffix(w->trace_dir, ".ring"), 1);
    ck_assert_int_eq(count_suffix(w->trace_dir, ".db-wal"), 1);
    ck_assert_int_eq(count_suffix(w->trace_dir, ".db"), 5);
}

START_TEST(test_killed_run_packed_and_read_elsewhere)
{
    struct world w;
    world_init(&w);
    killed_run(&w);

    /* The sharing that loses it: only the *.db files copied. */
    char copy[4200], pack[4200], elsewhere[4200], moved[4400];
    snprintf(copy, sizeof copy, "%s/dbonly", w.root);
    shell("mkdir %s && cp %s/*.db %s", copy, w.trace_dir, copy);
    const char *summary_copy[] = {"summary", copy, NULL};
    struct run r = harness_cutrace(&w, summary_copy);
    ck_assert_msg(strstr(r.err, "cutrace: ") && strstr(r.err, "-wal and .ring files are missing"),
                  "no warning for the copy without -wal and .ring:\n%s", r.err);
    run_free(&r);

    /* The *.db and *.ring files without the -wal: the .db lacks the calls
     * the ring says were committed. */
    char with_ring[4200];
    snprintf(with_ring, sizeof with_ring, "%s/dbring", w.root);
    shell("mkdir %s && cp %s/*.db %s/*.ring %s", with_ring, w.trace_dir, w.trace_dir, with_ring);
    const char *summary_ring[] = {"summary", with_ring, NULL};
    r = harness_cutrace(&w, summary_ring);
    ck_assert_msg(strstr(r.err, "its -wal file is missing"),
                  "no warning for the copy without -wal:\n%s", r.err);
    run_free(&r);

    snprintf(pack, sizeof pack, "%s/run.cutrace", w.root);
    const char *pack_args[] = {"pack", w.trace_dir, "-o", pack, NULL};
    r = harness_cutrace(&w, pack_args);
    ck_assert_msg(r.status == 0, "pack: %s", r.err);
    ck_assert_uint_eq(r.out_len, 0);
    run_free(&r);
    /* Folded as every report folds; the run is otherwise as it was. */
    ck_assert_int_eq(count_suffix(w.trace_dir, ".ring"), 0);
    ck_assert_int_eq(count_suffix(w.trace_dir, ".db"), 5);

    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", w.root);
    snprintf(moved, sizeof moved, "%s/run.cutrace", elsewhere);
    shell("mkdir %s && cp %s %s", elsewhere, pack, elsewhere);

    char dir_prefix[4200], pack_prefix[4500];
    snprintf(dir_prefix, sizeof dir_prefix, "%s/", w.trace_dir);
    snprintf(pack_prefix, sizeof pack_prefix, "%s:", moved);
    static const char *const reports[][6] = {
        {"summary", "--json", NULL},
        {"collectives", "--json", NULL},
        {"timeline", "--json", NULL},
        {"budget", "--framework", "sglang", "--mem-fraction-static", "0.8", NULL},
        {"summary", NULL},
    };
    for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++) {
        int status_dir, status_pack;
        char *a = report_without_paths(&w, reports[i], w.trace_dir, dir_prefix, &status_dir);
        char *b = report_without_paths(&w, reports[i], moved, pack_prefix, &status_pack);
        ck_assert_int_eq(status_dir, status_pack);
        ck_assert_msg(strcmp(a, b) == 0, "%s differs:\n%.1500s\n---\n%.1500s", reports[i][0], a, b);
        free(a);
        free(b);
    }

    /* Plain SQL over every rank of the pack. */
    sqlite3 *db = tsql_open(moved, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT count(DISTINCT process) FROM calls"), 5);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM (SELECT process FROM allocations"
                                  " GROUP BY process)"),
                     5);
    ck_assert_int_eq(tsql_int(db, "SELECT count(DISTINCT rank) FROM communicators"
                                  " WHERE api = 'ncclCommInitRank'"),
                     4);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM meta WHERE key = 'end_state'"
                                  " AND value = 'killed'"),
                     1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM env WHERE name = 'NCCL_IB_PASSWD'"
                                  " AND value = '<redacted>'"),
                     5);
    /* docs/schema.md's examples for packs. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM (SELECT c.rank, a.bytes FROM (SELECT"
                                  " process, sum(size) AS bytes FROM allocations GROUP BY process)"
                                  " a JOIN communicators c USING (process)"
                                  " WHERE c.api = 'ncclCommInitRank')"),
                     4);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM (SELECT t.file, count(*) FROM calls"
                                  " JOIN pack_traces t USING (process) GROUP BY process)"),
                     5);
    sqlite3_close(db);
    /* Redacted as the traces are: the secret is nowhere in the file. */
    char cmd[4600];
    snprintf(cmd, sizeof cmd, "grep -q -a '%s' %s", SECRET, moved);
    ck_assert_int_ne(system(cmd), 0);
    world_free(&w);
}
END_TEST

START_TEST(test_several_directories_are_one_run)
{
    struct world w;
    world_init(&w);
    killed_run(&w);
    const char *ls_all[] = {"ls", w.trace_dir, NULL};
    struct run whole = harness_cutrace(&w, ls_all);
    ck_assert_int_eq(whole.status, 0);

    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/a", w.root);
    snprintf(b, sizeof b, "%s/b", w.root);
    shell("mkdir %s %s", a, b);
    /* The first two traces in a, the rest in b. */
    shell("cd %s && set -- *.db && cp \"$1\" \"$2\" %s && shift 2 && cp \"$@\" %s", w.trace_dir, a,
          b);
    const char *ls_both[] = {"ls", a, b, NULL};
    struct run both = harness_cutrace(&w, ls_both);
    ck_assert_msg(both.status == 0, "%s", both.err);
    ck_assert_uint_eq(count_lines(both.out), 6); /* the header and the 5 processes */
    ck_assert_str_eq(both.out, whole.out);
    run_free(&both);
    run_free(&whole);

    const char *twice[] = {"summary", a, w.trace_dir, NULL};
    struct run r = harness_cutrace(&w, twice);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "given twice"));
    run_free(&r);
    world_free(&w);
}
END_TEST

Suite *pack_suite(void)
{
    Suite *s = suite_create("pack");
    TCase *tc = tcase_create("pack");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_killed_run_packed_and_read_elsewhere);
    tcase_add_test(tc, test_several_directories_are_one_run);
    suite_add_tcase(s, tc);
    return s;
}
