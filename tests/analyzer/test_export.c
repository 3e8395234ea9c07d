/*
 * test_export.c - `cutrace export`: the Perfetto trace and the Chrome JSON
 * of canned runs pass tests/export/check_export.py (every packet decoded,
 * the structure the viewers require checked) with the tracks and slices the
 * run has; the traces are left as found; bad usage and bad input get their
 * one-line errors and leave no output behind. The demo run and a 10^6-call
 * run are checked by tests/export/check.sh (make export-check).
 */
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <check.h>
#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECKER "tests/export/check_export.py"
#define HASH    UINT64_C(0xac3660ad478b5010)
#define T0      INT64_C(1000000000)
#define SECOND  INT64_C(1000000000)

static char *path_in(const char *dir, const char *name)
{
    char *p = NULL;
    ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
    return p;
}

/* Entries of dir, sorted names joined by spaces (malloc'd). */
static char *names_in(const char *dir)
{
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    ck_assert_int_ge(n, 0);
    char *out = calloc(1, 1);
    for (int i = 0; i < n; i++) {
        char *next = NULL;
        ck_assert_int_ge(asprintf(&next, "%s %s", out, list[i]->d_name), 0);
        free(out);
        out = next;
        free(list[i]);
    }
    free(list);
    return out;
}

/* Exports dir to out in format, expecting success and silence. */
static void export_ok(const char *dir, const char *out, const char *format)
{
    const char *args[] = {"export", dir, "-o", out, "--format", format, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0 && !r.signaled, "export: exit %d: %s", r.status, r.err);
    ck_assert_str_eq(r.out, "");
    proc_result_free(&r);
}

/* Runs the decoder on file with the --expect arguments; its exit status.
 * Its problems go to stderr, but for a file meant to fail (broken). */
static int decode_as(const char *file, const char *format, const char *expects, bool broken)
{
    ck_assert_msg(access(CHECKER, R_OK) == 0, "%s not found (run from the source tree)", CHECKER);
    char *cmd = NULL;
    ck_assert_int_ge(asprintf(&cmd, "python3 %s --format %s %s '%s' >/dev/null%s", CHECKER, format,
                              expects, file, broken ? " 2>&1" : ""),
                     0);
    int rc = system(cmd);
    free(cmd);
    ck_assert_msg(rc != -1 && WIFEXITED(rc), "could not run %s", CHECKER);
    return WEXITSTATUS(rc);
}

static int decode(const char *file, const char *format, const char *expects)
{
    return decode_as(file, format, expects, false);
}

START_TEST(test_export_one_process)
{
    char *dir = scratch_dir(), *outdir = scratch_dir();
    free(scenario_normal(dir));
    char *before = names_in(dir);
    char *pf = path_in(outdir, "run.pftrace"), *js = path_in(outdir, "run.json");
    export_ok(dir, pf, "proto");
    export_ok(dir, js, "json");
    /* Every call a slice on its thread; one GPU: five GPU categories, peer
     * and host, used and unexplained; its milestones and the process's end
     * as instants. */
    ck_assert_int_eq(decode(pf, "proto",
                            "--expect thread_slices=13 --expect process_tracks=1 "
                            "--expect thread_tracks=1 --expect counter_tracks=9 "
                            "--expect 'instants>=5' --expect 'counters>=8' --expect flows=0"),
                     0);
    ck_assert_int_eq(decode(js, "json",
                            "--expect thread_slices=13 --expect 'instants>=5' "
                            "--expect 'counters>=8' --expect flows=0"),
                     0);
    /* The decoder can fail: a count the file does not have. */
    ck_assert_int_eq(decode_as(pf, "proto", "--expect thread_slices=14", true), 1);
    char *after = names_in(dir);
    ck_assert_str_eq(before, after);
    /* Nothing but the outputs beside them: no temporary file left. */
    char *outs = names_in(outdir);
    ck_assert_str_eq(outs, " . .. run.json run.pftrace");
    free(outs);
    free(after);
    free(before);
    free(pf);
    free(js);
    scratch_remove(outdir);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_export_two_processes_share_a_gpu)
{
    char *dir = scratch_dir(), *outdir = scratch_dir();
    free(scenario_shared_gpu_first(dir, 0));
    free(scenario_shared_gpu_second(dir));
    char *pf = path_in(outdir, "shared.pftrace");
    export_ok(dir, pf, "proto");
    ck_assert_int_eq(decode(pf, "proto",
                            "--expect process_tracks=2 --expect thread_tracks=2 "
                            "--expect counter_tracks=9 --expect 'group_tracks>=2'"),
                     0);
    free(pf);
    scratch_remove(outdir);
    scratch_remove(dir);
}
END_TEST

