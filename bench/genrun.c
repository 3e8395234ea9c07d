/*
 * genrun.c - a synthetic run for the analyzer benchmark: the trace directory
 * a tensor-parallel (TP) SGLang server of RANKS processes leaves, written
 * through the tracer's own store (include/cutrace/store.h) so the files are
 * real traces, record for record as the writer thread would commit them.
 *
 *   genrun [-s SEED] [-r RANKS] [-j JOBS] [-v] EVENTS DIR
 *
 * EVENTS is the number of events rows of the whole run (nested calls
 * included), split evenly over the ranks (default 8): one trace per process,
 * each on its own GPU. DIR must not exist. -v writes the variant run that
 * `cutrace diff` is timed on: custom all-reduce staging buffers of 256 MiB
 * instead of 8 MiB (the story of examples/README.md), so a smaller KV pool.
 * -j: ranks written at once (child processes, default 2). The output depends
 * only on the arguments (SEED default 1), never on time or scheduling.
 *
 * Each rank goes through a server's startup in its order: cudaSetDevice
 * (the primary context and the runtime's cuGetProcAddress_v2 lookups nested
 * in it), two 8-rank NCCL communicators with the same unique-id hash in
 * every rank (their buffers made inside the init: runtime allocations and
 * VMM chunks from libnccl), custom all-reduce buffers exported over IPC and
 * opened by every peer, cudaMemGetInfo before the weights (pre), the weight
 * burst (many allocations of varied sizes), cudaMemGetInfo after (post), a
 * KV pool of equal blocks sized by SGLang's formula (docs/budget.md), a
 * measurement after it, expandable segments (VMM), a CUDA-graph capture;
 * then decode steps until the rank's share of EVENTS is reached (activation
 * cudaMalloc/cudaFree pairs, all-reduces, all-gathers, broadcasts, a
 * send/recv group now and then, graph launches) and the teardown (every
 * buffer freed, IPC closed, communicators destroyed). Runtime memory calls
 * carry the driver call they make, nested; memory calls have call stacks
 * (native frames, one of 32 per rank), as CUTRACE_STACKS=native leaves them.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cutrace/apis.h"
#include "cutrace/format.h"
#include "cutrace/stackrec.h"
#include "cutrace/store.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define US  1000ull
#define MS  1000000ull

#define MAX_RANKS   64
#define MAX_WEIGHTS 2000
#define POOL_BLOCKS 61 /* one per layer: DeepSeek-V3's MLA cache */
#define FIFO        16 /* activations live at once */
#define AR_BUFS     2  /* custom all-reduce buffers per rank */
#define VMM_SEGS    8  /* expandable segments after the pool */
#define NCCL_ALLOCS 3  /* runtime buffers per communicator */
#define NCCL_CHUNKS 2  /* cuMem chunks per communicator */
#define COMMS       2  /* torch's world group and the pynccl communicator */
#define STACKS      32
#define STACK_DEPTH 12
#define CAPTURED    32 /* all-reduces recorded into the CUDA graph */
#define TX_RECORDS  65536
#define STEP_MAX    15 /* events one decode step writes at most */

#define TOTAL_BYTES  85520809984ull /* an H100 80GB HBM3 as cudaMemGetInfo says */
#define WEIGHT_BYTES (18 * GIB)
#define CELL_SIZE    70272 /* docs/budget.md's default */
#define MEM_FRACTION 0.85
#define HIDDEN       7168

/* Where the loaded objects lie: every process has the same layout. */
enum module { M_PYTHON, M_TORCH, M_CUDART, M_NCCL, M_COUNT };
static const struct {
    const char *path, *build_id;
    uint64_t start, len;
} modules[M_COUNT] = {
    {"/usr/bin/python3.12", "6b1c0f3a9e2d4c5b8a7f6e5d4c3b2a1908f7e6d5", 0x400000, 0x800000},
    {"/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so",
     "1f2e3d4c5b6a79880f1e2d3c4b5a69788f9e0d1c", 0x7f1000000000, 0x10000000},
    {"/opt/venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
     "a0b1c2d3e4f5061728394a5b6c7d8e9fa0b1c2d3", 0x7f2000000000, 0x1000000},
    {"/opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
     "0123456789abcdef0123456789abcdef01234567", 0x7f3000000000, 0x10000000},
};

static uint64_t pc(enum module m, uint64_t off)
{
    return modules[m].start + 0x1000 + off % (modules[m].len - 0x2000);
}

struct opts {
    uint64_t seed, events;
    int ranks, jobs;
    bool variant;
    const char *dir;
};

struct buf {
    uint64_t ptr, size;
};

