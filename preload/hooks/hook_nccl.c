/*
 * hook_nccl.c - NCCL: communicators, collectives, groups and NCCL's memory.
 *
 * libnccl.so.2 defines every ncclX as a weak alias of its strong pncclX, and
 * a program's references bind to the preload's ncclX first. Each real
 * function is resolved on first use; where the loaded NCCL lacks one (an
 * older release), the call is recorded and answered with ncclInvalidUsage,
 * as hook.h's CT_TRACE does for every family.
 *
 * Record fields (the `communicators` and `collectives` views decode them;
 * docs/schema.md documents them for users):
 *   every call on a communicator: arg0 = the ncclComm_t handle
 *   inits (ncclCommInitRank*, ncclCommSplit, the ncclCommInitAll_comm
 *   records): ptr = arg0 = the new handle, arg1 nranks, arg2 rank, arg3 a
 *   64-bit hash of the ncclUniqueId, arg4 parent handle (split), arg5 color,
 *   arg6 key. The hash is what joins the ranks of one communicator across
 *   processes; for a split it is derived from the parent's hash, the order of
 *   the split on that parent and the color, so it is also equal on every
 *   rank of one split group.
 *   ncclGetUniqueId: arg3 = the hash of the id it made; ncclGetVersion: arg0
 *   the version
 *   collectives and p2p: ptr sendbuff, arg5 recvbuff, arg1 count, arg2
 *   datatype, size = count x element size, arg3 redop (-1 none), arg4 root
 *   or peer (-1 none), stream, arg6 the ncclGroupStart depth of the thread,
 *   arg7 the stream's capture status (1 = capturing: the call is recorded
 *   into a CUDA graph and runs at every replay)
 *   ncclGroupStart/End: arg6 the depth before the call
 *   ncclMemAlloc/ncclMemFree: ptr, size (allocations of kind device)
 *   registrations: ptr buffer, size, arg1 handle or window, flags winFlags
 *
 * Inits, finalize, destroy, abort, collectives, p2p and ncclGroupEnd can
 * block (on the other ranks), so they are CT_TRACE_BLOCKING: what their
 * record knows before the call (the arguments: an init's nranks, rank and
 * unique-id hash, a collective's comm, count and peer) is in its "entered"
 * mark, which says after a SIGKILL which call the rank died inside.
 */
#include <cuda.h>
#include <nccl.h>
#include <stdint.h>
#include <string.h>

#include "../core/hook.h"

#define MISSING ncclInvalidUsage

/* ncclGroupStart nesting is per thread in NCCL, so it is here. */
static __thread int group_depth __attribute__((tls_model("initial-exec")));

/* ---- communicator identity ------------------------------------------------ */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define FNV_OFFSET 0xcbf29ce484222325ull

/*
 * Live communicators of this process and their hashes, for splits. A fixed
 * table with atomic slot claims: inits and splits are rare, and no lock means
 * nothing for fork() to catch half-taken.
 */
enum { COMM_SLOTS = 4096 };
static struct comm_slot {
    uint64_t comm; /* 0 = free */
    uint64_t hash;
    uint32_t splits;
} comm_table[COMM_SLOTS];

static struct comm_slot *find_comm(uint64_t comm)
{
    for (int i = 0; comm && i < COMM_SLOTS; i++) {
        if (__atomic_load_n(&comm_table[i].comm, __ATOMIC_ACQUIRE) == comm)
            return &comm_table[i];
    }
    return NULL;
}

