/*
 * modules.h - what trace format 3 added for the driver API, read for the
 * reports: the module (loaded library or program) that issued each call and
 * allocation, and the driver entry-point lookups (cuGetProcAddress,
 * cudaGetDriverEntryPoint), which a process makes by the hundred at start-up
 * and which reports summarise instead of listing.
 *
 * The data comes from the public table `modules`, the `module` column of the
 * views `calls` and `allocations`, and the view `driver_lookups`
 * (include/cutrace/schema.h). Traces of formats 1 and 2 have none of them:
 * reports then leave their module and lookup sections out (JSON: null)
 * rather than refusing the trace. trace.c already refuses a format-3 trace
 * that lacks one of these objects; modules_check also makes sure the
 * columns the reports read are there and usable, so that a damaged view
 * fails up front with one line naming it, not halfway through a report.
 */
#ifndef CUTRACE_ANALYZER_MODULES_H
#define CUTRACE_ANALYZER_MODULES_H

#include "model/trace.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * 1: the trace records issuing modules and driver lookups (format 3 or
 * later, usable); 0: an older trace that cannot tell; -1 with t->error set:
 * a format-3 trace whose module or lookup objects are damaged.
 */
int modules_check(struct trace *t);

/*
 * The name a module is shown under: the last component of its path, or the
 * whole path when that component is empty ("/x/" -> "/x/"), or "" for "".
 * Returns a pointer into path (or a static "").
 */
const char *module_basename(const char *path);

/*
 * The name a module is shown and grouped under: module_basename made
 * printable, control characters and bytes that are not valid UTF-8 replaced
 * by '?', so that two names never differ only where a terminal or a JSON
 * writer would show them alike. "" for NULL. Malloc'd.
 */
char *module_display_name(const char *path);

/*
 * What a well-known module's allocations are, for people: "the program"
 * when name is the basename of exe (may be NULL), else "NCCL's own buffers"
 * (libnccl*), "CUDA runtime (cudaMalloc & co.)" (libcudart*), "CUDA driver"
 * (libcuda.so*), "PyTorch" (libtorch*, libc10*), "cuBLAS" (libcublas*),
 * "cuDNN" (libcudnn*). NULL for any other module.
 */
const char *module_label(const char *name, const char *exe);

/* The driver_lookups view of one trace, in numbers. */
struct driver_lookups {
    bool present;    /* false: a trace from before lookups were recorded */
    int64_t calls;   /* every lookup, failed ones included */
    int64_t wrapped; /* ... answered with cutrace's own wrapper (wrapped != 0) */
    int64_t failed;  /* ... whose result was not 0 (symbol not found, ...) */
    int64_t symbols; /* distinct symbols asked for */
};

/*
 * Loads the lookup counts; with available = 0 (from modules_check) only
 * sets present = false. Returns 0, or -1 with t->error set.
 */
int driver_lookups_load(struct trace *t, int available, struct driver_lookups *out);

#endif
