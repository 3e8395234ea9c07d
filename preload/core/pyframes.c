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
 * The CPython functions called on the GIL-released path (Py_IsInitialized,
 * Py_IsFinalizing, PyGILState_GetThisThreadState, and PyGILState_Check /
 * PyThreadState_GetUnchecked to learn whether the GIL is held) read a flag
 * or a thread-specific key and need no GIL: it is how PyGILState_Ensure
 * itself starts.
 *
 * Code objects get ids through two caches, one per way of reading. The API
 * cache (here) keeps a reference to each code object (the GIL is held
 * there), so its address, the key, is never reused; an open-addressing
 * table in an anonymous mapping, lock-free (compare-and-swap on the key,
 * the id published last). The raw walk and its cache are pywalk.c's.
 */
#include "pyframes.h"

#include <assert.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pylayout.h"
#include "pywalk.h"
#include "resolve.h"
#include "session.h"
#include "cutrace/stackrec.h"
#include "warn.h"

#define CODE_SLOTS   32768 /* the API cache; a power of two */
#define CODE_PROBES  64
#define CHECK_FRAMES 128 /* frames compared with the API at the check */

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
    struct ct_py_types types; /* for reading without the API */
    unsigned version;         /* 0x030c for 3.12; 0 unknown */
    char version_text[16];
};

struct api_slot {
    uint64_t code; /* the code object's address, 0 = free */
    uint32_t id;   /* 0 until its names were sent */
    uint32_t pad;
};

static struct py_api api;
static const struct py_api *published; /* &api once complete */
static struct api_slot *api_codes;

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
    } else if (!a->types.code || !a->types.str || !a->types.bytes) {
        snprintf(P.why, sizeof P.why, "CPython %s does not export its type objects",
                 a->version_text);
    } else {
        P.L = *table;
        assert(ct_pywalk_layout_complete(&P.L));
        P.source = imposed ? "the table imposed by CUTRACE_PYFRAMES" : "the built-in table";
        if (!imposed && a->types.runtime &&
            ct_py_layout_from_debug_offsets((const void *)a->types.runtime, a->version, &P.L))
            P.source = "the interpreter's debug offsets";
        if (!ct_pywalk_layout_complete(&P.L)) { /* the debug offsets keep every field */
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
    a.types.code = (uintptr_t)sym("PyCode_Type");
    a.types.str = (uintptr_t)sym("PyUnicode_Type");
    a.types.bytes = (uintptr_t)sym("PyBytes_Type");
    a.types.runtime = (uintptr_t)sym("_PyRuntime");
    find_version(&a);
    void *mem = mmap(NULL, CODE_SLOTS * sizeof(struct api_slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    api_codes = mem == MAP_FAILED ? NULL : mem;
    ct_pywalk_init();
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

/* ---- the public API: the fallback, and the check of the layout ---- */

/* A Python str attribute of obj as UTF-8 into buf (GIL held): its head, or
 * with keep_tail its tail after "..." when it is longer. */
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
    char name[CT_PY_NAME_MAX_BYTES], file[CT_AUX_PAYLOAD_BYTES];
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
                uint32_t id = ct_py_new_code_id();
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
    struct ct_py_walk w = {.types = &py->types, .L = &P.L, .max = CHECK_FRAMES};
    w.safe = __atomic_load_n(&P.mode, __ATOMIC_ACQUIRE) == MODE_RAW_UNCHECKED;
    int nr = ct_pywalk_frames(&w, (uintptr_t)tstate, raw_codes_seen, raw_offsets);
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
        int64_t line;
        char raw_name[CT_PY_NAME_MAX_BYTES], api_name[CT_PY_NAME_MAX_BYTES];
        unsigned rn;
        if (!ct_pywalk_code_info(&w, code, raw_offsets[i], &line, raw_name, sizeof raw_name, &rn)) {
            snprintf(why, sizeof why, "frame %d: %s", i, w.why);
            break;
        }
        /* A cut table gives 0 beyond its end: nothing to compare then. */
        if (line != 0 && line != api_lines[i]) {
            snprintf(why, sizeof why, "frame %d is at line %lld where the API says %d", i,
                     (long long)line, api_lines[i]);
            break;
        }
        unsigned an = api_read_name(py, (void *)code, "co_name", api_name, sizeof api_name, false);
        if (rn != an || memcmp(raw_name, api_name, an) != 0) {
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

/*
 * Whether this thread holds the GIL. The thread state holding it is this
 * thread's own: PyGILState_Check alone answers 1 when its check is
 * disabled (once a sub-interpreter exists). Where CPython exports the
 * current state (3.5 and later), that comparison is the whole answer (it
 * is what PyGILState_Check compares, with its check enabled) and costs a
 * load instead of a thread-specific key's lookup.
 */
static bool gil_held(const struct py_api *py, void *tstate)
{
    if (py->current_state)
        return py->current_state() == tstate;
    return py->gil_check();
}

static int raw_capture(const struct py_api *py, uintptr_t tstate, int held, uint64_t *out, int max)
{
    int mode = __atomic_load_n(&P.mode, __ATOMIC_ACQUIRE);
    struct ct_py_walk w = {
        .types = &py->types, .L = &P.L, .safe = mode == MODE_RAW_UNCHECKED, .out = out, .max = max};
    /* 3.10 and 3.11 keep a thread's gilstate thread state in the main
     * interpreter while it runs a sub-interpreter: with the GIL released,
     * that chain may not be the one running. Then nothing, never a wrong
     * frame. */
    if (w.safe)
        ct_pywalk_check_thread(&w, tstate); /* before anything else is read with the table */
    /* held < 0: not asked yet (a load where the current state is exported,
     * cheaper than looking at the interpreters). */
    bool several = !w.failed && !(held < 0 ? gil_held(py, (void *)tstate) : held) &&
                   ct_pywalk_several_interpreters(&w);
    int n = w.failed || several ? 0 : ct_pywalk_frames(&w, tstate, NULL, NULL);
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
    /* Whether the GIL is held is asked only where it matters: until the
     * check against the API has run, on 3.10 and 3.11 with several
     * interpreters, and on the API's road. -1: not asked. */
    int held = -1;
    int mode = __atomic_load_n(&P.mode, __ATOMIC_ACQUIRE);
    if (mode >= MODE_RAW_UNCHECKED) {
        if (!__atomic_load_n(&P.api_checked, __ATOMIC_ACQUIRE)) {
            held = gil_held(py, tstate);
            if (held && !py->err_occurred())
                check_against_api(py, tstate);
        }
        if (__atomic_load_n(&P.mode, __ATOMIC_ACQUIRE) >= MODE_RAW_UNCHECKED) {
            int n = raw_capture(py, (uintptr_t)tstate, held, out, max);
            if (n >= 0)
                return n;
        }
    }
    if (held < 0)
        held = gil_held(py, tstate);
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
    ct_pywalk_after_fork_child();
    if (P.told[0])
        __atomic_store_n(&P.tell_child, 1, __ATOMIC_RELEASE);
    /* Zero pages on next touch: the child's trace has none of the names. */
    if (api_codes)
        madvise(api_codes, CODE_SLOTS * sizeof(struct api_slot), MADV_DONTNEED);
}
