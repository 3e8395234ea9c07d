/*
 * demangle.h - C++ symbol names for people ("_ZN3c104cuda...": "c10::cuda::...").
 *
 * Uses the C++ runtime's own demangler, __cxa_demangle, found at run time
 * in libstdc++.so.6 (dlopen): the CLI stays a C program with no link-time
 * dependency, and every machine that runs CUDA or PyTorch has libstdc++.
 * Where it is missing, names stay mangled (and the reports say nothing
 * wrong, only less readable). Writing our own Itanium demangler was the
 * alternative: a subset would mangle the template-heavy names of PyTorch
 * and NCCL that matter most, the complete grammar is thousands of lines.
 */
#ifndef CUTRACE_ANALYZER_DEMANGLE_H
#define CUTRACE_ANALYZER_DEMANGLE_H

#include <stdbool.h>

/* The demangled name (malloc'd), or NULL when name is not a C++ name or no
 * demangler is available. */
char *demangle(const char *name);

/* Whether a demangler was found (for the tests). */
bool demangle_available(void);

#endif
