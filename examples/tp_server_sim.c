/*
 * tp_server_sim.c - a simulated tensor-parallel LLM server startup (SGLang or
 * vLLM) on the fake GPU stack, doing the KV-cache budget arithmetic of
 * docs/budget.md byte for byte.
 *
 *   tp_server_sim [--framework sglang|vllm] [--tp N] [flags]   (--help lists them)
 *
 * The launcher forks one process per rank (rank r on device r) and waits for
 * them; it makes no CUDA or NCCL call itself, as a server's launcher does not.
 * Each rank goes through the startup of the real server in its order: device
 * and context, NCCL twice (torch's linked ProcessGroupNCCL and a pynccl
 * communicator reached through dlopen), SGLang's optional custom all-reduce
 * (IPC buffers made through a dlopen'd libcudart), the pre-load measurement,
 * the weights through a small emulation of PyTorch's caching allocator, the
 * post-load measurement, the budget, the KV cache, CUDA-graph capture, a few
 * decode steps and the teardown. Ranks meet through files in a private
 * temporary directory that the launcher removes at the end.
 *
 * Every rank prints one machine-readable line with every number its formula
 * used, so that tests can hold them against what `cutrace budget` replays
 * from a trace of the same run (examples/README.md describes the lines and the
 * default story: the baseline fits, `--custom-ar` does not: its default
 * staging buffers are 256 MiB, as the PCIe-tuned fork of the story had them;
 * SGLang's own default, `--custom-ar-max-size 8M`, fits).
 *
 * Exit status: 0 when every rank started, 1 when any failed (the server's own
 * "not enough memory" error included), 2 for a usage error.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)

#define MAX_TP 64

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */
/* ------------------------------------------------------------------------ */

enum framework { FW_SGLANG, FW_VLLM };

struct config {
    enum framework fw;
    int tp;
    uint64_t weights; /* bytes of weight tensors per rank */
    int layers;       /* KV pool: L (SGLang MLA) or 2L (vLLM) tensors */
    /* SGLang */
    double mem_fraction; /* --mem-fraction-static */
    uint64_t cell_size;  /* KV bytes per token, all layers */
    uint64_t page_size;  /* tokens per page */
    bool custom_ar;
    uint64_t custom_ar_max; /* custom all-reduce max_size (staging buffer) */
    /* vLLM */
    double gpu_util;     /* --gpu-memory-utilization */
    uint64_t activation; /* profile run's activations */
    uint64_t non_torch;  /* ncclMemAlloc made during the profile run */
};

/*
 * The defaults tell the story of examples/README.md: on 96 GiB GPUs at TP 8
 * with --mem-fraction-static 0.55, these weights leave SGLang about 160 MiB of
 * `rest` (a small KV pool), and the 532 MiB a PCIe-tuned custom all-reduce
 * makes before the pre-load measurement costs 0.55 of itself, enough to flip
 * the verdict (the default 8 MiB one costs about 20 MiB and still fits).
 */
static struct config cfg = {
    .fw = FW_SGLANG,
    .tp = 8,
    .weights = 52 * GIB,
    .layers = 61,
    .mem_fraction = 0.55,
    .cell_size = 70272, /* DeepSeek-V3 / Kimi-K2 MLA in bf16: 576 * 61 * 2 */
    .page_size = 1,
    .custom_ar = false,
    .custom_ar_max = 256 * MIB, /* a PCIe-tuned fork's; SGLang's own is 8 MiB */
    .gpu_util = 0.9,
    .activation = 4 * GIB,
    .non_torch = 0,
};

/* Custom all-reduce's Signal block in front of the staging buffer: a few KiB. */
#define CAR_META_SIZE (5 * KIB)
/* SGLang's custom all-reduce keeps this rank_data tensor for graph buffers. */
#define CAR_RANK_DATA (8 * MIB)
/* CUDA-graph capture: batch sizes captured (largest first, as SGLang does), the
 * graph private pool allocated per captured batch, and the decode steps. */
static const int graph_bs[] = {8, 4, 2, 1};
#define NGRAPHS       ((int)(sizeof graph_bs / sizeof graph_bs[0]))
#define GRAPH_POOL_BS (2 * MIB)
#define DECODE_STEPS  4
#define HIDDEN        7168 /* elements of one token's hidden state (bf16) */

/* ------------------------------------------------------------------------ */
/* Output: one write(2) per line, so lines of different ranks never mix.    */
/* ------------------------------------------------------------------------ */

static int g_rank = -1;

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(fd, line, (size_t)n);
    (void)w; /* nothing sensible to do about a closed stdout */
}

#define fail(...) say(2, "tp_server_sim: rank " __VA_ARGS__)

