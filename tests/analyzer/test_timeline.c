/*
 * test_timeline.c - `cutrace timeline` end to end, and through it the GPU
 * memory model (analyzer/model/gpumodel.c) that `cutrace budget` shares. The
 * model pairs allocations with their frees in C, for speed, with the rules
 * of the `allocations` view; the first two tests hold it to that view with
 * SQL at every measurement, of a trace full of the hard cases (nested
 * calls, pointers handed out again, a device reset, IPC) and of random
 * mixes of them. Then the categories and
 * `unexplained` at each measurement, every kind of milestone, --gpu, and
 * odd input: unknown and double frees, a killed process, several hosts.
 */
#include "cli.h"
#include "model/milestones.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Suite *timeline_suite(void); /* registered in test_main.c */

#define TOTAL    (80 * GiB)
#define WALL     NORMAL_START_WALL
#define UUID_A   "GPU-aaaaaaaa-0000-0000-0000-000000000000"
#define UUID_B   "GPU-bbbbbbbb-0000-0000-0000-000000000000"
#define UUID_C   "GPU-cccccccc-0000-0000-0000-000000000000"
#define HASH     0x7733553311224466ull
#define HASH_HEX "7733553311224466"

/* ---- building traces ---- */

/* A process on `host` whose device `device` is the GPU `uuid`; its first
 * event at mono + 1 us. *path_out (may be NULL) gets the trace's path. */
static struct fixture *process_trace(const char *dir, const char *host, int64_t pid, int64_t mono,
                                     int64_t device, const char *uuid, char **path_out)
{
    int64_t wall = WALL + pid * 1000;
    char *path = fixture_trace_path(dir, host, pid, wall);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid,
                                .ppid = 1,
                                .host = host,
                                .cmdline = "python3 server.py",
                                .start_wall_ns = wall,
                                .start_mono_ns = mono,
                                .cuda_runtime_version = 12080,
                                .nccl_version = NCCL_VERSION};
    fixture_process(f, &p);
    fixture_device(f, device, uuid, "NVIDIA H100 80GB HBM3", TOTAL);
    if (path_out)
        *path_out = path;
    else
        free(path);
    return f;
}

/* An IPC export or open, with a 64-byte handle whose first byte is `tag`. */
static int64_t ipc_call(struct fixture *f, enum ct_api api, int64_t device, int64_t ptr,
                        int64_t size, unsigned char tag)
{
    unsigned char handle[64] = {0xc7, tag};
    struct fixture_event e = {.api = api,
                              .device = device,
                              .ptr = ptr,
                              .size = size,
                              .dur_ns = 100,
                              .handle = handle,
                              .handle_len = sizeof(handle)};
    return fixture_event(f, &e);
}

/* A call made inside another (depth 1). */
static int64_t nested_call(struct fixture *f, enum ct_api api, int64_t parent, int64_t ptr,
                           int64_t size, int64_t arg1)
{
    struct fixture_event e = {.api = api,
                              .parent_seq = parent,
                              .depth = 1,
                              .device = 0,
                              .ptr = ptr,
                              .size = size,
                              .dur_ns = 50,
                              .arg = {0, arg1}};
    return fixture_event(f, &e);
}

/* cuMemCreate of size bytes at a location (1: the device, 3: host NUMA). */
static int64_t mem_create(struct fixture *f, int64_t handle, int64_t size, int64_t location)
{
    struct fixture_event e = {.api = CT_API_cuMemCreate,
                              .device = 0,
                              .ptr = handle,
                              .size = size,
                              .dur_ns = 100,
                              .arg = {0, location}};
    return fixture_event(f, &e);
}

/* ---- running the report ---- */

static struct proc_result timeline_run(const char *dir, const char *gpu, bool json)
{
    const char *args[8] = {"timeline"};
    size_t n = 1;
    if (gpu) {
        args[n++] = "--gpu";
        args[n++] = gpu;
    }
    if (json)
        args[n++] = "--json";
    args[n++] = dir;
    args[n] = NULL;
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(!r.signaled, "killed by signal %d; stderr:\n%.1500s", r.status - 128, r.err);
    return r;
}

/* The JSON report, compacted; exit 0 and nothing on stderr. */
static char *timeline_json(const char *dir, const char *gpu)
{
    struct proc_result r = timeline_run(dir, gpu, true);
    ck_assert_msg(r.status == 0, "exit %d; stderr:\n%.1500s", r.status, r.err);
    ck_assert_msg(r.err_len == 0, "stderr not empty:\n%.1500s", r.err);
    ck_assert_msg(json_valid(r.out), "invalid JSON:\n%.3000s", r.out);
    /* Live sizes are never negative, whatever the input (unexplained may
     * be: a GPU can report less in use than the traces hold). */
    char *json = compact(r.out);
    for (const char *p = strstr(json, "live\":{"); p; p = strstr(p + 1, "live\":{")) {
        const char *end = strchr(p, '}');
        ck_assert_ptr_nonnull(end);
        ck_assert_msg(!memchr(p, '-', (size_t)(end - p)), "negative live bytes: %.300s", p);
    }
    ck_assert_msg(!strstr(json, "\"traced_bytes\":-"), "negative traced bytes in:\n%.3000s", json);
    proc_result_free(&r);
    return json;
}

/* The text report: 120 columns at most, then squeezed. */
static char *timeline_text(const char *dir, const char *gpu)
{
    struct proc_result r = timeline_run(dir, gpu, false);
    ck_assert_msg(r.status == 0, "exit %d; stderr:\n%.1500s", r.status, r.err);
    ck_assert_msg(r.err_len == 0, "stderr not empty:\n%.1500s", r.err);
    assert_width(r.out, 120);
    char *text = squeeze(r.out);
    proc_result_free(&r);
    return text;
}

/* The JSON of one milestone, from its kind and seq to the next milestone. */
static char *row_json(const char *json, const char *kind, int64_t seq)
{
    char key[96];
    snprintf(key, sizeof(key), "{\"kind\":\"%s\",\"seq\":%" PRId64 ",", kind, seq);
    const char *start = strstr(json, key);
    ck_assert_msg(start != NULL, "no milestone %s in:\n%.4000s", key, json);
    const char *end = strstr(start + 1, "{\"kind\":\"");
    const char *gpu_end = strstr(start + 1, "]}");
    if (!end || (gpu_end && gpu_end < end))
        end = gpu_end;
    return strndup(start, end ? (size_t)(end - start) : strlen(start));
}

/* How many milestones of that kind the report holds. */
static size_t count_kind(const char *json, const char *kind)
{
    char key[64];
    snprintf(key, sizeof(key), "{\"kind\":\"%s\",", kind);
    size_t n = 0;
    for (const char *p = strstr(json, key); p; p = strstr(p + 1, key))
        n++;
    return n;
}

/* One measurement row of the JSON report, as numbers. */
struct measured {
    int64_t seq, pid;
    int64_t live[7]; /* nccl, ipc_exported, vmm, runtime, managed, peer, host */
    int64_t traced, free_bytes, total, used, unexplained;
};

