/*
 * test_budget_paths.c - the `budget_paths` suite: `cutrace budget` replays
 * each SGLang code path as SGLang computes it, bit for bit. Every scenario
 * is a start-up of tests/progs/sglang_sim.py (a launcher that never calls
 * CUDA, one scheduler process per TP rank started with multiprocessing
 * spawn, F and the rest only on the launcher's command line; SGLang's
 * functions in SGLang's files, tests/progs/sglang_releases/), traced on the
 * fake GPU stack; the sim prints the numbers it computed with SGLang's own
 * arithmetic, and the report must hold the same doubles, tokens, verdict
 * and message text, and say which path it replayed, found in the trace.
 *
 * Each scenario runs on the oldest and the newest CPython pythons.sh finds
 * (an absent one is said "skipped"). Three tests read one run (kept in the
 * suite's directory, made once, whichever test comes first): the
 * measurements (pre, post, where F came from), the verdict (rest, tokens,
 * fits, the text), the replay's own fields (the server and path and where
 * they came from, the error type, the multimodal reserve, the bytes, the
 * cell size, the profiled tokens, the KV pool's check).
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "pythons.h"
#include "suites.h"

#define MAX_PYTHONS 8
#define RUNS_PER    2 /* interpreters per scenario: the oldest and the newest */
#define MAX_FLAGS   16

/* What a scenario must exercise in the sim's own numbers, so that a change
 * of the fake stack's sizes cannot turn it into another scenario unseen. */
enum premise {
    FITS,            /* nothing more than fitting */
    PAGE_FLOOR,      /* the page floor took tokens off */
    FAILS_AT_PAGE,   /* rest > 0 buys less than one page: RuntimeError */
    REST_NEGATIVE,   /* rest <= 0: the current path's ValueError */
    CAPPED,          /* --max-total-tokens took tokens off */
    FLOAT32_MIN,     /* the MIN's free bytes are not a float32 */
    DRAFT_CELL,      /* the draft's layers scale the cell */
    MM_RESERVE,      /* the multimodal reserve is subtracted */
    ALLOC_AFTER_LOAD /* memory made after load_model's last measurement */
};

struct scenario {
    const char *name;
    const char *flags[MAX_FLAGS]; /* the launcher's, after the program; NULL-ended */
    const char *fraction;         /* its --mem-fraction-static, as written there */
    int64_t cell_size;            /* the target's cell, for --cell-size */
    int num_layers, draft_layers; /* for --num-layers / --draft-num-layers; 0: none */
    bool multimodal;              /* --multimodal */
    const char *env;              /* VAR=VALUE in the run's environment, NULL: none */
    const char *path;             /* server.path */
    const char *error_type;       /* NULL: it fits */
    enum premise premise;
};

#define OLDER        "--sim-sglang-path", "older"
#define CURRENT      "--sim-sglang-path", "current"
#define F(x)         "--mem-fraction-static", x
#define MLA4         4608  /* 4 layers x 1152 B (MLA, 576 bf16 per token) */
#define MHA4         9216  /* 4 layers x K and V x 1152 B */
#define MLA61        70272 /* 61 layers x 1152 B: DeepSeek-V3's cell */
#define OLDER_PATH   "sglang-older"
#define CURRENT_PATH "sglang-current"
/* Rank 1 finds 5 MiB + 777 B of its GPU taken: the ranks' free bytes
 * differ and the MIN is rank 1's. */
#define TP2 "--tp", "2", "--occupied-bytes-per-rank", "5243657"

