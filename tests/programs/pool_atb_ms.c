/*
 * ATB and MindSpore pool producers (abi.md §1.6, §7) over memory from the
 * HAL stand-in. Device = argv[1] (default 0). Prints nothing; exits 0, or
 * 1 with a message on stderr.
 *
 * ATB (domain "atb"; regions are unregistered by HANDLE, using the handles
 * the tool wrote to regionHandleArrayOut; without a tool they stay NULL):
 *   HAL   abase = halMemAlloc(256 MiB, RUNTIME|DEVICE|huge page|dev)
 *   1. HeapRegister {dev, abase, 256 MiB} -> aheap
 *   2. RegionsRegister(heap=aheap), 2 regions, out h[0], h[1]:
 *        abase (1 MiB), abase+1MiB (3 MiB)                    -> allocated 4 MiB
 *   3. RegionsRegister(heap=aheap), 1 region, out h[2]:
 *        abase+4MiB (4 MiB)                                   -> allocated 8 MiB
 *   4. RegionsUnregister HANDLE h[0], HANDLE h[2]             -> allocated 3 MiB
 *   5. RegionsUnregister HANDLE h[1]                          -> allocated 0
 *   6. HeapUnregister(aheap); HAL halMemFree(abase)
 *
 * MindSpore (domain "mindsporeMemPool"; unregister by POINTER):
 *   HAL   mbase = halMemAlloc(128 MiB, RUNTIME|DEVICE|huge page|dev)
 *   1. HeapRegister {dev, mbase, 128 MiB} -> mheap
 *   2. RegionsRegister(heap=mheap), 2 regions, no handle array:
 *        mbase (2 MiB), mbase+2MiB (6 MiB)                    -> allocated 8 MiB
 *   3. RegionsUnregister POINTER mbase+2MiB                   -> allocated 2 MiB
 *   4. RegionsUnregister POINTER mbase                        -> allocated 0
 *   5. HeapUnregister(mheap); HAL halMemFree(mbase)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mstx_api.h"
#include "sim_hal_dl.h"

#define MiB (1ULL << 20)

static mstxMemHeapHandle_t heap_register(mstxDomainHandle_t d, uint32_t dev, void *p,
                                         uint64_t size)
{
    mstxMemVirtualRangeDesc_t r = {dev, p, size};
    mstxMemHeapDesc_t desc = {MSTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR,
                              MSTX_MEM_TYPE_VIRTUAL_ADDRESS, &r};
    return mstxMemHeapRegister(d, &desc);
}

static void unregister_one(mstxDomainHandle_t d, mstxMemRegionRefType type, const void *ref)
{
    mstxMemRegionRef_t r;
    r.refType = type;
    r.pointer = ref;   /* same storage as .handle */
    mstxMemRegionsUnregisterBatch_t b = {1, &r};
    mstxMemRegionsUnregister(d, &b);
}

static int atb_producer(struct sim_hal *hal, uint32_t dev)
{
    void *abase = NULL;
    if (hal->alloc(&abase, 256 * MiB, SIM_HAL_FLAG(SIM_MODULE_RUNTIME, SIM_MEMTYPE_DEVICE,
                                                   SIM_FLAG_HUGE_PAGE, dev)) != DRV_ERROR_NONE)
        return -1;
    char *a = abase;
    mstxDomainHandle_t atb = mstxDomainCreateA("atb");
    mstxMemHeapHandle_t aheap = heap_register(atb, dev, abase, 256 * MiB);

    mstxMemRegionHandle_t h[3] = {NULL, NULL, NULL};
    mstxMemVirtualRangeDesc_t r1[2] = {{dev, a, 1 * MiB}, {dev, a + 1 * MiB, 3 * MiB}};
    mstxMemRegionsRegisterBatch_t b1 = {aheap, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 2, r1, &h[0]};
    mstxMemRegionsRegister(atb, &b1);
    mstxMemVirtualRangeDesc_t r2[1] = {{dev, a + 4 * MiB, 4 * MiB}};
    mstxMemRegionsRegisterBatch_t b2 = {aheap, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 1, r2, &h[2]};
    mstxMemRegionsRegister(atb, &b2);

    mstxMemRegionRef_t refs[2];
    refs[0].refType = MSTX_MEM_REGION_REF_TYPE_HANDLE;
    refs[0].handle = h[0];
    refs[1].refType = MSTX_MEM_REGION_REF_TYPE_HANDLE;
    refs[1].handle = h[2];
    mstxMemRegionsUnregisterBatch_t u1 = {2, refs};
    mstxMemRegionsUnregister(atb, &u1);
    unregister_one(atb, MSTX_MEM_REGION_REF_TYPE_HANDLE, h[1]);

    mstxMemHeapUnregister(atb, aheap);
    return hal->free(abase) == DRV_ERROR_NONE ? 0 : -1;
}

static int mindspore_producer(struct sim_hal *hal, uint32_t dev)
{
    void *mbase = NULL;
    if (hal->alloc(&mbase, 128 * MiB, SIM_HAL_FLAG(SIM_MODULE_RUNTIME, SIM_MEMTYPE_DEVICE,
                                                   SIM_FLAG_HUGE_PAGE, dev)) != DRV_ERROR_NONE)
        return -1;
    char *m = mbase;
    mstxDomainHandle_t ms = mstxDomainCreateA("mindsporeMemPool");
    mstxMemHeapHandle_t mheap = heap_register(ms, dev, mbase, 128 * MiB);

    mstxMemVirtualRangeDesc_t r[2] = {{dev, m, 2 * MiB}, {dev, m + 2 * MiB, 6 * MiB}};
    mstxMemRegionsRegisterBatch_t b = {mheap, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 2, r, NULL};
    mstxMemRegionsRegister(ms, &b);

    unregister_one(ms, MSTX_MEM_REGION_REF_TYPE_POINTER, m + 2 * MiB);
    unregister_one(ms, MSTX_MEM_REGION_REF_TYPE_POINTER, m);

    mstxMemHeapUnregister(ms, mheap);
    return hal->free(mbase) == DRV_ERROR_NONE ? 0 : -1;
}

int main(int argc, char **argv)
{
    uint32_t dev = argc > 1 ? (uint32_t)atoi(argv[1]) : 0;
    struct sim_hal hal;
    if (sim_hal_open(&hal) != 0)
        return 1;
    if (atb_producer(&hal, dev) != 0) {
        fprintf(stderr, "pool_atb_ms: ATB producer failed\n");
        return 1;
    }
    if (mindspore_producer(&hal, dev) != 0) {
        fprintf(stderr, "pool_atb_ms: MindSpore producer failed\n");
        return 1;
    }
    return 0;
}