/* Rank `rank` of 2: its init of HASH, `done` all-reduces, and when
 * `died`, killed inside one more (an inflight row, as recover leaves it). */
static void rank_trace(const char *dir, int64_t rank, int done, bool died)
{
    int64_t pid = 3000 + rank, start = INT64_C(1736071872345000000) + rank;
    char *path = fixture_trace_path(dir, "node1", pid, start);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid,
                                .host = "node1",
                                .start_wall_ns = start,
                                .start_mono_ns = 500000000,
                                .nccl_version = 22809};
    fixture_process(f, &p);
    fixture_meta(f, "end_state", died ? "killed" : "exit");
    fixture_meta_int(f, "alive_mono_ns", T0 + 10 * SECOND);
    fixture_set_clock(f, T0);
    int64_t comm = 0x5000 + rank;
    struct fixture_nccl_init init = {
        .comm = comm, .nranks = 2, .rank = rank, .hash = HASH, .device = rank};
    int64_t next = fixture_nccl_init(f, &init) + 1;
    for (int i = 0; i < done; i++)
        next = fixture_nccl_collective(f, CT_API_ncclAllReduce, comm, NCCL_FLOAT32, 4096, 0, 0) + 1;
    if (died) {
        char *sql = sqlite3_mprintf(
            "INSERT INTO inflight VALUES (%lld, NULL, %lld, %lld, %d, -1, 0, 0, 0, 0, 0, %lld,"
            " 1024, %d, 0, -1, 0, 0, 0, 0)",
            (long long)next, (long long)(T0 + 4 * SECOND), (long long)pid,
            (int)CT_API_ncclAllReduce, (long long)comm, NCCL_FLOAT32);
        fixture_exec(f, sql);
        sqlite3_free(sql);
    }
    fixture_close(f);
    free(path);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t size = file_size(path);
    char *text = calloc(1, size + 1);
    ck_assert_uint_eq(fread(text, 1, size, f), size);
    fclose(f);
    return text;
}

/* Exports dir into outdir as NAME.pftrace and NAME.json, decodes both with
 * the same --expect arguments; returns the JSON's text (malloc'd). */
static char *export_both(const char *dir, const char *outdir, const char *name, const char *expects)
{
    char *pf = NULL, *js = NULL;
    ck_assert_int_ge(asprintf(&pf, "%s/%s.pftrace", outdir, name), 0);
    ck_assert_int_ge(asprintf(&js, "%s/%s.json", outdir, name), 0);
    export_ok(dir, pf, "proto");
    export_ok(dir, js, "json");
    ck_assert_int_eq(decode(pf, "proto", expects), 0);
    ck_assert_int_eq(decode(js, "json", expects), 0);
    char *text = read_all(js);
    free(pf);
    free(js);
    return text;
}

START_TEST(test_export_collectives_and_a_killed_rank)
{
    char *dir = scratch_dir(), *outdir = scratch_dir();
    rank_trace(dir, 0, 3, false);
    rank_trace(dir, 1, 2, true);
    /* The 5 all-reduces on their communicator's rank tracks (and on their
     * threads, with the 2 inits); the communicator: one group, a track per
     * rank; each rank on its own GPU. */
    char *text = export_both(dir, outdir, "ranks",
                             "--expect thread_slices=7 --expect other_slices=5 "
                             "--expect process_tracks=2 --expect 'instants>=3'");
    assert_contains(text, "\"name\":\"NCCL communicator ac3660ad478b5010 (2 ranks)\"");
    assert_contains(text, "\"name\":\"rank 1, pid 3001 (comm_id ");
    assert_contains(text,
                    "\"name\":\"died inside ncclAllReduce #3, entered 6.0 s before the end\"");
    assert_contains(text, "\"name\":\"trace ends: killed\"");
    assert_contains(text, "\"name\":\"ncclAllReduce\",\"cat\":\"collective\"");
    free(text);
    scratch_remove(outdir);
    scratch_remove(dir);
}
END_TEST

