/*
 * objects.h - the loaded objects (program, libraries) of the process, for
 * offline symbolization of native stack frames: each object's path, GNU
 * build id, load bias and address range, stored in the loaded_modules table
 * when the writer starts and again whenever the set changes (a dlopen or
 * dlclose, seen through glibc's dlpi_adds/dlpi_subs counters, or a frame
 * that lies in no object recorded yet).
 *
 * Writer thread only, in the writer's three steps: note (under its lock,
 * cheap), scan (no lock of the writer's held: dl_iterate_phdr takes the
 * dynamic loader's), store. The scan holds a mutex of its own that fork()
 * takes, so a child never inherits the loader's lock held by our writer.
 */
#ifndef CUTRACE_OBJECTS_H
#define CUTRACE_OBJECTS_H

#include <limits.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CT_BUILD_ID_HEX 129 /* up to 64 bytes of build id, in hex, NUL-terminated */

struct ct_object {
    char path[PATH_MAX];
    char build_id[CT_BUILD_ID_HEX]; /* "" when the object has none */
    uint64_t base;                  /* load bias (dlpi_addr) */
    uint64_t start, end;            /* its PT_LOAD segments */
};

struct ct_objects {
    struct ct_object_key {
        uint64_t base, start, end;
    } * recorded; /* sorted by start */
    size_t n_recorded, cap;
    unsigned long long adds, subs; /* the loader's counters at the last scan */
    bool scanned;                  /* at least one scan happened */
    bool missing;                  /* a noted frame lies in no recorded object */
    uint64_t missing_scan_ns;      /* when a missing frame last caused a scan */
};

/* A native frame of a new stack: remembers whether a rescan is needed. */
void ct_objects_note(struct ct_objects *o, uint64_t ip);

/*
 * When something changed since the last scan (or on the first call), the
 * loaded objects not recorded yet, malloc'd into *out (NULL when none).
 * Also sets *changed when the loader's counters moved. Returns how many.
 */
size_t ct_objects_scan(struct ct_objects *o, struct ct_object **out, bool *changed);

/* The object was stored: later scans skip it. */
void ct_objects_add(struct ct_objects *o, const struct ct_object *obj);

void ct_objects_free(struct ct_objects *o);

/* The addresses an object's PT_LOAD segments span: [*lo, *hi), empty (lo >=
 * hi) for an object without any. */
void ct_object_range(const struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi);

/*
 * dl_iterate_phdr for the writer (here and modmap.c), under the mutex fork
 * takes: a fork while the writer iterated would leave the dynamic loader's
 * lock held forever in the child, whose first stack (or the first lookup of
 * any library) would then hang.
 */
int ct_dl_iterate(int (*callback)(struct dl_phdr_info *, size_t, void *), void *arg);

#endif
