/*
 * pylayout.c - the offsets a Python frame walk reads, per CPython minor
 * version (3.10 to 3.14), for the default build (GIL, release, no
 * Py_TRACE_REFS) on LP64 Linux (x86-64, aarch64), and the reader of the
 * offsets CPython 3.13+ publishes in _PyRuntime.debug_offsets.
 *
 * Every number below was printed by tests/python/layout_probe.c compiled
 * against that version's own headers (3.10.13, 3.11.7, 3.12.1, 3.13.0 from
 * pyenv; 3.14 from Debian's libpython3.14-dev 3.14.10-1), and `make
 * python-layout-check` compares each table with every installed
 * interpreter. The headers of Debian's 3.11.2 and 3.13.18 give the same
 * numbers, and so does the probe built for aarch64 (with x86-64's
 * pyconfig.h). Nothing here is derived from another tool's tables.
 *
 * What a walker must know besides the numbers, per version (sources are
 * CPython's, at the version named):
 *
 * Frame owners (enum _frameowner; 3.11-3.13 Include/internal/pycore_frame.h,
 * 3.14 Include/internal/pycore_interpframe_structs.h):
 *   3.11  THREAD 0, GENERATOR 1, FRAME_OBJECT 2 (no C-stack owner: the
 *         first frame of each _PyEval_EvalFrameDefault call has is_entry)
 *   3.12  THREAD 0, GENERATOR 1, FRAME_OBJECT 2, CSTACK 3
 *   3.13  same as 3.12
 *   3.14  THREAD 0, GENERATOR 1, FRAME_OBJECT 2, INTERPRETER 3, CSTACK 4
 *   The shim frame that _PyEval_EvalFrameDefault pushes below the first
 *   frame it runs (Python/ceval.c) is owner 3 in all of 3.12-3.14: named
 *   FRAME_OWNED_BY_CSTACK in 3.12/3.13 (`entry_frame.owner = ...`) and
 *   FRAME_OWNED_BY_INTERPRETER in 3.14 (`entry.frame.owner = ...`), where
 *   CSTACK became 4. 3.14's _PyFrame_IsIncomplete tests
 *   `owner >= FRAME_OWNED_BY_INTERPRETER`, hence owner_cstack = 3 with
 *   "this value or above" for every version that has a shim.
 *   The shim's code slot is not a Python function's: 3.12 f_code =
 *   interp->interpreter_trampoline (a real code object!), 3.13
 *   f_executable = Py_None, 3.14 f_executable = PyStackRef_None (None's
 *   address | 1). Skip it by owner, never by looking at its code.
 *
 * _PyFrame_IsIncomplete (a frame the public API skips):
 *   3.11, 3.12  owner != GENERATOR && prev_instr < code + _co_firsttraceable
 *               (3.12 does not test CSTACK there: its shim is incomplete
 *               because prev_instr is the first unit of
 *               "<interpreter trampoline>", whose _co_firsttraceable is 2)
 *   3.13        owner == CSTACK, or owner != GENERATOR && instr_ptr <
 *               _PyCode_CODE(code) + _co_firsttraceable
 *   3.14        owner >= INTERPRETER, or the same test against
 *               _PyFrame_GetBytecode(frame) (= _PyCode_CODE in the GIL build)
 *   3.10 has no such notion: every PyFrameObject on tstate->frame is real.
 *
 * Where a frame is (CT_PYFRAME_INSTR wants a byte offset into the code):
 *   3.10  PyFrameObject.f_lasti is an instruction index, -1 before the
 *         first one; the byte offset is f_lasti * 2 (Objects/frameobject.c
 *         PyFrame_GetLineNumber: PyCode_Addr2Line(f_code, f_lasti*2), and
 *         f_lineno wins when non-zero, which only tracing sets).
 *   3.11, 3.12  prev_instr, a _Py_CODEUNIT * (2 bytes) into the code
 *         object's own co_code_adaptive; the byte offset is the pointer
 *         difference from code + co_code_adaptive
 *         (_PyInterpreterFrame_LASTI * sizeof(_Py_CODEUNIT), Python/frame.c).
 *   3.13, 3.14  instr_ptr, likewise into co_code_adaptive. 3.14's per-thread
 *         bytecode copies (co_tlbc, frame tlbc_index) exist only with
 *         Py_GIL_DISABLED (Include/cpython/code.h
 *         _PyCode_DEF_THREAD_LOCAL_BYTECODE, pycore_interpframe.h
 *         _PyFrame_GetBytecode); in the default build instr_ptr always points
 *         into co_code_adaptive.
 *
 * 3.14's f_executable is a _PyStackRef (Include/internal/pycore_stackref.h,
 * default build): Py_TAG_BITS 3, Py_TAG_REFCNT 1 marks a deferred/immortal
 * reference, low bits 11 a tagged int. PyStackRef_AsPyObjectBorrow clears
 * bit 0 only; objects are 8-aligned, so clearing both (code_tag_bits 3)
 * gives the same pointer, and a value with both bits set is no object.
 *
 * PyGILState_GetThisThreadState (Python/pystate.c) takes no lock and reads
 * only a thread-specific key: 3.10, 3.11 return NULL unless
 * _PyRuntime.gilstate.autoInterpreterState is set, then
 * PyThread_tss_get(&gilstate->autoTSSkey); 3.12-3.14 return NULL unless
 * gilstate_tss_initialized(runtime), then gilstate_tss_get(runtime) =
 * PyThread_tss_get(&runtime->autoTSSkey) = pthread_getspecific
 * (Python/thread_pthread.h). Checked in the disassembly of 3.10.13-3.13.0
 * and Debian's 3.14.10 too.
 */