/* One rank being written. Plain data, so that a copy can be run dry. */
struct gen {
    const struct opts *o;
    struct ct_store *st; /* NULL when dry: records are only counted */
    int rank;
    int64_t pid;
    uint64_t rng, seq, now, count, in_tx;
    uint64_t srng;            /* the same in every rank: shard sizes, batch sizes */
    uint64_t extra;           /* events rank 0 writes that the others do not */
    uint64_t live, ctx_bytes; /* this process's GPU bytes, for cudaMemGetInfo */
    uint64_t next_dev, next_map;
    int depth;
    struct ct_record open[4]; /* calls entered and not yet returned */
    bool stack_sent[STACKS];
    size_t nweights;
    struct buf weights[MAX_WEIGHTS], pool[POOL_BLOCKS], ar[AR_BUFS];
    uint64_t maps[MAX_RANKS * AR_BUFS];
    size_t nmaps;
    struct buf vmm[VMM_SEGS];
    uint64_t vmm_handle[VMM_SEGS];
    struct buf nccl_alloc[COMMS][NCCL_ALLOCS], nccl_chunk[COMMS][NCCL_CHUNKS];
    uint64_t nccl_handle[COMMS][NCCL_CHUNKS];
    struct buf fifo[FIFO];
    uint64_t step;
    uint64_t graph_exec, stream;
    int err;
};

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rnd(struct gen *g, uint64_t n)
{
    g->rng = mix(g->rng);
    return n ? g->rng % n : 0;
}

/* What every rank of a TP job does alike (weight shards, a step's batch),
 * so that the ranks' collectives match as NCCL requires. */
static uint64_t srnd(struct gen *g, uint64_t n)
{
    g->srng = mix(g->srng);
    return n ? g->srng % n : 0;
}

/* The same value in every rank's trace (unique ids, IPC handles): from the seed alone. */
static uint64_t shared(const struct gen *g, uint64_t what)
{
    return mix(mix(g->o->seed) ^ what);
}

/* ---- records ---- */

static void store_failed(struct gen *g)
{
    if (!g->err)
        fprintf(stderr, "genrun: rank %d: %s\n", g->rank, ct_store_error(g->st));
    g->err = 1;
}

static void put(struct gen *g, const struct ct_record *r)
{
    g->count++;
    if (!g->st || g->err)
        return;
    if (g->in_tx == 0 && ct_store_begin(g->st))
        store_failed(g);
    if (ct_store_insert(g->st, r))
        store_failed(g);
    /* One transaction per many records, as the writer commits. */
    if (++g->in_tx == TX_RECORDS) {
        if (ct_store_commit(g->st))
            store_failed(g);
        g->in_tx = 0;
    }
}

static struct ct_record rec(struct gen *g, enum ct_api api, uint64_t caller)
{
    struct ct_record r;
    memset(&r, 0, sizeof r);
    r.api = (uint16_t)api;
    r.tid = (int32_t)g->pid;
    r.device = g->rank;
    r.caller = caller;
    return r;
}

/* A call starts: its seq is taken now; it is written when it returns. */
static void enter(struct gen *g, const struct ct_record *r)
{
    assert(g->depth < 4);
    struct ct_record *c = &g->open[g->depth];
    *c = *r;
    c->seq = ++g->seq;
    c->parent_seq = g->depth ? g->open[g->depth - 1].seq : 0;
    c->depth = (uint8_t)g->depth;
    c->t_ns = g->now;
    g->depth++;
    g->now += 300;
}

static void leave(struct gen *g, uint64_t dur)
{
    assert(g->depth > 0);
    struct ct_record *c = &g->open[--g->depth];
    g->now += dur;
    c->dur_ns = g->now - c->t_ns;
    c->ret_seq = g->seq; /* calls started by the time it returned: its nested ones */
    put(g, c);
    g->now += 200 + rnd(g, 2 * US);
}

static void leaf(struct gen *g, const struct ct_record *r, uint64_t dur)
{
    enter(g, r);
    leave(g, dur);
}

/* A runtime call and the driver call the runtime makes inside it. */
static void rt_drv(struct gen *g, const struct ct_record *r, enum ct_api drv, uint64_t dur)
{
    enter(g, r);
    struct ct_record d = *r;
    d.api = (uint16_t)drv;
    d.caller = pc(M_CUDART, 0x4000 + drv * 64);
    d.stack_id = 0;
    leaf(g, &d, dur);
    leave(g, 500);
}

/* ---- stacks: 32 native stacks per rank, sent before their first use ---- */

static uint64_t stack_key(struct gen *g, int i)
{
    return (mix(g->o->seed * 1000003 + (uint64_t)g->rank * STACKS + (uint64_t)i) >> 1) | 1;
}

