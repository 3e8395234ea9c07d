/*
 * modules.c - issuing modules and driver lookups of format-3 traces (see
 * modules.h).
 */
#include "model/modules.h"

#include "cli.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

/* The trace format that added modules, calls.module, allocations.module and
 * driver_lookups (docs/schema.md). */
#define MODULES_SINCE_FORMAT 3

int modules_check(struct trace *t)
{
    assert(t && t->db);
    if (t->format_version < MODULES_SINCE_FORMAT)
        return 0;
    /* Preparing a query compiles the views it reads, so a view whose
     * columns or tables are missing fails here, by name. */
    static const struct {
        const char *object, *sql;
    } needs[] = {
        {"modules", "SELECT module_id, path, start_addr, end_addr FROM modules LIMIT 0"},
        {"calls", "SELECT module, caller, nested, parent_seq FROM calls LIMIT 0"},
        {"allocations", "SELECT module FROM allocations LIMIT 0"},
        {"driver_lookups", "SELECT seq, api, symbol, version, result, wrapped FROM driver_lookups"
                           " LIMIT 0"},
    };
    for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++)
        if (trace_check_usable(t, needs[i].object, needs[i].sql) != 0)
            return -1;
    return 1;
}

const char *module_basename(const char *path)
{
    if (!path)
        return "";
    const char *slash = strrchr(path, '/');
    if (!slash || slash[1] == '\0')
        return path;
    return slash + 1;
}

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlong forms,
 * no surrogates, nothing past U+10FFFF), 0 if there is none. */
static size_t utf8_sequence(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t min, code;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, min = 0x80, code = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, min = 0x800, code = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, min = 0x10000, code = c & 0x07;
    else
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        code = (code << 6) | (s[i] & 0x3f);
    }
    if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
        return 0;
    return len;
}

char *module_display_name(const char *path)
{
    const char *name = module_basename(path);
    size_t len = strlen(name);
    char *out = xmalloc(len + 1);
    size_t n = 0;
    for (const unsigned char *s = (const unsigned char *)name; *s;) {
        size_t seq = utf8_sequence(s);
        if (seq == 0 || *s < 0x20 || *s == 0x7f) {
            out[n++] = '?';
            s++;
            continue;
        }
        memcpy(out + n, s, seq);
        n += seq;
        s += seq;
    }
    assert(n <= len);
    out[n] = '\0';
    return out;
}

static bool starts_with(const char *text, const char *prefix)
{
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

const char *module_label(const char *name, const char *exe)
{
    static const struct {
        const char *prefix, *label;
    } known[] = {
        {"libnccl", "NCCL's own buffers"},
        {"libcudart", "CUDA runtime (cudaMalloc & co.)"},
        {"libcuda.so", "CUDA driver"},
        {"libtorch", "PyTorch"},
        {"libc10", "PyTorch"},
        {"libcublas", "cuBLAS"},
        {"libcudnn", "cuDNN"},
    };
    if (!name || !name[0])
        return NULL;
    if (exe && exe[0] && strcmp(name, module_basename(exe)) == 0)
        return "the program";
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (starts_with(name, known[i].prefix))
            return known[i].label;
    return NULL;
}

int driver_lookups_load(struct trace *t, int available, struct driver_lookups *out)
{
    memset(out, 0, sizeof(*out));
    if (available <= 0)
        return 0;
    sqlite3_stmt *stmt = trace_query(t,
                                     "SELECT count(*), sum(wrapped <> 0), sum(result <> 0),"
                                     " count(DISTINCT symbol) FROM driver_lookups",
                                     "");
    if (!stmt)
        return -1;
    int rc = trace_step(t, stmt);
    if (rc == 1) {
        out->present = true;
        out->calls = col_int(stmt, 0, 0);
        out->wrapped = col_int(stmt, 1, 0);
        out->failed = col_int(stmt, 2, 0);
        out->symbols = col_int(stmt, 3, 0);
    }
    sqlite3_finalize(stmt);
    return rc < 0 ? -1 : 0;
}
