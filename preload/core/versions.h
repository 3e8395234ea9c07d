/*
 * versions.h - which CUDA runtime, driver and NCCL a traced process uses.
 */
#ifndef CUTRACE_VERSIONS_H
#define CUTRACE_VERSIONS_H

#include "cutrace/store.h"

/*
 * Writer thread: asks the libraries already loaded (never loads one); each
 * answer is 0 when unknown. These functions only report constants: they do
 * not initialize CUDA or NCCL.
 */
void ct_library_versions(struct ct_versions *out);

#endif
