/*
 * pylayout.h - where CPython keeps what a frame walk reads, per minor
 * version: the offsets of the thread state's current frame, of a frame's
 * code object, instruction and link to its caller, of a code object's
 * names and line table, and of the fields of str and bytes objects.
 *
 * pyframes.c reads the calling thread's own frames with these while the
 * thread does not hold the GIL, so it cannot ask the interpreter. The
 * numbers are facts about CPython's private structures (Include/internal
 * and Include/cpython of each release) for the default build (GIL, no
 * Py_TRACE_REFS) on 64-bit Linux; tests/python/layout_probe.c compiles
 * against each installed interpreter's own headers and checks every one.
 * From 3.13 the interpreter publishes most of them in
 * _PyRuntime.debug_offsets (cookie "xdebugpy", for debuggers and
 * profilers), and those published values take precedence over the table
 * (ct_py_layout_from_debug_offsets). A table is never trusted blindly:
 * pyframes.c checks it against the public API walk (docs/stacks.md).
 */
#ifndef CUTRACE_PYLAYOUT_H
#define CUTRACE_PYLAYOUT_H

#include <stdbool.h>
#include <stdint.h>

/* An offset that does not exist in this version. */
#define CT_PY_NONE 0xffff

/* How a frame says where it is. */
enum ct_py_instr_kind {
    CT_PY_LASTI_INDEX = 1, /* 3.10: int f_lasti, an instruction index (-1: not started) */
    CT_PY_PREV_INSTR = 2,  /* 3.11, 3.12: _Py_CODEUNIT *prev_instr, the last one begun */
    CT_PY_INSTR_PTR = 3,   /* 3.13+: _Py_CODEUNIT *instr_ptr, the one executing */
};

/* How the interpreter marks the first frame of each eval-loop invocation. */
enum ct_py_entry_kind {
    CT_PY_ENTRY_EVERY = 1, /* 3.10: every frame has its own eval loop */
    CT_PY_ENTRY_FLAG = 2,  /* 3.11: bool is_entry in the frame */
    CT_PY_ENTRY_SHIM = 3,  /* 3.12+: a frame owned by the C stack (owner >= owner_cstack)
                              sits below the first frame of each invocation */
};

struct ct_py_layout {
    uint16_t version;     /* 0x030a for 3.10, ... */
    uint8_t instr_kind;   /* enum ct_py_instr_kind */
    uint8_t entry_kind;   /* enum ct_py_entry_kind */
    uint16_t line_format; /* CT_PYLINES_310 or CT_PYLINES_311 (format.h) */

    /* The thread state. 3.10: tstate->frame (PyFrameObject *). 3.11, 3.12:
     * tstate->cframe (a _PyCFrame *), whose current_frame is at
     * cframe_current_frame. 3.13+: tstate->current_frame. */
    uint16_t ts_frame;
    uint16_t cframe_current_frame; /* CT_PY_NONE unless 3.11/3.12 */
    uint16_t ts_interp;            /* tstate->interp: checked against the interpreters */
    uint16_t ts_thread_id;         /* tstate->thread_id: checked against pthread_self() */

    /* A frame (3.10: PyFrameObject; 3.11+: _PyInterpreterFrame). */
    uint16_t fr_previous;    /* f_back / previous */
    uint16_t fr_code;        /* f_code (3.10-3.12) / f_executable (3.13+) */
    uint16_t fr_instr;       /* f_lasti / prev_instr / instr_ptr, per instr_kind */
    uint16_t fr_owner;       /* char owner (3.11+), CT_PY_NONE in 3.10 */
    uint16_t fr_is_entry;    /* bool is_entry (3.11), else CT_PY_NONE */
    uint8_t owner_generator; /* FRAME_OWNED_BY_GENERATOR (0xff in 3.10: no owner byte) */
    uint8_t owner_cstack;    /* frames owned by this value or above are the C stack's
                                (entry shims), never a Python function's: skipped.
                                3 in 3.12-3.14 (3.14 calls it FRAME_OWNED_BY_INTERPRETER
                                and has CSTACK = 4); 0xff in 3.10, 3.11 (no shim) */
    uint8_t code_tag_bits;   /* low bits of fr_code to clear (3.14: a _PyStackRef) */

    /* A code object. co_code_adaptive: where its bytecode starts (3.11+);
     * in 3.10 the bytecode is the bytes object co_code. co_size: ob_size
     * (3.11+: the number of code units). */
    uint16_t co_name, co_filename, co_linetable, co_firstlineno;
    uint16_t co_code;           /* 3.10: the bytes object; else CT_PY_NONE */
    uint16_t co_code_adaptive;  /* 3.11+: first code unit; else CT_PY_NONE */
    uint16_t co_firsttraceable; /* 3.11+: int _co_firsttraceable (frames not past it are
                                   incomplete and skipped, as the API does) */
    uint16_t co_version;        /* 3.12+: uint32_t co_version, from a counter bumped for each code
                                   object made (0 once it wraps); CT_PY_NONE before 3.12 */

    /* Objects. */
    uint16_t ob_type;            /* PyObject.ob_type */
    uint16_t ob_size;            /* PyVarObject.ob_size */
    uint16_t bytes_sval;         /* PyBytesObject.ob_sval */
    uint16_t str_length;         /* PyASCIIObject.length */
    uint16_t str_state;          /* PyASCIIObject.state (a 32-bit bit field) */
    uint16_t str_ascii_data;     /* sizeof(PyASCIIObject): data of a compact ASCII str */
    uint16_t str_compact_data;   /* sizeof(PyCompactUnicodeObject): data of another compact str */
    uint8_t state_kind_shift;    /* state bits: kind (3 bits: 1, 2 or 4 bytes a character) */
    uint8_t state_compact_shift; /* compact (1 bit) */
    uint8_t state_ascii_shift;   /* ascii (1 bit) */

    /* The runtime: to tell whether several interpreters exist (3.10, 3.11,
     * where a thread's gilstate thread state stays the main interpreter's). */
    uint16_t rt_interpreters_head; /* _PyRuntime.interpreters.head */
    uint16_t interp_next;          /* PyInterpreterState.next */
};

/*
 * The built-in table for a CPython version (0x030a, 0x030b, ...), NULL for
 * a version without one. Tables exist for 3.10 to 3.14.
 */
const struct ct_py_layout *ct_py_layout_table(unsigned version);

/*
 * Overrides the offsets that the interpreter publishes in its
 * _PyRuntime.debug_offsets (3.13 and later) in *out, which holds the table
 * of its version. `runtime` is the address of _PyRuntime. Returns false,
 * leaving *out as it was, when the cookie, the version or the published
 * sizes are not what this version's debug offsets look like.
 */
bool ct_py_layout_from_debug_offsets(const void *runtime, unsigned version,
                                     struct ct_py_layout *out);

#endif
