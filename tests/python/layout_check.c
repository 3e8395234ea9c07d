/*
 * layout_check.c - checks the built-in tables of preload/core/pylayout.c
 * against real interpreters; linked with pylayout.c, built without any
 * Python header (tests/python/layout.mk).
 *
 * As a program: `layout_check 3.X PROBE_OUTPUT` compares every field of
 * ct_py_layout_table(3.X) with what layout_probe.c printed from 3.X's own
 * headers, and fails on any difference, on a field the probe did not
 * print, or on a name it does not know.
 *
 * As a shared object (-DLAYOUT_CHECK_SO), loaded by layout_check.py inside
 * the interpreter under test, with the GIL held (ctypes.PyDLL):
 *   ct_layout_check_debug: ct_py_layout_from_debug_offsets on this
 *     process's _PyRuntime (3.13+) must succeed and agree with the table.
 *   ct_layout_check_walk: walks this thread's frames with the table alone,
 *     the way pyframes.c must, and reports each frame's function name and
 *     byte offset of its instruction, so that the script can compare them
 *     with sys._getframe(). That exercises what offsetof cannot: which
 *     owner marks the entry shim, the stack-ref tag bits, the unit of the
 *     instruction pointer. The frames cannot change under it: the GIL is
 *     held and the walk is on the calling thread.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../preload/core/pylayout.h"

struct field {
    const char *name;
    size_t offset, size;
};

#define FIELD(f)                                                                                   \
    {                                                                                              \
#f, offsetof(struct ct_py_layout, f), sizeof(((struct ct_py_layout *)0)->f)                \
    }

/* Every field of struct ct_py_layout; layout_probe.c prints the same names. */
static const struct field fields[] = {
    FIELD(version),
    FIELD(instr_kind),
    FIELD(entry_kind),
    FIELD(line_format),
    FIELD(ts_frame),
    FIELD(cframe_current_frame),
    FIELD(ts_interp),
    FIELD(ts_thread_id),
    FIELD(fr_previous),
    FIELD(fr_code),
    FIELD(fr_instr),
    FIELD(fr_owner),
    FIELD(fr_is_entry),
    FIELD(owner_generator),
    FIELD(owner_cstack),
    FIELD(code_tag_bits),
    FIELD(co_name),
    FIELD(co_filename),
    FIELD(co_linetable),
    FIELD(co_firstlineno),
    FIELD(co_code),
    FIELD(co_code_adaptive),
    FIELD(co_firsttraceable),
    FIELD(co_version),
    FIELD(ob_type),
    FIELD(ob_size),
    FIELD(bytes_sval),
    FIELD(str_length),
    FIELD(str_state),
    FIELD(str_ascii_data),
    FIELD(str_compact_data),
    FIELD(state_kind_shift),
    FIELD(state_compact_shift),
    FIELD(state_ascii_shift),
    FIELD(rt_interpreters_head),
    FIELD(interp_next),
};
#define NFIELDS (sizeof fields / sizeof fields[0])

/* A field added to the struct must be added to fields[] and to
 * layout_probe.c; this fails first (60 bytes, 2 of them padding). */
_Static_assert(sizeof(struct ct_py_layout) == 66,
               "struct ct_py_layout changed: update fields[] here and layout_probe.c");
#define PADDING_BYTES 2