static uint64_t stack(struct gen *g, int i)
{
    assert(i >= 0 && i < STACKS);
    if (!g->stack_sent[i]) {
        g->stack_sent[i] = true;
        union ct_any_record u;
        ct_aux_init(&u, CT_AUX_FRAMES, stack_key(g, i));
        u.aux.first = 0;
        u.aux.count = u.aux.total = u.aux.native = STACK_DEPTH;
        /* Inner frames are the site's own; the outer ones (the interpreter's
         * loop, the server's main) are shared by every stack. */
        for (unsigned j = 0; j < STACK_DEPTH; j++) {
            uint64_t site = j < 6 ? (uint64_t)i * 977 + j * 131 : j * 4099;
            ct_aux_set_frame(&u.aux, j, pc(j < 4 ? M_TORCH : M_PYTHON, site * 64));
        }
        if (g->st && !g->err && ct_store_insert(g->st, &u.rec))
            store_failed(g);
    }
    return stack_key(g, i);
}

enum stack_site {
    S_WEIGHTS = 0,    /* 8 sites: one per kind of layer */
    S_POOL = 8,       /* the KV pool */
    S_ACTIVATION = 9, /* 16 sites */
    S_CUSTOM_AR = 25, /* custom all-reduce buffers, export, open, close */
    S_MEMINFO = 26,   /* 3: pre, post, after the pool */
    S_VMM = 29,       /* expandable segments */
    S_FREE = 30,      /* 2: the caching allocator's releases */
};

/* ---- memory ---- */

static uint64_t dev_addr(struct gen *g, uint64_t size)
{
    uint64_t p = g->next_dev;
    g->next_dev += (size + 2 * MIB - 1) & ~(2 * MIB - 1);
    return p;
}

static uint64_t dev_malloc_at(struct gen *g, uint64_t p, uint64_t size, uint64_t caller,
                              uint64_t stk)
{
    struct ct_record r = rec(g, CT_API_cudaMalloc, caller);
    r.ptr = p;
    r.size = size;
    r.stack_id = stk;
    rt_drv(g, &r, CT_API_cuMemAlloc_v2, 8 * US + size / (256 * MIB) * US);
    g->live += size;
    return p;
}

static struct buf dev_malloc(struct gen *g, uint64_t size, uint64_t caller, uint64_t stk)
{
    return (struct buf){dev_malloc_at(g, dev_addr(g, size), size, caller, stk), size};
}

static void dev_free(struct gen *g, struct buf b, uint64_t caller, uint64_t stk)
{
    struct ct_record r = rec(g, CT_API_cudaFree, caller);
    r.ptr = b.ptr;
    r.stack_id = stk;
    rt_drv(g, &r, CT_API_cuMemFree_v2, 5 * US);
    assert(g->live >= b.size);
    g->live -= b.size;
}

static uint64_t free_bytes(const struct gen *g)
{
    return TOTAL_BYTES - g->ctx_bytes - g->live;
}

static uint64_t meminfo(struct gen *g, int which)
{
    struct ct_record r = rec(g, CT_API_cudaMemGetInfo, pc(M_TORCH, 0x9000));
    r.arg[0] = free_bytes(g);
    r.arg[1] = TOTAL_BYTES;
    r.stack_id = stack(g, S_MEMINFO + which);
    rt_drv(g, &r, CT_API_cuMemGetInfo_v2, 3 * US);
    return r.arg[0];
}

/* cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess: what both
 * NCCL (nested in its init) and expandable segments (top level) do. */
static void vmm_map(struct gen *g, struct buf *b, uint64_t *handle, uint64_t size, uint64_t caller,
                    uint64_t stk)
{
    b->size = size;
    b->ptr = dev_addr(g, size);
    *handle = 0x600000000000ull + g->seq * 16;
    struct ct_record r = rec(g, CT_API_cuMemAddressReserve, caller);
    r.ptr = b->ptr;
    r.size = size;
    r.arg[0] = 2 * MIB;
    r.stack_id = stk;
    leaf(g, &r, 4 * US);
    r = rec(g, CT_API_cuMemCreate, caller);
    r.ptr = *handle;
    r.size = size;
    r.arg[0] = (uint64_t)g->rank;
    r.arg[1] = 1; /* CU_MEM_LOCATION_TYPE_DEVICE */
    r.arg[2] = 1; /* CU_MEM_ALLOCATION_TYPE_PINNED */
    r.stack_id = stk;
    leaf(g, &r, 30 * US);
    g->live += size;
    r = rec(g, CT_API_cuMemMap, caller);
    r.ptr = b->ptr;
    r.size = size;
    r.arg[0] = *handle;
    leaf(g, &r, 10 * US);
    r = rec(g, CT_API_cuMemSetAccess, caller);
    r.ptr = b->ptr;
    r.size = size;
    r.arg[0] = 1;
    r.arg[1] = (uint64_t)g->rank;
    r.arg[2] = 3; /* read-write */
    leaf(g, &r, 20 * US);
}

