/*
 * test_model_ipcstacks.c - what the run model takes from its one pass over
 * the events that used to take passes of their own: the IPC rows (once read
 * from the `ipc` view) and each allocation's stack id (once read from the
 * `calls` view by symbols/stacks.c, which followed parent_seq). The IPC
 * links must be those the view's rows give: logical events with a handle,
 * result 0, the handle as lower(hex(handle)); the stack of an allocation
 * the call's own or its nearest enclosing call's, at most 64 calls up.
 */
#include "model/gpumodel.h"
#include "model/traceset.h"
#include "symbols/stacks.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WALL 1736071872345000000ll
#define MIB  (1ll << 20)

static struct fixture *trace_of(const char *dir, int64_t pid, char **path)
{
    *path = fixture_trace_path(dir, "node", pid, WALL + pid * 1000);
    struct fixture *f = fixture_create(*path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid,
                                .ppid = 1,
                                .host = "node",
                                .cmdline = "python3 server.py",
                                .start_wall_ns = WALL + pid * 1000,
                                .start_mono_ns = 1000000000,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, "GPU-aaaaaaaa-0000-0000-0000-000000000000", "NVIDIA H100", 80ll << 30);
    return f;
}

/* An export or open; tag names the 64-byte handle (0: an empty handle). */
static int64_t ipc(struct fixture *f, enum ct_api api, int64_t ptr, unsigned char tag,
                   int64_t result, int64_t parent)
{
    unsigned char handle[64] = {0xc7, tag};
    struct fixture_event e = {.api = api,
                              .device = 0,
                              .ptr = ptr,
                              .size = api == CT_API_cudaIpcOpenMemHandle ? 0 : 4 * MIB,
                              .dur_ns = 100,
                              .result = result,
                              .parent_seq = parent,
                              .depth = parent ? 1 : 0,
                              .handle = handle,
                              .handle_len = tag ? sizeof(handle) : 0};
    return fixture_event(f, &e);
}

/* The opens of the ipc view in path (result 0, a handle) whose handle one
 * of the exports of the view in export_path has; their seqs into seqs. */
static size_t view_opens(const char *path, const char *export_path, int64_t *seqs, size_t cap)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    char *sql = sqlite3_mprintf("ATTACH %Q AS x", export_path);
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(sql);
    sqlite3_stmt *q;
    ck_assert_int_eq(
        sqlite3_prepare_v2(db,
                           "SELECT i.seq FROM main.ipc i JOIN main.apis a ON a.name = i.api"
                           " WHERE a.role = 'alloc' AND i.result = 0 AND i.handle_hex <> ''"
                           " AND i.handle_hex IN (SELECT e.handle_hex FROM x.ipc e"
                           " JOIN x.apis b ON b.name = e.api WHERE b.role = 'ipc_export'"
                           " AND e.result = 0) ORDER BY i.seq",
                           -1, &q, NULL),
        SQLITE_OK);
    size_t n = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        ck_assert_uint_lt(n, cap);
        seqs[n++] = sqlite3_column_int64(q, 0);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
}

static const struct gm_process *proc_of(const struct gm_model *m, int64_t pid)
{
    for (size_t i = 0; i < m->nprocs; i++)
        if (m->procs[i].pid == pid)
            return &m->procs[i];
    ck_abort_msg("no process %" PRId64, pid);
    return NULL;
}

