/*
 * test_manifest.c - the run manifest (model/manifest.h) and directories of
 * runs (model/runs.h): the parser on good, bad and damaged text (every
 * truncation and byte change of a good manifest parses or fails with one
 * line naming the file, never crashes); what `cutrace run` writes (with the
 * stand-in library: redacted argv, recorded variables, how the command
 * ended, nothing left behind by a command that could not start); the model's
 * run_cmdline and gm_launch_line from it; reports refusing a directory of
 * several runs and reading the one run of a directory; `cutrace ls` on a
 * directory of runs and the exit status it shows for a process.
 */
#include "model/gpumodel.h"
#include "model/manifest.h"
#include "model/runs.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

Suite *manifest_suite(void); /* registered in test_main.c */

static const char GOOD[] =
    "{\"format\": 1, \"cutrace_version\": \"0.1.0\","
    " \"argv\": [\"python3\", \"-m\", \"sglang.launch_server\", \"--mem-fraction-static\", "
    "\"0.8\", \"it's\"],"
    " \"env\": {\"CUDA_VISIBLE_DEVICES\": \"0,1\", \"RANK\": \"0\"},"
    " \"host\": \"node1\", \"pid\": 4242, \"start_wall_ns\": 1000,"
    " \"end_wall_ns\": 2000, \"exit_status\": 3, \"future_key\": [1, {\"x\": null}]}";

/* manifest_parse with its stderr captured: returns its result, *err the text. */
static int parse_captured(const char *text, size_t len, struct run_manifest *m, char **err)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    dup2(fileno(tmp), 2);
    int rc = manifest_parse(text, len, "x/manifest.json", m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long size = ftell(tmp);
    rewind(tmp);
    *err = calloc(1, (size_t)size + 1);
    ck_assert_uint_eq(fread(*err, 1, (size_t)size, tmp), (size_t)size);
    fclose(tmp);
    return rc;
}

/* Parsed, or refused with exactly one line naming the file; never both. */
static int parse_or_one_line(const char *text, size_t len)
{
    struct run_manifest m;
    char *err;
    int rc = parse_captured(text, len, &m, &err);
    if (rc == 0) {
        ck_assert_str_eq(err, "");
        ck_assert_uint_ge(m.argc, 1);
        manifest_free(&m);
    } else {
        ck_assert_int_eq(rc, -1);
        ck_assert_msg(strncmp(err, "cutrace: x/manifest.json: invalid run manifest: ", 48) == 0 &&
                          count_lines(err) == 1,
                      "error: %s", err);
        ck_assert_ptr_null(m.argv);
    }
    free(err);
    return rc;
}

