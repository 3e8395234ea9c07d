/*
 * test_report.c - the HTML pages (`cutrace report`, `cutrace diff --html`:
 * analyzer/cmd/report.c, analysis/report_*.c, out/html.c, out/svg.c): the
 * escaping every string from a trace goes through, a page built from a
 * trace whose command line, host and device name are markup, what the page
 * may not hold (a script or a reference outside it), the errors, and that
 * the traces read are left as they were. The browser's view of the pages
 * is tests/browser/'s.
 */
#include "out/html.h"
#include "scenarios.h"
#include "test_support.h"
#include "trace_fixture.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* dir/name, malloc'd. */
static char *join(const char *dir, const char *name)
{
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
    return path;
}

static char *escaped(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    html_text(f, s);
    fclose(f);
    return buf;
}

START_TEST(test_escape)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain text 1.5 GiB", "plain text 1.5 GiB"},
        {"<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"},
        {"a & b \"c\" 'd'", "a &amp; b &quot;c&quot; &#39;d&#39;"},
        {"tab\tand\nnewline", "tab\tand\nnewline"},
        {"bell\x07 del\x7f", "bell\xef\xbf\xbd del\xef\xbf\xbd"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"bad \xff byte", "bad \xef\xbf\xbd byte"},
        {"overlong \xc0\xaf", "overlong \xef\xbf\xbd\xef\xbf\xbd"},
        {"surrogate \xed\xa0\x80", "surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"cut \xe2\x82", "cut \xef\xbf\xbd\xef\xbf\xbd"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = escaped(cases[i].in);
        ck_assert_msg(strcmp(got, cases[i].out) == 0, "case %zu: got \"%s\", want \"%s\"", i, got,
                      cases[i].out);
        free(got);
    }
    char *none = escaped(NULL);
    ck_assert_str_eq(none, "");
    free(none);
}
END_TEST

#define HOSTILE_CMD  "srv --name <script>alert(1)</script> \"q\" 'a' & \x01 \xff"
#define HOSTILE_HOST "<b>node</b>"
#define HOSTILE_GPU  "<img src=x onerror=alert(2)>"

/* One process on one GPU whose texts are markup: a measurement, a burst of
 * allocations, a failed call and a free. */
static char *hostile_trace(const char *dir, int64_t pid, int64_t extra)
{
    char *path = fixture_trace_path(dir, "node", pid, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    struct fixture_process p = {.pid = pid,
                                .ppid = 1,
                                .host = HOSTILE_HOST,
                                .cmdline = HOSTILE_CMD,
                                .exe = "/usr/bin/<srv>",
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = NORMAL_START_MONO};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, HOSTILE_GPU, 80 * GiB);
    fixture_call(f, CT_API_cudaSetDevice, -1, 0, 0, 0);
    fixture_meminfo(f, 0, 79 * GiB, 80 * GiB);
    for (int64_t i = 0; i < 20 + extra; i++)
        fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000ll + i * GiB, 64 * MiB, 0);
    fixture_call(f, CT_API_cudaMalloc, 0, 0, 100 * GiB, 2);
    fixture_meminfo(f, 0, 77 * GiB, 80 * GiB);
    fixture_call(f, CT_API_cudaFree, 0, 0x7f0000000000ll, 0, 0);
    fixture_close(f);
    return path;
}

/* dir/name, made, holding one hostile_trace. Malloc'd. */
static char *traced_dir(const char *dir, const char *name, int64_t pid, int64_t extra)
{
    char *path = join(dir, name);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    free(hostile_trace(path, pid, extra));
    return path;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: not written", path);
    char *buf = NULL;
    size_t cap = 0, len = 0, n;
    char chunk[65536];
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        buf = realloc(buf, cap = len + n + 1);
        ck_assert_ptr_nonnull(buf);
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (!buf)
        buf = calloc(1, 1);
    buf[len] = '\0';
    (void)cap;
    return buf;
}