static size_t measurements(const char *json, struct measured *out, size_t max)
{
    size_t n = 0;
    const char *key = "{\"kind\":\"measurement\",\"seq\":";
    for (const char *p = strstr(json, key); p && n < max; p = strstr(p + 1, key)) {
        struct measured *m = &out[n];
        ck_assert_int_eq(sscanf(p + strlen(key), "%" SCNd64 ",\"pid\":%" SCNd64, &m->seq, &m->pid),
                         2);
        const char *live = strstr(p, "\"live\":{");
        ck_assert_ptr_nonnull(live);
        int got =
            sscanf(live,
                   "\"live\":{\"nccl\":%" SCNd64 ",\"ipc_exported\":%" SCNd64 ",\"vmm\":%" SCNd64
                   ",\"runtime\":%" SCNd64 ",\"managed\":%" SCNd64 ",\"peer\":%" SCNd64
                   ",\"host\":%" SCNd64 "},\"traced_bytes\":%" SCNd64
                   ",\"measurement\":{\"free_bytes\":%" SCNd64 ",\"total_bytes\":%" SCNd64
                   ",\"used_bytes\":%" SCNd64 ",\"unexplained_bytes\":%" SCNd64 "}",
                   &m->live[0], &m->live[1], &m->live[2], &m->live[3], &m->live[4], &m->live[5],
                   &m->live[6], &m->traced, &m->free_bytes, &m->total, &m->used, &m->unexplained);
        ck_assert_msg(got == 12, "unexpected measurement row: %.600s", p);
        n++;
    }
    return n;
}

/* ---- the model agrees with the allocations view ---- */

#define P_A 0x7f0000000000ll
#define P_B 0x7f0000200000ll
#define P_M 0x7f0000400000ll
#define P_P 0x7f0001000000ll
#define P_G 0x7f0002000000ll
#define P_V 0xa1ll /* a cuMemCreate handle */
#define P_H 0x7e0000000000ll
#define P_I 0x7d0000000000ll
#define P_C 0x7f0010000000ll

/*
 * pid 5000 on UUID_A; live bytes by kind after each step:
 *   2 cudaMalloc A 1 MiB, 3 cudaMalloc B 2 MiB          device 3
 *   4 measurement                                        device 3
 *   5 cudaMallocManaged M 4 MiB, 6 cudaMalloc M nested   (the same memory)
 *   7 cudaFree A; 8 cudaMalloc P 8 MiB; 9 cudaMalloc P 16 MiB (ends the 8)
 *   10 cudaGraphInstantiate, 11 cuMemAlloc_v2 G 32 MiB nested (counted)
 *   12 cuMemCreate V 64 MiB on the device, 13 cudaMallocHost H 128 MiB,
 *   14 cudaIpcOpenMemHandle I 256 MiB, 15 cudaMalloc 100 GiB fails
 *   16 measurement: device 50, managed 4, vmm 64, host 128, ipc 256
 *   17 cudaDeviceReset: ends all but V; 18 cudaFree B (already ended)
 *   19 cudaMalloc B 2 MiB again; 20 measurement: device 2, vmm 64
 *   21 cudaMalloc C 512 MiB, 22 cudaFree C, 23 cuMemRelease V
 *   24 measurement: device 2
 *   25 cudaIpcOpenMemHandle J 64 MiB, 26 cudaIpcCloseMemHandle J
 *   27 cudaFree B, 28 cuMemFree_v2 B nested (one free)
 *   29 cudaMallocAsync D 8 MiB, 30 cudaFreeAsync D, 31 cudaMalloc D 1 MiB
 *   32 measurement: device 1
 */
static char *agreement_trace(const char *dir)
{
    char *path;
    struct fixture *f = process_trace(dir, "node1", 5000, 4000000000ll, 0, UUID_A, &path);
    fixture_call(f, CT_API_cudaSetDevice, 0, 0, 0, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, P_A, 1 * MiB, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, P_B, 2 * MiB, 0);
    fixture_meminfo(f, 0, TOTAL - 515 * MiB, TOTAL);
    int64_t managed = fixture_call(f, CT_API_cudaMallocManaged, 0, P_M, 4 * MiB, 0);
    nested_call(f, CT_API_cudaMalloc, managed, P_M, 4 * MiB, 0);
    fixture_call(f, CT_API_cudaFree, 0, P_A, 0, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, P_P, 8 * MiB, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, P_P, 16 * MiB, 0);
    int64_t graph = fixture_call(f, CT_API_cudaGraphInstantiate, 0, 0x6000, 0, 0);
    nested_call(f, CT_API_cuMemAlloc_v2, graph, P_G, 32 * MiB, 0);
    mem_create(f, P_V, 64 * MiB, 1);
    fixture_call(f, CT_API_cudaMallocHost, 0, P_H, 128 * MiB, 0);
    ipc_call(f, CT_API_cudaIpcOpenMemHandle, 0, P_I, 256 * MiB, 1);
    fixture_call(f, CT_API_cudaMalloc, 0, 0, 100 * GiB, 2);
    fixture_meminfo(f, 0, TOTAL - 1000 * MiB, TOTAL);
    fixture_call(f, CT_API_cudaDeviceReset, 0, 0, 0, 0);
    fixture_call(f, CT_API_cudaFree, 0, P_B, 0, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, P_B, 2 * MiB, 0);
    fixture_meminfo(f, 0, TOTAL - 900 * MiB, TOTAL);
    fixture_call(f, CT_API_cudaMalloc, 0, P_C, 512 * MiB, 0);
    fixture_call(f, CT_API_cudaFree, 0, P_C, 0, 0);
    fixture_call(f, CT_API_cuMemRelease, 0, P_V, 0, 0);
    fixture_meminfo(f, 0, TOTAL - 600 * MiB, TOTAL);
    ipc_call(f, CT_API_cudaIpcOpenMemHandle, 0, P_I + GiB, 64 * MiB, 2);
    fixture_call(f, CT_API_cudaIpcCloseMemHandle, 0, P_I + GiB, 0, 0);
    int64_t free_b = fixture_call(f, CT_API_cudaFree, 0, P_B, 0, 0);
    nested_call(f, CT_API_cuMemFree_v2, free_b, P_B, 0, 0);
    fixture_call(f, CT_API_cudaMallocAsync, 0, P_C, 8 * MiB, 0);
    fixture_call(f, CT_API_cudaFreeAsync, 0, P_C, 0, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, P_C, 1 * MiB, 0);
    fixture_meminfo(f, 0, TOTAL - 600 * MiB, TOTAL);
    fixture_close(f);
    return path;
}

/* Live bytes by category when call seq took effect (its effect order),
 * summed with SQL over the allocations view (a trace without NCCL or IPC
 * exports: kind decides the category). */