static void vmm_unmap(struct gen *g, struct buf b, uint64_t handle, uint64_t caller)
{
    struct ct_record r = rec(g, CT_API_cuMemUnmap, caller);
    r.ptr = b.ptr;
    r.size = b.size;
    leaf(g, &r, 15 * US);
    r = rec(g, CT_API_cuMemRelease, caller);
    r.ptr = handle;
    leaf(g, &r, 20 * US);
    g->live -= b.size;
    r = rec(g, CT_API_cuMemAddressFree, caller);
    r.ptr = b.ptr;
    r.size = b.size;
    leaf(g, &r, 3 * US);
}

/* ---- NCCL ---- */

static uint64_t comm_handle(const struct gen *g, int k)
{
    return 0x55aa00000000ull + ((uint64_t)g->rank << 20) + ((uint64_t)k << 12);
}

static void comm_init(struct gen *g, int k)
{
    struct ct_record r = rec(g, CT_API_ncclCommInitRank, pc(M_TORCH, 0x20000 + (uint64_t)k));
    r.ptr = r.arg[0] = comm_handle(g, k);
    r.arg[1] = (uint64_t)g->o->ranks;
    r.arg[2] = (uint64_t)g->rank;
    r.arg[3] = shared(g, 0x1000 + (uint64_t)k); /* the unique id's hash: every rank's */
    enter(g, &r);
    /* NCCL's own buffers, made inside the init: runtime ones (with their
     * nested driver call) and cuMem chunks. */
    for (int i = 0; i < NCCL_ALLOCS; i++)
        g->nccl_alloc[k][i] = dev_malloc(g, (4 << i) * MIB, pc(M_NCCL, 0x1000 + (uint64_t)i), 0);
    for (int i = 0; i < NCCL_CHUNKS; i++)
        vmm_map(g, &g->nccl_chunk[k][i], &g->nccl_handle[k][i], 32 * MIB,
                pc(M_NCCL, 0x2000 + (uint64_t)i), 0);
    leave(g, 250 * MS + rnd(g, 50 * MS));
}

static void comm_destroy(struct gen *g, int k)
{
    struct ct_record r = rec(g, CT_API_ncclCommDestroy, pc(M_TORCH, 0x21000));
    r.arg[0] = comm_handle(g, k);
    enter(g, &r);
    for (int i = 0; i < NCCL_ALLOCS; i++)
        dev_free(g, g->nccl_alloc[k][i], pc(M_NCCL, 0x3000), 0);
    for (int i = 0; i < NCCL_CHUNKS; i++)
        vmm_unmap(g, g->nccl_chunk[k][i], g->nccl_handle[k][i], pc(M_NCCL, 0x4000));
    leave(g, 2 * MS);
}

enum { BF16 = 9, SUM = 0, NONE = -1 };

static void nccl_op(struct gen *g, enum ct_api api, int k, uint64_t count, int64_t redop,
                    int64_t peer, int group, int captured)
{
    struct ct_record r = rec(g, api, pc(M_TORCH, 0x30000 + api));
    r.arg[0] = comm_handle(g, k);
    r.ptr = 0x7e8000000000ull + (uint64_t)g->rank * GIB;
    r.size = count * 2;
    r.arg[1] = count;
    r.arg[2] = BF16;
    r.arg[3] = (uint64_t)redop;
    r.arg[4] = (uint64_t)peer;
    r.arg[5] = r.ptr + 512 * MIB;
    r.arg[6] = (uint64_t)group;
    r.arg[7] = (uint64_t)captured;
    r.stream = g->stream;
    leaf(g, &r, 6 * US + rnd(g, 10 * US));
}

static void group(struct gen *g, enum ct_api api, int depth_before)
{
    struct ct_record r = rec(g, api, pc(M_TORCH, 0x31000 + api));
    r.arg[6] = (uint64_t)depth_before;
    leaf(g, &r, 1 * US);
}

/* ---- the server's phases ---- */