static size_t count(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* A usage error: exit 2 and one line saying `needle`. */
static void assert_usage_line(const struct proc_result *r, const char *needle)
{
    ck_assert_msg(r->status == 2, "exit %d, expected 2; stderr:\n%s", r->status, r->err);
    ck_assert_uint_eq(count_lines(r->err), 1);
    ck_assert_msg(strstr(r->err, needle) != NULL, "stderr lacks '%s': %s", needle, r->err);
}

/* What no page may hold, whatever its traces say. */
static void assert_safe_page(const char *page)
{
    ck_assert_msg(strncmp(page, "<!DOCTYPE html>", 15) == 0, "not a page");
    ck_assert_msg(strstr(page, "</html>\n") != NULL, "the page is not complete");
    ck_assert_uint_eq(count(page, "<script"), 1); /* the page's own, at its end */
    ck_assert_ptr_null(strstr(page, "<script>alert"));
    ck_assert_ptr_null(strstr(page, "<img"));
    ck_assert_ptr_null(strstr(page, "<b>node"));
    ck_assert_ptr_null(strstr(page, "\xff"));
    ck_assert_ptr_null(strstr(page, "\x01"));
    ck_assert_ptr_null(strstr(page, " src=\""));
    ck_assert_ptr_null(strstr(page, " href=\""));
    ck_assert_ptr_null(strstr(page, "url("));
    /* the only URL is SVG's namespace, which names and loads nothing */
    ck_assert_uint_eq(count(page, "http://") + count(page, "https://"),
                      count(page, "xmlns=\"http://www.w3.org/2000/svg\""));
    ck_assert_ptr_null(strstr(page, " d=\"\""));
}

static char *listing(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    char *out = calloc(1, 1);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue; /* the directory's own times change with the page beside it */
        char *path = NULL, *more = NULL;
        ck_assert_int_ge(asprintf(&path, "%s/%s", dir, e->d_name), 0);
        struct stat st;
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert_int_ge(asprintf(&more, "%s%s %jd %jd.%09ld\n", out, e->d_name,
                                  (intmax_t)st.st_size, (intmax_t)st.st_mtim.tv_sec,
                                  st.st_mtim.tv_nsec),
                         0);
        free(out);
        free(path);
        out = more;
    }
    closedir(d);
    return out;
}