#include "pylayout.h"

#include <stddef.h>
#include <string.h>

#include "cutrace/format.h"

/* A frame owner value that the version does not have: no frame carries
 * it, and "this value or above" then matches nothing a char holds in
 * practice (3.10 has no owner byte at all; 3.11 has no C-stack owner). */
#define NO_OWNER 0xff

/*
 * CPython 3.10 (Include/cpython/frameobject.h, cpython/code.h,
 * cpython/pystate.h, internal/pycore_runtime.h, internal/pycore_interp.h).
 * tstate->frame is the innermost PyFrameObject; f_back links to its caller.
 */
static const struct ct_py_layout py310 = {
    .version = 0x030a,
    .instr_kind = CT_PY_LASTI_INDEX,
    .entry_kind = CT_PY_ENTRY_EVERY,
    .line_format = CT_PYLINES_310,
    .ts_frame = 24,
    .ts_interp = 16,
    .ts_thread_id = 176,
    .cframe_current_frame = CT_PY_NONE,
    .fr_previous = 24,
    .fr_code = 32,
    .fr_instr = 96,
    .fr_owner = CT_PY_NONE,
    .fr_is_entry = CT_PY_NONE,
    .owner_generator = NO_OWNER,
    .owner_cstack = NO_OWNER,
    .code_tag_bits = 0,
    .co_name = 112,
    .co_filename = 104,
    .co_linetable = 120,
    .co_firstlineno = 40,
    .co_code = 48,
    .co_code_adaptive = CT_PY_NONE,
    .co_firsttraceable = CT_PY_NONE,
    .co_version = CT_PY_NONE,
    .ob_type = 8,
    .ob_size = 16,
    .bytes_sval = 32,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 48, /* 3.10, 3.11 PyASCIIObject still has wstr */
    .str_compact_data = 72,
    .state_kind_shift = 2,
    .state_compact_shift = 5,
    .state_ascii_shift = 6,
    .rt_interpreters_head = 32,
    .interp_next = 0,
};

/*
 * CPython 3.11 (internal/pycore_frame.h _PyInterpreterFrame, cpython/code.h,
 * cpython/pystate.h _PyCFrame). tstate->cframe->current_frame; is_entry
 * marks the first frame each _PyEval_EvalFrameDefault call runs.
 */