static void view_live(const char *path, int64_t seq, int64_t live[7])
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *stmt;
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT kind, COALESCE(SUM(size), 0) FROM allocations,"
                                        " (SELECT effect_order AS at FROM calls WHERE seq = ?1)"
                                        " WHERE effect_order < at AND (free_effect_order IS NULL"
                                        " OR free_effect_order > at) GROUP BY kind",
                                        -1, &stmt, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(stmt, 1, seq);
    memset(live, 0, 7 * sizeof(*live));
    while (sqlite3_step(stmt) == SQLITE_ROW) {
        const char *kind = (const char *)sqlite3_column_text(stmt, 0);
        int64_t bytes = sqlite3_column_int64(stmt, 1);
        if (strcmp(kind, "vmm") == 0)
            live[2] += bytes;
        else if (strcmp(kind, "device") == 0)
            live[3] += bytes;
        else if (strcmp(kind, "managed") == 0)
            live[4] += bytes;
        else if (strcmp(kind, "ipc") == 0)
            live[5] += bytes;
        else if (strcmp(kind, "host") == 0 || strcmp(kind, "vmm_host") == 0)
            live[6] += bytes;
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

START_TEST(test_model_agrees_with_allocations_view)
{
    char *dir = scratch_dir();
    char *path = agreement_trace(dir);
    char *j = timeline_json(dir, NULL);
    struct measured m[8];
    size_t n = measurements(j, m, 8);
    ck_assert_uint_eq(n, 5);
    for (size_t i = 0; i < n; i++) {
        int64_t view[7];
        view_live(path, m[i].seq, view);
        for (int c = 0; c < 7; c++)
            ck_assert_msg(m[i].live[c] == view[c],
                          "seq %" PRId64 ", category %d: model %" PRId64 ", view %" PRId64,
                          m[i].seq, c, m[i].live[c], view[c]);
        ck_assert_int_eq(m[i].traced, view[2] + view[3] + view[4]);
    }
    /* And the view itself says what the trace was built to say. */
    const int64_t seqs[5] = {4, 16, 20, 24, 32};
    const int64_t device[5] = {3 * MiB, 50 * MiB, 2 * MiB, 2 * MiB, 1 * MiB};
    const int64_t vmm[5] = {0, 64 * MiB, 64 * MiB, 0, 0};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(m[i].seq, seqs[i]);
        ck_assert_int_eq(m[i].live[3], device[i]);
        ck_assert_int_eq(m[i].live[2], vmm[i]);
    }
    ck_assert_int_eq(m[1].live[4], 4 * MiB);
    ck_assert_int_eq(m[1].live[5], 256 * MiB);
    ck_assert_int_eq(m[1].live[6], 128 * MiB);
    ck_assert_int_eq(m[2].live[4] + m[2].live[5] + m[2].live[6], 0);
    ck_assert_int_eq(m[4].live[5], 0);
    /* The failed call is a milestone; the free of B after the reset a note. */
    char *failed = row_json(j, "failed_call", 15);
    assert_contains(failed, "\"result\":2,\"result_name\":\"cudaErrorMemoryAllocation\","
                            "\"size\":107374182400,");
    free(failed);
    assert_contains(j, "\"notes\":[\"pid 5000: 1 free of pointers already freed (ignored)\"]");
    free(j);
    free(path);
    scratch_remove(dir);
}
END_TEST

/* A small deterministic generator (the tests must not depend on libc's rand). */
static uint64_t next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 33;
}

/*
 * A random mix of what the model must pair exactly like the view: allocs
 * and frees of few pointers in four address spaces (so pointers come back,
 * get freed twice, or were never allocated), device resets, memory calls
 * nested in memory calls (the same event, dropped) and in other calls
 * (counted), failed calls, and a measurement every few steps.
 */
static char *random_trace(const char *dir, int64_t pid, uint64_t seed)
{
    char *path;
    struct fixture *f = process_trace(dir, "node1", pid, 4000000000ll, 0, UUID_A, &path);
    uint64_t st = seed;
    static const enum ct_api device_allocs[] = {CT_API_cudaMalloc, CT_API_cuMemAlloc_v2,
                                                CT_API_cudaMallocManaged, CT_API_cudaMallocAsync};
    static const enum ct_api device_frees[] = {CT_API_cudaFree, CT_API_cuMemFree_v2,
                                               CT_API_cudaFreeAsync};
    for (int step = 0; step < 400; step++) {
        uint64_t r = next_random(&st);
        int64_t slot = (int64_t)(next_random(&st) % 4);
        int64_t size = (int64_t)(1 + next_random(&st) % 64) * MiB;
        int64_t result = next_random(&st) % 10 == 0 ? 2 : 0;
        int64_t seq;
        switch (r % 12) {
        case 0:
        case 1:
        case 2:
            seq = fixture_call(f, device_allocs[next_random(&st) % 4], 0, P_A + slot * GiB, size,
                               result);
            if (next_random(&st) % 3 == 0) /* the runtime's own driver call inside */
                nested_call(f, CT_API_cuMemAlloc_v2, seq, P_A + slot * GiB, size, 0);
            break;
        case 3:
        case 4:
            seq =
                fixture_call(f, device_frees[next_random(&st) % 3], 0, P_A + slot * GiB, 0, result);
            if (next_random(&st) % 3 == 0)
                nested_call(f, CT_API_cuMemFree_v2, seq, P_A + slot * GiB, 0, 0);
            break;
        case 5:
            fixture_call(f, CT_API_cudaMallocHost, 0, P_H + slot * GiB, size, result);
            break;
        case 6:
            fixture_call(f, CT_API_cudaFreeHost, 0, P_H + slot * GiB, 0, result);
            break;
        case 7:
            if (next_random(&st) % 2)
                ipc_call(f, CT_API_cudaIpcOpenMemHandle, 0, P_I + slot * GiB, size,
                         (unsigned char)slot);
            else
                fixture_call(f, CT_API_cudaIpcCloseMemHandle, 0, P_I + slot * GiB, 0, result);
            break;
        case 8:
            if (next_random(&st) % 2)
                mem_create(f, P_V + slot, size, next_random(&st) % 2 ? 1 : 3);
            else
                fixture_call(f, CT_API_cuMemRelease, 0, P_V + slot, 0, result);
            break;
        case 9:
            /* Memory made inside a call that is not a memory call counts. */
            seq = fixture_call(f, CT_API_cudaGraphInstantiate, 0, 0x6000, 0, 0);
            nested_call(f, CT_API_cuMemAlloc_v2, seq, P_G + slot * GiB, size, 0);
            break;
        case 10:
            if (next_random(&st) % 8 == 0)
                fixture_call(f,
                             next_random(&st) % 2 ? CT_API_cudaDeviceReset
                                                  : CT_API_cuDevicePrimaryCtxReset_v2,
                             0, 0, 0, 0);
            break;
        default:
            fixture_meminfo(f, 0, TOTAL - 10 * GiB, TOTAL);
            break;
        }
    }
    fixture_close(f);
    return path;
}

/*
 * The random mix with calls of several threads overlapping: each call
 * returns up to 4 calls later (deterministically), so frees and
 * allocations cross, pointers come back before the free that gave them
 * back seems to start, and allocations tie on ret_seq.
 */
static void overlap_calls(const char *path)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_exec(db, "UPDATE events SET ret_seq = seq + (seq * 7919) % 5", NULL, NULL, NULL),
        SQLITE_OK);
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

START_TEST(test_model_agrees_with_allocations_view_random)
{
    for (uint64_t seed = 1; seed <= 6; seed++) {
        char *dir = scratch_dir();
        char *path = random_trace(dir, 5100 + (int64_t)seed, seed);
        if (seed > 3)
            overlap_calls(path);
        char *j = timeline_json(dir, NULL);
        struct measured m[120];
        size_t n = measurements(j, m, 120);
        ck_assert_uint_gt(n, 10);
        int64_t seen = 0;
        for (size_t i = 0; i < n; i++) {
            int64_t view[7];
            view_live(path, m[i].seq, view);
            for (int c = 0; c < 7; c++) {
                ck_assert_msg(m[i].live[c] == view[c],
                              "seed %d, seq %" PRId64 ", category %d: model %" PRId64
                              ", view %" PRId64,
                              (int)seed, m[i].seq, c, m[i].live[c], view[c]);
                seen += view[c];
            }
        }
        ck_assert_int_gt(seen, 0); /* the mix did leave memory live */
        free(j);
        free(path);
        scratch_remove(dir);
    }
}
END_TEST