static void remember_comm(uint64_t comm, uint64_t hash)
{
    for (int i = 0; comm && i < COMM_SLOTS; i++) {
        uint64_t expected = 0;
        if (__atomic_compare_exchange_n(&comm_table[i].comm, &expected, comm, false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            comm_table[i].hash = hash;
            __atomic_store_n(&comm_table[i].splits, 0, __ATOMIC_RELEASE);
            return;
        }
    }
}

static void forget_comm(uint64_t comm)
{
    struct comm_slot *s = find_comm(comm);
    if (s)
        __atomic_store_n(&s->comm, 0, __ATOMIC_RELEASE);
}

static uint64_t hash_ids(const ncclUniqueId *ids, int n)
{
    return ids && n > 0 ? fnv1a(FNV_OFFSET, ids, sizeof *ids * (size_t)n) : 0;
}

/* What an init's record knows before the call: who it joins. */
static void record_joining(struct ct_event *ev, int nranks, int rank, uint64_t hash)
{
    ev->rec.arg[1] = (uint64_t)(int64_t)nranks;
    ev->rec.arg[2] = (uint64_t)(int64_t)rank;
    ev->rec.arg[3] = hash;
}

/* Fills an init record; remembers the communicator it made. */
static void record_init(struct ct_event *ev, ncclResult_t rc, const ncclComm_t *made, int nranks,
                        int rank, uint64_t hash)
{
    uint64_t comm = (rc == ncclSuccess && made) ? ct_addr(*made) : 0;
    ev->rec.ptr = ev->rec.arg[0] = comm;
    record_joining(ev, nranks, rank, hash);
    if (comm)
        remember_comm(comm, hash);
}

CT_EXPORT ncclResult_t ncclGetVersion(int *version)
{
    CT_REAL(ncclGetVersion);
    CT_TRACE(CT_API_ncclGetVersion, ncclResult_t, MISSING, real(version), {
        if (rc == ncclSuccess && version)
            ev.rec.arg[0] = (uint64_t)(int64_t)*version;
    });
}

CT_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    CT_REAL(ncclGetUniqueId);
    CT_TRACE(CT_API_ncclGetUniqueId, ncclResult_t, MISSING, real(uniqueId), {
        if (rc == ncclSuccess)
            ev.rec.arg[3] = hash_ids(uniqueId, 1);
    });
}

CT_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    CT_REAL(ncclCommInitRank);
    uint64_t hash = hash_ids(&commId, 1);
    CT_TRACE_BLOCKING(CT_API_ncclCommInitRank, ncclResult_t, MISSING,
                      record_joining(&ev, nranks, rank, hash), real(comm, nranks, commId, rank),
                      record_init(&ev, rc, comm, nranks, rank, hash));
}

CT_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                              int rank, ncclConfig_t *config)
{
    CT_REAL(ncclCommInitRankConfig);
    uint64_t hash = hash_ids(&commId, 1);
    CT_TRACE_BLOCKING(CT_API_ncclCommInitRankConfig, ncclResult_t, MISSING,
                      record_joining(&ev, nranks, rank, hash),
                      real(comm, nranks, commId, rank, config),
                      record_init(&ev, rc, comm, nranks, rank, hash));
}

CT_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                                int nId, ncclUniqueId *commIds,
                                                ncclConfig_t *config)
{
    CT_REAL(ncclCommInitRankScalable);
    uint64_t hash = hash_ids(commIds, nId);
    CT_TRACE_BLOCKING(CT_API_ncclCommInitRankScalable, ncclResult_t, MISSING,
                      record_joining(&ev, nranks, myrank, hash),
                      real(newcomm, nranks, myrank, nId, commIds, config),
                      record_init(&ev, rc, newcomm, nranks, myrank, hash));
}

/*
 * ncclCommInitAll makes ndev communicators, one per device, in one call: the
 * call's record, then one ncclCommInitAll_comm record per communicator,
 * nested in it, so that each has an init of its own with its own device.
 */
CT_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    CT_REAL(ncclCommInitAll);
    CT_TRACE_BLOCKING(CT_API_ncclCommInitAll, ncclResult_t, MISSING,
                      ev.rec.arg[1] = (uint64_t)(int64_t)ndev, real(comm, ndev, devlist), {
                          if (rc == ncclSuccess && comm && ev.traced) {
                              /* Ranks of one call share a hash that no other communicator has. */
                              uint64_t hash = fnv1a(FNV_OFFSET, &ev.rec.seq, sizeof ev.rec.seq);
                              hash = fnv1a(hash, &ev.rec.t_ns, sizeof ev.rec.t_ns);
                              ev.rec.arg[3] = hash;
                              for (int i = 0; i < ndev; i++) {
                                  struct ct_event member;
                                  ct_event_begin_part(&member, CT_API_ncclCommInitAll_comm,
                                                      CT_CALLER);
                                  record_init(&member, ncclSuccess, &comm[i], ndev, i, hash);
                                  ct_event_set_device(&member, devlist ? devlist[i] : i);
                                  ct_event_end(&member, ncclSuccess);
                              }
                          }
                      });
}

/* A split's record before the call: its parent, color, key, and the hash
 * its group will share (nranks and rank are known only after). */