static const struct ct_py_layout py311 = {
    .version = 0x030b,
    .instr_kind = CT_PY_PREV_INSTR,
    .entry_kind = CT_PY_ENTRY_FLAG,
    .line_format = CT_PYLINES_311,
    .ts_frame = 56,
    .ts_interp = 16,
    .ts_thread_id = 152,
    .cframe_current_frame = 8,
    .fr_previous = 48,
    .fr_code = 32,
    .fr_instr = 56,
    .fr_owner = 69,
    .fr_is_entry = 68,
    .owner_generator = 1,
    .owner_cstack = NO_OWNER,
    .code_tag_bits = 0,
    .co_name = 120,
    .co_filename = 112,
    .co_linetable = 136,
    .co_firstlineno = 72,
    .co_code = CT_PY_NONE,
    .co_code_adaptive = 184,
    .co_firsttraceable = 168,
    .co_version = CT_PY_NONE,
    .ob_type = 8,
    .ob_size = 16,
    .bytes_sval = 32,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 48,
    .str_compact_data = 72,
    .state_kind_shift = 2,
    .state_compact_shift = 5,
    .state_ascii_shift = 6,
    .rt_interpreters_head = 40,
    .interp_next = 0,
};

/*
 * CPython 3.12: _PyCFrame lost use_tracing (current_frame at 0); the frame
 * starts with f_code and has no is_entry: the shim frame (owner 3) marks
 * each eval-loop entry.
 */
static const struct ct_py_layout py312 = {
    .version = 0x030c,
    .instr_kind = CT_PY_PREV_INSTR,
    .entry_kind = CT_PY_ENTRY_SHIM,
    .line_format = CT_PYLINES_311,
    .ts_frame = 56,
    .ts_interp = 16,
    .ts_thread_id = 136,
    .cframe_current_frame = 0,
    .fr_previous = 8,
    .fr_code = 0,
    .fr_instr = 56,
    .fr_owner = 70,
    .fr_is_entry = CT_PY_NONE,
    .owner_generator = 1,
    .owner_cstack = 3, /* FRAME_OWNED_BY_CSTACK */
    .code_tag_bits = 0,
    .co_name = 120,
    .co_filename = 112,
    .co_linetable = 136,
    .co_firstlineno = 68,
    .co_code = CT_PY_NONE,
    .co_code_adaptive = 192,
    .co_firsttraceable = 176,
    .co_version = 92,
    .ob_type = 8,
    .ob_size = 16,
    .bytes_sval = 32,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 40,
    .str_compact_data = 56,
    .state_kind_shift = 2,
    .state_compact_shift = 5,
    .state_ascii_shift = 6,
    .rt_interpreters_head = 40,
    .interp_next = 0,
};

/*
 * CPython 3.13: no more _PyCFrame (tstate->current_frame); f_executable
 * (a PyObject *: a code object, or None in the shim) replaces f_code and
 * instr_ptr (the instruction executing) replaces prev_instr.
 * PyInterpreterState now starts with its ceval state, hence next at 7264.
 */
static const struct ct_py_layout py313 = {
    .version = 0x030d,
    .instr_kind = CT_PY_INSTR_PTR,
    .entry_kind = CT_PY_ENTRY_SHIM,
    .line_format = CT_PYLINES_311,
    .ts_frame = 72,
    .ts_interp = 16,
    .ts_thread_id = 152,
    .cframe_current_frame = CT_PY_NONE,
    .fr_previous = 8,
    .fr_code = 0,
    .fr_instr = 56,
    .fr_owner = 70,
    .fr_is_entry = CT_PY_NONE,
    .owner_generator = 1,
    .owner_cstack = 3, /* FRAME_OWNED_BY_CSTACK */
    .code_tag_bits = 0,
    .co_name = 120,
    .co_filename = 112,
    .co_linetable = 136,
    .co_firstlineno = 68,
    .co_code = CT_PY_NONE,
    .co_code_adaptive = 200,
    .co_firsttraceable = 184,
    .co_version = 92,
    .ob_type = 8,
    .ob_size = 16,
    .bytes_sval = 32,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 40,
    .str_compact_data = 56,
    .state_kind_shift = 2,
    .state_compact_shift = 5,
    .state_ascii_shift = 6,
    .rt_interpreters_head = 632,
    .interp_next = 7264,
};

