/*
 * Steps around PTA blocks (behaviour spec §8): an msTX range whose message
 * is exactly "step start" opens a step, numbered from 1.
 *
 *   register X (512 KiB)                          -- before any step
 *   for s in 1..5:
 *     id = mstxRangeStartA("step start")
 *     register block of s MiB; mstxMarkA("work"); unregister it
 *     mstxRangeEnd(id)
 *   register Y (256 KiB)                          -- after the last step
 *   unregister X, Y
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mstx_api.h"

#define KiB (1ULL << 10)
#define MiB (1ULL << 20)

static mstxDomainHandle_t d;
static mstxMemHeapHandle_t h;

static void reg(void *p, uint64_t size)
{
    mstxMemVirtualRangeDesc_t r = {0, p, size};
    mstxMemRegionsRegisterBatch_t b = {h, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 1, &r, NULL};
    mstxMemRegionsRegister(d, &b);
}

static void unreg(void *p)
{
    mstxMemRegionRef_t r;
    r.refType = MSTX_MEM_REGION_REF_TYPE_POINTER;
    r.pointer = p;
    mstxMemRegionsUnregisterBatch_t b = {1, &r};
    mstxMemRegionsUnregister(d, &b);
}

int main(void)
{
    char *base = malloc(64 * MiB);
    if (!base)
        return 1;
    d = mstxDomainCreateA("ptaCaching");
    mstxMemVirtualRangeDesc_t hr = {0, base, 64 * MiB};
    mstxMemHeapDesc_t hd = {MSTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, &hr};
    h = mstxMemHeapRegister(d, &hd);
    char *x = base, *y = base + 1 * MiB;
    reg(x, 512 * KiB);
    for (int s = 1; s <= 5; s++) {
        mstxRangeId id = mstxRangeStartA("step start", NULL);
        char *blk = base + (uint64_t)s * 8 * MiB;
        reg(blk, (uint64_t)s * MiB);
        mstxMarkA("work", NULL);
        unreg(blk);
        mstxRangeEnd(id);
    }
    reg(y, 256 * KiB);
    unreg(x);
    unreg(y);
    mstxMemHeapUnregister(d, h);
    free(base);
    return 0;
}
