/*
 * modmap.h - which loaded object each call came from, for the modules table.
 *
 * The writer thread notes the return address of every record (cheap: a
 * binary search over the objects already known), then resolves the unknown
 * ones with dl_iterate_phdr outside its lock, and stores each object once
 * (path and address range), so calls.module can name the library that
 * issued a call: "NCCL's own buffers" without any stack walking.
 */
#ifndef CUTRACE_MODMAP_H
#define CUTRACE_MODMAP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ct_module {
    char path[PATH_MAX];
    uint64_t base;
    uint64_t start; /* lowest loaded address */
    uint64_t end;   /* one past the highest */
};

enum { CT_MODMAP_MAX = 512, CT_MODMAP_PENDING = 256, CT_MODMAP_FOUND = 16 };

struct ct_modmap {
    struct ct_module_range {
        uint64_t start, end;
    } known[CT_MODMAP_MAX]; /* sorted by start */
    size_t n_known;
    uint64_t pending[CT_MODMAP_PENDING];
    size_t n_pending;
    uint64_t unknown[CT_MODMAP_PENDING]; /* addresses in no object: not retried */
    size_t n_unknown;
};

/*
 * A record's caller: remembered for resolution unless already known. False
 * when it needs remembering but the pending list is full: the writer then
 * leaves that record for its next round, after resolving what is pending.
 */
bool ct_modmap_note(struct ct_modmap *map, uint64_t addr);

/*
 * Finds the objects of the pending addresses (no lock needed): up to `cap`
 * objects; addresses whose object did not fit stay pending. Returns how many.
 */
size_t ct_modmap_resolve(struct ct_modmap *map, struct ct_module *out, size_t cap);

/* Adds a stored object to the known ranges. */
void ct_modmap_add(struct ct_modmap *map, const struct ct_module *m);

#endif
