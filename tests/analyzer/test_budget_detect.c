/*
 * test_budget_detect.c - which server and SGLang code path a trace comes
 * from (analysis/budget_detect.c), on fixture traces whose measurements
 * carry Python stacks and whose processes carry launch lines; and SGLang's
 * own choice of --mem-fraction-static (replay/sglang_fraction.c), against
 * values worked out by hand from server_args.py's formula and, bit for bit,
 * against the same formula run by CPython (tests/progs/sglang_fraction.py).
 */
#include "analysis/budget_detect.h"
#include "analysis/budget_version.h"
#include "model/gpumodel.h"
#include "model/traceset.h"
#include "replay/sglang_fraction.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Suite *budget_detect_suite(void); /* registered in test_main.c */

#define WORKER_PID 4001
#define LAUNCH_PID 4000
#define SPAWNED                                                                                    \
    "python3 -c 'from multiprocessing.spawn import spawn_main; spawn_main()' "                     \
    "--multiprocessing-fork"
#define SITE "/srv/venv/lib/python3.12/site-packages/"

/* One Python frame of a measurement's stack: function in file. */
struct py_frame {
    const char *function, *file;
};

/*
 * A worker trace: its own command line `cmdline`, its launcher's
 * `launcher` (NULL: none recorded), and one measurement per entry of
 * stacks, each with the Python frames given (innermost first, up to 4;
 * a NULL function ends them, no frame at all: no stack).
 */
static void worker(const char *dir, const char *cmdline, const char *launcher,
                   const struct py_frame (*stacks)[4], size_t nstacks)
{
    char *path = fixture_trace_path(dir, "node1", WORKER_PID, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = WORKER_PID,
                                .ppid = LAUNCH_PID,
                                .host = "node1",
                                .cmdline = cmdline,
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = 1000000000ll,
                                .cuda_runtime_version = 12080};
    fixture_process(f, &p);
    fixture_device(f, 0, "GPU-00000000-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3",
                   80 * GiB);
    if (launcher) {
        char *sql =
            sqlite3_mprintf("INSERT INTO ancestors VALUES (1, %d, 777, %Q)", LAUNCH_PID, launcher);
        fixture_exec(f, sql);
        sqlite3_free(sql);
    }
    for (size_t i = 0; i < nstacks; i++) {
        int64_t seq = fixture_meminfo(f, 0, 79 * GiB - (int64_t)i * GiB, 80 * GiB);
        struct fixture_frame frames[4];
        size_t n = 0;
        for (; n < 4 && stacks[i][n].function; n++)
            frames[n] = (struct fixture_frame){.python = 1,
                                               .symbol = stacks[i][n].function,
                                               .file = stacks[i][n].file,
                                               .line = 10 * (int64_t)(n + 1),
                                               .instr = FIXTURE_NULL,
                                               .entry = FIXTURE_NULL};
        if (n == 0)
            continue;
        fixture_stack(f, (int64_t)i + 1, frames, n);
        fixture_call_stack(f, seq, (int64_t)i + 1);
    }
    fixture_close(f);
    free(path);
}

struct opened {
    char *dir;
    struct trace_set set;
    struct gm_model m;
};

static void open_run(struct opened *o)
{
    ck_assert_int_eq(gm_open_run(&o->m, &o->set, (const char *const[]){o->dir}, 1, 0), 0);
}

static void close_run(struct opened *o)
{
    gm_free(&o->m);
    trace_set_close(&o->set);
    scratch_remove(o->dir);
}

/* The run's server is `expected`, for the reason `why`; closes the run. */
static void assert_detected(struct opened *o, enum budget_framework expected, const char *why)
{
    enum budget_framework fw = expected == BUDGET_SGLANG ? BUDGET_VLLM : BUDGET_SGLANG;
    char *found = NULL;
    ck_assert(budget_detect_framework(&o->m, &fw, &found));
    ck_assert_int_eq(fw, expected);
    ck_assert_str_eq(found, why);
    free(found);
    close_run(o);
}

#define WORKER(o, cmdline, launcher, stacks)                                                       \
    do {                                                                                           \
        (o)->dir = scratch_dir();                                                                  \
        worker((o)->dir, cmdline, launcher, stacks, sizeof(stacks) / sizeof(stacks[0]));           \
        open_run(o);                                                                               \
    } while (0)

