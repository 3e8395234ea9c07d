/*
 * pyframes.h - the Python frames of the calling thread, when it runs CPython
 * and already holds the GIL (never taken: a thread that released it, as
 * ctypes.CDLL and most PyTorch operators do around native code, gets no
 * Python frames).
 *
 * CPython is found at run time, with dlsym(RTLD_DEFAULT): no build-time
 * dependency, nothing at all in a process without an interpreter. Frames
 * are read through the public C API of Python 3.9 and later
 * (PyThreadState_GetFrame, PyFrame_GetCode, PyFrame_GetLineNumber,
 * PyFrame_GetBack). A frame is recorded as (code id, line): each code
 * object gets an id the first time it is seen, its names (co_name,
 * co_filename) are read then, once, and sent to the writer; cutrace keeps a
 * reference to it so that its address is never reused for another.
 */
#ifndef CUTRACE_PYFRAMES_H
#define CUTRACE_PYFRAMES_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Looks the interpreter up (the constructor calls it; the writer calls it
 * again when new objects are loaded, outside any lock, in case libpython
 * came late). Publishes what it found once; true when found.
 */
bool ct_py_resolve(void);

/* Whether an interpreter has been found. */
bool ct_py_present(void);

/*
 * Up to max frames of the calling thread, innermost first, as
 * CT_PYFRAME(code id, line); 0 when the thread does not hold the GIL, the
 * interpreter is absent, not initialized or finalizing, or an exception is
 * pending. Calls into Python (which may allocate, and run a garbage
 * collection) and pushes a CT_AUX_PYCODE record for each new code object.
 */
int ct_py_capture(uint64_t *out, int max);

/* A forked child starts a new trace: every code object must be sent again. */
void ct_py_after_fork_child(void);

#endif
