/*
 * demangle.c - C++ names through libstdc++'s __cxa_demangle (demangle.h).
 */
#include "symbols/demangle.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* Names longer than this are left alone: demanglers have had stack overflows
 * on deep nestings, and no function of interest is named that long. */
#define MAX_MANGLED 4096

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static cxa_demangle_fn find(void)
{
    static int tried;
    static cxa_demangle_fn fn;
    if (!tried) {
        tried = 1;
        void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (h)
            fn = (cxa_demangle_fn)dlsym(h, "__cxa_demangle");
    }
    return fn;
}

bool demangle_available(void)
{
    return find() != NULL;
}

char *demangle(const char *name)
{
    if (!name || strncmp(name, "_Z", 2) != 0 || strlen(name) > MAX_MANGLED)
        return NULL;
    cxa_demangle_fn fn = find();
    if (!fn)
        return NULL;
    int status = -1;
    char *out = fn(name, NULL, NULL, &status);
    if (status != 0) {
        free(out);
        return NULL;
    }
    return out;
}