/* SGLang about 0.5.16: bootstrap.py and KVCacheConfigurator. */
static const struct py_frame sglang_current[][4] = {
    {{"get_available_gpu_memory", SITE "sglang/srt/utils/common.py"},
     {"init_torch_distributed", SITE "sglang/srt/distributed/bootstrap.py"},
     {"init_torch_distributed", SITE "sglang/srt/model_executor/model_runner.py"}},
    {{"get_available_gpu_memory", SITE "sglang/srt/utils/common.py"},
     {"_profile_available_bytes", SITE "sglang/srt/mem_cache/kv_cache_configurator.py"},
     {"configure", SITE "sglang/srt/mem_cache/kv_cache_configurator.py"}},
};

/* SGLang before the mixin: model_runner.py measures in profile_max_num_token. */
static const struct py_frame sglang_older[][4] = {
    {{"get_available_gpu_memory", SITE "sglang/srt/utils.py"},
     {"init_torch_distributed", SITE "sglang/srt/model_executor/model_runner.py"}},
    {{"get_available_gpu_memory", SITE "sglang/srt/utils.py"},
     {"profile_max_num_token", SITE "sglang/srt/model_executor/model_runner.py"}},
};

/* The KV-cache mixin's _profile_available_bytes: before or after the ValueError. */
static const struct py_frame sglang_mixin[][4] = {
    {{"get_available_gpu_memory", SITE "sglang/srt/utils/common.py"},
     {"init_torch_distributed", SITE "sglang/srt/model_executor/model_runner.py"}},
    {{"get_available_gpu_memory", SITE "sglang/srt/utils/common.py"},
     {"_profile_available_bytes", SITE "sglang/srt/model_executor/model_runner_kv_cache_mixin.py"}},
};

/* A simulated server: SGLang's function names in files of its own. */
static const struct py_frame sglang_names_only[][4] = {
    {{"mem_get_info", "/work/sim/memory.py"}, {"init_torch_distributed", "/work/sim/server.py"}},
};

static const struct py_frame vllm_current[][4] = {
    {{"mem_get_info", SITE "torch/cuda/memory.py"},
     {"init_device", SITE "vllm/v1/worker/gpu_worker.py"}},
    {{"memory_profiling", SITE "vllm/utils/mem_utils.py"},
     {"determine_available_memory", SITE "vllm/v1/worker/gpu_worker.py"}},
};

static const struct py_frame no_stacks[][4] = {{{NULL, NULL}}, {{NULL, NULL}}};

START_TEST(test_stacks_in_sglang_modules)
{
    struct opened o;
    WORKER(&o, SPAWNED, NULL, sglang_current);
    assert_detected(&o, BUDGET_SGLANG,
                    "the measurements' Python stacks are in sglang/srt/utils/common.py "
                    "(pid 4001)");
}
END_TEST

START_TEST(test_stacks_in_vllm_modules)
{
    struct opened o;
    WORKER(&o, "python3 -m vllm.entrypoints.openai.api_server", NULL, vllm_current);
    assert_detected(&o, BUDGET_VLLM,
                    "the measurements' Python stacks are in vllm/v1/worker/gpu_worker.py "
                    "(pid 4001)");
}
END_TEST

/* Function names alone tell a simulated server whose files are its own. */
START_TEST(test_function_names_without_modules)
{
    struct opened o;
    WORKER(&o, SPAWNED, NULL, sglang_names_only);
    assert_detected(&o, BUDGET_SGLANG,
                    "the measurements' Python stacks show SGLang's init_torch_distributed "
                    "(server.py) (pid 4001)");
}
END_TEST

START_TEST(test_launch_line_only)
{
    struct opened o;
    WORKER(&o, SPAWNED, "python3 -m sglang.launch_server --tp 2 --model-path m", no_stacks);
    assert_detected(&o, BUDGET_SGLANG,
                    "launcher pid 4000's command line runs sglang.launch_server");

    WORKER(&o, "/srv/venv/bin/vllm serve /models/x --tensor-parallel-size 2", NULL, no_stacks);
    assert_detected(&o, BUDGET_VLLM, "the command line of pid 4001 runs vllm serve");

    WORKER(&o, SPAWNED, "'sglang' 'serve' --model-path m", no_stacks);
    assert_detected(&o, BUDGET_SGLANG, "launcher pid 4000's command line runs sglang serve");
}
END_TEST