/* The model pairs crossing frees as the view does, with their own
 * allocations (scenarios.h: scenario_crossing). */
START_TEST(test_model_pairs_crossing_frees)
{
    char *dir = scratch_dir();
    char *path = scenario_crossing(dir);
    char *j = timeline_json(dir, NULL);
    struct measured m[2];
    ck_assert_uint_eq(measurements(j, m, 2), 1);
    ck_assert_int_eq(m[0].seq, 8);
    ck_assert_int_eq(m[0].live[3], CROSSING_LIVE);
    ck_assert_int_eq(m[0].traced, CROSSING_LIVE);
    ck_assert_int_eq(m[0].unexplained, CROSSING_USED - CROSSING_LIVE);
    int64_t view[7];
    view_live(path, m[0].seq, view);
    ck_assert_int_eq(view[3], CROSSING_LIVE);
    /* Every free ended something: no double or unknown frees. */
    ck_assert_ptr_null(strstr(j, "already freed"));
    ck_assert_ptr_null(strstr(j, "never saw allocated"));
    free(j);
    free(path);
    scratch_remove(dir);
}
END_TEST

/* ---- categories and unexplained ---- */

/*
 * GPU A: pid 6000 makes one allocation of each category and measures
 * (used 700 MiB); pid 5990, on the same GPU under another ordinal and
 * still running, holds 100 MiB of runtime memory from before. GPU B: pid 6001 opens pid 6000's
 * exported buffer (peer memory, sized from the export) and measures.
 */
static void categories_traces(const char *dir)
{
    struct fixture *z = process_trace(dir, "node1", 5990, 5000000000ll, 1, UUID_A, NULL);
    /* The same GPU, so the same PCI bus, whatever the ordinal. */
    fixture_exec(z, "UPDATE devices SET pci_bus_id = '0000:18:00.0'");
    fixture_meta(z, "end_state", "running");
    fixture_call(z, CT_API_cudaMalloc, 1, 0x7a0000000000, 100 * MiB, 0);
    fixture_close(z);

    struct fixture *f = process_trace(dir, "node1", 6000, 6000000000ll, 0, UUID_A, NULL);
    fixture_call(f, CT_API_cudaSetDevice, 0, 0, 0, 0);
    struct fixture_event nccl = {
        .api = CT_API_ncclMemAlloc, .device = 0, .ptr = 0x7f1000000000, .size = 16 * MiB};
    fixture_event(f, &nccl);
    /* Exporting NCCL's buffer does not make it a custom all-reduce buffer. */
    ipc_call(f, CT_API_cudaIpcGetMemHandle, 0, 0x7f1000000000, 0, 9);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f2000000000, 32 * MiB, 0);
    ipc_call(f, CT_API_cudaIpcGetMemHandle, 0, 0x7f2000000000, 0, 1);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f3000000000, 4 * MiB, 0);
    fixture_call(f, CT_API_cudaMallocManaged, 0, 0x7f4000000000, 1 * MiB, 0);
    mem_create(f, 0xb1, 2 * MiB, 1);
    mem_create(f, 0xb2, 8 * MiB, 3); /* host NUMA: host memory */
    fixture_call(f, CT_API_cudaMallocHost, 0, 0x7f5000000000, 8 * MiB, 0);
    fixture_meminfo(f, 0, TOTAL - 700 * MiB, TOTAL);
    fixture_close(f);

    struct fixture *g = process_trace(dir, "node1", 6001, 6000000500ll, 0, UUID_B, NULL);
    fixture_call(g, CT_API_cudaSetDevice, 0, 0, 0, 0);
    ipc_call(g, CT_API_cudaIpcOpenMemHandle, 0, 0x7c0000000000, 0, 1);
    fixture_meminfo(g, 0, TOTAL - 300 * MiB, TOTAL);
    fixture_close(g);
}

START_TEST(test_categories_and_unexplained)
{
    char *dir = scratch_dir();
    categories_traces(dir);
    char *j = timeline_json(dir, NULL);
    struct measured m[4];
    ck_assert_uint_eq(measurements(j, m, 4), 2);
    /* GPU A: nccl 16, ipc_exported 32, vmm 2, runtime 4 + pid 5990's 100,
     * managed 1; host 8 + 8 apart. */
    ck_assert_int_eq(m[0].pid, 6000);
    const int64_t a[7] = {16 * MiB, 32 * MiB, 2 * MiB, 104 * MiB, 1 * MiB, 0, 16 * MiB};
    for (int c = 0; c < 7; c++)
        ck_assert_msg(m[0].live[c] == a[c], "category %d: %" PRId64, c, m[0].live[c]);
    ck_assert_int_eq(m[0].traced, 155 * MiB);
    ck_assert_int_eq(m[0].free_bytes, TOTAL - 700 * MiB);
    ck_assert_int_eq(m[0].total, TOTAL);
    ck_assert_int_eq(m[0].used, 700 * MiB);
    ck_assert_int_eq(m[0].unexplained, 700 * MiB - 155 * MiB);
    /* GPU B: the peer's buffer is shown, and not this GPU's memory. */
    ck_assert_int_eq(m[1].pid, 6001);
    const int64_t b[7] = {0, 0, 0, 0, 0, 32 * MiB, 0};
    for (int c = 0; c < 7; c++)
        ck_assert_msg(m[1].live[c] == b[c], "category %d: %" PRId64, c, m[1].live[c]);
    ck_assert_int_eq(m[1].traced, 0);
    ck_assert_int_eq(m[1].unexplained, 300 * MiB);
    assert_contains(j, "\"peak_live\":{\"nccl\":16777216,\"ipc_exported\":33554432,"
                       "\"vmm\":2097152,\"runtime\":109051904,\"managed\":1048576,\"peer\":0,"
                       "\"host\":16777216}");
    /* Both processes on GPU A share its timeline. */
    assert_contains(j, "\"processes\":[{\"pid\":5990,\"rank\":null,");
    assert_contains(j, "{\"pid\":6000,\"rank\":null,");
    free(j);

    char *t = timeline_text(dir, NULL);
    assert_contains(t, ": 2 GPUs, 3 processes, 1 host\n");
    assert_contains(t, " free 79.32 GiB of 80.00 GiB, used 700.0 MiB, unexplained 545.0 MiB\n");
    assert_contains(t, " free 79.71 GiB of 80.00 GiB, used 300.0 MiB, unexplained 300.0 MiB\n");
    free(t);
    scratch_remove(dir);
}
END_TEST

/* ---- milestones ---- */