/*
 * CPython 3.14 (internal/pycore_interpframe_structs.h, pycore_stackref.h,
 * pycore_runtime_structs.h, pycore_interp_structs.h, cpython/code.h), as
 * Debian's 3.14.10 headers have them: f_executable is a _PyStackRef, the
 * frame gained stackpointer (owner at 74), the shim is owner 3
 * (FRAME_OWNED_BY_INTERPRETER). Patch releases keep _Py_DebugOffsets'
 * layout (CPython's stated rule, Include/internal/pycore_runtime_structs.h)
 * and the walker prefers the published values; the offsets 3.14 does not
 * publish (co_firsttraceable, str_compact_data, the state bits, the owner
 * values) were only seen in 3.14.10's headers. A 3.14 patch release that
 * moved one would be caught by the walker's check against the public API.
 */
static const struct ct_py_layout py314 = {
    .version = 0x030e,
    .instr_kind = CT_PY_INSTR_PTR,
    .entry_kind = CT_PY_ENTRY_SHIM,
    .line_format = CT_PYLINES_311,
    .ts_frame = 72,
    .ts_interp = 16,
    .ts_thread_id = 152,
    .cframe_current_frame = CT_PY_NONE,
    .fr_previous = 8,
    .fr_code = 0,
    .fr_instr = 56,
    .fr_owner = 74,
    .fr_is_entry = CT_PY_NONE,
    .owner_generator = 1,
    .owner_cstack = 3,  /* FRAME_OWNED_BY_INTERPRETER (CSTACK is 4) */
    .code_tag_bits = 3, /* Py_TAG_BITS */
    .co_name = 120,
    .co_filename = 112,
    .co_linetable = 136,
    .co_firstlineno = 68,
    .co_code = CT_PY_NONE,
    .co_code_adaptive = 208,
    .co_firsttraceable = 192,
    .co_version = 92,
    .ob_type = 8,
    .ob_size = 16,
    .bytes_sval = 32,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 40,
    .str_compact_data = 56,
    .state_kind_shift = 2,
    .state_compact_shift = 5,
    .state_ascii_shift = 6,
    .rt_interpreters_head = 808,
    .interp_next = 7272,
};

const struct ct_py_layout *ct_py_layout_table(unsigned version)
{
    switch (version) {
    case 0x030a:
        return &py310;
    case 0x030b:
        return &py311;
    case 0x030c:
        return &py312;
    case 0x030d:
        return &py313;
    case 0x030e:
        return &py314;
    default:
        return NULL;
    }
}

/*
 * Where the values we take sit in _Py_DebugOffsets, as indices of its
 * 8-byte words (it is a flat sequence of char[8] and uint64_t members,
 * grouped in structs that each start with their type's size). The layout
 * changes between minor versions: 3.13 per Include/internal/pycore_runtime.h
 * (3.13.0), 3.14 per Include/internal/pycore_debug_offsets.h (3.14.10),
 * which added interpreter_state.threads_main, code_object_generation and
 * tlbc_generation, interpreter_frame.stackpointer and tlbc_index,
 * code_object.co_tlbc and a set_object group before dict_object.
 */
struct dbg_words {
    uint8_t version, free_threaded;
    uint8_t rt_size, rt_interpreters_head;
    uint8_t is_size, is_next;
    uint8_t ts_size, ts_interp, ts_current_frame, ts_thread_id;
    uint8_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_owner;
    uint8_t co_size, co_filename, co_name, co_linetable, co_firstlineno, co_code_adaptive;
    uint8_t ob_size_of, ob_type;
    uint8_t by_size, by_ob_size, by_sval;
    uint8_t un_size, un_state, un_length, un_ascii_size;
    uint8_t total; /* words in the whole struct */
};