START_TEST(test_trace_shows_nothing)
{
    struct opened o;
    WORKER(&o, "python3 train.py --lr 0.1", "bash run.sh", no_stacks);
    enum budget_framework fw = BUDGET_VLLM;
    char *why = (char *)"untouched";
    ck_assert(!budget_detect_framework(&o.m, &fw, &why));
    ck_assert_ptr_null(why);
    ck_assert_ptr_null(budget_framework_mismatch(&o.m, BUDGET_VLLM));
    ck_assert_ptr_null(budget_framework_mismatch(&o.m, BUDGET_SGLANG));
    close_run(&o);
}
END_TEST

/* The stacks win over a launch line that says the other server. */
START_TEST(test_stacks_win_over_launch_lines)
{
    struct opened o;
    WORKER(&o, SPAWNED, "vllm serve /models/x", sglang_older);
    assert_detected(&o, BUDGET_SGLANG,
                    "the measurements' Python stacks are in sglang/srt/utils.py (pid 4001); "
                    "launcher pid 4000's command line runs vllm serve (vllm): the stacks "
                    "win");
}
END_TEST

START_TEST(test_framework_mismatch_warns)
{
    struct opened o;
    WORKER(&o, SPAWNED, "python3 -m sglang.launch_server --tp 1", sglang_current);
    char *warning = budget_framework_mismatch(&o.m, BUDGET_VLLM);
    ck_assert_ptr_nonnull(warning);
    ck_assert_str_eq(warning, "--framework vllm, but the trace shows sglang: the measurements' "
                              "Python stacks are in sglang/srt/utils/common.py (pid 4001); the "
                              "vllm replay may not be this server's");
    free(warning);
    ck_assert_ptr_null(budget_framework_mismatch(&o.m, BUDGET_SGLANG));
    close_run(&o);
}
END_TEST

/* With --server-version `version` (NULL: none) the path is `expected`,
 * from `source`, and why contains `because`. */
static void assert_path(struct opened *o, const char *version, enum budget_path expected,
                        const char *source, const char *because)
{
    const char *found_source = NULL;
    char *why = NULL;
    ck_assert_int_eq(budget_sglang_path(&o->m, version, &found_source, &why), expected);
    ck_assert_str_eq(found_source, source);
    ck_assert_msg(strstr(why, because), "why: %s", why);
    free(why);
}

START_TEST(test_sglang_path_from_stacks)
{
    struct opened o;
    WORKER(&o, SPAWNED, NULL, sglang_current);
    /* The stacks decide even against --server-version. */
    assert_path(&o, "0.4.0", BUDGET_PATH_SGLANG_CURRENT, "trace",
                "the measurements' Python stacks show _profile_available_bytes "
                "(kv_cache_configurator.py) (pid 4001): the current path (ValueError "
                "when rest <= 0)");
    close_run(&o);

    WORKER(&o, SPAWNED, NULL, sglang_older);
    assert_path(&o, NULL, BUDGET_PATH_SGLANG_OLDER, "trace",
                "the measurements' Python stacks show profile_max_num_token "
                "(model_runner.py) (pid 4001): the older path (RuntimeError \"Not "
                "enough memory\" only)");
    close_run(&o);
}
END_TEST

/* The mixin's _profile_available_bytes cannot tell: --server-version does,
 * numerically (0.5.9 is before 0.5.16), else the current path, said so. */
