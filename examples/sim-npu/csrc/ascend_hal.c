/*
 * libascend_hal.so stand-in: the driver memory API of abi.md §2.
 *
 * "Device" memory is ordinary anonymous host memory. Each allocation is an
 * mmap of (size + 64) bytes with MAP_NORESERVE, so a test can reserve
 * gigabytes of fake HBM without touching real RAM; the first 64 bytes hold
 * a header and the caller gets base + 64.
 *
 * The real driver exports both the public names (halMemAlloc ...) and the
 * ...Inner implementations. A tracer interposes the public names and calls
 * the Inner ones, so the public functions here must reach the Inner ones
 * through the PLT: they are plain calls between default-visibility symbols
 * of a -fPIC DSO built without -fno-semantic-interposition, which GCC
 * neither inlines nor binds locally.
 *
 * Environment:
 *   SIM_NPU_HBM_LIMIT     per-device byte limit for device-side memory
 *                         (unset or unparsable = unlimited). An allocation
 *                         that would push the device over it fails with
 *                         DRV_ERROR_OUT_OF_MEMORY (6), as the driver does.
 *   SIM_NPU_OTHER_PROCESS_BYTES  bytes other processes hold on every device
 *                         (default 0): they count against SIM_NPU_HBM_LIMIT and
 *                         show as used in aclrtGetMemInfo and DCMI, never in
 *                         this process's own figures.
 *   SIM_NPU_DEVICE_COUNT  number of simulated devices (default 8); used by
 *                         the runtime and DCMI stand-ins through
 *                         sim_hal_device_count().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "sim_npu.h"

#define HDR_SIZE 64
#define HDR_MAGIC 0x53494d4e50554d45ULL  /* "SIMNPUME" */
#define HANDLE_MAGIC 0x53494d4e50554844ULL /* "SIMNPUHD" */

/* The 64-byte header in front of every halMemAlloc block. */
struct alloc_hdr {
    uint64_t magic;
    uint64_t map_len;    /* what to munmap */
    uint64_t size;       /* what the caller asked for */
    uint64_t flag;
    uint32_t dev;
    uint32_t counted;    /* 1 if `size` is charged to live_bytes[dev] */
    uint8_t pad[HDR_SIZE - 40];
};
_Static_assert(sizeof(struct alloc_hdr) == HDR_SIZE, "header must be 64 bytes");

/* The object behind a halMemCreate handle. */
struct drv_mem_handle {
    uint64_t magic;
    uint64_t size;
    uint32_t dev;
    uint32_t module_id;
};

/* Live device-side bytes per device id, for the OOM limit and for DCMI. */
static uint64_t live_bytes[SIM_MAX_DEVICES];

/* ---------------------------------------------------------------------- */
/* Live-object registry.                                                   */
/* Freeing an address the driver never handed out (or freeing twice) must  */
/* fail cleanly instead of reading an unmapped header, because tracer tests */
/* deliberately free bogus pointers. An open-addressing set keyed by the    */
/* pointer value, with a kind tag so a Create handle cannot be halMemFree'd.*/
/* ---------------------------------------------------------------------- */

enum { KIND_EMPTY = 0, KIND_TOMB = 1, KIND_ALLOC = 2, KIND_HANDLE = 3 };

