/*
 * Cost per pool region event on the recording thread: N pairs of
 * mstxMemRegionsRegister (1 region) + mstxMemRegionsUnregister (1 POINTER
 * ref) on domain "ptaCaching", through the stand-in msTX front end
 * (libms_tools_ext.so). One pair = 2 region events.
 *
 * usage: bench [pairs] [repeats]   (defaults 1000000, 5)
 * prints: events=<2*pairs> best_ns_per_event=<x> median_ns_per_event=<y>
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mstx_api.h"

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void pairs(mstxDomainHandle_t d, mstxMemHeapHandle_t h, char *base, long n)
{
    for (long i = 0; i < n; i++) {
        char *p = base + (size_t)(i & 63) * 4096;
        mstxMemVirtualRangeDesc_t r = {0, p, 4096};
        mstxMemRegionsRegisterBatch_t b = {h, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 1, &r, NULL};
        mstxMemRegionsRegister(d, &b);
        mstxMemRegionRef_t ref;
        ref.refType = MSTX_MEM_REGION_REF_TYPE_POINTER;
        ref.pointer = p;
        mstxMemRegionsUnregisterBatch_t u = {1, &ref};
        mstxMemRegionsUnregister(d, &u);
    }
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (n <= 0 || reps <= 0 || reps > 100)
        return 2;
    static char base[64 * 4096];
    mstxDomainHandle_t d = mstxDomainCreateA("ptaCaching");
    mstxMemVirtualRangeDesc_t hr = {0, base, sizeof base};
    mstxMemHeapDesc_t hd = {MSTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, &hr};
    mstxMemHeapHandle_t h = mstxMemHeapRegister(d, &hd);
    pairs(d, h, base, n / 10 + 1); /* warm-up: injection, first chunks, caches */
    double per[100];
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = now_ns();
        pairs(d, h, base, n);
        per[r] = (double)(now_ns() - t0) / (2.0 * (double)n);
    }
    qsort(per, (size_t)reps, sizeof per[0], cmp);
    mstxMemHeapUnregister(d, h);
    printf("events=%ld best_ns_per_event=%.2f median_ns_per_event=%.2f\n", 2 * n, per[0],
           per[reps / 2]);
    return 0;
}