START_TEST(test_parse_good)
{
    struct run_manifest m;
    ck_assert_int_eq(manifest_parse(GOOD, strlen(GOOD), "m", &m), 0);
    ck_assert_int_eq(m.format, 1);
    ck_assert_str_eq(m.cutrace_version, "0.1.0");
    ck_assert_uint_eq(m.argc, 6);
    ck_assert_str_eq(m.argv[3], "--mem-fraction-static");
    /* Shell-quoted like process.cmdline, so a flag is found the same way. */
    ck_assert_str_eq(m.cmdline,
                     "python3 -m sglang.launch_server --mem-fraction-static 0.8 'it'\\''s'");
    ck_assert_uint_eq(m.nenv, 2);
    ck_assert_str_eq(m.env[0].name, "CUDA_VISIBLE_DEVICES");
    ck_assert_str_eq(m.env[0].value, "0,1");
    ck_assert_str_eq(m.host, "node1");
    ck_assert_int_eq(m.pid, 4242);
    ck_assert_int_eq(m.start_wall_ns, 1000);
    ck_assert(m.ended);
    ck_assert_int_eq(m.end_wall_ns, 2000);
    ck_assert(m.has_exit_status && !m.has_signal);
    ck_assert_int_eq(m.exit_status, 3);
    ck_assert_uint_eq(m.text_len, strlen(GOOD));
    ck_assert_str_eq(m.text, GOOD);
    char buf[64];
    ck_assert_str_eq(manifest_ending(&m, buf, sizeof buf), "exit 3");
    ck_assert(manifest_launched(&m, "node1", 4242));
    ck_assert(manifest_launched(&m, "", 4242));
    ck_assert(!manifest_launched(&m, "node2", 4242));
    ck_assert(!manifest_launched(&m, "node1", 4243));
    manifest_free(&m);

    /* Start only (still running, or killed with cutrace), a signal, no env. */
    const char *start_only = "{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],"
                             "\"host\":\"h\",\"pid\":1,\"start_wall_ns\":5}";
    ck_assert_int_eq(manifest_parse(start_only, strlen(start_only), "m", &m), 0);
    ck_assert(!m.ended && !m.has_exit_status && !m.has_signal);
    ck_assert_uint_eq(m.nenv, 0);
    ck_assert_str_eq(manifest_ending(&m, buf, sizeof buf), "running or killed");
    manifest_free(&m);
    const char *killed = "{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"env\":{},"
                         "\"host\":\"h\",\"pid\":1,\"start_wall_ns\":5,\"end_wall_ns\":9,"
                         "\"signal\":9}";
    ck_assert_int_eq(manifest_parse(killed, strlen(killed), "m", &m), 0);
    ck_assert(m.ended && m.has_signal && m.signal == 9);
    ck_assert_str_eq(manifest_ending(&m, buf, sizeof buf), "killed by SIGKILL");
    manifest_free(&m);
}
END_TEST

START_TEST(test_parse_bad)
{
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "empty file"},
        {"[1, 2]", "not a JSON object"},
        {"{\"format\": 1,}", "not a JSON object"},
        {"{}", "no \"format\""},
        {"{\"format\": \"1\"}", "\"format\" is text, not an integer"},
        {"{\"format\": 2}", "format 2 is newer than this cutrace reads (1)"},
        {"{\"format\": 1}", "no \"cutrace_version\""},
        {"{\"format\":1,\"cutrace_version\":\"x\"}", "no \"argv\""},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[]}", "\"argv\" is empty"},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":\"a b\"}",
         "\"argv\" is text, not an array"},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\",2]}",
         "\"argv\" item 1 is integer, not a string"},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"env\":[]}",
         "\"env\" is array, not an object"},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"env\":{\"A\":1}}",
         "\"env\" value of A is integer, not a string"},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"env\":{\"A=B\":\"1\"}}",
         "not a variable name"},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"]}", "no \"host\""},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"host\":\"h\",\"pid\":0}",
         "\"pid\" is 0, outside 1..2147483647"},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"host\":\"h\",\"pid\":1,"
         "\"start_wall_ns\":1.5}",
         "\"start_wall_ns\" is real, not an integer"},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"host\":\"h\",\"pid\":1,"
         "\"start_wall_ns\":99999999999999999999}",
         "\"start_wall_ns\" is an integer too large for 64 bits"},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"host\":\"h\",\"pid\":1,"
         "\"start_wall_ns\":5,\"exit_status\":0}",
         "an exit status or signal without \"end_wall_ns\""},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"host\":\"h\",\"pid\":1,"
         "\"start_wall_ns\":5,\"end_wall_ns\":6}",
         "exactly one of \"exit_status\" and \"signal\""},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"host\":\"h\",\"pid\":1,"
         "\"start_wall_ns\":5,\"end_wall_ns\":6,\"exit_status\":0,\"signal\":9}",
         "exactly one of \"exit_status\" and \"signal\""},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"host\":\"h\",\"pid\":1,"
         "\"start_wall_ns\":5,\"end_wall_ns\":6,\"exit_status\":256}",
         "\"exit_status\" is 256, outside 0..255"},
        {"{\"format\":1,\"cutrace_version\":\"x\",\"argv\":[\"a\"],\"host\":\"h\",\"pid\":1,"
         "\"start_wall_ns\":5,\"end_wall_ns\":4,\"signal\":9}",
         "\"end_wall_ns\" is before \"start_wall_ns\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct run_manifest m;
        char *err;
        int rc = parse_captured(bad[i].text, strlen(bad[i].text), &m, &err);
        ck_assert_msg(rc == -1, "parsed: %s", bad[i].text);
        ck_assert_msg(strstr(err, bad[i].why) && count_lines(err) == 1, "%s: %s", bad[i].text, err);
        free(err);
    }
    /* A NUL byte inside the text itself. */
    ck_assert_int_eq(parse_or_one_line("{\"format\":1}\0{}", 15), -1);
}
END_TEST

