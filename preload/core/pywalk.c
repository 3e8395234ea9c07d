/*
 * pywalk.c - walking the calling thread's Python frames in the
 * interpreter's own memory (pywalk.h, docs/stacks.md "Python frames").
 *
 * Every read goes through rd(): plain loads, or process_vm_readv for a
 * layout not yet trusted. The walk is written once and instantiated per
 * family of versions with the family a compile-time constant, so that what
 * a family lacks costs nothing on the hot path (walk_direct_*).
 *
 * Code ids: a lock-free open-addressing table keyed by the code object's
 * address and by what identifies the object (struct code_key), since no
 * reference can be kept without the GIL to pin the address: a code object
 * freed and replaced at the same address gets an id of its own. The first
 * thread to claim a slot sends the names and line table, then publishes
 * the id; a thread that meets a slot being sent records code id 0 once. In
 * front of it, each thread's memo of the frames it recorded last.
 */
#include "pywalk.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cutrace/pylines.h"
#include "session.h"
#include "cutrace/stackrec.h"

#define CODE_SLOTS    32768 /* a power of two */
#define CODE_PROBES   64
#define MAX_STR_CHARS CT_AUX_PAYLOAD_BYTES
#define CHECK_TABLE   4096 /* line-table bytes decoded at the check */

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

#define HOT static inline __attribute__((always_inline))

/*
 * Each thread's memo of the frames it recorded last: in the steady state a
 * thread calls CUDA from the same frames again and again, and a frame at
 * the same address running the same code object (the same co_version from
 * 3.12) at the same instruction is recorded as it was then, with no
 * code-cache lookup. Indexed by frame and instruction, so that a function
 * calling CUDA from several places (the innermost frame, nearly always)
 * keeps a slot for each; two ways a set, so that two of the few frames of
 * a stack falling into one set do not evict each other on every call.
 * Thread-local, so plain loads and stores.
 */
#define MEMO_SETS 128 /* a power of two; 2 slots each: 10 KiB a thread */
struct memo_slot {
    uintptr_t frame, code, instr;
    uint32_t version;
    uint32_t pad;
    uint64_t word; /* the frame's CT_PYFRAME value, less a shim's entry mark */
};
static __thread struct memo_slot memo[MEMO_SETS][2] __attribute__((tls_model("initial-exec")));

/* The set of (frame, instr): a multiplicative hash's top bits, which
 * spread frames at any regular stride (3.11+'s per-thread data stack). */
HOT struct memo_slot *memo_set(struct memo_slot (*memos)[2], uintptr_t frame, uintptr_t instr)
{
    _Static_assert(MEMO_SETS == 128, "the index is the hash's top 7 bits");
    return memos[((uint64_t)(frame ^ instr) * 0x9e3779b97f4a7c15ull) >> 57];
}

/* Whether m is that frame, as it was; co_version only where there is one. */
HOT bool memo_is(const struct memo_slot *m, const uint8_t kind, uintptr_t frame, uintptr_t code,
                 uintptr_t instr, uint32_t version)
{
    return m->frame == frame && m->code == code && m->instr == instr &&
           (kind != CT_PY_ENTRY_SHIM || m->version == version);
}

/*
 * In front of the memo, the thread's last walk, by position from the
 * innermost frame: where the stack is the one of the thread's previous
 * call (all but the innermost frame, nearly always), each frame is one
 * comparison with what was there, without hashing. A miss falls back to
 * the memo; both are refilled from what the walk found.
 */
#define LAST_FRAMES 128 /* the deepest Python stack recorded (stacks.c's MAX_DEPTH): 5 KiB */
static __thread struct memo_slot last[LAST_FRAMES] __attribute__((tls_model("initial-exec")));

static struct raw_slot *raw_codes;
static uint32_t next_code_id; /* atomic */

/* ---- reading memory ---- */

static bool rd_guarded(struct ct_py_walk *w, uintptr_t addr, void *dst, size_t n)
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
HOT bool rd(struct ct_py_walk *w, const bool safe, uintptr_t addr, void *dst, size_t n)
{
    if (safe)
        return rd_guarded(w, addr, dst, n);
    memcpy(dst, (const void *)addr, n);
    return true;
}