START_TEST(test_sglang_path_mixin_needs_version)
{
    struct opened o;
    WORKER(&o, SPAWNED, NULL, sglang_mixin);
    assert_path(&o, "0.5.9", BUDGET_PATH_SGLANG_OLDER, "option",
                "the measurements' Python stacks show _profile_available_bytes "
                "(model_runner_kv_cache_mixin.py) (pid 4001), which releases had both "
                "before and after the ValueError; --server-version 0.5.9 is before "
                "0.5.16, the first release known to raise the ValueError");
    assert_path(&o, "v0.5.16.post1", BUDGET_PATH_SGLANG_CURRENT, "option",
                "--server-version v0.5.16.post1 is at or after 0.5.16");
    assert_path(&o, NULL, BUDGET_PATH_SGLANG_CURRENT, "default",
                "releases had both before and after the ValueError: the "
                "current path, the default");
    assert_path(&o, "latest", BUDGET_PATH_SGLANG_CURRENT, "default",
                "--server-version latest is not a version number");
    close_run(&o);

    WORKER(&o, SPAWNED, "python3 -m sglang.launch_server", no_stacks);
    assert_path(&o, "0.4.6", BUDGET_PATH_SGLANG_OLDER, "option",
                "show none of SGLang's profiling functions");
    close_run(&o);
}
END_TEST

START_TEST(test_server_versions)
{
    int a[4], b[4];
    ck_assert(budget_parse_server_version("0.5.9", a));
    ck_assert(budget_parse_server_version("0.5.16", b));
    ck_assert_int_lt(budget_version_compare(a, b), 0);
    ck_assert(budget_parse_server_version("0.5.16rc1", a));
    ck_assert_int_eq(budget_version_compare(a, b), 0);
    ck_assert(budget_parse_server_version("V1.0", a));
    ck_assert_int_gt(budget_version_compare(a, b), 0);
    ck_assert(!budget_parse_server_version("5", a));
    ck_assert(!budget_parse_server_version("latest", a));
    ck_assert(!budget_parse_server_version("0.5;rm", a));
}
END_TEST

/* The launch-line lookup the lead hands to sglang_fraction_from_flags. */
START_TEST(test_launch_flag_lookup)
{
    struct opened o;
    WORKER(&o, SPAWNED,
           "python3 -m sglang.launch_server '--tp-size=4' --cuda-graph-bs 1 2 8 4 "
           "--enable-dp-attention --dp 4 --speculative-algorithm EAGLE",
           no_stacks);
    struct budget_launch_flags ctx = {.m = &o.m};
    const char *value = NULL;
    ck_assert(budget_launch_flag(&ctx, "--tp-size", &value));
    ck_assert_str_eq(ctx.owner, "launcher");
    ck_assert_int_eq(ctx.pid, LAUNCH_PID);
    ck_assert(strncmp(value, "4'", 2) == 0);
    ck_assert(!budget_launch_flag(&ctx, "--tp", &value)); /* not a prefix of --tp-size */

    struct sglang_fraction_inputs in;
    sglang_fraction_defaults(&in);
    const char *defaulted[16], *bad = "untouched";
    size_t n = 0;
    ck_assert(sglang_fraction_from_flags(&in, budget_launch_flag, &ctx, defaulted, 16, &n, &bad));
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(in.tp_size, 4);
    ck_assert_int_eq(in.dp_size, 4);
    ck_assert_int_eq(in.pp_size, 1);
    ck_assert_int_eq(in.cuda_graph_bs_max, 8);
    ck_assert(in.enable_dp_attention);
    ck_assert(!in.enable_piecewise_cuda_graph);
    ck_assert_str_eq(in.speculative_algorithm, "EAGLE");
    /* Defaulted: --pp-size, --chunked-prefill-size, --max-prefill-tokens,
     * --cuda-graph-max-bs, --piecewise-cuda-graph-max-tokens, piecewise. */
    ck_assert_uint_eq(n, 6);
    ck_assert_str_eq(defaulted[0], "--pp-size");
    ck_assert_str_eq(defaulted[5], "--enable-piecewise-cuda-graph");
    close_run(&o);

    WORKER(&o, SPAWNED, "python3 -m sglang.launch_server --tp two", no_stacks);
    ctx = (struct budget_launch_flags){.m = &o.m};
    sglang_fraction_defaults(&in);
    ck_assert(!sglang_fraction_from_flags(&in, budget_launch_flag, &ctx, defaulted, 16, &n, &bad));
    ck_assert_str_eq(bad, "--tp-size");
    close_run(&o);
}
END_TEST