/* One scenario a row or two. */
/* clang-format off */
static const struct scenario scenarios[] = {
    {.name = "older_page1", .flags = {OLDER, F("0.5")}, .fraction = "0.5", .cell_size = MLA4,
     .path = OLDER_PATH},
    {.name = "older_tp2", .flags = {OLDER, F("0.5"), TP2}, .fraction = "0.5", .cell_size = MLA4,
     .path = OLDER_PATH, .premise = FLOAT32_MIN},
    {.name = "current_page1", .flags = {CURRENT, F("0.5")}, .fraction = "0.5", .cell_size = MLA4,
     .path = CURRENT_PATH},
    {.name = "current_page64_mha",
     .flags = {CURRENT, F("0.5"), "--page-size", "64", "--attention", "mha"},
     .fraction = "0.5", .cell_size = MHA4, .path = CURRENT_PATH,
     .premise = PAGE_FLOOR},
    {.name = "current_page4096",
     .flags = {CURRENT, F("0.18"), "--page-size", "4096", "--num-layers", "61"},
     .fraction = "0.18", .cell_size = MLA61, .path = CURRENT_PATH, .error_type = "RuntimeError",
     .premise = FAILS_AT_PAGE},
    {.name = "current_cap",
     .flags = {CURRENT, F("0.5"), "--page-size", "64", "--max-total-tokens", "100000"},
     .fraction = "0.5", .cell_size = MLA4, .path = CURRENT_PATH, .premise = CAPPED},
    {.name = "current_value_error", .flags = {CURRENT, F("0.1")}, .fraction = "0.1",
     .cell_size = MLA4, .path = CURRENT_PATH, .error_type = "ValueError",
     .premise = REST_NEGATIVE},
    {.name = "current_eagle",
     .flags = {CURRENT, F("0.5"), "--speculative-algorithm", "EAGLE",
               "--speculative-draft-layers", "1"},
     .fraction = "0.5", .cell_size = MLA4, .num_layers = 4, .draft_layers = 1,
     .path = CURRENT_PATH, .premise = DRAFT_CELL},
    {.name = "current_alloc_after_load",
     .flags = {CURRENT, F("0.5"), "--alloc-after-load-mib", "256"}, .fraction = "0.5",
     .cell_size = MLA4, .path = CURRENT_PATH, .premise = ALLOC_AFTER_LOAD},
    {.name = "current_multimodal", .flags = {CURRENT, F("0.5"), "--multimodal-sim"},
     .fraction = "0.5", .cell_size = MLA4, .multimodal = true, .path = CURRENT_PATH,
     .premise = MM_RESERVE},
    {.name = "current_multimodal_env", .flags = {CURRENT, F("0.5"), "--multimodal-sim"},
     .fraction = "0.5", .cell_size = MLA4, .multimodal = true,
     .env = "SGLANG_VLM_CACHE_SIZE_MB=300", .path = CURRENT_PATH,
     .premise = MM_RESERVE},
    {.name = "current_tp2", .flags = {CURRENT, F("0.5"), TP2}, .fraction = "0.5",
     .cell_size = MLA4, .path = CURRENT_PATH, .premise = FLOAT32_MIN},
};
/* clang-format on */
#define NSCENARIOS (sizeof scenarios / sizeof scenarios[0])

/* ---- the interpreters and the suite's directory ---- */

static struct python pythons[MAX_PYTHONS];
static size_t npythons;
static char pythons_note[4096];
static char suite_dir[4096]; /* the runs, one directory each; made by the fixture */

/* The index-th interpreter of the two each scenario runs on, or NULL (said). */
static const struct python *run_python(size_t index)
{
    if (index == 0 && npythons > 0)
        return &pythons[0];
    if (index == 1 && npythons > 1)
        return &pythons[npythons - 1];
    fprintf(stderr, "budget_paths: skipped: %s (%s)\n",
            index == 0 ? "no CPython 3.10 or later to run on" : "no second CPython to run on",
            pythons_note[0] ? pythons_note : "pythons.sh found one");
    return NULL;
}

static void make_suite_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(suite_dir, sizeof suite_dir, "%s/cutrace-paths-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(suite_dir)) {
        fprintf(stderr, "budget_paths: mkdtemp %s: %s\n", suite_dir, strerror(errno));
        suite_dir[0] = '\0';
    }
}

static void remove_suite_dir(void)
{
    if (suite_dir[0])
        tsql_rmtree(suite_dir);
}

/* ---- one run of a scenario ---- */

struct sim_run {
    struct world w;
    char *server; /* the launcher's "server: " line: rank 0's JSON */
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, out);
    fclose(f);
    fclose(out);
    return text;
}

/* The JSON after "server: " on the last such line of the launcher's stdout. */
static char *server_line(const char *out)
{
    const char *at = NULL;
    for (const char *p = out; (p = strstr(p, "server: ")) != NULL; p++)
        if (p == out || p[-1] == '\n')
            at = p;
    if (!at)
        return NULL;
    at += strlen("server: ");
    return strndup(at, strcspn(at, "\n"));
}

