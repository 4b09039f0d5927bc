/*
 * Owner chains on the PTA caching pool (behaviour spec §7): labels pushed
 * with the probe's C ABI memscope_owner_push/memscope_owner_pop, found with
 * dlsym(RTLD_DEFAULT) so the program also runs without the probe (then it
 * prints owner_api=0 and pushes nothing).
 *
 * Heap: 1 MiB of host memory H, device 0. Regions (KiB = 1024 bytes), each
 * registered alone and all unregistered at the end:
 *   main   H+0     1 KiB  labels []                 -> owner PTA
 *   main   H+4K    2 KiB  labels [model]            -> PTA@model
 *   main   H+8K    3 KiB  labels [model, layer1]    -> PTA@model@layer1
 *   main   H+12K   4 KiB  labels [model]            -> PTA@model
 *   thread H+16K   5 KiB  labels [worker] (its own stack) -> PTA@worker
 *   main   H+20K   6 KiB  labels []                 -> PTA
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mstx_api.h"

#define KiB 1024u

typedef void (*push_fn)(const char *);
typedef void (*pop_fn)(void);

static push_fn push;
static pop_fn pop;
static mstxDomainHandle_t domain;
static mstxMemHeapHandle_t heap;
static char *base;

static void region(size_t off, uint64_t size)
{
    mstxMemVirtualRangeDesc_t r = {0, base + off, size};
    mstxMemRegionsRegisterBatch_t b = {heap, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 1, &r, NULL};
    mstxMemRegionsRegister(domain, &b);
}

static void label(const char *l)
{
    if (push)
        push(l);
}

static void unlabel(void)
{
    if (pop)
        pop();
}

static void *worker(void *arg)
{
    (void)arg;
    label("worker");
    region(16 * KiB, 5 * KiB);
    unlabel();
    return NULL;
}

int main(void)
{
    push = (push_fn)dlsym(RTLD_DEFAULT, "memscope_owner_push");
    pop = (pop_fn)dlsym(RTLD_DEFAULT, "memscope_owner_pop");
    base = malloc(1 << 20);
    if (!base)
        return 1;
    domain = mstxDomainCreateA("ptaCaching");
    mstxMemVirtualRangeDesc_t hr = {0, base, 1 << 20};
    mstxMemHeapDesc_t hd = {MSTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, &hr};
    heap = mstxMemHeapRegister(domain, &hd);

    region(0, 1 * KiB);
    label("model");
    region(4 * KiB, 2 * KiB);
    label("layer1");
    region(8 * KiB, 3 * KiB);
    unlabel();
    region(12 * KiB, 4 * KiB);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    unlabel();
    region(20 * KiB, 6 * KiB);

    mstxMemRegionRef_t refs[6];
    for (int i = 0; i < 6; i++) {
        refs[i].refType = MSTX_MEM_REGION_REF_TYPE_POINTER;
        refs[i].pointer = base + i * 4 * KiB;
    }
    mstxMemRegionsUnregisterBatch_t u = {6, refs};
    mstxMemRegionsUnregister(domain, &u);
    mstxMemHeapUnregister(domain, heap);
    printf("owner_api=%d\n", push && pop);
    free(base);
    return 0;
}
