/*
 * test_store.c - the trace file: record encoding, schema, and the views that
 * derive allocations, meminfo and IPC from raw events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cutrace/store.h"
#include "cutrace/apis.h"
#include "../../preload/core/schema_image.h"
#include "suites.h"
#include "testutil.h"

struct fixture {
    char *dir;
    char *path;
    struct ct_store *st;
};

static struct fixture open_fixture(void)
{
    struct fixture f;
    char err[256];
    f.dir = tu_tmpdir();
    f.path = tu_empty_file(f.dir, "t.db");
    f.st = ct_store_create(f.path, err, sizeof err);
    ck_assert_msg(f.st != NULL, "%s", err);
    return f;
}

static void close_fixture(struct fixture *f)
{
    ct_store_close(f->st);
    tsql_rmtree(f->dir);
    free(f->dir);
    free(f->path);
}

static struct ct_record rec(uint64_t seq, enum ct_api api, uint64_t ptr, uint64_t size, int result)
{
    struct ct_record r;
    memset(&r, 0, sizeof r);
    r.seq = seq;
    r.api = (uint16_t)api;
    r.ptr = ptr;
    r.size = size;
    r.result = result;
    r.t_ns = 1000 * seq;
    r.tid = 7;
    return r;
}

START_TEST(test_record_encoding_round_trips_every_field)
{
    struct fixture f = open_fixture();
    struct ct_record r = rec(1, CT_API_cudaIpcOpenMemHandle, 0xffff800000001000ull, UINT64_MAX, 0);
    r.parent_seq = 0;
    r.dur_ns = 123;
    r.wait_ns = 45;
    r.flags = 1;
    r.stream = 0x8000000000000000ull;
    for (int i = 0; i < CT_RECORD_ARGS; i++)
        r.arg[i] = 0xfedcba9876543210ull + (uint64_t)i;
    r.caller = 0x401000;
    r.stack_id = 9;
    r.device = 3;
    r.depth = 2;
    r.has_handle = 1;
    for (int i = 0; i < CT_IPC_HANDLE_BYTES; i++)
        r.handle[i] = (uint8_t)i;
    ck_assert_int_eq(ct_store_insert(f.st, &r), 0);

    sqlite3 *db = tsql_open(f.path, SQLITE_OPEN_READWRITE);
    ck_assert_uint_eq(ct_sql_to_u64(tsql_int(db, "SELECT ptr FROM calls")), r.ptr);
    ck_assert_uint_eq(ct_sql_to_u64(tsql_int(db, "SELECT size FROM calls")), r.size);
    ck_assert_uint_eq(ct_sql_to_u64(tsql_int(db, "SELECT stream FROM calls")), r.stream);
    ck_assert_uint_eq(ct_sql_to_u64(tsql_int(db, "SELECT arg3 FROM calls")), r.arg[3]);
    ck_assert_uint_eq(ct_sql_to_u64(tsql_int(db, "SELECT arg7 FROM calls")), r.arg[7]);
    ck_assert_uint_eq(ct_sql_to_u64(tsql_int(db, "SELECT caller FROM events")), r.caller);
    ck_assert_int_eq(tsql_int(db, "SELECT dur_ns FROM calls"), 123);
    ck_assert_int_eq(tsql_int(db, "SELECT wait_ns FROM calls"), 45);
    ck_assert_int_eq(tsql_int(db, "SELECT device FROM calls"), 3);
    ck_assert_int_eq(tsql_int(db, "SELECT nested FROM calls"), 1);
    ck_assert_int_eq(tsql_int(db, "SELECT tid FROM calls"), 7);
    ck_assert_str_eq(tsql_text(db, "SELECT api FROM calls"), "cudaIpcOpenMemHandle");
    ck_assert_str_eq(tsql_text(db, "SELECT layer FROM calls"), "runtime");
    const char *hex = tsql_text(db, "SELECT handle_hex FROM ipc");
    ck_assert_uint_eq(strlen(hex), 128);
    ck_assert_int_eq(strncmp(hex, "000102030405", 12), 0);
    ck_assert_str_eq(hex + 120, "3c3d3e3f");

    /* Replaying the same record (crash recovery) changes nothing. */
    r.size = 1;
    ck_assert_int_eq(ct_store_insert(f.st, &r), 0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM events"), 1);
    ck_assert_uint_eq(ct_sql_to_u64(tsql_int(db, "SELECT size FROM calls")), UINT64_MAX);
    sqlite3_close(db);
    close_fixture(&f);
}
END_TEST

/* The writer's batched inserts (many rows per statement) store exactly what
 * one row at a time does, the rows of a last, partial batch included, and a
 * repeated seq is still ignored. */