/* The raw JSON text at path (SQLite's ->: the number as written, so that
 * strtod reads the very digits); NULL when absent, "null" for JSON null. */
static char *json_raw(const char *json, const char *path)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT ?1 -> ?2", -1, &q, NULL), SQLITE_OK);
    sqlite3_bind_text(q, 1, json, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, path, -1, SQLITE_STATIC);
    ck_assert_msg(sqlite3_step(q) == SQLITE_ROW, "%s: %s in:\n%.2000s", path, sqlite3_errmsg(db),
                  json);
    const char *v = (const char *)sqlite3_column_text(q, 0);
    char *out = v ? strdup(v) : NULL;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return out;
}

static bool json_is_null(const char *json, const char *path)
{
    char *raw = json_raw(json, path);
    bool null = !raw || strcmp(raw, "null") == 0;
    free(raw);
    return null;
}

static double json_double(const char *json, const char *path)
{
    char *raw = json_raw(json, path);
    ck_assert_msg(raw && strcmp(raw, "null") != 0, "%s is absent or null in:\n%.3000s", path, json);
    char *end;
    double v = strtod(raw, &end);
    ck_assert_msg(*end == '\0', "%s is %s, not a number", path, raw);
    free(raw);
    return v;
}

static const char *scenario_label(const struct scenario *s, const struct python *py)
{
    static char label[128];
    snprintf(label, sizeof label, "%s on CPython %s", s->name, py->version);
    return label;
}

/* The premise of the scenario, in the sim's own numbers. */
static void check_premise(const struct scenario *s, const struct python *py, const char *sim)
{
    const char *label = scenario_label(s, py);
    char *fits_text = json_raw(sim, "$.fits");
    bool fits = fits_text && strcmp(fits_text, "true") == 0;
    free(fits_text);
    ck_assert_msg(fits == (s->error_type == NULL), "%s: the sim %s: %s", label,
                  fits ? "fits" : "does not fit", sim);
    if (s->error_type) {
        char *type = report_json_text(sim, "$.error_type");
        ck_assert_msg(type && strcmp(type, s->error_type) == 0, "%s: the sim raised %s: %s", label,
                      type ? type : "nothing", sim);
        free(type);
    }
    double rest = json_double(sim, "$.rest_gib");
    switch (s->premise) {
    case FITS:
        break;
    case PAGE_FLOOR:
    case CAPPED:
        ck_assert_msg(report_json_int(sim, "$.tokens") < report_json_int(sim, "$.tokens_profiled"),
                      "%s: neither the cap nor the page took tokens off: %s", label, sim);
        break;
    case FAILS_AT_PAGE:
        ck_assert_msg(rest > 0 && report_json_int(sim, "$.tokens") == 0,
                      "%s: not a rest > 0 that buys no page: %s", label, sim);
        break;
    case REST_NEGATIVE:
        ck_assert_msg(rest <= 0, "%s: rest is positive: %s", label, sim);
        break;
    case FLOAT32_MIN: {
        double pre = json_double(sim, "$.pre_gib") * 1073741824.0;
        ck_assert_msg(pre != (double)report_json_int(sim, "$.pre_free_bytes"),
                      "%s: the MIN's free bytes are a float32, nothing is rounded: %s", label, sim);
        break;
    }
    case DRAFT_CELL:
        ck_assert_msg(report_json_int(sim, "$.cell_size") > s->cell_size,
                      "%s: the draft did not scale the cell: %s", label, sim);
        break;
    case MM_RESERVE:
        ck_assert_msg(json_double(sim, "$.mm_reserve_gib") > 0, "%s: no reserve: %s", label, sim);
        break;
    case ALLOC_AFTER_LOAD:
        ck_assert_msg(rest > 0, "%s: does not fit: %s", label, sim);
        break;
    }
}

/* The scenario's run on py, made now unless an earlier test of this suite
 * made it: its directory has the sim's line only when the run was whole. */
