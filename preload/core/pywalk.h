/*
 * pywalk.h - the calling thread's Python frames read from the interpreter's
 * own structures, with the offsets of pylayout.h: no GIL, no CPython
 * function, no allocation, no reference count (docs/stacks.md, "Python
 * frames").
 *
 * pyframes.c decides whether a layout may be used and how far it is
 * trusted; this file only walks. A walk reads memory one of two ways:
 * `safe`, through process_vm_readv on the process itself, which answers
 * EFAULT for an unmapped address instead of a fault (for a layout not yet
 * seen to work), or by plain loads. Either way every object is
 * type-checked as it is met, and any doubt fails the walk with a reason,
 * never a wrong frame.
 */
#ifndef CUTRACE_PYWALK_H
#define CUTRACE_PYWALK_H

#include <stdbool.h>
#include <stdint.h>

#include "pylayout.h"

/* The interpreter's type objects and runtime, by address (dlsym). */
struct ct_py_types {
    uintptr_t code, str, bytes; /* PyCode_Type, PyUnicode_Type, PyBytes_Type */
    uintptr_t runtime;          /* _PyRuntime, 0 if not exported */
};

/* One walk: what it reads with, where it writes, and how it ended. */
struct ct_py_walk {
    const struct ct_py_types *types;
    const struct ct_py_layout *L;
    bool safe;       /* reads through process_vm_readv */
    bool failed;     /* a read or a check failed: nothing it found may be used */
    const char *why; /* the reason, when failed */
    uint64_t *out;   /* CT_PYFRAME values; NULL: code_out/offset_out instead */
    int max;
};

/* The function name's share of a CT_AUX_PYCODE record; the file gets the rest. */
#define CT_PY_NAME_MAX_BYTES 100

/* Whether a table has every field its family of versions needs (the walk
 * takes them as given: 3.10, 3.11, or 3.12 and later). */
bool ct_pywalk_layout_complete(const struct ct_py_layout *L);

/* Maps the code cache (once, when an interpreter is found); false if it
 * could not be mapped: frames are then recorded with code id 0. */
bool ct_pywalk_init(void);

/* A new code id, shared with the API path's cache (ids start at 1). */
uint32_t ct_py_new_code_id(void);

/*
 * Checks that need no frame (a thread may run none): the thread state is
 * this thread's (thread_id) and its interpreter one of the runtime's.
 * Made before anything else is read with a layout not yet trusted.
 */
void ct_pywalk_check_thread(struct ct_py_walk *w, uintptr_t tstate);

/* 3.10, 3.11: whether more than one interpreter exists (their gilstate
 * then need not be the running interpreter's: see pyframes.c). */
bool ct_pywalk_several_interpreters(struct ct_py_walk *w);

/*
 * Up to w->max frames of tstate, innermost first: into w->out as
 * CT_PYFRAME values (sending each new code object's names and line table
 * to the writer), or, with w->out NULL, their code objects and instruction
 * offsets into code_out and offset_out (the check against the API). 0 and
 * w->failed on any doubt.
 */
int ct_pywalk_frames(struct ct_py_walk *w, uintptr_t tstate, uintptr_t *code_out,
                     uint32_t *offset_out);

/*
 * A code object as the walk reads it, for the check against the API: the
 * line of the instruction at `offset` (0 when its table, of which the first
 * 4 KiB are decoded, says none) and its function name (UTF-8, at most cap
 * bytes). False, with w->failed, when it cannot be read.
 */
bool ct_pywalk_code_info(struct ct_py_walk *w, uintptr_t code, uint32_t offset, int64_t *line,
                         char *name, unsigned cap, unsigned *name_len);

/* A forked child: its trace has none of the parent's code ids. The forking
 * thread is the child's only one. */
void ct_pywalk_after_fork_child(void);

#endif
