/*
 * Out-of-memory capture (behaviour spec §9.10, §10.6). Run with
 * SIM_NPU_HBM_LIMIT=67108864 (64 MiB on every device). Device 0.
 *
 *   aclInit; aclrtSetDevice(0)       (so aclrtGetMemInfo reports device 0)
 *   HAL a1 = 1 MiB RUNTIME, a2 = 4 MiB HCCL, a3 = 2 MiB APP
 *   HAL base = 32 MiB RUNTIME; ptaCaching HeapRegister {0, base, 32 MiB}
 *   ptaCaching RegionsRegister: base (8 MiB), base+8MiB (1 MiB), base+16MiB (3 MiB)
 *   halMemFree(a3)                   -> live HAL 37 MiB, PTA used 12 of 32 MiB
 *   rc1 = halMemAlloc(1 GiB)         -> 6 (DRV_ERROR_OUT_OF_MEMORY)
 *   rc2 = halMemCreate(1 GiB, dev 0) -> 6, less than 2 s after the first
 *   then everything is given back.
 * Prints "oom <rc1> <rc2>"; exits 0 when both are 6.
 */
#include <stdint.h>
#include <stdio.h>

#include "mstx_api.h"
#include "sim_npu.h"

#define MiB (1ULL << 20)

aclError aclInit(const char *configPath);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclFinalize(void);

static void *hal(uint64_t module, uint64_t size)
{
    void *p = NULL;
    if (halMemAlloc(&p, size, SIM_HAL_FLAG(module, SIM_MEMTYPE_DEVICE, 0, 0)) != 0) {
        fprintf(stderr, "halMemAlloc(%llu) failed\n", (unsigned long long)size);
        return NULL;
    }
    return p;
}

int main(void)
{
    if (aclInit(NULL) != 0 || aclrtSetDevice(0) != 0)
        return 1;
    void *a1 = hal(7, MiB), *a2 = hal(3, 4 * MiB), *a3 = hal(33, 2 * MiB);
    char *base = hal(7, 32 * MiB);
    if (!a1 || !a2 || !a3 || !base)
        return 1;
    mstxDomainHandle_t d = mstxDomainCreateA("ptaCaching");
    mstxMemVirtualRangeDesc_t heap_range = {0, base, 32 * MiB};
    mstxMemHeapDesc_t hd = {MSTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, MSTX_MEM_TYPE_VIRTUAL_ADDRESS,
                            &heap_range};
    mstxMemHeapHandle_t heap = mstxMemHeapRegister(d, &hd);
    mstxMemVirtualRangeDesc_t r[3] = {
        {0, base, 8 * MiB}, {0, base + 8 * MiB, MiB}, {0, base + 16 * MiB, 3 * MiB}};
    mstxMemRegionsRegisterBatch_t rb = {heap, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 3, r, NULL};
    mstxMemRegionsRegister(d, &rb);
    halMemFree(a3);

    void *big = NULL;
    int rc1 = halMemAlloc(&big, 1ULL << 30, SIM_HAL_FLAG(7, SIM_MEMTYPE_DEVICE, 0, 0));
    struct drv_mem_prop prop = {0};
    drv_mem_handle_t *h = NULL;
    int rc2 = halMemCreate(&h, 1ULL << 30, &prop, 0);
    printf("oom %d %d\n", rc1, rc2);

    mstxMemRegionRef_t refs[3];
    for (int i = 0; i < 3; i++) {
        refs[i].refType = MSTX_MEM_REGION_REF_TYPE_POINTER;
        refs[i].pointer = r[i].ptr;
    }
    mstxMemRegionsUnregisterBatch_t ub = {3, refs};
    mstxMemRegionsUnregister(d, &ub);
    mstxMemHeapUnregister(d, heap);
    halMemFree(base);
    halMemFree(a2);
    halMemFree(a1);
    aclFinalize();
    return (rc1 == DRV_ERROR_OUT_OF_MEMORY && rc2 == DRV_ERROR_OUT_OF_MEMORY) ? 0 : 1;
}
