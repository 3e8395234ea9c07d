/*
 * fuzz_ring.c - libFuzzer target for crash buffers: the input becomes x.ring
 * in a scratch directory, beside a small valid trace (made once at start
 * with the tracer's own store code; with or without a process row, as the
 * input's last bit says), and the recover path runs over it
 * in-process: `cutrace recover --json DIR`, then `cutrace summary` of the
 * result in text and JSON, then the files are laid out again and
 * `cutrace recover DIR` runs in text.
 *
 * The trace is written under the db_name the ring's header names when that
 * is a plain *.db file name, else as x.db: so mutations of real rings (whose
 * header names their own trace) reach the fold into an existing trace, and
 * the rest reach "trace missing: make it from the header".
 *
 * Bugs: crashes, assertions, sanitizer reports, leaks, exit statuses other
 * than 0/1/2. Seeds: a ring left by a process killed with SIGKILL, and a
 * shrunk copy of it (`make fuzz`, fuzz/fuzz.mk).
 */
#include "cli.h"
#include "fuzz_support.h"

#include "cutrace/store.h"
#include "cutrace/apis.h"
#include "cutrace/format.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Two traces: [1] with a process row (pid 4242, so real rings are refused as
 * another process's unless mutated to match), [0] without one (so they are
 * folded, and the row is written from the ring's header). */
static uint8_t *trace_bytes[2];
static size_t trace_size[2];

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_ring: %s: %s\n", what, detail);
    abort();
}

/* A trace with three calls, still 'running', checkpointed into one file;
 * kept as bytes and written out before every run. */
static void make_trace(int with_process)
{
    const char *path = fuzz_path("template.db");
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        die("create", path);
    close(fd);
    char err[256];
    struct ct_store *st = ct_store_create(path, err, sizeof(err));
    if (!st)
        die("ct_store_create", err);
    struct ct_process_info info;
    memset(&info, 0, sizeof(info));
    info.pid = 4242;
    info.ppid = 1;
    info.start_wall_ns = 1736071872345000000ull;
    info.start_mono_ns = 1000000000ull;
    snprintf(info.host, sizeof(info.host), "fuzzhost");
    snprintf(info.exe, sizeof(info.exe), "/usr/bin/python3");
    int rc = ct_store_begin(st) || (with_process && ct_store_write_process(st, &info));
    for (uint64_t seq = 1; seq <= 3 && !rc; seq++) {
        struct ct_record r;
        memset(&r, 0, sizeof(r));
        r.seq = seq;
        r.t_ns = 1000000000ull + seq * 1000;
        r.api = seq == 2 ? CT_API_cudaFree : CT_API_cudaMalloc;
        r.ptr = 0x7f0000000000ull;
        r.size = seq == 2 ? 0 : 1u << 20;
        rc = ct_store_insert(st, &r);
    }
    if (rc || ct_store_commit(st) || ct_store_checkpoint(st))
        die("template trace", ct_store_error(st));
    ct_store_close(st);

    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0 || sb.st_size <= 0)
        die("read", path);
    size_t size = (size_t)sb.st_size;
    trace_bytes[with_process] = malloc(size);
    trace_size[with_process] = size;
    if (!trace_bytes[with_process] || fread(trace_bytes[with_process], 1, size, f) != size)
        die("read", path);
    fclose(f);
    fuzz_clean();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup();
    make_trace(0);
    make_trace(1);
    return 0;
}

/* The db_name in the input's header, if it is a plain *.db file name. */
static const char *trace_name(const uint8_t *data, size_t size, char *buf, size_t cap)
{
    size_t at = offsetof(struct ct_ring_header, db_name);
    size_t field = sizeof(((struct ct_ring_header *)0)->db_name);
    if (size < at + field)
        return "x.db";
    const char *name = (const char *)data + at;
    const char *end = memchr(name, '\0', field);
    size_t len = end ? (size_t)(end - name) : 0;
    if (len <= 3 || len >= cap || memchr(name, '/', len) || memcmp(name + len - 3, ".db", 3) != 0)
        return "x.db";
    memcpy(buf, name, len);
    buf[len] = '\0';
    return buf;
}

static void lay_out(const uint8_t *data, size_t size, const char *db)
{
    /* The last byte picks the trace: one bit flip away from the other. */
    int which = size > 0 && (data[size - 1] & 1);
    fuzz_clean();
    fuzz_write(db, trace_bytes[which], trace_size[which]);
    fuzz_write("x.ring", data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char name[256];
    const char *db = trace_name(data, size, name, sizeof(name));
    const char *dir = fuzz_setup();

    lay_out(data, size, db);
    fuzz_run(cmd_recover, "recover", dir, 1);
    fuzz_run(cmd_summary, "summary", dir, 0);
    fuzz_run(cmd_summary, "summary", dir, 1);

    lay_out(data, size, db);
    fuzz_run(cmd_recover, "recover", dir, 0);
    return 0;
}