static void record_split_args(struct ct_event *ev, ncclComm_t parent, int color, int key,
                              uint64_t hash)
{
    record_joining(ev, -1, -1, hash);
    ev->rec.arg[4] = ct_addr(parent);
    ev->rec.arg[5] = (uint64_t)(int64_t)color;
    ev->rec.arg[6] = (uint64_t)(int64_t)key;
}

CT_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                     ncclConfig_t *config)
{
    CT_REAL(ncclCommSplit);
    /* Every rank of the parent calls each split in the same order: count them. */
    struct comm_slot *parent = find_comm(ct_addr(comm));
    uint32_t nth = parent ? __atomic_fetch_add(&parent->splits, 1, __ATOMIC_RELAXED) : 0;
    uint64_t hash = 0;
    if (parent) {
        hash = fnv1a(FNV_OFFSET, &parent->hash, sizeof parent->hash);
        hash = fnv1a(hash, &nth, sizeof nth);
        hash = fnv1a(hash, &color, sizeof color);
    }
    CT_TRACE_BLOCKING(
        CT_API_ncclCommSplit, ncclResult_t, MISSING, record_split_args(&ev, comm, color, key, hash),
        real(comm, color, key, newcomm, config), {
            int nranks = -1, rank = -1;
            if (rc == ncclSuccess && newcomm && *newcomm) {
                __typeof__(&ncclCommCount) count =
                    (__typeof__(&ncclCommCount))ct_resolve(CT_LIB_NCCL, "ncclCommCount");
                __typeof__(&ncclCommUserRank) user_rank =
                    (__typeof__(&ncclCommUserRank))ct_resolve(CT_LIB_NCCL, "ncclCommUserRank");
                if (count && count(*newcomm, &nranks) != ncclSuccess)
                    nranks = -1;
                if (user_rank && user_rank(*newcomm, &rank) != ncclSuccess)
                    rank = -1;
            }
            record_init(&ev, rc, newcomm, nranks, rank, hash);
        });
}

static ncclResult_t end_comm(const void *caller, enum ct_api api, ncclResult_t (*real)(ncclComm_t),
                             ncclComm_t comm, bool forget)
{
    CT_TRACE_BLOCKING_AS(caller, api, ncclResult_t, MISSING, ev.rec.arg[0] = ct_addr(comm),
                         real(comm), {
                             if (rc == ncclSuccess && forget)
                                 forget_comm(ct_addr(comm));
                         });
}

CT_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    CT_REAL(ncclCommFinalize);
    return end_comm(CT_CALLER, CT_API_ncclCommFinalize, real, comm, false);
}

CT_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    CT_REAL(ncclCommDestroy);
    return end_comm(CT_CALLER, CT_API_ncclCommDestroy, real, comm, true);
}

CT_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    CT_REAL(ncclCommAbort);
    return end_comm(CT_CALLER, CT_API_ncclCommAbort, real, comm, true);
}

/* ---- collectives and point-to-point ---------------------------------------- */

/* Bytes per element of ncclDataType_t 0..11 (nccl.h 2.28). */
static const uint8_t ELEMENT_BYTES[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

typedef CUresult (*is_capturing_fn)(CUstream, CUstreamCaptureStatus *);

/* The stream's capture status, asked of the driver the program already loaded. */
static uint64_t capture_status(cudaStream_t stream)
{
    static is_capturing_fn is_capturing;
    static int missing;
    is_capturing_fn fn = __atomic_load_n(&is_capturing, __ATOMIC_ACQUIRE);
    if (!fn && !__atomic_load_n(&missing, __ATOMIC_RELAXED)) {
        fn = (is_capturing_fn)ct_resolve_loaded(CT_LIB_CUDA, "cuStreamIsCapturing");
        if (fn)
            __atomic_store_n(&is_capturing, fn, __ATOMIC_RELEASE);
        else
            __atomic_store_n(&missing, 1, __ATOMIC_RELAXED);
    }
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!fn || fn((CUstream)stream, &status) != CUDA_SUCCESS)
        return 0;
    return (uint64_t)status;
}

struct transfer {
    const void *sendbuff;
    const void *recvbuff;
    size_t count;
    ncclDataType_t datatype;
    int64_t redop; /* -1: none */
    int64_t peer;  /* root or peer, -1: none */
    ncclComm_t comm;
    cudaStream_t stream;
};