static const struct dbg_words dbg313 = {
    .version = 1,
    .free_threaded = 2,
    .rt_size = 3, /* runtime_state: size, finalizing, interpreters_head */
    .rt_interpreters_head = 5,
    .is_size = 6, /* interpreter_state: 13 words */
    .is_next = 8,
    .ts_size = 19, /* thread_state: 9 words */
    .ts_interp = 22,
    .ts_current_frame = 23,
    .ts_thread_id = 24,
    .fr_size = 28, /* interpreter_frame: 6 words */
    .fr_previous = 29,
    .fr_executable = 30,
    .fr_instr_ptr = 31,
    .fr_owner = 33,
    .co_size = 34, /* code_object: 10 words */
    .co_filename = 35,
    .co_name = 36,
    .co_linetable = 38,
    .co_firstlineno = 39,
    .co_code_adaptive = 43,
    .ob_size_of = 44, /* pyobject: 2 words; then type 4, tuple 3, list 3,
                         dict 3, float 2, long 3 */
    .ob_type = 45,
    .by_size = 64, /* bytes_object: 3 words */
    .by_ob_size = 65,
    .by_sval = 66,
    .un_size = 67, /* unicode_object: 4 words; then gc 2 */
    .un_state = 68,
    .un_length = 69,
    .un_ascii_size = 70,
    .total = 73,
};

static const struct dbg_words dbg314 = {
    .version = 1,
    .free_threaded = 2,
    .rt_size = 3,
    .rt_interpreters_head = 5,
    .is_size = 6, /* interpreter_state: 16 words */
    .is_next = 8,
    .ts_size = 22, /* thread_state: 9 words */
    .ts_interp = 25,
    .ts_current_frame = 26,
    .ts_thread_id = 27,
    .fr_size = 31, /* interpreter_frame: 8 words */
    .fr_previous = 32,
    .fr_executable = 33,
    .fr_instr_ptr = 34,
    .fr_owner = 36,
    .co_size = 39, /* code_object: 11 words */
    .co_filename = 40,
    .co_name = 41,
    .co_linetable = 43,
    .co_firstlineno = 44,
    .co_code_adaptive = 48,
    .ob_size_of = 50, /* pyobject: 2 words; then type 4, tuple 3, list 3,
                         set 4, dict 3, float 2, long 3 */
    .ob_type = 51,
    .by_size = 74, /* bytes_object: 3 words */
    .by_ob_size = 75,
    .by_sval = 76,
    .un_size = 77, /* unicode_object: 4 words; then gc 2, gen_object 4,
                      llist_node 2, debugger_support 6 */
    .un_state = 78,
    .un_length = 79,
    .un_ascii_size = 80,
    .total = 95,
};

static uint64_t dbg_word(const unsigned char *base, unsigned index)
{
    uint64_t v;
    memcpy(&v, base + (size_t)index * sizeof v, sizeof v);
    return v;
}

/* An offset published for a field `width` bytes wide in a struct of
 * `size` bytes: it must lie inside, and fit our 16-bit fields. */
static bool take(uint64_t offset, uint64_t width, uint64_t size, uint16_t *out)
{
    if (offset >= CT_PY_NONE || offset + width > size)
        return false;
    *out = (uint16_t)offset;
    return true;
}

/* A published struct size: bounds far above any CPython's (_PyRuntimeState,
 * the largest, is 283320 bytes in 3.13.0 and 316616 in 3.14.10;
 * PyInterpreterState 194968 and 225864) and below which nothing it holds
 * could fit. Words read from the wrong place yield offsets or garbage here. */
static bool plausible_size(uint64_t size, uint64_t min, uint64_t max)
{
    return size >= min && size <= max;
}

bool ct_py_layout_from_debug_offsets(const void *runtime, unsigned version,
                                     struct ct_py_layout *out)
{
    const struct dbg_words *w;
    if (runtime == NULL || out == NULL || out->version != version)
        return false;
    if (version == 0x030d)
        w = &dbg313;
    else if (version == 0x030e)
        w = &dbg314;
    else
        return false;

    const unsigned char *d = runtime;
    if (memcmp(d, "xdebugpy", 8) != 0)
        return false;
    /* PY_VERSION_HEX: major, minor, micro, level and serial bytes. */
    if ((dbg_word(d, w->version) >> 16) != version)
        return false;
    /* Free-threaded builds move ob_type, the str state bits and the
     * bytecode (tlbc): these tables do not describe them. */
    if (dbg_word(d, w->free_threaded) != 0)
        return false;