/* round(x, 3) as CPython has it: half-even on the exact binary value. */
START_TEST(test_python_round3)
{
    ck_assert(sglang_round3(0.0625) == 0.062); /* an exact tie: to even */
    ck_assert(sglang_round3(0.1875) == 0.188); /* an exact tie: to even */
    ck_assert(sglang_round3(2.6745) == 2.675); /* 2.67450000...1 in binary: up */
    ck_assert(sglang_round3(1.0005) == 1.0);   /* 1.00049999... in binary: down */
    ck_assert(sglang_round3(0.8965) == 0.896); /* 0.89649999... in binary */
    ck_assert(sglang_round3(0.89672) == 0.897);
    ck_assert(sglang_gpu_mem_mib(80 * GiB + 512 * 1024) == 81920.0); /* floored to MiB */
}
END_TEST

static double derive(const struct sglang_fraction_inputs *in, struct sglang_fraction_reserve *r)
{
    double f = -1;
    ck_assert(sglang_fraction_derive(SGLANG_F_BY_RESERVE, in, &f, r));
    return f;
}

/* Values worked out by hand from server_args.py's formula. */
START_TEST(test_fraction_by_hand)
{
    struct sglang_fraction_inputs in;
    struct sglang_fraction_reserve r;
    /* H200 (nvidia-smi 143771 MiB), TP 8: chunked 8192, CUDA-graph bs 512;
     * reserved = 512 + 8192 * 1.5 + 512 * 2 + 8 / 8 * 1024 = 14848;
     * F = round(128923 / 143771, 3) = round(0.89672..., 3) = 0.897. */
    sglang_fraction_defaults(&in);
    in.gpu_mem_mib = 143771;
    in.tp_size = 8;
    ck_assert(derive(&in, &r) == 0.897);
    ck_assert(r.total == 14848 && r.activation == 12288 && r.cuda_graph == 1024);
    ck_assert(r.parallel == 1024 && r.floor_applied == 0);
    /* ... with DP attention over 8: + 512 * 8 * 3 + 512 * 8 * 1.5 = 33280;
     * F = round(110491 / 143771, 3) = round(0.76852..., 3) = 0.769. */
    in.enable_dp_attention = true;
    in.dp_size = 8;
    ck_assert(derive(&in, &r) == 0.769);
    ck_assert(r.total == 33280 && r.dp_attention == 18432);
    /* H100 (81559 MiB), TP 1: bs 256; 512 + 12288 + 512 + 128 = 13440;
     * F = round(68119 / 81559, 3) = 0.835; EAGLE adds 2048: round(66071 /
     * 81559, 3) = 0.810; STANDALONE 6144: round(61975 / 81559, 3) = 0.760;
     * NGRAM nothing. */
    sglang_fraction_defaults(&in);
    in.gpu_mem_mib = 81559;
    ck_assert(derive(&in, &r) == 0.835);
    ck_assert(r.total == 13440);
    snprintf(in.speculative_algorithm, sizeof(in.speculative_algorithm), "EAGLE");
    ck_assert(derive(&in, &r) == 0.810);
    snprintf(in.speculative_algorithm, sizeof(in.speculative_algorithm), "STANDALONE");
    ck_assert(derive(&in, &r) == 0.760);
    snprintf(in.speculative_algorithm, sizeof(in.speculative_algorithm), "NGRAM");
    ck_assert(derive(&in, &r) == 0.835);
    /* The floor: 80 GB with --chunked-prefill-size 2048 --cuda-graph-max-bs 8:
     * 512 + 3072 + 16 + 128 = 3728 < 10240, so 10240: round(71319 / 81559, 3)
     * = 0.874. */
    sglang_fraction_defaults(&in);
    in.gpu_mem_mib = 81559;
    in.chunked_prefill_size = 2048;
    in.cuda_graph_max_bs = 8;
    ck_assert(derive(&in, &r) == 0.874);
    ck_assert(r.floor_applied == 10240 - 3728 && r.total == 10240);
    /* RTX 4090 (24564 MiB), TP 1: chunked 2048, bs 24, no floor: 512 + 3072
     * + 48 + 128 = 3760: round(20804 / 24564, 3) = 0.847. */
    sglang_fraction_defaults(&in);
    in.gpu_mem_mib = 24564;
    ck_assert(derive(&in, &r) == 0.847);
    ck_assert(r.total == 3760);
    /* Piecewise CUDA graphs up to 8192 tokens: 8 + 14 + 8 + 8 + 12 + 8 = 58
     * capture sizes, 464 MiB: 13440 + 464 = 13904 on the H100. */
    sglang_fraction_defaults(&in);
    in.gpu_mem_mib = 81559;
    in.enable_piecewise_cuda_graph = true;
    derive(&in, &r);
    ck_assert_int_eq(r.piecewise_tokens, 58);
    ck_assert(r.total == 13904);
    /* Chunked prefill off (-1): max_prefill_tokens 16384 sizes the activations. */
    sglang_fraction_defaults(&in);
    in.gpu_mem_mib = 81559;
    in.chunked_prefill_size = -1;
    derive(&in, &r);
    ck_assert(r.activation == 24576);
    /* The older table by TP size, and the constant without a GPU size. */
    double f = 0;
    in.tp_size = 8;
    ck_assert(sglang_fraction_derive(SGLANG_F_BY_TP, &in, &f, NULL) && f == 0.81);
    in.tp_size = 3;
    ck_assert(sglang_fraction_derive(SGLANG_F_BY_TP, &in, &f, NULL) && f == 0.87);
    in.gpu_mem_mib = 0;
    ck_assert(!sglang_fraction_derive(SGLANG_F_BY_RESERVE, &in, &f, NULL) && f == 0.88);
}
END_TEST

