/*
 * A driver stand-in as cheap as possible, so the benchmark measures the
 * tracer and not the driver: halMemAllocInner hands out addresses from a
 * ring of 1 Mi slots of 64 bytes (no memory behind them is touched),
 * halMemFreeInner accepts anything. The public names forward to the Inner
 * ones through the PLT, like the real driver (abi.md §2.1, §2.5).
 */
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))
#define SLOTS (1u << 20)

static uint64_t next;

EXPORT int halMemAllocInner(void **pp, unsigned long long size, unsigned long long flag)
{
    (void)size;
    (void)flag;
    uint64_t i = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED) % SLOTS;
    *pp = (void *)(uintptr_t)(0x100000000000ULL + i * 64);
    return 0;
}

EXPORT int halMemFreeInner(void *p)
{
    (void)p;
    return 0;
}

EXPORT int halMemAlloc(void **pp, unsigned long long size, unsigned long long flag)
{
    return halMemAllocInner(pp, size, flag);
}

EXPORT int halMemFree(void *p)
{
    return halMemFreeInner(p);
}