/*
 * pid 7000 (rank 0 of 2) on UUID_A, seqs:
 *   1 cudaSetDevice: first call        2 ncclCommInitRank
 *   3 cudaMalloc 8 MiB, 4 cudaIpcGetMemHandle of it: IPC export
 *   5 cudaIpcOpenMemHandle: IPC open   6 measurement
 *   7-26 the weights, 20 x 64 MiB      27 measurement
 *   28-37 10 x 1 MiB, 38-47 their frees: a free burst
 *   48-53 three captures back to back  54, 55 ncclAllReduce
 *   56 cudaMalloc fails                57-72 16 x 32 MiB: an allocation burst
 * pid 7001 (rank 1) on UUID_B: its first call, init and a measurement.
 */
static void milestone_traces(const char *dir)
{
    struct fixture *f = process_trace(dir, "node1", 7000, 7000000000ll, 0, UUID_A, NULL);
    fixture_call(f, CT_API_cudaSetDevice, 0, 0, 0, 0);
    struct fixture_nccl_init init = {.comm = 0x7e01, .nranks = 2, .rank = 0, .hash = HASH};
    fixture_nccl_init(f, &init);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, 8 * MiB, 0);
    ipc_call(f, CT_API_cudaIpcGetMemHandle, 0, 0x7f0000000000, 0, 1);
    ipc_call(f, CT_API_cudaIpcOpenMemHandle, 0, 0x7c0000000000, 0, 2);
    fixture_meminfo(f, 0, TOTAL - 600 * MiB, TOTAL);
    for (int i = 0; i < 20; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0x600000000000 + i * 64 * MiB, 64 * MiB, 0);
    fixture_meminfo(f, 0, TOTAL - 1880 * MiB, TOTAL);
    for (int i = 0; i < 10; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0x610000000000 + i * MiB, MiB, 0);
    for (int i = 0; i < 10; i++)
        fixture_call(f, CT_API_cudaFree, 0, 0x610000000000 + i * MiB, 0, 0);
    for (int i = 0; i < 3; i++) {
        fixture_call(f, CT_API_cudaStreamBeginCapture, 0, 0, 0, 0);
        fixture_call(f, CT_API_cudaStreamEndCapture, 0, 0, 0, 0);
    }
    fixture_nccl_collective(f, CT_API_ncclAllReduce, 0x7e01, NCCL_BFLOAT16, MiB, 0, 0);
    fixture_nccl_collective(f, CT_API_ncclAllReduce, 0x7e01, NCCL_BFLOAT16, MiB, 0, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, 0, 100 * GiB, 2);
    for (int i = 0; i < 16; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0x620000000000 + i * 32 * MiB, 32 * MiB, 0);
    fixture_close(f);

    struct fixture *g = process_trace(dir, "node1", 7001, 7000000000ll, 0, UUID_B, NULL);
    fixture_call(g, CT_API_cudaSetDevice, 0, 0, 0, 0);
    init.comm = 0x7e02;
    init.rank = 1;
    fixture_nccl_init(g, &init);
    fixture_call(g, CT_API_cudaMalloc, 0, 0x7f0000000000, 8 * MiB, 0);
    ipc_call(g, CT_API_cudaIpcGetMemHandle, 0, 0x7f0000000000, 0, 2);
    fixture_meminfo(g, 0, TOTAL - 600 * MiB, TOTAL);
    fixture_close(g);
}