static void record_transfer(struct ct_event *ev, const struct transfer *t)
{
    if (!ev->traced)
        return;
    size_t unit = (unsigned)t->datatype < sizeof ELEMENT_BYTES ? ELEMENT_BYTES[t->datatype] : 0;
    ev->rec.ptr = ct_addr(t->sendbuff);
    ev->rec.size = t->count * unit;
    ev->rec.stream = ct_addr(t->stream);
    ev->rec.arg[0] = ct_addr(t->comm);
    ev->rec.arg[1] = t->count;
    ev->rec.arg[2] = (uint64_t)t->datatype;
    ev->rec.arg[3] = (uint64_t)t->redop;
    ev->rec.arg[4] = (uint64_t)t->peer;
    ev->rec.arg[5] = ct_addr(t->recvbuff);
    ev->rec.arg[6] = (uint64_t)group_depth;
    ev->rec.arg[7] = capture_status(t->stream);
}

#define TRANSFER(...) (&(struct transfer){__VA_ARGS__})

CT_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream)
{
    CT_REAL(ncclAllReduce);
    CT_TRACE_BLOCKING(
        CT_API_ncclAllReduce, ncclResult_t, MISSING,
        record_transfer(&ev, TRANSFER(sendbuff, recvbuff, count, datatype, op, -1, comm, stream)),
        real(sendbuff, recvbuff, count, datatype, op, comm, stream), (void)0);
}

CT_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream)
{
    CT_REAL(ncclBroadcast);
    CT_TRACE_BLOCKING(
        CT_API_ncclBroadcast, ncclResult_t, MISSING,
        record_transfer(&ev, TRANSFER(sendbuff, recvbuff, count, datatype, -1, root, comm, stream)),
        real(sendbuff, recvbuff, count, datatype, root, comm, stream), (void)0);
}

CT_EXPORT ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream)
{
    CT_REAL(ncclBcast);
    CT_TRACE_BLOCKING(
        CT_API_ncclBcast, ncclResult_t, MISSING,
        record_transfer(&ev, TRANSFER(buff, buff, count, datatype, -1, root, comm, stream)),
        real(buff, count, datatype, root, comm, stream), (void)0);
}

CT_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, int root,
                                  ncclComm_t comm, cudaStream_t stream)
{
    CT_REAL(ncclReduce);
    CT_TRACE_BLOCKING(
        CT_API_ncclReduce, ncclResult_t, MISSING,
        record_transfer(&ev, TRANSFER(sendbuff, recvbuff, count, datatype, op, root, comm, stream)),
        real(sendbuff, recvbuff, count, datatype, op, root, comm, stream), (void)0);
}

CT_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                     ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    CT_REAL(ncclAllGather);
    CT_TRACE_BLOCKING(CT_API_ncclAllGather, ncclResult_t, MISSING,
                      record_transfer(&ev, TRANSFER(sendbuff, recvbuff, sendcount, datatype, -1, -1,
                                                    comm, stream)),
                      real(sendbuff, recvbuff, sendcount, datatype, comm, stream), (void)0);
}

CT_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t stream)
{
    CT_REAL(ncclReduceScatter);
    CT_TRACE_BLOCKING(CT_API_ncclReduceScatter, ncclResult_t, MISSING,
                      record_transfer(&ev, TRANSFER(sendbuff, recvbuff, recvcount, datatype, op, -1,
                                                    comm, stream)),
                      real(sendbuff, recvbuff, recvcount, datatype, op, comm, stream), (void)0);
}

CT_EXPORT ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    CT_REAL(ncclAlltoAll);
    CT_TRACE_BLOCKING(
        CT_API_ncclAlltoAll, ncclResult_t, MISSING,
        record_transfer(&ev, TRANSFER(sendbuff, recvbuff, count, datatype, -1, -1, comm, stream)),
        real(sendbuff, recvbuff, count, datatype, comm, stream), (void)0);
}

CT_EXPORT ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream)
{
    CT_REAL(ncclGather);
    CT_TRACE_BLOCKING(
        CT_API_ncclGather, ncclResult_t, MISSING,
        record_transfer(&ev, TRANSFER(sendbuff, recvbuff, count, datatype, -1, root, comm, stream)),
        real(sendbuff, recvbuff, count, datatype, root, comm, stream), (void)0);
}