HOT uintptr_t rd_ptr(struct ct_py_walk *w, const bool safe, uintptr_t addr)
{
    uintptr_t v = 0;
    rd(w, safe, addr, &v, sizeof v);
    return v;
}

HOT int64_t rd_i64(struct ct_py_walk *w, const bool safe, uintptr_t addr)
{
    int64_t v = 0;
    rd(w, safe, addr, &v, sizeof v);
    return v;
}

HOT int32_t rd_i32(struct ct_py_walk *w, const bool safe, uintptr_t addr)
{
    int32_t v = 0;
    rd(w, safe, addr, &v, sizeof v);
    return v;
}

HOT uint8_t rd_u8(struct ct_py_walk *w, const bool safe, uintptr_t addr)
{
    uint8_t v = 0;
    rd(w, safe, addr, &v, sizeof v);
    return v;
}

static void fail(struct ct_py_walk *w, const char *why)
{
    if (!w->failed) {
        w->failed = true;
        w->why = why;
    }
}

/* Whether obj is an object of exactly that type (no subclass is expected). */
HOT bool is_type(struct ct_py_walk *w, const struct ct_py_layout *L, const bool safe, uintptr_t obj,
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
static int read_str(struct ct_py_walk *w, uintptr_t obj, char *buf, unsigned cap, bool keep_tail)
{
    const bool safe = w->safe;
    const struct ct_py_layout *L = w->L;
    if (!is_type(w, w->L, safe, obj, w->types->str))
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

HOT bool read_key(struct ct_py_walk *w, const struct ct_py_layout *L, const bool safe,
                  uintptr_t code, struct code_key *k)
{
    k->code = code;
    k->name = rd_ptr(w, safe, code + L->co_name);
    k->file = rd_ptr(w, safe, code + L->co_filename);
    k->lines = rd_ptr(w, safe, code + L->co_linetable);
    k->first_line = rd_i32(w, safe, code + L->co_firstlineno);
    if (!is_type(w, L, safe, k->lines, w->types->bytes) || w->failed)
        return false;
    int64_t len = rd_i64(w, safe, k->lines + L->ob_size);
    if (len < 0 || len > (1 << 26))
        return false;
    k->lines_len = (uint32_t)len;
    k->head = 0;
    rd(w, safe, k->lines + L->bytes_sval, &k->head, len < 8 ? (size_t)len : 8);
    return !w->failed;
}

static void send_code_raw(struct ct_py_walk *w, uint32_t id, const struct code_key *k)
{
    const bool safe = w->safe;
    char name[CT_PY_NAME_MAX_BYTES], file[CT_AUX_PAYLOAD_BYTES];
    int name_len = read_str(w, k->name, name, sizeof name, false);
    int file_len =
        name_len < 0 ? -1 : read_str(w, k->file, file, CT_AUX_PAYLOAD_BYTES - name_len, true);
    if (name_len < 0 || file_len < 0) {
        fail(w, "a code object's name or file is not a str");
        return;
    }
    if (name_len > CT_PY_NAME_MAX_BYTES) /* read_str keeps to its cap; said for the compiler */
        name_len = CT_PY_NAME_MAX_BYTES;
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

HOT uint32_t raw_code_id(struct ct_py_walk *w, const struct ct_py_layout *L, const bool safe,
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
                id = ct_py_new_code_id();
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
void ct_pywalk_check_thread(struct ct_py_walk *w, uintptr_t tstate)
{
    const bool safe = w->safe;
    const struct ct_py_layout *L = w->L;
    if (L->rt_interpreters_head == CT_PY_NONE || L->ts_interp == CT_PY_NONE || !w->types->runtime)
        return;
    if (L->ts_thread_id != CT_PY_NONE &&
        rd_ptr(w, safe, tstate + L->ts_thread_id) != (uintptr_t)pthread_self() && !w->failed) {
        fail(w, "the thread state is not this thread's");
        return;
    }
    uintptr_t mine = rd_ptr(w, safe, tstate + L->ts_interp);
    uintptr_t interp = rd_ptr(w, safe, w->types->runtime + L->rt_interpreters_head);
    for (int i = 0; i < 256 && interp && !w->failed; i++) {
        if (interp == mine)
            return;
        interp = rd_ptr(w, safe, interp + L->interp_next);
    }
    fail(w, "the thread state's interpreter is not among the runtime's");
}

/* The frame the thread is running, innermost; 0 when it runs none. */
HOT uintptr_t current_frame(struct ct_py_walk *w, const struct ct_py_layout *L, const bool safe,
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
HOT bool frame_offset(struct ct_py_walk *w, const struct ct_py_layout *L, const bool safe,
                      const uint8_t kind, uintptr_t frame, uintptr_t code, uint8_t owner,
                      uint32_t *offset)
{
    if (kind == CT_PY_ENTRY_EVERY) { /* 3.10: f_lasti */
        int32_t lasti = rd_i32(w, safe, frame + L->fr_instr);
        uintptr_t bytecode = rd_ptr(w, safe, code + L->co_code);
        int64_t size = is_type(w, L, safe, bytecode, w->types->bytes)
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
 * The steady state of a trusted walk: the frames from `frame` outwards
 * that are where the thread's last walk saw them, at the same position,
 * running the same code object (the same co_version from 3.12) at the same
 * instruction, recorded as they were then. Stops at the first that is not
 * (walk_frames takes it, then comes back here) and returns it; 0 at the
 * end of the chain. *n as in walk_frames.
 *
 * Its loop needs no count of steps: every frame it passes is recorded, so
 * n bounds it, but for 3.12+'s shims; each of those lies under a frame
 * its eval loop began, so more shims than frames recorded are a chain
 * walk_frames must look at (and count).
 */
HOT uintptr_t walk_same(struct ct_py_walk *w, const struct ct_py_layout *L, const uint8_t kind,
                        uintptr_t frame, uint64_t *out, int *n_io, int max)
{
    const bool safe = false; /* plain loads: a trusted layout */
    /* The offsets in locals: the stores of the walk cannot clobber them
     * (the build has -fno-strict-aliasing), so they need no reload. */
    const uintptr_t code_mask = ~(uintptr_t)L->code_tag_bits;
    const uint16_t fr_previous = L->fr_previous, fr_owner = L->fr_owner, fr_code = L->fr_code,
                   fr_instr = L->fr_instr, fr_is_entry = L->fr_is_entry, co_version = L->co_version;
    const uint8_t owner_cstack = L->owner_cstack;
    if (max > LAST_FRAMES)
        max = LAST_FRAMES;
    /* Pointers stepped together rather than indexes: the loop is the walk's
     * whole cost in the steady state. */
    uint64_t *o = out + *n_io, *const end = out + max;
    struct memo_slot *m = &last[*n_io];
    int shims = 0;
    while (frame && o < end && !(frame & 7)) {
        uintptr_t previous = rd_ptr(w, safe, frame + fr_previous);
        if (kind == CT_PY_ENTRY_SHIM && rd_u8(w, safe, frame + fr_owner) >= owner_cstack) {
            if (++shims > o - out + 1)
                break;
            if (o > out) /* the shim's frame above began an eval loop */
                o[-1] |= CT_PYFRAME_ENTRY;
            frame = previous;
            continue;
        }
        uintptr_t code = rd_ptr(w, safe, frame + fr_code) & code_mask;
        uintptr_t instr = kind == CT_PY_ENTRY_EVERY ? (uintptr_t)rd_i32(w, safe, frame + fr_instr)
                                                    : rd_ptr(w, safe, frame + fr_instr);
        /* m->code is never 0: its co_version may be read once they agree. */
        if (__builtin_expect(m->frame != frame || m->code != code || m->instr != instr, 0)) {
            /* Another frame at this position than last time: the memo may
             * know it (a function calling CUDA from several places). */
            uint32_t version = 0;
            if (kind == CT_PY_ENTRY_SHIM && code)
                rd(w, safe, code + co_version, &version, sizeof version);
            struct memo_slot *set = memo_set(memo, frame, instr);
            const struct memo_slot *hit =
                memo_is(&set[0], kind, frame, code, instr, version)   ? &set[0]
                : memo_is(&set[1], kind, frame, code, instr, version) ? &set[1]
                                                                      : NULL;
            if (!hit)
                break;
            *m = *hit;
        } else if (kind == CT_PY_ENTRY_SHIM) {
            uint32_t version;
            rd(w, safe, code + co_version, &version, sizeof version);
            if (version != m->version)
                break;
        }
        bool flagged = kind == CT_PY_ENTRY_FLAG && rd_u8(w, safe, frame + fr_is_entry);
        *o++ = m->word | (flagged ? CT_PYFRAME_ENTRY : 0);
        m++;
        frame = previous;
    }
    *n_io = (int)(o - out);
    return frame;
}

/*
 * Walks the thread's frames; with `codes`, fills w->out with frames and
 * sends new code objects; without (the API check), fills code_out[] and
 * offset_out[] instead. Returns the frames found; w->failed on any doubt.
 */
HOT int walk_frames(struct ct_py_walk *w, const bool safe, const uint8_t kind, uintptr_t tstate,
                    uintptr_t *code_out, uint32_t *offset_out)
{
    /* No copy of the layout (walk_same keeps what it needs in locals): the
     * rest of the walk runs on a miss, where a reload matters little. */
    const struct ct_py_layout *L = w->L;
    uint64_t *const out = w->out;
    if (w->safe && !out)
        ct_pywalk_check_thread(w, tstate); /* the API check's walk; raw_capture checks its own */
    uintptr_t frame = current_frame(w, L, safe, tstate);
    int n = 0;
    const int max = w->max;
    struct memo_slot(*const memos)[2] = memo; /* the thread's, found once */
    const bool memoize = !safe && out;        /* a trusted walk that records */
    int steps = 4 * max + 64;                 /* shims and unbegun frames are not counted in n */
    /* Plain loads cannot fail: only a guarded walk has to look at w->failed
     * after each read; every failure of a plain walk breaks out at once. */
    while (frame && n < max && (!safe || !w->failed)) {
        if (memoize) {
            frame = walk_same(w, L, kind, frame, out, &n, max);
            if (!frame || n >= max)
                break;
        }
        if (--steps < 0 || (frame & 7)) {
            fail(w, steps < 0 ? "a frame chain that does not end" : "a misaligned frame");
            break;
        }
        uint8_t owner = kind == CT_PY_ENTRY_SHIM ? rd_u8(w, safe, frame + L->fr_owner) : 0;
        uintptr_t previous = rd_ptr(w, safe, frame + L->fr_previous);
        if (kind == CT_PY_ENTRY_SHIM && owner >= L->owner_cstack) {
            /* The C stack's entry shim: the frame above it began an eval loop. */
            if (n > 0 && out)
                out[n - 1] |= CT_PYFRAME_ENTRY;
            frame = previous;
            continue;
        }
        uintptr_t code = rd_ptr(w, safe, frame + L->fr_code) & ~(uintptr_t)L->code_tag_bits;
        struct memo_slot *m = NULL;
        uintptr_t instr = 0;
        uint32_t version = 0;
        if (memoize) {
            instr = kind == CT_PY_ENTRY_EVERY ? (uintptr_t)rd_i32(w, safe, frame + L->fr_instr)
                                              : rd_ptr(w, safe, frame + L->fr_instr);
            if (kind == CT_PY_ENTRY_SHIM && code)
                rd(w, safe, code + L->co_version, &version, sizeof version);
            m = memo_set(memos, frame, instr);
            const struct memo_slot *hit = memo_is(&m[0], kind, frame, code, instr, version) ? &m[0]
                                          : memo_is(&m[1], kind, frame, code, instr, version)
                                              ? &m[1]
                                              : NULL;
            if (hit) {
                if (n < LAST_FRAMES)
                    last[n] = *hit;
                bool flagged = kind == CT_PY_ENTRY_FLAG && rd_u8(w, safe, frame + L->fr_is_entry);
                out[n++] = hit->word | (flagged ? CT_PYFRAME_ENTRY : 0);
                frame = previous;
                continue;
            }
        }
        if (kind == CT_PY_ENTRY_FLAG)
            owner = rd_u8(w, safe, frame + L->fr_owner);
        if (!is_type(w, L, safe, code, w->types->code)) {
            fail(w, "a frame whose code is not a code object");
            break;
        }
        uint32_t offset;
        bool begun = frame_offset(w, L, safe, kind, frame, code, owner, &offset);
        if (w->failed)
            break;
        if (!begun) {
            frame = previous;
            continue;
        }
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
            if (m && id) {   /* named: the same frame will be recorded the same way */
                m[1] = m[0]; /* the older way goes */
                m[0] = (struct memo_slot){
                    .frame = frame,
                    .code = code,
                    .instr = instr,
                    .version = version,
                    .word = word | (kind == CT_PY_ENTRY_EVERY ? CT_PYFRAME_ENTRY : 0)};
                if (n < LAST_FRAMES)
                    last[n] = m[0];
            }
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
static int walk_guarded(struct ct_py_walk *w, uintptr_t tstate, uintptr_t *code_out,
                        uint32_t *offset_out)
{
    return walk_frames(w, true, w->L->entry_kind, tstate, code_out, offset_out);
}

static int walk_direct_310(struct ct_py_walk *w, uintptr_t tstate, uintptr_t *code_out,
                           uint32_t *offset_out)
{
    return walk_frames(w, false, CT_PY_ENTRY_EVERY, tstate, code_out, offset_out);
}

static int walk_direct_311(struct ct_py_walk *w, uintptr_t tstate, uintptr_t *code_out,
                           uint32_t *offset_out)
{
    return walk_frames(w, false, CT_PY_ENTRY_FLAG, tstate, code_out, offset_out);
}

static int walk_direct_312(struct ct_py_walk *w, uintptr_t tstate, uintptr_t *code_out,
                           uint32_t *offset_out)
{
    return walk_frames(w, false, CT_PY_ENTRY_SHIM, tstate, code_out, offset_out);
}

int ct_pywalk_frames(struct ct_py_walk *w, uintptr_t tstate, uintptr_t *code_out,
                     uint32_t *offset_out)
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
bool ct_pywalk_several_interpreters(struct ct_py_walk *w)
{
    const bool safe = w->safe;
    const struct ct_py_layout *L = w->L;
    if (L->version >= 0x030c || L->rt_interpreters_head == CT_PY_NONE || !w->types->runtime)
        return false; /* 3.12 binds the gilstate to the interpreter the thread runs */
    uintptr_t head = rd_ptr(w, safe, w->types->runtime + L->rt_interpreters_head);
    return head && rd_ptr(w, safe, head + L->interp_next) != 0;
}

/*
 * Whether a table has what its family of versions has (see walk_direct_*):
 * the walk then takes the family's fields as given.
 */
bool ct_pywalk_layout_complete(const struct ct_py_layout *L)
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

bool ct_pywalk_init(void)
{
    if (raw_codes)
        return true;
    void *mem = mmap(NULL, CODE_SLOTS * sizeof(struct raw_slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    raw_codes = mem == MAP_FAILED ? NULL : mem;
    return raw_codes != NULL;
}

uint32_t ct_py_new_code_id(void)
{
    return __atomic_add_fetch(&next_code_id, 1, __ATOMIC_RELAXED);
}

bool ct_pywalk_code_info(struct ct_py_walk *w, uintptr_t code, uint32_t offset, int64_t *line,
                         char *name, unsigned cap, unsigned *name_len)
{
    struct code_key k = {0};
    if (!read_key(w, w->L, w->safe, code, &k)) {
        fail(w, "a code object's line table is not a bytes object");
        return false;
    }
    uint8_t table[CHECK_TABLE];
    size_t len = k.lines_len < sizeof table ? (size_t)k.lines_len : sizeof table;
    if (!rd(w, w->safe, k.lines + w->L->bytes_sval, table, len))
        return false;
    *line = ct_pylines_line(w->L->line_format, k.first_line, table, len, offset);
    int n = read_str(w, k.name, name, cap, false);
    if (n < 0) {
        fail(w, "a code object's name is not a str");
        return false;
    }
    *name_len = (unsigned)n;
    return true;
}

void ct_pywalk_after_fork_child(void)
{
    memset(memo, 0, sizeof memo);
    memset(last, 0, sizeof last);
    /* Zero pages on next touch: the child's trace has none of the names. */
    if (raw_codes)
        madvise(raw_codes, CODE_SLOTS * sizeof(struct raw_slot), MADV_DONTNEED);
}
