/*
 * pyframes.c - Python frames of the calling thread, with or without the GIL
 * (pyframes.h, docs/stacks.md).
 *
 * Three ways of reading, chosen per process (P.mode):
 *   RAW_UNCHECKED  a layout is known for this version but has not been
 *                  seen to work: walks read memory through process_vm_readv
 *                  only, so a wrong offset fails a check, never faults;
 *   RAW            a walk succeeded that way, or the layout agreed with
 *                  the public API: plain loads;
 *   API            no layout, or a check failed: CPython's public API, only
 *                  with the GIL held by this thread (never taken).
 * The mode only ever moves RAW_UNCHECKED -> RAW, RAW_UNCHECKED -> API and
 * RAW -> API.
 *
 * Why reading without the GIL is sound here: only the owning thread
 * changes its frame chain, and it is inside this hook; frames hold strong
 * references to their code objects, which hold their names and line tables,
 * and all three are immutable. What is read is copied; nothing is written.
 * The three CPython functions called on the GIL-released path
 * (Py_IsInitialized, Py_IsFinalizing, PyGILState_GetThisThreadState, and
 * PyGILState_Check / PyThreadState_GetUnchecked to learn whether the GIL is
 * held) read a flag or a thread-specific key and need no GIL: it is how
 * PyGILState_Ensure itself starts.
 *
 * Code objects get ids through two caches, one per way of reading. The API
 * cache keeps a reference to each code object (the GIL is held there), so
 * its address, the key, is never reused. The raw cache cannot: it keys on
 * the address and on what identifies the object's contents (the addresses
 * of its name, file and line table, its first line, the table's length and
 * first 8 bytes), so that a code object freed and replaced at the same
 * address gets an id of its own. Both caches are open-addressing
 * tables in anonymous mappings made when an interpreter is found,
 * lock-free (compare-and-swap on the key, the id published last). When one
 * is full, frames of new code objects are recorded with code id 0.
 */
#include "pyframes.h"

#include <assert.h>
#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pylayout.h"
#include "pylines.h"
#include "resolve.h"
#include "session.h"
#include "stackrec.h"
#include "warn.h"

#define CODE_SLOTS     32768 /* per cache; a power of two */
#define CODE_PROBES    64
#define NAME_MAX_BYTES 100 /* the function name's share of a record; the file gets the rest */
#define MAX_STR_CHARS  CT_AUX_PAYLOAD_BYTES
#define CHECK_FRAMES   128  /* frames compared with the API at the check */
#define CHECK_TABLE    4096 /* line-table bytes decoded at the check */

enum py_mode { MODE_OFF, MODE_API, MODE_RAW_UNCHECKED, MODE_RAW };

struct py_api {
    int (*is_initialized)(void);
    int (*is_finalizing)(void); /* NULL if absent */
    int (*gil_check)(void);
    void *(*this_thread_state)(void);
    void *(*current_state)(void); /* the state holding the GIL; NULL if absent */
    void *(*thread_frame)(void *tstate);
    void *(*frame_code)(void *frame);
    int (*frame_line)(void *frame);
    void *(*frame_back)(void *frame);
    void (*incref)(void *obj);
    void (*decref)(void *obj);
    void *(*getattr)(void *obj, const char *name);
    const char *(*as_utf8)(void *obj);
    void *(*err_occurred)(void);
    void (*err_clear)(void);
    /* For reading without the API. */
    uintptr_t code_type, str_type, bytes_type, runtime;
    unsigned version; /* 0x030c for 3.12; 0 unknown */
    char version_text[16];
};

struct api_slot {
    uint64_t code; /* the code object's address, 0 = free */
    uint32_t id;   /* 0 until its names were sent */
    uint32_t pad;
};

/* A code object as the raw cache identifies it (see the header comment):
 * its co_version where it has one, else what lies in its header's cache
 * lines and in its line table's first. */
struct code_key {
    uint64_t code, name, file, lines;
    uint64_t head;      /* the line table's first 8 bytes */
    uint32_t lines_len; /* its length */
    int32_t first_line;
    uint32_t version; /* co_version (3.12+), 0: none */
};

struct raw_slot {
    struct code_key key; /* key.code: CAS-claimed; the rest written before id */
    uint32_t id;         /* 0 until published; UINT32_MAX: not a code object we can read */
};
_Static_assert(sizeof(struct raw_slot) == 64, "a raw cache slot is one cache line");

/*
 * Each thread's memo of the frames it recorded last, by frame address: in
 * the steady state a thread calls CUDA from the same frames again and
 * again, and a frame at the same address running the same code object (the
 * same co_version from 3.12) at the same instruction is recorded as it was
 * then, with no code-cache lookup. Thread-local, so plain loads and stores.
 */
/* A prime: frames lie at regular strides (on 3.11+'s per-thread data stack),
 * and any stride but a multiple of it gives MEMO_SLOTS frames slots apart. */
#define MEMO_SLOTS 251 /* 10 KiB a thread */
struct memo_slot {
    uintptr_t frame, code, instr;
    uint32_t version;
    uint32_t pad;
    uint64_t word; /* the frame's CT_PYFRAME value, less a shim's entry mark */
};
static __thread struct memo_slot memo[MEMO_SLOTS] __attribute__((tls_model("initial-exec")));

static struct py_api api;
static const struct py_api *published; /* &api once complete */
static struct api_slot *api_codes;
static struct raw_slot *raw_codes;
static uint32_t next_code_id; /* atomic; ids start at 1 */

static struct {
    struct ct_py_layout L;           /* written before mode leaves MODE_OFF, then read-only */
    const char *source;              /* "the built-in table" or "the interpreter's debug offsets" */
    int mode;                        /* atomic enum py_mode */
    int api_checked;                 /* atomic: the check against the API passed */
    int checking;                    /* atomic: a thread is running that check */
    int said_api;                    /* atomic: MODE_API was told to the trace */
    int tell_child;                  /* atomic: a forked child's trace must be told again */
    char told[CT_AUX_PAYLOAD_BYTES]; /* the last python_frames value sent */
    bool api_chosen;                 /* CUTRACE_PYFRAMES=api: the user knows */
    char why[200];                   /* why MODE_API, once decided */
} P;

static void *sym(const char *name)
{
    if (!ct_real_dlsym)
        ct_dlsym_init();
    return ct_real_dlsym ? ct_real_dlsym(RTLD_DEFAULT, name) : NULL;
}

/* ---- the interpreter's version and layout ---- */

