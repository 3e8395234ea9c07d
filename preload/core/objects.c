/*
 * objects.c - snapshots of the loaded objects for symbolization (objects.h).
 */
#include "objects.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MISSING_RESCAN_NS 1000000000ull /* a frame in no object (JIT code) rescans at most 1/s */

/* Held around dl_iterate_phdr, and by fork (see the header). */
static pthread_mutex_t dl_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ct_dl_iterate(int (*callback)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    pthread_mutex_lock(&dl_mu);
    int rc = dl_iterate_phdr(callback, arg);
    pthread_mutex_unlock(&dl_mu);
    return rc;
}

static bool find_recorded(const struct ct_objects *o, uint64_t addr, size_t *at)
{
    size_t lo = 0, hi = o->n_recorded;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (addr < o->recorded[mid].start)
            hi = mid;
        else if (addr >= o->recorded[mid].end)
            lo = mid + 1;
        else {
            *at = mid;
            return true;
        }
    }
    *at = lo;
    return false;
}

void ct_objects_note(struct ct_objects *o, uint64_t ip)
{
    size_t at;
    if (ip && !find_recorded(o, ip, &at))
        o->missing = true;
}

void ct_object_range(const struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi)
{
    *lo = UINT64_MAX;
    *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uint64_t start = info->dlpi_addr + ph->p_vaddr;
        *lo = start < *lo ? start : *lo;
        *hi = start + ph->p_memsz > *hi ? start + ph->p_memsz : *hi;
    }
}

/* The GNU build id from the object's notes, as mapped. */
static void build_id_of(const struct dl_phdr_info *info, char *hex, size_t cap)
{
    hex[0] = '\0';
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        size_t left = ph->p_memsz, align = ph->p_align == 8 ? 8 : 4;
        while (left >= sizeof(ElfW(Nhdr))) {
            ElfW(Nhdr) nh;
            memcpy(&nh, p, sizeof nh);
            size_t name = ((size_t)nh.n_namesz + align - 1) & ~(align - 1);
            size_t desc = ((size_t)nh.n_descsz + align - 1) & ~(align - 1);
            if (name > left || desc > left || sizeof nh + name + desc > left)
                break;
            const unsigned char *n = p + sizeof nh;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(n, "GNU", 4) == 0 &&
                nh.n_descsz > 0 && nh.n_descsz * 2 < cap) {
                const unsigned char *d = n + name;
                for (size_t k = 0; k < nh.n_descsz; k++)
                    snprintf(hex + 2 * k, 3, "%02x", d[k]);
                return;
            }
            size_t step = sizeof nh + name + desc;
            p += step;
            left -= step;
        }
    }
}

struct counters {
    unsigned long long adds, subs;
    bool known;
};

static int read_counters(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct counters *c = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c->adds = info->dlpi_adds;
        c->subs = info->dlpi_subs;
        c->known = true;
    }
    return 1; /* the counters are global: one object is enough */
}

struct collect {
    const struct ct_objects *o;
    struct ct_object *found;
    size_t n, cap;
};

static int collect_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct collect *c = arg;
    uint64_t lo, hi;
    ct_object_range(info, &lo, &hi);
    if (lo >= hi)
        return 0;
    size_t at;
    if (find_recorded(c->o, lo, &at) && c->o->recorded[at].start == lo &&
        c->o->recorded[at].end == hi && c->o->recorded[at].base == info->dlpi_addr)
        return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        struct ct_object *grown = realloc(c->found, cap * sizeof *grown);
        if (!grown)
            return 1; /* the rest waits for the next scan */
        c->found = grown;
        c->cap = cap;
    }
    struct ct_object *obj = &c->found[c->n++];
    obj->base = info->dlpi_addr;
    obj->start = lo;
    obj->end = hi;
    const char *name = info->dlpi_name;
    if (!name || !*name) {
        /* The main program is listed without a name. */
        ssize_t n = readlink("/proc/self/exe", obj->path, sizeof obj->path - 1);
        obj->path[n > 0 ? n : 0] = '\0';
    } else {
        snprintf(obj->path, sizeof obj->path, "%s", name);
    }
    build_id_of(info, obj->build_id, sizeof obj->build_id);
    return 0;
}

size_t ct_objects_scan(struct ct_objects *o, struct ct_object **out, bool *changed)
{
    *out = NULL;
    *changed = false;
    pthread_mutex_lock(&dl_mu);
    struct counters c = {0, 0, false};
    dl_iterate_phdr(read_counters, &c);
    bool moved = !c.known || !o->scanned || c.adds != o->adds || c.subs != o->subs;
    uint64_t now = 0;
    if (!moved && o->missing) {
        now = now_ns();
        moved = now - o->missing_scan_ns >= MISSING_RESCAN_NS;
        if (moved)
            o->missing_scan_ns = now;
    }
    struct collect col = {o, NULL, 0, 0};
    if (moved)
        dl_iterate_phdr(collect_object, &col);
    pthread_mutex_unlock(&dl_mu);
    if (moved) {
        *changed = o->scanned && (c.adds != o->adds || c.subs != o->subs);
        o->adds = c.adds;
        o->subs = c.subs;
        o->scanned = true;
        o->missing = false;
    }
    *out = col.found;
    return col.n;
}

void ct_objects_add(struct ct_objects *o, const struct ct_object *obj)
{
    size_t at;
    if (find_recorded(o, obj->start, &at) && o->recorded[at].start == obj->start &&
        o->recorded[at].end == obj->end && o->recorded[at].base == obj->base)
        return;
    if (o->n_recorded == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 64;
        struct ct_object_key *grown = realloc(o->recorded, cap * sizeof *grown);
        if (!grown)
            return; /* recorded again at the next scan: harmless */
        o->recorded = grown;
        o->cap = cap;
    }
    /* Sorted by start; an object replacing another at the same place goes first. */
    at = 0;
    while (at < o->n_recorded && o->recorded[at].start < obj->start)
        at++;
    memmove(&o->recorded[at + 1], &o->recorded[at], (o->n_recorded - at) * sizeof *o->recorded);
    o->recorded[at] = (struct ct_object_key){obj->base, obj->start, obj->end};
    o->n_recorded++;
}

void ct_objects_free(struct ct_objects *o)
{
    free(o->recorded);
    memset(o, 0, sizeof *o);
}

static void before_fork(void)
{
    pthread_mutex_lock(&dl_mu);
}

static void after_fork(void)
{
    pthread_mutex_unlock(&dl_mu);
}

static void after_fork_child(void)
{
    pthread_mutex_init(&dl_mu, NULL);
}

__attribute__((constructor)) static void objects_load(void)
{
    pthread_atfork(before_fork, after_fork, after_fork_child);
}
