/*
 * test_stacks.c - the parts of call stacks that need no traced process:
 * the auxiliary records (stackrec.h) and what the store makes of them, the
 * loaded-object snapshots (objects.c), and the analyzer's ELF symbol reader
 * and demangler, hostile files included.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../analyzer/symbols/demangle.h"
#include "../../analyzer/symbols/elfsyms.h"
#include "../../preload/core/objects.h"
#include "cutrace/pylines.h"
#include "cutrace/stackrec.h"
#include "cutrace/store.h"
#include "cutrace/apis.h"
#include "suites.h"
#include "testutil.h"

/* ---- auxiliary records ---- */

static union ct_any_record frames_record(uint64_t id, unsigned first, unsigned count,
                                         unsigned total, unsigned native)
{
    union ct_any_record u;
    ct_aux_init(&u, CT_AUX_FRAMES, id);
    u.aux.first = (uint16_t)first;
    u.aux.count = (uint16_t)count;
    u.aux.total = (uint16_t)total;
    u.aux.native = (uint16_t)native;
    for (unsigned i = 0; i < count; i++)
        ct_aux_set_frame(&u.aux, i, 0x400000 + 16 * (first + i));
    return u;
}

START_TEST(test_aux_records_pack_and_check)
{
    union ct_any_record u = frames_record(42, 0, CT_AUX_FRAMES_PER, 30, 20);
    ck_assert(ct_record_is_aux(&u.rec));
    ck_assert(ct_aux_valid(&u.aux));
    for (unsigned i = 0; i < CT_AUX_FRAMES_PER; i++)
        ck_assert_uint_eq(ct_aux_frame(&u.aux, i), 0x400000 + 16 * i);
    /* The ring's own field stays out of the payload. */
    u.rec.wait_ns = 99;
    ck_assert_uint_eq(ct_aux_frame(&u.aux, 0), 0x400000);
    ck_assert_uint_eq(ct_aux_frame(&u.aux, CT_AUX_FRAMES_PER - 1),
                      0x400000 + 16 * (CT_AUX_FRAMES_PER - 1));

    struct {
        const char *what;
        union ct_any_record u;
    } bad[] = {
        {"no frames", frames_record(1, 0, 0, 1, 1)},
        {"too many", frames_record(1, 0, CT_AUX_FRAMES_PER + 1, 40, 0)},
        {"past total", frames_record(1, 20, 10, 25, 0)},
        {"native past total", frames_record(1, 0, 2, 2, 3)},
        {"huge stack", frames_record(1, 0, 2, CT_STACK_MAX_FRAMES + 1, 0)},
        {"id 0", frames_record(0, 0, 2, 2, 2)},
        {"id past int64", frames_record(UINT64_MAX, 0, 2, 2, 2)},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!ct_aux_valid(&bad[i].u.aux), "%s", bad[i].what);
    u.aux.kind = 9;
    ck_assert(!ct_aux_valid(&u.aux));

    union ct_any_record code;
    ct_aux_init(&code, CT_AUX_PYCODE, 7);
    code.aux.count = 4;
    code.aux.total = 180; /* crosses from payload_a into payload_b */
    char text[CT_AUX_PAYLOAD_BYTES];
    memset(text, 'x', sizeof text);
    memcpy(text, "main", 4);
    ct_aux_put_bytes(&code.aux, 0, text, 184);
    ck_assert(ct_aux_valid(&code.aux));
    char back[CT_AUX_PAYLOAD_BYTES];
    ct_aux_get_bytes(&code.aux, 0, back, 184);
    ck_assert_int_eq(memcmp(back, text, 184), 0);
    code.aux.total = CT_AUX_PAYLOAD_BYTES; /* with the name: past the record */
    ck_assert(!ct_aux_valid(&code.aux));
    code.aux.total = 180;
    ct_aux_put_bytes(&code.aux, 100, "", 1); /* a NUL inside the names */
    ck_assert(!ct_aux_valid(&code.aux));
    /* A call's record is never taken for one. */
    struct ct_record call;
    memset(&call, 0, sizeof call);
    call.seq = 1;
    call.api = CT_AUX_API;
    ck_assert(!ct_record_is_aux(&call));
}
END_TEST