START_TEST(test_batched_inserts_store_every_record_like_single_ones)
{
    struct fixture one = open_fixture(), many = open_fixture();
    ck_assert_int_eq(ct_store_batch_events(many.st), 0);
    ck_assert_int_eq(ct_store_begin(one.st), 0);
    ck_assert_int_eq(ct_store_begin(many.st), 0);
    for (uint64_t seq = 1; seq <= 75; seq++) {
        struct ct_record r = rec(seq, seq % 2 ? CT_API_cudaMalloc : CT_API_cudaFree,
                                 0x7f0000000000ull + seq * 4096, seq * 3, (int)(seq % 5));
        r.parent_seq = seq / 2;
        r.ret_seq = seq + seq % 3;
        for (int i = 0; i < CT_RECORD_ARGS; i++)
            r.arg[i] = seq * 10 + (uint64_t)i;
        if (seq == 40) {
            r.api = CT_API_cudaIpcGetMemHandle;
            r.has_handle = 1;
            for (int i = 0; i < CT_IPC_HANDLE_BYTES; i++)
                r.handle[i] = (uint8_t)(i + 1);
        }
        ck_assert_int_eq(ct_store_insert(one.st, &r), 0);
        ck_assert_int_eq(ct_store_insert(many.st, &r), 0);
        if (seq == 20 || seq == 70) { /* a replay, in a batch and in the last one */
            r.size = 1;
            ck_assert_int_eq(ct_store_insert(one.st, &r), 0);
            ck_assert_int_eq(ct_store_insert(many.st, &r), 0);
        }
    }
    ck_assert_int_eq(ct_store_commit(one.st), 0);
    ck_assert_int_eq(ct_store_commit(many.st), 0);

    const char *q = "SELECT count(*) || ':' || total(seq * 7 + parent_seq + size + ptr % 1000003"
                    " + result + arg0 + arg7 + ret_seq + effect_order) || ':' ||"
                    " group_concat(api, ',') FROM calls";
    sqlite3 *a = tsql_open(one.path, SQLITE_OPEN_READWRITE);
    sqlite3 *b = tsql_open(many.path, SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(tsql_int(b, "SELECT count(*) FROM events"), 75);
    ck_assert_str_eq(tsql_text(a, q), tsql_text(b, q));
    ck_assert_str_eq(tsql_text(a, "SELECT handle_hex FROM ipc"),
                     tsql_text(b, "SELECT handle_hex FROM ipc"));
    ck_assert_int_eq(tsql_int(b, "SELECT size FROM events WHERE seq = 70"), 210);
    sqlite3_close(a);
    sqlite3_close(b);
    close_fixture(&one);
    close_fixture(&many);
}
END_TEST

START_TEST(test_new_trace_has_contract_tables_and_metadata)
{
    struct fixture f = open_fixture();
    sqlite3 *db = tsql_open(f.path, SQLITE_OPEN_READWRITE);
    const char *objects[] = {"process", "devices", "calls", "allocations",
                             "meminfo", "ipc",     "env",   "meta"};
    for (size_t i = 0; i < sizeof objects / sizeof *objects; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", objects[i]);
        ck_assert_int_ge(tsql_int(db, sql), 0);
    }
    ck_assert_int_eq(tsql_int(db, "SELECT value FROM meta WHERE key='format_version'"),
                     CT_FORMAT_VERSION);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key='schema'"), "cutrace");
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key='end_state'"), "running");
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM apis"), CT_API_COUNT - 1);
    ck_assert_str_eq(tsql_text(db, "SELECT journal_mode FROM pragma_journal_mode"), "wal");
    sqlite3_close(db);
    close_fixture(&f);
}
END_TEST

START_TEST(test_process_env_devices_and_versions)
{
    struct fixture f = open_fixture();
    struct ct_process_info p = {.pid = 10,
                                .ppid = 1,
                                .uid = 0,
                                .start_wall_ns = 5,
                                .start_mono_ns = 6,
                                .cmdline = "python3 -m x 'a b'"};
    strcpy(p.host, "node1");
    strcpy(p.boot_id, "b");
    ck_assert_int_eq(ct_store_write_process(f.st, &p), 0);
    struct ct_env_var vars[] = {{"NCCL_DEBUG", "INFO"}, {"HF_X_TOKEN", "<redacted>"}};
    ck_assert_int_eq(ct_store_write_env(f.st, vars, 2), 0);
    struct ct_device_info d = {.device = 1, .total_bytes = 96ull << 30};
    strcpy(d.uuid, "GPU-1");
    strcpy(d.name, "H");
    strcpy(d.pci_bus_id, "0000:18:00.0");
    ck_assert_int_eq(ct_store_write_device(f.st, &d, 4), 0);
    struct ct_versions first = {12080, 0, 0}, later = {0, 13000, 22809};
    ck_assert_int_eq(ct_store_set_versions(f.st, &first), 0);
    ck_assert_int_eq(ct_store_set_versions(f.st, &later), 0);

    sqlite3 *db = tsql_open(f.path, SQLITE_OPEN_READWRITE);
    ck_assert_str_eq(tsql_text(db, "SELECT cmdline FROM process"), "python3 -m x 'a b'");
    ck_assert_str_eq(tsql_text(db, "SELECT host FROM process"), "node1");
    ck_assert_int_eq(tsql_int(db, "SELECT cuda_runtime_version FROM process"), 12080);
    ck_assert_int_eq(tsql_int(db, "SELECT cuda_driver_version FROM process"), 13000);
    ck_assert_int_eq(tsql_int(db, "SELECT nccl_version FROM process"), 22809);
    ck_assert_str_eq(tsql_text(db, "SELECT value FROM env WHERE name='NCCL_DEBUG'"), "INFO");
    ck_assert_str_eq(tsql_text(db, "SELECT uuid FROM devices WHERE device=1"), "GPU-1");
    ck_assert_int_eq(tsql_int(db, "SELECT total_bytes FROM devices"), 96ll << 30);
    sqlite3_close(db);
    close_fixture(&f);
}
END_TEST

START_TEST(test_allocations_view_pairs_frees_by_space_and_handles_resets)
{
    struct fixture f = open_fixture();
    struct ct_record rs[] = {
        rec(1, CT_API_cudaMalloc, 0x1000, 100, 0),
        rec(2, CT_API_cudaMalloc, 0, 1ull << 50, 2), /* failed: no allocation */
        rec(3, CT_API_cudaFree, 0x1000, 0, 0),
        rec(4, CT_API_cudaMallocHost, 0x1000, 50, 0),
        rec(5, CT_API_cudaMalloc, 0x1000, 200, 0),
        rec(6, CT_API_cudaFreeHost, 0x1000, 0, 0), /* ends 4, not 5 */
        rec(7, CT_API_cudaMalloc, 0x1000, 300, 0), /* 5 was freed behind our back */
        rec(8, CT_API_cudaIpcOpenMemHandle, 0x9000, 0, 0),
        rec(9, CT_API_cudaMalloc, 0x7000, 70, 0),
        rec(10, CT_API_cudaMalloc, 0x5000, 500, 0),
        rec(11, CT_API_cudaMalloc, 0x5000, 500, 0), /* nested inside 10: same memory */
        rec(12, CT_API_cudaMemGetInfo, 0, 0, 0),
        rec(13, CT_API_cudaDeviceReset, 0, 0, 0),
        rec(14, CT_API_cudaFree, 0x7000, 0, 0),
    };
    rs[8].device = 1;
    rs[13].device = 1;
    rs[10].parent_seq = 10;
    rs[10].depth = 1;
    rs[11].arg[0] = 1000;
    rs[11].arg[1] = 4000;
    for (size_t i = 0; i < sizeof rs / sizeof *rs; i++)
        ck_assert_int_eq(ct_store_insert(f.st, &rs[i]), 0);

    sqlite3 *db = tsql_open(f.path, SQLITE_OPEN_READWRITE);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations"), 7);
    ck_assert_int_eq(tsql_int(db, "SELECT free_seq FROM allocations WHERE seq=1"), 3);
    ck_assert_str_eq(tsql_text(db, "SELECT free_api FROM allocations WHERE seq=1"), "cudaFree");
    ck_assert_int_eq(tsql_int(db, "SELECT free_seq FROM allocations WHERE seq=4"), 6);
    ck_assert_str_eq(tsql_text(db, "SELECT kind FROM allocations WHERE seq=4"), "host");
    ck_assert_int_eq(tsql_int(db, "SELECT free_seq FROM allocations WHERE seq=5"), 7);
    ck_assert_str_eq(tsql_text(db, "SELECT free_api FROM allocations WHERE seq=5"), "implicit");
    ck_assert_int_eq(tsql_int(db, "SELECT free_seq FROM allocations WHERE seq=7"), 13);
    ck_assert_str_eq(tsql_text(db, "SELECT free_api FROM allocations WHERE seq=7"),
                     "cudaDeviceReset");
    ck_assert_int_eq(tsql_int(db, "SELECT free_t_ns FROM allocations WHERE seq=7"), 13000);
    ck_assert_str_eq(tsql_text(db, "SELECT kind FROM allocations WHERE seq=8"), "ipc");
    ck_assert_int_eq(tsql_int(db, "SELECT free_seq FROM allocations WHERE seq=8"), 13);
    ck_assert_int_eq(tsql_int(db, "SELECT free_seq FROM allocations WHERE seq=9"), 14);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE seq IN (2, 11)"), 0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM allocations WHERE free_seq IS NULL"), 0);
    ck_assert_int_eq(tsql_int(db, "SELECT free_bytes FROM meminfo"), 1000);
    ck_assert_int_eq(tsql_int(db, "SELECT total_bytes FROM meminfo"), 4000);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls"), 14);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls WHERE result != 0"), 1);
    sqlite3_close(db);
    close_fixture(&f);
}
END_TEST

