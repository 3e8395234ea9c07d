/*
 * test_conventions.c - what every report shares (docs/cli.md,
 * "Conventions"): --csv (RFC 4180, raw numbers) and its exclusion with
 * --json, the --rank/--pid/--host/--gpu filters matched by model/filter.c,
 * --fail-on-problem's exit 3 per report, the width from COLUMNS, and the
 * help texts listing the shared options and the exit-code table the same way.
 * The CSV writer and the range parser are tested in-process.
 */
#include "cli.h"
#include "out/csv.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- in-process: the CSV writer and the LIST parser ---- */

static char *csv_of(void (*fill)(struct csv_writer *w, FILE *out))
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    struct csv_writer w;
    fill(&w, f);
    fclose(f);
    return text;
}

static void fill_quoting(struct csv_writer *w, FILE *out)
{
    static const char *const head[] = {"name", "bytes", "note"};
    csv_begin(w, out, head, 3);
    csv_string(w, "plain");
    csv_int(w, 1073741824);
    csv_null(w);
    csv_end_row(w);
    csv_string(w, "a,b");
    csv_uint(w, UINT64_MAX);
    csv_string(w, "say \"hi\"\nnext line");
    csv_end_row(w);
    csv_string(w, " padded");
    csv_int(w, -5);
    csv_string(w, "bad \xff byte");
    csv_end_row(w);
}

START_TEST(test_csv_quoting)
{
    char *text = csv_of(fill_quoting);
    ck_assert_str_eq(text, "name,bytes,note\r\n"
                           "plain,1073741824,\r\n"
                           "\"a,b\",18446744073709551615,\"say \"\"hi\"\"\nnext line\"\r\n"
                           "\" padded\",-5,bad \xef\xbf\xbd byte\r\n");
    free(text);
}
END_TEST

static void fill_short_row(struct csv_writer *w, FILE *out)
{
    static const char *const head[] = {"a", "b"};
    csv_begin(w, out, head, 2);
    csv_int(w, 1);
    csv_end_row(w); /* one field of two: a programming error */
}

START_TEST(test_csv_short_row_asserts)
{
    free(csv_of(fill_short_row));
}
END_TEST

START_TEST(test_parse_ranges)
{
    struct cli_range *r;
    size_t n;
    ck_assert_int_eq(cli_parse_ranges("0,2,4-7", &r, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert(cli_ranges_contain(r, n, 0));
    ck_assert(!cli_ranges_contain(r, n, 1));
    ck_assert(cli_ranges_contain(r, n, 2));
    ck_assert(cli_ranges_contain(r, n, 5));
    ck_assert(cli_ranges_contain(r, n, 7));
    ck_assert(!cli_ranges_contain(r, n, 8));
    free(r);
    ck_assert_int_eq(cli_parse_ranges("4242", &r, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert(cli_ranges_contain(r, n, 4242));
    free(r);
    const char *bad[] = {
        "", ",", "1,", ",1", "a", "-1", "3-1", "1-", "1--2", "1 2", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(cli_parse_ranges(bad[i], &r, &n) == -1, "'%s' parsed", bad[i]);
        ck_assert_ptr_null(r);
    }
}
END_TEST

/* ---- traces ---- */

/* One process on one GPU: a measurement, an allocation of `bytes`, another
 * measurement; free memory drops by bytes. `failed` adds a failed cudaMalloc. */
static void burst_trace(const char *dir, int64_t pid, int64_t bytes, int failed)
{
    char *path = fixture_trace_path(dir, "node1", pid, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid,
                                .ppid = 1,
                                .host = "node1",
                                .cmdline = "python3 -m sglang.launch_server",
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = 1000000000ll,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_meminfo(f, 0, 70 * GiB, 80 * GiB);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, bytes, 0);
    if (failed)
        fixture_call(f, CT_API_cudaMalloc, 0, 0, 200 * GiB, 2);
    fixture_meminfo(f, 0, 70 * GiB - bytes, 80 * GiB);
    fixture_close(f);
    free(path);
}

static struct proc_result run(const char *const *args, const char *const *env)
{
    struct proc_result r = run_cutrace(args, env);
    ck_assert_msg(!r.signaled, "killed by signal %d; stderr:\n%.1500s", r.status - 128, r.err);
    return r;
}

/* Exit 2, nothing on stdout, one line on stderr containing needle. */
static void assert_usage(const char *const *args, const char *needle)
{
    struct proc_result r = run(args, NULL);
    ck_assert_msg(r.status == 2, "%s: exit %d; stderr:\n%s", args[0], r.status, r.err);
    ck_assert_msg(r.out_len == 0, "stdout not empty:\n%.1500s", r.out);
    ck_assert_msg(count_lines(r.err) == 1, "stderr:\n%.1500s", r.err);
    assert_contains(r.err, needle);
    proc_result_free(&r);
}

/* Exit status of args, stdout checked to be non-empty. */
static int status_of(const char *const *args)
{
    struct proc_result r = run(args, NULL);
    int status = r.status;
    ck_assert_msg(status != 1 && status != 2, "%s: exit %d; stderr:\n%s", args[0], status, r.err);
    ck_assert_msg(r.out_len > 0, "%s: no report", args[0]);
    proc_result_free(&r);
    return status;
}

/* Lines of CSV text (CRLF-terminated records; quoted newlines not counted:
 * the reports' fields here have none). */
static size_t csv_records(const char *text)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, "\r\n")); p += 2)
        n++;
    return n;
}