START_TEST(test_ipc_links_agree_with_view)
{
    char *dir = scratch_dir();
    char *exporter_path, *opener_path;
    struct fixture *f = trace_of(dir, 100, &exporter_path);
    const int64_t P1 = 0x7f1000000000, P2 = 0x7f2000000000;
    fixture_call(f, CT_API_cudaMalloc, 0, P1, 8 * MIB, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, P2, 8 * MIB, 0);
    ipc(f, CT_API_cudaIpcGetMemHandle, P1, 1, 0, 0); /* logical: in the view */
    int64_t outer = ipc(f, CT_API_cudaIpcGetMemHandle, P2, 9, 0, 0);
    ipc(f, CT_API_cudaIpcGetMemHandle, P2, 2, 0, outer);       /* inside an export: not */
    ipc(f, CT_API_cudaIpcGetMemHandle, P1, 3, 1, 0);           /* failed */
    ipc(f, CT_API_cudaIpcGetMemHandle, P1 + 4 * MIB, 4, 0, 0); /* inside P1: P1's */
    fixture_close(f);

    f = trace_of(dir, 200, &opener_path);
    const int64_t O = 0x7c0000000000;
    int64_t want[8];
    size_t nwant = 0;
    want[nwant++] = ipc(f, CT_API_cudaIpcOpenMemHandle, O, 1, 0, 0);
    ipc(f, CT_API_cudaIpcOpenMemHandle, O + 1 * (1ll << 30), 2, 0, 0); /* export not logical */
    want[nwant++] = ipc(f, CT_API_cudaIpcOpenMemHandle, O + 2 * (1ll << 30), 9, 0, 0);
    ipc(f, CT_API_cudaIpcOpenMemHandle, O + 3 * (1ll << 30), 3, 0, 0); /* export failed */
    ipc(f, CT_API_cudaIpcOpenMemHandle, O + 4 * (1ll << 30), 1, 2, 0); /* open failed */
    ipc(f, CT_API_cudaIpcOpenMemHandle, O + 5 * (1ll << 30), 0, 0, 0); /* empty handle */
    /* Damage: the parent of this open is recorded after it, an allocation
     * too. The view joins it all the same: not a logical event, no link. */
    struct fixture_event late = {.api = CT_API_cudaIpcOpenMemHandle,
                                 .device = 0,
                                 .ptr = O + 6 * (1ll << 30),
                                 .dur_ns = 100,
                                 .depth = 1,
                                 .handle = (unsigned char[64]){0xc7, 1},
                                 .handle_len = 64};
    int64_t late_seq = fixture_event(f, &late);
    fixture_exec_int(f, "UPDATE events SET parent_seq = ?1 + 1 WHERE seq = ?1", late_seq);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7e0000000000, MIB, 0);
    want[nwant++] = ipc(f, CT_API_cudaIpcOpenMemHandle, O + 7 * (1ll << 30), 4, 0, 0);
    fixture_close(f);

    int64_t view[8];
    size_t nview = view_opens(opener_path, exporter_path, view, 8);
    ck_assert_uint_eq(nview, nwant);
    for (size_t i = 0; i < nwant; i++)
        ck_assert_int_eq(view[i], want[i]);

    struct trace_set set;
    ck_assert_int_eq(trace_set_open(&set, dir), 0);
    struct gm_model m;
    ck_assert_int_eq(gm_load(&m, &set), 0);
    const struct gm_process *exporter = proc_of(&m, 100), *opener = proc_of(&m, 200);
    ck_assert_uint_eq(m.nipc_links, nwant);
    for (size_t i = 0; i < m.nipc_links; i++) {
        const struct gm_ipc_link *l = &m.ipc_links[i];
        ck_assert_ptr_eq(&m.procs[l->opener_proc], opener);
        ck_assert_ptr_eq(&m.procs[l->exporter_proc], exporter);
        int64_t seq = opener->allocs[l->opener_alloc].seq;
        size_t k = 0;
        while (k < nwant && want[k] != seq)
            k++;
        ck_assert_msg(k < nwant, "a link for open %" PRId64 " the view does not have", seq);
        /* tags 1 and 4 share P1, 9 is P2's */
        ck_assert_int_eq(exporter->allocs[l->exporter_alloc].ptr, k == 1 ? P2 : P1);
        ck_assert_int_eq(opener->allocs[l->opener_alloc].size, 8 * MIB);
    }
    gm_free(&m);
    trace_set_close(&set);
    free(exporter_path);
    free(opener_path);
    scratch_remove(dir);
}
END_TEST

/* A call of an api with no memory role (it starts nested chains). */
static int64_t plain(struct fixture *f, int64_t parent)
{
    struct fixture_event e = {.api = CT_API_cudaSetDevice,
                              .device = 0,
                              .dur_ns = 10,
                              .parent_seq = parent,
                              .depth = parent ? 1 : 0};
    return fixture_event(f, &e);
}

static int64_t alloc_in(struct fixture *f, enum ct_api api, int64_t ptr, int64_t parent)
{
    struct fixture_event e = {.api = api,
                              .device = 0,
                              .ptr = ptr,
                              .size = MIB,
                              .dur_ns = 10,
                              .parent_seq = parent,
                              .depth = parent ? 1 : 0};
    return fixture_event(f, &e);
}

