/*
 * errnames.h - the name of a result code returned by a traced call, looked
 * up by the layer the call belongs to (the `layer` column of calls/apis):
 * the same number means different things to the runtime, the driver and NCCL
 * (2 is cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY, ncclSystemError).
 */
#ifndef CUTRACE_ANALYZER_ERRNAMES_H
#define CUTRACE_ANALYZER_ERRNAMES_H

#include <stddef.h>
#include <stdint.h>

enum result_layer { LAYER_UNKNOWN, LAYER_RUNTIME, LAYER_DRIVER, LAYER_NCCL };

/* "runtime", "driver", "nccl"; anything else (or NULL) is LAYER_UNKNOWN. */
enum result_layer result_layer_from_name(const char *layer);

/* The code's name (cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY,
 * ncclSystemError), or NULL when this build does not know it. */
const char *result_name(enum result_layer layer, int64_t code);

/* The name, or "error <code>" when unknown; returns buf. */
const char *result_describe(char *buf, size_t size, enum result_layer layer, int64_t code);

/* 1 when the layer's table is strictly sorted by code (a unit test invariant). */
int result_names_sorted(enum result_layer layer);

#endif