START_TEST(test_create_refuses_symlinks_and_foreign_files)
{
    char *dir = tu_tmpdir();
    char err[256];
    char *target = tu_empty_file(dir, "target.db");
    char link[4096];
    snprintf(link, sizeof link, "%s/link.db", dir);
    ck_assert_int_eq(symlink(target, link), 0);
    ck_assert_ptr_null(ct_store_create(link, err, sizeof err));

    char garbage[4096];
    snprintf(garbage, sizeof garbage, "%s/garbage.db", dir);
    FILE *g = fopen(garbage, "w");
    fputs("this is not a database, and it is long enough to have a header........", g);
    fclose(g);
    ck_assert_ptr_null(ct_store_create(garbage, err, sizeof err));
    ck_assert(strstr(err, "garbage.db") != NULL);
    tsql_rmtree(dir);
    free(dir);
    free(target);
}
END_TEST

/* Every row of sql, every column as text, in one malloc'd string. */
static char *dump_rows(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    out[0] = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(q); c++) {
            const char *t = (const char *)sqlite3_column_text(q, c);
            size_t n = strlen(t ? t : "NULL") + 2;
            while (len + n + 1 > cap)
                ck_assert_ptr_nonnull(out = realloc(out, cap *= 2));
            len += (size_t)snprintf(out + len, cap - len, "%s%c", t ? t : "NULL",
                                    c + 1 < sqlite3_column_count(q) ? '|' : '\n');
        }
    }
    sqlite3_finalize(q);
    return out;
}