START_TEST(test_store_turns_aux_records_into_stacks)
{
    char err[256];
    char *dir = tu_tmpdir();
    char *path = tu_empty_file(dir, "t.db");
    struct ct_store *st = ct_store_create(path, err, sizeof err);
    ck_assert_msg(st != NULL, "%s", err);
    ck_assert_int_eq(ct_store_begin(st), 0);
    /* A stack of 30 frames, 20 native, in two records, the second sent twice. */
    union ct_any_record a = frames_record(42, 0, 25, 30, 20);
    union ct_any_record b = frames_record(42, 25, 5, 30, 20);
    for (unsigned i = 20; i < 25; i++)
        ct_aux_set_frame(&a.aux, i, CT_PYFRAME(1, 100 + i));
    for (unsigned i = 0; i < 5; i++)
        ct_aux_set_frame(&b.aux, i, CT_PYFRAME(2, 200 + i));
    ck_assert_int_eq(ct_store_insert(st, &a.rec), 0);
    ck_assert_int_eq(ct_store_insert(st, &b.rec), 0);
    ck_assert_int_eq(ct_store_insert(st, &b.rec), 0);
    union ct_any_record code;
    ct_aux_init(&code, CT_AUX_PYCODE, 1);
    code.aux.count = 12;
    code.aux.total = 8;
    ct_aux_put_bytes(&code.aux, 0, "load_weightsmodel.py", 20);
    ck_assert_int_eq(ct_store_insert(st, &code.rec), 0);
    /* Invalid: dropped, not an error. */
    union ct_any_record bad = frames_record(43, 0, 0, 1, 1);
    ck_assert_int_eq(ct_store_insert(st, &bad.rec), 0);
    ck_assert_int_eq(
        ct_store_write_object(st, "/lib/libx.so", "abcd", 0x400000, 0x400000, 0x500000, 7), 0);
    struct ct_record call;
    memset(&call, 0, sizeof call);
    call.seq = 1;
    call.api = CT_API_cudaMalloc;
    call.stack_id = 42;
    ck_assert_int_eq(ct_store_insert(st, &call), 0);
    ck_assert_int_eq(ct_store_commit(st), 0);
    ct_store_close(st);

    sqlite3 *db = tsql_open(path, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM stacks WHERE stack_id = 42"), 30);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM stacks WHERE stack_id = 43"), 0);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM stacks WHERE kind = 'native'"), 20);
    ck_assert_str_eq(tsql_text(db, "SELECT module FROM stacks WHERE depth = 3"), "/lib/libx.so");
    ck_assert_int_eq(tsql_int(db, "SELECT offset FROM stacks WHERE depth = 3"), 48);
    ck_assert_str_eq(tsql_text(db, "SELECT symbol || ' ' || file || ':' || line FROM stacks"
                                   " WHERE depth = 22"),
                     "load_weights model.py:122");
    ck_assert_int_eq(tsql_int(db, "SELECT line FROM stacks WHERE depth = 29"), 204);
    ck_assert_str_eq(tsql_text(db, "SELECT coalesce(symbol, 'none') FROM stacks WHERE depth = 29"),
                     "none"); /* code 2 was never named */
    ck_assert_int_eq(tsql_int(db, "SELECT stack_id FROM calls"), 42);
    ck_assert_str_eq(tsql_text(db, "SELECT build_id FROM loaded_modules"), "abcd");
    sqlite3_close(db);
    tsql_rmtree(dir);
    free(dir);
    free(path);
}
END_TEST