    uint64_t rt_size = dbg_word(d, w->rt_size);
    uint64_t is_size = dbg_word(d, w->is_size);
    uint64_t ts_size = dbg_word(d, w->ts_size);
    uint64_t fr_size = dbg_word(d, w->fr_size);
    uint64_t co_size = dbg_word(d, w->co_size);
    uint64_t obj_size = dbg_word(d, w->ob_size_of);
    uint64_t by_size = dbg_word(d, w->by_size);
    uint64_t un_size = dbg_word(d, w->un_size);
    uint64_t un_ascii = dbg_word(d, w->un_ascii_size);
    /* _PyRuntime starts with debug_offsets itself. */
    if (!plausible_size(rt_size, (uint64_t)w->total * 8 + 8, 1u << 24) ||
        !plausible_size(is_size, 64, 1u << 24) || !plausible_size(ts_size, 64, 1u << 16) ||
        !plausible_size(fr_size, 32, 1024) || !plausible_size(co_size, 64, 4096) ||
        !plausible_size(obj_size, 16, 64) || !plausible_size(by_size, obj_size + 9, 256) ||
        !plausible_size(un_ascii, obj_size + 16, 256) || !plausible_size(un_size, un_ascii, 512))
        return false;

    struct ct_py_layout l = *out;
    bool ok = take(dbg_word(d, w->rt_interpreters_head), 8, rt_size, &l.rt_interpreters_head) &&
              take(dbg_word(d, w->is_next), 8, is_size, &l.interp_next) &&
              take(dbg_word(d, w->ts_current_frame), 8, ts_size, &l.ts_frame) &&
              take(dbg_word(d, w->ts_interp), 8, ts_size, &l.ts_interp) &&
              take(dbg_word(d, w->ts_thread_id), 8, ts_size, &l.ts_thread_id) &&
              take(dbg_word(d, w->fr_previous), 8, fr_size, &l.fr_previous) &&
              take(dbg_word(d, w->fr_executable), 8, fr_size, &l.fr_code) &&
              take(dbg_word(d, w->fr_instr_ptr), 8, fr_size, &l.fr_instr) &&
              take(dbg_word(d, w->fr_owner), 1, fr_size, &l.fr_owner) &&
              take(dbg_word(d, w->co_filename), 8, co_size, &l.co_filename) &&
              take(dbg_word(d, w->co_name), 8, co_size, &l.co_name) &&
              take(dbg_word(d, w->co_linetable), 8, co_size, &l.co_linetable) &&
              take(dbg_word(d, w->co_firstlineno), 4, co_size, &l.co_firstlineno) &&
              /* the code units start here; sizeof counts the first one */
              take(dbg_word(d, w->co_code_adaptive), 1, co_size, &l.co_code_adaptive) &&
              take(dbg_word(d, w->ob_type), 8, obj_size, &l.ob_type) &&
              take(dbg_word(d, w->by_ob_size), 8, by_size, &l.ob_size) &&
              take(dbg_word(d, w->by_sval), 1, by_size, &l.bytes_sval) &&
              take(dbg_word(d, w->un_state), 4, un_ascii, &l.str_state) &&
              take(dbg_word(d, w->un_length), 8, un_ascii, &l.str_length) &&
              take(un_ascii, 0, un_size, &l.str_ascii_data);
    if (!ok)
        return false;
    /* Relations every CPython keeps: a frame's code and link are distinct
     * words, the object header precedes a bytes object's size and data,
     * and the compact-str data follows its header. */
    if (l.fr_code == l.fr_previous || l.fr_instr == l.fr_previous || l.fr_instr == l.fr_code ||
        l.ob_size < l.ob_type + 8 || l.bytes_sval < l.ob_size + 8 ||
        l.co_code_adaptive <= l.co_linetable || l.str_compact_data <= l.str_ascii_data)
        return false;
    *out = l;
    return true;
}