START_TEST(test_report_hostile_trace)
{
    char *dir = scratch_dir();
    char *traces = NULL, *page_path = NULL;
    traces = traced_dir(dir, "run", 4242, 0);
    page_path = join(dir, "report.html");
    char *before = listing(traces);
    const char *args[] = {"report", traces, "-o", page_path, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "report: %d\n%s", r.status, r.err);
    ck_assert_str_eq(r.out, "");
    proc_result_free(&r);
    char *after = listing(traces);
    ck_assert_msg(strcmp(before, after) == 0, "the report changed its traces:\n%s\nnow:\n%s",
                  before, after);
    char *page = read_all(page_path);
    assert_safe_page(page);
    ck_assert_ptr_nonnull(strstr(page, "&lt;script&gt;alert(1)&lt;/script&gt; &quot;q&quot; "
                                       "&#39;a&#39; &amp; \xef\xbf\xbd \xef\xbf\xbd"));
    ck_assert_ptr_nonnull(strstr(page, "&lt;b&gt;node&lt;/b&gt;"));
    ck_assert_ptr_nonnull(strstr(page, "&lt;img src=x onerror=alert(2)&gt;"));
    /* the memory chart, with its areas, used memory and the failed call */
    ck_assert_ptr_nonnull(strstr(page, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    ck_assert_ptr_nonnull(strstr(page, "id=\"mem-0\""));
    ck_assert_ptr_nonnull(strstr(page, "<path class=\"c3\" d=\"M"));
    ck_assert_ptr_nonnull(strstr(page, "<path class=\"used\" d=\"M"));
    ck_assert_ptr_nonnull(strstr(page, "class=\"fail\""));
    ck_assert_ptr_nonnull(strstr(page, "failed cudaMalloc 1"));
    /* no server: the budget says why it is not there */
    ck_assert_ptr_nonnull(strstr(page, "do not show which server made them"));
    free(page);
    /* a page written in place of a non-regular file: nothing renamed onto it */
    const char *to_stdout[] = {"report", traces, "-o", "/dev/stdout", NULL};
    r = run_cutrace(to_stdout, NULL);
    ck_assert_msg(r.status == 0, "report -o /dev/stdout: %d\n%s", r.status, r.err);
    assert_safe_page(r.out);
    proc_result_free(&r);
    /* a symbolic link is written through, never replaced */
    char *target = NULL, *link = NULL;
    target = join(dir, "target.html");
    link = join(dir, "link.html");
    write_file(target, "old", 3);
    ck_assert_int_eq(symlink(target, link), 0);
    const char *to_link[] = {"report", traces, "-o", link, NULL};
    r = run_cutrace(to_link, NULL);
    ck_assert_msg(r.status == 0, "report -o LINK: %d\n%s", r.status, r.err);
    proc_result_free(&r);
    struct stat st;
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    page = read_all(target);
    assert_safe_page(page);
    free(page);
    free(target);
    free(link);
    free(before);
    free(after);
    free(page_path);
    free(traces);
    scratch_remove(dir);
}
END_TEST

/* A trace of pid on host "node" with one H100 (device 0) made current:
 * what the NVTX tests add their ranges to. fixture_close it. */
static struct fixture *h100_trace(const char *dir, int64_t pid)
{
    char *path = fixture_trace_path(dir, "node", pid, NORMAL_START_WALL);
    struct fixture *f = fixture_create(path, FIXTURE_DEFAULT);
    free(path);
    struct fixture_process p = {.pid = pid,
                                .ppid = 1,
                                .host = "node",
                                .start_wall_ns = NORMAL_START_WALL,
                                .start_mono_ns = NORMAL_START_MONO};
    fixture_process(f, &p);
    fixture_device(f, 0, NORMAL_UUID, "NVIDIA H100 80GB HBM3", 80 * GiB);
    fixture_call(f, CT_API_cudaSetDevice, -1, 0, 0, 0);
    return f;
}

/* The program's NVTX ranges as bands behind the chart: one shaded band and
 * one labelled strip per range (nested ones a strip higher, one never
 * ended drawn to the end), hovering naming it with its duration; NCCL's own
 * per-call ranges not drawn; past 300 ranges the rest counted; a page
 * without NVTX has none of it. */
START_TEST(test_report_nvtx_bands)
{
    char *dir = scratch_dir();
    struct fixture *f = h100_trace(dir, 4343);
    fixture_nvtx(f, CT_API_nvtxDomainCreate, 1, 1, 0, "NCCL");
    fixture_meminfo(f, 0, 79 * GiB, 80 * GiB);
    fixture_nvtx(f, CT_API_nvtxRangePush, 1, 0, 0, "load_weights");
    fixture_nvtx(f, CT_API_nvtxRangePush, 1, 0, 1, "<shard> & 1");
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000ll, 2 * GiB, 0);
    fixture_nvtx(f, CT_API_nvtxRangePush, 1, 1, 0, "ncclAllReduce");
    fixture_nvtx(f, CT_API_nvtxRangePop, 1, 1, 0, NULL);
    fixture_nvtx(f, CT_API_nvtxRangePop, 1, 0, 1, NULL);
    fixture_nvtx(f, CT_API_nvtxRangePop, 1, 0, 0, NULL);
    fixture_meminfo(f, 0, 77 * GiB, 80 * GiB);
    fixture_nvtx(f, CT_API_nvtxRangeStart, 2, 0, 9, "serve");
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0100000000ll, 1 * GiB, 0);
    fixture_call(f, CT_API_cudaFree, 0, 0x7f0000000000ll, 0, 0); /* "serve" never ended */
    fixture_close(f);
    char *page_path = join(dir, "report.html");
    const char *args[] = {"report", dir, "-o", page_path, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "report: %d\n%s", r.status, r.err);
    proc_result_free(&r);
    char *page = read_all(page_path);
    assert_safe_page(page);
    ck_assert_uint_eq(count(page, "class=\"nvtx\""), 3);
    ck_assert_uint_eq(count(page, "class=\"nvtxbar\""), 3);
    ck_assert_uint_eq(count(page, "ncclAllReduce"), 0);
    ck_assert_ptr_nonnull(strstr(page, "class=\"nvtxbar\" data-v=\"NVTX load_weights: "));
    ck_assert_ptr_nonnull(strstr(page, "data-v=\"NVTX &lt;shard&gt; &amp; 1: "));
    ck_assert_ptr_nonnull(strstr(page, "s, never ended), pid 4343"));
    /* the nested range's strip a strip above its parent's */
    ck_assert_ptr_nonnull(strstr(page, "y=\"294.0\" width="));
    ck_assert_ptr_nonnull(strstr(page, "y=\"282.0\" width="));
    ck_assert_ptr_nonnull(strstr(page, ">load_weights</text>"));
    ck_assert_ptr_nonnull(strstr(page, "NVTX ranges (hover a strip"));
    free(page);
    /* past 300 ranges the rest are counted, not drawn */
    char *many = join(dir, "many");
    ck_assert_int_eq(mkdir(many, 0755), 0);
    f = h100_trace(many, 4444);
    for (int i = 0; i < 305; i++) {
        fixture_nvtx(f, CT_API_nvtxRangePush, 1, 0, 0, "step");
        fixture_nvtx(f, CT_API_nvtxRangePop, 1, 0, 0, NULL);
    }
    fixture_close(f);
    const char *args3[] = {"report", many, "-o", page_path, NULL};
    r = run_cutrace(args3, NULL);
    ck_assert_msg(r.status == 0, "report: %d\n%s", r.status, r.err);
    proc_result_free(&r);
    page = read_all(page_path);
    ck_assert_uint_eq(count(page, "class=\"nvtxbar\""), 300);
    ck_assert_ptr_nonnull(strstr(page, "5 more NVTX ranges are in `cutrace timeline`"));
    free(page);
    free(many);
    /* without NVTX: no band, no legend entry */
    char *plain = traced_dir(dir, "plain", 4242, 0);
    const char *args2[] = {"report", plain, "-o", page_path, NULL};
    r = run_cutrace(args2, NULL);
    ck_assert_msg(r.status == 0, "report: %d\n%s", r.status, r.err);
    proc_result_free(&r);
    page = read_all(page_path);
    ck_assert_uint_eq(count(page, "class=\"nvtx"), 0);
    ck_assert_ptr_null(strstr(page, "NVTX ranges (hover"));
    free(page);
    free(plain);
    free(page_path);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_diff_html)
{
    char *dir = scratch_dir();
    char *a = NULL, *b = NULL, *page_path = NULL;
    a = traced_dir(dir, "a", 100, 0);
    b = traced_dir(dir, "b", 200, 4); /* 4 more allocations of 64 MiB */
    page_path = join(dir, "diff.html");
    const char *args[] = {"diff", a, b, "--html", page_path, NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "diff --html: %d\n%s", r.status, r.err);
    ck_assert_str_eq(r.out, "");
    proc_result_free(&r);
    char *page = read_all(page_path);
    assert_safe_page(page);
    ck_assert_ptr_nonnull(strstr(page, "<path class=\"la\" d=\"M"));
    ck_assert_ptr_nonnull(strstr(page, "<path class=\"lb\" d=\"M"));
    ck_assert_ptr_nonnull(strstr(page, "class=\"diverged\"")); /* +256 MiB past 16 MiB */
    ck_assert_ptr_nonnull(strstr(page, "+256.0 MiB"));
    ck_assert_ptr_nonnull(strstr(page, "<td>cudaMalloc</td>"));
    free(page);
    /* --html is a page instead of the text: not with --json or --csv */
    const char *json[] = {"diff", a, b, "--html", page_path, "--json", NULL};
    r = run_cutrace(json, NULL);
    assert_usage_line(&r, "--html writes a page instead of the text: not with --json");
    proc_result_free(&r);
    free(a);
    free(b);
    free(page_path);
    scratch_remove(dir);
}
END_TEST