/* A trace without the stack tables (format 3) takes calls and drops stacks. */
START_TEST(test_store_drops_stacks_for_an_older_trace)
{
    char err[256];
    char *dir = tu_tmpdir();
    char *path = tu_empty_file(dir, "t.db");
    struct ct_store *st = ct_store_create(path, err, sizeof err);
    ck_assert(st != NULL);
    sqlite3_exec(ct_store_sqlite(st), "DROP VIEW stacks; DROP TABLE stack_frames", NULL, NULL,
                 NULL);
    union ct_any_record a = frames_record(42, 0, 3, 3, 3);
    ck_assert_int_eq(ct_store_insert(st, &a.rec), 0);
    ck_assert_int_eq(ct_store_insert(st, &a.rec), 0);
    ct_store_close(st);
    tsql_rmtree(dir);
    free(dir);
    free(path);
}
END_TEST

/* Sends a Python code object as ring 5 does: its names, then its line table
 * in chunks; `twice` repeats the first chunk, as a crowded ring may not. */
static void send_code(struct ct_store *st, uint32_t id, const uint8_t *table, unsigned len,
                      bool twice)
{
    union ct_any_record code;
    ct_aux_init(&code, CT_AUX_PYCODE, id);
    code.aux.count = 12;
    code.aux.total = 8;
    ct_aux_put_bytes(&code.aux, 0, "load_weightsmodel.py", 20);
    ct_aux_set_pycode_lines(&code.aux, len, 10, CT_PYLINES_311);
    ck_assert(ct_aux_valid(&code.aux));
    ck_assert_int_eq(ct_store_insert(st, &code.rec), 0);
    for (unsigned at = 0; at < len; at += CT_AUX_PAYLOAD_BYTES) {
        union ct_any_record chunk;
        ct_aux_init(&chunk, CT_AUX_PYLINES, id);
        chunk.aux.first = (uint16_t)at;
        chunk.aux.count =
            (uint16_t)(len - at < CT_AUX_PAYLOAD_BYTES ? len - at : CT_AUX_PAYLOAD_BYTES);
        chunk.aux.total = (uint16_t)len;
        ct_aux_put_bytes(&chunk.aux, 0, table + at, chunk.aux.count);
        ck_assert(ct_aux_valid(&chunk.aux));
        ck_assert_int_eq(ct_store_insert(st, &chunk.rec), 0);
        if (twice && at == 0)
            ck_assert_int_eq(ct_store_insert(st, &chunk.rec), 0);
    }
}

static union ct_any_record meta_record(const char *key, const char *value)
{
    union ct_any_record m;
    ct_aux_init(&m, CT_AUX_META, 1);
    m.aux.count = (uint16_t)strlen(key);
    m.aux.total = (uint16_t)strlen(value);
    ct_aux_put_bytes(&m.aux, 0, key, m.aux.count);
    ct_aux_put_bytes(&m.aux, m.aux.count, value, m.aux.total);
    return m;
}

/*
 * Ring 5's Python records: a line table of two chunks (the first one sent
 * twice) becomes one py_linetables row, frames by instruction offset get
 * their line from it at the store with instr and entry kept, a frame by line
 * (the API's) keeps its line, and a meta record sets only the one key
 * allowed. A format-4 trace takes the same records without the new columns.
 */