/* ---- --csv and --json ---- */

START_TEST(test_csv_every_report)
{
    char *dir = scratch_dir(), *other = scratch_dir();
    burst_trace(dir, 4242, 2 * GiB, 1);
    burst_trace(other, 4343, 3 * GiB, 0);
    const struct {
        const char *args[10];
        const char *header;
    } cases[] = {
        {{"summary", "--csv", dir, NULL},
         "file,pid,ppid,host,rank,end_state,exited,start_wall_ns,span_ns,calls,failed_calls,"
         "nested_calls,devices,communicators,gpu_allocated_bytes,gpu_freed_bytes,gpu_live_bytes,"
         "unknown_frees,double_frees\r\n"},
        {{"summary", "--csv=gpus", dir, NULL},
         "uuid,name,processes,pids,meminfo_file,meminfo_pid,meminfo_seq,meminfo_wall_ns,"
         "free_bytes,total_bytes,used_bytes,traced_live_bytes,unexplained_bytes\r\n"},
        {{"summary", "--csv=apis", dir, NULL},
         "file,pid,device,api,layer,role,calls,failed,nested,top_calls,top_failed,bytes,dur_ns,"
         "top_dur_ns\r\n"},
        {{"summary", "--csv=memory", dir, NULL},
         "file,pid,device,kind,allocs,allocated_bytes,frees,freed_bytes,live_allocs,live_bytes,"
         "peak_bytes,peak_seq,peak_at_ns\r\n"},
        {{"timeline", "--csv", dir, NULL},
         "gpu,gpu_uuid,pid,rank,kind,seq,t_ns,at_ns,api,text,nccl_bytes,ipc_exported_bytes,"
         "vmm_bytes,runtime_bytes,managed_bytes,peer_bytes,host_bytes,traced_bytes,free_bytes,"
         "total_bytes,unexplained_bytes,clock\r\n"},
        {{"timeline", dir, "--csv=milestones", NULL}, "gpu,gpu_uuid,pid,"},
        {{"budget", "--framework", "sglang", "--mem-fraction-static", "0.9", "--csv", dir, NULL},
         "job,communicator,rank,pid,file,host,gpu,analysed,problem,pre_seq,pre_t_ns,"
         "pre_free_bytes,pre_total_bytes,post_seq,post_t_ns,post_free_bytes,post_total_bytes,"
         "weight_burst_bytes,weights_live_at_post_bytes\r\n"},
        {{"budget", "--framework", "sglang", "--mem-fraction-static", "0.9", "--csv=jobs", dir,
          NULL},
         "job,communicator,nranks,ranks_traced,ranks_analysed,fits,tokens,verdict,rest_gib,"
         "f_min_rounded,available_kv_bytes\r\n"},
        {{"sites", "--csv", dir, NULL},
         "gpu,gpu_uuid,site,kind,bytes,allocations,nccl_bytes,ipc_exported_bytes,vmm_bytes,"
         "runtime_bytes,managed_bytes,pids\r\n"},
        {{"diff", "--csv", dir, other, NULL},
         "pair,row,milestone,kind,baseline_traced_bytes,baseline_free_bytes,"
         "baseline_unexplained_bytes,other_traced_bytes,other_free_bytes,"
         "other_unexplained_bytes,delta_traced_bytes,diverges\r\n"},
        {{"diff", "--csv=allocations", dir, other, NULL},
         "phase,api,module,site,size,category,baseline_count,other_count,delta_count,"
         "baseline_bytes,other_bytes,delta_bytes,pairs_changed\r\n"},
        {{"recover", "--csv", dir, NULL},
         "ring,db,status,pid,ring_records,new_records,end_state,error\r\n"},
        {{"recover", "--csv=leftovers", dir, NULL}, "file,kind,status,pid,end_state,error\r\n"},
        {{"collectives", "--csv", dir, NULL},
         "unique_id_hash,nranks,ranks_traced,missing_ranks,complete,parent_unique_id_hash,color,"
         "collective_calls,p2p_calls,failed_calls,problems\r\n"},
        {{"collectives", "--csv=members", dir, NULL},
         "unique_id_hash,rank,nranks,pid,host,file,comm_id,device,gpu_uuid,init_result,"
         "init_result_name,end,lifetime_ns,calls,failed_calls\r\n"},
        {{"collectives", "--csv=ops", dir, NULL},
         "unique_id_hash,op,kind,datatype,size_bucket,size_min,size_max,calls,"
         "min_calls_per_rank,max_calls_per_rank,ranks_agree,bytes,dur_ns,mean_dur_ns,max_dur_ns,"
         "captured,eager,in_group,failed\r\n"},
        {{"collectives", "--csv=pairs", dir, NULL},
         "unique_id_hash,from_rank,to_rank,sends,send_bytes,recvs,recv_bytes,matched\r\n"},
        {{"collectives", "--csv=problems", dir, NULL},
         "unique_id_hash,kind,op,expected,ranks,message\r\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct proc_result r = run(cases[i].args, NULL);
        ck_assert_msg(r.status == 0, "case %zu: exit %d; stderr:\n%s", i, r.status, r.err);
        ck_assert_msg(strncmp(r.out, cases[i].header, strlen(cases[i].header)) == 0,
                      "case %zu header:\n%.600s", i, r.out);
        /* Every record ends in CRLF; no bare LF outside quotes. */
        ck_assert_uint_eq(csv_records(r.out), count_lines(r.out));
        proc_result_free(&r);
    }

    /* Raw numbers: bytes as integers, never "2.00 GiB". */
    const char *tl[] = {"timeline", "--csv", dir, NULL};
    struct proc_result r = run(tl, NULL);
    ck_assert_ptr_null(strstr(r.out, "GiB,"));
    assert_contains(r.out, ",measurement,");
    assert_contains(r.out, ",2147483648,");              /* the allocation's live bytes */
    assert_contains(r.out, ",75161927680,85899345920,"); /* free 70 GiB of 80 GiB */
    /* A row per milestone: as many as JSON lists. */
    const char *tj[] = {"timeline", "--json", dir, NULL};
    struct proc_result j = run(tj, NULL);
    size_t kinds = 0;
    for (const char *p = j.out; (p = strstr(p, "\"kind\": ")); p++)
        kinds++;
    ck_assert_uint_eq(csv_records(r.out), kinds + 1);
    proc_result_free(&j);
    proc_result_free(&r);

    /* The budget's rank row says the measurements as bytes. */
    const char *bg[] = {"budget", "--framework", "sglang", "--mem-fraction-static",
                        "0.9",    "--csv",       dir,      NULL};
    r = run(bg, NULL);
    assert_contains(r.out, ",4242,");
    assert_contains(r.out, ",75161927680,85899345920,");
    ck_assert_uint_eq(csv_records(r.out), 2);
    proc_result_free(&r);

    /* sites: no stacks in these traces, so one "(no stack)" site of kind none. */
    const char *st[] = {"sites", "--csv", dir, NULL};
    r = run(st, NULL);
    assert_contains(r.out, "\r\n0," NORMAL_UUID ",,none,2147483648,1,0,0,0,2147483648,0,4242\r\n");
    proc_result_free(&r);
    scratch_remove(dir);
    scratch_remove(other);
}
END_TEST

START_TEST(test_json_csv_exclusive_and_tables)
{
    char *dir = scratch_dir();
    burst_trace(dir, 4242, 2 * GiB, 0);
    const char *const *cases[] = {
        (const char *[]){"summary", "--csv=apis", "--json", dir, NULL},
        (const char *[]){"timeline", "--json", "--csv", dir, NULL},
        (const char *[]){"budget", "--framework", "sglang", "--csv", "--json", dir, NULL},
        (const char *[]){"sites", "--csv", "--json", dir, NULL},
        (const char *[]){"diff", "--json", "--csv", dir, dir, NULL},
        (const char *[]){"recover", "--json", "--csv", dir, NULL},
        (const char *[]){"collectives", "--csv", "--json", dir, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_usage(cases[i], "--json and --csv exclude each other");
    const char *bad_table[] = {"timeline", "--csv=nope", dir, NULL};
    assert_usage(bad_table, "--csv=nope: no such table (tables: milestones)");
    const char *bad_budget[] = {"budget", "--framework", "sglang", "--csv=gpus", dir, NULL};
    assert_usage(bad_budget, "(tables: ranks, jobs)");
    const char *bad_coll[] = {"collectives", "--csv=gpus", dir, NULL};
    assert_usage(bad_coll, "(tables: communicators, members, ops, pairs, problems)");
    const char *bad_summary[] = {"summary", "--csv=ranks", dir, NULL};
    assert_usage(bad_summary, "(tables: processes, gpus, apis, memory)");
    const char *folded[] = {"sites", "--folded", "--csv", dir, NULL};
    assert_usage(folded, "--csv and --folded exclude each other");
    scratch_remove(dir);
}
END_TEST

/* ---- filters ---- */

START_TEST(test_filters)
{
    char *dir = scratch_dir();
    scenario_nccl(dir, NCCL_SCENARIO_DEFAULT); /* ranks 0-3, pids 1000-1003, node1: 0-1 */
    struct {
        const char *opt, *value;
        const char *present[4], *absent[4];
    } cases[] = {
        {"--rank", "1", {",1001,1,"}, {",1000,0,", ",1002,2,", ",1003,3,"}},
        {"--rank", "0,2-3", {",1000,0,", ",1002,2,", ",1003,3,"}, {",1001,1,"}},
        {"--pid", "1003", {",1003,3,"}, {",1000,0,", ",1001,1,", ",1002,2,"}},
        {"--host", "node2", {",1002,2,", ",1003,3,"}, {",1000,0,", ",1001,1,"}},
        {"--host", "node1,node2", {",1000,0,", ",1003,3,"}, {NULL}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *args[] = {"timeline", "--csv", cases[i].opt, cases[i].value, dir, NULL};
        struct proc_result r = run(args, NULL);
        ck_assert_msg(r.status == 0, "%s %s: exit %d; %s", cases[i].opt, cases[i].value, r.status,
                      r.err);
        for (size_t k = 0; k < 4 && cases[i].present[k]; k++)
            assert_contains(r.out, cases[i].present[k]);
        for (size_t k = 0; k < 4 && cases[i].absent[k]; k++)
            ck_assert_msg(!strstr(r.out, cases[i].absent[k]), "%s %s lists %s", cases[i].opt,
                          cases[i].value, cases[i].absent[k]);
        proc_result_free(&r);
    }
    /* --rank and --pid together: both must match. */
    const char *both[] = {"timeline", "--json", "--rank", "1", "--pid", "1001", dir, NULL};
    struct proc_result r = run(both, NULL);
    ck_assert_int_eq(r.status, 0);
    char *j = compact(r.out);
    assert_contains(j, "\"seq\":1,\"pid\":1001");
    ck_assert_ptr_null(strstr(j, "\"pid\":1000,\"rank\":0,\"file\""));
    free(j);
    proc_result_free(&r);
    /* Filters and --gpu together: the GPU of rank 2 only. */
    const char *gpu[] = {"timeline", "--csv", "--gpu", "GPU-00000002",
                         "--host",   "node2", dir,     NULL};
    r = run(gpu, NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, ",1002,2,");
    ck_assert_ptr_null(strstr(r.out, ",1003,3,"));
    proc_result_free(&r);
    /* sites counts only the listed processes' allocations (two processes on one GPU). */
    char *two = scratch_dir();
    burst_trace(two, 4242, 2 * GiB, 0);
    burst_trace(two, 4343, 3 * GiB, 0);
    const char *all_sites[] = {"sites", "--csv", "--at", "end", two, NULL};
    r = run(all_sites, NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, ",none,5368709120,2,0,0,0,5368709120,0,4242 4343\r\n");
    proc_result_free(&r);
    const char *sites[] = {"sites", "--csv", "--at", "end", "--pid", "4343", two, NULL};
    r = run(sites, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_eq(csv_records(r.out), 2); /* the header and pid 4343's one site */
    assert_contains(r.out, ",none,3221225472,1,0,0,0,3221225472,0,4343\r\n");
    proc_result_free(&r);
    scratch_remove(two);

    /* Nothing matches: a usage error that says what there is. */
    const char *nothing[] = {"timeline", "--rank", "9", dir, NULL};
    assert_usage(nothing, "cutrace timeline: --rank 9: no process of these traces matches "
                          "(ranks 0 to 3)");
    const char *no_pid[] = {"sites", "--pid", "77", dir, NULL};
    assert_usage(no_pid, "--pid 77: no process of these traces matches (pids 1000,");
    const char *no_host[] = {"budget", "--framework", "sglang", "--host", "node9", dir, NULL};
    assert_usage(no_host, "--host node9: no process of these traces matches (hosts node1, node2)");
    /* Bad lists: refused before any trace is read. */
    const char *bad[] = {"timeline", "--rank", "1-", "/nonexistent", NULL};
    assert_usage(bad, "--rank 1-: expected numbers and ranges like 0,2,4-7");
    const char *empty[] = {"sites", "--host", "", dir, NULL};
    assert_usage(empty, "--host needs a value");
    /* diff takes the filters too; a pid names a process of either run (test_diff.c). */
    char *other = scratch_dir();
    scenario_nccl(other, NCCL_SCENARIO_DEFAULT);
    const char *diff[] = {"diff", "--pid", "77", dir, other, NULL};
    assert_usage(diff, "cutrace diff: --pid 77: no GPU of these runs matches (A: pids 1000,");
    const char *diff_rank[] = {"diff", "--json", "--rank", "2", dir, other, NULL};
    r = run(diff_rank, NULL);
    ck_assert_int_eq(r.status, 0);
    j = compact(r.out);
    assert_contains(j, "\"listed\":{\"pairs\":1,\"pairs_total\":4}");
    free(j);
    proc_result_free(&r);
    scratch_remove(other);
    scratch_remove(dir);
}
END_TEST

/* ---- --fail-on-problem ---- */

START_TEST(test_fail_on_problem)
{
    char *ok = scratch_dir(), *failed = scratch_dir(), *bigger = scratch_dir();
    burst_trace(ok, 4242, 2 * GiB, 0);
    burst_trace(failed, 4242, 2 * GiB, 1);
    burst_trace(bigger, 4242, 3 * GiB, 0);
    /* timeline: a failed call is a problem; without the option it is not. */
    ck_assert_int_eq(status_of((const char *[]){"timeline", "--fail-on-problem", ok, NULL}), 0);
    ck_assert_int_eq(status_of((const char *[]){"timeline", "--fail-on-problem", failed, NULL}), 3);
    ck_assert_int_eq(
        status_of((const char *[]){"timeline", "--json", "--fail-on-problem", failed, NULL}), 3);
    ck_assert_int_eq(status_of((const char *[]){"timeline", failed, NULL}), 0);
    /* timeline: unknown and double frees too (scenario_normal frees an unknown pointer, but
     * that free failed; a fixture here frees one that succeeded). */
    char *frees = scratch_dir();
    char *path = fixture_trace_path(frees, "node1", 77, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = 77, .host = "node1", .start_wall_ns = NORMAL_START_WALL};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 * MiB, 0);
    fixture_call(f, CT_API_cudaFree, 0, 0x7f0000100000, 0, 0);
    fixture_close(f);
    free(path);
    ck_assert_int_eq(status_of((const char *[]){"timeline", "--fail-on-problem", frees, NULL}), 3);

    /* budget: a verdict that does not fit (F 0.01 leaves rest < 0). */
    const char *fits[] = {"budget", "--framework",       "sglang", "--mem-fraction-static",
                          "0.9",    "--fail-on-problem", ok,       NULL};
    ck_assert_int_eq(status_of(fits), 0);
    const char *not_fit[] = {"budget", "--framework",       "sglang", "--mem-fraction-static",
                             "0.01",   "--fail-on-problem", ok,       NULL};
    ck_assert_int_eq(status_of(not_fit), 3);
    const char *not_fit_plain[] = {
        "budget", "--framework", "sglang", "--mem-fraction-static", "0.01", ok, NULL};
    ck_assert_int_eq(status_of(not_fit_plain), 0);

    /* diff: a milestone diverges past the threshold (1 GiB more before measurement 2). */
    ck_assert_int_eq(status_of((const char *[]){"diff", "--fail-on-problem", ok, failed, NULL}), 0);
    ck_assert_int_eq(status_of((const char *[]){"diff", "--fail-on-problem", ok, bigger, NULL}), 3);
    ck_assert_int_eq(status_of((const char *[]){"diff", "--fail-on-problem", "--threshold", "2G",
                                                ok, bigger, NULL}),
                     0);
    ck_assert_int_eq(status_of((const char *[]){"diff", ok, bigger, NULL}), 0);

    /* sites: memory without a call stack (these traces have none). */
    ck_assert_int_eq(status_of((const char *[]){"sites", "--fail-on-problem", ok, NULL}), 3);
    ck_assert_int_eq(status_of((const char *[]){"sites", ok, NULL}), 0);

    /* summary: the failed call (and the 2 GiB the exited process left live); summary's own
     * cases, each problem alone, are in test_summary.c. */
    ck_assert_int_eq(status_of((const char *[]){"summary", "--fail-on-problem", failed, NULL}), 3);
    ck_assert_int_eq(status_of((const char *[]){"summary", failed, NULL}), 0);

    /* recover: nothing folded is no problem. */
    ck_assert_int_eq(status_of((const char *[]){"recover", "--fail-on-problem", ok, NULL}), 0);
    scratch_remove(ok);
    scratch_remove(failed);
    scratch_remove(bigger);
    scratch_remove(frees);
}
END_TEST

/* ---- width ---- */

START_TEST(test_columns)
{
    char *dir = scratch_dir();
    burst_trace(dir, 4242, 2 * GiB, 1);
    burst_trace(dir, 4343, 3 * GiB + 5 * MiB, 0);
    const char *args[] = {"timeline", dir, NULL};
    struct proc_result wide = run(args, (const char *[]){"COLUMNS", NULL});
    struct proc_result narrow = run(args, (const char *[]){"COLUMNS=72", NULL});
    struct proc_result tiny = run(args, (const char *[]){"COLUMNS=10", NULL});
    ck_assert_int_eq(wide.status, 0);
    ck_assert_int_eq(narrow.status, 0);
    ck_assert_int_eq(tiny.status, 0);
    char *notes = strstr(narrow.out, "\nnote: ");
    if (notes)
        *notes = '\0';
    assert_width(narrow.out, 72);
    assert_width(wide.out, 120);
    ck_assert_str_ne(wide.out, narrow.out);
    ck_assert_str_ne(narrow.out, tiny.out);
    /* The failed call's words wrap under it instead of being cut. */
    assert_contains(wide.out, "failed: cudaMalloc 200.00 GiB: cudaErrorMemoryAllocation");
    ck_assert_ptr_null(strstr(tiny.out, "GiB: cudaErrorMemoryAllocation"));
    assert_contains(tiny.out, "\n                        cudaErrorMemoryAllocation\n");
    /* No number is ever cut: every size of the wide report is in the narrow ones. */
    size_t sizes = 0;
    for (const char *unit = " GiB"; unit; unit = strcmp(unit, " GiB") == 0 ? " MiB" : NULL)
        for (const char *p = wide.out; (p = strstr(p, unit)); p++) {
            const char *start = p;
            while (start > wide.out && start[-1] != ' ')
                start--;
            char number[32];
            snprintf(number, sizeof(number), "%.*s", (int)(p - start + 4), start);
            assert_contains(narrow.out, number);
            assert_contains(tiny.out, number);
            sizes++;
        }
    ck_assert_uint_ge(sizes, 10);
    proc_result_free(&wide);
    proc_result_free(&narrow);
    proc_result_free(&tiny);
    scratch_remove(dir);
}
END_TEST

/* ---- help ---- */

START_TEST(test_help_lists_the_conventions)
{
    const char *reports[] = {"timeline", "budget",      "sites",   "diff",
                             "recover",  "collectives", "summary", "ls"};
    for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++) {
        const char *args[] = {reports[i], "--help", NULL};
        struct proc_result r = run(args, NULL);
        ck_assert_int_eq(r.status, 0);
        assert_contains(r.out, "\n  --json                        one JSON document");
        assert_contains(r.out, "\n  --csv[=TABLE]                 a table as CSV");
        assert_contains(r.out, "\n  --fail-on-problem             exit 3 when");
        assert_contains(r.out, "\n  -h, --help                    show this help\n");
        assert_contains(r.out, "\nTables for --csv: ");
        assert_contains(r.out, "\nexit status:\n  0  ok\n  1  bad input: ");
        assert_contains(r.out, "\n  2  usage error: ");
        assert_contains(r.out, "\n  3  with --fail-on-problem: ");
        bool filters = strcmp(reports[i], "recover") != 0;
        ck_assert_msg((strstr(r.out, "\n  --rank LIST                   only") != NULL) == filters,
                      "%s: --rank in its help: %d", reports[i], !filters);
        if (filters) {
            assert_contains(r.out, "\n  --pid LIST ");
            assert_contains(r.out, "\n  --host LIST ");
            assert_contains(r.out, "\n  --gpu UUID|INDEX ");
        }
        proc_result_free(&r);
    }
}
END_TEST

Suite *conventions_suite(void); /* registered in test_main.c */
Suite *conventions_suite(void)
{
    Suite *s = suite_create("conventions");
    TCase *tc = tcase_create("conventions");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_csv_quoting);
    tcase_add_test_raise_signal(tc, test_csv_short_row_asserts, SIGABRT);
    tcase_add_test(tc, test_parse_ranges);
    tcase_add_test(tc, test_csv_every_report);
    tcase_add_test(tc, test_json_csv_exclusive_and_tables);
    tcase_add_test(tc, test_filters);
    tcase_add_test(tc, test_fail_on_problem);
    tcase_add_test(tc, test_columns);
    tcase_add_test(tc, test_help_lists_the_conventions);
    suite_add_tcase(s, tc);
    return s;
}