struct slot {
    uintptr_t key;
    int kind;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *reg_slots;
static size_t reg_cap;   /* power of two */
static size_t reg_used;  /* live + tombstones */

static size_t reg_hash(uintptr_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static int reg_grow(void)
{
    size_t ncap = reg_cap ? reg_cap * 2 : 1024;
    struct slot *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < reg_cap; i++) {
        if (reg_slots[i].kind < KIND_ALLOC)
            continue;
        size_t j = reg_hash(reg_slots[i].key) & (ncap - 1);
        while (ns[j].kind != KIND_EMPTY)
            j = (j + 1) & (ncap - 1);
        ns[j] = reg_slots[i];
    }
    size_t live = 0;
    for (size_t i = 0; i < ncap; i++)
        live += ns[i].kind >= KIND_ALLOC;
    free(reg_slots);
    reg_slots = ns;
    reg_cap = ncap;
    reg_used = live;
    return 0;
}

static int reg_insert(uintptr_t key, int kind)
{
    int rc = 0;
    pthread_mutex_lock(&reg_lock);
    if ((reg_used + 1) * 2 > reg_cap && reg_grow() != 0) {
        rc = -1;
    } else {
        size_t j = reg_hash(key) & (reg_cap - 1);
        while (reg_slots[j].kind >= KIND_ALLOC)
            j = (j + 1) & (reg_cap - 1);
        if (reg_slots[j].kind == KIND_EMPTY)
            reg_used++;
        reg_slots[j].key = key;
        reg_slots[j].kind = kind;
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

/* Removes `key` if it is registered with `kind`; returns 1 if it was. */
static int reg_remove(uintptr_t key, int kind)
{
    int found = 0;
    pthread_mutex_lock(&reg_lock);
    if (reg_cap) {
        size_t j = reg_hash(key) & (reg_cap - 1);
        while (reg_slots[j].kind != KIND_EMPTY) {
            if (reg_slots[j].kind == kind && reg_slots[j].key == key) {
                reg_slots[j].kind = KIND_TOMB;
                found = 1;
                break;
            }
            j = (j + 1) & (reg_cap - 1);
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

/* ---------------------------------------------------------------------- */
/* Accounting                                                              */
/* ---------------------------------------------------------------------- */

SIM_EXPORT uint64_t sim_hal_hbm_limit(void)
{
    /* Read on every call so a test can change it between runs of a
     * long-lived process; getenv is cheap next to an mmap. */
    const char *s = getenv("SIM_NPU_HBM_LIMIT");
    if (!s || !*s)
        return UINT64_MAX;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return UINT64_MAX;
    return (uint64_t)v;
}

SIM_EXPORT uint64_t sim_hal_other_bytes(void)
{
    const char *s = getenv("SIM_NPU_OTHER_PROCESS_BYTES");
    if (!s || !*s)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return 0;
    return (uint64_t)v;
}

SIM_EXPORT uint32_t sim_hal_device_count(void)
{
    const char *s = getenv("SIM_NPU_DEVICE_COUNT");
    if (!s || !*s)
        return 8;
    long v = strtol(s, NULL, 10);
    if (v < 1)
        return 1;
    if (v > SIM_MAX_DEVICES)
        return SIM_MAX_DEVICES;
    return (uint32_t)v;
}

SIM_EXPORT uint64_t sim_hal_live_bytes(uint32_t dev)
{
    if (dev >= SIM_MAX_DEVICES)
        return 0;
    return __atomic_load_n(&live_bytes[dev], __ATOMIC_RELAXED);
}

/* Charges `size` to `dev` unless that would exceed the limit. CAS so that
 * concurrent allocations cannot jointly overshoot. */
static int charge(uint32_t dev, uint64_t size)
{
    uint64_t limit = sim_hal_hbm_limit();
    uint64_t other = sim_hal_other_bytes();
    limit = other >= limit ? 0 : limit - other;
    uint64_t cur = __atomic_load_n(&live_bytes[dev], __ATOMIC_RELAXED);
    for (;;) {
        if (size > limit || cur > limit - size)
            return 0;
        if (__atomic_compare_exchange_n(&live_bytes[dev], &cur, cur + size, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return 1;
    }
}

static void uncharge(uint32_t dev, uint64_t size)
{
    __atomic_fetch_sub(&live_bytes[dev], size, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------------- */
/* Driver implementations                                                  */
/* ---------------------------------------------------------------------- */

SIM_EXPORT drvError_t halMemAllocInner(void **pp, unsigned long long size, unsigned long long flag)
{
    if (!pp || size == 0 || size > UINT64_MAX - HDR_SIZE - 4096)
        return DRV_ERROR_INVALID_VALUE;

    uint32_t dev = (uint32_t)(flag & SIM_FLAG_DEVID_MASK);
    uint64_t memtype = (flag & SIM_FLAG_MEMTYPE_MASK) >> SIM_FLAG_MEMTYPE_SHIFT;
    /* Host-type memory is not HBM: it is neither limited nor reported by
     * DCMI. Every other type (SVM, DEVICE, DVPP, even invalid ones) is. */
    int counted = memtype != SIM_MEMTYPE_HOST;
    if (counted && !charge(dev, size))
        return DRV_ERROR_OUT_OF_MEMORY;

    uint64_t map_len = (size + HDR_SIZE + 4095) & ~4095ULL;
    void *base = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        if (counted)
            uncharge(dev, size);
        return DRV_ERROR_OUT_OF_MEMORY;
    }
    struct alloc_hdr *h = base;
    h->magic = HDR_MAGIC;
    h->map_len = map_len;
    h->size = size;
    h->flag = flag;
    h->dev = dev;
    h->counted = (uint32_t)counted;

    void *user = (char *)base + HDR_SIZE;
    if (reg_insert((uintptr_t)user, KIND_ALLOC) != 0) {
        munmap(base, map_len);
        if (counted)
            uncharge(dev, size);
        return DRV_ERROR_OUT_OF_MEMORY;
    }
    *pp = user;
    return DRV_ERROR_NONE;
}

SIM_EXPORT drvError_t halMemFreeInner(void *pp)
{
    if (!pp || !reg_remove((uintptr_t)pp, KIND_ALLOC))
        return DRV_ERROR_INVALID_VALUE;
    struct alloc_hdr *h = (struct alloc_hdr *)((char *)pp - HDR_SIZE);
    if (h->counted)
        uncharge(h->dev, h->size);
    munmap(h, h->map_len);
    return DRV_ERROR_NONE;
}

SIM_EXPORT drvError_t halMemCreateInner(drv_mem_handle_t **handle, size_t size,
                                        const struct drv_mem_prop *prop, uint64_t flag)
{
    (void)flag;
    if (!handle || size == 0)
        return DRV_ERROR_INVALID_VALUE;
    uint32_t dev = prop ? prop->devid : 0;
    if (dev >= SIM_MAX_DEVICES)
        return DRV_ERROR_INVALID_VALUE;
    /* Physical handles are backed by HBM, so they count against the limit
     * just like halMemAlloc. */
    if (!charge(dev, size))
        return DRV_ERROR_OUT_OF_MEMORY;
    struct drv_mem_handle *h = malloc(sizeof *h);
    if (!h) {
        uncharge(dev, size);
        return DRV_ERROR_OUT_OF_MEMORY;
    }
    h->magic = HANDLE_MAGIC;
    h->size = size;
    h->dev = dev;
    h->module_id = prop ? prop->module_id : 0;
    if (reg_insert((uintptr_t)h, KIND_HANDLE) != 0) {
        free(h);
        uncharge(dev, size);
        return DRV_ERROR_OUT_OF_MEMORY;
    }
    *handle = h;
    return DRV_ERROR_NONE;
}

SIM_EXPORT drvError_t halMemReleaseInner(drv_mem_handle_t *handle)
{
    if (!handle || !reg_remove((uintptr_t)handle, KIND_HANDLE))
        return DRV_ERROR_INVALID_VALUE;
    uncharge(handle->dev, handle->size);
    handle->magic = 0;
    free(handle);
    return DRV_ERROR_NONE;
}

/* ---------------------------------------------------------------------- */
/* Public entry points: forward through the PLT (see the file comment).    */
/* ---------------------------------------------------------------------- */

SIM_EXPORT drvError_t halMemAlloc(void **pp, unsigned long long size, unsigned long long flag)
{
    return halMemAllocInner(pp, size, flag);
}

SIM_EXPORT drvError_t halMemFree(void *pp)
{
    return halMemFreeInner(pp);
}

SIM_EXPORT drvError_t halMemCreate(drv_mem_handle_t **handle, size_t size,
                                   const struct drv_mem_prop *prop, uint64_t flag)
{
    return halMemCreateInner(handle, size, prop, flag);
}

SIM_EXPORT drvError_t halMemRelease(drv_mem_handle_t *handle)
{
    return halMemReleaseInner(handle);
}

/* ---------------------------------------------------------------------- */
/* Device info and the profiling channel (§3.6). The tracer only needs     */
/* these to exist and behave; clock queries fall back to 50 MHz.           */
/* ---------------------------------------------------------------------- */

SIM_EXPORT drvError_t halGetDeviceInfo(uint32_t devId, int32_t moduleType, int32_t infoType,
                                       int64_t *value)
{
    (void)devId;
    if (!value)
        return DRV_ERROR_INVALID_VALUE;
    if (moduleType == 0 && infoType == 1) {   /* SYSTEM / VERSION: chip id 5 = 910B */
        *value = 5 << 8;
        return DRV_ERROR_NONE;
    }
    return DRV_ERROR_NOT_SUPPORT;
}

SIM_EXPORT int prof_drv_start(unsigned devId, unsigned channelId, void *para)
{
    (void)devId;
    (void)channelId;
    (void)para;
    return 0;
}

SIM_EXPORT int prof_channel_read(unsigned devId, unsigned channelId, char *buf, unsigned bufSize)
{
    (void)devId;
    (void)channelId;
    (void)buf;
    (void)bufSize;
    /* No device timeline exists; sleep so a reader that polls in a loop
     * does not burn a core. */
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return 0;
}

SIM_EXPORT int prof_stop(unsigned devId, unsigned channelId)
{
    (void)devId;
    (void)channelId;
    return 0;
}
