/*
 * One PTA caching pool on two logical devices (0 and 1) in one process,
 * over host memory (the pool calls never touch it). MiB = 1048576 bytes.
 *
 *   1. HeapRegister {dev 0, A, 64 MiB}; HeapRegister {dev 1, B, 32 MiB}
 *   2. RegionsRegister, ONE batch mixing devices:
 *        a {0, A, 1 MiB}, b {1, B, 2 MiB}, c {0, A+1MiB, 4 MiB}, d {1, B+2MiB, 8 MiB}
 *      rows: a used 1 total 64 | b used 2 total 32 | c used 5 total 64 | d used 10 total 32
 *   3. RegionsUnregister a, d      -> a used 4 total 64 | d used 2 total 32
 *   4. HeapRegister {dev 0, C, 16 MiB}  (dev 0 total 80)
 *   5. RegionsRegister e {0, C, 1 MiB}  -> used 5 total 80
 *   6. HeapUnregister(B)                (dev 1 total 0)
 *   7. RegionsUnregister b, c, e   -> b used 0 total 0 | c used 1 total 80 | e used 0 total 80
 *   8. HeapUnregister(A), HeapUnregister(C)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mstx_api.h"

#define MiB (1ULL << 20)

static mstxDomainHandle_t d;

static mstxMemHeapHandle_t heap(uint32_t dev, void *p, uint64_t size)
{
    mstxMemVirtualRangeDesc_t r = {dev, p, size};
    mstxMemHeapDesc_t desc = {MSTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, &r};
    return mstxMemHeapRegister(d, &desc);
}

static void regions(mstxMemHeapHandle_t h, const mstxMemVirtualRangeDesc_t *r, size_t n)
{
    mstxMemRegionsRegisterBatch_t b = {h, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, n, r, NULL};
    mstxMemRegionsRegister(d, &b);
}

static void unregister(void *const *ptrs, size_t n)
{
    mstxMemRegionRef_t refs[4];
    for (size_t i = 0; i < n; i++) {
        refs[i].refType = MSTX_MEM_REGION_REF_TYPE_POINTER;
        refs[i].pointer = ptrs[i];
    }
    mstxMemRegionsUnregisterBatch_t b = {n, refs};
    mstxMemRegionsUnregister(d, &b);
}

int main(void)
{
    char *a = malloc(64 * MiB), *b = malloc(32 * MiB), *c = malloc(16 * MiB);
    if (!a || !b || !c)
        return 1;
    d = mstxDomainCreateA("ptaCaching");
    mstxMemHeapHandle_t ha = heap(0, a, 64 * MiB);
    mstxMemHeapHandle_t hb = heap(1, b, 32 * MiB);
    mstxMemVirtualRangeDesc_t batch[4] = {
        {0, a, 1 * MiB}, {1, b, 2 * MiB}, {0, a + 1 * MiB, 4 * MiB}, {1, b + 2 * MiB, 8 * MiB}};
    regions(ha, batch, 4);
    void *f1[2] = {a, b + 2 * MiB};
    unregister(f1, 2);
    mstxMemHeapHandle_t hc = heap(0, c, 16 * MiB);
    mstxMemVirtualRangeDesc_t e[1] = {{0, c, 1 * MiB}};
    regions(hc, e, 1);
    mstxMemHeapUnregister(d, hb);
    void *f2[3] = {b, a + 1 * MiB, c};
    unregister(f2, 3);
    mstxMemHeapUnregister(d, ha);
    mstxMemHeapUnregister(d, hc);
    free(a);
    free(b);
    free(c);
    return 0;
}