/* A run for the diff's NVTX bands: load_weights around weights of
 * `weights` bytes, then warmup (with_warmup) and a "serve" never ended
 * (with_serve). */
static void nvtx_run(const char *dir, int64_t pid, int64_t weights, bool with_warmup,
                     bool with_serve)
{
    struct fixture *f = h100_trace(dir, pid);
    fixture_meminfo(f, 0, 79 * GiB, 80 * GiB);
    fixture_nvtx(f, CT_API_nvtxRangePush, 1, 0, 0, "load_weights");
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0000000000ll, weights, 0);
    fixture_nvtx(f, CT_API_nvtxRangePop, 1, 0, 0, NULL);
    fixture_meminfo(f, 0, 77 * GiB, 80 * GiB);
    if (with_warmup) {
        fixture_nvtx(f, CT_API_nvtxRangePush, 1, 0, 0, "warmup");
        fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0100000000ll, 64 * MiB, 0);
        fixture_nvtx(f, CT_API_nvtxRangePop, 1, 0, 0, NULL);
    }
    if (with_serve)
        fixture_nvtx(f, CT_API_nvtxRangeStart, 2, 0, 9, "serve");
    fixture_call(f, CT_API_cudaMalloc, 0, 0x7f0200000000ll, 1 * GiB, 0);
    fixture_close(f);
}

/* diff --html: the ranges as bands between the aligned steps where they
 * begin and end, titled with each side's duration; a range of one side
 * says so, one never ended runs to the side's last milestone. */