static void startup(struct gen *g)
{
    static const char *const lookups[] = {
        "cuInit",          "cuDriverGetVersion", "cuDeviceGet",          "cuDeviceGetCount",
        "cuDeviceGetName", "cuDeviceTotalMem",   "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain",
        "cuCtxGetCurrent", "cuCtxSetCurrent",    "cuMemAlloc",           "cuMemFree",
        "cuMemGetInfo",    "cuMemcpyAsync",      "cuStreamCreate",       "cuEventCreate",
        "cuLaunchKernel",  "cuModuleLoadData",   "cuIpcGetMemHandle",    "cuIpcOpenMemHandle"};
    struct ct_record r = rec(g, CT_API_cudaSetDevice, pc(M_TORCH, 0x100));
    r.arg[0] = (uint64_t)g->rank;
    enter(g, &r);
    for (size_t i = 0; i < sizeof lookups / sizeof lookups[0]; i++) {
        struct ct_record l = rec(g, CT_API_cuGetProcAddress_v2, pc(M_CUDART, 0x800));
        size_t n = strlen(lookups[i]);
        memcpy(l.handle, lookups[i], n);
        l.has_handle = 1;
        l.arg[0] = 12080;
        l.arg[2] = n;
        l.ptr = pc(M_CUDART, 0x100000 + i * 64);
        leaf(g, &l, 2 * US);
    }
    struct ct_record c = rec(g, CT_API_cuDevicePrimaryCtxRetain, pc(M_CUDART, 0x900));
    c.ptr = 0x5a0000000000ull + (uint64_t)g->rank * 0x1000;
    c.arg[0] = (uint64_t)g->rank;
    leaf(g, &c, 180 * MS);
    leave(g, 1 * MS);

    r = rec(g, CT_API_ncclGetVersion, pc(M_TORCH, 0x200));
    r.arg[0] = 22105;
    leaf(g, &r, 1 * US);
    if (g->rank == 0) {
        for (int k = 0; k < COMMS; k++) {
            r = rec(g, CT_API_ncclGetUniqueId, pc(M_TORCH, 0x300));
            r.arg[3] = shared(g, 0x1000 + (uint64_t)k);
            leaf(g, &r, 2 * MS);
            g->extra++;
        }
    }
    for (int k = 0; k < COMMS; k++)
        comm_init(g, k);

    /* Custom all-reduce: buffers exported, then every peer's opened. */
    uint64_t ar_size = g->o->variant ? 256 * MIB : 8 * MIB;
    for (int i = 0; i < AR_BUFS; i++) {
        g->ar[i] = dev_malloc(g, ar_size, pc(M_TORCH, 0x400), stack(g, S_CUSTOM_AR));
        r = rec(g, CT_API_cudaIpcGetMemHandle, pc(M_TORCH, 0x500));
        r.ptr = g->ar[i].ptr;
        r.has_handle = 1;
        for (int b = 0; b < CT_IPC_HANDLE_BYTES; b += 8) {
            uint64_t v = shared(g, ((uint64_t)g->rank << 16) + (uint64_t)i * 64 + (uint64_t)b);
            memcpy(r.handle + b, &v, 8);
        }
        r.stack_id = stack(g, S_CUSTOM_AR);
        rt_drv(g, &r, CT_API_cuIpcGetMemHandle, 5 * US);
    }
    for (int p = 0; p < g->o->ranks; p++) {
        for (int i = 0; i < AR_BUFS && p != g->rank; i++) {
            r = rec(g, CT_API_cudaIpcOpenMemHandle, pc(M_TORCH, 0x600));
            r.ptr = g->maps[g->nmaps++] = g->next_map;
            g->next_map += ar_size;
            r.flags = 1; /* cudaIpcMemLazyEnablePeerAccess */
            r.has_handle = 1;
            for (int b = 0; b < CT_IPC_HANDLE_BYTES; b += 8) {
                uint64_t v = shared(g, ((uint64_t)p << 16) + (uint64_t)i * 64 + (uint64_t)b);
                memcpy(r.handle + b, &v, 8);
            }
            r.stack_id = stack(g, S_CUSTOM_AR);
            rt_drv(g, &r, CT_API_cuIpcOpenMemHandle_v2, 200 * US);
        }
    }
    nccl_op(g, CT_API_ncclAllReduce, 0, 1, SUM, NONE, 0, 0); /* the warm-up barrier */

    uint64_t pre = meminfo(g, 0);
    /* The weight burst: big matrices and small norms and biases. */
    uint64_t avg = WEIGHT_BYTES / (g->nweights - g->nweights / 4);
    for (size_t i = 0; i < g->nweights; i++) {
        uint64_t size =
            i % 4 == 3 ? 4 * KIB + srnd(g, 24) * KIB : (avg / 2 + srnd(g, avg)) & ~511ull;
        g->weights[i] = dev_malloc(g, size, pc(M_TORCH, 0x700), stack(g, S_WEIGHTS + (int)(i % 8)));
        g->now += 20 * US;
    }
    uint64_t post = meminfo(g, 1);
    /* SGLang's pool, one rank's view (docs/budget.md). */
    double pre_gib = (double)(float)pre / (double)GIB, post_gib = (double)(float)post / (double)GIB;
    double rest = post_gib - pre_gib * (1.0 - MEM_FRACTION);
    uint64_t tokens = rest > 0 ? (uint64_t)(rest * (double)GIB / CELL_SIZE) : 0;
    uint64_t block = (tokens * CELL_SIZE / POOL_BLOCKS) & ~4095ull;
    for (int i = 0; i < POOL_BLOCKS; i++)
        g->pool[i] = dev_malloc(g, block, pc(M_TORCH, 0x800), stack(g, S_POOL));
    meminfo(g, 2);

    for (int i = 0; i < VMM_SEGS; i++)
        vmm_map(g, &g->vmm[i], &g->vmm_handle[i], 20 * MIB, pc(M_TORCH, 0x900), stack(g, S_VMM));

    /* CUDA-graph capture of the decode step: its all-reduces are recorded. */
    r = rec(g, CT_API_cudaStreamBeginCapture, pc(M_TORCH, 0xa00));
    r.stream = g->stream;
    r.flags = 1; /* cudaStreamCaptureModeThreadLocal */
    leaf(g, &r, 5 * US);
    for (int i = 0; i < CAPTURED; i++)
        nccl_op(g, CT_API_ncclAllReduce, 1, HIDDEN * (uint64_t)(1 + i), SUM, NONE, 0, 1);
    uint64_t graph = 0x5b0000000000ull + (uint64_t)g->rank * 0x1000;
    r = rec(g, CT_API_cudaStreamEndCapture, pc(M_TORCH, 0xa10));
    r.stream = g->stream;
    r.ptr = graph;
    leaf(g, &r, 40 * US);
    r = rec(g, CT_API_cudaGraphInstantiate, pc(M_TORCH, 0xa20));
    r.ptr = g->graph_exec = graph + 0x100;
    r.arg[0] = graph;
    leaf(g, &r, 3 * MS);
}

