/*
 * test_nvtx.c - NVTX ranges and marks recorded by libcutrace.so as NVTX's
 * injection library (preload/hooks/hook_nvtx.c, docs/nvtx.md): nvtx_app
 * and its two shared objects (each initialising NVTX on its own, as NCCL
 * and libtorch do) on the fake stack; every kind of message (ASCII, wide,
 * registered), a domain "NCCL" with NCCL's extended payload, and a second
 * injection library (libnvtx_chain.so, as Nsight Systems') that must get
 * every call it would get alone, with its own handles, whether chained by
 * hand or by `cutrace run`; the toolkit's real NCCL; and the reports (timeline, budget, diff)
 * using the ranges as phases.
 */
#include <check.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

/* What nvtx_app prints with cutrace as its only NVTX tool. */
static const char ours_out[] = "push 0\npop 0\nwide push 0\nwide pop 0\nextra pop -1\nschema 0\n"
                               "nccl push 0\nnccl pop 0\na 0\nb 0\n";

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s is missing", path);
    char *buf = calloc(1, 4096);
    size_t n = fread(buf, 1, 4095, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static sqlite3 *only_trace(struct world *w)
{
    char **files;
    ck_assert_uint_eq(list_traces(w, &files), 1);
    sqlite3 *db = tsql_open(files[0], SQLITE_OPEN_READONLY);
    free_list(files, 1);
    return db;
}

static void inject(struct world *w, int slot)
{
    static char env[4200];
    snprintf(env, sizeof env, "NVTX_INJECTION64_PATH=%s", build_path("libcutrace.so"));
    w->extra_env[slot] = env;
}

/*
 * libnvtx_chain.so for the world's programs, named by `var` (NVTX's
 * NVTX_INJECTION64_PATH, or cutrace's CUTRACE_NVTX_CHAIN) in env slot
 * `slot`, reporting into the world's chain.txt (slot + 1).
 */
static void chain_env(struct world *w, const char *var, int slot)
{
    static char lib[4200], out[4200];
    snprintf(lib, sizeof lib, "%s=%s", var, build_path("progs/libnvtx_chain.so"));
    snprintf(out, sizeof out, "NVTX_CHAIN_OUT=%s/chain.txt", w->root);
    w->extra_env[slot] = lib;
    w->extra_env[slot + 1] = out;
}

/* What libnvtx_chain.so counted (malloc'd). */
static char *chain_counts(struct world *w)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/chain.txt", w->root);
    return slurp(path);
}

/* The records nvtx_app's run leaves, through the public `nvtx` view. */
static void assert_app_records(sqlite3 *db)
{
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx"), 17);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx WHERE kind = 'push'"), 5);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx WHERE kind = 'pop'"), 6);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx WHERE kind = 'mark'"), 3);
    /* The range around the first allocation, and that allocation inside it. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM calls c WHERE c.api = 'cudaMalloc'"
                                  " AND c.seq > (SELECT seq FROM nvtx WHERE message ="
                                  " 'load_weights') AND c.seq < (SELECT min(seq) FROM nvtx"
                                  " WHERE kind = 'pop')"),
                     1);
    ck_assert_str_eq(tsql_text(db, "SELECT message FROM nvtx WHERE kind = 'mark' ORDER BY seq"),
                     "weights ready");
    ck_assert_str_eq(tsql_text(db, "SELECT message FROM nvtx WHERE message LIKE 'd%codage'"),
                     "d\xc3\xa9"
                     "codage");
    /* A start/end range: one id, its color and payload. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(DISTINCT range_id) FROM nvtx WHERE kind IN"
                                  " ('start', 'end')"),
                     1);
    ck_assert_int_eq(tsql_int(db, "SELECT color FROM nvtx WHERE message = 'warmup'"), 0xff00ff00);
    ck_assert_int_eq(tsql_int(db, "SELECT payload FROM nvtx WHERE message = 'warmup'"), 7);
    /* A pop with nothing pushed: NVTX's error level. */
    ck_assert_int_eq(tsql_int(db, "SELECT min(level) FROM nvtx WHERE kind = 'pop'"), -1);
    /* The domain, a registered message and NCCL's payload decoded. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx WHERE kind = 'domain'"
                                  " AND message = 'NCCL'"),
                     1);
    ck_assert_str_eq(tsql_text(db, "SELECT message || ' ' || nccl_comm_hash || ' ' || nccl_bytes"
                                   " FROM nvtx WHERE domain = 'NCCL' AND kind = 'push'"),
                     "ncclAllReduce 000000001234abcd 4096");
    /* Each shared object's ranges, from its own NVTX initialisation. */
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx n JOIN calls c USING (seq)"
                                  " WHERE c.module LIKE '%/libnvtx_a.so'"),
                     3);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx n JOIN calls c USING (seq)"
                                  " WHERE c.module LIKE '%/libnvtx_b.so' AND n.message ="
                                  " 'nvtx_b_work'"),
                     1);
}

