/*
 * layout_probe.c - prints, for the CPython whose headers it is compiled
 * against, the value of every field of struct ct_py_layout
 * (preload/core/pylayout.h) as one "name value" line, so that
 * layout_check.c can compare them with the built-in table.
 *
 * Built at test time only (tests/python/layout.mk), once per installed
 * interpreter, with that interpreter's own headers and -DPy_BUILD_CORE:
 * the frame and runtime structures are internal. It is never linked with
 * libpython; it only asks the compiler (offsetof, sizeof, enum values) and,
 * for the bit fields of a str's state, builds a state in its own memory.
 *
 * The numbers come from the headers; the choice of which field answers a
 * ct_py_layout field in which version (say, fr_code is f_code up to 3.12
 * and f_executable from 3.13) is made here by name, so a renamed or removed
 * field stops the build instead of printing a stale number.
 */
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include <Python.h>

#if PY_VERSION_HEX < 0x030a0000 || PY_VERSION_HEX >= 0x030f0000
#error "layout_probe.c knows CPython 3.10 to 3.14"
#endif

#include "pycore_runtime.h"
#include "pycore_interp.h"
#if PY_VERSION_HEX >= 0x030e0000
#include "pycore_interpframe.h"
#include "pycore_stackref.h"
#elif PY_VERSION_HEX >= 0x030b0000
#include "pycore_frame.h"
#else
#include "frameobject.h"
#endif

#ifdef Py_GIL_DISABLED
#error "the tables describe the default (GIL) build; this is a free-threaded one"
#endif
#ifdef Py_TRACE_REFS
#error "the tables describe builds without Py_TRACE_REFS"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cutrace/format.h"
#include "../../preload/core/pylayout.h"

/* The value pylayout.c uses where a version has no such frame owner. */
#define NO_OWNER 0xff

static void put(const char *name, unsigned long value)
{
    printf("%s %lu\n", name, value);
}

static uint32_t state_word(const PyASCIIObject *o)
{
    uint32_t w;
    memcpy(&w, (const char *)o + offsetof(PyASCIIObject, state), sizeof w);
    return w;
}

/* Position of the lowest set bit of the state word that setting one bit
 * field produced; the walker masks with the field's width from there. */
static unsigned shift_of(uint32_t w)
{
    if (w == 0) {
        fprintf(stderr, "layout_probe: a state bit field set no bit\n");
        exit(2);
    }
    return (unsigned)__builtin_ctz(w);
}

static void str_state_shifts(void)
{
    PyASCIIObject o;

    memset(&o, 0, sizeof o);
    o.state.kind = 1;
    put("state_kind_shift", shift_of(state_word(&o)));
    memset(&o, 0, sizeof o);
    o.state.kind = 7;
    if (state_word(&o) >> shift_of(state_word(&o)) != 7) {
        fprintf(stderr, "layout_probe: str kind is not a 3-bit field\n");
        exit(2);
    }
    memset(&o, 0, sizeof o);
    o.state.compact = 1;
    put("state_compact_shift", shift_of(state_word(&o)));
    memset(&o, 0, sizeof o);
    o.state.ascii = 1;
    put("state_ascii_shift", shift_of(state_word(&o)));
}