START_TEST(test_diff_html_nvtx_bands)
{
    char *dir = scratch_dir();
    char *a = join(dir, "a"), *b = join(dir, "b");
    ck_assert_int_eq(mkdir(a, 0755), 0);
    ck_assert_int_eq(mkdir(b, 0755), 0);
    nvtx_run(a, 100, 2 * GiB, true, false);
    nvtx_run(b, 200, 3 * GiB, false, true);
    const char *args[] = {"diff", a, b, "--html", "/dev/stdout", NULL};
    struct proc_result r = run_cutrace(args, NULL);
    ck_assert_msg(r.status == 0, "diff --html: %d\n%s", r.status, r.err);
    assert_safe_page(r.out);
    ck_assert_uint_eq(count(r.out, "class=\"nvtx\""), 3);
    ck_assert_uint_eq(count(r.out, "class=\"nvtxbar\""), 3);
    assert_contains(r.out, "class=\"nvtxbar\" data-v=\"NVTX load_weights: ");
    ck_assert_ptr_nonnull(strstr(r.out, "s) in A; "));
    ck_assert_ptr_nonnull(strstr(r.out, "s) in B\""));
    assert_contains(r.out, "data-v=\"NVTX warmup: ");
    ck_assert_ptr_nonnull(strstr(r.out, "s) in A; not in B\""));
    assert_contains(r.out, "data-v=\"NVTX serve: ");
    ck_assert_ptr_nonnull(strstr(r.out, "s, never ended) in B; not in A\""));
    ck_assert_ptr_nonnull(strstr(r.out, ">load_weights</text>"));
    assert_contains(r.out, "NVTX ranges, from the step where one begins");
    proc_result_free(&r);
    /* runs without NVTX: no band, no legend */
    char *pa = traced_dir(dir, "pa", 100, 0), *pb = traced_dir(dir, "pb", 200, 4);
    const char *plain[] = {"diff", pa, pb, "--html", "/dev/stdout", NULL};
    r = run_cutrace(plain, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_eq(count(r.out, "class=\"nvtx"), 0);
    ck_assert_ptr_null(strstr(r.out, "NVTX ranges, from"));
    proc_result_free(&r);
    free(pa);
    free(pb);
    free(a);
    free(b);
    scratch_remove(dir);
}
END_TEST

START_TEST(test_report_errors)
{
    char *dir = scratch_dir();
    char *traces = NULL, *nowhere = NULL, *page_path = NULL;
    traces = traced_dir(dir, "run", 4242, 0);
    const char *no_output[] = {"report", traces, NULL};
    struct proc_result r = run_cutrace(no_output, NULL);
    assert_usage_line(&r, "cutrace report: -o FILE is required");
    proc_result_free(&r);

    page_path = join(dir, "page.html");
    const char *no_dir[] = {"report", "-o", page_path, NULL};
    r = run_cutrace(no_dir, NULL);
    assert_usage_line(&r, "missing trace directory");
    proc_result_free(&r);

    nowhere = join(dir, "missing");
    const char *missing[] = {"report", nowhere, "-o", page_path, NULL};
    r = run_cutrace(missing, NULL);
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error(&r, nowhere, NULL);
    proc_result_free(&r);
    ck_assert_int_ne(access(page_path, F_OK), 0);

    char *unwritable = NULL;
    unwritable = join(dir, "no/such/dir/page.html");
    const char *bad_out[] = {"report", traces, "-o", unwritable, NULL};
    r = run_cutrace(bad_out, NULL);
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error(&r, "/no/such/dir/page.html: cannot write", NULL);
    proc_result_free(&r);

    /* a trace that is not one: one line naming it, no page */
    char *junk = NULL;
    junk = join(dir, "junk.db");
    write_file(junk, "not a trace", 11);
    const char *bad_trace[] = {"report", junk, "-o", page_path, NULL};
    r = run_cutrace(bad_trace, NULL);
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error(&r, "junk.db", NULL);
    proc_result_free(&r);
    ck_assert_int_ne(access(page_path, F_OK), 0);

    const char *help[] = {"report", "--help", NULL};
    r = run_cutrace(help, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: cutrace report [options] DIR... -o FILE\n"));
    proc_result_free(&r);
    free(junk);
    free(unwritable);
    free(nowhere);
    free(page_path);
    free(traces);
    scratch_remove(dir);
}
END_TEST

/* The reports' filters choose what the page lists (model/filter.h). */
START_TEST(test_report_filters)
{
    char *dir = scratch_dir();
    char *traces = join(dir, "ranks");
    ck_assert_int_eq(mkdir(traces, 0755), 0);
    scenario_nccl(traces, NCCL_SCENARIO_DEFAULT); /* ranks 0-3, pids 1000-1003, node1: 0-1 */
    char *all_path = join(dir, "all.html"), *some_path = join(dir, "some.html");
    const char *all_args[] = {"report", traces, "-o", all_path, NULL};
    struct proc_result r = run_cutrace(all_args, NULL);
    ck_assert_msg(r.status == 0, "report: exit %d: %s", r.status, r.err);
    proc_result_free(&r);
    const char *some_args[] = {"report", "--host", "node2", traces, "-o", some_path, NULL};
    r = run_cutrace(some_args, NULL);
    ck_assert_msg(r.status == 0, "report --host: exit %d: %s", r.status, r.err);
    ck_assert_str_eq(r.out, "");
    proc_result_free(&r);
    char *all = read_all(all_path), *some = read_all(some_path);
    assert_safe_page(some);
    /* Processes: four rows, then the two of node2. */
    ck_assert_uint_eq(count(all, "<tr><td>node"), 4);
    ck_assert_uint_eq(count(some, "<tr><td>node"), 2);
    ck_assert_uint_eq(count(some, "<tr><td>node2</td>"), 2);
    assert_contains(some, "Listed (--host node2): 2 processes, 3 GPUs.");
    ck_assert_ptr_null(strstr(all, "Listed ("));
    /* Their GPUs' charts only (a heading each, in the memory section): of
     * the six (each host's device 0 before its uuid is known is one too),
     * node2's three. */
    ck_assert_uint_eq(count(all, "<h3>GPU "), 6);
    ck_assert_uint_eq(count(some, "<h3>GPU "), 3);
    ck_assert_ptr_null(strstr(some, "<h3>GPU 0:"));
    ck_assert_ptr_null(strstr(some, "<h3>GPU 2: node1"));
    assert_contains(some, "<h3>GPU 5: node2/device 0");
    /* The communicators of node2's ranks: all of them but node1's own. */
    assert_contains(some, "; listed: the ");
    ck_assert_uint_lt(count(some, "<td class=\"mono\" rowspan"),
                      count(all, "<td class=\"mono\" rowspan"));
    free(all);
    free(some);

    /* A GPU shared by two processes: its flame graph holds only the listed
     * one's allocations; the GPU's total stays the whole GPU's. */
    char *shared = join(dir, "shared");
    ck_assert_int_eq(mkdir(shared, 0755), 0);
    free(scenario_shared_gpu_first(shared, 0));
    free(scenario_shared_gpu_second(shared));
    const char *one_args[] = {"report", "--pid", "200", shared, "-o", some_path, NULL};
    r = run_cutrace(one_args, NULL);
    ck_assert_msg(r.status == 0, "report --pid: exit %d: %s", r.status, r.err);
    proc_result_free(&r);
    some = read_all(some_path);
    assert_contains(some, "at its peak, 3.00 GiB: the listed processes&#39; part");
    assert_contains(some, "2.00 GiB (100.0%)");
    ck_assert_ptr_null(strstr(some, "1.00 GiB ("));
    free(some);

    /* Nothing matches: a usage error, no page. */
    char *none_path = join(dir, "none.html");
    const char *none_args[] = {"report", "--rank", "9", traces, "-o", none_path, NULL};
    r = run_cutrace(none_args, NULL);
    assert_usage_line(&r, "cutrace report: --rank 9: no process of these traces matches "
                          "(ranks 0 to 3)");
    proc_result_free(&r);
    ck_assert_int_ne(access(none_path, F_OK), 0);
    free(none_path);
    free(shared);
    free(all_path);
    free(some_path);
    free(traces);
    scratch_remove(dir);
}
END_TEST

Suite *report_suite(void); /* registered in test_main.c */
Suite *report_suite(void)
{
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("report");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_escape);
    tcase_add_test(tc, test_report_hostile_trace);
    tcase_add_test(tc, test_report_nvtx_bands);
    tcase_add_test(tc, test_diff_html);
    tcase_add_test(tc, test_diff_html_nvtx_bands);
    tcase_add_test(tc, test_report_errors);
    tcase_add_test(tc, test_report_filters);
    suite_add_tcase(s, tc);
    return s;
}