/* A process of host `host` with pid 4242 and `calls` cudaMallocs. */
static void host_trace(const char *dir, const char *host, int calls)
{
    int64_t start = INT64_C(1736071872345000000);
    char *path = fixture_trace_path(dir, host, 4242, start);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {
        .pid = 4242, .host = host, .start_wall_ns = start, .start_mono_ns = 500000000};
    fixture_process(f, &p);
    fixture_meta(f, "end_state", "exit");
    fixture_set_clock(f, T0);
    for (int i = 0; i < calls; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000 + (int64_t)i * 4096, 4096, 0);
    fixture_close(f);
    free(path);
}

/* Three hosts' processes with one pid: the viewers would merge them, so the
 * second is shown 2^22 above (export.h); a process without calls has its
 * track and nothing on it. */
START_TEST(test_export_same_pid_on_three_hosts)
{
    char *dir = scratch_dir(), *outdir = scratch_dir();
    host_trace(dir, "node1", 3);
    host_trace(dir, "node2", 2);
    host_trace(dir, "node3", 0);
    char *text = export_both(dir, outdir, "hosts",
                             "--expect process_tracks=3 --expect thread_tracks=2 "
                             "--expect thread_slices=5");
    assert_contains(text, "\"pid\":4242,\"tid\":0,\"ts\":0,\"name\":\"process_name\","
                          "\"args\":{\"name\":\"pid 4242 on node1\"}");
    assert_contains(text, "\"pid\":4198546,\"tid\":0,\"ts\":0,\"name\":\"process_name\","
                          "\"args\":{\"name\":\"pid 4242 on node2\"}");
    assert_contains(text, "\"pid\":8392850,\"tid\":0,\"ts\":0,\"name\":\"process_name\","
                          "\"args\":{\"name\":\"pid 4242 on node3\"}");
    free(text);
    scratch_remove(outdir);
    scratch_remove(dir);
}
END_TEST

/* Ranges nested on a thread, on two threads, NCCL's own, start/end ranges
 * that overlap and end on other threads, a push and a start never ended, a pop and an
 * end with nothing open, and a mark. The count of ranges in its nvtx view. */