int main(void)
{
    put("version", (PY_MAJOR_VERSION << 8) | PY_MINOR_VERSION);
    put("ts_interp", offsetof(PyThreadState, interp));
    put("ts_thread_id", offsetof(PyThreadState, thread_id));

#if PY_VERSION_HEX < 0x030b0000
    /* 3.10: PyFrameObject, linked by f_back; one eval loop per frame. */
    put("instr_kind", CT_PY_LASTI_INDEX);
    put("entry_kind", CT_PY_ENTRY_EVERY);
    put("line_format", CT_PYLINES_310);
    put("ts_frame", offsetof(PyThreadState, frame));
    put("cframe_current_frame", CT_PY_NONE);
    put("fr_previous", offsetof(PyFrameObject, f_back));
    put("fr_code", offsetof(PyFrameObject, f_code));
    put("fr_instr", offsetof(PyFrameObject, f_lasti));
    put("fr_owner", CT_PY_NONE);
    put("fr_is_entry", CT_PY_NONE);
    put("owner_generator", NO_OWNER);
    put("owner_cstack", NO_OWNER);
    put("code_tag_bits", 0);
    put("co_code", offsetof(PyCodeObject, co_code));
    put("co_code_adaptive", CT_PY_NONE);
    put("co_firsttraceable", CT_PY_NONE);
    put("co_version", CT_PY_NONE);
#else
    put("line_format", CT_PYLINES_311);
#if PY_VERSION_HEX < 0x030d0000
    put("instr_kind", CT_PY_PREV_INSTR);
    put("ts_frame", offsetof(PyThreadState, cframe));
    put("cframe_current_frame", offsetof(_PyCFrame, current_frame));
    put("fr_code", offsetof(_PyInterpreterFrame, f_code));
    put("fr_instr", offsetof(_PyInterpreterFrame, prev_instr));
#else
    put("instr_kind", CT_PY_INSTR_PTR);
    put("ts_frame", offsetof(PyThreadState, current_frame));
    put("cframe_current_frame", CT_PY_NONE);
    put("fr_code", offsetof(_PyInterpreterFrame, f_executable));
    put("fr_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#endif
    put("fr_previous", offsetof(_PyInterpreterFrame, previous));
    put("fr_owner", offsetof(_PyInterpreterFrame, owner));
    put("owner_generator", FRAME_OWNED_BY_GENERATOR);
#if PY_VERSION_HEX < 0x030c0000
    put("entry_kind", CT_PY_ENTRY_FLAG);
    put("fr_is_entry", offsetof(_PyInterpreterFrame, is_entry));
    put("owner_cstack", NO_OWNER);
#else
    put("entry_kind", CT_PY_ENTRY_SHIM);
    put("fr_is_entry", CT_PY_NONE);
#if PY_VERSION_HEX < 0x030e0000
    /* 3.12, 3.13: _PyEval_EvalFrameDefault's entry_frame. */
    put("owner_cstack", FRAME_OWNED_BY_CSTACK);
#else
    /* 3.14 renamed it: the entry frame is FRAME_OWNED_BY_INTERPRETER (3) and
     * FRAME_OWNED_BY_CSTACK moved to 4; _PyFrame_IsIncomplete tests
     * owner >= FRAME_OWNED_BY_INTERPRETER. */
    _Static_assert(FRAME_OWNED_BY_CSTACK > FRAME_OWNED_BY_INTERPRETER, "3.14 owner order");
    put("owner_cstack", FRAME_OWNED_BY_INTERPRETER);
#endif
#endif
#if PY_VERSION_HEX >= 0x030e0000
    _Static_assert(sizeof(_PyStackRef) == sizeof(void *), "a stack ref is one word");
    put("code_tag_bits", Py_TAG_BITS);
#else
    put("code_tag_bits", 0);
#endif
    put("co_code", CT_PY_NONE);
    put("co_code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
    put("co_firsttraceable", offsetof(PyCodeObject, _co_firsttraceable));
#if PY_VERSION_HEX >= 0x030c0000
    _Static_assert(sizeof(((PyCodeObject *)0)->co_version) == 4, "co_version is 32 bits");
    put("co_version", offsetof(PyCodeObject, co_version));
#else
    put("co_version", CT_PY_NONE);
#endif
#endif

    put("co_name", offsetof(PyCodeObject, co_name));
    put("co_filename", offsetof(PyCodeObject, co_filename));
    put("co_linetable", offsetof(PyCodeObject, co_linetable));
    put("co_firstlineno", offsetof(PyCodeObject, co_firstlineno));

    put("ob_type", offsetof(PyObject, ob_type));
    put("ob_size", offsetof(PyVarObject, ob_size));
    put("bytes_sval", offsetof(PyBytesObject, ob_sval));
    put("str_length", offsetof(PyASCIIObject, length));
    put("str_state", offsetof(PyASCIIObject, state));
    put("str_ascii_data", sizeof(PyASCIIObject));
    put("str_compact_data", sizeof(PyCompactUnicodeObject));
    str_state_shifts();

    put("rt_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
    put("interp_next", offsetof(PyInterpreterState, next));
    return 0;
}
