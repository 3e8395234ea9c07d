/*
 * roads_static.c - memory made by libraries that reach the driver without
 * the dynamic runtime's exports: a "static runtime" user (as NCCL, cuBLAS)
 * and PyTorch-style expandable segments (cuMem* from
 * cudaGetDriverEntryPointByVersion).
 */
#include <stdio.h>

#include "../fake/fake_expandable.h"
#include "../fake/fake_static_user.h"

#define MIB ((size_t)1 << 20)
#define CHECK(call)                                                                                \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != 0) {                                                                            \
            fprintf(stderr, "%s failed: %d\n", #call, rc_);                                        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    void *plain, *vmm;
    size_t free_bytes, total;
    CHECK(fsu_alloc(3 * MIB, &plain));
    CHECK(fsu_vmm_alloc(4 * MIB, 0, &vmm));
    CHECK(fsu_host_numa_probe());
    CHECK(fsu_free_memory(&free_bytes, &total));
    CHECK(fsu_vmm_free(vmm));
    CHECK(fsu_free(plain));

    CHECK(fex_reserve(256 * MIB, 0));
    CHECK(fex_grow(40 * MIB));
    CHECK(fex_shrink(20 * MIB));
    printf("expandable segment holds %zu MiB\n", fex_mapped_bytes() / MIB);
    CHECK(fex_release());
    return 0;
}
