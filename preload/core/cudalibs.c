/*
 * cudalibs.c - the address ranges of the CUDA stack's libraries (cudalibs.h).
 *
 * A fixed table filled without a lock: a learner claims an entry with one
 * atomic add, writes its start, then publishes its end with a release
 * store; a reader skips entries whose end is still 0. Entries are never
 * removed (a library unloaded and another loaded at its addresses would be
 * taken for the stack: libraries of the families are not unloaded in
 * practice). A race may learn a range twice, which only costs a compare.
 */
#include "cudalibs.h"

#include <link.h>
#include <stddef.h>
#include <stdint.h>

#include "objects.h"
#include "resolve.h"

#define CT_CUDALIBS_MAX 64

static struct range {
    uint64_t start; /* written before end is published */
    uint64_t end;   /* atomic: 0 until the entry is complete */
} ranges[CT_CUDALIBS_MAX];
static uint32_t claimed; /* atomic: entries handed out, complete or not */
/* The loader's count of objects ever added when the stack was last learned:
 * unchanged, and the function already inside a known range, means nothing new. */
static unsigned long long learned_adds;
static int learned_once; /* atomic */

bool ct_cudalibs_contains(uint64_t addr)
{
    uint32_t n = __atomic_load_n(&claimed, __ATOMIC_ACQUIRE);
    if (n > CT_CUDALIBS_MAX)
        n = CT_CUDALIBS_MAX;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t end = __atomic_load_n(&ranges[i].end, __ATOMIC_ACQUIRE);
        if (end && addr >= __atomic_load_n(&ranges[i].start, __ATOMIC_RELAXED) && addr < end)
            return true;
    }
    return false;
}

static void add_range(uint64_t start, uint64_t end)
{
    if (start >= end || ct_cudalibs_contains(start))
        return;
    uint32_t i = __atomic_fetch_add(&claimed, 1, __ATOMIC_ACQ_REL);
    if (i >= CT_CUDALIBS_MAX)
        return; /* more stack libraries than anyone loads: the rest count as the program's */
    __atomic_store_n(&ranges[i].start, start, __ATOMIC_RELAXED);
    __atomic_store_n(&ranges[i].end, end, __ATOMIC_RELEASE);
}

static bool is_stack_path(const char *path)
{
    return path && *path &&
           (ct_is_family_path(CT_LIB_CUDART, path) || ct_is_family_path(CT_LIB_CUDA, path) ||
            ct_is_family_path(CT_LIB_NCCL, path));
}

struct learning {
    uint64_t fn;
    unsigned long long adds;
};

static int learn_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct learning *l = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
        l->adds = info->dlpi_adds;
    uint64_t lo, hi;
    ct_object_range(info, &lo, &hi);
    if (lo < hi && (is_stack_path(info->dlpi_name) || (l->fn >= lo && l->fn < hi)))
        add_range(lo, hi);
    return 0;
}

static int read_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
        *(unsigned long long *)arg = info->dlpi_adds;
    return 1; /* the counter is the same in every entry: one is enough */
}

void ct_cudalibs_learn(const void *real_fn)
{
    uint64_t fn = (uint64_t)(uintptr_t)real_fn;
    if (!fn)
        return;
    if (__atomic_load_n(&learned_once, __ATOMIC_ACQUIRE) && ct_cudalibs_contains(fn)) {
        unsigned long long adds = 0;
        ct_dl_iterate(read_adds, &adds);
        if (adds == __atomic_load_n(&learned_adds, __ATOMIC_RELAXED))
            return;
    }
    struct learning l = {.fn = fn};
    ct_dl_iterate(learn_object, &l);
    __atomic_store_n(&learned_adds, l.adds, __ATOMIC_RELAXED);
    __atomic_store_n(&learned_once, 1, __ATOMIC_RELEASE);
}