static struct sim_run sim_run(const struct scenario *s, const struct python *py)
{
    ck_assert_msg(suite_dir[0], "budget_paths: the suite has no directory");
    struct sim_run run = {0};
    struct world *w = &run.w;
    ck_assert_int_ge(asprintf(&w->root, "%s/%s-%s", suite_dir, s->name, py->version), 0);
    ck_assert_int_ge(asprintf(&w->trace_dir, "%s/trace", w->root), 0);
    ck_assert_int_ge(asprintf(&w->state, "%s/gpu-state", w->root), 0);
    w->cwd = strdup(w->root);
    w->extra_env[0] = "CUTRACE_FAKE_GPU_MEM=8G";
    /* A context whose size is no whole KiB, as a real one: free bytes a
     * float32 cannot hold. */
    w->extra_env[1] = "CUTRACE_FAKE_CTX_MEM=537883457";
    w->extra_env[2] = "CUTRACE_FAKE_NCCL_TIMEOUT=30"; /* a rank that died fails the others soon */
    w->extra_env[3] = "SGLANG_VLM_CACHE_SIZE_MB=";    /* SGLang's default reserve, */
    w->extra_env[4] = s->env; /* unless the scenario sets it (the trace records it) */
    char line_file[4200];
    snprintf(line_file, sizeof line_file, "%s/server.json", w->root);
    run.server = slurp(line_file);
    if (run.server)
        return run;

    tsql_rmtree(w->root);
    ck_assert_int_eq(mkdir(w->root, 0700), 0);
    const char *argv[MAX_FLAGS + 3] = {py->path, source_path("tests/progs/sglang_sim.py")};
    for (size_t i = 0; i < MAX_FLAGS && s->flags[i]; i++)
        argv[i + 2] = s->flags[i];
    struct run r = run_prog(w, true, argv, 120);
    run.server = server_line(r.out);
    ck_assert_msg(run.server, "%s: no \"server: \" line (exit %d):\n%s\n%s", scenario_label(s, py),
                  r.status, r.out, r.err);
    /* SGLang that raises exits non-zero, and so does its launcher. */
    ck_assert_msg(r.status == (s->error_type ? 1 : 0), "%s: the launcher exited %d:\n%s",
                  scenario_label(s, py), r.status, r.err);
    run_free(&r);
    check_premise(s, py, run.server);
    FILE *f = fopen(line_file, "w");
    ck_assert_ptr_nonnull(f);
    fputs(run.server, f);
    ck_assert_int_eq(fclose(f), 0);
    return run;
}

static void sim_run_free(struct sim_run *run)
{
    free(run->server);
    free(run->w.root);
    free(run->w.trace_dir);
    free(run->w.state);
    free(run->w.cwd);
}

/* `cutrace budget --json --cell-size C` of the run, with --framework
sglang (framework) or without (the trace must tell), with the options of
the scenario's replay (replay) or only those the budget has long had. Its
stdout (malloc'd); fails unless it exits 0. */
static char *budget_json(struct sim_run *run, const struct scenario *s, bool replay, bool framework)
{
    char cell[32], layers[16], draft[16];
    snprintf(cell, sizeof cell, "%" PRId64, s->cell_size);
    snprintf(layers, sizeof layers, "%d", s->num_layers);
    snprintf(draft, sizeof draft, "%d", s->draft_layers);
    const char *argv[16] = {build_path("cutrace"), "budget", "--json", "--cell-size", cell};
    size_t n = 5;
    if (framework) {
        argv[n++] = "--framework";
        argv[n++] = "sglang";
    }
    if (replay && s->draft_layers) {
        argv[n++] = "--num-layers";
        argv[n++] = layers;
        argv[n++] = "--draft-num-layers";
        argv[n++] = draft;
    }
    if (replay && s->multimodal)
        argv[n++] = "--multimodal";
    argv[n++] = run->w.trace_dir;
    struct run r = run_prog(&run->w, false, argv, 120);
    ck_assert_msg(r.status == 0, "%s: cutrace budget exited %d:\n%s", s->name, r.status, r.err);
    char *out = strdup(r.out);
    run_free(&r);
    return out;
}

/* The same double in the sim's line and the report, to the bit. */
static void assert_same_double(const char *label, const char *sim, const char *sim_path,
                               const char *report, const char *report_path)
{
    double a = json_double(sim, sim_path), b = json_double(report, report_path);
    ck_assert_msg(a == b, "%s: %s: the server computed %.17g (%a), cutrace %s = %.17g (%a)", label,
                  sim_path + 2, a, a, report_path, b, b);
}

