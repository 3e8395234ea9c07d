/*
 * pyframes.h - the Python frames of the calling thread, whether or not it
 * holds the GIL (docs/stacks.md, "Python frames").
 *
 * Real servers make every CUDA call with the GIL released (ctypes.CDLL,
 * every PyTorch operator), so the frames are read the way CPython's own
 * faulthandler and out-of-process profilers read them: from the
 * interpreter's structures, with offsets per minor version (pylayout.h).
 * Only this thread's own chain is read, while this thread is blocked in the
 * hook, so nothing in it can change; the GIL is never taken, no Python API
 * that needs it is called, nothing is allocated and no reference count
 * changes. A frame is recorded as (code id, instruction offset, entry
 * marker) (format.h, CT_PYFRAME_*): a code object's names and line table
 * are copied the first time it is seen and sent to the writer, and the
 * line is found offline from the table.
 *
 * The layout is checked before it is trusted: the first walk reads memory
 * only through process_vm_readv (a wrong offset then fails a check instead
 * of faulting) and checks every object's type; the first walk made with
 * the GIL held is compared with CPython's public API (PyThreadState_GetFrame,
 * PyFrame_GetCode, PyFrame_GetLineNumber, PyFrame_GetBack). Where either
 * check fails, or the version has no layout, frames are read through that
 * API alone, and only with the GIL held (one `cutrace:` warning).
 *
 * CPython is found at run time with dlsym(RTLD_DEFAULT): no build-time
 * dependency, nothing at all in a process without an interpreter.
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
 * Up to max frames of the calling thread, innermost first (CT_PYFRAME_*
 * of format.h); 0 when the interpreter is absent, not initialized or
 * finalizing, the thread has no Python thread state, or its frames cannot
 * be read (then see ct_py_capture's fallback in docs/stacks.md). Pushes
 * CT_AUX_PYCODE/PYLINES records for each new code object and a CT_AUX_META
 * record when the way frames are read changes. On the fallback path with
 * the GIL held it calls into Python, which may allocate and run a garbage
 * collection.
 */
int ct_py_capture(uint64_t *out, int max);

/* A forked child starts a new trace: every code object must be sent again. */
void ct_py_after_fork_child(void);

#endif