/* The cases the Python comparison runs, in sglang_fraction.py's columns. */
static const char *const python_cases[] = {
    "143771 8 1 1 None 16384 None None 0 0 None 0 None",
    "143771 8 1 8 None 16384 None None 1 0 None 0 None",
    "81559 1 1 1 None 16384 None None 0 0 None 0 EAGLE",
    "81559 2 2 1 None 16384 None None 0 1 None 0 STANDALONE",
    "81559 1 1 1 2048 16384 8 None 0 0 None 0 None",
    "81559 4 1 1 -1 20000 None 96 0 1 4096 1 NGRAM",
    "24564 1 1 1 None 16384 None None 0 0 None 0 None",
    "24564 4 1 1 None 16384 None None 0 1 None 0 EAGLE3",
    "16384 1 1 1 None 16384 None None 0 0 None 0 None",
    "46068 4 1 1 None 16384 None None 0 0 None 0 None",
    "97871 4 1 4 None 16384 None None 1 0 None 0 None",
    "183359 8 1 1 None 16384 None None 0 1 None 1 None",
    "192000 8 2 2 12288 16384 320 None 1 1 None 0 EAGLE",
    "79.5 1 1 1 None 16384 None None 0 0 None 0 None",
    "81920.5 3 1 1 8000 16384 None None 0 0 None 0 None",
    "None 1 1 1 None 16384 None None 0 0 None 0 None",
};

/* One case's inputs from its line (the script's columns). */
static void parse_case(const char *line, struct sglang_fraction_inputs *in)
{
    char buf[256], *w[13];
    snprintf(buf, sizeof(buf), "%s", line);
    size_t n = 0;
    for (char *t = strtok(buf, " "); t && n < 13; t = strtok(NULL, " "))
        w[n++] = t;
    ck_assert_uint_eq(n, 13);
#define INT_OR_UNSET(s) (strcmp(s, "None") == 0 ? SGLANG_F_UNSET : strtoll(s, NULL, 10))
    sglang_fraction_defaults(in);
    in->gpu_mem_mib = strcmp(w[0], "None") == 0 ? 0 : strtod(w[0], NULL);
    in->tp_size = strtoll(w[1], NULL, 10);
    in->pp_size = strtoll(w[2], NULL, 10);
    in->dp_size = strtoll(w[3], NULL, 10);
    in->chunked_prefill_size = INT_OR_UNSET(w[4]);
    in->max_prefill_tokens = strtoll(w[5], NULL, 10);
    in->cuda_graph_max_bs = INT_OR_UNSET(w[6]);
    in->cuda_graph_bs_max = INT_OR_UNSET(w[7]);
    in->enable_dp_attention = strcmp(w[8], "1") == 0;
    in->enable_piecewise_cuda_graph = strcmp(w[9], "1") == 0;
    in->piecewise_cuda_graph_max_tokens = INT_OR_UNSET(w[10]);
    in->use_mla_backend = strcmp(w[11], "1") == 0;
    if (strcmp(w[12], "None") != 0)
        snprintf(in->speculative_algorithm, sizeof(in->speculative_algorithm), "%s", w[12]);
#undef INT_OR_UNSET
}

