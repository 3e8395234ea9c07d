/*
 * torch_cuda.c - libtorch_cuda.so of the fake torch package: the glue real
 * torch keeps in libtorch_cuda.so that the package's Python needs: streams,
 * copies, kernel launches (which the fake stack does not run), CUDA graph
 * capture and replay, and ProcessGroupNCCL's communicator and collectives.
 * It links libcudart and libnccl, so /proc/self/maps shows both as under real
 * torch. Called through ctypes (the GIL is released during each call).
 *
 * Every function returns 0, a cudaError_t, or (tc_nccl_*) an ncclResult_t.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

int tc_stream_create(uint64_t *stream);
int tc_stream_destroy(uint64_t stream);
int tc_stream_synchronize(uint64_t stream);
int tc_stream_wait(uint64_t waiter, uint64_t other);
int tc_device_synchronize(void);
int tc_memcpy(uint64_t dst, uint64_t src, size_t bytes, int kind);
int tc_launch(uint64_t ptr, size_t bytes, uint64_t stream);
uint64_t tc_launch_count(void);
int tc_is_capturing(uint64_t stream, int *capturing);
int tc_capture_begin(uint64_t stream, int mode);
int tc_capture_end(uint64_t stream, uint64_t *graph, uint64_t *exec);
int tc_graph_launch(uint64_t exec, uint64_t stream);
int tc_graph_destroy(uint64_t graph, uint64_t exec);
int tc_nccl_version(int *version);
int tc_nccl_unique_id(unsigned char *id);
int tc_nccl_init(int nranks, const unsigned char *id, int rank, int device, uint64_t *comm);
int tc_nccl_all_reduce(uint64_t comm, uint64_t sendbuf, uint64_t recvbuf, size_t count,
                       int datatype, int op, uint64_t stream);
int tc_nccl_destroy(uint64_t comm);
const char *tc_cuda_error_string(int error);
const char *tc_nccl_error_string(int error);

static _Atomic uint64_t g_launches;

static cudaStream_t S(uint64_t s)
{
    return (cudaStream_t)(uintptr_t)s;
}

/* torch's stream pool makes non-blocking streams. */
int tc_stream_create(uint64_t *stream)
{
    cudaStream_t s = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    *stream = (uint64_t)(uintptr_t)s;
    return e;
}

int tc_stream_destroy(uint64_t stream)
{
    return cudaStreamDestroy(S(stream));
}

int tc_stream_synchronize(uint64_t stream)
{
    return cudaStreamSynchronize(S(stream));
}

int tc_is_capturing(uint64_t stream, int *capturing)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(S(stream), &st);
    *capturing = st == cudaStreamCaptureStatusActive;
    return e;
}

/*
 * Stream.wait_stream: real torch records an event on `other` and makes
 * `waiter` wait for it. The fake runtime has no events and runs nothing, so
 * the wait is a synchronisation of `other` (skipped while it captures, which
 * a synchronisation would invalidate).
 */
int tc_stream_wait(uint64_t waiter, uint64_t other)
{
    (void)waiter;
    int capturing = 0;
    cudaError_t e = (cudaError_t)tc_is_capturing(other, &capturing);
    if (e != cudaSuccess || capturing)
        return e;
    return cudaStreamSynchronize(S(other));
}

int tc_device_synchronize(void)
{
    return cudaDeviceSynchronize();
}

int tc_memcpy(uint64_t dst, uint64_t src, size_t bytes, int kind)
{
    if (bytes == 0)
        return 0;
    return cudaMemcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes,
                      (enum cudaMemcpyKind)kind);
}

/*
 * A kernel launch on `stream` over [ptr, ptr+bytes). The fake stack runs no
 * kernels, so nothing reaches the runtime: the launch is counted, and the
 * package computes the values on its host mirrors.
 */
int tc_launch(uint64_t ptr, size_t bytes, uint64_t stream)
{
    (void)ptr;
    (void)bytes;
    (void)stream;
    atomic_fetch_add(&g_launches, 1);
    return 0;
}

uint64_t tc_launch_count(void)
{
    return atomic_load(&g_launches);
}

/* mode: cudaStreamCaptureModeGlobal (0), ThreadLocal (1), Relaxed (2). */
int tc_capture_begin(uint64_t stream, int mode)
{
    return cudaStreamBeginCapture(S(stream), (enum cudaStreamCaptureMode)mode);
}

int tc_capture_end(uint64_t stream, uint64_t *graph, uint64_t *exec)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaError_t e = cudaStreamEndCapture(S(stream), &g);
    if (e == cudaSuccess) {
        e = cudaGraphInstantiateWithFlags(&x, g, 0);
        if (e != cudaSuccess) {
            cudaGraphDestroy(g);
            g = NULL;
        }
    }
    *graph = (uint64_t)(uintptr_t)g;
    *exec = (uint64_t)(uintptr_t)x;
    return e;
}

int tc_graph_launch(uint64_t exec, uint64_t stream)
{
    return cudaGraphLaunch((cudaGraphExec_t)(uintptr_t)exec, S(stream));
}

int tc_graph_destroy(uint64_t graph, uint64_t exec)
{
    cudaError_t e = cudaSuccess;
    if (exec)
        e = cudaGraphExecDestroy((cudaGraphExec_t)(uintptr_t)exec);
    if (graph) {
        cudaError_t e2 = cudaGraphDestroy((cudaGraph_t)(uintptr_t)graph);
        if (e == cudaSuccess)
            e = e2;
    }
    return e;
}

int tc_nccl_version(int *version)
{
    return ncclGetVersion(version);
}

int tc_nccl_unique_id(unsigned char *id)
{
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r == ncclSuccess)
        memcpy(id, u.internal, sizeof u.internal);
    return r;
}

/* ProcessGroupNCCL's communicator: on `device`, made current first. */
int tc_nccl_init(int nranks, const unsigned char *id, int rank, int device, uint64_t *comm)
{
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return ncclUnhandledCudaError;
    ncclUniqueId u;
    memcpy(u.internal, id, sizeof u.internal);
    ncclComm_t c = NULL;
    ncclResult_t r = ncclCommInitRank(&c, nranks, u, rank);
    *comm = (uint64_t)(uintptr_t)c;
    return r;
}

int tc_nccl_all_reduce(uint64_t comm, uint64_t sendbuf, uint64_t recvbuf, size_t count,
                       int datatype, int op, uint64_t stream)
{
    return ncclAllReduce((const void *)(uintptr_t)sendbuf, (void *)(uintptr_t)recvbuf, count,
                         (ncclDataType_t)datatype, (ncclRedOp_t)op, (ncclComm_t)(uintptr_t)comm,
                         S(stream));
}

/* destroy_process_group: finalize, then destroy, as ProcessGroupNCCL's shutdown does. */
int tc_nccl_destroy(uint64_t comm)
{
    ncclComm_t c = (ncclComm_t)(uintptr_t)comm;
    ncclResult_t r = ncclCommFinalize(c);
    ncclResult_t r2 = ncclCommDestroy(c);
    return r != ncclSuccess ? r : r2;
}

const char *tc_cuda_error_string(int error)
{
    return cudaGetErrorString((cudaError_t)error);
}

const char *tc_nccl_error_string(int error)
{
    return ncclGetErrorString((ncclResult_t)error);
}