static unsigned long get_field(const struct ct_py_layout *l, const struct field *f)
{
    const unsigned char *p = (const unsigned char *)l + f->offset;
    if (f->size == 1)
        return *p;
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

#ifdef LAYOUT_CHECK_SO

#define EXPORT __attribute__((visibility("default")))

EXPORT int ct_layout_check_debug(const void *runtime, unsigned version, char *report, size_t len);
EXPORT int ct_layout_check_walk(const void *tstate, unsigned version, char *out, size_t len);

/* Appends to a report buffer that ctypes handed in; always terminated. */
struct buf {
    char *p;
    size_t len, used;
};

static void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...)
{
    if (b->used + 1 >= b->len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->used, b->len - b->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->used += (size_t)n < b->len - b->used ? (size_t)n : b->len - b->used - 1;
}

/*
 * Returns the number of fields where the published offsets and the table
 * differ (each named in `report`), or -1 when the reader refused them.
 */
int ct_layout_check_debug(const void *runtime, unsigned version, char *report, size_t len)
{
    struct buf b = {report, len, 0};
    report[0] = '\0';
    const struct ct_py_layout *t = ct_py_layout_table(version);
    if (t == NULL) {
        bprintf(&b, "no table for 0x%04x\n", version);
        return -1;
    }
    struct ct_py_layout l = *t;
    /* Poison the copy so that a published offset that was not taken
     * cannot pass by being equal to the table already. */
    struct ct_py_layout poisoned = *t;
    memset(&poisoned, 0xee, sizeof poisoned);
    poisoned.version = t->version;
    if (!ct_py_layout_from_debug_offsets(runtime, version, &l)) {
        bprintf(&b, "ct_py_layout_from_debug_offsets refused this interpreter's debug offsets\n");
        return -1;
    }
    int differ = 0;
    for (size_t i = 0; i < NFIELDS; i++) {
        unsigned long got = get_field(&l, &fields[i]), want = get_field(t, &fields[i]);
        if (got != want) {
            bprintf(&b, "%s: debug offsets %lu, table %lu\n", fields[i].name, got, want);
            differ++;
        }
    }
    /* Which fields the reader overrides: those that change when it starts
     * from the poisoned copy. */
    if (!ct_py_layout_from_debug_offsets(runtime, version, &poisoned)) {
        bprintf(&b, "the reader refused a copy whose unpublished fields are garbage\n");
        return -1;
    }
    int published = 0;
    for (size_t i = 0; i < NFIELDS; i++) {
        unsigned long got = get_field(&poisoned, &fields[i]);
        if (fields[i].offset == offsetof(struct ct_py_layout, version))
            continue;
        if (got != (fields[i].size == 1 ? 0xeeul : 0xeeeeul)) {
            published++;
            if (got != get_field(t, &fields[i])) {
                bprintf(&b, "%s: read %lu from a poisoned copy, table %lu\n", fields[i].name, got,
                        get_field(t, &fields[i]));
                differ++;
            }
        }
    }
    bprintf(&b, "published %d\n", published);
    return differ;
}

static uintptr_t rd_ptr(uintptr_t base, uint16_t off)
{
    uintptr_t v;
    memcpy(&v, (const void *)(base + off), sizeof v);
    return v;
}

static unsigned rd_u8(uintptr_t base, uint16_t off)
{
    unsigned char v;
    memcpy(&v, (const void *)(base + off), 1);
    return v;
}

static int rd_i32(uintptr_t base, uint16_t off)
{
    int32_t v;
    memcpy(&v, (const void *)(base + off), sizeof v);
    return v;
}

/* A compact ASCII str's text, else "?": the test's names are ASCII. */
static void put_name(struct buf *b, const struct ct_py_layout *l, uintptr_t str)
{
    uint32_t state;
    int64_t n;
    if (str == 0) {
        bprintf(b, "?");
        return;
    }
    memcpy(&state, (const void *)(str + l->str_state), sizeof state);
    memcpy(&n, (const void *)(str + l->str_length), sizeof n);
    bool compact = (state >> l->state_compact_shift) & 1,
         ascii = (state >> l->state_ascii_shift) & 1;
    unsigned kind = (state >> l->state_kind_shift) & 7;
    if (!compact || !ascii || kind != 1 || n < 0 || n > 200) {
        bprintf(b, "?");
        return;
    }
    bprintf(b, "%.*s", (int)n, (const char *)(str + l->str_ascii_data));
}

/*
 * Writes one line per frame, innermost first: "NAME LASTI" for a Python
 * frame (LASTI in bytes, as frame.f_lasti), "NAME LASTI entry" for 3.11's
 * is_entry frames, and "<shim>" for a frame owned by the C stack. Returns
 * the number of lines, -1 without a table.
 */
int ct_layout_check_walk(const void *tstate, unsigned version, char *out, size_t len)
{
    struct buf b = {out, len, 0};
    out[0] = '\0';
    const struct ct_py_layout *l = ct_py_layout_table(version);
    if (l == NULL || tstate == NULL)
        return -1;
    uintptr_t frame = rd_ptr((uintptr_t)tstate, l->ts_frame);
    if (l->cframe_current_frame != CT_PY_NONE && frame != 0)
        frame = rd_ptr(frame, l->cframe_current_frame);
    int lines = 0;
    for (; frame != 0 && lines < 200; frame = rd_ptr(frame, l->fr_previous)) {
        unsigned owner = l->fr_owner != CT_PY_NONE ? rd_u8(frame, l->fr_owner) : 0;
        if (l->fr_owner != CT_PY_NONE && owner >= l->owner_cstack) {
            bprintf(&b, "<shim>\n");
            lines++;
            continue;
        }
        uintptr_t code = rd_ptr(frame, l->fr_code) & ~(uintptr_t)l->code_tag_bits;
        long lasti;
        if (l->instr_kind == CT_PY_LASTI_INDEX) {
            lasti = (long)rd_i32(frame, l->fr_instr) * 2;
        } else {
            uintptr_t first = code + l->co_code_adaptive;
            lasti = (long)(rd_ptr(frame, l->fr_instr) - first);
            /* The API hides frames that have not reached their first
             * traceable instruction (_PyFrame_IsIncomplete). */
            if (owner != l->owner_generator && lasti < (long)rd_i32(code, l->co_firsttraceable) * 2)
                continue;
        }
        put_name(&b, l, rd_ptr(code, l->co_name));
        bprintf(&b, " %ld", lasti);
        if (l->fr_is_entry != CT_PY_NONE && rd_u8(frame, l->fr_is_entry))
            bprintf(&b, " entry");
        bprintf(&b, "\n");
        lines++;
    }
    return lines;
}

#else /* the program */

/* "3.12" -> 0x030c */
static unsigned parse_version(const char *s)
{
    unsigned major, minor;
    char tail;
    if (sscanf(s, "%u.%u%c", &major, &minor, &tail) != 2 || major > 255 || minor > 255)
        return 0;
    return major << 8 | minor;
}

static int check_probe(unsigned version, const char *vname, const char *path)
{
    const struct ct_py_layout *t = ct_py_layout_table(version);
    if (t == NULL) {
        printf("FAIL %s: pylayout.c has no table for this version\n", vname);
        return 1;
    }
    /* The field list must cover the struct: only its padding is left. */
    unsigned char covered[sizeof(struct ct_py_layout)] = {0};
    for (size_t i = 0; i < NFIELDS; i++)
        memset(covered + fields[i].offset, 1, fields[i].size);
    size_t uncovered = 0;
    for (size_t i = 0; i < sizeof covered; i++)
        uncovered += !covered[i];
    if (uncovered != PADDING_BYTES) {
        printf("FAIL %s: fields[] misses %zu bytes of struct ct_py_layout\n", vname,
               uncovered - PADDING_BYTES);
        return 1;
    }

    FILE *f = fopen(path, "r");
    if (f == NULL) {
        printf("FAIL %s: %s: %s\n", vname, path, strerror(errno));
        return 1;
    }
    int seen[NFIELDS] = {0};
    int differ = 0, bad = 0;
    char name[64];
    unsigned long value;
    int n;
    while ((n = fscanf(f, "%63s %lu", name, &value)) == 2) {
        size_t i = 0;
        while (i < NFIELDS && strcmp(fields[i].name, name) != 0)
            i++;
        if (i == NFIELDS) {
            printf("FAIL %s: the probe printed an unknown field %s\n", vname, name);
            bad++;
            continue;
        }
        if (seen[i]++) {
            printf("FAIL %s: the probe printed %s twice\n", vname, name);
            bad++;
        }
        unsigned long want = get_field(t, &fields[i]);
        if (value != want) {
            printf("FAIL %s %s: table %lu, headers %lu\n", vname, name, want, value);
            differ++;
        }
    }
    if (n != EOF) {
        printf("FAIL %s: %s: unreadable line\n", vname, path);
        bad++;
    }
    fclose(f);
    for (size_t i = 0; i < NFIELDS; i++) {
        if (!seen[i]) {
            printf("FAIL %s: the probe did not print %s\n", vname, fields[i].name);
            bad++;
        }
    }
    printf("%s %s: %zu fields of the table compared with the headers, %d differ\n",
           differ || bad ? "FAIL" : "ok", vname, NFIELDS, differ);
    return differ || bad;
}

int main(int argc, char **argv)
{
    if (argc != 3 || parse_version(argv[1]) == 0) {
        fprintf(stderr, "usage: layout_check 3.X PROBE_OUTPUT\n");
        return 2;
    }
    return check_probe(parse_version(argv[1]), argv[1], argv[2]);
}

#endif