/* Activations: the oldest freed, a new one made in its slot. */
static void activation(struct gen *g)
{
    struct buf *slot = &g->fifo[g->step % FIFO];
    if (slot->ptr)
        dev_free(g, *slot, pc(M_TORCH, 0xb00), stack(g, S_FREE + (int)(g->step % 2)));
    uint64_t size = (64 * KIB + srnd(g, 96 * MIB)) & ~511ull;
    uint64_t at = 0x7d0000000000ull + (g->step % FIFO) * 128 * MIB;
    dev_malloc_at(g, at, size, pc(M_TORCH, 0xb10), stack(g, S_ACTIVATION + (int)rnd(g, 16)));
    *slot = (struct buf){at, size};
}

/* One decode step: at most STEP_MAX events. */
static void decode_step(struct gen *g)
{
    uint64_t tokens = 1 + srnd(g, 256);
    activation(g);
    struct ct_record r = rec(g, CT_API_cudaGraphLaunch, pc(M_TORCH, 0xc00));
    r.ptr = g->graph_exec;
    r.stream = g->stream;
    leaf(g, &r, 4 * US);
    for (int i = 0; i < 3; i++)
        nccl_op(g, CT_API_ncclAllReduce, 1, HIDDEN * tokens, SUM, NONE, 0, 0);
    if (g->step % 2 == 0)
        nccl_op(g, CT_API_ncclAllGather, 0, 129280 / 8 * tokens, NONE, NONE, 0, 0);
    if (g->step % 16 == 5)
        nccl_op(g, CT_API_ncclBroadcast, 0, 4096, NONE, 0, 0, 0);
    if (g->step % 8 == 3) { /* pipeline-style exchange with the neighbours */
        group(g, CT_API_ncclGroupStart, 0);
        nccl_op(g, CT_API_ncclSend, 0, HIDDEN * tokens, NONE, (g->rank + 1) % g->o->ranks, 1, 0);
        nccl_op(g, CT_API_ncclRecv, 0, HIDDEN * tokens, NONE,
                (g->rank + g->o->ranks - 1) % g->o->ranks, 1, 0);
        group(g, CT_API_ncclGroupEnd, 1);
    }
    g->step++;
    g->now += 15 * MS + rnd(g, 10 * MS);
}

static void drain_activations(struct gen *g)
{
    for (int i = 0; i < FIFO; i++) {
        struct buf *slot = &g->fifo[(g->step + (uint64_t)i) % FIFO];
        if (slot->ptr)
            dev_free(g, *slot, pc(M_TORCH, 0xb00), stack(g, S_FREE));
        slot->ptr = 0;
    }
}