/* Every truncation, and every byte replaced by characters that matter to
 * JSON: never a crash, never a half-filled manifest, one line or a parse. */
START_TEST(test_parse_damaged)
{
    size_t len = strlen(GOOD);
    char *copy = malloc(len + 1);
    for (size_t cut = 0; cut < len; cut++)
        ck_assert_int_eq(parse_or_one_line(GOOD, cut), -1);
    static const char replacements[] = "\"{}[],:0-x\\ \x01\xff";
    size_t parsed = 0;
    for (size_t i = 0; i < len; i++) {
        for (size_t r = 0; r < sizeof replacements - 1; r++) {
            memcpy(copy, GOOD, len + 1);
            copy[i] = replacements[r];
            parsed += parse_or_one_line(copy, len) == 0;
        }
    }
    /* Some survive (a digit changed, a string's letter), most do not. */
    ck_assert_uint_gt(parsed, 0);
    free(copy);
}
END_TEST

START_TEST(test_write_and_find)
{
    char *dir = scratch_dir();
    char *argv[] = {"prog", "--tp", "2"};
    struct manifest_env env[] = {{"RANK", "1"}};
    struct run_manifest m = {.cutrace_version = "9.9",
                             .argv = argv,
                             .argc = 3,
                             .env = env,
                             .nenv = 1,
                             .host = "h",
                             .pid = 77,
                             .start_wall_ns = 10};
    ck_assert_int_eq(manifest_write(dir, &m), 0);
    m.ended = true;
    m.end_wall_ns = 20;
    m.has_signal = true;
    m.signal = 15;
    ck_assert_int_eq(manifest_write(dir, &m), 0);

    char *file = NULL;
    ck_assert_int_ge(asprintf(&file, "%s/manifest.json", dir), 0);
    struct stat st;
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    /* Nothing but the manifest: the temporary files were renamed. */
    char **runs;
    ck_assert_uint_eq(list_runs(dir, &runs), 0);
    free_runs(runs, 0);
    struct run_manifest back;
    ck_assert_int_eq(manifest_find(dir, &back), 1);
    ck_assert_str_eq(back.cmdline, "prog --tp 2");
    ck_assert_str_eq(back.env[0].name, "RANK");
    ck_assert(back.ended && back.has_signal && back.signal == 15 && back.end_wall_ns == 20);
    manifest_free(&back);

    /* Beside a trace file; none beside another file or in an empty directory. */
    char *trace = NULL, *other = NULL, *empty = NULL;
    ck_assert_int_ge(asprintf(&trace, "%s/h-77-10.db", dir), 0);
    ck_assert_int_ge(asprintf(&other, "%s/run.cutrace", dir), 0);
    ck_assert_int_ge(asprintf(&empty, "%s/empty", dir), 0);
    write_file(trace, "", 0);
    write_file(other, "", 0);
    ck_assert_int_eq(mkdir(empty, 0700), 0);
    ck_assert_int_eq(manifest_find(trace, &back), 1);
    manifest_free(&back);
    ck_assert_int_eq(manifest_find(other, &back), 0);
    ck_assert_int_eq(manifest_find(empty, &back), 0);
    /* A damaged one is an error, not "no manifest". */
    write_file(file, "{\"format\": 1", 12);
    ck_assert_int_eq(manifest_find(dir, &back), -1);
    free(trace);
    free(other);
    free(empty);
    free(file);
    scratch_remove(dir);
}
END_TEST

