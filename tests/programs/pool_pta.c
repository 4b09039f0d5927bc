/*
 * PTA producer scenario (abi.md §7): torch_npu's caching allocator
 * (domain "ptaCaching") and workspace allocator (domain "ptaWorkspace")
 * over memory from the HAL stand-in. Device = argv[1] (default 0). Prints
 * nothing; exits 0, or 1 with a message on stderr.
 *
 * Fixed script (MiB = 1048576 bytes; "allocated" = live region bytes):
 *   HAL   base  = halMemAlloc(1 GiB,  RUNTIME|DEVICE|giant page|dev)
 *   HAL   wbase = halMemAlloc(64 MiB, RUNTIME|DEVICE|huge page|dev)
 *   1. caching   HeapRegister  {dev, base, 1 GiB}
 *   2. workspace HeapRegister  {dev, wbase, 64 MiB}
 *   3. caching   RegionsRegister, 3 regions:
 *        base+0 (1 MiB), base+1MiB (2 MiB), base+3MiB (4 MiB)  -> allocated 7 MiB
 *   4. caching   RegionsRegister, 2 regions:
 *        base+8MiB (8 MiB), base+16MiB (16 MiB)                -> allocated 31 MiB
 *   5. workspace RegionsRegister, 1 region: wbase (32 MiB)     -> ws allocated 32 MiB
 *   6. workspace RegionsUnregister, POINTER wbase              -> ws allocated 0
 *   7. caching   RegionsUnregister, POINTER base+1MiB, base+8MiB -> allocated 21 MiB
 *   8. caching   RegionsUnregister, POINTER base+0, base+3MiB, base+16MiB -> 0
 *   9. workspace HeapUnregister(wheap); caching HeapUnregister(heap)
 *   HAL   halMemFree(wbase); halMemFree(base)
 * Totals: 5 caching regions (31 MiB) + 1 workspace region (32 MiB), all
 * freed; 2 heaps, both unregistered; 2 HAL blocks, both freed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mstx_api.h"
#include "sim_hal_dl.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static mstxMemVirtualRangeDesc_t range(uint32_t dev, void *p, uint64_t size)
{
    mstxMemVirtualRangeDesc_t r = {dev, p, size};
    return r;
}

static void unregister_ptrs(mstxDomainHandle_t d, void *const *ptrs, size_t n)
{
    mstxMemRegionRef_t refs[8];
    for (size_t i = 0; i < n; i++) {
        refs[i].refType = MSTX_MEM_REGION_REF_TYPE_POINTER;
        refs[i].pointer = ptrs[i];
    }
    mstxMemRegionsUnregisterBatch_t b = {n, refs};
    mstxMemRegionsUnregister(d, &b);
}

int main(int argc, char **argv)
{
    uint32_t dev = argc > 1 ? (uint32_t)atoi(argv[1]) : 0;
    struct sim_hal hal;
    if (sim_hal_open(&hal) != 0)
        return 1;

    mstxDomainHandle_t caching = mstxDomainCreateA("ptaCaching");
    mstxDomainHandle_t workspace = mstxDomainCreateA("ptaWorkspace");

    void *base = NULL, *wbase = NULL;
    if (hal.alloc(&base, GiB, SIM_HAL_FLAG(SIM_MODULE_RUNTIME, SIM_MEMTYPE_DEVICE,
                                           SIM_FLAG_GIANT_PAGE, dev)) != DRV_ERROR_NONE ||
        hal.alloc(&wbase, 64 * MiB, SIM_HAL_FLAG(SIM_MODULE_RUNTIME, SIM_MEMTYPE_DEVICE,
                                                 SIM_FLAG_HUGE_PAGE, dev)) != DRV_ERROR_NONE) {
        fprintf(stderr, "pool_pta: halMemAlloc failed\n");
        return 1;
    }
    char *b = base;

    mstxMemVirtualRangeDesc_t heap_range = range(dev, base, GiB);
    mstxMemHeapDesc_t heap_desc = {MSTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR,
                                   MSTX_MEM_TYPE_VIRTUAL_ADDRESS, &heap_range};
    mstxMemHeapHandle_t heap = mstxMemHeapRegister(caching, &heap_desc);

    mstxMemVirtualRangeDesc_t wheap_range = range(dev, wbase, 64 * MiB);
    mstxMemHeapDesc_t wheap_desc = {MSTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR,
                                    MSTX_MEM_TYPE_VIRTUAL_ADDRESS, &wheap_range};
    mstxMemHeapHandle_t wheap = mstxMemHeapRegister(workspace, &wheap_desc);

    mstxMemVirtualRangeDesc_t batch_a[3] = {range(dev, b, 1 * MiB),
                                            range(dev, b + 1 * MiB, 2 * MiB),
                                            range(dev, b + 3 * MiB, 4 * MiB)};
    mstxMemRegionsRegisterBatch_t reg_a = {heap, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 3, batch_a, NULL};
    mstxMemRegionsRegister(caching, &reg_a);

    mstxMemVirtualRangeDesc_t batch_b[2] = {range(dev, b + 8 * MiB, 8 * MiB),
                                            range(dev, b + 16 * MiB, 16 * MiB)};
    mstxMemRegionsRegisterBatch_t reg_b = {heap, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 2, batch_b, NULL};
    mstxMemRegionsRegister(caching, &reg_b);

    mstxMemVirtualRangeDesc_t ws[1] = {range(dev, wbase, 32 * MiB)};
    mstxMemRegionsRegisterBatch_t reg_ws = {wheap, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 1, ws, NULL};
    mstxMemRegionsRegister(workspace, &reg_ws);

    void *free_ws[1] = {wbase};
    unregister_ptrs(workspace, free_ws, 1);
    void *free_1[2] = {b + 1 * MiB, b + 8 * MiB};
    unregister_ptrs(caching, free_1, 2);
    void *free_2[3] = {b, b + 3 * MiB, b + 16 * MiB};
    unregister_ptrs(caching, free_2, 3);

    mstxMemHeapUnregister(workspace, wheap);
    mstxMemHeapUnregister(caching, heap);

    if (hal.free(wbase) != DRV_ERROR_NONE || hal.free(base) != DRV_ERROR_NONE) {
        fprintf(stderr, "pool_pta: halMemFree failed\n");
        return 1;
    }
    return 0;
}
