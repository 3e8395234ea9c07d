/*
 * test_collectives.c - `cutrace collectives` end to end, and the NCCL part
 * of `cutrace summary`: the built binary runs on the four-rank NCCL
 * scenario (scenarios.h) and its variants, and must group communicators
 * across the ranks' traces, count every call exactly, and flag the rank
 * that fell behind, the rank without a trace, the unmatched send, the
 * failed call and init; plus old traces, hostile values and determinism.
 */
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct proc_result run_ok(const char *command, const char *path, bool json)
{
    const char *args[] = {command, path, json ? "--json" : NULL, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "exit %d; stderr:\n%.1500s", r.status, r.err);
    ck_assert_msg(r.err_len == 0, "stderr not empty:\n%.1500s", r.err);
    if (json)
        ck_assert_msg(json_valid(r.out), "invalid JSON:\n%.3000s", r.out);
    else
        assert_width(r.out, 120);
    return r;
}

/* The text report, squeezed (see test_support.h). */
static char *collectives_text(const char *dir)
{
    struct proc_result r = run_ok("collectives", dir, false);
    char *text = squeeze(r.out);
    proc_result_free(&r);
    return text;
}

static char *collectives_json(const char *dir)
{
    struct proc_result r = run_ok("collectives", dir, true);
    char *json = compact(r.out);
    proc_result_free(&r);
    return json;
}

static char *nccl_dir(unsigned flags)
{
    char *dir = scratch_dir();
    scenario_nccl(dir, flags);
    return dir;
}

/* The JSON of one communicator group, from its hash to the next group. */
static char *group_json(const char *json, const char *hash)
{
    char key[64];
    snprintf(key, sizeof(key), "{\"unique_id_hash\":\"%s\",\"nranks\"", hash);
    const char *start = strstr(json, key);
    ck_assert_msg(start != NULL, "no group %s in:\n%.3000s", hash, json);
    const char *end = strstr(start + 1, "{\"unique_id_hash\":\"");
    /* The parent object of a split names its parent's hash too. */
    while (end && strncmp(end - 9, "\"parent\":", 9) == 0)
        end = strstr(end + 1, "{\"unique_id_hash\":\"");
    return strndup(start, end ? (size_t)(end - start) : strlen(start));
}