/* dir/name with a manifest of pid `pid` that ended with `status`. */
static char *fake_run(const char *dir, const char *name, int64_t pid, int status)
{
    char *run = NULL;
    ck_assert_int_ge(asprintf(&run, "%s/%s", dir, name), 0);
    ck_assert_int_eq(mkdir(run, 0700), 0);
    char *argv[] = {"python3", "serve.py", "--mem-fraction-static", "0.75"};
    struct run_manifest m = {.cutrace_version = "0.1.0",
                             .argv = argv,
                             .argc = 4,
                             .host = "node1",
                             .pid = pid,
                             .start_wall_ns = NORMAL_START_WALL,
                             .ended = true,
                             .end_wall_ns = NORMAL_START_WALL + 1000,
                             .has_exit_status = true,
                             .exit_status = status};
    ck_assert_int_eq(manifest_write(run, &m), 0);
    return run;
}

/* A trace of pid in dir: one cudaMalloc, an exit with status (-1: none recorded). */
static void process_trace(const char *dir, int64_t pid, int exit_status)
{
    char *path = fixture_trace_path(dir, "node1", pid, NORMAL_START_WALL + pid);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid,
                                .ppid = 1,
                                .host = "node1",
                                .cmdline =
                                    "python3 -c from multiprocessing.spawn import spawn_main",
                                .start_wall_ns = NORMAL_START_WALL + pid,
                                .start_mono_ns = 1000000000ll + pid,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, "GPU-00000000-0000-0000-0000-000000000000", "NVIDIA H100", 80 * GiB);
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000, 1 * GiB, 0);
    if (exit_status >= 0)
        fixture_meta_int(f, "exit_status", exit_status);
    fixture_close(f);
    free(path);
}

START_TEST(test_model_run_cmdline)
{
    char *dir = scratch_dir();
    char *run = fake_run(dir, "run-20250105T101112Z-node1-1", 500, 0);
    process_trace(run, 501, -1);
    struct trace_set set;
    struct gm_model m;
    ck_assert_int_eq(gm_open_run(&m, &set, (const char *const[]){run}, 1, 0), 0);
    ck_assert_ptr_nonnull(m.manifest);
    ck_assert_str_eq(m.run_cmdline, "python3 serve.py --mem-fraction-static 0.75");
    /* After the process's own line and its ancestors': the launcher's. */
    const struct gm_process *p = &m.procs[0];
    ck_assert_str_eq(gm_launch_line(&m, p, 1 + p->nancestors), m.run_cmdline);
    ck_assert_ptr_null(gm_launch_line(&m, p, 2 + p->nancestors));
    ck_assert(!p->has_exit_status);
    gm_free(&m);
    trace_set_close(&set);

    /* The parent of that one run reads as the run. */
    ck_assert_int_eq(gm_open_run(&m, &set, (const char *const[]){dir}, 1, 0), 0);
    ck_assert_uint_eq(m.nprocs, 1);
    ck_assert_str_eq(m.run_cmdline, "python3 serve.py --mem-fraction-static 0.75");
    gm_free(&m);
    trace_set_close(&set);

    /* Bare LD_PRELOAD traces: no manifest, no run command, as before. */
    char *bare = NULL;
    ck_assert_int_ge(asprintf(&bare, "%s/bare", dir), 0);
    ck_assert_int_eq(mkdir(bare, 0700), 0);
    process_trace(bare, 502, 4);
    ck_assert_int_eq(gm_open_run(&m, &set, (const char *const[]){bare}, 1, 0), 0);
    ck_assert_ptr_null(m.manifest);
    ck_assert_ptr_null(m.run_cmdline);
    ck_assert(m.procs[0].has_exit_status && m.procs[0].exit_status == 4);
    gm_free(&m);
    trace_set_close(&set);
    free(bare);
    free(run);
    scratch_remove(dir);
}
END_TEST