#define CK_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t rc_ = (call);                                                                  \
        if (rc_ != cudaSuccess) {                                                                  \
            fail("%d: %s: %s (line %d)", g_rank, #call, cudaGetErrorName(rc_), __LINE__);          \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define CK_NCCL(call)                                                                              \
    do {                                                                                           \
        ncclResult_t rc_ = (call);                                                                 \
        if (rc_ != ncclSuccess) {                                                                  \
            fail("%d: %s: %s (line %d)", g_rank, #call, ncclGetErrorString(rc_), __LINE__);        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define CK(cond, what)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fail("%d: %s (line %d)", g_rank, what, __LINE__);                                      \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* Python's repr of a float (shortest text that reads back the same), so the
 * error lines quote values the way the servers print them. */
static void py_float(double v, char *out, size_t cap)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
    if (!strpbrk(out, ".eni"))
        strncat(out, ".0", cap - strlen(out) - 1);
}

/* ------------------------------------------------------------------------ */
/* File exchange between ranks (SGLang/vLLM use a gloo CPU group for this).  */
/* ------------------------------------------------------------------------ */

static char g_dir[4096];       /* the launcher's private temporary directory */
#define EXCHANGE_TIMEOUT_S 120 /* longer than the fake NCCL's 60 s rendezvous */
/* How long the launcher lets the other ranks run on after one failed: long
 * enough for eight ranks on two loaded cores to reach the same failure and
 * say so (3 s once cut a slow rank short in a full test run). */
#define GRACE_S 10.0

static bool aborted(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/abort", g_dir);
    return access(path, F_OK) == 0;
}

/* Marks the run as failed, so that ranks waiting for this one give up at once. */
static void mark_abort(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/abort", g_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
}

static int publish(const char *tag, int rank, const void *data, size_t len)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s.%d", g_dir, tag, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, data, len);
    if (close(fd) != 0 || n != (ssize_t)len)
        return -1;
    /* The rename makes the file appear complete or not at all. */
    return rename(tmp, path);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fetch(const char *tag, int rank, void *data, size_t len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.%d", g_dir, tag, rank);
    double deadline = now_s() + EXCHANGE_TIMEOUT_S;
    long sleep_ns = 100 * 1000;
    for (;;) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t n = read(fd, data, len);
            close(fd);
            if (n == (ssize_t)len)
                return 0;
            return -1;
        }
        if (aborted() || now_s() > deadline)
            return -1;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 5 * 1000 * 1000)
            sleep_ns *= 2;
    }
}

/* Every rank's `len` bytes, in rank order, into `all`. */
static int allgather(const char *tag, int rank, const void *mine, size_t len, void *all)
{
    if (publish(tag, rank, mine, len) != 0)
        return -1;
    for (int r = 0; r < cfg.tp; r++) {
        char *dst = (char *)all + (size_t)r * len;
        if (r == rank)
            memcpy(dst, mine, len);
        else if (fetch(tag, r, dst, len) != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* PyTorch's caching allocator, reduced to what decides its cudaMalloc calls */
/* ------------------------------------------------------------------------ */

/*
 * Sizes as in c10/cuda/CUDACachingAllocator.cpp: requests round up to 512 B;
 * those of at most 1 MiB come from 2 MiB segments of the small pool; larger
 * ones from the large pool, whose new segments are 20 MiB for requests under
 * 10 MiB and the request rounded up to 2 MiB otherwise. A request takes the
 * best-fitting free space of its pool before a new segment is made, and a
 * large-pool block is split only when more than 1 MiB would remain.
 *
 * Simplification: free space inside a segment is its tail; a block freed
 * while others of its segment live is not reused until the whole segment is
 * free (then the segment is one free block again, as PyTorch merges it).
 * The simulator never frees that way before the measurements that matter.
 *
 * What this buys: reserved() is exactly the live `runtime` bytes the analyzer
 * derives from the trace (every segment is one cudaMalloc), which is vLLM's
 * torch-reserved memory.
 */
#define CA_MIN_BLOCK       512ull
#define CA_SMALL_SIZE      (1 * MIB)
#define CA_SMALL_BUFFER    (2 * MIB)
#define CA_LARGE_BUFFER    (20 * MIB)
#define CA_MIN_LARGE_ALLOC (10 * MIB)
#define CA_ROUND_LARGE     (2 * MIB)

struct segment {
    char *ptr;
    uint64_t size;
    uint64_t top; /* first free byte: the tail [top, size) is free */
    int live;     /* blocks handed out and not freed */
    bool small;
};

static struct segment *segs;
static int nsegs, capsegs;
static uint64_t ca_reserved_bytes;

static uint64_t round_up(uint64_t n, uint64_t to)
{
    return (n + to - 1) / to * to;
}

static uint64_t ca_reserved(void)
{
    return ca_reserved_bytes;
}

/* A tensor of `bytes`; its device address into *out. */
static int ca_alloc(uint64_t bytes, void **out)
{
    uint64_t size = bytes < CA_MIN_BLOCK ? CA_MIN_BLOCK : round_up(bytes, CA_MIN_BLOCK);
    bool small = size <= CA_SMALL_SIZE;
    int best = -1;
    uint64_t best_free = UINT64_MAX;
    for (int i = 0; i < nsegs; i++) {
        uint64_t avail = segs[i].live ? segs[i].size - segs[i].top : segs[i].size;
        if (segs[i].small == small && avail >= size && avail < best_free) {
            best = i;
            best_free = avail;
        }
    }
    if (best < 0) {
        uint64_t seg_size = small                       ? CA_SMALL_BUFFER
                            : size < CA_MIN_LARGE_ALLOC ? CA_LARGE_BUFFER
                                                        : round_up(size, CA_ROUND_LARGE);
        void *p = NULL;
        CK_CUDA(cudaMalloc(&p, seg_size));
        if (nsegs == capsegs) {
            capsegs = capsegs ? 2 * capsegs : 256;
            struct segment *grown = realloc(segs, (size_t)capsegs * sizeof *segs);
            CK(grown, "out of host memory");
            segs = grown;
        }
        segs[nsegs] = (struct segment){(char *)p, seg_size, 0, 0, small};
        best = nsegs++;
        ca_reserved_bytes += seg_size;
    }
    struct segment *s = &segs[best];
    if (!s->live)
        s->top = 0;
    *out = s->ptr + s->top;
    s->top += size;
    /* An unsplit large block keeps its remainder: nothing else goes there. */
    if (!small && s->size - s->top <= CA_SMALL_SIZE)
        s->top = s->size;
    s->live++;
    return 0;
}

/* Back to the cache (no cudaFree: that is empty_cache's job). */
static int ca_free(void *p)
{
    for (int i = 0; i < nsegs; i++) {
        if ((char *)p >= segs[i].ptr && (char *)p < segs[i].ptr + segs[i].size) {
            CK(segs[i].live > 0, "caching allocator: double free");
            segs[i].live--;
            return 0;
        }
    }
    fail("%d: caching allocator: unknown pointer %p", g_rank, p);
    return 1;
}

/* torch.cuda.empty_cache(): cudaFree of every segment with nothing live. */
static int ca_empty_cache(bool everything)
{
    int kept = 0;
    for (int i = 0; i < nsegs; i++) {
        if (segs[i].live && !everything) {
            segs[kept++] = segs[i];
            continue;
        }
        CK_CUDA(cudaFree(segs[i].ptr));
        ca_reserved_bytes -= segs[i].size;
    }
    nsegs = kept;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Weights and activations                                                   */
/* ------------------------------------------------------------------------ */

/* xorshift64*: the same tensor list on every rank and every run, as the
 * shards of one checkpoint are. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t rng_range(uint64_t lo, uint64_t hi)
{
    return lo + rng_next() % (hi - lo + 1);
}

/* A checkpoint's mix: mostly 20-400 MiB expert and attention matrices (rows
 * of 7168 bf16), some 1-10 MiB scales and router weights, and small norms and
 * biases. Returns the bytes of the segments it had to cudaMalloc. */
static int load_weights(uint64_t total, uint64_t *segment_bytes)
{
    uint64_t before = ca_reserved();
    uint64_t left = total;
    while (left > 0) {
        uint64_t kind = rng_next() % 100, size;
        if (kind < 60)
            size = rng_range(20 * MIB, 400 * MIB) / (HIDDEN * 2) * (HIDDEN * 2);
        else if (kind < 75)
            size = rng_range(CA_SMALL_SIZE + 1, CA_MIN_LARGE_ALLOC - 1) & ~1ull;
        else
            size = rng_range(1 * KIB, CA_SMALL_SIZE) & ~1ull;
        if (size > left)
            size = left; /* the last tensor makes the total exact */
        void *p;
        if (ca_alloc(size, &p) != 0)
            return 1;
        left -= size;
    }
    *segment_bytes = ca_reserved() - before;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Libraries reached through dlopen, as the Python servers reach them        */
/* ------------------------------------------------------------------------ */

/* SGLang's/vLLM's pynccl_wrapper: ctypes on libnccl.so.2. */
struct pynccl {
    void *lib;
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t, cudaStream_t);
    ncclResult_t (*destroy)(ncclComm_t);
};

/* CudaRTLibrary of custom_all_reduce_utils: ctypes on the loaded libcudart. */
struct cudart_lib {
    void *lib;
    cudaError_t (*malloc_)(void **, size_t);
    cudaError_t (*free_)(void *);
    cudaError_t (*ipc_get)(cudaIpcMemHandle_t *, void *);
    cudaError_t (*ipc_open)(void **, cudaIpcMemHandle_t, unsigned int);
    cudaError_t (*ipc_close)(void *);
};

static int open_pynccl(struct pynccl *p)
{
    p->lib = dlopen("libnccl.so.2", RTLD_NOW);
    CK(p->lib, dlerror());
    p->get_unique_id = (ncclResult_t(*)(ncclUniqueId *))dlsym(p->lib, "ncclGetUniqueId");
    p->init_rank =
        (ncclResult_t(*)(ncclComm_t *, int, ncclUniqueId, int))dlsym(p->lib, "ncclCommInitRank");
    p->all_reduce = (ncclResult_t(*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                     ncclComm_t, cudaStream_t))dlsym(p->lib, "ncclAllReduce");
    p->destroy = (ncclResult_t(*)(ncclComm_t))dlsym(p->lib, "ncclCommDestroy");
    CK(p->get_unique_id && p->init_rank && p->all_reduce && p->destroy,
       "libnccl.so.2 lacks a pynccl function");
    return 0;
}

static int open_cudart(struct cudart_lib *c)
{
    c->lib = dlopen("libcudart.so.12", RTLD_NOW);
    CK(c->lib, dlerror());
    c->malloc_ = (cudaError_t(*)(void **, size_t))dlsym(c->lib, "cudaMalloc");
    c->free_ = (cudaError_t(*)(void *))dlsym(c->lib, "cudaFree");
    c->ipc_get = (cudaError_t(*)(cudaIpcMemHandle_t *, void *))dlsym(c->lib, "cudaIpcGetMemHandle");
    c->ipc_open = (cudaError_t(*)(void **, cudaIpcMemHandle_t, unsigned int))dlsym(
        c->lib, "cudaIpcOpenMemHandle");
    c->ipc_close = (cudaError_t(*)(void *))dlsym(c->lib, "cudaIpcCloseMemHandle");
    CK(c->malloc_ && c->free_ && c->ipc_get && c->ipc_open && c->ipc_close,
       "libcudart.so.12 lacks a CudaRTLibrary function");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* One rank                                                                  */
/* ------------------------------------------------------------------------ */

struct rank_state {
    int rank;
    cudaStream_t stream;
    void *warm;        /* torch.zeros(1): NCCL warm-up, kept like a live tensor */
    void *graph_input; /* the captured graphs' input buffer */
    ncclComm_t comm;   /* torch's ProcessGroupNCCL (linked libnccl) */
    ncclComm_t pycomm; /* pynccl (dlopen'd libnccl); none at TP 1 */
    struct pynccl pn;
    /* custom all-reduce */
    struct cudart_lib rt;
    void *car_meta, *car_buf;
    void *car_peer[2 * MAX_TP];
    int ncar_peer;
    void *nt_buf; /* vLLM --non-torch-size */
    void *kv[2 * 1024];
    int nkv;
    cudaGraph_t graphs[NGRAPHS];
    cudaGraphExec_t execs[NGRAPHS];
    void *graph_pool[NGRAPHS];
};

static int measure(bool empty_cache, size_t *free_b, size_t *total_b)
{
    /* get_available_gpu_memory / vLLM's MemorySnapshot: torch.cuda.empty_cache()
     * (a free burst when the allocator caches free segments), then one query. */
    if (empty_cache && ca_empty_cache(false) != 0)
        return 1;
    CK_CUDA(cudaMemGetInfo(free_b, total_b));
    return 0;
}

/* SGLang's distributed measurement: MIN over ranks of the free bytes. */
static int measure_min(struct rank_state *st, const char *tag, size_t *own, uint64_t *min_b,
                       size_t *total_b)
{
    if (measure(true, own, total_b) != 0)
        return 1;
    uint64_t mine = *own, all[MAX_TP];
    CK(allgather(tag, st->rank, &mine, sizeof mine, all) == 0, "exchange of free memory failed");
    *min_b = all[0];
    for (int r = 1; r < cfg.tp; r++)
        if (all[r] < *min_b)
            *min_b = all[r];
    return 0;
}

/* docs/budget.md: float32 when distributed, integer with one rank, then GiB. */
static double gib(uint64_t min_free_bytes, int ranks)
{
    double bytes = ranks > 1 ? (double)(float)min_free_bytes : (double)min_free_bytes;
    return bytes / 1073741824.0;
}

/* Rank 0 makes a unique id; the others read it (torch broadcasts it). */
static int share_id(struct rank_state *st, const char *tag, ncclResult_t (*get_id)(ncclUniqueId *),
                    ncclUniqueId *id)
{
    if (st->rank == 0) {
        CK_NCCL(get_id(id));
        CK(publish(tag, 0, id, sizeof *id) == 0, "cannot publish the NCCL unique id");
    } else {
        CK(fetch(tag, 0, id, sizeof *id) == 0, "no NCCL unique id from rank 0");
    }
    return 0;
}

/* Step 1 and 2: context, warm-up tensor, the two NCCL communicators. */
static int init_distributed(struct rank_state *st)
{
    CK_CUDA(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    if (ca_alloc(4, &st->warm) != 0)
        return 1;

    ncclUniqueId id;
    if (share_id(st, "nccl-id", ncclGetUniqueId, &id) != 0)
        return 1;
    CK_NCCL(ncclCommInitRank(&st->comm, cfg.tp, id, st->rank));
    CK_NCCL(ncclAllReduce(st->warm, st->warm, 1, ncclFloat32, ncclSum, st->comm, st->stream));

    /* SGLang and vLLM make no pynccl communicator for a single rank. */
    if (cfg.tp > 1) {
        if (open_pynccl(&st->pn) != 0 || share_id(st, "pynccl-id", st->pn.get_unique_id, &id) != 0)
            return 1;
        CK_NCCL(st->pn.init_rank(&st->pycomm, cfg.tp, id, st->rank));
        CK_NCCL(
            st->pn.all_reduce(st->warm, st->warm, 1, ncclFloat32, ncclSum, st->pycomm, st->stream));
    }
    CK_CUDA(cudaStreamSynchronize(st->stream));
    return 0;
}

/* Step 3: SGLang's custom all-reduce (only with more than one rank, as there). */
static int init_custom_ar(struct rank_state *st)
{
    struct cudart_lib *rt = &st->rt;
    if (open_cudart(rt) != 0)
        return 1;
    CK_CUDA(rt->malloc_(&st->car_meta, CAR_META_SIZE + cfg.custom_ar_max));
    CK_CUDA(rt->malloc_(&st->car_buf, cfg.custom_ar_max));
    cudaIpcMemHandle_t mine[2], all[MAX_TP][2];
    CK_CUDA(rt->ipc_get(&mine[0], st->car_meta));
    CK_CUDA(rt->ipc_get(&mine[1], st->car_buf));
    CK(allgather("car-handles", st->rank, mine, sizeof mine, all) == 0,
       "exchange of custom all-reduce handles failed");
    for (int r = 0; r < cfg.tp; r++) {
        if (r == st->rank)
            continue;
        for (int b = 0; b < 2; b++) {
            void **slot = &st->car_peer[st->ncar_peer];
            CK_CUDA(rt->ipc_open(slot, all[r][b], cudaIpcMemLazyEnablePeerAccess));
            st->ncar_peer++;
        }
    }
    /* rank_data = torch.empty(8 MiB): the caching allocator, a 20 MiB segment. */
    void *rank_data;
    return ca_alloc(CAR_RANK_DATA, &rank_data);
}

/* Step 8: graphs for a few batch sizes, then a few decode steps. */
static int capture_and_decode(struct rank_state *st)
{
    size_t f, t;
    /* Both servers log free memory around capture (no empty_cache there). */
    if (measure(false, &f, &t) != 0)
        return 1;
    if (ca_alloc((uint64_t)graph_bs[0] * HIDDEN * 2, &st->graph_input) != 0)
        return 1;
    for (int g = 0; g < NGRAPHS; g++) {
        size_t count = (size_t)graph_bs[g] * HIDDEN;
        CK_CUDA(cudaStreamBeginCapture(st->stream, cudaStreamCaptureModeGlobal));
        /* SGLang captures through pynccl; a single rank has only the torch group. */
        if (st->pycomm)
            CK_NCCL(st->pn.all_reduce(st->graph_input, st->graph_input, count, ncclBfloat16,
                                      ncclSum, st->pycomm, st->stream));
        else
            CK_NCCL(ncclAllReduce(st->graph_input, st->graph_input, count, ncclBfloat16, ncclSum,
                                  st->comm, st->stream));
        CK_CUDA(cudaStreamEndCapture(st->stream, &st->graphs[g]));
        CK_CUDA(cudaGraphInstantiate(&st->execs[g], st->graphs[g], 0));
        CK_CUDA(cudaMalloc(&st->graph_pool[g], GRAPH_POOL_BS * (size_t)graph_bs[g]));
    }
    if (measure(false, &f, &t) != 0)
        return 1;
    for (int step = 0; step < DECODE_STEPS; step++) {
        CK_CUDA(cudaGraphLaunch(st->execs[step % NGRAPHS], st->stream));
        CK_NCCL(ncclAllReduce(st->graph_input, st->graph_input, HIDDEN, ncclBfloat16, ncclSum,
                              st->comm, st->stream));
    }
    CK_CUDA(cudaStreamSynchronize(st->stream));
    return 0;
}

/* Step 9: everything back, communicators first (as at interpreter exit). */
static int teardown(struct rank_state *st)
{
    for (int g = 0; g < NGRAPHS; g++) {
        CK_CUDA(cudaGraphExecDestroy(st->execs[g]));
        CK_CUDA(cudaGraphDestroy(st->graphs[g]));
        CK_CUDA(cudaFree(st->graph_pool[g]));
    }
    if (st->pycomm)
        CK_NCCL(st->pn.destroy(st->pycomm));
    CK_NCCL(ncclCommDestroy(st->comm));
    if (st->car_meta) {
        for (int i = 0; i < st->ncar_peer; i++)
            CK_CUDA(st->rt.ipc_close(st->car_peer[i]));
        /* No rank frees what it exported before every peer has closed it. */
        char done = 1, all[MAX_TP];
        CK(allgather("car-closed", st->rank, &done, 1, all) == 0, "teardown barrier failed");
        CK_CUDA(st->rt.free_(st->car_meta));
        CK_CUDA(st->rt.free_(st->car_buf));
    }
    if (st->nt_buf)
        CK_NCCL(ncclMemFree(st->nt_buf));
    for (int i = 0; i < st->nkv; i++)
        CK_CUDA(cudaFree(st->kv[i]));
    if (ca_empty_cache(true) != 0)
        return 1;
    CK_CUDA(cudaStreamDestroy(st->stream));
    if (st->pn.lib)
        dlclose(st->pn.lib);
    if (st->rt.lib)
        dlclose(st->rt.lib);
    return 0;
}

static int run_sglang(struct rank_state *st)
{
    size_t own_pre, own_post, total_b, f0, t0;
    uint64_t min_pre, min_post, weights;
    char frac[64];
    py_float(cfg.mem_fraction, frac, sizeof frac);

    /* init_torch_distributed starts with a local measurement. */
    if (measure(true, &f0, &t0) != 0 || init_distributed(st) != 0)
        return 1;
    if (cfg.custom_ar && cfg.tp > 1 && init_custom_ar(st) != 0)
        return 1;
    if (measure_min(st, "pre", &own_pre, &min_pre, &total_b) != 0)
        return 1;
    if (load_weights(cfg.weights, &weights) != 0)
        return 1;
    if (measure_min(st, "post", &own_post, &min_post, &total_b) != 0)
        return 1;

    /* docs/budget.md, SGLang, in C exactly. The product goes through a
     * volatile so that no compiler fuses it into an FMA (GCC does by default
     * where the target has one): Python rounds it before the subtraction. */
    double pre_gib = gib(min_pre, cfg.tp), post_gib = gib(min_post, cfg.tp);
    volatile double kept = pre_gib * (1.0 - cfg.mem_fraction);
    double rest = post_gib - kept;
    int64_t tokens = (int64_t)floor(rest * 1073741824.0 / (double)cfg.cell_size);
    bool fits = tokens > 0;

    /* The pool's tokens are floored to whole pages; per-layer bytes of MLA. */
    int64_t kv_tokens = fits ? tokens / (int64_t)cfg.page_size * (int64_t)cfg.page_size : 0;
    uint64_t per_layer = cfg.cell_size / (uint64_t)cfg.layers;
    uint64_t layer_bytes = kv_tokens > 0 ? ((uint64_t)kv_tokens + cfg.page_size) * per_layer : 0;
    say(1,
        "rank %d sglang tp=%d mem_fraction_static=%s cell_size=%llu total=%zu "
        "rank_pre_free=%zu rank_post_free=%zu pre_bytes=%llu post_bytes=%llu "
        "pre_gib=%.17g post_gib=%.17g rest_gib=%.17g tokens=%lld weights=%llu kv_tokens=%lld "
        "kv_layers=%d kv_layer_bytes=%llu fits=%d",
        st->rank, cfg.tp, frac, (unsigned long long)cfg.cell_size, total_b, own_pre, own_post,
        (unsigned long long)min_pre, (unsigned long long)min_post, pre_gib, post_gib, rest,
        (long long)tokens, (unsigned long long)weights, (long long)kv_tokens,
        layer_bytes ? cfg.layers : 0, (unsigned long long)layer_bytes, fits && kv_tokens > 0);
    if (!fits || kv_tokens <= 0) {
        /* SGLang raises here; every rank computed the same numbers. */
        say(2,
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=%s",
            frac);
        return 1;
    }

    /* The KV pool: one buffer per layer (MLA), each its exact size so that the
     * trace shows L x (tokens + page) x cell_size / L, next to the budget. */
    for (int l = 0; l < cfg.layers; l++)
        CK_CUDA(cudaMalloc(&st->kv[st->nkv++], layer_bytes));
    return capture_and_decode(st) || teardown(st);
}

static int run_vllm(struct rank_state *st)
{
    size_t s0_free, s1_free, total_b, t1;
    char util[64];
    py_float(cfg.gpu_util, util, sizeof util);

    /* init_device: distributed init, then empty_cache and snapshot S0. */
    if (init_distributed(st) != 0 || measure(true, &s0_free, &total_b) != 0)
        return 1;
    uint64_t torch_s0 = ca_reserved();
    uint64_t requested = (uint64_t)((double)total_b * cfg.gpu_util);
    if ((uint64_t)s0_free < requested) {
        say(1,
            "rank %d vllm tp=%d gpu_memory_utilization=%s total=%zu s0_free=%zu "
            "requested=%llu fits=0",
            st->rank, cfg.tp, util, total_b, s0_free, (unsigned long long)requested);
        char a[64], b[64], c[64];
        py_float(round((double)s0_free / GIB * 100.0) / 100.0, a, sizeof a);
        py_float(round((double)total_b / GIB * 100.0) / 100.0, b, sizeof b);
        py_float(round((double)requested / GIB * 100.0) / 100.0, c, sizeof c);
        say(2,
            "ValueError: Free memory on device (%s/%s GiB) on startup is less than desired GPU "
            "memory utilization (%s, %s GiB). Decrease GPU memory utilization or reduce GPU "
            "memory used by other processes.",
            a, b, util, c);
        return 1;
    }

    uint64_t weights;
    if (load_weights(cfg.weights, &weights) != 0)
        return 1;
    uint64_t after_weights = ca_reserved();

    /* determine_available_memory: a profiling forward pass. Memory NCCL (or a
     * library like it) takes on the way is non-torch; the activations are
     * allocated, all of them before any is freed, so the peak is their sum. */
    if (cfg.non_torch)
        CK_NCCL(ncclMemAlloc(&st->nt_buf, cfg.non_torch));
    enum { NACT = 12 };
    static const int share[NACT] = {3, 1, 2, 1, 3, 2, 1, 2, 3, 1, 2, 1}; /* of 22 */
    void *act[NACT];
    uint64_t left = cfg.activation;
    int nact = 0;
    for (int i = 0; i < NACT && left > 0; i++) {
        uint64_t size = i == NACT - 1 ? left : cfg.activation / 22 * (uint64_t)share[i];
        if (size > left)
            size = left;
        if (size == 0)
            continue;
        if (ca_alloc(size, &act[nact++]) != 0)
            return 1;
        left -= size;
    }
    uint64_t peak = ca_reserved() - after_weights;
    for (int i = 0; i < nact; i++)
        if (ca_free(act[i]) != 0)
            return 1;
    /* empty_cache (the activations' segments go back: a free burst), S1. */
    if (measure(true, &s1_free, &t1) != 0)
        return 1;
    uint64_t torch_s1 = ca_reserved();

    /* docs/budget.md, vLLM: integer bytes. */
    int64_t non_torch_s0 = (int64_t)(total_b - s0_free) - (int64_t)torch_s0;
    int64_t non_torch_s1 = (int64_t)(t1 - s1_free) - (int64_t)torch_s1;
    int64_t nti = non_torch_s1 - non_torch_s0;
    int64_t available = (int64_t)requested - ((int64_t)weights + (int64_t)peak + nti);
    bool fits = available > 0;

    /* 2L equal tensors (K and V per layer), whole 2 MiB each, within budget. */
    int ntensors = 2 * cfg.layers;
    uint64_t tensor = fits ? (uint64_t)available / (uint64_t)ntensors / (2 * MIB) * (2 * MIB) : 0;
    say(1,
        "rank %d vllm tp=%d gpu_memory_utilization=%s total=%zu s0_free=%zu requested=%llu "
        "weights=%llu peak_activation=%llu non_torch_increase=%lld s1_free=%zu torch_s0=%llu "
        "torch_s1=%llu available_kv=%lld kv_tensors=%d kv_tensor_bytes=%llu fits=%d",
        st->rank, cfg.tp, util, total_b, s0_free, (unsigned long long)requested,
        (unsigned long long)weights, (unsigned long long)peak, (long long)nti, s1_free,
        (unsigned long long)torch_s0, (unsigned long long)torch_s1, (long long)available,
        tensor ? ntensors : 0, (unsigned long long)tensor, fits);
    if (!fits) {
        say(2, "ValueError: No available memory for the cache blocks. Try increasing "
               "`gpu_memory_utilization` when initializing the engine.");
        return 1;
    }
    for (int i = 0; tensor && i < ntensors; i++)
        CK_CUDA(cudaMalloc(&st->kv[st->nkv++], tensor));
    return capture_and_decode(st) || teardown(st);
}

static int run_rank(int rank)
{
    static struct rank_state st; /* large; one per process */
    st.rank = g_rank = rank;
    CK_CUDA(cudaSetDevice(rank));
    return cfg.fw == FW_SGLANG ? run_sglang(&st) : run_vllm(&st);
}

/* ------------------------------------------------------------------------ */
/* Launcher                                                                  */
/* ------------------------------------------------------------------------ */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: tp_server_sim [--framework sglang|vllm] [--tp N] [flags]\n"
            "\n"
            "Simulates the startup of a tensor-parallel SGLang or vLLM server on the fake\n"
            "GPU stack: one process per rank, rank r on device r.\n"
            "\n"
            "  --framework sglang|vllm        (sglang)\n"
            "  --tp N                         ranks, 1..%d (8)\n"
            "  --weights-gib SIZE             weight tensors per rank (52; GiB)\n"
            "  --layers L                     KV pool: L (sglang) or 2L (vllm) tensors (61)\n"
            "sglang:\n"
            "  --mem-fraction-static F        (0.55)\n"
            "  --cell-size SIZE               KV bytes per token (70272; bytes)\n"
            "  --page-size N                  tokens per KV page (1)\n"
            "  --custom-ar                    custom all-reduce before the pre measurement\n"
            "  --custom-ar-max-size SIZE      its staging buffer (256M: a PCIe fork's)\n"
            "vllm:\n"
            "  --gpu-memory-utilization U     (0.9)\n"
            "  --activation-gib SIZE          profile run's peak activations (4; GiB)\n"
            "  --non-torch-size SIZE          ncclMemAlloc in the profile run (0; bytes)\n"
            "\n"
            "SIZE: a number in the unit shown, or with a K, M, G or T suffix (binary).\n"
            "Each rank prints one result line on stdout. Exit: 0 all ranks started,\n"
            "1 a rank failed, 2 usage.\n",
            MAX_TP);
}

/* A size: plain numbers are in `unit` bytes, suffixes K/M/G/T are binary. */
static bool parse_size(const char *s, uint64_t unit, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0))
        return false;
    uint64_t mult = unit;
    if (*end) {
        const char *units = "KMGT";
        const char *u = strchr(units, *end >= 'a' ? *end - 32 : *end);
        if (!u || !*u)
            return false;
        mult = 1ull << (10 * (u - units + 1));
        end++;
        if (*end == 'i')
            end++;
        if (*end == 'B')
            end++;
        if (*end)
            return false;
    }
    double bytes = v * (double)mult;
    if (bytes >= 18446744073709551616.0)
        return false;
    *out = (uint64_t)bytes;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return end != s && !*end && !errno && isfinite(*out);
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    *out = strtol(s, &end, 10);
    return end != s && !*end && !errno && *out >= lo && *out <= hi;
}

/* Returns 0, or 2 after saying what is wrong. */
static int parse_args(int argc, char **argv)
{
    bool sglang_only = false, vllm_only = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--custom-ar")) {
            cfg.custom_ar = sglang_only = true;
            continue;
        }
        if (i + 1 >= argc || strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "tp_server_sim: %s: unknown or missing its value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        long n;
        bool ok;
        if (!strcmp(a, "--framework")) {
            ok = !strcmp(v, "sglang") || !strcmp(v, "vllm");
            cfg.fw = !strcmp(v, "vllm") ? FW_VLLM : FW_SGLANG;
        } else if (!strcmp(a, "--tp")) {
            ok = parse_int(v, 1, MAX_TP, &n);
            cfg.tp = (int)n;
        } else if (!strcmp(a, "--weights-gib")) {
            ok = parse_size(v, GIB, &cfg.weights);
        } else if (!strcmp(a, "--layers")) {
            ok = parse_int(v, 1, 1024, &n);
            cfg.layers = (int)n;
        } else if (!strcmp(a, "--mem-fraction-static")) {
            ok =
                parse_double(v, &cfg.mem_fraction) && cfg.mem_fraction > 0 && cfg.mem_fraction <= 1;
            sglang_only = true;
        } else if (!strcmp(a, "--cell-size")) {
            ok = parse_size(v, 1, &cfg.cell_size) && cfg.cell_size > 0;
            sglang_only = true;
        } else if (!strcmp(a, "--page-size")) {
            ok = parse_int(v, 1, 1 << 20, &n);
            cfg.page_size = (uint64_t)n;
            sglang_only = true;
        } else if (!strcmp(a, "--custom-ar-max-size")) {
            ok = parse_size(v, 1, &cfg.custom_ar_max) && cfg.custom_ar_max > 0 &&
                 cfg.custom_ar_max <= 64 * GIB;
            sglang_only = true;
        } else if (!strcmp(a, "--gpu-memory-utilization")) {
            ok = parse_double(v, &cfg.gpu_util) && cfg.gpu_util > 0 && cfg.gpu_util <= 1;
            vllm_only = true;
        } else if (!strcmp(a, "--activation-gib")) {
            ok = parse_size(v, GIB, &cfg.activation);
            vllm_only = true;
        } else if (!strcmp(a, "--non-torch-size")) {
            ok = parse_size(v, 1, &cfg.non_torch);
            vllm_only = true;
        } else {
            fprintf(stderr, "tp_server_sim: unknown flag %s\n", a);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "tp_server_sim: bad value for %s: %s\n", a, v);
            return 2;
        }
    }
    if ((cfg.fw == FW_SGLANG && vllm_only) || (cfg.fw == FW_VLLM && sglang_only)) {
        fprintf(stderr, "tp_server_sim: a flag of the other framework was given (see --help)\n");
        return 2;
    }
    if (cfg.fw == FW_SGLANG && cfg.cell_size < (uint64_t)cfg.layers) {
        fprintf(stderr, "tp_server_sim: --cell-size must be at least --layers bytes\n");
        return 2;
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

int main(int argc, char **argv)
{
    int rc = parse_args(argc, argv);
    if (rc != 0) {
        fprintf(stderr, "usage: tp_server_sim [--framework sglang|vllm] [--tp N] [flags] "
                        "(--help lists the flags)\n");
        return rc;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tp-server-sim-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "tp_server_sim: cannot create a directory in %s: %s\n",
                tmp && *tmp ? tmp : "/tmp", strerror(errno));
        return 1;
    }
    /* The fake NCCL meets its ranks through files; keep them in our directory
     * too, so that nothing stays behind. A real NCCL ignores the variable. */
    setenv("CUTRACE_FAKE_NCCL_DIR", g_dir, 0);

    pid_t launcher = getpid(), pids[MAX_TP];
    int started = 0;
    for (int r = 0; r < cfg.tp; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            fprintf(stderr, "tp_server_sim: fork: %s\n", strerror(errno));
            mark_abort();
            break;
        }
        if (pids[r] == 0) {
            /* A rank does not outlive its launcher (Ctrl-C, a killed test). */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != launcher)
                _exit(1);
            int status = run_rank(r) ? 1 : 0;
            if (status)
                mark_abort();
            exit(status); /* exit, not _exit: the libraries' destructors run */
        }
        started++;
    }

    /* Wait for every rank. After a failure, the others get a grace period to
     * finish (they usually fail at the same point, or see the abort mark and
     * stop waiting for the exchange); one stuck in NCCL's rendezvous, which
     * cannot see the mark, is killed. */
    bool done[MAX_TP] = {false};
    int failed = cfg.tp - started, left = started, killed = 0;
    double deadline = now_s() + GRACE_S;
    while (left > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, failed ? WNOHANG : 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pid == 0) {
            if (now_s() > deadline && !killed)
                for (int r = 0; r < started; r++)
                    if (!done[r] && kill(pids[r], SIGKILL) == 0)
                        killed++;
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        for (int r = 0; r < started; r++) {
            if (pids[r] != pid)
                continue;
            done[r] = true;
            left--;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                if (!failed++) {
                    mark_abort();
                    deadline = now_s() + GRACE_S;
                }
            }
        }
    }
    nftw(g_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (killed)
        fprintf(stderr,
                "tp_server_sim: %d of %d ranks failed (%d killed, stuck %g s after "
                "the first failure)\n",
                failed, cfg.tp, killed, GRACE_S);
    else if (failed)
        fprintf(stderr, "tp_server_sim: %d of %d ranks failed\n", failed, cfg.tp);
    return failed ? 1 : 0;
}