static void assert_same_int(const char *label, const char *sim, const char *sim_path,
                            const char *report, const char *report_path)
{
    int64_t a = report_json_int(sim, sim_path), b = report_json_int(report, report_path);
    ck_assert_msg(a == b, "%s: %s: the server computed %" PRId64 ", cutrace %s = %" PRId64, label,
                  sim_path + 2, a, report_path, b);
}

/* True when the server has no value at sim_path: then the report must say
 * null there too. */
static bool both_null(const char *label, const char *sim, const char *sim_path, const char *report,
                      const char *report_path)
{
    if (!json_is_null(sim, sim_path))
        return false;
    char *raw = json_raw(report, report_path);
    ck_assert_msg(raw && strcmp(raw, "null") == 0, "%s: the server has no %s, cutrace %s = %s",
                  label, sim_path + 2, report_path, raw ? raw : "(absent)");
    free(raw);
    return true;
}

static void assert_same_int_or_null(const char *label, const char *sim, const char *sim_path,
                                    const char *report, const char *report_path)
{
    if (!both_null(label, sim, sim_path, report, report_path))
        assert_same_int(label, sim, sim_path, report, report_path);
}

static void assert_same_double_or_null(const char *label, const char *sim, const char *sim_path,
                                       const char *report, const char *report_path)
{
    if (!both_null(label, sim, sim_path, report, report_path))
        assert_same_double(label, sim, sim_path, report, report_path);
}

static void assert_text(const char *label, const char *report, const char *path, const char *want)
{
    char *got = report_json_text(report, path);
    ck_assert_msg(got && want && strcmp(got, want) == 0, "%s: %s is \"%s\", the server's is \"%s\"",
                  label, path, got ? got : "(null)", want ? want : "(null)");
    free(got);
}

/* One test's scenario on one interpreter, its run and the report. */
struct paths_case {
    const struct scenario *s;
    const struct python *py;
    const char *label;
    struct sim_run run;
    char *report;
};

/* Test index -> scenario and interpreter, the run, and the report: with the
 * replay's options and no --framework (replay), or with --framework sglang
 * and the long-standing options; false when there is no interpreter for it
 * (said). */
static bool case_open(int index, bool replay, struct paths_case *c)
{
    c->s = &scenarios[(size_t)index / RUNS_PER];
    c->py = run_python((size_t)index % RUNS_PER);
    if (!c->py)
        return false;
    c->label = scenario_label(c->s, c->py);
    c->run = sim_run(c->s, c->py);
    c->report = budget_json(&c->run, c->s, replay, !replay);
    return true;
}

static void case_close(struct paths_case *c)
{
    free(c->report);
    sim_run_free(&c->run);
}

/* check on the index-th test's case, unless it has no interpreter. */
static void run_case(int index, bool replay, void (*check)(struct paths_case *))
{
    struct paths_case c;
    if (!case_open(index, replay, &c))
        return;
    check(&c);
    case_close(&c);
}

/* ---- the tests ---- */

/* pre, post and F as the server had them: the measurements found by its
 * Python functions, the float32 MIN over the ranks, F from the launcher. */
static void check_measurements(struct paths_case *c)
{
    const struct scenario *s = c->s;
    const char *label = c->label, *report = c->report, *sim = c->run.server;

    assert_text(label, report, "$.parameters.mem_fraction_static_source", "cmdline");
    assert_text(label, report, "$.parameters.source_process", "launcher");
    ck_assert_msg(json_double(report, "$.parameters.mem_fraction_static") ==
                      strtod(s->fraction, NULL),
                  "%s: F is not the launcher's %s", label, s->fraction);
    assert_same_double(label, sim, "$.pre_gib", report, "$.jobs[0].pre_gib");
    assert_same_double(label, sim, "$.post_gib", report, "$.jobs[0].post_gib");
    assert_same_int(label, sim, "$.pre_free_bytes", report, "$.jobs[0].min_pre_free_bytes");
    assert_same_int(label, sim, "$.post_free_bytes", report, "$.jobs[0].min_post_free_bytes");
}

