/*
 * modmap.c - caller address to loaded object (modmap.h).
 */
#include "modmap.h"

#include <link.h>
#include <string.h>
#include <unistd.h>

#include "objects.h"

static bool in_known(const struct ct_modmap *map, uint64_t addr)
{
    size_t lo = 0, hi = map->n_known;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (addr < map->known[mid].start)
            hi = mid;
        else if (addr >= map->known[mid].end)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

static bool listed(const uint64_t *list, size_t n, uint64_t addr)
{
    for (size_t i = 0; i < n; i++) {
        if (list[i] == addr)
            return true;
    }
    return false;
}

bool ct_modmap_note(struct ct_modmap *map, uint64_t addr)
{
    if (!addr || in_known(map, addr) || listed(map->pending, map->n_pending, addr) ||
        listed(map->unknown, map->n_unknown, addr))
        return true;
    if (map->n_pending == CT_MODMAP_PENDING)
        return false;
    map->pending[map->n_pending++] = addr;
    return true;
}

struct finder {
    uint64_t addr;
    struct ct_module *out;
    bool found;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct finder *f = arg;
    uint64_t lo, hi;
    ct_object_range(info, &lo, &hi);
    if (f->addr < lo || f->addr >= hi)
        return 0;
    f->out->base = info->dlpi_addr;
    f->out->start = lo;
    f->out->end = hi;
    const char *name = info->dlpi_name;
    if (!name || !*name) {
        /* The main program is listed without a name. */
        ssize_t n = readlink("/proc/self/exe", f->out->path, sizeof f->out->path - 1);
        f->out->path[n > 0 ? n : 0] = '\0';
    } else {
        strncpy(f->out->path, name, sizeof f->out->path - 1);
        f->out->path[sizeof f->out->path - 1] = '\0';
    }
    f->found = true;
    return 1;
}

size_t ct_modmap_resolve(struct ct_modmap *map, struct ct_module *out, size_t cap)
{
    size_t n = 0, kept = 0;
    for (size_t i = 0; i < map->n_pending; i++) {
        uint64_t addr = map->pending[i];
        bool seen = false;
        for (size_t k = 0; k < n; k++)
            seen = seen || (addr >= out[k].start && addr < out[k].end);
        if (seen)
            continue;
        if (n == cap) {
            map->pending[kept++] = addr; /* its object waits for the next round */
            continue;
        }
        struct finder f = {addr, &out[n], false};
        ct_dl_iterate(find_object, &f); /* fork-safe (objects.h) */
        if (f.found)
            n++;
        else if (map->n_unknown < CT_MODMAP_PENDING)
            map->unknown[map->n_unknown++] = addr;
    }
    map->n_pending = kept;
    return n;
}

void ct_modmap_add(struct ct_modmap *map, const struct ct_module *m)
{
    if (map->n_known == CT_MODMAP_MAX || in_known(map, m->start))
        return;
    size_t at = map->n_known;
    while (at > 0 && map->known[at - 1].start > m->start) {
        map->known[at] = map->known[at - 1];
        at--;
    }
    map->known[at].start = m->start;
    map->known[at].end = m->end;
    map->n_known++;
}