/* A packed run keeps its manifest: read elsewhere, from the pack alone,
 * the launcher's command is still the run's (cmd/pack.c, load.c). */
START_TEST(test_packed_run_keeps_its_manifest)
{
    char *dir = scratch_dir();
    char *run = fake_run(dir, "run-20250105T101112Z-node1-1", 500, 0);
    process_trace(run, 501, -1);
    char *packed = NULL;
    ck_assert_int_ge(asprintf(&packed, "%s/run.cutrace", dir), 0);
    const char *args[] = {"pack", dir, "-o", packed, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "pack: %d\n%s", r.status, r.err);
    proc_result_free(&r);
    struct trace_set set;
    struct gm_model m;
    ck_assert_int_eq(gm_open_run(&m, &set, (const char *const[]){packed}, 1, 0), 0);
    ck_assert_ptr_nonnull(m.manifest);
    ck_assert_str_eq(m.run_cmdline, "python3 serve.py --mem-fraction-static 0.75");
    gm_free(&m);
    trace_set_close(&set);

    /* A damaged manifest is refused by the packer, in one line. */
    char *file = NULL;
    ck_assert_int_ge(asprintf(&file, "%s/manifest.json", run), 0);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"format\": 1, \"argv\": [", f);
    fclose(f);
    const char *again[] = {"pack", "--force", dir, "-o", packed, NULL};
    r = run_cutrace(again, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "manifest.json: invalid run manifest") != NULL, "%s", r.err);
    ck_assert_ptr_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1);
    proc_result_free(&r);
    free(file);
    free(packed);
    free(run);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_several_runs_in_one_dir)
{
    char *dir = scratch_dir();
    char *a = fake_run(dir, "run-20250105T101112Z-node1-1", 600, 0);
    char *b = fake_run(dir, "run-20250105T101113Z-node1-2", 700, 3);
    process_trace(a, 600, 9); /* the manifest says 0: it wins for its process */
    process_trace(a, 601, 5);
    process_trace(a, 602, -1);
    process_trace(b, 700, -1);

    char *resolved = NULL;
    ck_assert_int_eq(runs_resolve(a, &resolved), 0);
    ck_assert_ptr_null(resolved); /* a run's own directory is itself */
    struct run_entry *runs;
    ck_assert_int_eq(runs_list(dir, &runs), 2);
    ck_assert_str_eq(runs[0].path, a);
    ck_assert_uint_eq(runs[0].traces, 3);
    ck_assert_uint_eq(runs[1].traces, 1);
    ck_assert_int_eq(runs[1].manifest.exit_status, 3);
    runs_free(runs, 2);
    ck_assert_int_eq(runs_list(a, &runs), 0);

    /* Every report refuses the parent, naming the runs and cutrace ls. */
    static const char *const reports[][3] = {
        {"summary"}, {"budget", "--framework", "sglang"}, {"timeline"}, {"collectives"}, {"sites"}};
    for (size_t i = 0; i < sizeof reports / sizeof *reports; i++) {
        const char *args[] = {reports[i][0], dir, reports[i][1], reports[i][2], NULL};
        struct proc_result r = run_cutrace(args, NULL);
        assert_one_line_error(&r, "holds 2 runs; name one: ", b);
        assert_contains(r.err, a);
        assert_contains(r.err, "cutrace ls");
        proc_result_free(&r);
    }
    const char *diff_args[] = {"diff", a, dir, NULL};
    struct proc_result r = run_cutrace(diff_args, NULL);
    assert_one_line_error(&r, "holds 2 runs; name one: ", b);
    proc_result_free(&r);
    /* Filters select the processes of one run. */
    const char *filtered[] = {"ls", "--pid", "600", dir, NULL};
    r = run_cutrace(filtered, NULL);
    ck_assert_int_eq(r.status, 2);
    proc_result_free(&r);

    /* cutrace ls lists them, the latest last. */
    const char *ls_args[] = {"ls", dir, NULL};
    r = run_cutrace(ls_args, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_eq(count_lines(r.out), 3);
    char *flat = squeeze(r.out);
    assert_contains(flat, "RUN STARTED ENDED TRACES COMMAND");
    char *row = NULL;
    ck_assert_int_ge(asprintf(&row,
                              "%s 2025-01-05T10:11:12Z exit 0 3 python3 serve.py "
                              "--mem-fraction-static 0.75\n%s 2025-01-05T10:11:12Z exit 3 1",
                              strrchr(a, '/') + 1, strrchr(b, '/') + 1),
                     0);
    assert_contains(flat, row);
    free(row);
    free(flat);
    proc_result_free(&r);
    const char *json_args[] = {"ls", "--json", dir, NULL};
    r = run_cutrace(json_args, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert(json_valid(r.out));
    char *c = compact(r.out);
    assert_contains(c, "\"pid\":700,");
    assert_contains(c, "\"exit_status\":3,\"signal\":null,\"traces\":1,");
    free(c);
    proc_result_free(&r);

    /* One run's processes: the launched one (pid 600) ends as its manifest
     * says, another as its trace recorded, a third without a status. */
    const char *one[] = {"ls", a, NULL};
    r = run_cutrace(one, NULL);
    ck_assert_int_eq(r.status, 0);
    flat = squeeze(r.out);
    assert_contains(flat, "node1 600 - - - 0 exited 0 1 1.00 GiB");
    assert_contains(flat, "node1 601 - - - 0 exited 5 1 1.00 GiB");
    assert_contains(flat, "node1 602 - - - 0 exited 1 1.00 GiB");
    free(flat);
    proc_result_free(&r);
    const char *one_json[] = {"ls", "--json", a, NULL};
    r = run_cutrace(one_json, NULL);
    c = compact(r.out);
    assert_contains(c, "\"exit_status\":0,\"signal\":null,\"exit_from\":\"manifest\"");
    assert_contains(c, "\"exit_status\":5,\"signal\":null,\"exit_from\":\"trace\"");
    assert_contains(c, "\"exit_status\":null,\"signal\":null,\"exit_from\":null");
    free(c);
    proc_result_free(&r);

    /* Its manifest damaged: a one-line error naming it, for ls and reports. */
    char *file = NULL;
    ck_assert_int_ge(asprintf(&file, "%s/manifest.json", b), 0);
    write_file(file, "{\"format\": \"one\"}", 17);
    r = run_cutrace(ls_args, NULL);
    assert_one_line_error(&r, file, "invalid run manifest: \"format\" is text");
    proc_result_free(&r);
    const char *summary[] = {"summary", b, NULL};
    r = run_cutrace(summary, NULL);
    assert_one_line_error(&r, file, "invalid run manifest");
    proc_result_free(&r);
    free(file);
    free(a);
    free(b);
    scratch_remove(dir);
}
END_TEST

/* `cutrace run` with the stand-in library: the manifest of each ending. */
static struct run_manifest run_and_read(const char *dir, const char *script, int status)
{
    char *lib = NULL;
    ck_assert_int_ge(asprintf(&lib, "CUTRACE_LIB=%s", dummy_library()), 0);
    const char *env[] = {lib, "CUDA_API_TOKEN=abc", "RANK=3", "UNRELATED_VAR=1", NULL};
    const char *args[] = {"run", "-o",         dir,         "--",   "/bin/sh", "-c", script,
                          "sh",  "--hf-token", "hf_secret", "--tp", "2",       NULL};
    struct proc_result r = run_cutrace(args, env);
    ck_assert_msg(r.status == status, "status %d: %s", r.status, r.err);
    proc_result_free(&r);
    free(lib);
    char **runs;
    size_t n = list_runs(dir, &runs);
    ck_assert_uint_ge(n, 1);
    struct run_manifest m;
    ck_assert_int_eq(manifest_find(runs[n - 1], &m), 1);
    free_runs(runs, n);
    return m;
}

START_TEST(test_run_writes_manifest)
{
    char *scratch = scratch_dir(), *dir = NULL;
    ck_assert_int_ge(asprintf(&dir, "%s/out", scratch), 0);
    struct run_manifest m = run_and_read(dir, "exit 0", 0);
    ck_assert_str_eq(m.cmdline, "/bin/sh -c 'exit 0' sh --hf-token '<redacted>' --tp 2");
    ck_assert_str_eq(m.cutrace_version, CUTRACE_VERSION);
    ck_assert(m.ended && m.has_exit_status && m.exit_status == 0);
    ck_assert_int_gt(m.pid, 0);
    ck_assert_int_ge(m.end_wall_ns, m.start_wall_ns);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    ck_assert_str_eq(m.host, host);
    /* The recorded variables only, as the command got them, redacted. */
    bool token = false, rank = false, preload = false, dir_set = false;
    for (size_t i = 0; i < m.nenv; i++) {
        ck_assert_str_ne(m.env[i].name, "UNRELATED_VAR");
        if (strcmp(m.env[i].name, "CUDA_API_TOKEN") == 0)
            token = strcmp(m.env[i].value, "<redacted>") == 0;
        rank |= strcmp(m.env[i].name, "RANK") == 0 && strcmp(m.env[i].value, "3") == 0;
        preload |= strcmp(m.env[i].name, "LD_PRELOAD") == 0;
        dir_set |= strcmp(m.env[i].name, "CUTRACE_DIR") == 0 && strstr(m.env[i].value, "/run-");
    }
    ck_assert(token && rank && preload && dir_set);
    manifest_free(&m);

    m = run_and_read(dir, "exit 7", 7);
    ck_assert(m.ended && m.has_exit_status && m.exit_status == 7);
    manifest_free(&m);
    m = run_and_read(dir, "kill -KILL $$", 137);
    ck_assert(m.ended && m.has_signal && m.signal == 9 && !m.has_exit_status);
    manifest_free(&m);
    char **runs;
    size_t n = list_runs(dir, &runs);
    ck_assert_uint_eq(n, 3);
    free_runs(runs, n);

    /* A command that cannot start leaves no run behind. */
    char *lib = NULL;
    ck_assert_int_ge(asprintf(&lib, "CUTRACE_LIB=%s", dummy_library()), 0);
    const char *env[] = {lib, NULL};
    const char *missing[] = {"run", "-o", dir, "--", "cutrace-no-such-command", NULL};
    struct proc_result r = run_cutrace(missing, env);
    ck_assert_int_eq(r.status, 127);
    proc_result_free(&r);
    n = list_runs(dir, &runs);
    ck_assert_uint_eq(n, 3);
    free_runs(runs, n);
    free(lib);
    free(dir);
    scratch_remove(scratch);
}
END_TEST

Suite *manifest_suite(void)
{
    Suite *s = suite_create("manifest");
    TCase *tc = tcase_create("manifest");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_parse_good);
    tcase_add_test(tc, test_parse_bad);
    tcase_add_test(tc, test_parse_damaged);
    tcase_add_test(tc, test_write_and_find);
    tcase_add_test(tc, test_model_run_cmdline);
    tcase_add_test(tc, test_packed_run_keeps_its_manifest);
    tcase_add_test(tc, test_several_runs_in_one_dir);
    tcase_add_test(tc, test_run_writes_manifest);
    suite_add_tcase(s, tc);
    return s;
}