static void teardown(struct gen *g)
{
    drain_activations(g);
    for (size_t i = 0; i < g->nmaps; i++) {
        struct ct_record r = rec(g, CT_API_cudaIpcCloseMemHandle, pc(M_TORCH, 0xd00));
        r.ptr = g->maps[i];
        r.stack_id = stack(g, S_CUSTOM_AR);
        rt_drv(g, &r, CT_API_cuIpcCloseMemHandle, 50 * US);
    }
    for (int i = 0; i < AR_BUFS; i++)
        dev_free(g, g->ar[i], pc(M_TORCH, 0xd10), stack(g, S_CUSTOM_AR));
    for (int i = 0; i < VMM_SEGS; i++)
        vmm_unmap(g, g->vmm[i], g->vmm_handle[i], pc(M_TORCH, 0xd20));
    for (int i = 0; i < POOL_BLOCKS; i++)
        dev_free(g, g->pool[i], pc(M_TORCH, 0xd30), stack(g, S_FREE + 1));
    for (size_t i = 0; i < g->nweights; i++)
        dev_free(g, g->weights[i], pc(M_TORCH, 0xd40), stack(g, S_FREE + 1));
    for (int k = COMMS - 1; k >= 0; k--)
        comm_destroy(g, k);
}

/* Events teardown will write, activations aside: a dry copy counts them. */
static uint64_t teardown_events(const struct gen *g)
{
    struct gen *dry = malloc(sizeof *dry);
    if (!dry)
        return UINT64_MAX;
    *dry = *g;
    dry->st = NULL;
    memset(dry->fifo, 0, sizeof dry->fifo);
    teardown(dry);
    uint64_t n = dry->count - g->count;
    free(dry);
    return n;
}

static int live_activations(const struct gen *g)
{
    int n = 0;
    for (int i = 0; i < FIFO; i++)
        n += g->fifo[i].ptr != 0;
    return n;
}

/* ---- one rank's trace ---- */

static int write_header(struct gen *g, const char *path)
{
    char err[512];
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0) {
        fprintf(stderr, "genrun: %s: %s\n", path, strerror(errno));
        return 1;
    }
    close(fd);
    g->st = ct_store_create(path, err, sizeof err);
    if (!g->st) {
        fprintf(stderr, "genrun: %s\n", err);
        return 1;
    }
    /* Written once and never read while being written: no journal, no sync
     * (the writer's WAL would write every page twice). The seal at the end
     * leaves the file as a finished process's: rollback journal, one file. */
    if (sqlite3_exec(ct_store_sqlite(g->st),
                     "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-32768",
                     NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "genrun: %s: %s\n", path, sqlite3_errmsg(ct_store_sqlite(g->st)));
        return 1;
    }
    struct ct_process_info p;
    memset(&p, 0, sizeof p);
    p.pid = g->pid;
    p.ppid = g->pid - 1 - g->rank;
    p.uid = 1000;
    p.start_wall_ns = 1760000000000000000ull + (uint64_t)g->rank * 1000;
    p.start_mono_ns = 1000 * 1000 * MS;
    snprintf(p.host, sizeof p.host, "bench-node");
    snprintf(p.boot_id, sizeof p.boot_id, "0d6c1a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b");
    snprintf(p.exe, sizeof p.exe, "%s", modules[M_PYTHON].path);
    char cmd[] = "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8"
                 " --mem-fraction-static 0.85";
    p.cmdline = cmd;
    struct ct_env_var env[] = {
        {"CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"},
        {"NCCL_CUMEM_ENABLE", "1"},
        {"LD_PRELOAD", "/usr/local/lib/libcutrace.so"},
        {"CUTRACE_STACKS", "native"},
    };
    struct ct_device_info d;
    memset(&d, 0, sizeof d);
    d.device = g->rank;
    snprintf(d.uuid, sizeof d.uuid, "GPU-%08x-4b1e-9c2d-8f3a-%012llx", 0x5eed0000u + g->rank,
             (unsigned long long)(shared(g, 7) >> 16) + (unsigned long long)g->rank);
    snprintf(d.pci_bus_id, sizeof d.pci_bus_id, "00000000:%02X:00.0", 0x18 + 0x10 * g->rank);
    snprintf(d.name, sizeof d.name, "NVIDIA H100 80GB HBM3");
    d.total_bytes = TOTAL_BYTES;
    struct ct_versions v = {12080, 12080, 22105};
    int rc = ct_store_begin(g->st);
    if (!rc)
        rc = ct_store_write_process(g->st, &p);
    if (!rc)
        rc = ct_store_write_env(g->st, env, sizeof env / sizeof env[0]);
    if (!rc)
        rc = ct_store_set_meta_text(g->st, "stacks",
                                    "native=libunwind python=off depth=12 on=memory");
    for (int m = 0; m < M_COUNT && !rc; m++) {
        uint64_t start = modules[m].start, end = start + modules[m].len;
        rc = ct_store_write_module(g->st, modules[m].path, start, start, end);
        if (!rc)
            rc = ct_store_write_object(g->st, modules[m].path, modules[m].build_id, start, start,
                                       end, 0);
    }
    if (!rc)
        rc = ct_store_write_device(g->st, &d, 1);
    if (!rc)
        rc = ct_store_set_versions(g->st, &v);
    if (!rc)
        rc = ct_store_commit(g->st);
    if (rc)
        store_failed(g);
    return rc ? 1 : 0;
}

