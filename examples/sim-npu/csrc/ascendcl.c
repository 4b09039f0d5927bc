/*
 * libascendcl.so stand-in: the public ACL entry points a training job
 * calls (abi.md §3.1-§3.5, §7).
 *
 * The library is linked with DT_NEEDED on libascend_hal.so and
 * libascendcl_impl.so. That matters: a tracer's aclInit hook dlopens this
 * library RTLD_GLOBAL, which promotes its dependencies - the HAL included -
 * into the global scope, so dlsym(RTLD_DEFAULT, "halMemAllocInner") works
 * afterwards (§0.3, §2.5).
 *
 * Public functions delegate to the *Impl layer through the PLT, so the
 * launch functions the tracer interposes in libascendcl_impl.so
 * (aclrtLaunchKernelImpl, aclrtLaunchKernelV2Impl) are reached the same
 * way they are on a real install.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim_npu.h"

#define SIM_HBM_DEFAULT_BYTES (65536ULL << 20)   /* 64 GiB, as DCMI reports */

/* ---------------------------------------------------------------------- */
/* Lifecycle                                                               */
/* ---------------------------------------------------------------------- */

/* Returns 0 even when called twice: the tracer's aclInit hook treats the
 * call as "ACL initialised" whatever it returns, and a stand-in that fails
 * the second call only makes tests order-sensitive. */
SIM_EXPORT aclError aclInit(const char *configPath)
{
    (void)configPath;
    return ACL_SUCCESS;
}

SIM_EXPORT aclError aclFinalize(void)
{
    return ACL_SUCCESS;
}

SIM_EXPORT aclError aclrtSetDevice(int32_t deviceId)
{
    return aclrtSetDeviceImpl(deviceId);
}

SIM_EXPORT aclError aclrtResetDevice(int32_t deviceId)
{
    (void)deviceId;
    return ACL_SUCCESS;
}

SIM_EXPORT aclError aclrtGetDevice(int32_t *deviceId)
{
    return aclrtGetDeviceImpl(deviceId);
}

SIM_EXPORT aclError aclrtGetDeviceCount(uint32_t *count)
{
    if (!count)
        return ACL_ERROR_INVALID_PARAM;
    *count = sim_hal_device_count();
    return ACL_SUCCESS;
}

SIM_EXPORT const char *aclrtGetSocName(void)
{
    return "Ascend910B3";   /* no "950"/"960": the tracer treats it as A2/A3 */
}

/* ---------------------------------------------------------------------- */
/* Streams                                                                 */
/* ---------------------------------------------------------------------- */

SIM_EXPORT aclError aclrtCreateStream(aclrtStream *stream)
{
    return aclrtCreateStreamImpl(stream);
}

SIM_EXPORT aclError aclrtDestroyStream(aclrtStream stream)
{
    return aclrtDestroyStreamImpl(stream);
}

/* Work runs at launch time here, so every synchronisation has nothing to
 * wait for. */
SIM_EXPORT aclError aclrtSynchronizeStream(aclrtStream stream)
{
    (void)stream;
    return ACL_SUCCESS;
}

SIM_EXPORT aclError aclrtSynchronizeDevice(void)
{
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Events (acl_rt.h): distinct non-null handles, each a small block that   */
/* remembers whether it was recorded. Record/wait/sync return 0 for a      */
/* handle this library gave out and ACL_ERROR_INVALID_PARAM otherwise      */
/* (NULL or destroyed), as CANN rejects a bad event.                       */
/* ---------------------------------------------------------------------- */

struct sim_event {
    uint64_t magic;
    int recorded;
};
#define EVENT_MAGIC 0x53494d4556544e00ULL
#define MAX_EVENTS 4096

static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_event *events[MAX_EVENTS];

/* Index of `event` in the table, or -1; the caller holds event_lock. */
static int event_slot(aclrtEvent event)
{
    if (!event)
        return -1;
    for (int i = 0; i < MAX_EVENTS; i++)
        if (events[i] == event)
            return i;
    return -1;
}

SIM_EXPORT aclError aclrtCreateEvent(aclrtEvent *event)
{
    if (!event)
        return ACL_ERROR_INVALID_PARAM;
    struct sim_event *e = calloc(1, sizeof *e);
    if (!e)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    e->magic = EVENT_MAGIC;
    aclError rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    pthread_mutex_lock(&event_lock);
    for (int i = 0; i < MAX_EVENTS; i++) {
        if (!events[i]) {
            events[i] = e;
            rc = ACL_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&event_lock);
    if (rc != ACL_SUCCESS) {
        free(e);
        return rc;
    }
    *event = e;
    return ACL_SUCCESS;
}

SIM_EXPORT aclError aclrtDestroyEvent(aclrtEvent event)
{
    pthread_mutex_lock(&event_lock);
    int i = event_slot(event);
    if (i >= 0)
        events[i] = NULL;
    pthread_mutex_unlock(&event_lock);
    if (i < 0)
        return ACL_ERROR_INVALID_PARAM;
    free(event);
    return ACL_SUCCESS;
}

/* Marks a known event recorded when `record`; ACL_ERROR_INVALID_PARAM for
 * an unknown one. */
static aclError event_touch(aclrtEvent event, int record)
{
    pthread_mutex_lock(&event_lock);
    int i = event_slot(event);
    if (i >= 0 && record)
        events[i]->recorded = 1;
    pthread_mutex_unlock(&event_lock);
    return i >= 0 ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
}

SIM_EXPORT aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)
{
    (void)stream;
    return event_touch(event, 1);
}

SIM_EXPORT aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)
{
    (void)stream;
    return event_touch(event, 0);
}