START_TEST(test_groups_and_counts_text)
{
    char *dir = nccl_dir(NCCL_SCENARIO_DEFAULT);
    char *out = collectives_text(dir);
    assert_contains(out, ": 4 processes, 2 communicators, NCCL 2.28.9\n");
    assert_contains(out, " calls 78 collective, 16 point-to-point (0 failed)\n");
    assert_contains(out, " problems none found\n");
    assert_contains(out, "\nCommunicator " NCCL_WORLD_HASH_HEX ": 4 ranks, all traced\n");
    assert_contains(out, "\nCommunicator " NCCL_TP_HASH_HEX ": 2 ranks, all traced\n"
                         " split from communicator " NCCL_WORLD_HASH_HEX " with color 0\n");
    /* rank, pid, host, device, gpu, init, lifetime */
    assert_contains(out, " 0 1000 node1 0 GPU-00000000-0000-0000-0000-000000000000 ok 35.0 us,"
                         " destroyed\n");
    assert_contains(out, " 2 1002 node2 0 GPU-00000002-0000-0000-0000-000000000000 ok 29.0 us,"
                         " destroyed\n");
    assert_contains(out, " 3 1003 node2 1 GPU-00000003-0000-0000-0000-000000000000 ok 29.0 us,"
                         " aborted\n");
    assert_contains(out, " ncclAllReduce: 48 calls, 12 on each of 4 ranks\n");
    /* type, size, calls/rank, bytes, host time, mean, max, graph, eager, grouped, failed */
    assert_contains(out, " bfloat16 1-2 MiB 10 60.00 MiB 128 us 3.20 us 50.0 us 16 24 0 0\n");
    assert_contains(out, " float32 4-8 KiB 2 32.00 KiB 16.0 us 2.00 us 2.00 us 0 8 8 0\n");
    assert_contains(out, " ncclAllGather: 12 calls, 3 on each of 4 ranks\n"
                         " type size calls/rank bytes host time mean max graph eager grouped"
                         " failed\n"
                         " bfloat16 256-512 KiB 3 3.00 MiB 24.0 us 2.00 us 2.00 us 0 12 12 0\n");
    assert_contains(out, " ncclReduceScatter: 8 calls, 2 on each of 4 ranks\n");
    assert_contains(out, " bfloat16 1-2 MiB 2 8.00 MiB 16.0 us 2.00 us 2.00 us 0 8 0 0\n");
    assert_contains(out, " ncclSend: 8 calls (point-to-point: pairs below)\n");
    assert_contains(out, " ncclRecv: 8 calls (point-to-point: pairs below)\n");
    assert_contains(out, " int8 64-128 KiB 2 512.00 KiB 8.00 us 1.00 us 1.00 us 0 8 8 0\n");
    /* Collectives before point-to-point. */
    ck_assert(strstr(out, " ncclReduceScatter: ") < strstr(out, " ncclRecv: "));
    for (int from = 0; from < 4; from++) {
        char row[96];
        snprintf(row, sizeof(row), "\n %d -> %d 2 2 128.00 KiB 128.00 KiB\n", from, (from + 1) % 4);
        assert_contains(out, row);
    }
    assert_contains(out, " ncclAllReduce: 10 calls, 5 on each of 2 ranks\n");
    assert_contains(out, " bfloat16 1-2 MiB 5 10.00 MiB 20.0 us 2.00 us 2.00 us 0 10 0 0\n");
    /* The world communicator (initialised first) comes first. */
    ck_assert(strstr(out, "Communicator " NCCL_WORLD_HASH_HEX) <
              strstr(out, "Communicator " NCCL_TP_HASH_HEX));
    ck_assert_ptr_null(strstr(out, "problems:"));
    ck_assert_ptr_null(strstr(out, " ! ")); /* no row whose ranks differ */
    free(out);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_groups_and_counts_json)
{
    char *dir = nccl_dir(NCCL_SCENARIO_DEFAULT);
    char *j = collectives_json(dir);
    assert_contains(j, "{\"cutrace_version\":\"" CUTRACE_VERSION "\",\"report\":\"collectives\"");
    assert_contains(j, "{\"file\":\"node1-1000-1736071872345000000.db\",\"pid\":1000,"
                       "\"host\":\"node1\",\"nccl_version\":22809,\"communicator_count\":2,"
                       "\"calls\":26,\"failed_calls\":0,\"unattributed_calls\":0,"
                       "\"unattributed\":[]}");
    assert_contains(j, "\"totals\":{\"processes\":4,\"communicators\":2,\"members\":6,"
                       "\"collective_calls\":78,\"p2p_calls\":16,\"failed_calls\":0,"
                       "\"unattributed_calls\":0,\"problems\":0}");
    assert_contains(j, "\"problems\":[],\"totals\"");

    char *world = group_json(j, NCCL_WORLD_HASH_HEX);
    assert_contains(world, "\"nranks\":4,\"ranks_traced\":4,\"missing_ranks_count\":0,"
                           "\"missing_ranks\":[],\"complete\":true,\"parent\":null,"
                           "\"collective_calls\":68,\"p2p_calls\":16,\"failed_calls\":0");
    assert_contains(world, "{\"rank\":0,\"nranks\":4,\"pid\":1000,\"host\":\"node1\","
                           "\"file\":\"node1-1000-1736071872345000000.db\",\"comm_id\":1,"
                           "\"comm\":\"0x7e0000001000\",\"device\":0,"
                           "\"gpu_uuid\":\"GPU-00000000-0000-0000-0000-000000000000\","
                           "\"api\":\"ncclCommInitRank\",\"init_result\":0,"
                           "\"init_result_name\":\"ncclSuccess\",\"t_init_ns\":2000001000,"
                           "\"init_at_ns\":1000,\"end\":\"destroy\",\"end_at_ns\":36000,"
                           "\"lifetime_ns\":35000,\"finalize_at_ns\":null,"
                           "\"parent_comm_id\":null,\"color\":null,\"key\":null,\"calls\":21,"
                           "\"failed_calls\":0}");
    assert_contains(world, "\"rank\":3,\"nranks\":4,\"pid\":1003,");
    assert_contains(world, "\"end\":\"abort\"");
    assert_contains(world, "{\"op\":\"ncclAllReduce\",\"kind\":\"collective\",\"calls\":48,"
                           "\"failed\":0,\"min_calls_per_rank\":12,\"max_calls_per_rank\":12,"
                           "\"ranks_agree\":true,\"per_rank\":[{\"rank\":0,\"pid\":1000,"
                           "\"comm_id\":1,\"calls\":12},");
    assert_contains(world, "{\"datatype\":\"bfloat16\",\"size_bucket\":\"1-2 MiB\","
                           "\"size_min\":1048576,\"size_max\":2097152,\"calls\":40,"
                           "\"min_calls_per_rank\":10,\"max_calls_per_rank\":10,"
                           "\"ranks_agree\":true,\"bytes\":62914560,\"dur_ns\":128000,"
                           "\"mean_dur_ns\":3200,\"max_dur_ns\":50000,\"captured\":16,"
                           "\"eager\":24,\"in_group\":0,\"failed\":0,\"per_rank\":["
                           "{\"rank\":0,\"pid\":1000,\"comm_id\":1,\"calls\":10,"
                           "\"bytes\":15728640,\"dur_ns\":68000,\"max_dur_ns\":50000,"
                           "\"captured\":4,\"in_group\":0,\"failed\":0},");
    assert_contains(world, "{\"datatype\":\"float32\",\"size_bucket\":\"4-8 KiB\","
                           "\"size_min\":4096,\"size_max\":8192,\"calls\":8,");
    assert_contains(world, "\"bytes\":32768,\"dur_ns\":16000,\"mean_dur_ns\":2000,"
                           "\"max_dur_ns\":2000,\"captured\":0,\"eager\":8,\"in_group\":8,");
    assert_contains(world, "{\"op\":\"ncclAllGather\",\"kind\":\"collective\",\"calls\":12,");
    assert_contains(world, "\"size_bucket\":\"256-512 KiB\",\"size_min\":262144,"
                           "\"size_max\":524288,\"calls\":12,");
    assert_contains(world, "{\"op\":\"ncclReduceScatter\",\"kind\":\"collective\",\"calls\":8,");
    assert_contains(world, "{\"op\":\"ncclSend\",\"kind\":\"p2p\",\"calls\":8,\"failed\":0,"
                           "\"min_calls_per_rank\":2,\"max_calls_per_rank\":2,"
                           "\"ranks_agree\":null,");
    assert_contains(world, "{\"op\":\"ncclRecv\",\"kind\":\"p2p\",\"calls\":8,");
    assert_contains(world, "\"p2p\":[{\"from_rank\":0,\"to_rank\":1,\"sends\":2,"
                           "\"send_bytes\":131072,\"recvs\":2,\"recv_bytes\":131072,"
                           "\"matched\":true},{\"from_rank\":1,\"to_rank\":2,");
    assert_contains(world, "{\"from_rank\":3,\"to_rank\":0,\"sends\":2,");
    assert_contains(world, "\"problems\":[]");
    free(world);

    char *tp = group_json(j, NCCL_TP_HASH_HEX);
    assert_contains(tp, "\"nranks\":2,\"ranks_traced\":2,\"missing_ranks_count\":0,"
                        "\"missing_ranks\":[],\"complete\":true,\"parent\":{\"unique_id_hash\":"
                        "\"" NCCL_WORLD_HASH_HEX
                        "\",\"color\":0},\"collective_calls\":10,\"p2p_calls\":0");
    assert_contains(tp, "\"api\":\"ncclCommSplit\"");
    assert_contains(tp, "\"parent_comm_id\":1,\"color\":0,\"key\":1,\"calls\":5,");
    assert_contains(tp, "\"size_bucket\":\"1-2 MiB\",\"size_min\":1048576,"
                        "\"size_max\":2097152,\"calls\":10,\"min_calls_per_rank\":5,"
                        "\"max_calls_per_rank\":5,\"ranks_agree\":true,\"bytes\":10485760,");
    assert_contains(tp, "\"p2p\":[]");
    /* Ranks 2 and 3 passed NCCL_SPLIT_NOCOLOR: no communicator, no member. */
    ck_assert_ptr_null(strstr(tp, "\"pid\":1002"));
    free(tp);
    free(j);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_rank_with_fewer_calls_is_flagged)
{
    char *dir = nccl_dir(NCCL_SCENARIO_SHORT_RANK);
    char *out = collectives_text(dir);
    assert_contains(out, " problems 1 (listed under each communicator)\n");
    assert_contains(out, " ncclAllReduce: 47 calls; RANKS DIFFER, 11 to 12 per rank\n");
    assert_contains(out, " bfloat16 1-2 MiB 9-10 ! 58.50 MiB ");
    assert_contains(out, "\n problems:\n rank 3 made 11 ncclAllReduce, the others 12: a rank that"
                         " exited early or desynchronised \u2014 this looks like a hang\n");
    /* The other ops still agree. */
    assert_contains(out, " ncclAllGather: 12 calls, 3 on each of 4 ranks\n");
    free(out);

    char *j = collectives_json(dir);
    char *world = group_json(j, NCCL_WORLD_HASH_HEX);
    assert_contains(world, "{\"op\":\"ncclAllReduce\",\"kind\":\"collective\",\"calls\":47,"
                           "\"failed\":0,\"min_calls_per_rank\":11,\"max_calls_per_rank\":12,"
                           "\"ranks_agree\":false,");
    assert_contains(world, "{\"rank\":3,\"pid\":1003,\"comm_id\":1,\"calls\":11}");
    assert_contains(world, "\"calls\":39,\"min_calls_per_rank\":9,\"max_calls_per_rank\":10,"
                           "\"ranks_agree\":false,");
    assert_contains(world, "\"problems\":[{\"kind\":\"call_counts_differ\",\"message\":\"rank 3"
                           " made 11 ncclAllReduce, the others 12: ");
    assert_contains(world, "\"op\":\"ncclAllReduce\",\"expected\":12,\"ranks\":[{\"rank\":3,"
                           "\"pid\":1003,\"value\":11}]}]");
    free(world);
    assert_contains(j, "\"problems\":1}");
    free(j);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_missing_rank_is_flagged)
{
    char *dir = nccl_dir(NCCL_SCENARIO_NO_RANK_2);
    char *out = collectives_text(dir);
    assert_contains(out, ": 3 processes, 2 communicators, NCCL 2.28.9\n");
    assert_contains(out,
                    "\nCommunicator " NCCL_WORLD_HASH_HEX ": 4 ranks, 3 traced, 1 WITHOUT TRACE\n");
    assert_contains(out, " ncclAllReduce: 36 calls, 12 on each of 3 ranks\n");
    assert_contains(out, "\n 1 -> 2 2 - 128.00 KiB - (a side without trace)\n");
    assert_contains(out, "\n 2 -> 3 - 2 - 128.00 KiB (a side without trace)\n");
    assert_contains(out, " rank 2 of 4 has no trace in this directory: its calls are not"
                         " counted here\n");
    /* A rank without trace is not an unmatched send. */
    ck_assert_ptr_null(strstr(out, "UNMATCHED"));
    free(out);

    char *j = collectives_json(dir);
    char *world = group_json(j, NCCL_WORLD_HASH_HEX);
    assert_contains(world, "\"nranks\":4,\"ranks_traced\":3,\"missing_ranks_count\":1,"
                           "\"missing_ranks\":[{\"first\":2,\"last\":2}],\"complete\":false,");
    assert_contains(world, "{\"from_rank\":1,\"to_rank\":2,\"sends\":2,\"send_bytes\":131072,"
                           "\"recvs\":null,\"recv_bytes\":null,\"matched\":null}");
    assert_contains(world, "{\"kind\":\"missing_ranks\",\"message\":\"rank 2 of 4 has no trace");
    assert_contains(world, "\"op\":null,\"expected\":1,\"ranks\":[]}");
    free(world);
    free(j);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_unmatched_p2p_is_flagged)
{
    char *dir = nccl_dir(NCCL_SCENARIO_UNMATCHED);
    char *out = collectives_text(dir);
    assert_contains(out, "\n 0 -> 1 2 1 128.00 KiB 64.00 KiB UNMATCHED\n");
    assert_contains(out, "\n 1 -> 2 2 2 128.00 KiB 128.00 KiB\n");
    assert_contains(out, " rank 0 sent 2 to rank 1, but rank 1 received 1 from rank 0: a send or"
                         " receive without its match waits forever\n");
    /* p2p counts differing between ranks are not a collective mismatch. */
    ck_assert_ptr_null(strstr(out, "RANKS DIFFER"));
    free(out);

    char *j = collectives_json(dir);
    assert_contains(j, "{\"from_rank\":0,\"to_rank\":1,\"sends\":2,\"send_bytes\":131072,"
                       "\"recvs\":1,\"recv_bytes\":65536,\"matched\":false}");
    assert_contains(j, "{\"kind\":\"p2p_unmatched\",\"message\":\"rank 0 sent 2 to rank 1, ");
    assert_contains(j, "\"op\":null,\"expected\":2,\"ranks\":[{\"rank\":0,\"pid\":1000,"
                       "\"value\":2},{\"rank\":1,\"pid\":1001,\"value\":1}]}");
    free(j);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_failed_call_and_init_are_flagged)
{
    char *dir = nccl_dir(NCCL_SCENARIO_FAILED_CALL | NCCL_SCENARIO_FAILED_INIT);
    char *out = collectives_text(dir);
    assert_contains(out, " calls 73 collective, 16 point-to-point (1 failed)\n");
    assert_contains(out, " problems 2 (listed under each communicator)\n");
    assert_contains(out, " rank 1 (pid 1001): 1 of 2 ncclReduceScatter failed\n");
    assert_contains(out, " bfloat16 1-2 MiB 2 8.00 MiB 16.0 us 2.00 us 2.00 us 0 8 0 1\n");
    /* The failed split is a member without calls or lifetime; the group of
     * one working rank is not a mismatch. */
    assert_contains(out, " 1 1001 node1 1 GPU-00000001-0000-0000-0000-000000000000"
                         " ncclSystemError -\n");
    assert_contains(out, " rank 1 (pid 1001): ncclCommSplit failed with 2 ncclSystemError\n");
    assert_contains(out, " ncclAllReduce: 5 calls, 5 on each of 1 rank\n");
    free(out);

    char *j = collectives_json(dir);
    assert_contains(j, "{\"kind\":\"failed_calls\",\"message\":\"rank 1 (pid 1001): 1 of 2"
                       " ncclReduceScatter failed\",\"op\":\"ncclReduceScatter\",\"expected\":2,"
                       "\"ranks\":[{\"rank\":1,\"pid\":1001,\"value\":1}]}");
    assert_contains(j, "{\"kind\":\"init_failed\",\"message\":\"rank 1 (pid 1001): ncclCommSplit"
                       " failed with 2 ncclSystemError\",\"op\":null,\"expected\":null,"
                       "\"ranks\":[{\"rank\":1,\"pid\":1001,\"value\":2}]}");
    assert_contains(j, "\"init_result\":2,\"init_result_name\":\"ncclSystemError\"");
    free(j);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_no_nccl_calls)
{
    char *dir = scratch_dir();
    char *path = scenario_normal(dir);
    struct proc_result r = run_ok("collectives", dir, false);
    char *expected = NULL;
    ck_assert_int_ge(
        asprintf(&expected,
                 "cutrace collectives of %s: no NCCL communicators or calls in 1 process\n", dir),
        0);
    ck_assert_str_eq(r.out, expected);
    free(expected);
    proc_result_free(&r);
    r = run_ok("collectives", dir, true);
    char *j = compact(r.out);
    assert_contains(j, "\"nccl_version\":null,\"communicator_count\":0,\"calls\":0,");
    assert_contains(j, "\"communicators\":[],\"problems\":[],\"totals\":{\"processes\":1,"
                       "\"communicators\":0,\"members\":0,\"collective_calls\":0,");
    free(j);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_deterministic_output)
{
    char *dir = nccl_dir(NCCL_SCENARIO_SHORT_RANK | NCCL_SCENARIO_UNMATCHED |
                         NCCL_SCENARIO_FAILED_CALL | NCCL_SCENARIO_FAILED_INIT);
    for (int json = 0; json <= 1; json++) {
        struct proc_result r1 = run_ok("collectives", dir, json),
                           r2 = run_ok("collectives", dir, json);
        ck_assert_uint_eq(r1.out_len, r2.out_len);
        ck_assert_mem_eq(r1.out, r2.out, r1.out_len);
        proc_result_free(&r1);
        proc_result_free(&r2);
    }
    scratch_remove(dir);
}
END_TEST