static unsigned parse_version(const char *text)
{
    char *end;
    long major = strtol(text, &end, 10);
    if (end == text || *end != '.')
        return 0;
    const char *p = end + 1;
    long minor = strtol(p, &end, 10);
    if (end == p || major != 3 || minor < 0 || minor > 255)
        return 0;
    return (unsigned)(major << 8 | minor);
}

static void find_version(struct py_api *a)
{
    const unsigned long *hex = sym("Py_Version"); /* 3.11 and later */
    const char *(*text)(void) = (const char *(*)(void))sym("Py_GetVersion");
    if (hex)
        a->version = (unsigned)(*hex >> 16) & 0xffff;
    else if (text)
        a->version = parse_version(text()); /* a static string; no initialization needed */
    snprintf(a->version_text, sizeof a->version_text, "%u.%u", a->version >> 8, a->version & 0xff);
}

/*
 * Whether a table has what its family of versions has (see walk_direct_*):
 * the walk then takes the family's fields as given.
 */
static bool layout_family_complete(const struct ct_py_layout *L)
{
    switch (L->entry_kind) {
    case CT_PY_ENTRY_EVERY:
        return L->instr_kind == CT_PY_LASTI_INDEX && L->co_code != CT_PY_NONE;
    case CT_PY_ENTRY_FLAG:
        return L->instr_kind == CT_PY_PREV_INSTR && L->fr_owner != CT_PY_NONE &&
               L->fr_is_entry != CT_PY_NONE && L->co_firsttraceable != CT_PY_NONE &&
               L->co_code_adaptive != CT_PY_NONE;
    case CT_PY_ENTRY_SHIM:
        return L->instr_kind != CT_PY_LASTI_INDEX && L->fr_owner != CT_PY_NONE &&
               L->co_firsttraceable != CT_PY_NONE && L->co_code_adaptive != CT_PY_NONE &&
               L->co_version != CT_PY_NONE;
    }
    return false;
}

/*
 * Chooses how frames will be read; before `published` is released.
 * CUTRACE_PYFRAMES=api reads them through the API only (with the GIL held);
 * CUTRACE_PYFRAMES=layout:3.N imposes another version's table, which the
 * checks must then refuse (docs/stacks.md: how the fallback is tested).
 */
static void choose_layout(const struct py_api *a)
{
    const char *setting = getenv("CUTRACE_PYFRAMES");
    unsigned imposed = 0;
    if (setting && strncmp(setting, "layout:", 7) == 0)
        imposed = parse_version(setting + 7);
    const struct ct_py_layout *table = imposed      ? ct_py_layout_table(imposed)
                                       : a->version ? ct_py_layout_table(a->version)
                                                    : NULL;
    if (setting && strcmp(setting, "api") == 0) {
        snprintf(P.why, sizeof P.why, "CUTRACE_PYFRAMES=api");
        P.api_chosen = true;
    } else if (setting && *setting && strcmp(setting, "auto") != 0 && !imposed) {
        ct_warn_once(CT_PROBLEM_PYFRAMES,
                     "CUTRACE_PYFRAMES=%.40s is not auto, api or layout:3.N; using auto", setting);
    }
    if (P.why[0]) {
        /* decided above */
    } else if (!a->version) {
        snprintf(P.why, sizeof P.why, "the interpreter's version is unknown");
    } else if (!table) {
        snprintf(P.why, sizeof P.why, "CPython %s has no frame layout in this cutrace",
                 a->version_text);
    } else if (!a->code_type || !a->str_type || !a->bytes_type) {
        snprintf(P.why, sizeof P.why, "CPython %s does not export its type objects",
                 a->version_text);
    } else {
        P.L = *table;
        assert(layout_family_complete(&P.L));
        P.source = imposed ? "the table imposed by CUTRACE_PYFRAMES" : "the built-in table";
        if (!imposed && a->runtime &&
            ct_py_layout_from_debug_offsets((const void *)a->runtime, a->version, &P.L))
            P.source = "the interpreter's debug offsets";
        if (!layout_family_complete(&P.L)) { /* the debug offsets keep every field */
            snprintf(P.why, sizeof P.why, "the frame layout of CPython %s is incomplete",
                     a->version_text);
            __atomic_store_n(&P.mode, MODE_API, __ATOMIC_RELEASE);
            return;
        }
        __atomic_store_n(&P.mode, MODE_RAW_UNCHECKED, __ATOMIC_RELEASE);
        return;
    }
    __atomic_store_n(&P.mode, MODE_API, __ATOMIC_RELEASE);
}

bool ct_py_resolve(void)
{
    if (__atomic_load_n(&published, __ATOMIC_ACQUIRE))
        return true;
    /* Only one resolver at a time writes `api`: the constructor runs before
     * the writer thread exists, and later only the writer calls this. */
    struct py_api a;
    memset(&a, 0, sizeof a);
#define SYM(field, name) a.field = (__typeof__(a.field))sym(name)
    SYM(is_initialized, "Py_IsInitialized");
    SYM(is_finalizing, "Py_IsFinalizing");
    if (!a.is_finalizing)
        SYM(is_finalizing, "_Py_IsFinalizing");
    SYM(gil_check, "PyGILState_Check");
    SYM(this_thread_state, "PyGILState_GetThisThreadState");
    SYM(current_state, "PyThreadState_GetUnchecked");
    if (!a.current_state)
        SYM(current_state, "_PyThreadState_UncheckedGet");
    SYM(thread_frame, "PyThreadState_GetFrame");
    SYM(frame_code, "PyFrame_GetCode");
    SYM(frame_line, "PyFrame_GetLineNumber");
    SYM(frame_back, "PyFrame_GetBack"); /* 3.9 and later */
    SYM(incref, "Py_IncRef");
    SYM(decref, "Py_DecRef");
    SYM(getattr, "PyObject_GetAttrString");
    SYM(as_utf8, "PyUnicode_AsUTF8");
    SYM(err_occurred, "PyErr_Occurred");
    SYM(err_clear, "PyErr_Clear");
#undef SYM
    if (!a.is_initialized || !a.gil_check || !a.this_thread_state || !a.thread_frame ||
        !a.frame_code || !a.frame_line || !a.frame_back || !a.incref || !a.decref || !a.getattr ||
        !a.as_utf8 || !a.err_occurred || !a.err_clear)
        return false;
    a.code_type = (uintptr_t)sym("PyCode_Type");
    a.str_type = (uintptr_t)sym("PyUnicode_Type");
    a.bytes_type = (uintptr_t)sym("PyBytes_Type");
    a.runtime = (uintptr_t)sym("_PyRuntime");
    find_version(&a);
    size_t api_bytes = CODE_SLOTS * sizeof(struct api_slot);
    size_t raw_bytes = CODE_SLOTS * sizeof(struct raw_slot);
    void *mem = mmap(NULL, api_bytes + raw_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem != MAP_FAILED) {
        api_codes = mem;
        raw_codes = (struct raw_slot *)((char *)mem + api_bytes);
    }
    choose_layout(&a);
    api = a;
    __atomic_store_n(&published, &api, __ATOMIC_RELEASE);
    return true;
}

