/*
 * symbolize.h - names of native stack frames, resolved offline from the
 * symbol tables of the modules a trace recorded (loaded_modules), with a
 * cache: each module file is read once per run, each name demangled once.
 *
 * A module is only trusted when it is still the one the process loaded:
 * when the trace recorded a build id and the file on disk has another, its
 * frames stay unnamed (module+offset) and the report says why. A stripped
 * module is named from its separate debug file when the system has one
 * (/usr/lib/debug/.build-id/...), else from its dynamic symbols.
 */
#ifndef CUTRACE_ANALYZER_SYMBOLIZE_H
#define CUTRACE_ANALYZER_SYMBOLIZE_H

#include <stdint.h>

struct symbolizer;

struct symbolizer *symbolizer_new(void);
void symbolizer_free(struct symbolizer *s);

/*
 * The function at `offset` (the frame's address minus the module's load
 * bias, as stacks.offset has it) in the module at `path`, loaded with
 * `build_id` ("" or NULL: not recorded). Returns the demangled name, owned
 * by the symbolizer, or NULL; sets *sym_offset to the offset into it.
 */
const char *symbolizer_lookup(struct symbolizer *s, const char *path, const char *build_id,
                              uint64_t offset, uint64_t *sym_offset);

/* Why a module gives no names (NULL when it does): "no such file", ... */
const char *symbolizer_problem(struct symbolizer *s, const char *path, const char *build_id);

#endif