START_TEST(test_milestones)
{
    char *dir = scratch_dir();
    milestone_traces(dir);
    char *j = timeline_json(dir, NULL);
    char *r;

    r = row_json(j, "first_call", 1);
    assert_contains(r, "\"pid\":7000,\"rank\":0,");
    assert_contains(r, "\"api\":\"cudaSetDevice\",\"text\":\"first call (cudaSetDevice)\"");
    free(r);
    r = row_json(j, "comm_init", 2);
    assert_contains(r, "\"text\":\"NCCL init " HASH_HEX " rank 0/2\"");
    assert_contains(r, "\"communicator\":{\"unique_id_hash\":\"" HASH_HEX "\",\"rank\":0,"
                       "\"nranks\":2,\"result\":0,\"result_name\":\"ncclSuccess\"}");
    free(r);
    r = row_json(j, "ipc_export", 4);
    assert_contains(r, "\"text\":\"IPC export (cudaIpcGetMemHandle)\"");
    assert_contains(r, "\"ipc_exported\":8388608,");
    free(r);
    r = row_json(j, "ipc_open", 5);
    assert_contains(r, "\"text\":\"IPC open (cudaIpcOpenMemHandle)\"");
    /* pid 7001's buffer, sized from its export. */
    assert_contains(r, "\"peer\":8388608,");
    free(r);
    r = row_json(j, "measurement", 6);
    assert_contains(r, "\"measurement\":{\"free_bytes\":85270200320,\"total_bytes\":85899345920,"
                       "\"used_bytes\":629145600,\"unexplained_bytes\":620756992}");
    free(r);
    /* The weight burst: rows at its first allocation and its last, each
     * with the live bytes after that allocation. */
    r = row_json(j, "weight_burst_begin", 7);
    assert_contains(r, "\"text\":\"weight burst begins: 20 allocs, 1.25 GiB\"");
    assert_contains(r, "\"burst\":{\"allocations\":20,\"bytes\":1342177280,\"first_seq\":7,"
                       "\"last_seq\":26}");
    assert_contains(r, "\"traced_bytes\":75497472,");
    free(r);
    r = row_json(j, "weight_burst_end", 26);
    assert_contains(r, "\"traced_bytes\":1350565888,");
    free(r);
    r = row_json(j, "measurement", 27);
    free(r);
    r = row_json(j, "free_burst", 47);
    assert_contains(r, "\"text\":\"free burst (empty_cache): 10 frees, 10.0 MiB\"");
    assert_contains(r, "\"burst\":{\"frees\":10,\"bytes\":10485760,\"first_seq\":38,"
                       "\"last_seq\":47}");
    free(r);
    r = row_json(j, "capture_begin", 48);
    assert_contains(r, "\"api\":\"cudaStreamBeginCapture\",\"text\":\"CUDA-graph capture begins\"");
    free(r);
    r = row_json(j, "capture_end", 53);
    assert_contains(r, "\"text\":\"CUDA-graph capture ends (3 graphs)\"");
    assert_contains(r, "\"graphs\":3,");
    free(r);
    r = row_json(j, "first_collective", 54);
    assert_contains(r, "\"text\":\"first collective (ncclAllReduce)\"");
    free(r);
    r = row_json(j, "failed_call", 56);
    assert_contains(r, "\"text\":\"failed: cudaMalloc 100.00 GiB: ");
    assert_contains(r, "\"result\":2,\"result_name\":\"cudaErrorMemoryAllocation\","
                       "\"size\":107374182400,");
    free(r);
    r = row_json(j, "burst_begin", 57);
    assert_contains(r, "\"burst\":{\"allocations\":16,\"bytes\":536870912,\"first_seq\":57,"
                       "\"last_seq\":72}");
    free(r);
    r = row_json(j, "burst_end", 72);
    free(r);
    r = row_json(j, "process_end", 72);
    assert_contains(r, "\"api\":null,\"text\":\"last event: exited\"");
    assert_contains(r, "\"end_state\":\"exit\",\"exited\":true,");
    /* An exiting process's memory goes with it. */
    assert_contains(r, "\"traced_bytes\":0,");
    free(r);
    /* One of each; a capture group is one pair; one failure; rank 1 too. */
    const char *once[] = {"weight_burst_begin", "weight_burst_end", "free_burst",  "capture_begin",
                          "capture_end",        "first_collective", "failed_call", "burst_begin",
                          "burst_end",          "ipc_open"};
    for (size_t i = 0; i < sizeof(once) / sizeof(once[0]); i++)
        ck_assert_msg(count_kind(j, once[i]) == 1, "%s: %zu rows", once[i], count_kind(j, once[i]));
    ck_assert_uint_eq(count_kind(j, "first_call"), 2);
    ck_assert_uint_eq(count_kind(j, "comm_init"), 2);
    ck_assert_uint_eq(count_kind(j, "measurement"), 3);
    ck_assert_uint_eq(count_kind(j, "process_end"), 2);
    /* Rows in stream order: the first row of GPU A is its first call. */
    assert_contains(j, "\"milestones\":[{\"kind\":\"first_call\",\"seq\":1,\"pid\":7000,");
    free(j);

    char *t = timeline_text(dir, NULL);
    assert_contains(t, "\nGPU 0: " UUID_A " (NVIDIA H100 80GB HBM3, 80.00 GiB) on node1\n");
    assert_contains(t, " processes: 7000 (rank 0, exited)\n");
    assert_contains(t, " weight burst begins: 20 allocs, 1.25 GiB ");
    assert_contains(t, " CUDA-graph capture ends (3 graphs) ");
    assert_contains(t, "\nGPU 1: " UUID_B " (NVIDIA H100 80GB HBM3, 80.00 GiB) on node1\n");
    free(t);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_gpu_selection)
{
    char *dir = scratch_dir();
    milestone_traces(dir);
    /* By index, by uuid prefix with or without "GPU-", any case. */
    const char *picks[] = {"1", "GPU-bbbb", "bbbbbbbb-0000", "GPU-BBBB"};
    for (size_t i = 0; i < sizeof(picks) / sizeof(picks[0]); i++) {
        char *j = timeline_json(dir, picks[i]);
        assert_contains(j, "\"gpus\":[{\"index\":1,\"uuid\":\"" UUID_B "\",");
        ck_assert_ptr_null(strstr(j, UUID_A));
        ck_assert_ptr_null(strstr(j, "\"pid\":7000"));
        free(j);
    }
    char *j = timeline_json(dir, "0");
    assert_contains(j, "\"gpus\":[{\"index\":0,\"uuid\":\"" UUID_A "\",");
    ck_assert_ptr_null(strstr(j, UUID_B));
    free(j);
    char *t = timeline_text(dir, "GPU-aaaa");
    assert_contains(t, "\nGPU 0: " UUID_A);
    ck_assert_ptr_null(strstr(t, "\nGPU 1: "));
    free(t);

    /* Bad choices: exit 2, nothing on stdout, one line on stderr. */
    const struct {
        const char *arg, *needle;
    } bad[] = {
        {"2", "--gpu 2: the traces show 2 GPUs (index 0 to 1)"},
        {"GPU-ffff", "--gpu GPU-ffff: no GPU of these traces has that uuid"},
        {"GPU-", "--gpu GPU-: 2 GPUs match; give more of the uuid"},
        {"", "--gpu needs a uuid prefix or an index"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        for (int json = 0; json <= 1; json++) {
            struct proc_result r = timeline_run(dir, bad[i].arg, json);
            ck_assert_msg(r.status == 2, "--gpu '%s': exit %d", bad[i].arg, r.status);
            ck_assert_msg(r.out_len == 0, "stdout not empty:\n%.1500s", r.out);
            ck_assert_msg(count_lines(r.err) == 1, "stderr:\n%.1500s", r.err);
            assert_contains(r.err, "cutrace timeline: ");
            assert_contains(r.err, bad[i].needle);
            proc_result_free(&r);
        }
    scratch_remove(dir);
}
END_TEST

/* ---- odd input ---- */

/* Frees of a pointer never allocated and of one already freed. */
START_TEST(test_unknown_and_double_frees)
{
    char *dir = scratch_dir();
    char *path;
    struct fixture *f = process_trace(dir, "node1", 8000, 8000000000ll, 0, UUID_A, &path);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, 64 * MiB, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0010000000, 32 * MiB, 0);
    fixture_call(f, CT_API_cudaFree, 0, 0x7f0000000000, 0, 0);
    fixture_call(f, CT_API_cudaFree, 0, 0x7f0000000000, 0, 0); /* double */
    fixture_call(f, CT_API_cudaFree, 0, 0x7f0000000000, 0, 0); /* and again */
    fixture_call(f, CT_API_cudaFree, 0, 0xbad000, 0, 0);       /* never allocated */
    fixture_call(f, CT_API_cudaFree, 0, 0, 0, 0);              /* NULL: nothing */
    fixture_meminfo(f, 0, TOTAL - 600 * MiB, TOTAL);
    fixture_call(f, CT_API_cudaFree, 0, 0x7f0010000000, 0, 0);
    fixture_call(f, CT_API_cudaFree, 0, 0x7f0010000000, 0, 0); /* double, at zero live */
    fixture_meminfo(f, 0, TOTAL - 600 * MiB, TOTAL);
    fixture_close(f);
    char *j = timeline_json(dir, NULL);
    struct measured m[4];
    ck_assert_uint_eq(measurements(j, m, 4), 2);
    int64_t view[7];
    view_live(path, m[0].seq, view);
    ck_assert_int_eq(m[0].live[3], 32 * MiB);
    ck_assert_int_eq(view[3], 32 * MiB);
    ck_assert_int_eq(m[1].live[3], 0);
    ck_assert_int_eq(m[1].unexplained, 600 * MiB);
    assert_contains(j, "\"notes\":[\"pid 8000: 1 free of pointers the trace never saw allocated "
                       "(ignored)\",\"pid 8000: 3 frees of pointers already freed (ignored)\"]");
    free(j);
    char *t = timeline_text(dir, NULL);
    assert_contains(t, "\nnote: pid 8000: 1 free of pointers the trace never saw allocated "
                       "(ignored)\nnote: pid 8000: 3 frees of pointers already freed (ignored)\n");
    free(t);
    free(path);
    scratch_remove(dir);
}
END_TEST

/* A killed process keeps its memory to the end; an exiting one does not. */
START_TEST(test_killed_process)
{
    char *dir = scratch_dir();
    struct fixture *k = process_trace(dir, "node1", 8100, 8000000000ll, 0, UUID_A, NULL);
    fixture_meta(k, "end_state", "killed");
    fixture_call(k, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 * GiB, 0);
    fixture_meminfo(k, 0, TOTAL - 1536 * MiB, TOTAL);
    fixture_close(k);
    struct fixture *e = process_trace(dir, "node1", 8101, 8000010000ll, 0, UUID_A, NULL);
    fixture_call(e, CT_API_cudaMalloc, 0, 0x7f0000000000, 2 * GiB, 0);
    fixture_meminfo(e, 0, TOTAL - 3584 * MiB, TOTAL);
    fixture_set_clock(e, 8000100000ll); /* ends after pid 8100 */
    fixture_call(e, CT_API_cudaSetDevice, 0, 0, 0, 0);
    fixture_close(e);

    char *j = timeline_json(dir, NULL);
    char *r = row_json(j, "process_end", 2);
    assert_contains(r, "\"pid\":8100,");
    assert_contains(r, "\"text\":\"last event: killed\"");
    assert_contains(r, "\"end_state\":\"killed\",\"exited\":false,");
    assert_contains(r, "\"traced_bytes\":1073741824,");
    free(r);
    /* Later, pid 8101 measures: the killed process's gigabyte still counts. */
    struct measured m[2];
    ck_assert_uint_eq(measurements(j, m, 2), 2);
    ck_assert_int_eq(m[1].pid, 8101);
    ck_assert_int_eq(m[1].traced, 3 * GiB);
    ck_assert_int_eq(m[1].unexplained, 512 * MiB);
    r = row_json(j, "process_end", 3);
    assert_contains(r, "\"pid\":8101,");
    assert_contains(r, "\"end_state\":\"exit\",\"exited\":true,");
    /* pid 8101's 2 GiB went with it; pid 8100's gigabyte stays. */
    assert_contains(r, "\"runtime\":1073741824,");
    free(r);
    assert_contains(j, "{\"pid\":8100,\"rank\":null,\"file\":\"node1-8100-");
    assert_contains(j, "\"end_state\":\"killed\",\"exited\":false}");
    assert_contains(j, "\"pid 8100 was killed (no clean exit) after seq 2: loaded as far as it "
                       "got; its memory counts until the end\"");
    free(j);
    char *t = timeline_text(dir, NULL);
    assert_contains(t, " processes: 8100 (killed), 8101 (exited)\n");
    assert_contains(t, " last event: killed ");
    free(t);
    scratch_remove(dir);
}
END_TEST

/* Two hosts: two clocks, each GPU on its own; the same uuid twice is two GPUs. */
START_TEST(test_two_hosts)
{
    char *dir = scratch_dir();
    struct fixture *a = process_trace(dir, "node1", 9000, 1000000000ll, 0, UUID_A, NULL);
    fixture_call(a, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 * GiB, 0);
    fixture_meminfo(a, 0, TOTAL - 1536 * MiB, TOTAL);
    fixture_close(a);
    /* Another machine, whose monotonic clock is far behind. */
    struct fixture *b = process_trace(dir, "node2", 9001, 5000, 0, UUID_C, NULL);
    fixture_exec(b, "UPDATE process SET boot_id = 'boot-node2'");
    fixture_call(b, CT_API_cudaMalloc, 0, 0x7f0000000000, 2 * GiB, 0);
    fixture_meminfo(b, 0, TOTAL - 2560 * MiB, TOTAL);
    fixture_close(b);
    /* A third process claims node2's uuid from node1: shown apart. */
    struct fixture *c = process_trace(dir, "node1", 9002, 1000000000ll, 1, UUID_C, NULL);
    fixture_call(c, CT_API_cudaMalloc, 1, 0x7f0000000000, 4 * GiB, 0);
    fixture_close(c);

    char *j = timeline_json(dir, NULL);
    assert_contains(j, "\"totals\":{\"processes\":3,\"gpus\":3,\"hosts\":2}");
    assert_contains(j, "\"traces of 2 hosts (2 clocks): each host's monotonic clock is its own, "
                       "so each host has its own timelines\"");
    assert_contains(j, "\"GPU " UUID_C " appears under two clocks (host or boot differ): shown "
                       "apart\"");
    /* Each GPU starts at its own first event, on its own host's clock. */
    assert_contains(j, "\"key\":\"" UUID_C "\",\"identified_by\":\"uuid\","
                       "\"name\":\"NVIDIA H100 80GB HBM3\",\"total_bytes\":85899345920,"
                       "\"host\":\"node2\",\"boot_id\":\"boot-node2\",\"first_t_ns\":6000,");
    assert_contains(j, "\"host\":\"node1\",\"boot_id\":\"boot-test\",\"first_t_ns\":1000001000,");
    /* node2's GPU holds only its own process: 2 GiB at its measurement. */
    struct measured m[4];
    ck_assert_uint_eq(measurements(j, m, 4), 2);
    for (int i = 0; i < 2; i++) {
        int64_t expect = m[i].pid == 9000 ? 1 * GiB : 2 * GiB;
        ck_assert_int_eq(m[i].traced, expect);
        ck_assert_int_eq(m[i].unexplained, 512 * MiB);
    }
    free(j);
    char *t = timeline_text(dir, NULL);
    assert_contains(t, ": 3 GPUs, 3 processes, 2 hosts\n");
    assert_contains(t, " on node2\n");
    assert_contains(t, "\nnote: traces of 2 hosts (2 clocks)");
    free(t);

    /* One host rebooted between two traces: one host, two clocks. */
    char *dir2 = scratch_dir();
    struct fixture *x = process_trace(dir2, "node1", 9100, 1000000000ll, 0, UUID_A, NULL);
    fixture_call(x, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 * GiB, 0);
    fixture_close(x);
    struct fixture *y = process_trace(dir2, "node1", 9101, 1000000000ll, 0, UUID_A, NULL);
    fixture_exec(y, "UPDATE process SET boot_id = 'boot-after-reboot'");
    fixture_call(y, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 * GiB, 0);
    fixture_close(y);
    j = timeline_json(dir2, NULL);
    assert_contains(j, "\"traces of 1 host (2 clocks): each host's monotonic clock is its own, "
                       "so each host has its own timelines\"");
    assert_contains(j, "\"totals\":{\"processes\":2,\"gpus\":2,\"hosts\":1}");
    free(j);
    scratch_remove(dir2);
    scratch_remove(dir);
}
END_TEST

/* A trace without a uuid for its device: the GPU is the host's ordinal. */
START_TEST(test_gpu_without_uuid)
{
    char *dir = scratch_dir();
    struct fixture *f = process_trace(dir, "node3", 9200, 1000000000ll, 2, NULL, NULL);
    fixture_call(f, CT_API_cudaMalloc, 2, 0x7f0000000000, 1 * GiB, 0);
    fixture_meminfo(f, 2, TOTAL - 1536 * MiB, TOTAL);
    fixture_close(f);
    char *j = timeline_json(dir, NULL);
    assert_contains(j, "{\"index\":0,\"uuid\":null,\"key\":\"node3/device 2\","
                       "\"identified_by\":\"host_and_ordinal\",");
    assert_contains(j, "\"pid 9200: 1 device without a uuid in its trace: identified by host and "
                       "ordinal, which other processes may number differently\"");
    struct measured m[2];
    ck_assert_uint_eq(measurements(j, m, 2), 1);
    ck_assert_int_eq(m[0].unexplained, 512 * MiB);
    free(j);
    j = timeline_json(dir, "node3/dev");
    assert_contains(j, "\"key\":\"node3/device 2\"");
    free(j);
    scratch_remove(dir);
}
END_TEST

/* Every category at once and many failed calls: still 120 columns. */
START_TEST(test_text_width)
{
    char *dir = scratch_dir();
    categories_traces(dir);
    struct fixture *f = process_trace(dir, "node1", 6100, 6000000000ll, 0, UUID_C, NULL);
    fixture_call(f, CT_API_cudaMallocManaged, 0, 0x7f4000000000, 3 * GiB, 0);
    for (int i = 0; i < 60; i++)
        fixture_call(f, CT_API_cuMemAlloc_v2, 0, 0, 123456789012ll + i, 2);
    fixture_close(f);
    char *t = timeline_text(dir, NULL);
    assert_contains(t, " ... and 10 more failed calls (--json lists every one)\n");
    /* GPU A's seven categories do not all fit: the smallest share a column. */
    assert_contains(t, " other: ");
    free(t);
    char *j = timeline_json(dir, NULL);
    ck_assert_uint_eq(count_kind(j, "failed_call"), 60);
    free(j);
    scratch_remove(dir);
}
END_TEST

/*
 * Real names at their real lengths: a 40-character uuid, a 44-character
 * host name, three processes on one GPU still running.
 *
 * KNOWN BUG, left enabled (see the report to the lead): docs/cli.md says
 * the timeline's text lines fit 120 columns, but cmd/timeline.c's
 * print_gpu_text prints the GPU heading with the key cut at 60 columns,
 * the name at 40 and the host at 40 (up to ~170 in all; 130 here), and the
 * "processes:" line with every process of the GPU uncut (~135 here).
 */
START_TEST(test_text_width_long_names)
{
    char *dir = scratch_dir();
    const char *host = "gpu-node-017.rack-b.cluster.internal.example";
    const char *uuid = "GPU-5fa8593a-6926-2c82-58a7-5c65769c7822";
    for (int i = 0; i < 3; i++) {
        struct fixture *f = process_trace(dir, host, 12340 + i, 1000000000ll + i, i, uuid, NULL);
        fixture_exec(f, "UPDATE devices SET pci_bus_id = '0000:18:00.0'");
        fixture_meta(f, "end_state", "running");
        struct fixture_nccl_init init = {
            .comm = 0x7e01 + i, .nranks = 3, .rank = i, .hash = HASH, .device = i};
        fixture_nccl_init(f, &init);
        fixture_call(f, CT_API_cudaMalloc, i, 0x7f0000000000, 1 * GiB, 0);
        fixture_meminfo(f, i, TOTAL - 4 * GiB, TOTAL);
        fixture_close(f);
    }
    struct proc_result r = timeline_run(dir, NULL, false);
    ck_assert_int_eq(r.status, 0);
    /* Everything but the notes, which are one line each by design. */
    char *notes = strstr(r.out, "\nnote: ");
    if (notes)
        *notes = '\0';
    assert_width(r.out, 120);
    proc_result_free(&r);
    scratch_remove(dir);
}
END_TEST

/* ---- one vocabulary (model/milestones.h) ---- */

/* `cutrace sites --gpu 0 --at AT DIR`'s text, exit 0. */
static char *sites_at(const char *dir, const char *at)
{
    const char *args[] = {"sites", "--gpu", "0", "--at", at, dir, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "--at %s: exit %d; stderr:\n%.1500s", at, r.status, r.err);
    char *out = xstrdup(r.out);
    proc_result_free(&r);
    return out;
}

/* Whether key is one of the comma-separated words of list. */
static bool listed(const char *list, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = strstr(list, key); p; p = strstr(p + 1, key)) {
        bool starts = p == list || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'));
        bool ends = !(p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z'));
        if (starts && ends)
            return true;
    }
    return false;
}

START_TEST(test_one_vocabulary)
{
    /* The help lists exactly the kinds a moment can name. */
    for (int k = 0; k < MS_KINDS; k++) {
        struct moment_spec at;
        const char *why;
        bool moment = moment_parse(ms_key((enum ms_kind)k), &at, &why);
        ck_assert_msg(moment == listed(MOMENT_KEYS, ms_key((enum ms_kind)k)), "%s",
                      ms_key((enum ms_kind)k));
    }
    char *dir = scratch_dir();
    milestone_traces(dir);
    char *j = timeline_json(dir, "0");
    char *r = row_json(j, "comm_init", 2);
    assert_contains(r, "\"name\":\"NCCL init 1\",\"at\":\"comm_init:1\",\"tag\":null");
    free(r);
    r = row_json(j, "measurement", 6);
    assert_contains(r, "\"name\":\"measurement 1\",\"at\":\"measurement:1\",\"tag\":\"pre\"");
    free(r);
    r = row_json(j, "measurement", 27);
    assert_contains(r, "\"tag\":\"post\"");
    free(r);
    r = row_json(j, "weight_burst_begin", 7);
    assert_contains(r, "\"name\":\"weight burst begins\",\"at\":\"weight_burst_begin:1\"");
    free(r);
    r = row_json(j, "capture_end", 53);
    assert_contains(r, "\"name\":\"CUDA-graph capture 1 ends\",\"at\":\"capture_end:1\"");
    free(r);
    r = row_json(j, "failed_call", 56);
    assert_contains(r, "\"name\":\"failed cudaMalloc 1\",\"at\":\"failed_call:1\"");
    free(r);
    r = row_json(j, "burst_begin", 57);
    assert_contains(r, "\"at\":null");
    free(r);
    free(j);
    char *t = timeline_text(dir, "0");
    assert_contains(t, " measurement (cudaMemGetInfo), pre ");
    assert_contains(t, " measurement (cudaMemGetInfo), post ");
    free(t);

    /* sites --at finds the row the timeline names, captures by group. */
    const struct {
        const char *at;
        const char *seq;
    } moments[] = {
        {"pre", " seq 6 "},
        {"post", " seq 27 "},
        {"pre:-1", " seq 6 "},
        {"measurement:2", " seq 27 "},
        {"weight_burst_begin", " seq 7 "},
        {"weight_burst_end", " seq 26 "},
        {"capture_begin", " seq 48 "},
        {"capture_end:1", " seq 53 "},
        {"comm_init:-1", " seq 2 "},
    };
    for (size_t i = 0; i < sizeof(moments) / sizeof(moments[0]); i++) {
        char *out = sites_at(dir, moments[i].at);
        char head[64];
        snprintf(head, sizeof(head), "at %s: ", moments[i].at);
        assert_contains(out, head);
        ck_assert_msg(strstr(out, moments[i].seq) != NULL, "--at %s: no%s in:\n%s", moments[i].at,
                      moments[i].seq, out);
        free(out);
    }
    /* Three captures back to back are one group: there is no second. */
    const char *args[] = {"sites", "--gpu", "0", "--at", "capture_begin:2", dir, NULL};
    struct proc_result pr = run_cutrace(args, NULL);
    ck_assert_int_eq(pr.status, 2);
    assert_contains(pr.err, "--at capture_begin:2: no GPU of these traces has that moment");
    proc_result_free(&pr);
    scratch_remove(dir);
}
END_TEST

Suite *timeline_suite(void)
{
    Suite *s = suite_create("timeline");
    TCase *tc = tcase_create("timeline");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_model_agrees_with_allocations_view);
    tcase_add_test(tc, test_model_agrees_with_allocations_view_random);
    tcase_add_test(tc, test_model_pairs_crossing_frees);
    tcase_add_test(tc, test_categories_and_unexplained);
    tcase_add_test(tc, test_milestones);
    tcase_add_test(tc, test_one_vocabulary);
    tcase_add_test(tc, test_gpu_selection);
    tcase_add_test(tc, test_unknown_and_double_frees);
    tcase_add_test(tc, test_killed_process);
    tcase_add_test(tc, test_two_hosts);
    tcase_add_test(tc, test_gpu_without_uuid);
    tcase_add_test(tc, test_text_width);
    tcase_add_test(tc, test_text_width_long_names);
    suite_add_tcase(s, tc);
    return s;
}
