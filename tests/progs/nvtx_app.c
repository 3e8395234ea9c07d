/*
 * nvtx_app.c - a program on the fake stack that uses NVTX the ways
 * programs do (test_nvtx.c): a pushed range around its allocations
 * ("load_weights", measured before and after), marks, a start/end range, wide and registered
 * messages, a domain "NCCL" whose ranges carry NCCL's extended payload
 * (communicator hash, bytes), and two shared objects that each initialise
 * NVTX on their own. It prints what NVTX returned to it, so that a test
 * can compare a traced run with an untraced one and a chained tool's.
 */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int nvtx_a_entry(void);
int nvtx_b_entry(void);

/* NCCL's collective payload: the communicator hash, then the bytes. */
struct coll_params {
    uint64_t comm;
    size_t bytes;
    int op;
};

/* Attributes with a registered message, the rest empty. */
static nvtxEventAttributes_t registered(nvtxStringHandle_t name)
{
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = name;
    return a;
}

static void nccl_like_range(nvtxDomainHandle_t nccl, nvtxStringHandle_t name)
{
    struct coll_params p = {0x1234abcdull, 4096, 0};
    nvtxPayloadData_t data[] = {{NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 5, sizeof p, &p}};
    nvtxEventAttributes_t a = registered(name);
    a.payloadType = NVTX_PAYLOAD_TYPE_EXT;
    a.reserved0 = 1;
    a.payload.ullValue = (uint64_t)(uintptr_t)data;
    printf("nccl push %d\n", nvtxDomainRangePushEx(nccl, &a));
    printf("nccl pop %d\n", nvtxDomainRangePop(nccl));
}

/* More domains and registered strings than cutrace keeps (docs/nvtx.md):
 * every call still works, the last ones share the overflow names. */
static int many(void)
{
    nvtxDomainHandle_t last = NULL;
    char name[32];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "domain %d", i);
        last = nvtxDomainCreateA(name);
    }
    nvtxStringHandle_t s = NULL;
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "string %d", i);
        s = nvtxDomainRegisterStringA(last, name);
    }
    nvtxEventAttributes_t a = registered(s);
    nvtxDomainMarkEx(last, &a);
    printf("many done\n");
    return 0;
}

#define THREADS 4
#define ROUNDS  1000

/* Nested ranges on each thread at once: each thread's levels are its own. */
static void *ranges(void *arg)
{
    intptr_t wrong = 0;
    for (int i = 0; i < ROUNDS; i++) {
        wrong += nvtxRangePushA((const char *)arg) != 0;
        wrong += nvtxRangePushA("inner") != 1;
        wrong += nvtxRangePop() != 1;
        wrong += nvtxRangePop() != 0;
    }
    return (void *)wrong;
}

static int threads(void)
{
    static const char *names[THREADS] = {"t0", "t1", "t2", "t3"};
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, ranges, (void *)names[i]) != 0)
            return 1;
    intptr_t wrong = 0;
    for (int i = 0; i < THREADS; i++) {
        void *w;
        pthread_join(t[i], &w);
        wrong += (intptr_t)w;
    }
    printf("threads wrong levels %ld\n", (long)wrong);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "threads") == 0)
        return threads();
    if (argc > 1 && strcmp(argv[1], "many") == 0)
        return many();
    void *weights = NULL, *scratch = NULL;
    size_t free_bytes, total_bytes;
    /* Measured around the phase it names: `cutrace budget`'s pre and post. */
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
        return 1;
    printf("push %d\n", nvtxRangePushA("load_weights"));
    if (cudaMalloc(&weights, 1 << 20) != cudaSuccess)
        return 1;
    printf("pop %d\n", nvtxRangePop());
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
        return 1;
    nvtxMarkA("weights ready");

    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xff00ff00u;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "warmup";
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = 7;
    nvtxRangeId_t id = nvtxRangeStartEx(&a);
    if (cudaMalloc(&scratch, 1 << 16) != cudaSuccess)
        return 1;
    cudaFree(scratch);
    nvtxRangeEnd(id);

    printf("wide push %d\n", nvtxRangePushW(L"d\u00e9codage"));
    printf("wide pop %d\n", nvtxRangePop());
    printf("extra pop %d\n", nvtxRangePop());

    nvtxDomainHandle_t nccl = nvtxDomainCreateA("NCCL");
    /* Not recorded; a chained tool still gets them. */
    nvtxNameOsThreadA(1, "main");
    nvtxDomainNameCategoryA(nccl, 1, "collectives");
    /* An extension module (payload schemas): a chained tool's to initialise. */
    nvtxPayloadSchemaAttr_t schema;
    memset(&schema, 0, sizeof schema);
    printf("schema %llu\n", (unsigned long long)nvtxPayloadSchemaRegister(nccl, &schema));
    nvtxStringHandle_t name = nvtxDomainRegisterStringA(nccl, "ncclAllReduce");
    nccl_like_range(nccl, name);

    printf("a %d\n", nvtx_a_entry());
    printf("b %d\n", nvtx_b_entry());
    cudaFree(weights);
    return 0;
}