/* The first interpreter tests/python/pythons.sh finds, NULL when none. */
static char *first_python(void)
{
    FILE *p = popen("sh tests/python/pythons.sh 2>/dev/null", "r");
    if (!p)
        return NULL;
    char line[512], *found = NULL;
    if (fgets(line, sizeof(line), p)) {
        char *space = strchr(line, ' ');
        if (space) {
            space[1 + strcspn(space + 1, "\n")] = '\0';
            found = strdup(space + 1);
        }
    }
    pclose(p);
    return found;
}

/* F bit for bit as CPython computes it with the server's formula. */
START_TEST(test_fraction_matches_python)
{
    char *python = first_python();
    if (!python) {
        fprintf(stderr, "skipped: test_fraction_matches_python: no CPython 3.10-3.14 found by "
                        "tests/python/pythons.sh\n");
        return;
    }
    char *dir = scratch_dir();
    char input[512], cmd[2048];
    snprintf(input, sizeof(input), "%s/cases.txt", dir);
    FILE *in_file = fopen(input, "w");
    ck_assert_ptr_nonnull(in_file);
    size_t ncases = sizeof(python_cases) / sizeof(python_cases[0]);
    for (size_t i = 0; i < ncases; i++)
        fprintf(in_file, "%s\n", python_cases[i]);
    fclose(in_file);
    snprintf(cmd, sizeof(cmd), "'%s' tests/progs/sglang_fraction.py < '%s'", python, input);
    FILE *out = popen(cmd, "r");
    ck_assert_ptr_nonnull(out);
    char line[256];
    size_t i = 0;
    for (; fgets(line, sizeof(line), out); i++) {
        ck_assert_uint_lt(i, ncases);
        line[strcspn(line, "\n")] = '\0';
        struct sglang_fraction_inputs in;
        struct sglang_fraction_reserve r;
        parse_case(python_cases[i], &in);
        double f = 0;
        bool known = sglang_fraction_derive(SGLANG_F_BY_RESERVE, &in, &f, &r);
        char mine[256];
        if (known)
            snprintf(mine, sizeof(mine), "%a %.17g", f, r.total);
        else
            snprintf(mine, sizeof(mine), "fallback");
        /* Python writes 13440.0 where C's %.17g writes 13440: compare numbers. */
        char py_hex[64];
        double py_reserved = 0;
        if (strcmp(line, "fallback") == 0) {
            ck_assert_msg(!known, "case %zu: python fell back, C did not", i);
            continue;
        }
        ck_assert_int_eq(sscanf(line, "%63s %lf", py_hex, &py_reserved), 2);
        double py_f = strtod(py_hex, NULL);
        ck_assert_msg(known && memcmp(&py_f, &f, sizeof(f)) == 0 && py_reserved == r.total,
                      "case %zu (%s): python %s, C %s", i, python_cases[i], line, mine);
    }
    ck_assert_int_eq(pclose(out), 0);
    ck_assert_uint_eq(i, ncases);
    free(python);
    scratch_remove(dir);
}
END_TEST

Suite *budget_detect_suite(void)
{
    Suite *s = suite_create("budget_detect");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_stacks_in_sglang_modules);
    tcase_add_test(tc, test_stacks_in_vllm_modules);
    tcase_add_test(tc, test_function_names_without_modules);
    tcase_add_test(tc, test_launch_line_only);
    tcase_add_test(tc, test_trace_shows_nothing);
    tcase_add_test(tc, test_stacks_win_over_launch_lines);
    tcase_add_test(tc, test_framework_mismatch_warns);
    tcase_add_test(tc, test_sglang_path_from_stacks);
    tcase_add_test(tc, test_sglang_path_mixin_needs_version);
    tcase_add_test(tc, test_server_versions);
    tcase_add_test(tc, test_launch_flag_lookup);
    tcase_add_test(tc, test_python_round3);
    tcase_add_test(tc, test_fraction_by_hand);
    tcase_add_test(tc, test_fraction_matches_python);
    suite_add_tcase(s, tc);
    return s;
}