START_TEST(test_measurements)
{
    run_case(_i, false, check_measurements);
}
END_TEST

/* rest, the tokens, fits and the verdict's text: SGLang's message, or
 * "fits: N tokens". */
static void check_verdict(struct paths_case *c)
{
    const char *label = c->label, *report = c->report, *sim = c->run.server;

    assert_same_double(label, sim, "$.rest_gib", report, "$.jobs[0].rest_gib");
    if (!json_is_null(sim, "$.tokens"))
        assert_same_int(label, sim, "$.tokens", report, "$.jobs[0].tokens");
    char *sim_fits = json_raw(sim, "$.fits"), *fits = json_raw(report, "$.jobs[0].fits");
    ck_assert_msg(fits && strcmp(sim_fits, fits) == 0, "%s: the server fits: %s, cutrace: %s",
                  label, sim_fits, fits ? fits : "(absent)");
    char want[1024];
    char *message = report_json_text(sim, "$.message");
    if (message)
        snprintf(want, sizeof want, "%s", message);
    else
        snprintf(want, sizeof want, "fits: %" PRId64 " tokens", report_json_int(sim, "$.tokens"));
    assert_text(label, report, "$.jobs[0].verdict", want);
    free(message);
    free(sim_fits);
    free(fits);
}

START_TEST(test_verdict)
{
    run_case(_i, true, check_verdict);
}
END_TEST

/* What the replay says of itself, with the framework left to the trace:
 * the server and path, both found in the stacks, SGLang's error type, the
 * multimodal reserve, the bytes, the effective cell, the profiled tokens,
 * the KV pool the trace saw checked against them. */
static void check_replay_fields(struct paths_case *c)
{
    const struct scenario *s = c->s;
    const char *label = c->label, *report = c->report, *sim = c->run.server;

    assert_text(label, report, "$.server.framework", "sglang");
    assert_text(label, report, "$.server.framework_source", "trace");
    assert_text(label, report, "$.server.path", s->path);
    assert_text(label, report, "$.server.path_source", "trace");
    char *error_type = report_json_text(report, "$.jobs[0].error_type");
    ck_assert_msg((error_type == NULL) == (s->error_type == NULL) &&
                      (!error_type || strcmp(error_type, s->error_type) == 0),
                  "%s: error_type is %s, the server raised %s", label,
                  error_type ? error_type : "null", s->error_type ? s->error_type : "nothing");
    free(error_type);
    assert_same_double_or_null(label, sim, "$.mm_reserve_gib", report, "$.jobs[0].mm_reserve_gib");
    assert_same_int_or_null(label, sim, "$.available_bytes", report, "$.jobs[0].available_bytes");
    if (!json_is_null(sim, "$.cell_size")) /* none where SGLang raised before its configurator */
        assert_same_int(label, sim, "$.cell_size", report, "$.jobs[0].cell_size");
    assert_same_int_or_null(label, sim, "$.tokens_profiled", report, "$.jobs[0].tokens_profiled");

    /* The pool the sim made after post is the one of its tokens and cell. */
    char *check = report_json_text(report, "$.jobs[0].kv_pool_check");
    ck_assert_msg(s->error_type ? !check : check && strcmp(check, "matches") == 0,
                  "%s: kv_pool_check is %s", label, check ? check : "null");
    free(check);
}

START_TEST(test_replay_fields)
{
    run_case(_i, true, check_replay_fields);
}
END_TEST

Suite *budget_paths_suite(void)
{
    npythons = pythons_find(pythons, MAX_PYTHONS, pythons_note, sizeof pythons_note);
    if (pythons_note[0])
        fprintf(stderr, "budget_paths: %s\n", pythons_note);
    Suite *s = suite_create("budget_paths");
    TCase *tc = tcase_create("budget_paths");
    tcase_set_timeout(tc, 240);
    tcase_add_unchecked_fixture(tc, make_suite_dir, remove_suite_dir);
    int runs = (int)(NSCENARIOS * RUNS_PER);
    tcase_add_loop_test(tc, test_measurements, 0, runs);
    tcase_add_loop_test(tc, test_verdict, 0, runs);
    tcase_add_loop_test(tc, test_replay_fields, 0, runs);
    suite_add_tcase(s, tc);
    return s;
}