bool ct_py_present(void)
{
    return __atomic_load_n(&published, __ATOMIC_ACQUIRE) != NULL;
}

/* ---- telling the trace how frames are read ---- */

static void send_meta(const char *key, const char *value)
{
    if (value != P.told) /* transitions are rare and serialized by the mode's CAS */
        snprintf(P.told, sizeof P.told, "%s", value);
    unsigned klen = (unsigned)strlen(key), vlen = (unsigned)strlen(value);
    if (klen + vlen > CT_AUX_PAYLOAD_BYTES)
        vlen = CT_AUX_PAYLOAD_BYTES - klen;
    union ct_any_record u;
    ct_aux_init(&u, CT_AUX_META, 1);
    u.aux.count = (uint16_t)klen;
    u.aux.total = (uint16_t)vlen;
    ct_aux_put_bytes(&u.aux, 0, key, klen);
    ct_aux_put_bytes(&u.aux, klen, value, vlen);
    ct_session_append(&u.rec);
}

static void say_raw(const struct py_api *py, const char *checked)
{
    char text[CT_AUX_PAYLOAD_BYTES];
    snprintf(text, sizeof text, "without the GIL: CPython %s, offsets from %s, checked %s",
             py->version_text, P.source, checked);
    send_meta("python_frames", text);
}

/* Gives up reading without the GIL, once, saying why. */
static void fall_back(const struct py_api *py, const char *why)
{
    int mode = __atomic_load_n(&P.mode, __ATOMIC_ACQUIRE);
    while (mode != MODE_API) {
        if (__atomic_compare_exchange_n(&P.mode, &mode, MODE_API, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            snprintf(P.why, sizeof P.why, "%s", why);
            ct_warn_once(CT_PROBLEM_PYFRAMES,
                         "Python frames of CPython %s cannot be read without the GIL (%s): "
                         "only calls made with the GIL held get them",
                         py->version_text, why);
            char text[CT_AUX_PAYLOAD_BYTES];
            snprintf(text, sizeof text, "with the GIL held only (API): %.170s", why);
            __atomic_store_n(&P.said_api, 1, __ATOMIC_RELEASE);
            send_meta("python_frames", text);
            return;
        }
    }
}

/* ---- reading memory ---- */

/*
 * One walk's reading: `safe` reads go through process_vm_readv on our own
 * pid, which answers EFAULT for an address that is not mapped instead of a
 * fault. Any failed read or failed check sets `failed` with a reason.
 */
struct walk {
    const struct py_api *py;
    const struct ct_py_layout *L;
    bool safe;
    bool failed;
    bool no_safe_reads; /* process_vm_readv itself is refused here */
    const char *why;
    uint64_t *out;
    int max;
};

#define HOT static inline __attribute__((always_inline))

static bool rd_guarded(struct walk *w, uintptr_t addr, void *dst, size_t n)
{
    if (w->failed)
        return false;
    if (addr < 4096 || addr + n < addr) {
        w->failed = true;
        w->why = "a pointer out of range";
        return false;
    }
    struct iovec local = {dst, n}, remote = {(void *)addr, n};
    ssize_t got = syscall(SYS_process_vm_readv, (long)getpid(), &local, 1L, &remote, 1L, 0L);
    if (got == (ssize_t)n)
        return true;
    w->failed = true;
    if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
        w->no_safe_reads = true;
        w->why = "process_vm_readv is not permitted, so the layout cannot be checked safely";
    } else {
        w->why = "a pointer to unmapped memory";
    }
    return false;
}

/*
 * A read of n bytes at addr. Plain loads once the layout is trusted: every
 * pointer followed was checked non-null (and aligned, for objects and
 * frames) where it was read, so a load cannot fault.
 */
HOT bool rd(struct walk *w, const bool safe, uintptr_t addr, void *dst, size_t n)
{
    if (safe)
        return rd_guarded(w, addr, dst, n);
    memcpy(dst, (const void *)addr, n);
    return true;
}

HOT uintptr_t rd_ptr(struct walk *w, const bool safe, uintptr_t addr)
{
    uintptr_t v = 0;
    rd(w, safe, addr, &v, sizeof v);
    return v;
}

HOT int64_t rd_i64(struct walk *w, const bool safe, uintptr_t addr)
{
    int64_t v = 0;
    rd(w, safe, addr, &v, sizeof v);
    return v;
}

HOT int32_t rd_i32(struct walk *w, const bool safe, uintptr_t addr)
{
    int32_t v = 0;
    rd(w, safe, addr, &v, sizeof v);
    return v;
}

HOT uint8_t rd_u8(struct walk *w, const bool safe, uintptr_t addr)
{
    uint8_t v = 0;
    rd(w, safe, addr, &v, sizeof v);
    return v;
}

static void fail(struct walk *w, const char *why)
{
    if (!w->failed) {
        w->failed = true;
        w->why = why;
    }
}

/* Whether obj is an object of exactly that type (no subclass is expected). */
HOT bool is_type(struct walk *w, const bool safe, uintptr_t obj, uintptr_t type)
{
    return obj && !(obj & 7) && rd_ptr(w, safe, obj + w->L->ob_type) == type && !w->failed;
}

/* The same with the walk's own copy of the layout (see walk_frames). */
HOT bool is_type_l(struct walk *w, const struct ct_py_layout *L, const bool safe, uintptr_t obj,
                   uintptr_t type)
{
    return obj && !(obj & 7) && rd_ptr(w, safe, obj + L->ob_type) == type;
}

/* ---- str and bytes, read as they lie in memory ---- */