static int gen_rank(const struct opts *o, int rank, uint64_t target)
{
    struct gen *g = calloc(1, sizeof *g);
    if (!g)
        return 1;
    g->o = o;
    g->rank = rank;
    g->pid = (o->variant ? 50000 : 40000) + rank * 7;
    g->rng = mix(o->seed * 7919 + (uint64_t)rank + (o->variant ? 1u << 20 : 0));
    g->srng = mix(o->seed * 104729);
    g->now = 1000 * 1000 * MS + 2000 * MS + (uint64_t)rank * 37 * US;
    g->ctx_bytes = 520 * MIB + (uint64_t)rank * 2 * MIB;
    g->next_dev = 0x7f5000000000ull;
    g->next_map = 0x7e0000000000ull;
    g->stream = 0x5c0000000000ull + (uint64_t)rank * 0x100;
    uint64_t w = target / 20;
    g->nweights = w < 16 ? 16 : w > MAX_WEIGHTS ? MAX_WEIGHTS : (size_t)w;

    char path[4096];
    snprintf(path, sizeof path, "%s/bench-node-%lld-%llu.db", o->dir, (long long)g->pid,
             1760000000000000000ull + (unsigned long long)rank * 1000);
    int rc = write_header(g, path);
    if (!rc) {
        startup(g);
        uint64_t fixed = teardown_events(g);
        if (g->count + fixed + 2 * FIFO > target) {
            fprintf(stderr,
                    "genrun: %llu events per rank are too few: a rank's startup and"
                    " teardown alone write %llu\n",
                    (unsigned long long)target, (unsigned long long)(g->count + fixed + 2 * FIFO));
            rc = 1;
        }
        /* Every rank makes the same steps (its collectives match the others'). */
        while (!rc &&
               g->count - g->extra + fixed + 2 * (uint64_t)live_activations(g) + STEP_MAX <= target)
            decode_step(g);
        /* The rest to the exact count: graph launches (no collective of their own). */
        while (!rc && g->count + fixed + 2 * (uint64_t)live_activations(g) < target) {
            struct ct_record r = rec(g, CT_API_cudaGraphLaunch, pc(M_TORCH, 0xc00));
            r.ptr = g->graph_exec;
            r.stream = g->stream;
            leaf(g, &r, 4 * US);
        }
        if (!rc)
            teardown(g);
        if (!rc && g->count != target) {
            fprintf(stderr, "genrun: rank %d wrote %llu events, not %llu\n", rank,
                    (unsigned long long)g->count, (unsigned long long)target);
            rc = 1;
        }
        if (g->in_tx && !g->err && ct_store_commit(g->st))
            store_failed(g);
        if (!g->err && ct_store_set_meta_text(g->st, "end_state", "exit"))
            store_failed(g);
        if (!g->err && ct_store_seal(g->st))
            store_failed(g);
        rc = rc || g->err;
    }
    ct_store_close(g->st);
    free(g);
    return rc;
}

static int usage(void)
{
    fputs("usage: genrun [-s SEED] [-r RANKS] [-j JOBS] [-v] EVENTS DIR\n", stderr);
    return 2;
}

int main(int argc, char **argv)
{
    struct opts o = {.seed = 1, .ranks = 8, .jobs = 2};
    int c;
    while ((c = getopt(argc, argv, "s:r:j:v")) != -1) {
        switch (c) {
        case 's':
            o.seed = strtoull(optarg, NULL, 0);
            break;
        case 'r':
            o.ranks = atoi(optarg);
            break;
        case 'j':
            o.jobs = atoi(optarg);
            break;
        case 'v':
            o.variant = true;
            break;
        default:
            return usage();
        }
    }
    if (argc - optind != 2 || o.ranks < 1 || o.ranks > MAX_RANKS || o.jobs < 1)
        return usage();
    o.events = strtoull(argv[optind], NULL, 0);
    o.dir = argv[optind + 1];
    if (mkdir(o.dir, 0755) != 0) {
        fprintf(stderr, "genrun: %s: %s\n", o.dir, strerror(errno));
        return 1;
    }
    int failed = 0, running = 0;
    for (int rank = 0; rank < o.ranks; rank++) {
        uint64_t target =
            o.events / (uint64_t)o.ranks + ((uint64_t)rank < o.events % (uint64_t)o.ranks);
        if (running == o.jobs) {
            int st;
            wait(&st);
            failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
            running--;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("genrun: fork");
            return 1;
        }
        if (pid == 0)
            _exit(gen_rank(&o, rank, target));
        running++;
    }
    for (; running > 0; running--) {
        int st;
        wait(&st);
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return failed ? 1 : 0;
}
