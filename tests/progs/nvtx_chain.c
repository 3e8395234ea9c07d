/*
 * nvtx_chain.c - libnvtx_chain.so, a second NVTX injection library, as
 * Nsight Systems' would be (test_nvtx.c): it counts the callbacks it gets
 * and checks that the domain and string handles it is given are the ones
 * it handed out, and writes its counts to $NVTX_CHAIN_OUT at exit.
 */
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pushes, pops, marks, starts, ends, domains, strings, inits, bad_handles, payloads, names,
    extensions;
static int domain_token, string_token; /* our handles point at these */

static void NVTX_API mark_a(const char *m)
{
    (void)m;
    marks++;
}
static int NVTX_API push_a(const char *m)
{
    (void)m;
    return pushes++;
}
static int NVTX_API push_w(const wchar_t *m)
{
    (void)m;
    return pushes++;
}
static int NVTX_API pop(void)
{
    return pops++;
}
static nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t *a)
{
    (void)a;
    starts++;
    return 1000 + (nvtxRangeId_t)starts;
}
static void NVTX_API end(nvtxRangeId_t id)
{
    if (id != 1000 + (nvtxRangeId_t)starts)
        bad_handles++;
    ends++;
}
static nvtxDomainHandle_t NVTX_API domain_create_a(const char *name)
{
    (void)name;
    domains++;
    return (nvtxDomainHandle_t)&domain_token;
}
static nvtxStringHandle_t NVTX_API register_a(nvtxDomainHandle_t d, const char *s)
{
    (void)s;
    if (d != (nvtxDomainHandle_t)&domain_token)
        bad_handles++;
    strings++;
    return (nvtxStringHandle_t)&string_token;
}
static int NVTX_API domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    if (d != (nvtxDomainHandle_t)&domain_token || a->messageType != NVTX_MESSAGE_TYPE_REGISTERED ||
        a->message.registered != (nvtxStringHandle_t)&string_token)
        bad_handles++;
    payloads += a->payloadType != 0;
    return pushes++;
}
static int NVTX_API domain_pop(nvtxDomainHandle_t d)
{
    if (d != (nvtxDomainHandle_t)&domain_token)
        bad_handles++;
    return pops++;
}

static void NVTX_API name_thread_a(uint32_t tid, const char *name)
{
    (void)tid;
    (void)name;
    names++;
}
static void NVTX_API name_category_a(nvtxDomainHandle_t d, uint32_t category, const char *name)
{
    (void)category;
    (void)name;
    if (d != (nvtxDomainHandle_t)&domain_token)
        bad_handles++;
    names++;
}

static void report(void)
{
    const char *path = getenv("NVTX_CHAIN_OUT");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f)
        return;
    fprintf(f,
            "inits=%d pushes=%d pops=%d marks=%d starts=%d ends=%d domains=%d strings=%d "
            "payloads=%d names=%d extensions=%d bad=%d\n",
            inits, pushes, pops, marks, starts, ends, domains, strings, payloads, names, extensions,
            bad_handles);
    fclose(f);
}

static void set(NvtxFunctionTable t, unsigned size, unsigned id, NvtxFunctionPointer fn)
{
    if (id <= size && t[id])
        *t[id] = fn;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    const NvtxExportTableCallbacks *etc =
        (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable core, core2;
    unsigned core_size, core2_size;
    if (!etc->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) ||
        !etc->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size))
        return 0;
    set(core, core_size, NVTX_CBID_CORE_MarkA, (NvtxFunctionPointer)mark_a);
    set(core, core_size, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)push_a);
    set(core, core_size, NVTX_CBID_CORE_RangePushW, (NvtxFunctionPointer)push_w);
    set(core, core_size, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)pop);
    set(core, core_size, NVTX_CBID_CORE_RangeStartEx, (NvtxFunctionPointer)start_ex);
    set(core, core_size, NVTX_CBID_CORE_RangeEnd, (NvtxFunctionPointer)end);
    set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)domain_create_a);
    set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, (NvtxFunctionPointer)register_a);
    set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)domain_push);
    set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)domain_pop);
    set(core, core_size, NVTX_CBID_CORE_NameOsThreadA, (NvtxFunctionPointer)name_thread_a);
    set(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryA,
        (NvtxFunctionPointer)name_category_a);
    if (inits++ == 0)
        atexit(report);
    return 1;
}

/* NVTX's extension modules: counted, their slots left empty (no-ops). */
int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info);
int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info)
{
    extensions += info != NULL;
    return 1;
}