/*
 * The first call writes the build's image of a new trace file instead of
 * creating the schema (schema_image.h): it must be, object for object and
 * row for row, the file the store itself creates, and open as a store.
 */
START_TEST(test_schema_image_is_what_the_store_creates)
{
    char *dir = tu_tmpdir();
    char *made = tu_empty_file(dir, "made.db"), *image = tu_empty_file(dir, "image.db");
    char err[512] = "";
    struct ct_store *st = ct_store_create_private(made, err, sizeof err);
    ck_assert_msg(st != NULL, "%s", err);
    ct_store_close(st);
    FILE *f = fopen(image, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(ct_schema_image, 1, ct_schema_image_size, f), ct_schema_image_size);
    ck_assert_int_eq(fclose(f), 0);
    st = ct_store_open_private(image, err, sizeof err);
    ck_assert_msg(st != NULL, "%s", err);
    ct_store_close(st);

    static const char *const queries[] = {
        "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name",
        "SELECT * FROM apis ORDER BY 1",
        "SELECT key, value FROM meta ORDER BY key",
        "SELECT * FROM pragma_page_size, pragma_encoding, pragma_auto_vacuum, "
        "pragma_user_version, pragma_application_id",
    };
    sqlite3 *a = tsql_open(made, SQLITE_OPEN_READONLY), *b = tsql_open(image, SQLITE_OPEN_READONLY);
    for (size_t i = 0; i < sizeof queries / sizeof *queries; i++) {
        char *want = dump_rows(a, queries[i]), *got = dump_rows(b, queries[i]);
        ck_assert_msg(strlen(want) > 0, "%s: no rows", queries[i]);
        ck_assert_str_eq(got, want);
        free(want);
        free(got);
    }
    ck_assert_int_gt(tsql_int(b, "SELECT count(*) FROM sqlite_schema WHERE type='view'"), 5);
    sqlite3_close(a);
    sqlite3_close(b);
    tsql_rmtree(dir);
    free(made);
    free(image);
    free(dir);
}
END_TEST

Suite *store_suite(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_record_encoding_round_trips_every_field);
    tcase_add_test(tc, test_batched_inserts_store_every_record_like_single_ones);
    tcase_add_test(tc, test_new_trace_has_contract_tables_and_metadata);
    tcase_add_test(tc, test_process_env_devices_and_versions);
    tcase_add_test(tc, test_allocations_view_pairs_frees_by_space_and_handles_resets);
    tcase_add_test(tc, test_create_refuses_symlinks_and_foreign_files);
    tcase_add_test(tc, test_schema_image_is_what_the_store_creates);
    suite_add_tcase(s, tc);
    return s;
}
