/*
 * cudalibs.h - where the CUDA stack's own code lies: what tells a call the
 * stack made inside a call in progress (nested) from one that merely ran
 * in the middle of it (a signal handler's), which is the program's own.
 *
 * The stack is every loaded library of the families (libcudart, libcuda,
 * libnccl, their renamed wheel copies and NCCL's plugins, resolve.h) and
 * every object holding the real function of a hook (a shim preloaded after
 * cutrace, whose cudaMalloc calls libcudart's). Ranges are learned when a
 * hook's real function is resolved (registry.c), where the loader may be
 * asked; the check is plain compares over a fixed table: no lock, no call,
 * safe in a signal handler. A library of a family loaded after the last
 * resolution (an NCCL network plugin opened during the first init) is known
 * from the next one on; until then its calls count as the program's.
 */
#ifndef CUTRACE_CUDALIBS_H
#define CUTRACE_CUDALIBS_H

#include <stdbool.h>
#include <stdint.h>

/* A real function was resolved: learns the object holding it and every
 * loaded library of the families not learned yet. */
void ct_cudalibs_learn(const void *real_fn);

/* Whether addr lies in code of the CUDA stack learned so far. */
bool ct_cudalibs_contains(uint64_t addr);

#endif
