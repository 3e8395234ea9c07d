/*
 * test_summary_driver.c - `cutrace summary` on traces of format 3: the CUDA
 * driver API next to the runtime, nested calls, memory by kind (vmm,
 * vmm_host, reserve, ipc) and by issuing module, driver lookups; traces of
 * formats 1 and 2, which have none of that; and hostile module tables.
 * Every number checked here is derived by hand in scenarios.h.
 */
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct proc_result summary(const char *path, bool json)
{
    const char *args[] = {"summary", path, json ? "--json" : NULL, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "exit %d; stderr:\n%.1500s", r.status, r.err);
    ck_assert_msg(r.err_len == 0, "stderr not empty:\n%.1500s", r.err);
    if (json)
        ck_assert_msg(json_valid(r.out), "invalid JSON:\n%.3000s", r.out);
    else
        assert_width(r.out, 120);
    return r;
}

/* Occurrences of needle in haystack. */
static size_t count(const char *haystack, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The integer after the first `key` (e.g. "\"live_bytes\":") at or after from. */
static long long number_after(const char *from, const char *key)
{
    const char *p = strstr(from, key);
    ck_assert_msg(p != NULL, "missing %s in:\n%.2000s", key, from);
    return strtoll(p + strlen(key), NULL, 10);
}

START_TEST(test_driver_text)
{
    char *dir = scratch_dir();
    char *path = scenario_driver(dir);
    struct proc_result r = summary(dir, false);
    char *out = squeeze(r.out);
    assert_contains(out,
                    "\n calls 41 (1 failed, 22 nested)\n"
                    " lookups 6 driver lookups of 5 symbols (4 wrapped by cutrace, 1 failed)\n");
    /* Lookups are that one line: no table row, no failed call. */
    ck_assert_ptr_null(strstr(out, "cuGetProcAddress"));
    ck_assert_ptr_null(strstr(out, "cudaGetDriverEntryPoint"));
    ck_assert_ptr_null(strstr(out, "failed calls"));

    /* The program's own calls: 3 cudaMalloc, their driver calls apart. */
    assert_contains(out, "\n api layer calls failed bytes host time\n"
                         " cudaMalloc runtime 3 0 1.60 GiB 3.00 us\n"
                         " cuMemCreate driver 2 0 40.00 MiB 2.00 us\n");
    assert_contains(out, " cuMemAddressReserve driver 1 0 8.00 GiB 1.00 us\n");
    assert_contains(out, " ncclCommInitRank nccl 1 0 50.0 us\n");
    assert_contains(out, "\n nested call layer inside calls failed bytes host time\n"
                         " cuMemAlloc_v2 driver cudaMalloc 3 0 1.60 GiB 300 ns\n"
                         " cuMemCreate driver ncclCommInitRank 3 0 210.00 MiB 300 ns\n");
    assert_contains(out, " cuMemAlloc_v2 driver cudaGraphInstantiate 1 0 6.00 MiB 100 ns\n");
    assert_contains(out, " cuMemFree_v2 driver cudaFree 1 0 100 ns\n");
    assert_contains(out, " cuMemImportFromShareableHandle driver ncclCommInitRank 1 0 200.00 MiB"
                         " 100 ns\n");

    /* Kinds: GPU memory, its total, then what is not GPU memory. */
    assert_contains(
        out, "\n memory allocs allocated frees freed live at end peak live peak at\n"
             " device 5 1.61 GiB 1 100.00 MiB 1.51 GiB 1.61 GiB seq 37 (+37.0 us)\n"
             " managed 1 16.00 MiB 0 0 B 16.00 MiB 16.00 MiB seq 13 (+13.0 us)\n"
             " vmm (cuMemCreate) 4 248.00 MiB 1 20.00 MiB 228.00 MiB 248.00 MiB seq 33 (+33.0 us)\n"
             " = GPU memory 10 1.87 GiB 2 120.00 MiB 1.75 GiB 1.85 GiB seq 37 (+37.0 us)\n"
             " host (pinned) 1 64.00 MiB 0 0 B 64.00 MiB 64.00 MiB seq 14 (+14.0 us)\n"
             " host (cuMemCreate) 1 2.00 MiB 1 2.00 MiB 0 B 2.00 MiB seq 24 (+24.0 us)\n"
             " ipc (peer's) 1 200.00 MiB 0 0 B 200.00 MiB 200.00 MiB seq 26 (+26.0 us)\n"
             " reserved VA (not memory) 3 8.20 GiB 0 0 B 8.20 GiB 8.20 GiB seq 29 (+29.0 us)\n");

    /* By issuing module, most live first. */
    assert_contains(
        out, "\n GPU memory (device, managed, vmm) by the module that allocated it\n"
             " issued by what allocs allocated live at end peak live\n"
             " mini_server the program 3 1.11 GiB 1.02 GiB 1.11 GiB\n"
             " libtorch_cuda.so PyTorch 3 552.00 MiB 532.00 MiB 552.00 MiB\n"
             " libnccl.so.2 NCCL's own buffers 3 212.00 MiB 212.00 MiB 212.00 MiB\n"
             " libcudart.so.12 CUDA runtime (cudaMalloc & co.) 1 6.00 MiB 6.00 MiB 6.00 MiB\n"
             "\n last cudaMemGetInfo: seq 41 at +41.0 us: free 77.75 GiB of 80.00 GiB,"
             " used 2.25 GiB\n"
             " traced live device+managed+vmm then: 1.75 GiB; unexplained: 510.00 MiB\n");
    /* libcuda.so.1 issued nothing. */
    ck_assert_ptr_null(strstr(out, "libcuda.so.1"));
    assert_contains(out,
                    " " DRIVER_UUID " NVIDIA H100 80GB HBM3 5150 2.25 GiB 1.75 GiB 510.00 MiB\n");
    free(out);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_driver_json)
{
    char *dir = scratch_dir();
    char *path = scenario_driver(dir);
    struct proc_result r = summary(dir, true);
    char *j = compact(r.out);
    assert_contains(j, "\"calls\":41,\"failed_calls\":1,\"nested_calls\":22,");
    assert_contains(j, "\"driver_lookups\":{\"calls\":6,\"wrapped\":4,\"failed\":1,\"symbols\":5}");
    /* Every call in "apis", lookups and nested ones included... */
    assert_contains(j,
                    "{\"api\":\"cuMemAlloc_v2\",\"layer\":\"driver\",\"role\":\"alloc\","
                    "\"calls\":5,\"failed\":0,\"nested\":5,\"bytes\":1725956096,\"dur_ns\":500}");
    assert_contains(j, "{\"api\":\"cuGetProcAddress_v2\",\"layer\":\"driver\",\"role\":\"lookup\","
                       "\"calls\":5,\"failed\":1,\"nested\":5,\"bytes\":null,\"dur_ns\":1000}");
    /* ... and the nested ones again by the call they were made in. */
    assert_contains(j, "{\"api\":\"cuMemAlloc_v2\",\"layer\":\"driver\",\"role\":\"alloc\","
                       "\"inside\":\"cudaMalloc\",\"calls\":3,\"failed\":0,\"bytes\":1715470336,"
                       "\"dur_ns\":300}");
    assert_contains(j, "{\"api\":\"cuMemAlloc_v2\",\"layer\":\"driver\",\"role\":\"alloc\","
                       "\"inside\":\"ncclCommInitRank\",\"calls\":1,\"failed\":0,\"bytes\":4194304,"
                       "\"dur_ns\":100}");

    /* By kind: the nested cuMemAlloc_v2 of each cudaMalloc counts once. */
    assert_contains(j, "\"memory\":{\"device\":{\"allocs\":5,\"allocated_bytes\":1725956096,"
                       "\"frees\":1,\"freed_bytes\":104857600,\"live_allocs\":4,"
                       "\"live_bytes\":1621098496,\"peak_bytes\":1725956096,\"peak_seq\":37,"
                       "\"peak_at_ns\":37000},"
                       "\"managed\":{\"allocs\":1,\"allocated_bytes\":16777216,\"frees\":0,"
                       "\"freed_bytes\":0,\"live_allocs\":1,\"live_bytes\":16777216,"
                       "\"peak_bytes\":16777216,\"peak_seq\":13,\"peak_at_ns\":13000},"
                       "\"vmm\":{\"allocs\":4,\"allocated_bytes\":260046848,\"frees\":1,"
                       "\"freed_bytes\":20971520,\"live_allocs\":3,\"live_bytes\":239075328,"
                       "\"peak_bytes\":260046848,\"peak_seq\":33,\"peak_at_ns\":33000},"
                       "\"host\":{\"allocs\":1,\"allocated_bytes\":67108864,\"frees\":0,"
                       "\"freed_bytes\":0,\"live_allocs\":1,\"live_bytes\":67108864,"
                       "\"peak_bytes\":67108864,\"peak_seq\":14,\"peak_at_ns\":14000},"
                       "\"vmm_host\":{\"allocs\":1,\"allocated_bytes\":2097152,\"frees\":1,"
                       "\"freed_bytes\":2097152,\"live_allocs\":0,\"live_bytes\":0,"
                       "\"peak_bytes\":2097152,\"peak_seq\":24,\"peak_at_ns\":24000},"
                       "\"ipc\":{\"allocs\":1,\"allocated_bytes\":209715200,\"frees\":0,"
                       "\"freed_bytes\":0,\"live_allocs\":1,\"live_bytes\":209715200,"
                       "\"peak_bytes\":209715200,\"peak_seq\":26,\"peak_at_ns\":26000},"
                       "\"reserve\":{\"allocs\":3,\"allocated_bytes\":8808038400,\"frees\":0,"
                       "\"freed_bytes\":0,\"live_allocs\":3,\"live_bytes\":8808038400,"
                       "\"peak_bytes\":8808038400,\"peak_seq\":29,\"peak_at_ns\":29000},"
                       "\"other\":{\"allocs\":0,");
    /* GPU memory together: the peak of the sum, not the sum of the peaks. */
    assert_contains(j, "\"gpu_memory\":{\"allocs\":10,\"allocated_bytes\":2002780160,\"frees\":2,"
                       "\"freed_bytes\":125829120,\"live_allocs\":8,\"live_bytes\":1876951040,"
                       "\"peak_bytes\":1981808640,\"peak_seq\":37,\"peak_at_ns\":37000},"
                       "\"modules\":{\"libcudart.so.12\":{");

    /* By module, in name order, raw path kept. */
    assert_contains(j, "\"libcudart.so.12\":{\"label\":\"CUDA runtime (cudaMalloc & co.)\","
                       "\"paths\":[\"" DRIVER_CUDART "\"],\"gpu_memory\":{\"allocs\":1,"
                       "\"allocated_bytes\":6291456,\"frees\":0,\"freed_bytes\":0,"
                       "\"live_allocs\":1,\"live_bytes\":6291456,\"peak_bytes\":6291456,"
                       "\"peak_seq\":28,\"peak_at_ns\":28000},\"memory\":{\"device\":{");
    assert_contains(j,
                    "\"libnccl.so.2\":{\"label\":\"NCCL's own buffers\",\"paths\":[\"" DRIVER_NCCL
                    "\"],\"gpu_memory\":{\"allocs\":3,\"allocated_bytes\":222298112,"
                    "\"frees\":0,\"freed_bytes\":0,\"live_allocs\":3,\"live_bytes\":222298112,"
                    "\"peak_bytes\":222298112,\"peak_seq\":23,\"peak_at_ns\":23000},");
    /* NCCL's other memory is there, by kind, but not GPU memory. */
    char *nccl = strstr(j, "\"libnccl.so.2\":{");
    ck_assert_ptr_nonnull(nccl);
    char *torch = strstr(nccl, "\"libtorch_cuda.so\":{");
    ck_assert_ptr_nonnull(torch);
    *torch = '\0';
    assert_contains(nccl, "\"vmm\":{\"allocs\":2,\"allocated_bytes\":218103808,");
    assert_contains(nccl, "\"vmm_host\":{\"allocs\":1,\"allocated_bytes\":2097152,\"frees\":1,");
    assert_contains(nccl, "\"ipc\":{\"allocs\":1,\"allocated_bytes\":209715200,");
    assert_contains(nccl, "\"reserve\":{\"allocs\":2,\"allocated_bytes\":218103808,");
    ck_assert_ptr_null(strstr(nccl, "\"host\":"));
    *torch = '"';
    assert_contains(j, "\"libtorch_cuda.so\":{\"label\":\"PyTorch\",\"paths\":[\"" DRIVER_TORCH
                       "\"],\"gpu_memory\":{\"allocs\":3,\"allocated_bytes\":578813952,"
                       "\"frees\":1,\"freed_bytes\":20971520,\"live_allocs\":2,"
                       "\"live_bytes\":557842432,\"peak_bytes\":578813952,\"peak_seq\":33,");
    assert_contains(j, "\"mini_server\":{\"label\":\"the program\",\"paths\":[\"" DRIVER_EXE
                       "\"],\"gpu_memory\":{\"allocs\":3,\"allocated_bytes\":1195376640,"
                       "\"frees\":1,\"freed_bytes\":104857600,\"live_allocs\":2,"
                       "\"live_bytes\":1090519040,\"peak_bytes\":1195376640,\"peak_seq\":37,");
    ck_assert_ptr_null(strstr(j, "libcuda.so.1"));
    ck_assert_ptr_null(strstr(j, "(unknown)"));

    /* Unexplained = used - (device + managed + vmm), exactly. */
    assert_contains(j, "\"meminfo\":{\"seq\":41,\"at_ns\":41000,\"free_bytes\":83487621120,"
                       "\"total_bytes\":85899345920,\"used_bytes\":2411724800,"
                       "\"traced_live_bytes\":1876951040,\"unexplained_bytes\":534773760,"
                       "\"traced_live_by_kind\":{\"device\":1621098496,\"managed\":16777216,"
                       "\"vmm\":239075328}},\"failed_calls\":[]}");
    ck_assert_int_eq(DRIVER_GPU_LIVE, 1876951040ll);
    ck_assert_int_eq(DRIVER_UNEXPLAINED, DRIVER_MEMINFO_USED - DRIVER_GPU_LIVE);
    ck_assert_int_eq(DRIVER_NCCL_BUFFERS, 222298112ll);
    assert_contains(j, "\"used_bytes\":2411724800,\"traced_live_bytes\":1876951040,"
                       "\"unexplained_bytes\":534773760,\"traced_live_by_kind\":{"
                       "\"device\":1621098496,\"managed\":16777216,\"vmm\":239075328}}}]");
    free(j);
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

/* Formats 1 and 2: the same report as before, without module or lookup
 * sections (JSON null), and the numbers unchanged. */
START_TEST(test_old_formats)
{
    for (int format = 1; format <= 2; format++) {
        char *dir = scratch_dir();
        char *path = scenario_normal(dir);
        fixture_downgrade(path, format);
        struct proc_result r = summary(dir, true);
        char *j = compact(r.out);
        char expected[64];
        snprintf(expected, sizeof(expected), "\"format_version\":%d,", format);
        assert_contains(j, expected);
        assert_contains(j, "\"driver_lookups\":null,");
        ck_assert_uint_eq(count(j, "\"modules\":null,"), 2); /* both devices */
        assert_contains(j, "\"device\":{\"allocs\":3,\"allocated_bytes\":7340032,\"frees\":2,"
                           "\"freed_bytes\":5242880,\"live_allocs\":1,\"live_bytes\":2097152,"
                           "\"peak_bytes\":6291456,\"peak_seq\":7,\"peak_at_ns\":7000}");
        assert_contains(j, "\"traced_live_bytes\":2097152,\"unexplained_bytes\":10735321088,");
        assert_contains(j, "{\"api\":\"cudaMalloc\",\"layer\":\"runtime\",\"role\":\"alloc\","
                           "\"inside\":\"cudaMallocManaged\",\"calls\":1,");
        if (format == 1)
            assert_contains(j, "\"communicators\":null,\"nccl_calls\":null}");
        free(j);
        proc_result_free(&r);

        r = summary(dir, false);
        char *out = squeeze(r.out);
        assert_contains(out, " cudaMalloc runtime 4 1 7.00 MiB 400 ns\n");
        assert_contains(out, " cudaMalloc runtime cudaMallocManaged 1 0 1.00 MiB 50 ns\n");
        assert_contains(out, " traced live device+managed+vmm then: 2.00 MiB; unexplained:"
                             " 10.00 GiB\n");
        ck_assert_ptr_null(strstr(out, "issued by"));
        ck_assert_ptr_null(strstr(out, "lookups"));
        free(out);
        proc_result_free(&r);
        free(path);
        scratch_remove(dir);
    }
}
END_TEST

/* A format-3 trace that lacks what format 3 has is damaged: refused, in one
 * line naming what is missing. */
START_TEST(test_format3_objects_required)
{
    static const struct {
        const char *damage, *needle;
    } cases[] = {
        {"DROP VIEW driver_lookups", "incomplete cutrace trace: no table or view 'driver_lookups'"},
        {"DROP TABLE modules", "incomplete cutrace trace: no table or view 'modules'"},
        {"DROP VIEW allocations; CREATE VIEW allocations AS SELECT seq, api, device, ptr, size,"
         " kind, t_ns, NULL AS free_seq, NULL AS free_t_ns, NULL AS free_api FROM mem_events",
         "incomplete cutrace trace: 'allocations' is unusable (sqlite: no such column: module)"},
        {"DROP VIEW driver_lookups; CREATE VIEW driver_lookups AS SELECT 1 AS seq",
         "incomplete cutrace trace: 'driver_lookups' is unusable (sqlite: no such column: api)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *dir = scratch_dir();
        char *path = fixture_trace_path(dir, "node1", 9, 9);
        struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
        fixture_call(f, CT_API_cudaMalloc, 0, 0x1000, 4096, 0);
        fixture_exec(f, cases[i].damage);
        fixture_close(f);
        for (int json = 0; json <= 1; json++) {
            const char *args[] = {"summary", dir, json ? "--json" : NULL, NULL};
            struct proc_result r = run_cutrace(args, NULL);
            assert_one_line_error(&r, "node1-9-9.db", cases[i].needle);
            proc_result_free(&r);
        }
        free(path);
        scratch_remove(dir);
    }
}
END_TEST

/* Sums the "live_bytes" of each module's gpu_memory in the first device
 * object after `from` that has modules. */
static long long modules_live_sum(const char *from, size_t *nmodules)
{
    const char *modules = strstr(from, "\"modules\":{");
    ck_assert_ptr_nonnull(modules);
    const char *end = strstr(modules, "\"meminfo\":");
    ck_assert_ptr_nonnull(end);
    long long sum = 0;
    *nmodules = 0;
    for (const char *p = strstr(modules, "\"gpu_memory\":{"); p && p < end;
         p = strstr(p + 1, "\"gpu_memory\":{")) {
        sum += number_after(p, "\"live_bytes\":");
        (*nmodules)++;
    }
    return sum;
}

START_TEST(test_hostile_modules)
{
    char *dir = scratch_dir();
    char *path = fixture_trace_path(dir, "node1", 66, 66);
    struct fixture *f = fixture_create(path, FIXTURE_NULLABLE);
    struct fixture_process p = {
        .pid = 66, .host = "node1", .exe = "/bin/x", .start_wall_ns = 66, .start_mono_ns = 1000};
    fixture_process(f, &p);
    fixture_device(f, 0, "GPU-66", "GPU", 80 * GiB);
    char long_name[6000];
    memset(long_name, 'l', sizeof(long_name) - 1);
    long_name[0] = '/';
    long_name[sizeof(long_name) - 1] = '\0';
    fixture_module(f, NULL, 0x1000, 0x2000);                  /* NULL path */
    fixture_module(f, "", 0x2000, 0x3000);                    /* empty path */
    fixture_module(f, "/lib/liba.so", 0x10000, 0x30000);      /* overlaps ... */
    fixture_module(f, "/lib/libb.so", 0x20000, 0x40000);      /* ... this one */
    fixture_module(f, "/lib/backwards.so", 0x90000, 0x80000); /* start > end */
    fixture_module(f, "/lib/top.so", 0x7fffffffffff0000, INT64_MAX);
    fixture_module(f, "/lib/neg.so", -4096, 0);                      /* 2^64 - 4096 and up */
    fixture_module(f, "/lib/\x1b[31mevil\n\".so", 0xa0000, 0xa1000); /* controls, quote */
    fixture_module(f, "/lib/\xff.so", 0xb0000, 0xb1000);             /* invalid UTF-8 ... */
    fixture_module(f, "/lib/\xfe.so", 0xc0000, 0xc1000);             /* ... shown alike */
    fixture_module(f, "/", 0xd0000, 0xd1000);
    fixture_module(f, "noslash.so", 0xe0000, 0xe1000);
    fixture_module(f, long_name, 0xf0000, 0xf1000);
    fixture_module(f, "/lib/nulls.so", 0x100000, 0x101000);
    fixture_exec(f, "UPDATE modules SET start_addr = NULL WHERE path = '/lib/nulls.so'");
    const int64_t callers[] = {0x1500,  0x2500,  0x25000,  0x85000, 0x7fffffffffff1000,
                               -1,      0xa0500, 0xb0500,  0xc0500, 0xd0500,
                               0xe0500, 0xf0500, 0x100500, 0,       0x12345678};
    const size_t ncallers = sizeof(callers) / sizeof(callers[0]);
    for (size_t i = 0; i < ncallers; i++) {
        struct fixture_event e = {.api = CT_API_cudaMalloc,
                                  .ptr = 0x7f0000000000 + (int64_t)i * 0x1000000,
                                  .size = 1 * MiB,
                                  .caller = callers[i]};
        fixture_event(f, &e);
    }
    /* Lookups with garbage: no symbol, a negative and a huge length. */
    struct fixture_event bad = {.api = CT_API_cuGetProcAddress_v2, .arg = {0, 1, 12}};
    fixture_event(f, &bad);
    struct fixture_event neg = {
        .api = CT_API_cuGetProcAddress_v2, .arg = {0, 0, -5}, .handle = "cuX", .handle_len = 3};
    fixture_event(f, &neg);
    struct fixture_event huge = {.api = CT_API_cudaGetDriverEntryPoint,
                                 .arg = {0, 7, INT64_MAX},
                                 .handle = "cuY\xff\x01",
                                 .handle_len = 5};
    fixture_event(f, &huge);
    fixture_meminfo(f, 0, 70 * GiB, 80 * GiB);
    fixture_close(f);

    struct proc_result r = summary(dir, true);
    char *j = compact(r.out);
    /* Every allocation counted once, whatever the modules say. */
    char *dev = strstr(j, "{\"device\":0,");
    ck_assert_ptr_nonnull(dev);
    size_t nmodules;
    ck_assert_int_eq(modules_live_sum(dev, &nmodules), (long long)ncallers * MiB);
    ck_assert_int_eq(number_after(strstr(dev, "\"gpu_memory\":{"), "\"live_bytes\":"),
                     (long long)ncallers * MiB);
    assert_contains(j, "\"traced_live_bytes\":15728640,");
    /* Names made printable are keys once: \xff.so and \xfe.so are one "?.so". */
    ck_assert_uint_eq(count(j, "\"?.so\":{"), 1);
    assert_contains(
        j, "\"?.so\":{\"label\":null,\"paths\":[\"/lib/\xef\xbf\xbd.so\",\"/lib/\xef\xbf\xbd.so\"],"
           "\"gpu_memory\":{\"allocs\":2,");
    assert_contains(j, "\"?[31mevil?\\\".so\":{\"label\":null,");
    assert_contains(j, "\"top.so\":{\"label\":null,\"paths\":[\"/lib/top.so\"],\"gpu_memory\":{"
                       "\"allocs\":1,");
    assert_contains(j, "\"neg.so\":{\"label\":null,\"paths\":[\"/lib/neg.so\"],\"gpu_memory\":{"
                       "\"allocs\":1,");
    assert_contains(j, "\"/\":{\"label\":null,\"paths\":[\"/\"],");
    assert_contains(j, "\"noslash.so\":{");
    /* NULL and empty paths, a backwards range, a NULL start, caller 0 and
     * an address in no module: unknown. */
    assert_contains(j, "\"(unknown)\":{\"label\":\"caller outside every recorded module\","
                       "\"paths\":[],\"gpu_memory\":{\"allocs\":6,");
    ck_assert_ptr_null(strstr(j, "backwards.so"));
    ck_assert_ptr_null(strstr(j, "nulls.so"));
    /* Overlapping modules: the allocation goes to one of them, once. */
    ck_assert_uint_eq(count(j, "\"liba.so\":{") + count(j, "\"libb.so\":{"), 1);
    assert_contains(j, "\"driver_lookups\":{\"calls\":3,\"wrapped\":2,\"failed\":0,\"symbols\":1}");
    free(j);
    proc_result_free(&r);

    r = summary(dir, false);
    ck_assert_ptr_null(memchr(r.out, '\x1b', r.out_len));
    assert_contains(r.out, "?[31mevil?\".so");
    assert_contains(r.out, "(unknown)");
    assert_contains(r.out, "lookups    3 driver lookups of 1 symbols (2 wrapped by cutrace)");
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

/* More module names than a report keeps apart: the rest are summed under
 * "(other modules)", nothing is lost. */
START_TEST(test_many_modules)
{
    enum { MODULES = 300, KEPT = 256 };
    char *dir = scratch_dir();
    char *path = fixture_trace_path(dir, "node1", 77, 77);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    for (int i = 0; i < MODULES; i++) {
        char name[64];
        snprintf(name, sizeof(name), "/plugins/libplugin%03d.so", i);
        fixture_module(f, name, 0x100000 * (i + 1), 0x100000 * (i + 2));
        struct fixture_event e = {.api = CT_API_cudaMalloc,
                                  .ptr = 0x7f0000000000 + (int64_t)i * 0x1000000,
                                  .size = 4096,
                                  .caller = 0x100000 * (i + 1) + 16};
        fixture_event(f, &e);
    }
    fixture_close(f);
    struct proc_result r = summary(dir, true);
    char *j = compact(r.out);
    ck_assert_uint_eq(count(j, "\"/plugins/libplugin"), KEPT);
    assert_contains(j, "\"libplugin255.so\":{");
    ck_assert_ptr_null(strstr(j, "\"libplugin256.so\""));
    assert_contains(j, "\"(other modules)\":{\"label\":\"more module names than shown\","
                       "\"paths\":[],\"gpu_memory\":{\"allocs\":44,\"allocated_bytes\":180224,");
    size_t nmodules;
    ck_assert_int_eq(modules_live_sum(j, &nmodules), (long long)MODULES * 4096);
    ck_assert_uint_eq(nmodules, KEPT + 1);
    free(j);
    proc_result_free(&r);
    /* Text lists the 16 with the most memory: the 44 others together,
     * then single modules, equal, by name. */
    r = summary(dir, false);
    char *out = squeeze(r.out);
    assert_contains(out, "\n (other modules) more module names than shown 44 176.00 KiB"
                         " 176.00 KiB 176.00 KiB\n libplugin000.so 1 4.00 KiB");
    free(out);
    assert_contains(r.out, "libplugin014.so");
    ck_assert_ptr_null(strstr(r.out, "libplugin015.so"));
    assert_contains(r.out, "    ... and 241 more (all of them with --json)\n");
    proc_result_free(&r);
    free(path);
    scratch_remove(dir);
}
END_TEST

Suite *summary_driver_suite(void)
{
    Suite *s = suite_create("summary_driver");
    TCase *tc = tcase_create("summary_driver");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_driver_text);
    tcase_add_test(tc, test_driver_json);
    tcase_add_test(tc, test_old_formats);
    tcase_add_test(tc, test_format3_objects_required);
    tcase_add_test(tc, test_hostile_modules);
    tcase_add_test(tc, test_many_modules);
    suite_add_tcase(s, tc);
    return s;
}