START_TEST(test_store_python_line_tables_and_meta)
{
    /* 3.11+ location table: 150 no-column entries of one code unit each,
     * line deltas +1 (signed varint 2), from first line 10: lines 11, 12, ... */
    uint8_t table[300];
    for (unsigned i = 0; i < 150; i++) {
        table[2 * i] = 0x80 | 13 << 3;
        table[2 * i + 1] = 2;
    }
    ck_assert_int_eq(ct_pylines_line(CT_PYLINES_311, 10, table, sizeof table, 4), 13);
    ck_assert_int_eq(ct_pylines_line(CT_PYLINES_311, 10, table, sizeof table, 280), 151);
    for (int format = 5; format >= 4; format--) {
        char err[256];
        char *dir = tu_tmpdir();
        char *path = tu_empty_file(dir, "t.db");
        struct ct_store *st = ct_store_create(path, err, sizeof err);
        ck_assert_msg(st != NULL, "%s", err);
        if (format == 4)
            ck_assert_int_eq(sqlite3_exec(ct_store_sqlite(st),
                                          "DROP VIEW stacks; DROP TABLE py_linetables;"
                                          " ALTER TABLE stack_frames DROP COLUMN instr;"
                                          " ALTER TABLE stack_frames DROP COLUMN entry",
                                          NULL, NULL, NULL),
                             SQLITE_OK);
        ck_assert_int_eq(ct_store_begin(st), 0);
        send_code(st, 1, table, sizeof table, true);
        union ct_any_record f = frames_record(42, 0, 3, 3, 0);
        ct_aux_set_frame(&f.aux, 0, CT_PYFRAME(1, CT_PYFRAME_INSTR | CT_PYFRAME_ENTRY | 4));
        ct_aux_set_frame(&f.aux, 1, CT_PYFRAME(1, CT_PYFRAME_INSTR | 280));
        ct_aux_set_frame(&f.aux, 2, CT_PYFRAME(1, 77)); /* read through the API */
        ck_assert_int_eq(ct_store_insert(st, &f.rec), 0);
        union ct_any_record good = meta_record("python_frames", "without the GIL: test");
        union ct_any_record bad = meta_record("format_version", "1");
        ck_assert(ct_aux_valid(&good.aux));
        ck_assert(!ct_aux_valid(&bad.aux));
        ck_assert_int_eq(ct_store_insert(st, &good.rec), 0);
        ck_assert_int_eq(ct_store_insert(st, &bad.rec), 0);
        ck_assert_int_eq(ct_store_commit(st), 0);
        ct_store_close(st);

        sqlite3 *db = tsql_open(path, SQLITE_OPEN_READONLY);
        ck_assert_str_eq(tsql_text(db, "SELECT value FROM meta WHERE key = 'python_frames'"),
                         "without the GIL: test");
        ck_assert_int_eq(tsql_int(db, "SELECT value FROM meta WHERE key = 'format_version'"),
                         CT_FORMAT_VERSION);
        ck_assert_int_eq(
            tsql_int(db, "SELECT value & 4294967295 FROM stack_frames WHERE depth = 2"), 77);
        if (format == 5) {
            ck_assert_int_eq(tsql_int(db, "SELECT length(bytes) FROM py_linetables"), 300);
            ck_assert_int_eq(tsql_int(db, "SELECT size || format || first_line FROM py_linetables"),
                             30031110);
            ck_assert_str_eq(tsql_text(db, "SELECT group_concat(line || '/' || coalesce(instr, '-')"
                                           " || '/' || coalesce(entry, '-'), ' ') FROM (SELECT *"
                                           " FROM stacks ORDER BY depth)"),
                             "13/4/1 151/280/0 77/-/-");
        } else {
            ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM stack_frames"), 3);
        }
        sqlite3_close(db);
        tsql_rmtree(dir);
        free(dir);
        free(path);
    }
}
END_TEST

/* ---- loaded objects ---- */

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (!info->dlpi_name || !*info->dlpi_name) {
        *(uint64_t *)arg = info->dlpi_addr;
        return 1;
    }
    return 0;
}

START_TEST(test_objects_snapshot_and_rescan)
{
    struct ct_objects o;
    memset(&o, 0, sizeof o);
    struct ct_object *found;
    bool changed;
    size_t n = ct_objects_scan(&o, &found, &changed);
    ck_assert_uint_gt(n, 2);
    ck_assert(!changed); /* a first scan is not a change */
    bool self = false, libc = false;
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_lt(found[i].start, found[i].end);
        if (strstr(found[i].path, "unit_tests")) {
            self = true;
            ck_assert_uint_ge(strlen(found[i].build_id), 16);
        }
        libc = libc || strstr(found[i].path, "libc.so") != NULL;
        ct_objects_add(&o, &found[i]);
    }
    ck_assert(self && libc);
    free(found);
    /* Nothing changed: nothing new. */
    ck_assert_uint_eq(ct_objects_scan(&o, &found, &changed), 0);
    free(found);
    /* A frame in a recorded object needs nothing; one outside any does. */
    ct_objects_note(&o, (uint64_t)(uintptr_t)&test_objects_snapshot_and_rescan);
    ck_assert(!o.missing);
    ct_objects_note(&o, 0x10);
    ck_assert(o.missing);
    /* A library loaded later is found by the next scan. */
    void *was = dlopen("libutil.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *h = dlopen("libutil.so.1", RTLD_NOW);
    n = ct_objects_scan(&o, &found, &changed);
    if (!was && h) {
        ck_assert(changed);
        ck_assert_uint_ge(n, 1);
    }
    free(found);
    if (was)
        dlclose(was);
    if (h)
        dlclose(h);
    ct_objects_free(&o);
}
END_TEST