START_TEST(test_ranges_recorded)
{
    struct world w;
    world_init(&w);
    inject(&w, 0);
    const char *argv[] = {build_path("progs/nvtx_app"), NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_msg(r.status == 0, "nvtx_app: %s", r.err);
    ck_assert_str_eq(r.out, ours_out);
    ck_assert_msg(r.err_len == 0, "stderr: %s", r.err);
    sqlite3 *db = only_trace(&w);
    assert_app_records(db);
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* Without cutrace the program runs as ever (NVTX a no-op), with no trace. */
START_TEST(test_untraced_unchanged)
{
    struct world w;
    world_init(&w);
    const char *argv[] = {build_path("progs/nvtx_app"), NULL};
    struct run r = run_prog(&w, false, argv, 60);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_eq(count_lines(r.out), 10);
    char **files;
    ck_assert_uint_eq(list_traces(&w, &files), 0);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* The chained tool's view of a run: its own output file and the program's stdout. */
struct tool_view {
    char *counts, *out;
};

static struct tool_view chain_alone(void)
{
    struct world w;
    world_init(&w);
    chain_env(&w, "NVTX_INJECTION64_PATH", 0);
    const char *argv[] = {build_path("progs/nvtx_app"), NULL};
    struct run r = run_prog(&w, false, argv, 60);
    ck_assert_int_eq(r.status, 0);
    struct tool_view v = {chain_counts(&w), strdup(r.out)};
    /* Every callback reached it, through three NVTX initialisations. */
    ck_assert_str_eq(v.counts, "inits=3 pushes=5 pops=6 marks=3 starts=1 ends=1 domains=1 "
                               "strings=1 payloads=1 names=2 extensions=1 bad=0\n");
    run_free(&r);
    world_free(&w);
    return v;
}

START_TEST(test_chained_by_hand)
{
    struct tool_view alone = chain_alone();
    struct world w;
    world_init(&w);
    inject(&w, 0);
    chain_env(&w, "CUTRACE_NVTX_CHAIN", 1);
    const char *argv[] = {build_path("progs/nvtx_app"), NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_msg(r.status == 0, "nvtx_app: %s", r.err);
    /* The program and the tool see exactly what they see without cutrace. */
    ck_assert_str_eq(r.out, alone.out);
    char *counts = chain_counts(&w);
    ck_assert_str_eq(counts, alone.counts);
    ck_assert_msg(r.err_len == 0, "stderr: %s", r.err);
    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx"), 17);
    ck_assert_str_eq(tsql_text(db, "SELECT nccl_comm_hash FROM nvtx WHERE domain = 'NCCL'"
                                   " AND kind = 'push'"),
                     "000000001234abcd");
    sqlite3_close(db);
    free(counts);
    free(alone.counts);
    free(alone.out);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* A chain that is no injection library: one warning, cutrace records as alone. */
START_TEST(test_chain_unusable)
{
    struct world w;
    world_init(&w);
    inject(&w, 0);
    w.extra_env[1] = "CUTRACE_NVTX_CHAIN=/nonexistent/libnothing.so";
    const char *argv[] = {build_path("progs/nvtx_app"), NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, ours_out);
    ck_assert_uint_eq(count_occurrences(r.err, "cutrace: CUTRACE_NVTX_CHAIN="), 1);
    ck_assert_uint_eq(count_lines(r.err), 1);
    sqlite3 *db = only_trace(&w);
    assert_app_records(db);
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* The one trace of a `cutrace run` into the world's trace directory. */
static sqlite3 *run_trace(struct world *w)
{
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s/run-*/*.db", w->trace_dir);
    glob_t g;
    ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
    ck_assert_uint_eq(g.gl_pathc, 1);
    sqlite3 *db = tsql_open(g.gl_pathv[0], SQLITE_OPEN_READONLY);
    globfree(&g);
    return db;
}

/* `cutrace run` makes libcutrace.so NVTX's injection library by itself. */
START_TEST(test_cutrace_run_injects)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "NVTX_INJECTION64_PATH="; /* unset */
    const char *args[] = {"run", "-o", w.trace_dir, "--", build_path("progs/nvtx_app"), NULL};
    struct run r = harness_cutrace(&w, args);
    ck_assert_msg(r.status == 0, "cutrace run: %s", r.err);
    ck_assert_str_eq(r.out, ours_out);
    ck_assert_uint_eq(count_occurrences(r.err, "NVTX"), 0);
    sqlite3 *db = run_trace(&w);
    assert_app_records(db);
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* A tool already set is chained, with one note, and gets every call. */
START_TEST(test_cutrace_run_chains)
{
    struct tool_view alone = chain_alone();
    struct world w;
    world_init(&w);
    chain_env(&w, "NVTX_INJECTION64_PATH", 0);
    const char *args[] = {"run", "-o", w.trace_dir, "--", build_path("progs/nvtx_app"), NULL};
    struct run r = harness_cutrace(&w, args);
    ck_assert_msg(r.status == 0, "cutrace run: %s", r.err);
    ck_assert_str_eq(r.out, alone.out);
    ck_assert_uint_eq(count_occurrences(r.err, "cutrace: NVTX_INJECTION64_PATH was "), 1);
    char *counts = chain_counts(&w);
    ck_assert_str_eq(counts, alone.counts);
    sqlite3 *db = run_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx"), 17);
    sqlite3_close(db);
    free(counts);
    free(alone.counts);
    free(alone.out);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* A JSON report's milestone names on its first GPU, one per line. */
static char *milestone_names(const char *json)
{
    sqlite3 *db = tsql_open(":memory:", SQLITE_OPEN_READWRITE);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT group_concat(json_extract(value, '$.name'), '|')"
                                        " FROM json_each(?1, '$.gpus[0].milestones')",
                                        -1, &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(q, 1, json, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    char *names = strdup((const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    sqlite3_close(db);
    return names;
}

/*
 * The reports use the ranges: the timeline names them (NCCL's own domain
 * left out), the budget takes the range that names the weights for its
 * pre and post, and a diff of two runs aligns them by name.
 */
START_TEST(test_reports_use_phases)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "NVTX_INJECTION64_PATH=";
    const char *run[] = {"run", "-o", w.trace_dir, "--", build_path("progs/nvtx_app"), NULL};
    struct run r = harness_cutrace(&w, run);
    ck_assert_int_eq(r.status, 0);
    run_free(&r);
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s/run-*", w.trace_dir);
    glob_t g;
    ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
    ck_assert_uint_eq(g.gl_pathc, 1);
    char *dir = strdup(g.gl_pathv[0]);
    globfree(&g);

    const char *timeline[] = {"timeline", "--json", dir, NULL};
    r = harness_cutrace(&w, timeline);
    ck_assert_msg(r.status == 0, "timeline: %s", r.err);
    char *names = milestone_names(r.out);
    ck_assert_msg(strstr(names, "|NVTX load_weights 1 begins|weight burst begins|weight burst "
                                "ends|NVTX load_weights 1 ends|measurement 2|NVTX mark weights "
                                "ready 1|NVTX warmup 1 begins|NVTX warmup 1 ends|") != NULL,
                  "%s", names);
    ck_assert_msg(strstr(names, "|NVTX nvtx_b_work 1 begins|NVTX mark nvtx_b_mark 1|") != NULL,
                  "%s", names);
    ck_assert_msg(strstr(names, "ncclAllReduce") == NULL, "%s", names);
    run_free(&r);

    sqlite3 *db = run_trace(&w);
    int64_t pre = tsql_int(db, "SELECT max(seq) FROM meminfo WHERE seq < (SELECT seq FROM nvtx"
                               " WHERE message = 'load_weights')");
    int64_t post = tsql_int(db, "SELECT min(seq) FROM meminfo WHERE seq > (SELECT min(seq) FROM"
                                " nvtx WHERE kind = 'pop')");
    sqlite3_close(db);
    /* 1 MiB of weights: far below the default burst minimum, named all the same. */
    const char *budget[] = {"budget", "--framework", "sglang", "--json", dir, NULL};
    r = harness_cutrace(&w, budget);
    ck_assert_msg(r.status == 0, "budget: %s", r.err);
    ck_assert_int_eq(report_json_int(r.out, "$.jobs[0].ranks[0].pre.seq"), pre);
    ck_assert_int_eq(report_json_int(r.out, "$.jobs[0].ranks[0].post.seq"), post);
    run_free(&r);

    /* A second run, the same program: every phase in both, in step. */
    char *other_root;
    ck_assert_int_ge(asprintf(&other_root, "%s/other", w.root), 0);
    const char *again[] = {"run", "-o", other_root, "--", build_path("progs/nvtx_app"), NULL};
    r = harness_cutrace(&w, again);
    ck_assert_int_eq(r.status, 0);
    run_free(&r);
    snprintf(pattern, sizeof pattern, "%s/run-*", other_root);
    ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
    const char *diff[] = {"diff", "--json", dir, g.gl_pathv[0], NULL};
    r = harness_cutrace(&w, diff);
    globfree(&g);
    ck_assert_msg(r.status == 0, "diff: %s", r.err);
    char *step = report_json_text(r.out, "$.alignment[0].steps[2].milestone");
    ck_assert_str_eq(step, "NVTX load_weights 1 begins");
    char *b = report_json_text(r.out, "$.alignment[0].steps[2].other.label");
    ck_assert_str_eq(b, "NVTX load_weights 1 begins");
    free(step);
    free(b);
    run_free(&r);
    free(other_root);
    free(names);
    free(dir);
    world_free(&w);
}
END_TEST

/* Past the fixed tables: the overflow entries name what cutrace could not keep. */
START_TEST(test_tables_full)
{
    struct world w;
    world_init(&w);
    inject(&w, 0);
    const char *argv[] = {build_path("progs/nvtx_app"), "many", NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_msg(r.status == 0, "nvtx_app many: %s", r.err);
    ck_assert_str_eq(r.out, "many done\n");
    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT count(DISTINCT domain_id) FROM nvtx WHERE kind ="
                                  " 'domain'"),
                     257);
    ck_assert_str_eq(tsql_text(db, "SELECT domain || ': ' || message FROM nvtx WHERE kind ="
                                   " 'mark'"),
                     "(more NVTX domains than cutrace keeps): (more NVTX strings than cutrace "
                     "keeps)");
    ck_assert_int_eq(tsql_int(db, "SELECT cut FROM nvtx WHERE kind = 'mark'"), 1);
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* Past the tables a chained tool still gets its own handles for every
 * domain and string, as alone; cutrace records the overflow names. */
START_TEST(test_tables_full_chained)
{
    static const char alone[] = "inits=1 pushes=0 pops=0 marks=0 starts=0 ends=0 domains=300 "
                                "strings=5000 payloads=0 names=0 extensions=0 bad=0\n";
    const char *argv[] = {build_path("progs/nvtx_app"), "many", NULL};
    for (int traced = 0; traced < 2; traced++) {
        struct world w;
        world_init(&w);
        if (traced) {
            inject(&w, 0);
            chain_env(&w, "CUTRACE_NVTX_CHAIN", 1);
        } else {
            chain_env(&w, "NVTX_INJECTION64_PATH", 0);
        }
        struct run r = run_prog(&w, traced, argv, 60);
        ck_assert_msg(r.status == 0, "nvtx_app many: %s", r.err);
        char *counts = chain_counts(&w);
        ck_assert_str_eq(counts, alone);
        free(counts);
        if (traced) {
            sqlite3 *db = only_trace(&w);
            ck_assert_str_eq(tsql_text(db, "SELECT message FROM nvtx WHERE kind = 'mark'"),
                             "(more NVTX strings than cutrace keeps)");
            sqlite3_close(db);
        }
        run_free(&r);
        world_free(&w);
    }
}
END_TEST

/* Threads pushing and popping at once: each gets its own levels, and every
 * range pairs with its own thread's pop (the timeline's begins and ends). */
START_TEST(test_threads)
{
    struct world w;
    world_init(&w);
    inject(&w, 0);
    const char *argv[] = {build_path("progs/nvtx_app"), "threads", NULL};
    struct run r = run_prog(&w, true, argv, 60);
    ck_assert_msg(r.status == 0, "nvtx_app threads: %s", r.err);
    ck_assert_str_eq(r.out, "threads wrong levels 0\n");
    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx WHERE kind = 'push'"), 8000);
    ck_assert_int_eq(tsql_int(db, "SELECT count(DISTINCT tid) FROM nvtx"), 4);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM (SELECT tid FROM nvtx WHERE kind = 'push'"
                                  " AND message LIKE 't_' GROUP BY tid HAVING count(*) = 1000"
                                  " AND count(DISTINCT message) = 1)"),
                     4);
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* A run inside a run finds libcutrace.so there already: no chain, no note. */
START_TEST(test_cutrace_run_nested)
{
    struct world w;
    world_init(&w);
    inject(&w, 0);
    const char *args[] = {"run", "-o", w.trace_dir, "--", build_path("progs/nvtx_app"), NULL};
    struct run r = harness_cutrace(&w, args);
    ck_assert_msg(r.status == 0, "cutrace run: %s", r.err);
    ck_assert_str_eq(r.out, ours_out);
    ck_assert_uint_eq(count_occurrences(r.err, "NVTX"), 0);
    sqlite3 *db = run_trace(&w);
    assert_app_records(db);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM env WHERE name = 'CUTRACE_NVTX_CHAIN'"), 0);
    sqlite3_close(db);
    run_free(&r);
    world_free(&w);
}
END_TEST

/* The toolkit's real NCCL (built on nvtx3.hpp: its domain, registered
 * strings) initialises NVTX on its own: its ranges are recorded, nested in
 * the NCCL call that made them, and the program sees what it sees untraced. */
START_TEST(test_real_nccl_ranges)
{
    struct world w;
    world_init(&w);
    w.extra_env[0] = "LD_LIBRARY_PATH="; /* no driver: NCCL answers, its init fails */
    inject(&w, 1);
    const char *argv[] = {build_path("progs/real_toolkit"), NULL};
    struct run plain = run_prog(&w, false, argv, 60);
    struct run traced = run_prog(&w, true, argv, 60);
    ck_assert_int_eq(traced.status, plain.status);
    ck_assert_str_eq(traced.out, plain.out);
    sqlite3 *db = only_trace(&w);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx WHERE kind = 'domain' AND message ="
                                  " 'NCCL'"),
                     1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx n JOIN calls c ON c.seq ="
                                  " n.parent_seq WHERE n.kind = 'push' AND n.domain = 'NCCL'"
                                  " AND n.message = 'ncclCommInitRank'"
                                  " AND c.api = 'ncclCommInitRank'"),
                     1);
    ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM nvtx n JOIN calls c USING (seq)"
                                  " WHERE coalesce(c.module, '') NOT LIKE '%libnccl.so%'"),
                     0);
    sqlite3_close(db);
    run_free(&plain);
    run_free(&traced);
    world_free(&w);
}
END_TEST

Suite *nvtx_suite(void)
{
    Suite *s = suite_create("nvtx");
    TCase *tc = tcase_create("nvtx");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ranges_recorded);
    tcase_add_test(tc, test_untraced_unchanged);
    tcase_add_test(tc, test_chained_by_hand);
    tcase_add_test(tc, test_chain_unusable);
    tcase_add_test(tc, test_cutrace_run_injects);
    tcase_add_test(tc, test_cutrace_run_chains);
    tcase_add_test(tc, test_reports_use_phases);
    tcase_add_test(tc, test_tables_full);
    tcase_add_test(tc, test_tables_full_chained);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_cutrace_run_nested);
    tcase_add_test(tc, test_real_nccl_ranges);
    suite_add_tcase(s, tc);
    return s;
}
