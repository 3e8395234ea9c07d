/*
 * pyframes.c - Python frames through CPython's public C API (pyframes.h).
 *
 * Safety rules, each for a reason:
 *   - only with the GIL held by this thread: PyGILState_Check() alone is
 *     not enough (it answers 1 when the check is disabled, e.g. once a
 *     sub-interpreter exists), so the thread state holding the GIL must
 *     also be this thread's;
 *   - never while the interpreter is uninitialized or finalizing, or while
 *     an exception is pending (the API calls below would clobber it);
 *   - every new reference is released (PyFrame_GetCode, PyFrame_GetBack and
 *     PyThreadState_GetFrame return strong references since 3.9), except
 *     one kept on each cached code object so that its address, the cache
 *     key, can never be reused by another;
 *   - a failure of our own attribute reads is cleared, never left to the
 *     program.
 *
 * The code cache is an open-addressing table of code object addresses in
 * an anonymous mapping made when an interpreter is found: lock-free (the
 * GIL already serializes its users within one interpreter; CAS covers
 * interpreters with their own GIL). When it is full, frames of new code
 * objects are recorded with code id 0 ("unknown").
 */
#include "pyframes.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#include "resolve.h"
#include "session.h"
#include "stackrec.h"

#define CODE_SLOTS     32768 /* a power of two */
#define CODE_PROBES    64
#define NAME_MAX_BYTES 100 /* the function name's share of a record; the file gets the rest */

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
};

struct code_slot {
    uint64_t code; /* the code object's address, 0 = free */
    uint32_t id;   /* 0 until its names were sent */
    uint32_t pad;
};

static struct py_api api;
static const struct py_api *published; /* &api once complete */
static struct code_slot *codes;
static uint32_t next_code_id; /* atomic; ids start at 1 */

static void *sym(const char *name)
{
    if (!ct_real_dlsym)
        ct_dlsym_init();
    return ct_real_dlsym ? ct_real_dlsym(RTLD_DEFAULT, name) : NULL;
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
    void *mem = mmap(NULL, CODE_SLOTS * sizeof(struct code_slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    codes = mem == MAP_FAILED ? NULL : mem;
    api = a;
    __atomic_store_n(&published, &api, __ATOMIC_RELEASE);
    return true;
}

bool ct_py_present(void)
{
    return __atomic_load_n(&published, __ATOMIC_ACQUIRE) != NULL;
}

/* A Python str attribute of obj as UTF-8 into buf (at most cap bytes, no
 * NUL kept); the tail of a longer value, after "...", when keep_tail. */
static unsigned read_name(const struct py_api *py, void *obj, const char *attr, char *buf,
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
        py->err_clear(); /* ours: no exception was pending before (see capture) */
        buf[0] = '?';
        len = 1;
    }
    return len;
}

/* Sends the names of a newly cached code object (GIL held). */
static void send_code(const struct py_api *py, void *code, uint32_t id)
{
    char name[NAME_MAX_BYTES], file[CT_AUX_PAYLOAD_BYTES];
    unsigned name_len = read_name(py, code, "co_name", name, sizeof name, false);
    unsigned file_len =
        read_name(py, code, "co_filename", file, CT_AUX_PAYLOAD_BYTES - name_len, true);
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

static uint32_t code_id(const struct py_api *py, void *code)
{
    if (!codes)
        return 0;
    uint64_t key = (uint64_t)(uintptr_t)code;
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    size_t i = (size_t)(h >> 40) & (CODE_SLOTS - 1);
    for (int probe = 0; probe < CODE_PROBES; probe++, i = (i + 1) & (CODE_SLOTS - 1)) {
        struct code_slot *s = &codes[i];
        uint64_t seen = __atomic_load_n(&s->code, __ATOMIC_ACQUIRE);
        if (seen == 0) {
            if (__atomic_compare_exchange_n(&s->code, &seen, key, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                uint32_t id = __atomic_add_fetch(&next_code_id, 1, __ATOMIC_RELAXED);
                py->incref(code); /* keeps the address ours: see the header */
                send_code(py, code, id);
                __atomic_store_n(&s->id, id, __ATOMIC_RELEASE);
                return id;
            }
        }
        if (seen == key)
            return __atomic_load_n(&s->id, __ATOMIC_ACQUIRE); /* 0 while being sent */
    }
    return 0;
}

int ct_py_capture(uint64_t *out, int max)
{
    const struct py_api *py = __atomic_load_n(&published, __ATOMIC_ACQUIRE);
    if (!py || max <= 0 || !py->is_initialized())
        return 0;
    if (py->is_finalizing && py->is_finalizing())
        return 0;
    if (!py->gil_check())
        return 0;
    void *tstate = py->this_thread_state();
    if (!tstate || (py->current_state && py->current_state() != tstate))
        return 0;
    if (py->err_occurred())
        return 0;
    void *frame = py->thread_frame(tstate);
    int n = 0;
    while (frame && n < max) {
        void *code = py->frame_code(frame);
        int line = py->frame_line(frame);
        uint32_t id = code ? code_id(py, code) : 0;
        if (code)
            py->decref(code);
        out[n++] = CT_PYFRAME(id, line > 0 ? line : 0);
        void *back = py->frame_back(frame);
        py->decref(frame);
        frame = back;
    }
    if (frame)
        py->decref(frame);
    return n;
}

void ct_py_after_fork_child(void)
{
    /* Zero pages on next touch: the child's trace has none of the names. */
    if (codes)
        madvise(codes, CODE_SLOTS * sizeof(struct code_slot), MADV_DONTNEED);
}