static int64_t stack_of(const struct gm_process *p, int64_t seq)
{
    for (size_t i = 0; i < p->nallocs; i++)
        if (p->allocs[i].seq == seq)
            return p->allocs[i].stack_id;
    ck_abort_msg("no allocation by call %" PRId64, seq);
    return -1;
}

START_TEST(test_alloc_stack_ids)
{
    char *dir = scratch_dir();
    char *path;
    struct fixture *f = trace_of(dir, 300, &path);
    static const struct fixture_frame frames[] = {{.ip = 0x401000, .symbol = "main"}};
    for (int64_t id = 1; id <= 4; id++)
        fixture_stack(f, id, frames, 1);
    int64_t own = alloc_in(f, CT_API_cudaMalloc, 0x7f0000000000, 0);
    fixture_call_stack(f, own, 1);
    int64_t none = alloc_in(f, CT_API_cudaMalloc, 0x7f0100000000, 0);
    /* A driver allocation inside a call with a stack, two calls down. */
    int64_t top = plain(f, 0);
    fixture_call_stack(f, top, 2);
    int64_t mid = plain(f, top);
    int64_t nested = alloc_in(f, CT_API_cuMemAlloc_v2, 0x7f0200000000, mid);
    /* A nested call with a stack of its own keeps it. */
    int64_t inner = alloc_in(f, CT_API_cuMemAlloc_v2, 0x7f0300000000, top);
    fixture_call_stack(f, inner, 3);
    /* A chain of 64 calls below the one with stack 4: the allocation 63
     * calls below it has it, the one 64 below does not (the walk's limit). */
    int64_t chain = plain(f, 0);
    fixture_call_stack(f, chain, 4);
    for (int i = 1; i < 63; i++)
        chain = plain(f, chain);
    int64_t at63 = alloc_in(f, CT_API_cuMemAlloc_v2, 0x7f0400000000, chain);
    chain = plain(f, chain);
    int64_t at64 = alloc_in(f, CT_API_cuMemAlloc_v2, 0x7f0500000000, chain);
    /* Damage: a parent recorded after the call is not followed. */
    int64_t later = alloc_in(f, CT_API_cuMemAlloc_v2, 0x7f0600000000, 0);
    fixture_exec_int(f, "UPDATE events SET parent_seq = ?1 + 1, depth = 1 WHERE seq = ?1", later);
    int64_t after = plain(f, 0);
    fixture_call_stack(f, after, 1);
    fixture_close(f);

    struct trace_set set;
    ck_assert_int_eq(trace_set_open(&set, dir), 0);
    struct gm_model m;
    ck_assert_int_eq(gm_load(&m, &set), 0);
    const struct gm_process *p = proc_of(&m, 300);
    ck_assert_int_eq(stack_of(p, own), 1);
    ck_assert_int_eq(stack_of(p, none), 0);
    ck_assert_int_eq(stack_of(p, nested), 2);
    ck_assert_int_eq(stack_of(p, inner), 3);
    ck_assert_int_eq(stack_of(p, at63), 4);
    ck_assert_int_eq(stack_of(p, at64), 0);
    ck_assert_int_eq(stack_of(p, later), 0);

    /* The stacks load without the calls, and name the sites by those ids. */
    struct stack_set ss;
    ck_assert_int_eq(stacks_load((struct trace *)p->trace, NULL, &ss), 0);
    ck_assert_uint_eq(ss.nstacks, 4);
    ck_assert_ptr_nonnull(stacks_by_id(&ss, stack_of(p, nested)));
    ck_assert_ptr_null(stacks_by_id(&ss, stack_of(p, at64)));
    enum site_kind kind;
    char *site = stacks_call_site(&ss, stack_of(p, nested), "cuMemAlloc_v2", &kind, NULL);
    ck_assert_ptr_nonnull(site);
    ck_assert_int_eq(kind, SITE_NATIVE);
    free(site);
    stacks_free(&ss);
    gm_free(&m);
    trace_set_close(&set);
    free(path);
    scratch_remove(dir);
}
END_TEST

Suite *model_ipcstacks_suite(void); /* registered in test_main.c */
Suite *model_ipcstacks_suite(void)
{
    Suite *s = suite_create("model_ipcstacks");
    TCase *tc = tcase_create("pass");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ipc_links_agree_with_view);
    tcase_add_test(tc, test_alloc_stack_ids);
    suite_add_tcase(s, tc);
    return s;
}