/* ---- ELF symbols ---- */

__attribute__((noinline)) static int a_local_function(int x)
{
    return x * 3 + 1;
}

START_TEST(test_elf_symbols_name_functions)
{
    struct elf_symtab t;
    char err[256];
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert_int_gt(len, 0);
    exe[len] = '\0';
    ck_assert_msg(elf_symtab_load(exe, &t, err, sizeof err) == 0, "%s", err);
    ck_assert(t.full);
    ck_assert_uint_ge(strlen(t.build_id), 16);
    uint64_t bias = 0;
    dl_iterate_phdr(find_self, &bias);
    uint64_t off;
    uint64_t vaddr = (uint64_t)(uintptr_t)&a_local_function - bias;
    ck_assert_str_eq(elf_symtab_lookup(&t, vaddr + 2, &off), "a_local_function");
    ck_assert_uint_eq(off, 2);
    ck_assert_int_eq(a_local_function(1), 4);
    ck_assert_ptr_null(elf_symtab_lookup(&t, 0x10, &off));
    elf_symtab_free(&t);

    char buf[256];
    ck_assert_str_eq(elf_debug_path("0a1b2c3d", buf, sizeof buf),
                     "/usr/lib/debug/.build-id/0a/1b2c3d.debug");
    ck_assert_ptr_null(elf_debug_path("../../etc", buf, sizeof buf));
}
END_TEST

static char *write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char *path;
    ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
    return path;
}

static void expect_refused(const char *path, const char *reason)
{
    struct elf_symtab t;
    char err[256] = "";
    ck_assert_int_eq(elf_symtab_load(path, &t, err, sizeof err), -1);
    ck_assert_msg(strstr(err, reason) != NULL, "%s: got \"%s\"", path, err);
    elf_symtab_free(&t);
}

