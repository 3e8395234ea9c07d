/*
 * device.c - current-device tracking and device identity.
 *
 * Driver entry points are typed with local typedefs that mirror cuda.h's
 * ABI (int handles and plain pointers) so this file does not depend on one
 * CUDA version's header; the writer only calls functions whose signatures
 * have been stable since CUDA 4 (cuDeviceGetUuid_v2 since 11.4, with a
 * fallback).
 */
#include "device.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "resolve.h"
#include "thread.h"

typedef int (*get_device_fn)(int *);

static get_device_fn runtime_get_device; /* cached, resolved once */
static int runtime_get_device_missing;

static get_device_fn resolve_get_device(void)
{
    get_device_fn fn = __atomic_load_n(&runtime_get_device, __ATOMIC_ACQUIRE);
    if (fn || __atomic_load_n(&runtime_get_device_missing, __ATOMIC_RELAXED))
        return fn;
    fn = (get_device_fn)ct_resolve(CT_LIB_CUDART, "cudaGetDevice");
    if (fn)
        __atomic_store_n(&runtime_get_device, fn, __ATOMIC_RELEASE);
    else
        __atomic_store_n(&runtime_get_device_missing, 1, __ATOMIC_RELAXED);
    return fn;
}

int ct_device_current(bool cuda_is_up)
{
    if (ct_self.device_known)
        return ct_self.device;
    if (!cuda_is_up)
        return -1;
    get_device_fn get = resolve_get_device();
    int dev = -1;
    if (get && get(&dev) == 0 && dev >= 0) {
        ct_self.device = dev;
        ct_self.device_known = true;
        return dev;
    }
    return -1;
}

typedef int (*ctx_get_device_fn)(int *);

int ct_device_of_context(void)
{
    static ctx_get_device_fn get;
    static int missing;
    ctx_get_device_fn fn = __atomic_load_n(&get, __ATOMIC_ACQUIRE);
    if (!fn && !__atomic_load_n(&missing, __ATOMIC_RELAXED)) {
        fn = (ctx_get_device_fn)ct_resolve_loaded(CT_LIB_CUDA, "cuCtxGetDevice");
        if (fn)
            __atomic_store_n(&get, fn, __ATOMIC_RELEASE);
        else
            __atomic_store_n(&missing, 1, __ATOMIC_RELAXED);
    }
    int dev = -1;
    if (!fn || fn(&dev) != 0)
        return -1;
    return dev;
}

void ct_device_note(int device)
{
    ct_self.device = device;
    ct_self.device_known = true;
}

void ct_device_forget(void)
{
    ct_self.device_known = false;
}

/* Driver ABI: CUdevice is an int; CUresult an int; CUuuid 16 bytes. */
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_device_get_uuid_fn)(unsigned char *, int);
typedef int (*cu_device_get_pci_fn)(char *, int, int);
typedef int (*cu_device_get_name_fn)(char *, int, int);
typedef int (*cu_device_total_mem_fn)(size_t *, int);

static void format_uuid(const unsigned char u[16], char *out, size_t cap)
{
    snprintf(out, cap, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

bool ct_device_describe(int device, struct ct_device_info *out)
{
    memset(out, 0, sizeof *out);
    out->device = device;
    cu_device_get_fn get = (cu_device_get_fn)ct_resolve_loaded(CT_LIB_CUDA, "cuDeviceGet");
    if (!get)
        return false;
    int cudev = -1;
    if (get(&cudev, device) != 0)
        return false;

    cu_device_get_uuid_fn get_uuid =
        (cu_device_get_uuid_fn)ct_resolve_loaded(CT_LIB_CUDA, "cuDeviceGetUuid_v2");
    if (!get_uuid)
        get_uuid = (cu_device_get_uuid_fn)ct_resolve_loaded(CT_LIB_CUDA, "cuDeviceGetUuid");
    unsigned char uuid[16];
    if (get_uuid && get_uuid(uuid, cudev) == 0)
        format_uuid(uuid, out->uuid, sizeof out->uuid);

    cu_device_get_pci_fn get_pci =
        (cu_device_get_pci_fn)ct_resolve_loaded(CT_LIB_CUDA, "cuDeviceGetPCIBusId");
    if (get_pci && get_pci(out->pci_bus_id, (int)sizeof out->pci_bus_id, cudev) != 0)
        out->pci_bus_id[0] = '\0';

    cu_device_get_name_fn get_name =
        (cu_device_get_name_fn)ct_resolve_loaded(CT_LIB_CUDA, "cuDeviceGetName");
    if (get_name && get_name(out->name, (int)sizeof out->name, cudev) != 0)
        out->name[0] = '\0';

    cu_device_total_mem_fn total =
        (cu_device_total_mem_fn)ct_resolve_loaded(CT_LIB_CUDA, "cuDeviceTotalMem_v2");
    size_t bytes = 0;
    if (total && total(&bytes, cudev) == 0)
        out->total_bytes = bytes;
    return true;
}
