/*
 * nvtx_lib.c - a shared object with NVTX ranges of its own, built twice
 * (libnvtx_a.so, libnvtx_b.so with NVTX_LIB_NAME): each copy of the nvtx3
 * headers keeps its own function table and initialises NVTX on its own
 * first call, as NCCL and libtorch do (test_nvtx.c).
 */
#include <nvtx3/nvToolsExt.h>

#ifndef NVTX_LIB_NAME
#error "build with -DNVTX_LIB_NAME=name"
#endif
#define STR2(x) #x
#define STR(x)  STR2(x)

int NVTX_LIB_ENTRY(void);

/* A range around a mark; returns the level the push got. */
int NVTX_LIB_ENTRY(void)
{
    int level = nvtxRangePushA(STR(NVTX_LIB_NAME) "_work");
    nvtxMarkA(STR(NVTX_LIB_NAME) "_mark");
    nvtxRangePop();
    return level;
}