static int64_t nvtx_trace(const char *dir)
{
    char *path = fixture_trace_path(dir, "h", 700, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {
        .pid = 700, .host = "h", .start_wall_ns = NORMAL_START_WALL, .start_mono_ns = 1000};
    fixture_process(f, &p);
    fixture_meta(f, "end_state", "exit");
    fixture_set_clock(f, T0);
    fixture_call(f, CT_API_cudaSetDevice, 0, 0, 0, 0);
    fixture_nvtx(f, CT_API_nvtxDomainCreate, 1, 1, 0, "NCCL");
    fixture_nvtx(f, CT_API_nvtxRangePush, 1, 0, 0, "outer");
    fixture_nvtx(f, CT_API_nvtxRangePush, 1, 0, 1, "inner");
    fixture_nvtx(f, CT_API_nvtxRangePush, 2, 0, 0, "other thread");
    fixture_nvtx(f, CT_API_nvtxRangeStart, 1, 0, 5, "async A");
    fixture_call(f, CT_API_cudaMalloc, 0, 0x10000000, 1 << 20, 0);
    fixture_nvtx(f, CT_API_nvtxRangePush, 1, 1, 0, "ncclAllReduce");
    fixture_nvtx(f, CT_API_nvtxRangeStart, 2, 0, 6, "async B");
    fixture_nvtx(f, CT_API_nvtxRangePop, 1, 1, 0, NULL);
    fixture_nvtx(f, CT_API_nvtxRangePop, 1, 0, 1, NULL); /* inner */
    fixture_nvtx(f, CT_API_nvtxMark, 1, 0, 0, "ready");
    fixture_nvtx(f, CT_API_nvtxRangeEnd, 3, 0, 5, NULL);        /* another thread ends A */
    fixture_nvtx(f, CT_API_nvtxRangeStart, 3, 0, 7, "async C"); /* A's lane, never ended */
    fixture_nvtx(f, CT_API_nvtxRangePop, 2, 0, 0, NULL);
    fixture_nvtx(f, CT_API_nvtxRangePop, 2, 0, 0, NULL);  /* nothing pushed */
    fixture_nvtx(f, CT_API_nvtxRangeEnd, 1, 0, 99, NULL); /* no such range */
    fixture_nvtx(f, CT_API_nvtxRangeEnd, 1, 0, 6, NULL);
    fixture_call(f, CT_API_cudaFree, 0, 0x10000000, 0, 0); /* "outer" never popped */
    fixture_close(f);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT count(*) FROM nvtx WHERE kind IN ('push', 'start')",
                                        -1, &q, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    int64_t ranges = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    free(path);
    return ranges;
}

/* NVTX: a slice per range of the view (NCCL's too), nested as pushed, on a
 * track per thread and domain; overlapping start/end ranges on two lanes of
 * their own (a later one back on the first); the mark an instant; what
 * never ended closed at the process's end. */
START_TEST(test_export_nvtx_ranges)
{
    char *dir = scratch_dir(), *outdir = scratch_dir();
    int64_t ranges = nvtx_trace(dir);
    ck_assert_int_eq(ranges, 7);
    char *expects = NULL;
    ck_assert_int_ge(asprintf(&expects,
                              "--expect nvtx_slices=%lld --expect nvtx_instants=1 "
                              "--expect nvtx_tracks=5 --expect process_tracks=1",
                              (long long)ranges),
                     0);
    char *text = export_both(dir, outdir, "nvtx", expects);
    assert_contains(text, "\"args\":{\"name\":\"NVTX (default domain), thread 1\"}");
    assert_contains(text, "\"args\":{\"name\":\"NVTX (default domain), thread 2\"}");
    assert_contains(text, "\"args\":{\"name\":\"NVTX NCCL, thread 1\"}");
    assert_contains(text, "\"args\":{\"name\":\"NVTX (default domain), start/end ranges 1\"}");
    assert_contains(text, "\"args\":{\"name\":\"NVTX (default domain), start/end ranges 2\"}");
    assert_contains(text, "\"name\":\"outer\",\"cat\":\"nvtx\"");
    assert_contains(text, "\"name\":\"ncclAllReduce\",\"cat\":\"nvtx\"");
    assert_contains(text, "\"name\":\"ready\",\"cat\":\"nvtx\"");
    assert_contains(text, "\"end\":\"never ended: closed at the process end\"");
    /* "inner" opens inside "outer", on the same track. */
    const char *outer = strstr(text, "\"name\":\"outer\"");
    const char *inner = strstr(text, "\"name\":\"inner\"");
    ck_assert_ptr_nonnull(inner);
    ck_assert_msg(outer && inner > outer, "inner before outer");
    free(text);
    free(expects);
    scratch_remove(outdir);
    scratch_remove(dir);
}
END_TEST

/* The decoder is no test that cannot fail: each file below breaks one rule. */
/* The reports' filters choose what is drawn (export.h): the processes that
 * pass, with their collectives, and the GPUs they used. */
START_TEST(test_export_filters)
{
    char *dir = scratch_dir(), *hosts = scratch_dir(), *outdir = scratch_dir();
    rank_trace(dir, 0, 3, false);
    rank_trace(dir, 1, 2, true);
    char *out = path_in(outdir, "f.json");
    const char *rank1[] = {"export", "--rank", "1", dir, "-o", out, "--format", "json", NULL};
    struct proc_result r = run_cutrace(rank1, NULL);
    ck_assert_msg(r.status == 0, "export --rank 1: exit %d: %s", r.status, r.err);
    proc_result_free(&r);
    /* Rank 1: its init and 2 all-reduces on its thread, the 2 on its
     * communicator track, its end; nothing of rank 0 (pid 3000). */
    ck_assert_int_eq(decode(out, "json",
                            "--expect thread_slices=3 --expect other_slices=2 "
                            "--expect 'instants>=2'"),
                     0);
    char *text = read_all(out);
    assert_contains(text, "\"name\":\"rank 1, pid 3001 (comm_id ");
    ck_assert_ptr_null(strstr(text, "pid 3000"));
    ck_assert_ptr_null(strstr(text, "\"pid\":3000,"));
    free(text);
    /* --gpu: that GPU's group (nine counters) and the one process that used
     * it, of four ranks on six GPUs. */
    char *ranks = scratch_dir();
    scenario_nccl(ranks, NCCL_SCENARIO_DEFAULT); /* ranks 0-3, pids 1000-1003 */
    char *pf = path_in(outdir, "g.pftrace");
    const char *gpu2[] = {"export", "--gpu", "GPU-00000002", ranks, "-o", pf, NULL};
    r = run_cutrace(gpu2, NULL);
    ck_assert_msg(r.status == 0, "export --gpu: exit %d: %s", r.status, r.err);
    proc_result_free(&r);
    ck_assert_int_eq(decode(pf, "proto", "--expect process_tracks=1 --expect counter_tracks=9"), 0);
    const char *every[] = {"export", ranks, "-o", pf, NULL};
    r = run_cutrace(every, NULL);
    ck_assert_int_eq(r.status, 0);
    proc_result_free(&r);
    ck_assert_int_eq(decode(pf, "proto", "--expect process_tracks=4 --expect counter_tracks=54"),
                     0);
    scratch_remove(ranks);
    /* --host: one of three processes with one pid, still shown 2^22 above
     * the first (its shift is counted over every process). */
    host_trace(hosts, "node1", 3);
    host_trace(hosts, "node2", 2);
    host_trace(hosts, "node3", 0);
    const char *node2[] = {"export", "--host", "node2", hosts, "-o", out, "--format", "json", NULL};
    r = run_cutrace(node2, NULL);
    ck_assert_msg(r.status == 0, "export --host: exit %d: %s", r.status, r.err);
    proc_result_free(&r);
    ck_assert_int_eq(decode(out, "json", "--expect thread_slices=2"), 0);
    text = read_all(out);
    assert_contains(text, "\"pid\":4198546,\"tid\":0,\"ts\":0,\"name\":\"process_name\","
                          "\"args\":{\"name\":\"pid 4242 on node2\"}");
    ck_assert_ptr_null(strstr(text, "on node1"));
    ck_assert_ptr_null(strstr(text, "on node3"));
    free(text);
    /* Nothing matches: the usage error, and no file. */
    char *none = path_in(outdir, "none.pftrace");
    const char *nomatch[] = {"export", "--pid", "77", dir, "-o", none, NULL};
    r = run_cutrace(nomatch, NULL);
    ck_assert_msg(r.status == 2, "exit %d: %s", r.status, r.err);
    ck_assert_uint_eq(count_lines(r.err), 1);
    assert_contains(r.err, "cutrace export: --pid 77: no process of these traces matches "
                           "(pids 3000, 3001)");
    proc_result_free(&r);
    ck_assert_int_ne(access(none, F_OK), 0);
    const char *badlist[] = {"export", "--rank", "x", dir, "-o", none, NULL};
    r = run_cutrace(badlist, NULL);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "--rank x: expected numbers and ranges like 0,2,4-7");
    proc_result_free(&r);
    ck_assert_int_ne(access(none, F_OK), 0);
    free(none);
    free(pf);
    free(out);
    scratch_remove(outdir);
    scratch_remove(hosts);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_decoder_finds_broken_files)
{
    char *dir = scratch_dir(), *outdir = scratch_dir();
    free(scenario_normal(dir));
    char *pf = path_in(outdir, "cut.pftrace");
    export_ok(dir, pf, "proto");
    ck_assert_int_eq(decode(pf, "proto", ""), 0);
    truncate_file(pf, file_size(pf) - 7); /* the last packet cut short */
    ck_assert_int_eq(decode_as(pf, "proto", "", true), 1);
    /* A slice on a track never declared, on a sequence with no clock
     * snapshot: TracePacket{seq 1, flags 3, ts 5, clock 3, TrackEvent{
     * type BEGIN, track 7, name iid 1 (never interned)}}. */
    static const unsigned char undeclared[] = {0x0a, 0x11, 0x50, 0x01, 0x68, 0x03, 0x40,
                                               0x05, 0xd0, 0x03, 0x03, 0x5a, 0x06, 0x48,
                                               0x01, 0x58, 0x07, 0x50, 0x01};
    char *bad = path_in(outdir, "undeclared.pftrace");
    write_file(bad, undeclared, sizeof(undeclared));
    ck_assert_int_eq(decode_as(bad, "proto", "", true), 1);
    /* JSON: a slice of a process never named, never closed. */
    static const char open_slice[] =
        "{\"traceEvents\":[{\"ph\":\"B\",\"pid\":1,\"tid\":1,\"ts\":1,\"name\":\"x\"}]}";
    char *js = path_in(outdir, "open.json");
    write_file(js, open_slice, strlen(open_slice));
    ck_assert_int_eq(decode_as(js, "json", "", true), 1);
    free(js);
    free(bad);
    free(pf);
    scratch_remove(outdir);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_export_usage_errors)
{
    char *dir = scratch_dir();
    char *trace = scenario_normal(dir);
    size_t size = file_size(trace);
    char *out = path_in(dir, "x.pftrace");
    const char *no_output[] = {"export", dir, NULL};
    const char *bad_format[] = {"export", dir, "-o", out, "--format", "xml", NULL};
    const char *onto_trace[] = {"export", dir, "-o", trace, NULL};
    const char *onto_dir[] = {"export", dir, "-o", dir, NULL};
    const char *const *cases[] = {no_output, bad_format, onto_trace, onto_dir};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct proc_result r = run_cutrace(cases[i], NULL);
        ck_assert_msg(r.status == 2, "case %zu: exit %d: %s", i, r.status, r.err);
        ck_assert_msg(strncmp(r.err, "cutrace", 7) == 0, "case %zu: %s", i, r.err);
        proc_result_free(&r);
    }
    ck_assert_uint_eq(file_size(trace), size);
    ck_assert_int_ne(access(out, F_OK), 0);
    free(out);
    free(trace);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_export_bad_input_leaves_nothing)
{
    char *dir = scratch_dir(), *outdir = scratch_dir();
    char *trace = scenario_normal(dir);
    truncate_file(trace, 4096);
    char *out = path_in(outdir, "bad.pftrace");
    const char *args[] = {"export", dir, "-o", out, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    assert_one_line_error(&r, "node1-4242-", NULL);
    proc_result_free(&r);
    char *outs = names_in(outdir);
    ck_assert_str_eq(outs, " . ..");
    free(outs);
    free(out);
    free(trace);
    scratch_remove(outdir);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_export_through_a_link_or_to_stdout)
{
    char *dir = scratch_dir(), *outdir = scratch_dir();
    free(scenario_normal(dir)); /* the trace's path: not needed */
    /* A symbolic link is written through, never replaced by a rename. */
    char *target = path_in(outdir, "target.pftrace"), *link = path_in(outdir, "link.pftrace");
    write_file(target, "old", 3);
    ck_assert_int_eq(symlink(target, link), 0);
    const char *to_link[] = {"export", dir, "-o", link, NULL};
    struct proc_result r = run_cutrace(to_link, NULL);
    ck_assert_msg(r.status == 0, "export -o LINK: %d\n%s", r.status, r.err);
    proc_result_free(&r);
    struct stat st;
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_uint_gt(file_size(target), 3);
    char *outs = names_in(outdir);
    ck_assert_str_eq(outs, " . .. link.pftrace target.pftrace"); /* no temporary left */
    free(outs);
    /* Not a regular file (/dev/stdout): written in place, nothing renamed onto it. */
    const char *to_stdout[] = {"export", dir, "-o", "/dev/stdout", "--format", "json", NULL};
    r = run_cutrace(to_stdout, NULL);
    ck_assert_msg(r.status == 0, "export -o /dev/stdout: %d\n%s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "\"traceEvents\""));
    proc_result_free(&r);
    free(target);
    free(link);
    scratch_remove(outdir);
    scratch_remove(dir);
}
END_TEST

Suite *export_suite(void); /* test_main.c runs it */
Suite *export_suite(void)
{
    Suite *s = suite_create("export");
    TCase *tc = tcase_create("export");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_export_one_process);
    tcase_add_test(tc, test_export_two_processes_share_a_gpu);
    tcase_add_test(tc, test_export_collectives_and_a_killed_rank);
    tcase_add_test(tc, test_export_same_pid_on_three_hosts);
    tcase_add_test(tc, test_export_nvtx_ranges);
    tcase_add_test(tc, test_export_filters);
    tcase_add_test(tc, test_decoder_finds_broken_files);
    tcase_add_test(tc, test_export_usage_errors);
    tcase_add_test(tc, test_export_bad_input_leaves_nothing);
    tcase_add_test(tc, test_export_through_a_link_or_to_stdout);
    suite_add_tcase(s, tc);
    return s;
}