/* A trace with part of its schema dropped by `drop`: written before cutrace
 * recorded NCCL (format 1: none of the views), or damaged. */
static char *old_trace(const char *dir, const char *drop)
{
    char *path = fixture_trace_path(dir, "node1", 77, 77);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {
        .pid = 77, .host = "node1", .start_wall_ns = 77, .start_mono_ns = 1000};
    fixture_process(f, &p);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x1000, 4096, 0);
    fixture_exec(f, drop);
    fixture_close(f);
    return path;
}

START_TEST(test_old_trace_is_refused)
{
    static const struct {
        const char *drop, *needle;
    } cases[] = {
        {"DROP VIEW collectives; DROP VIEW communicators; DROP VIEW nccl_events;"
         " ALTER TABLE process DROP COLUMN nccl_version;"
         " UPDATE meta SET value = 1 WHERE key = 'format_version'",
         "incomplete cutrace trace: no table or view 'communicators' (written by a cutrace that"
         " did not record NCCL calls)"},
        /* Damaged format-3 traces: refused by every report. */
        {"DROP VIEW collectives", "incomplete cutrace trace: no table or view 'collectives'"},
        {"ALTER TABLE process DROP COLUMN nccl_version",
         "incomplete cutrace trace: 'process' has no column 'nccl_version'"},
        {"DROP VIEW communicators; CREATE VIEW communicators AS SELECT seq AS comm_id FROM events",
         "incomplete cutrace trace: 'communicators' has no column 'unique_id_hash'"},
        {"DROP VIEW nccl_events", "incomplete cutrace trace: 'communicators' is unusable"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *dir = scratch_dir();
        char *path = old_trace(dir, cases[i].drop);
        for (int json = 0; json <= 1; json++) {
            const char *args[] = {"collectives", dir, json ? "--json" : NULL, NULL};
            struct proc_result r = run_cutrace(args, NULL);
            assert_one_line_error(&r, "node1-77-77.db", cases[i].needle);
            proc_result_free(&r);
        }
        free(path);
        scratch_remove(dir);
    }

    /* summary still reads such a trace, and says it cannot tell. */
    char *dir = scratch_dir();
    char *path = old_trace(dir, cases[0].drop);
    struct proc_result r = run_ok("summary", dir, true);
    char *j = compact(r.out);
    assert_contains(j, "\"cuda_driver_version\":null,\"nccl_version\":null,");
    assert_contains(j, "\"communicators\":null,\"nccl_calls\":null}");
    free(j);
    proc_result_free(&r);
    r = run_ok("summary", dir, false);
    ck_assert_ptr_null(strstr(r.out, " nccl "));
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_summary_shows_communicators)
{
    char *dir = nccl_dir(NCCL_SCENARIO_FAILED_INIT);
    struct proc_result r = run_ok("summary", dir, false);
    char *out = squeeze(r.out);
    assert_contains(out, "\n nccl 2.28.9; 2 communicators, 26 collective and p2p calls\n");
    assert_contains(out, "\n comm unique id hash rank device init lifetime calls split of\n"
                         " 1 " NCCL_WORLD_HASH_HEX " 0/4 0 ok 35.0 us, destroyed 21\n"
                         " 2 " NCCL_TP_HASH_HEX " 0/2 0 ok 33.0 us, destroyed 5 comm 1, color 0\n");
    assert_contains(out, " 2 " NCCL_TP_HASH_HEX " 1/2 1 ncclSystemError - 0 comm 1, color 0\n");
    assert_contains(out, " 1 " NCCL_WORLD_HASH_HEX " 3/4 1 ok 29.0 us, aborted 21\n");
    assert_contains(out, "\n nccl 2.28.9; 1 communicator, 21 collective and p2p calls\n");
    free(out);
    proc_result_free(&r);

    r = run_ok("summary", dir, true);
    char *j = compact(r.out);
    assert_contains(j, "\"cuda_driver_version\":12090,\"nccl_version\":22809,");
    assert_contains(j, "\"communicators\":[{\"comm_id\":1,\"unique_id_hash\":\"" NCCL_WORLD_HASH_HEX
                       "\",\"rank\":0,\"nranks\":4,\"device\":0,\"api\":\"ncclCommInitRank\","
                       "\"comm\":\"0x7e0000001000\",\"init_result\":0,"
                       "\"init_result_name\":\"ncclSuccess\",\"init_at_ns\":1000,"
                       "\"end\":\"destroy\",\"end_at_ns\":36000,\"lifetime_ns\":35000,"
                       "\"finalize_at_ns\":null,\"parent_comm_id\":null,\"color\":null,"
                       "\"key\":null,\"calls\":21,\"failed_calls\":0},{\"comm_id\":2,");
    assert_contains(j, "\"nccl_calls\":{\"calls\":26,\"failed\":0,\"unattributed\":0}}");
    assert_contains(j, "\"end\":\"abort\"");
    free(j);
    proc_result_free(&r);
    scratch_remove(dir);

    /* A trace of this build without NCCL: known to have none. */
    dir = scratch_dir();
    char *path = scenario_normal(dir);
    r = run_ok("summary", dir, true);
    j = compact(r.out);
    assert_contains(j, "\"cuda_driver_version\":12090,\"nccl_version\":null,");
    assert_contains(j, "\"communicators\":[],\"nccl_calls\":{\"calls\":0,\"failed\":0,"
                       "\"unattributed\":0}}");
    free(j);
    proc_result_free(&r);
    r = run_ok("summary", dir, false);
    ck_assert_ptr_null(strstr(r.out, " nccl "));
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

/*
 * Values no tracer writes, in one trace: a communicator of 2^40 ranks, ranks
 * out of range, negative and repeated, no hash, a peer outside the
 * communicator, negative sizes and durations, an unknown datatype, calls
 * on a handle no init made. The report must say what it can and never
 * crash, size anything by nranks or print garbage.
 */
START_TEST(test_hostile_values)
{
    char *dir = scratch_dir();
    char *path = fixture_trace_path(dir, "h\x1b[31m", 5, 5);
    struct fixture *f = fixture_create(path, FIXTURE_NULLABLE);
    struct fixture_process p = {.pid = 5,
                                .host = "h\x1b[31m",
                                .start_wall_ns = 5,
                                .start_mono_ns = 1000,
                                .nccl_version = 1};
    fixture_process(f, &p);
    struct fixture_nccl_init huge = {.comm = 0x10, .nranks = 1ll << 40, .rank = 3, .hash = 1};
    fixture_nccl_init(f, &huge);
    struct fixture_nccl_init out_of_range = {.comm = 0x20, .nranks = 2, .rank = 7, .hash = 2};
    fixture_nccl_init(f, &out_of_range);
    struct fixture_nccl_init negative = {.comm = 0x30, .nranks = 2, .rank = -4, .hash = 2};
    fixture_nccl_init(f, &negative);
    struct fixture_nccl_init twice = {.comm = 0x40, .nranks = 2, .rank = 0, .hash = 2};
    fixture_nccl_init(f, &twice);
    twice.comm = 0x50;
    fixture_nccl_init(f, &twice);
    struct fixture_nccl_init no_size = {.comm = 0x60, .nranks = -1, .rank = 0, .hash = 3};
    fixture_nccl_init(f, &no_size);
    int64_t nulls = fixture_nccl_init(f, &(struct fixture_nccl_init){.comm = 0x70, .hash = 4});
    fixture_exec_int(f, "UPDATE events SET arg1 = NULL, arg2 = NULL, arg3 = NULL WHERE seq = ?",
                     nulls);
    fixture_nccl_collective(f, CT_API_ncclAllReduce, 0x10, NCCL_FLOAT32, 4096, 0, 0);
    struct fixture_nccl_call weird = {.api = CT_API_ncclAllReduce,
                                      .comm = 0x10,
                                      .datatype = 99,
                                      .redop = 1000,
                                      .peer = FIXTURE_NCCL_NONE,
                                      .bytes = -5,
                                      .group_depth = -3,
                                      .captured = 1,
                                      .dur_ns = -1000,
                                      .result = -9};
    fixture_nccl_call(f, &weird);
    weird.bytes = INT64_MAX;
    weird.dur_ns = INT64_MAX;
    fixture_nccl_call(f, &weird);
    fixture_nccl_call(f, &weird);
    fixture_nccl_p2p(f, CT_API_ncclSend, 0x10, 1ll << 41, 8, 0);
    fixture_nccl_p2p(f, CT_API_ncclRecv, 0x10, -7, 8, 0);
    fixture_nccl_p2p(f, CT_API_ncclSend, 0x20, 0, 8, 0);
    fixture_nccl_p2p(f, CT_API_ncclSend, 0x40, 1, 8, 0);
    fixture_nccl_collective(f, CT_API_ncclBroadcast, 0xdead, NCCL_INT8, 1, 0, 0);
    fixture_nccl_collective(f, CT_API_ncclAllReduce, 0x70, NCCL_INT8, 0, 0, 0);
    int64_t gone = fixture_nccl_collective(f, CT_API_ncclAllGather, 0x60, NCCL_INT8, 1, 0, 0);
    fixture_exec_int(f,
                     "UPDATE events SET size = NULL, dur_ns = NULL, arg2 = NULL,"
                     " result = NULL WHERE seq = ?",
                     gone);
    fixture_nccl_end(f, CT_API_ncclCommAbort, 0x10);
    fixture_nccl_end(f, CT_API_ncclCommAbort, 0x10);
    fixture_close(f);

    struct proc_result r = run_ok("collectives", dir, false);
    ck_assert_ptr_null(memchr(r.out, '\x1b', r.out_len));
    char *out = squeeze(r.out);
    assert_contains(out, "Communicator 0000000000000001: 1099511627776 ranks, 1 traced,"
                         " 1099511627775 WITHOUT TRACE\n");
    assert_contains(out, "ranks 0-2 and 4-1099511627775 of 1099511627776 have no trace");
    assert_contains(out, "pid 5 holds rank 7, outside 0-1");
    assert_contains(out, "pid 5 holds rank -4, outside 0-1");
    assert_contains(out, "rank 0 is held more than once (again by pid 5)");
    assert_contains(out, "its size is unknown");
    assert_contains(out, "which is not a rank of this 1099511627776-rank communicator");
    assert_contains(out, "pid 5 made 1 NCCL call on communicators whose init its trace does not"
                         " hold");
    assert_contains(out, " type99 ? ");
    assert_contains(out, " 0 B ");
    free(out);
    proc_result_free(&r);

    r = run_ok("collectives", dir, true);
    char *j = compact(r.out);
    assert_contains(j, "\"nranks\":1099511627776,\"ranks_traced\":1,"
                       "\"missing_ranks_count\":1099511627775,\"missing_ranks\":"
                       "[{\"first\":0,\"last\":2},{\"first\":4,\"last\":1099511627775}]");
    assert_contains(j, "\"unattributed\":[{\"op\":\"ncclBroadcast\",\"calls\":1}]");
    assert_contains(j, "\"size_bucket\":\"?\",\"size_min\":null,\"size_max\":null");
    /* Totals saturate; negative sizes and times count as nothing. */
    assert_contains(j, "\"bytes\":9223372036854775807,\"dur_ns\":9223372036854775807,");
    free(j);
    proc_result_free(&r);

    /* summary shows the same communicators. */
    r = run_ok("summary", dir, false);
    proc_result_free(&r);
    r = run_ok("summary", dir, true);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_cli_conventions)
{
    const char *help[] = {"help", NULL};
    struct proc_result r = run_cutrace(help, NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "  collectives ");
    proc_result_free(&r);

    const char *sub_help[] = {"collectives", "--help", NULL};
    r = run_cutrace(sub_help, NULL);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, "usage: cutrace collectives [--json] DIR...\n");
    char *first = strdup(r.out);
    proc_result_free(&r);
    const char *help_sub[] = {"help", "collectives", NULL};
    r = run_cutrace(help_sub, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, first);
    free(first);
    proc_result_free(&r);

    const char *const *usage_errors[] = {
        (const char *[]){"collectives", NULL},
        /* Several paths are one run (docs/cli.md, Several paths). */
        (const char *[]){"collectives", "a", "b", "--rank", NULL},
        (const char *[]){"collectives", "--bogus", "dir", NULL},
        (const char *[]){"collectives", "-x", "dir", NULL},
    };
    for (size_t i = 0; i < sizeof(usage_errors) / sizeof(usage_errors[0]); i++) {
        r = run_cutrace(usage_errors[i], NULL);
        ck_assert_msg(r.status == 2, "case %zu: exit %d: %.1500s", i, r.status, r.err);
        ck_assert_msg(r.out_len == 0, "case %zu: stdout: %.1500s", i, r.out);
        ck_assert_msg(count_lines(r.err) == 1, "case %zu: stderr: %.1500s", i, r.err);
        proc_result_free(&r);
    }

    /* Options may follow the directory; a single trace file is accepted. */
    char *dir = nccl_dir(NCCL_SCENARIO_DEFAULT);
    const char *late_option[] = {"collectives", dir, "--json", NULL};
    r = run_cutrace(late_option, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert(json_valid(r.out));
    proc_result_free(&r);
    char *one = fixture_trace_path(dir, "node2", NCCL_PID(3), NORMAL_START_WALL + 3000000);
    r = run_ok("collectives", one, false);
    char *out = squeeze(r.out);
    assert_contains(out, ": 1 process, 1 communicator, NCCL 2.28.9\n");
    assert_contains(out, ": 4 ranks, 1 traced, 3 WITHOUT TRACE\n");
    assert_contains(out, "ranks 0-2 of 4 have no trace in this directory");
    free(out);
    proc_result_free(&r);
    free(one);
    scratch_remove(dir);
}
END_TEST

/* ---- the shared conventions: --csv tables, filters, --fail-on-problem ---- */

/* cutrace collectives with these options on dir; exit `status` expected. */
static struct proc_result run_args(const char *const *args, int status)
{
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(!r.signaled && r.status == status, "%s %s: exit %d, not %d; stderr:\n%.1500s",
                  args[1], args[2], r.status, status, r.err);
    return r;
}

START_TEST(test_csv_tables)
{
    char *dir = nccl_dir(NCCL_SCENARIO_UNMATCHED | NCCL_SCENARIO_SHORT_RANK);
    const char *comms[] = {"collectives", "--csv", dir, NULL};
    struct proc_result r = run_args(comms, 0);
    ck_assert_str_eq(r.out, "unique_id_hash,nranks,ranks_traced,missing_ranks,complete,"
                            "parent_unique_id_hash,color,collective_calls,p2p_calls,"
                            "failed_calls,problems\r\n" NCCL_WORLD_HASH_HEX
                            ",4,4,0,1,,,67,15,0,2\r\n" NCCL_TP_HASH_HEX
                            ",2,2,0,1," NCCL_WORLD_HASH_HEX ",0,10,0,0,0\r\n");
    proc_result_free(&r);

    /* A row per rank of each communicator: 4 of world, 2 of tp. */
    const char *members[] = {"collectives", "--csv=members", dir, NULL};
    r = run_args(members, 0);
    ck_assert_uint_eq(count_lines(r.out), 1 + 4 + 2);
    assert_contains(r.out, "\r\n" NCCL_WORLD_HASH_HEX ",3,4,1003,node2,");
    assert_contains(r.out, ",1,0,GPU-00000002-0000-0000-0000-000000000000,0,ncclSuccess,"
                           "destroy,29000,21,0\r\n");
    proc_result_free(&r);

    /* Raw numbers: bytes and the size bucket's bounds as integers. */
    const char *ops[] = {"collectives", "--csv=ops", dir, NULL};
    r = run_args(ops, 0);
    assert_contains(r.out, "\r\n" NCCL_WORLD_HASH_HEX ",ncclAllReduce,collective,bfloat16,"
                           "1-2 MiB,1048576,2097152,39,9,10,0,61341696,");
    assert_contains(r.out, ",ncclSend,p2p,");
    /* ... and times in nanoseconds: rank 0's first takes 50 us. */
    assert_contains(r.out, ",126000,3230,50000,16,23,0,0\r\n");
    ck_assert_ptr_null(strstr(r.out, " us"));
    proc_result_free(&r);

    const char *pairs[] = {"collectives", "--csv=pairs", dir, NULL};
    r = run_args(pairs, 0);
    assert_contains(r.out, "\r\n" NCCL_WORLD_HASH_HEX ",0,1,2,131072,1,65536,0\r\n");
    assert_contains(r.out, "\r\n" NCCL_WORLD_HASH_HEX ",1,2,2,131072,2,131072,1\r\n");
    ck_assert_uint_eq(count_lines(r.out), 1 + 4);
    proc_result_free(&r);

    /* The message holds a comma: quoted. */
    const char *problems[] = {"collectives", "--csv=problems", dir, NULL};
    r = run_args(problems, 0);
    assert_contains(r.out, "unique_id_hash,kind,op,expected,ranks,message\r\n");
    assert_contains(r.out, "\r\n" NCCL_WORLD_HASH_HEX ",call_counts_differ,ncclAllReduce,12,3,"
                           "\"rank 3 made 11 ncclAllReduce, the others 12: ");
    assert_contains(r.out, "\r\n" NCCL_WORLD_HASH_HEX ",p2p_unmatched,,2,0 1,\"rank 0 sent 2");
    ck_assert_uint_eq(count_lines(r.out), 1 + 2);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_filters)
{
    char *dir = nccl_dir(NCCL_SCENARIO_SHORT_RANK);
    /* Rank 3: only its row of world is listed, tp (ranks 0 and 1) is not, and
     * its pairs are those with rank 3 on a side. */
    const char *rank3[] = {"collectives", "--rank", "3", dir, NULL};
    struct proc_result r = run_args(rank3, 0);
    char *out = squeeze(r.out);
    assert_contains(out, ": 4 processes, 2 communicators, NCCL 2.28.9\n");
    assert_contains(out, "\n 3 1003 node2 1 GPU-00000003-");
    ck_assert_ptr_null(strstr(out, " 0 1000 node1 "));
    ck_assert_ptr_null(strstr(out, "Communicator " NCCL_TP_HASH_HEX));
    assert_contains(out, "\n 2 -> 3 2 2 ");
    assert_contains(out, "\n 3 -> 0 2 2 ");
    ck_assert_ptr_null(strstr(out, "\n 0 -> 1 "));
    /* The check is still over every rank: rank 3 made fewer calls than its peers. */
    assert_contains(out, " ncclAllReduce: 47 calls; RANKS DIFFER, 11 to 12 per rank\n");
    assert_contains(out, " problems 1 (listed under each communicator)\n");
    free(out);
    proc_result_free(&r);

    /* Rank 0 is listed with the problem of rank 3 in its communicator; its
     * own calls in per_rank, the range over all ranks. */
    const char *rank0[] = {"collectives", "--json", "--rank", "0", dir, NULL};
    r = run_args(rank0, 0);
    char *j = compact(r.out);
    assert_contains(j, "\"min_calls_per_rank\":11,\"max_calls_per_rank\":12,\"ranks_agree\":false,"
                       "\"per_rank\":[{\"rank\":0,\"pid\":1000,\"comm_id\":1,\"calls\":12}],");
    /* No process or member of node2 (the problem names rank 3: it is its finding). */
    ck_assert_ptr_null(strstr(j, "\"file\":\"node2-"));
    assert_contains(j, "\"ranks\":[{\"rank\":3,\"pid\":1003,\"value\":11}]");
    assert_contains(j, "\"kind\":\"call_counts_differ\"");
    assert_contains(j, "\"problems\":1}");
    free(j);
    proc_result_free(&r);

    /* --host, --pid and --gpu choose the members in the CSV table. */
    const struct {
        const char *opt, *value;
        size_t rows;
        const char *present, *absent;
    } cases[] = {
        {"--host", "node1", 4, ",0,4,1000,node1,", ",1003,"},
        {"--pid", "1001,1003", 3, ",1,2,1001,node1,", ",1000,"},
        {"--gpu", "GPU-00000002", 1, ",2,4,1002,node2,", ",1001,"},
        {"--rank", "2-3", 2, ",3,4,1003,", NCCL_TP_HASH_HEX},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *args[] = {"collectives", "--csv=members", cases[i].opt, cases[i].value, dir,
                              NULL};
        r = run_args(args, 0);
        ck_assert_msg(count_lines(r.out) == 1 + cases[i].rows, "%s %s:\n%s", cases[i].opt,
                      cases[i].value, r.out);
        assert_contains(r.out, cases[i].present);
        ck_assert_msg(!strstr(r.out, cases[i].absent), "%s %s lists %s", cases[i].opt,
                      cases[i].value, cases[i].absent);
        proc_result_free(&r);
    }

    /* Nothing matches: a usage error saying what there is. */
    const char *none[] = {"collectives", "--rank", "9", dir, NULL};
    r = run_args(none, 2);
    ck_assert_uint_eq(r.out_len, 0);
    ck_assert_uint_eq(count_lines(r.err), 1);
    assert_contains(r.err, "cutrace collectives: --rank 9: no process of these traces matches");
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_fail_on_problem)
{
    /* Each finding of the checks fails CI; the report is printed in full first. */
    const unsigned found[] = {NCCL_SCENARIO_SHORT_RANK, NCCL_SCENARIO_NO_RANK_2,
                              NCCL_SCENARIO_UNMATCHED, NCCL_SCENARIO_FAILED_CALL,
                              NCCL_SCENARIO_FAILED_INIT};
    for (size_t i = 0; i < sizeof(found) / sizeof(found[0]); i++) {
        char *dir = nccl_dir(found[i]);
        const char *plain[] = {"collectives", dir, NULL};
        struct proc_result r = run_args(plain, 0);
        proc_result_free(&r);
        const char *fail[] = {"collectives", "--fail-on-problem", dir, NULL};
        r = run_args(fail, 3);
        assert_contains(r.out, "\nCommunicator " NCCL_WORLD_HASH_HEX ": ");
        ck_assert_uint_eq(r.err_len, 0);
        proc_result_free(&r);
        const char *json[] = {"collectives", "--json", "--fail-on-problem", dir, NULL};
        r = run_args(json, 3);
        ck_assert(json_valid(r.out));
        proc_result_free(&r);
        scratch_remove(dir);
    }
    char *dir = nccl_dir(NCCL_SCENARIO_DEFAULT);
    const char *clean[] = {"collectives", "--fail-on-problem", dir, NULL};
    struct proc_result r = run_args(clean, 0);
    assert_contains(r.out, " problems   none found\n");
    proc_result_free(&r);
    scratch_remove(dir);

    /* Only what is listed counts: the failed tp split of rank 1 is not in
     * the communicators of ranks 2 and 3. */
    dir = nccl_dir(NCCL_SCENARIO_FAILED_INIT);
    const char *others[] = {"collectives", "--fail-on-problem", "--rank", "2-3", dir, NULL};
    r = run_args(others, 0);
    assert_contains(r.out, " problems   0 where the ranks listed are, of 1 in all\n");
    ck_assert_ptr_null(strstr(r.out, "ncclCommSplit failed"));
    proc_result_free(&r);
    const char *rank1[] = {"collectives", "--fail-on-problem", "--rank", "1", dir, NULL};
    r = run_args(rank1, 3);
    assert_contains(r.out, "ncclCommSplit failed");
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

/* Width from COLUMNS; on a narrow terminal lines wrap and tables shorten
 * their text, but no number of the wide report is lost or cut. */
START_TEST(test_narrow_terminal)
{
    char *dir = nccl_dir(NCCL_SCENARIO_SHORT_RANK | NCCL_SCENARIO_FAILED_CALL);
    const char *args[] = {"collectives", dir, NULL};
    struct proc_result wide = run_cutrace(args, (const char *[]){"COLUMNS", NULL});
    struct proc_result tiny = run_cutrace(args, (const char *[]){"COLUMNS=10", NULL});
    ck_assert_int_eq(wide.status, 0);
    ck_assert_int_eq(tiny.status, 0);
    ck_assert_str_ne(wide.out, tiny.out);
    char *narrow = squeeze(tiny.out);
    for (char *p = narrow; *p; p++)
        if (*p == '\n')
            *p = ' ';
    size_t numbers = 0;
    char *copy = strdup(wide.out), *save = NULL;
    for (char *word = strtok_r(copy, " \n", &save); word; word = strtok_r(NULL, " \n", &save)) {
        if (word[0] < '0' || word[0] > '9')
            continue;
        char needle[128];
        snprintf(needle, sizeof(needle), " %s ", word);
        ck_assert_msg(strstr(narrow, needle) || strncmp(narrow, needle + 1, strlen(word)) == 0,
                      "%s lost at COLUMNS=10:\n%s", word, tiny.out);
        numbers++;
    }
    ck_assert_uint_ge(numbers, 100);
    free(copy);
    free(narrow);
    proc_result_free(&wide);
    proc_result_free(&tiny);
    scratch_remove(dir);
}
END_TEST

Suite *collectives_suite(void)
{
    Suite *s = suite_create("collectives");
    TCase *tc = tcase_create("collectives");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_groups_and_counts_text);
    tcase_add_test(tc, test_groups_and_counts_json);
    tcase_add_test(tc, test_rank_with_fewer_calls_is_flagged);
    tcase_add_test(tc, test_missing_rank_is_flagged);
    tcase_add_test(tc, test_unmatched_p2p_is_flagged);
    tcase_add_test(tc, test_failed_call_and_init_are_flagged);
    tcase_add_test(tc, test_no_nccl_calls);
    tcase_add_test(tc, test_deterministic_output);
    tcase_add_test(tc, test_old_trace_is_refused);
    tcase_add_test(tc, test_summary_shows_communicators);
    tcase_add_test(tc, test_hostile_values);
    tcase_add_test(tc, test_cli_conventions);
    tcase_add_test(tc, test_csv_tables);
    tcase_add_test(tc, test_filters);
    tcase_add_test(tc, test_fail_on_problem);
    tcase_add_test(tc, test_narrow_terminal);
    suite_add_tcase(s, tc);
    return s;
}
