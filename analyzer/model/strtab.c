/*
 * strtab.c - string interning for the GPU model loader (loader.h): api
 * names, clocks, IPC handles, module names and other texts get small ids,
 * so that events and allocations carry a uint32_t instead of a string.
 * Open addressing over a power-of-two table kept at most half full.
 */
#include "cli.h"
#include "model/loader.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static void strtab_rehash(struct strtab *t)
{
    size_t n = t->nslots ? t->nslots * 2 : 64;
    free(t->slots);
    t->slots = xcalloc(n, sizeof(*t->slots));
    t->nslots = n;
    for (size_t id = 0; id < t->count; id++) {
        size_t i = hash_bytes(t->strings[id], strlen(t->strings[id])) & (n - 1);
        while (t->slots[i])
            i = (i + 1) & (n - 1);
        t->slots[i] = (uint32_t)id + 1;
    }
}

uint32_t strtab_id(struct strtab *t, const char *s)
{
    if (!s)
        s = "";
    if ((t->count + 1) * 2 > t->nslots)
        strtab_rehash(t);
    size_t i = hash_bytes(s, strlen(s)) & (t->nslots - 1);
    while (t->slots[i]) {
        uint32_t id = t->slots[i] - 1;
        if (strcmp(t->strings[id], s) == 0)
            return id;
        i = (i + 1) & (t->nslots - 1);
    }
    assert(t->count < UINT32_MAX - 2);
    t->strings = xgrow(t->strings, &t->cap, t->count + 1, sizeof(*t->strings));
    t->strings[t->count] = xstrdup(s);
    t->slots[i] = (uint32_t)t->count + 1;
    return (uint32_t)t->count++;
}

uint32_t strtab_find(const struct strtab *t, const char *s)
{
    if (!t->nslots || !s)
        return GM_NONE;
    size_t i = hash_bytes(s, strlen(s)) & (t->nslots - 1);
    while (t->slots[i]) {
        uint32_t id = t->slots[i] - 1;
        if (strcmp(t->strings[id], s) == 0)
            return id;
        i = (i + 1) & (t->nslots - 1);
    }
    return GM_NONE;
}

void strtab_free(struct strtab *t, bool keep_strings)
{
    if (!keep_strings) {
        for (size_t i = 0; i < t->count; i++)
            free(t->strings[i]);
        free(t->strings);
    }
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

uint32_t strtab_id_or_none(struct strtab *t, const char *s)
{
    return s ? strtab_id(t, s) : GM_NONE;
}