SIM_EXPORT aclError aclrtSynchronizeEvent(aclrtEvent event)
{
    return event_touch(event, 0);
}

/* ---------------------------------------------------------------------- */
/* Device memory: aclrtMalloc -> aclrtMallocImpl -> rtMalloc -> halMemAlloc */
/* (every hop through the PLT). aclrtMalloc itself is not hooked by the    */
/* tracer; it sees the HAL call at the bottom.                             */
/* ---------------------------------------------------------------------- */

SIM_EXPORT aclError aclrtMalloc(void **devPtr, size_t size, int policy)
{
    return aclrtMallocImpl(devPtr, size, policy);
}

SIM_EXPORT aclError aclrtFree(void *devPtr)
{
    return aclrtFreeImpl(devPtr);
}

/* "Device" memory is host memory here, so every copy kind is a memmove. */
SIM_EXPORT aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                                int kind)
{
    if (kind < 0 || kind > 4 || count > destMax || (count && (!dst || !src)))
        return ACL_ERROR_INVALID_PARAM;
    if (count)
        memmove(dst, src, count);
    return ACL_SUCCESS;
}

SIM_EXPORT aclError aclrtGetMemInfo(int attr, size_t *freeBytes, size_t *totalBytes)
{
    (void)attr;
    if (!freeBytes || !totalBytes)
        return ACL_ERROR_INVALID_PARAM;
    int32_t dev = 0;
    if (aclrtGetDeviceImpl(&dev) != ACL_SUCCESS)
        return ACL_ERROR_RT_CONTEXT_NULL;
    uint64_t total = sim_hal_hbm_limit();
    if (total > SIM_HBM_DEFAULT_BYTES)
        total = SIM_HBM_DEFAULT_BYTES;
    uint64_t used = sim_hal_live_bytes((uint32_t)dev) + sim_hal_other_bytes();
    *totalBytes = (size_t)total;
    *freeBytes = (size_t)(used >= total ? 0 : total - used);
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Pinned host memory. Registrations are remembered so that unregistering  */
/* an unknown pointer fails, as it does on CANN.                           */
/* ---------------------------------------------------------------------- */

#define MAX_HOST_REGS 1024

static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static void *host_regs[MAX_HOST_REGS];

SIM_EXPORT aclError aclrtHostRegisterV2(void *ptr, uint64_t size, uint32_t flag)
{
    (void)flag;
    if (!ptr || size == 0)
        return ACL_ERROR_INVALID_PARAM;
    aclError rc = ACL_ERROR_INVALID_PARAM;
    pthread_mutex_lock(&host_lock);
    for (int i = 0; i < MAX_HOST_REGS; i++) {
        if (!host_regs[i]) {
            host_regs[i] = ptr;
            rc = ACL_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&host_lock);
    return rc;
}

SIM_EXPORT aclError aclrtHostUnregister(void *ptr)
{
    aclError rc = ACL_ERROR_INVALID_PARAM;
    if (!ptr)
        return rc;
    pthread_mutex_lock(&host_lock);
    for (int i = 0; i < MAX_HOST_REGS; i++) {
        if (host_regs[i] == ptr) {
            host_regs[i] = NULL;
            rc = ACL_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&host_lock);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Kernels                                                                 */
/* ---------------------------------------------------------------------- */

SIM_EXPORT aclError aclrtBinaryGetFunction(aclrtBinHandle binHandle, const char *kernelName,
                                           aclrtFuncHandle *funcHandle)
{
    return aclrtBinaryGetFunctionImpl(binHandle, kernelName, funcHandle);
}

SIM_EXPORT aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim,
                                      const void *argsData, size_t argsSize, aclrtStream stream)
{
    return aclrtLaunchKernelImpl(funcHandle, blockDim, argsData, argsSize, stream);
}

SIM_EXPORT aclError aclrtLaunchKernelV2(aclrtFuncHandle funcHandle, uint32_t blockDim,
                                        const void *argsData, size_t argsSize,
                                        aclrtLaunchKernelCfg *cfg, aclrtStream stream)
{
    return aclrtLaunchKernelV2Impl(funcHandle, blockDim, argsData, argsSize, cfg, stream);
}

SIM_EXPORT aclError aclrtLaunchKernelWithConfig(aclrtFuncHandle funcHandle, uint32_t blockDim,
                                                aclrtStream stream, aclrtLaunchKernelCfg *cfg,
                                                void *argsHandle, void *reserve)
{
    return aclrtLaunchKernelWithConfigImpl(funcHandle, blockDim, stream, cfg, argsHandle,
                                           reserve);
}

SIM_EXPORT aclError aclrtLaunchKernelWithHostArgs(aclrtFuncHandle funcHandle, uint32_t blockDim,
                                                  aclrtStream stream, aclrtLaunchKernelCfg *cfg,
                                                  void *hostArgs, size_t argsSize,
                                                  aclrtPlaceHolderInfo *placeHolderArray,
                                                  size_t placeHolderNum)
{
    return aclrtLaunchKernelWithHostArgsImpl(funcHandle, blockDim, stream, cfg, hostArgs,
                                             argsSize, placeHolderArray, placeHolderNum);
}
