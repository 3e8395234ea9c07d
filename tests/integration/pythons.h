/*
 * pythons.h - the CPython interpreters the integration suites run Python
 * programs on (tests/python/pythons.sh: 3.10 and later, the newest patch of
 * each); an absent one is named in a "skipped: ..." note, never silently
 * left out.
 */
#ifndef CUTRACE_INTEGRATION_PYTHONS_H
#define CUTRACE_INTEGRATION_PYTHONS_H

#include <stddef.h>

struct python {
    char version[16]; /* "3.12" */
    char path[1024];
};

/*
 * Runs pythons.sh (CUTRACE_TEST_SRC names the source tree) and fills
 * out[0..cap); returns how many. note gets pythons.sh's "skipped" lines, or
 * why it could not run.
 */
size_t pythons_find(struct python *out, size_t cap, char *note, size_t note_cap);

#endif
