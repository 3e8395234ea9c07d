/*
 * stacks.h - which calls get a call stack, and capturing it (docs/stacks.md).
 *
 * Configured once from the environment when the library loads:
 *   CUTRACE_STACKS             all (default: native and Python frames),
 *                              native, python, or none
 *   CUTRACE_STACK_DEPTH        frames of each kind, 1..128 (default 32)
 *   CUTRACE_STACK_COLLECTIVES  1: NCCL collectives and point-to-point calls
 *                              get one too (default: only memory calls:
 *                              allocations, frees, resets, cudaMemGetInfo,
 *                              IPC exports and communicator inits)
 *
 * A stack is identified by a 63-bit hash of its frames (calls.stack_id).
 * Each process sends each distinct stack to the writer once: a lock-free
 * table of the hashes already sent, in a preallocated anonymous mapping,
 * decides; the first thread to claim a hash pushes its frames into the ring
 * as auxiliary records (stackrec.h). In the steady state a capture is the
 * unwind, a hash and one table probe: no allocation, no I/O, no lock.
 */
#ifndef CUTRACE_STACKS_H
#define CUTRACE_STACKS_H

#include <stdbool.h>
#include <stdint.h>

#include "cutrace/apis.h"

/*
 * At a call's start: whether it will capture a stack at its end. True when
 * its API is configured for stacks and no enclosing traced call of this
 * thread captures one (the runtime's own cuMemAlloc_v2 inside a cudaMalloc
 * shares its caller's stack; the analyzer follows parent_seq). Pair a true
 * answer with ct_stacks_leave().
 */
bool ct_stacks_enter(enum ct_api api);

/*
 * The calling thread's stack (frames of libcutrace itself left out), sent
 * to the writer if new; returns its id, 0 if nothing could be captured.
 * Call it with no tracer state held: it may run Python code (a garbage
 * collection) that makes traced calls of its own.
 */
uint64_t ct_stacks_capture(void);
void ct_stacks_leave(void);

/* "native=libunwind python=on depth=32 on=memory", for meta('stacks'). */
const char *ct_stacks_describe(void);

/* Whether any stack is captured (the writer then records loaded objects). */
bool ct_stacks_enabled(void);

/* The writer saw new objects loaded: libpython may have come (writer thread). */
void ct_stacks_objects_changed(void);

#endif
