/*
 * pythons.c - finding the CPython interpreters of the Python tests (pythons.h).
 */
#include "pythons.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t pythons_find(struct python *out, size_t cap, char *note, size_t note_cap)
{
    note[0] = '\0';
    const char *src = getenv("CUTRACE_TEST_SRC");
    if (!src || !*src) {
        snprintf(note, note_cap, "CUTRACE_TEST_SRC is not set\n");
        return 0;
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "sh '%s/tests/python/pythons.sh' 2>&1", src);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(note, note_cap, "cannot run pythons.sh\n");
        return 0;
    }
    size_t n = 0;
    char line[2048];
    while (fgets(line, sizeof line, p)) {
        struct python py;
        if (n < cap && sscanf(line, "%15s %1023s", py.version, py.path) == 2 &&
            strncmp(py.version, "3.", 2) == 0 && py.path[0] == '/')
            out[n++] = py;
        else
            strncat(note, line, note_cap - strlen(note) - 1);
    }
    pclose(p);
    return n;
}