static unsigned put_utf8(char *buf, unsigned at, unsigned cap, uint32_t c)
{
    char tmp[4];
    unsigned n;
    if (c == 0 || (c >= 0xd800 && c < 0xe000) || c > 0x10ffff)
        c = '?'; /* NUL would end the name; surrogates are not UTF-8 */
    if (c < 0x80) {
        tmp[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        tmp[0] = (char)(0xc0 | c >> 6);
        tmp[1] = (char)(0x80 | (c & 0x3f));
        n = 2;
    } else if (c < 0x10000) {
        tmp[0] = (char)(0xe0 | c >> 12);
        tmp[1] = (char)(0x80 | (c >> 6 & 0x3f));
        tmp[2] = (char)(0x80 | (c & 0x3f));
        n = 3;
    } else {
        tmp[0] = (char)(0xf0 | c >> 18);
        tmp[1] = (char)(0x80 | (c >> 12 & 0x3f));
        tmp[2] = (char)(0x80 | (c >> 6 & 0x3f));
        tmp[3] = (char)(0x80 | (c & 0x3f));
        n = 4;
    }
    if (at + n > cap)
        return 0;
    memcpy(buf + at, tmp, n);
    return n;
}

/*
 * A str object as UTF-8 into buf (at most cap bytes, no NUL kept): its
 * head, or with keep_tail its tail after "..." when it is longer. Only
 * compact strings (all that code objects hold) are read; -1 when obj is
 * not a str.
 */
static int read_str(struct walk *w, uintptr_t obj, char *buf, unsigned cap, bool keep_tail)
{
    const bool safe = w->safe;
    const struct ct_py_layout *L = w->L;
    if (!is_type(w, safe, obj, w->py->str_type))
        return -1;
    uint32_t state = (uint32_t)rd_i32(w, safe, obj + L->str_state);
    int64_t length = rd_i64(w, safe, obj + L->str_length);
    unsigned kind = state >> L->state_kind_shift & 7;
    bool compact = state >> L->state_compact_shift & 1, ascii = state >> L->state_ascii_shift & 1;
    if (w->failed || length < 0 || length > (1 << 24) || (kind != 1 && kind != 2 && kind != 4))
        return -1;
    if (!compact) {
        buf[0] = '?';
        return 1;
    }
    uintptr_t data = obj + (ascii ? L->str_ascii_data : L->str_compact_data);
    /* Characters to read: the first (or last) MAX_STR_CHARS are enough. */
    int64_t first = 0, count = length;
    bool cut = false;
    if (count > MAX_STR_CHARS) {
        cut = true;
        count = MAX_STR_CHARS;
        if (keep_tail)
            first = length - count;
    }
    uint8_t raw[MAX_STR_CHARS * 4];
    if (count > 0 && !rd(w, safe, data + (uintptr_t)(first * kind), raw, (size_t)(count * kind)))
        return -1;
    unsigned n = 0;
    if (!keep_tail) {
        for (int64_t i = 0; i < count; i++) {
            uint32_t c = kind == 1 ? raw[i]
                         : kind == 2
                             ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8)
                             : (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                                   (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
            unsigned k = put_utf8(buf, n, cap, c);
            if (!k)
                break;
            n += k;
        }
        return (int)n;
    }
    /* The tail: encode backwards into the end of a scratch buffer. */
    char tail[MAX_STR_CHARS * 4];
    unsigned at = sizeof tail;
    for (int64_t i = count - 1; i >= 0; i--) {
        uint32_t c = kind == 1 ? raw[i]
                     : kind == 2
                         ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8)
                         : (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                               (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
        char one[4];
        unsigned k = put_utf8(one, 0, 4, c);
        if (sizeof tail - at + k > cap - (cap > 3 ? 3 : 0)) {
            cut = true;
            break;
        }
        at -= k;
        memcpy(tail + at, one, k);
    }
    unsigned len = (unsigned)(sizeof tail - at);
    if (cut && cap > 3) {
        memcpy(buf, "...", 3);
        n = 3;
    }
    if (n + len > cap)
        len = cap - n;
    memcpy(buf + n, tail + sizeof tail - len, len);
    return (int)(n + len);
}

/* ---- code objects: ids, and sending names and line tables ---- */

HOT bool read_key(struct walk *w, const struct ct_py_layout *L, const bool safe, uintptr_t code,
                  struct code_key *k)
{
    k->code = code;
    k->name = rd_ptr(w, safe, code + L->co_name);
    k->file = rd_ptr(w, safe, code + L->co_filename);
    k->lines = rd_ptr(w, safe, code + L->co_linetable);
    k->first_line = rd_i32(w, safe, code + L->co_firstlineno);
    if (!is_type_l(w, L, safe, k->lines, w->py->bytes_type) || w->failed)
        return false;
    int64_t len = rd_i64(w, safe, k->lines + L->ob_size);
    if (len < 0 || len > (1 << 26))
        return false;
    k->lines_len = (uint32_t)len;
    k->head = 0;
    rd(w, safe, k->lines + L->bytes_sval, &k->head, len < 8 ? (size_t)len : 8);
    return !w->failed;
}

static void send_code_raw(struct walk *w, uint32_t id, const struct code_key *k)
{
    const bool safe = w->safe;
    char name[NAME_MAX_BYTES], file[CT_AUX_PAYLOAD_BYTES];
    int name_len = read_str(w, k->name, name, sizeof name, false);
    int file_len =
        name_len < 0 ? -1 : read_str(w, k->file, file, CT_AUX_PAYLOAD_BYTES - name_len, true);
    if (name_len < 0 || file_len < 0) {
        fail(w, "a code object's name or file is not a str");
        return;
    }
    if (name_len > NAME_MAX_BYTES) /* read_str keeps to its cap; said for the compiler */
        name_len = NAME_MAX_BYTES;
    if (file_len > CT_AUX_PAYLOAD_BYTES - name_len)
        file_len = CT_AUX_PAYLOAD_BYTES - name_len;
    uint32_t sent = k->lines_len > CT_PYLINES_MAX ? CT_PYLINES_MAX : (uint32_t)k->lines_len;
    union ct_any_record u;
    ct_aux_init(&u, CT_AUX_PYCODE, id);
    u.aux.count = (uint16_t)name_len;
    u.aux.total = (uint16_t)file_len;
    ct_aux_put_bytes(&u.aux, 0, name, (unsigned)name_len);
    ct_aux_put_bytes(&u.aux, (unsigned)name_len, file, (unsigned)file_len);
    uint32_t first_line =
        k->first_line > 0 && k->first_line < INT32_MAX ? (uint32_t)k->first_line : 0;
    ct_aux_set_pycode_lines(&u.aux,
                            (uint32_t)(k->lines_len > UINT32_MAX ? UINT32_MAX : k->lines_len),
                            first_line, w->L->line_format);
    ct_session_append(&u.rec);
    uintptr_t bytes = k->lines + w->L->bytes_sval;
    for (uint32_t at = 0; at < sent && !w->failed; at += CT_AUX_PAYLOAD_BYTES) {
        uint32_t n = sent - at < CT_AUX_PAYLOAD_BYTES ? sent - at : CT_AUX_PAYLOAD_BYTES;
        uint8_t chunk[CT_AUX_PAYLOAD_BYTES];
        if (!rd(w, safe, bytes + at, chunk, n))
            break;
        ct_aux_init(&u, CT_AUX_PYLINES, id);
        u.aux.first = (uint16_t)at;
        u.aux.count = (uint16_t)n;
        u.aux.total = (uint16_t)sent;
        ct_aux_put_bytes(&u.aux, 0, chunk, n);
        ct_session_append(&u.rec);
    }
}

HOT bool same_key(const struct code_key *a, const struct code_key *b)
{
    return !a->version && a->name == b->name && a->file == b->file && a->lines == b->lines &&
           a->lines_len == b->lines_len && a->head == b->head && a->first_line == b->first_line;
}

HOT uint32_t raw_code_id(struct walk *w, const struct ct_py_layout *L, const bool safe,
                         const uint8_t kind, uintptr_t code)
{
    struct code_key k;
    k.code = code;
    k.version = 0;
    if (kind == CT_PY_ENTRY_SHIM) /* 3.12+: the family with co_version (layout_family) */
        rd(w, safe, code + L->co_version, &k.version, sizeof k.version);
    /* With a version, (address, version) is the identity: one load. */
    bool have_key = false;
    if (!k.version) {
        if (!read_key(w, L, safe, code, &k)) {
            fail(w, "a code object's line table is not a bytes object");
            return 0;
        }
        have_key = true;
    }
    if (!raw_codes)
        return 0;
    uint64_t h = (uint64_t)code * 0x9e3779b97f4a7c15ull;
    size_t i = (size_t)(h >> 40) & (CODE_SLOTS - 1);
    for (int probe = 0; probe < CODE_PROBES; probe++, i = (i + 1) & (CODE_SLOTS - 1)) {
        struct raw_slot *s = &raw_codes[i];
        uint64_t seen = __atomic_load_n(&s->key.code, __ATOMIC_ACQUIRE);
        if (seen == 0) {
            if (!__atomic_compare_exchange_n(&s->key.code, &seen, (uint64_t)code, false,
                                             __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                goto claimed_by_another;
            if (!have_key && !read_key(w, L, safe, code, &k))
                fail(w, "a code object's line table is not a bytes object");
            uint32_t id = 0;
            if (!w->failed) {
                s->key = k;
                id = __atomic_add_fetch(&next_code_id, 1, __ATOMIC_RELAXED);
                send_code_raw(w, id, &k);
            }
            __atomic_store_n(&s->id, w->failed ? UINT32_MAX : id, __ATOMIC_RELEASE);
            return w->failed ? 0 : id;
        }
    claimed_by_another:
        if (seen != (uint64_t)code)
            continue;
        uint32_t id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
        if (id == 0)
            return 0; /* being sent by another thread: unnamed this once */
        if (id != UINT32_MAX && (k.version ? s->key.version == k.version : same_key(&s->key, &k)))
            return id;
        /* Another code object once lived at this address: look further. */
    }
    return 0;
}

/* ---- the raw walk ---- */

/*
 * Whether the thread state is this thread's and its interpreter one of the
 * runtime's: checks of the table that need no frame (a thread may run
 * none), made on the walks that are not trusted yet.
 */
static void check_interpreter(struct walk *w, uintptr_t tstate)
{
    const bool safe = w->safe;
    const struct ct_py_layout *L = w->L;
    if (L->rt_interpreters_head == CT_PY_NONE || L->ts_interp == CT_PY_NONE || !w->py->runtime)
        return;
    if (L->ts_thread_id != CT_PY_NONE &&
        rd_ptr(w, safe, tstate + L->ts_thread_id) != (uintptr_t)pthread_self() && !w->failed) {
        fail(w, "the thread state is not this thread's");
        return;
    }
    uintptr_t mine = rd_ptr(w, safe, tstate + L->ts_interp);
    uintptr_t interp = rd_ptr(w, safe, w->py->runtime + L->rt_interpreters_head);
    for (int i = 0; i < 256 && interp && !w->failed; i++) {
        if (interp == mine)
            return;
        interp = rd_ptr(w, safe, interp + L->interp_next);
    }
    fail(w, "the thread state's interpreter is not among the runtime's");
}

/* The frame the thread is running, innermost; 0 when it runs none. */
HOT uintptr_t current_frame(struct walk *w, const struct ct_py_layout *L, const bool safe,
                            uintptr_t tstate)
{
    uintptr_t at = rd_ptr(w, safe, tstate + L->ts_frame);
    if (at && L->cframe_current_frame != CT_PY_NONE)
        at = rd_ptr(w, safe, at + L->cframe_current_frame); /* 3.11, 3.12: via the _PyCFrame */
    return w->failed ? 0 : at;
}

/*
 * Where frame is in its code, as CT_PYFRAME_INSTR's value; false for a
 * frame that has not begun (skipped, as PyFrame_GetBack skips it).
 */
HOT bool frame_offset(struct walk *w, const struct ct_py_layout *L, const bool safe,
                      const uint8_t kind, uintptr_t frame, uintptr_t code, uint8_t owner,
                      uint32_t *offset)
{
    if (kind == CT_PY_ENTRY_EVERY) { /* 3.10: f_lasti */
        int32_t lasti = rd_i32(w, safe, frame + L->fr_instr);
        uintptr_t bytecode = rd_ptr(w, safe, code + L->co_code);
        int64_t size = is_type_l(w, L, safe, bytecode, w->py->bytes_type)
                           ? rd_i64(w, safe, bytecode + L->ob_size)
                           : -1;
        if (w->failed || size < 0) {
            fail(w, "a 3.10 code object without its bytecode");
            return false;
        }
        if (lasti < 0) {
            *offset = CT_PYFRAME_VALUE_MASK; /* not started: its first line */
            return true;
        }
        if ((int64_t)lasti * 2 >= size) {
            fail(w, "an instruction index past the bytecode");
            return false;
        }
        *offset = (uint32_t)lasti * 2;
        return true;
    }
    uintptr_t instr = rd_ptr(w, safe, frame + L->fr_instr);
    int64_t units = rd_i64(w, safe, code + L->ob_size);
    int32_t traceable = rd_i32(w, safe, code + L->co_firsttraceable); /* 3.11+ */
    /* Bytes from one code unit before the code (where prev_instr points
     * until the first instruction runs) to the instruction. */
    uint64_t from = (uint64_t)instr - (uint64_t)(code + L->co_code_adaptive) + 2;
    if (w->failed)
        return false;
    if ((from & 1) || units < 0 || from > (uint64_t)units * 2) {
        fail(w, "an instruction pointer outside its code object");
        return false;
    }
    int64_t index = (int64_t)(from >> 1) - 1;
    if (owner != L->owner_generator && index < traceable)
        return false; /* incomplete: has not begun */
    *offset = index < 0 ? CT_PYFRAME_VALUE_MASK : (uint32_t)index * 2;
    return true;
}

/*
 * Walks the thread's frames; with `codes`, fills w->out with frames and
 * sends new code objects; without (the API check), fills code_out[] and
 * offset_out[] instead. Returns the frames found; w->failed on any doubt.
 */
HOT int walk_frames(struct walk *w, const bool safe, const uint8_t kind, uintptr_t tstate,
                    uintptr_t *code_out, uint32_t *offset_out)
{
    /* The walk's own copy of the layout and of its output pointer: loads
     * through them cannot be clobbered by the stores of the walk itself,
     * so the offsets stay in registers. */
    const struct ct_py_layout layout = *w->L;
    const struct ct_py_layout *L = &layout;
    uint64_t *const out = w->out;
    if (w->safe && !out)
        check_interpreter(w, tstate); /* the API check's walk; raw_capture checks its own */
    uintptr_t frame = current_frame(w, L, safe, tstate);
    int n = 0;
    const int max = w->max;
    struct memo_slot *const memos = memo; /* the thread's, found once */
    int steps = 4 * max + 64;             /* shims and unbegun frames are not counted in n */
    while (frame && n < max && !w->failed) {
        if (--steps < 0 || (frame & 7)) {
            fail(w, steps < 0 ? "a frame chain that does not end" : "a misaligned frame");
            break;
        }
        uint8_t owner = kind != CT_PY_ENTRY_EVERY ? rd_u8(w, safe, frame + L->fr_owner) : 0;
        uintptr_t previous = rd_ptr(w, safe, frame + L->fr_previous);
        if (kind == CT_PY_ENTRY_SHIM && owner >= L->owner_cstack) {
            /* The C stack's entry shim: the frame above it began an eval loop. */
            if (n > 0 && kind == CT_PY_ENTRY_SHIM && out)
                out[n - 1] |= CT_PYFRAME_ENTRY;
            frame = previous;
            continue;
        }
        uintptr_t code = rd_ptr(w, safe, frame + L->fr_code) & ~(uintptr_t)L->code_tag_bits;
        struct memo_slot *m = NULL;
        uintptr_t instr = 0;
        uint32_t version = 0;
        if (!safe && out) {
            instr = kind == CT_PY_ENTRY_EVERY ? (uintptr_t)rd_i32(w, safe, frame + L->fr_instr)
                                              : rd_ptr(w, safe, frame + L->fr_instr);
            if (kind == CT_PY_ENTRY_SHIM && code)
                rd(w, safe, code + L->co_version, &version, sizeof version);
            m = &memos[((uint64_t)frame >> 3) % MEMO_SLOTS];
            if (m->frame == frame && m->code == code && m->instr == instr &&
                m->version == version) {
                bool flagged = kind == CT_PY_ENTRY_FLAG && rd_u8(w, safe, frame + L->fr_is_entry);
                out[n++] = m->word | (flagged ? CT_PYFRAME_ENTRY : 0);
                frame = previous;
                continue;
            }
        }
        if (!is_type_l(w, L, safe, code, w->py->code_type)) {
            fail(w, "a frame whose code is not a code object");
            break;
        }
        uint32_t offset;
        if (!frame_offset(w, L, safe, kind, frame, code, owner, &offset)) {
            frame = previous;
            continue;
        }
        if (w->failed)
            break;
        if (!out) {
            code_out[n] = code;
            offset_out[n] = offset;
            n++;
        } else {
            bool entry = kind == CT_PY_ENTRY_EVERY ||
                         (kind == CT_PY_ENTRY_FLAG && rd_u8(w, safe, frame + L->fr_is_entry));
            uint32_t id = raw_code_id(w, L, safe, kind, code);
            if (w->failed)
                break;
            uint64_t word = CT_PYFRAME(id, CT_PYFRAME_INSTR | (offset & CT_PYFRAME_VALUE_MASK));
            if (m && id) /* named: the same frame will be recorded the same way */
                *m = (struct memo_slot){.frame = frame,
                                        .code = code,
                                        .instr = instr,
                                        .version = version,
                                        .word = word |
                                                (kind == CT_PY_ENTRY_EVERY ? CT_PYFRAME_ENTRY : 0)};
            out[n++] = word | (entry ? CT_PYFRAME_ENTRY : 0);
        }
        frame = previous;
    }
    if (out && n > 0 && kind == CT_PY_ENTRY_SHIM && !w->failed) {
        /* The outermost frame began the first eval loop; cut by max, the
         * shim below the last frame still marks it. */
        if (!frame)
            out[n - 1] |= CT_PYFRAME_ENTRY;
        else if (!(frame & 7) && rd_u8(w, safe, frame + L->fr_owner) >= L->owner_cstack &&
                 !w->failed)
            out[n - 1] |= CT_PYFRAME_ENTRY;
    }
    return w->failed ? 0 : n;
}

/*
 * The walk, once with guarded reads and once with plain loads per family of
 * versions, so that what a family lacks costs nothing: 3.10 (a frame
 * object per frame, f_lasti), 3.11 (is_entry), 3.12+ (entry shims and
 * co_version). layout_family() says which a table belongs to.
 */
static int walk_guarded(struct walk *w, uintptr_t tstate, uintptr_t *code_out, uint32_t *offset_out)
{
    return walk_frames(w, true, w->L->entry_kind, tstate, code_out, offset_out);
}

static int walk_direct_310(struct walk *w, uintptr_t tstate, uintptr_t *code_out,
                           uint32_t *offset_out)
{
    return walk_frames(w, false, CT_PY_ENTRY_EVERY, tstate, code_out, offset_out);
}

static int walk_direct_311(struct walk *w, uintptr_t tstate, uintptr_t *code_out,
                           uint32_t *offset_out)
{
    return walk_frames(w, false, CT_PY_ENTRY_FLAG, tstate, code_out, offset_out);
}

static int walk_direct_312(struct walk *w, uintptr_t tstate, uintptr_t *code_out,
                           uint32_t *offset_out)
{
    return walk_frames(w, false, CT_PY_ENTRY_SHIM, tstate, code_out, offset_out);
}

static int raw_walk(struct walk *w, uintptr_t tstate, uintptr_t *code_out, uint32_t *offset_out)
{
    if (w->safe)
        return walk_guarded(w, tstate, code_out, offset_out);
    switch (w->L->entry_kind) {
    case CT_PY_ENTRY_EVERY:
        return walk_direct_310(w, tstate, code_out, offset_out);
    case CT_PY_ENTRY_FLAG:
        return walk_direct_311(w, tstate, code_out, offset_out);
    default:
        return walk_direct_312(w, tstate, code_out, offset_out);
    }
}

/* 3.10, 3.11: whether more than one interpreter exists (see raw_capture). */
static bool several_interpreters(struct walk *w)
{
    const bool safe = w->safe;
    const struct ct_py_layout *L = w->L;
    if (L->version >= 0x030c || L->rt_interpreters_head == CT_PY_NONE || !w->py->runtime)
        return false; /* 3.12 binds the gilstate to the interpreter the thread runs */
    uintptr_t head = rd_ptr(w, safe, w->py->runtime + L->rt_interpreters_head);
    return head && rd_ptr(w, safe, head + L->interp_next) != 0;
}

/* ---- the public API: the fallback, and the check of the layout ---- */

/* A Python str attribute of obj as UTF-8 into buf (GIL held; see read_str). */
static unsigned api_read_name(const struct py_api *py, void *obj, const char *attr, char *buf,
                              unsigned cap, bool keep_tail)
{
    unsigned len = 0;
    void *value = py->getattr(obj, attr);
    const char *text = value ? py->as_utf8(value) : NULL;
    if (text) {
        size_t n = strlen(text);
        if (n <= cap) {
            memcpy(buf, text, n);
            len = (unsigned)n;
        } else if (keep_tail && cap > 3) {
            memcpy(buf, "...", 3);
            memcpy(buf + 3, text + n - (cap - 3), cap - 3);
            len = cap;
        } else {
            memcpy(buf, text, cap);
            len = cap;
        }
    }
    if (value)
        py->decref(value);
    if (!text) {
        py->err_clear(); /* ours: no exception was pending before (see api_capture) */
        buf[0] = '?';
        len = 1;
    }
    return len;
}

static void api_send_code(const struct py_api *py, void *code, uint32_t id)
{
    char name[NAME_MAX_BYTES], file[CT_AUX_PAYLOAD_BYTES];
    unsigned name_len = api_read_name(py, code, "co_name", name, sizeof name, false);
    if (name_len > sizeof name) /* api_read_name keeps to its cap; said for the compiler */
        name_len = sizeof name;
    unsigned file_len =
        api_read_name(py, code, "co_filename", file, CT_AUX_PAYLOAD_BYTES - name_len, true);
    if (file_len > CT_AUX_PAYLOAD_BYTES - name_len)
        file_len = CT_AUX_PAYLOAD_BYTES - name_len;
    for (unsigned i = 0; i < name_len; i++)
        name[i] = name[i] ? name[i] : '?';
    for (unsigned i = 0; i < file_len; i++)
        file[i] = file[i] ? file[i] : '?';
    union ct_any_record u;
    ct_aux_init(&u, CT_AUX_PYCODE, id);
    u.aux.count = (uint16_t)name_len;
    u.aux.total = (uint16_t)file_len;
    ct_aux_put_bytes(&u.aux, 0, name, name_len);
    ct_aux_put_bytes(&u.aux, name_len, file, file_len);
    ct_session_append(&u.rec);
}

static uint32_t api_code_id(const struct py_api *py, void *code)
{
    if (!api_codes)
        return 0;
    uint64_t key = (uint64_t)(uintptr_t)code;
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    size_t i = (size_t)(h >> 40) & (CODE_SLOTS - 1);
    for (int probe = 0; probe < CODE_PROBES; probe++, i = (i + 1) & (CODE_SLOTS - 1)) {
        struct api_slot *s = &api_codes[i];
        uint64_t seen = __atomic_load_n(&s->code, __ATOMIC_ACQUIRE);
        if (seen == 0) {
            if (__atomic_compare_exchange_n(&s->code, &seen, key, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                uint32_t id = __atomic_add_fetch(&next_code_id, 1, __ATOMIC_RELAXED);
                py->incref(code); /* keeps the address ours: see the header */
                api_send_code(py, code, id);
                __atomic_store_n(&s->id, id, __ATOMIC_RELEASE);
                return id;
            }
        }
        if (seen == key)
            return __atomic_load_n(&s->id, __ATOMIC_ACQUIRE); /* 0 while being sent */
    }
    return 0;
}

/* The frames through the API: (code, line) pairs, or records with out. */
static int api_walk(const struct py_api *py, void *tstate, uint64_t *out, void **codes, int *lines,
                    int max)
{
    void *frame = py->thread_frame(tstate);
    int n = 0;
    while (frame && n < max) {
        void *code = py->frame_code(frame);
        int line = py->frame_line(frame);
        if (out) {
            uint32_t id = code ? api_code_id(py, code) : 0;
            out[n] = CT_PYFRAME(id, line > 0 ? (uint32_t)line & CT_PYFRAME_VALUE_MASK : 0);
        } else {
            codes[n] = code;
            lines[n] = line;
        }
        n++;
        if (code)
            py->decref(code); /* the frame keeps it alive */
        void *back = py->frame_back(frame);
        py->decref(frame);
        frame = back;
    }
    if (frame)
        py->decref(frame);
    return n;
}

/*
 * The layout against the API, once, with the GIL held: the same code
 * objects in the same order, the same lines (from the line table, as the
 * writer will find them) and the same names.
 */
static void check_against_api(const struct py_api *py, void *tstate)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&P.checking, &expected, 1, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return; /* another thread is at it */
    void *api_codes_seen[CHECK_FRAMES];
    int api_lines[CHECK_FRAMES];
    uintptr_t raw_codes_seen[CHECK_FRAMES];
    uint32_t raw_offsets[CHECK_FRAMES];
    int na = api_walk(py, tstate, NULL, api_codes_seen, api_lines, CHECK_FRAMES);
    struct walk w = {.py = py, .L = &P.L, .max = CHECK_FRAMES};
    w.safe = __atomic_load_n(&P.mode, __ATOMIC_ACQUIRE) == MODE_RAW_UNCHECKED;
    int nr = raw_walk(&w, (uintptr_t)tstate, raw_codes_seen, raw_offsets);
    char why[160] = "";
    if (w.failed) {
        snprintf(why, sizeof why, "%s", w.why);
    } else if (na != nr) {
        snprintf(why, sizeof why, "%d frames where the API sees %d", nr, na);
    }
    for (int i = 0; !*why && i < na; i++) {
        uintptr_t code = raw_codes_seen[i];
        if ((uintptr_t)api_codes_seen[i] != code) {
            snprintf(why, sizeof why, "frame %d has another code object than the API's", i);
            break;
        }
        struct code_key k = {0};
        if (!read_key(&w, w.L, w.safe, code, &k)) {
            snprintf(why, sizeof why, "frame %d: %s", i, w.why ? w.why : "unreadable code");
            break;
        }
        uint8_t table[CHECK_TABLE];
        size_t len = k.lines_len < sizeof table ? (size_t)k.lines_len : sizeof table;
        rd(&w, w.safe, k.lines + P.L.bytes_sval, table, len);
        int64_t line = ct_pylines_line(P.L.line_format, k.first_line, table, len, raw_offsets[i]);
        /* A cut table gives 0 beyond its end: nothing to compare then. */
        if (line != 0 && line != api_lines[i]) {
            snprintf(why, sizeof why, "frame %d is at line %lld where the API says %d", i,
                     (long long)line, api_lines[i]);
            break;
        }
        char raw_name[NAME_MAX_BYTES], api_name[NAME_MAX_BYTES];
        int rn = read_str(&w, k.name, raw_name, sizeof raw_name, false);
        unsigned an = api_read_name(py, (void *)code, "co_name", api_name, sizeof api_name, false);
        if (rn < 0 || (unsigned)rn != an || memcmp(raw_name, api_name, an) != 0) {
            snprintf(why, sizeof why, "frame %d's function name differs from the API's", i);
            break;
        }
    }
    if (*why) {
        fall_back(py, why);
    } else if (na > 0) {
        __atomic_store_n(&P.api_checked, 1, __ATOMIC_RELEASE);
        int mode = MODE_RAW_UNCHECKED;
        __atomic_compare_exchange_n(&P.mode, &mode, MODE_RAW, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
        say_raw(py, "against CPython's API");
    }
    __atomic_store_n(&P.checking, 0, __ATOMIC_RELEASE);
}

/* ---- capture ---- */

static int raw_capture(const struct py_api *py, uintptr_t tstate, bool held, uint64_t *out, int max)
{
    int mode = __atomic_load_n(&P.mode, __ATOMIC_ACQUIRE);
    struct walk w = {
        .py = py, .L = &P.L, .safe = mode == MODE_RAW_UNCHECKED, .out = out, .max = max};
    /* 3.10 and 3.11 keep a thread's gilstate thread state in the main
     * interpreter while it runs a sub-interpreter: with the GIL released,
     * that chain may not be the one running. Then nothing, never a wrong
     * frame. */
    if (w.safe)
        check_interpreter(&w, tstate); /* before anything else is read with the table */
    bool several = !w.failed && !held && several_interpreters(&w);
    int n = w.failed || several ? 0 : raw_walk(&w, tstate, NULL, NULL);
    if (w.failed) {
        fall_back(py, w.why);
        return -1;
    }
    if (w.safe && n > 0) {
        int expected = MODE_RAW_UNCHECKED;
        if (__atomic_compare_exchange_n(&P.mode, &expected, MODE_RAW, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            say_raw(py, "by a walk of guarded reads");
    }
    return n;
}

int ct_py_capture(uint64_t *out, int max)
{
    const struct py_api *py = __atomic_load_n(&published, __ATOMIC_ACQUIRE);
    if (!py || max <= 0 || !py->is_initialized())
        return 0;
    if (__atomic_load_n(&P.tell_child, __ATOMIC_RELAXED) &&
        __atomic_exchange_n(&P.tell_child, 0, __ATOMIC_ACQ_REL))
        send_meta("python_frames", P.told); /* a forked child's first capture */
    if (py->is_finalizing && py->is_finalizing())
        return 0;
    void *tstate = py->this_thread_state();
    if (!tstate)
        return 0;
    /* PyGILState_Check alone answers 1 when its check is disabled (once a
     * sub-interpreter exists), so the state holding the GIL must be ours. */
    bool held = py->gil_check() && (!py->current_state || py->current_state() == tstate);
    int mode = __atomic_load_n(&P.mode, __ATOMIC_ACQUIRE);
    if (mode >= MODE_RAW_UNCHECKED) {
        if (held && !__atomic_load_n(&P.api_checked, __ATOMIC_ACQUIRE) && !py->err_occurred())
            check_against_api(py, tstate);
        if (__atomic_load_n(&P.mode, __ATOMIC_ACQUIRE) >= MODE_RAW_UNCHECKED) {
            int n = raw_capture(py, (uintptr_t)tstate, held, out, max);
            if (n >= 0)
                return n;
        }
    }
    if (!__atomic_exchange_n(&P.said_api, 1, __ATOMIC_ACQ_REL)) {
        /* Only the API from the start (no layout): say so, once. */
        char text[CT_AUX_PAYLOAD_BYTES];
        snprintf(text, sizeof text, "with the GIL held only (API): %.170s", P.why);
        send_meta("python_frames", text);
    }
    if (!held) {
        if (!P.api_chosen)
            ct_warn_once(CT_PROBLEM_PYFRAMES,
                         "Python frames cannot be read without the GIL (%s): only calls made "
                         "with the GIL held get them",
                         P.why);
        return 0;
    }
    if (py->err_occurred())
        return 0; /* the API calls below would clobber it */
    return api_walk(py, tstate, out, NULL, NULL, max);
}

void ct_py_after_fork_child(void)
{
    /* The forking thread is the child's only one; its memo names code ids
     * of the parent's trace. */
    memset(memo, 0, sizeof memo);
    if (P.told[0])
        __atomic_store_n(&P.tell_child, 1, __ATOMIC_RELEASE);
    /* Zero pages on next touch: the child's trace has none of the names. */
    if (api_codes)
        madvise(api_codes, CODE_SLOTS * (sizeof(struct api_slot) + sizeof(struct raw_slot)),
                MADV_DONTNEED);
}