/* Paths come from traces: anything may be there. */
START_TEST(test_elf_reader_refuses_hostile_files)
{
    char *dir = tu_tmpdir();
    char *empty = tu_empty_file(dir, "empty");
    expect_refused(empty, "size");
    expect_refused(dir, "not a regular file");
    expect_refused("/nonexistent/lib.so", "No such file");
    char *fifo;
    ck_assert_int_ge(asprintf(&fifo, "%s/fifo", dir), 0);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    expect_refused(fifo, "not a regular file"); /* and never blocks */
    char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 131 + 7);
    char *noise = write_file(dir, "noise", junk, sizeof junk);
    expect_refused(noise, "not an ELF file");

    /* A real ELF file, then damaged in the ways that matter. */
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len] = '\0';
    int fd = open(exe, O_RDONLY);
    struct stat st;
    fstat(fd, &st);
    size_t size = (size_t)st.st_size;
    unsigned char *image = malloc(size);
    ck_assert_int_eq(read(fd, image, size), (ssize_t)size);
    close(fd);
    Elf64_Ehdr eh;
    memcpy(&eh, image, sizeof eh);

    char *truncated = write_file(dir, "truncated", image, size / 3);
    expect_refused(truncated, "corrupt ELF file");
    unsigned char *copy = malloc(size);
    memcpy(copy, image, size);
    Elf64_Ehdr *h = (Elf64_Ehdr *)copy;
    h->e_shoff = (Elf64_Off)size - 10;
    char *bad_shoff = write_file(dir, "bad_shoff", copy, size);
    expect_refused(bad_shoff, "bad section headers");
    memcpy(copy, image, size);
    h->e_shnum = 0xffff;
    char *bad_count = write_file(dir, "bad_count", copy, size);
    expect_refused(bad_count, "corrupt ELF file");
    /* Every section's offset past the end. */
    memcpy(copy, image, size);
    for (unsigned i = 1; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, copy + eh.e_shoff + i * sizeof sh, sizeof sh);
        if (sh.sh_type == SHT_SYMTAB) {
            sh.sh_link = 0xfffff; /* no such string table */
            memcpy(copy + eh.e_shoff + i * sizeof sh, &sh, sizeof sh);
        }
    }
    char *bad_link = write_file(dir, "bad_link", copy, size);
    expect_refused(bad_link, "string table");
    memcpy(copy, image, size);
    copy[EI_CLASS] = ELFCLASS32;
    char *class32 = write_file(dir, "class32", copy, size);
    expect_refused(class32, "64-bit");

    /* Random damage anywhere: a clean result or a clean refusal, never a crash. */
    unsigned seed = 12345;
    for (int round = 0; round < 200; round++) {
        memcpy(copy, image, size);
        for (int k = 0; k < 16; k++) {
            seed = seed * 1103515245u + 12345u;
            copy[(size_t)(seed >> 8) % size] = (unsigned char)(seed >> 3);
        }
        /* Damage the section headers more often: they steer everything. */
        seed = seed * 1103515245u + 12345u;
        if (eh.e_shoff < size)
            copy[eh.e_shoff + (seed >> 8) % (size - eh.e_shoff)] ^= (unsigned char)seed;
        char *damaged = write_file(dir, "damaged", copy, size);
        struct elf_symtab t;
        char err[256];
        if (elf_symtab_load(damaged, &t, err, sizeof err) == 0) {
            uint64_t off;
            for (uint64_t a = 0; a < 0x20000; a += 0x1000)
                elf_symtab_lookup(&t, a, &off);
        }
        elf_symtab_free(&t);
        free(damaged);
    }
    free(copy);
    free(image);
    free(truncated);
    free(bad_shoff);
    free(bad_count);
    free(bad_link);
    free(class32);
    free(noise);
    free(fifo);
    free(empty);
    tsql_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_demangle)
{
    ck_assert_ptr_null(demangle("plain_c_function"));
    ck_assert_ptr_null(demangle(NULL));
    if (!demangle_available()) {
        fprintf(stderr, "skipped: no libstdc++ to demangle with\n");
        return;
    }
    char *name = demangle("_ZN3c104cuda9allocatorEmPv");
    ck_assert_str_eq(name, "c10::cuda::allocator(unsigned long, void*)");
    free(name);
    ck_assert_ptr_null(demangle("_Znot a name"));
    char long_name[5000];
    memset(long_name, 'N', sizeof long_name - 1);
    long_name[0] = '_';
    long_name[1] = 'Z';
    long_name[sizeof long_name - 1] = '\0';
    ck_assert_ptr_null(demangle(long_name));
}
END_TEST

Suite *stacks_suite(void)
{
    Suite *s = suite_create("stacks");
    TCase *tc = tcase_create("stacks");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_aux_records_pack_and_check);
    tcase_add_test(tc, test_store_turns_aux_records_into_stacks);
    tcase_add_test(tc, test_store_drops_stacks_for_an_older_trace);
    tcase_add_test(tc, test_store_python_line_tables_and_meta);
    tcase_add_test(tc, test_objects_snapshot_and_rescan);
    tcase_add_test(tc, test_elf_symbols_name_functions);
    tcase_add_test(tc, test_elf_reader_refuses_hostile_files);
    tcase_add_test(tc, test_demangle);
    suite_add_tcase(s, tc);
    return s;
}