CT_EXPORT ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream)
{
    CT_REAL(ncclScatter);
    CT_TRACE_BLOCKING(
        CT_API_ncclScatter, ncclResult_t, MISSING,
        record_transfer(&ev, TRANSFER(sendbuff, recvbuff, count, datatype, -1, root, comm, stream)),
        real(sendbuff, recvbuff, count, datatype, root, comm, stream), (void)0);
}

CT_EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                                int peer, ncclComm_t comm, cudaStream_t stream)
{
    CT_REAL(ncclSend);
    CT_TRACE_BLOCKING(
        CT_API_ncclSend, ncclResult_t, MISSING,
        record_transfer(&ev, TRANSFER(sendbuff, NULL, count, datatype, -1, peer, comm, stream)),
        real(sendbuff, count, datatype, peer, comm, stream), (void)0);
}

CT_EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t stream)
{
    CT_REAL(ncclRecv);
    CT_TRACE_BLOCKING(
        CT_API_ncclRecv, ncclResult_t, MISSING,
        record_transfer(&ev, TRANSFER(NULL, recvbuff, count, datatype, -1, peer, comm, stream)),
        real(recvbuff, count, datatype, peer, comm, stream), (void)0);
}

/* ---- groups ------------------------------------------------------------------ */

/* nccl.h declares these with an empty, unprototyped parameter list. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

CT_EXPORT ncclResult_t ncclGroupStart(void)
{
    CT_REAL(ncclGroupStart);
    CT_TRACE(CT_API_ncclGroupStart, ncclResult_t, MISSING, real(), {
        ev.rec.arg[6] = (uint64_t)group_depth;
        if (rc == ncclSuccess)
            group_depth++;
    });
}

CT_EXPORT ncclResult_t ncclGroupEnd(void)
{
    CT_REAL(ncclGroupEnd);
    CT_TRACE_BLOCKING(CT_API_ncclGroupEnd, ncclResult_t, MISSING,
                      ev.rec.arg[6] = (uint64_t)group_depth, real(), {
                          /* NCCL closes the group even when launching its operations failed. */
                          if (group_depth > 0 && rc != ncclInvalidUsage)
                              group_depth--;
                      });
}

/* ---- NCCL's own memory and registrations -------------------------------------- */

CT_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    CT_REAL(ncclMemAlloc);
    CT_TRACE(CT_API_ncclMemAlloc, ncclResult_t, MISSING, real(ptr, size), {
        ev.rec.size = size;
        ev.rec.ptr = (rc == ncclSuccess && ptr) ? ct_addr(*ptr) : 0;
    });
}

CT_EXPORT ncclResult_t ncclMemFree(void *ptr)
{
    CT_REAL(ncclMemFree);
    CT_TRACE(CT_API_ncclMemFree, ncclResult_t, MISSING, real(ptr), ev.rec.ptr = ct_addr(ptr));
}

CT_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                        void **handle)
{
    CT_REAL(ncclCommRegister);
    CT_TRACE(CT_API_ncclCommRegister, ncclResult_t, MISSING, real(comm, buff, size, handle), {
        ev.rec.arg[0] = ct_addr(comm);
        ev.rec.ptr = ct_addr(buff);
        ev.rec.size = size;
        ev.rec.arg[1] = (rc == ncclSuccess && handle) ? ct_addr(*handle) : 0;
    });
}

CT_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    CT_REAL(ncclCommDeregister);
    CT_TRACE(CT_API_ncclCommDeregister, ncclResult_t, MISSING, real(comm, handle), {
        ev.rec.arg[0] = ct_addr(comm);
        ev.rec.arg[1] = ct_addr(handle);
    });
}

CT_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                              ncclWindow_t *win, int winFlags)
{
    CT_REAL(ncclCommWindowRegister);
    CT_TRACE(CT_API_ncclCommWindowRegister, ncclResult_t, MISSING,
             real(comm, buff, size, win, winFlags), {
                 ev.rec.arg[0] = ct_addr(comm);
                 ev.rec.ptr = ct_addr(buff);
                 ev.rec.size = size;
                 ev.rec.flags = (uint64_t)(int64_t)winFlags;
                 ev.rec.arg[1] = (rc == ncclSuccess && win) ? ct_addr(*win) : 0;
             });
}

CT_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    CT_REAL(ncclCommWindowDeregister);
    CT_TRACE(CT_API_ncclCommWindowDeregister, ncclResult_t, MISSING, real(comm, win), {
        ev.rec.arg[0] = ct_addr(comm);
        ev.rec.arg[1] = ct_addr(win);
    });
}
