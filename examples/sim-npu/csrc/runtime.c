/*
 * libruntime.so stand-in: devices, streams, kernel registry, rtMalloc and
 * the six rt*Launch* entry points of abi.md §3.5.
 *
 * Kernel names. Real CANN binds a launchable object to a kernel name when a
 * binary is registered; here one process-wide table maps "the pointer a
 * launch is given" (a stubFunc, a binary handle or a function handle) to a
 * name. rtFunctionRegister adds a stubFunc; rtFuncGetByName interns a
 * function handle per name. A launch with an unknown pointer still succeeds
 * and is reported as "unregistered_kernel".
 *
 * Every launch reports itself to the profiling API on the calling thread
 * before returning: MsprofGetHashId(name) and then one compact record
 * (level 5000, type 802, MsprofRuntimeTrack carrying that hash). That is
 * the order a tracer relies on to name its pending launch (§3.6). Only the
 * innermost rt* launch reports, so an aclrt* launch that forwards here is
 * reported once.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim_npu.h"

#define ACL_ERROR_RT_INVALID_DEVICEID 107001
#define ACL_ERROR_RT_STREAM_CONTEXT 107003

/* ---------------------------------------------------------------------- */
/* Current device                                                          */
/* The real runtime binds a context per thread. A thread that never set a */
/* device inherits the last device any thread set, so helper threads of a  */
/* single-device job see the same device as the main thread.               */
/* ---------------------------------------------------------------------- */

static __thread int32_t tls_device = -1;
static int32_t last_device = -1;

SIM_EXPORT rtError_t rtSetDevice(int32_t deviceId)
{
    if (deviceId < 0 || (uint32_t)deviceId >= sim_hal_device_count())
        return ACL_ERROR_RT_INVALID_DEVICEID;
    tls_device = deviceId;
    __atomic_store_n(&last_device, deviceId, __ATOMIC_RELAXED);
    return RT_ERROR_NONE;
}

SIM_EXPORT rtError_t rtGetDevice(int32_t *deviceId)
{
    if (!deviceId)
        return ACL_ERROR_RT_PARAM_INVALID;
    int32_t d = tls_device >= 0 ? tls_device : __atomic_load_n(&last_device, __ATOMIC_RELAXED);
    if (d < 0)
        return ACL_ERROR_RT_CONTEXT_NULL;
    *deviceId = d;
    return RT_ERROR_NONE;
}

SIM_EXPORT rtError_t rtGetDeviceCount(int32_t *count)
{
    if (!count)
        return ACL_ERROR_RT_PARAM_INVALID;
    *count = (int32_t)sim_hal_device_count();
    return RT_ERROR_NONE;
}

/* ---------------------------------------------------------------------- */
/* Memory: forwards to the HAL's public names through the PLT, so a tracer */
/* that interposes halMemAlloc sees runtime allocations like the real one. */
/* ---------------------------------------------------------------------- */

SIM_EXPORT rtError_t rtMalloc(void **devPtr, uint64_t size, uint32_t type, uint16_t moduleId)
{
    if (!devPtr || size == 0)
        return ACL_ERROR_RT_PARAM_INVALID;
    int32_t dev = 0;
    if (rtGetDevice(&dev) != RT_ERROR_NONE)
        return ACL_ERROR_RT_CONTEXT_NULL;
    uint64_t page = 0;
    if (type & SIM_RT_MEMORY_POLICY_HUGE_PAGE_ONLY)
        page = SIM_FLAG_HUGE_PAGE;
    else if ((type & SIM_RT_MEMORY_POLICY_HUGE_PAGE_FIRST) && size > (1u << 20))
        page = SIM_FLAG_HUGE_PAGE;
    uint64_t flag = SIM_HAL_FLAG(moduleId, SIM_MEMTYPE_DEVICE, page, dev);
    drvError_t rc = halMemAlloc(devPtr, size, flag);
    if (rc == DRV_ERROR_NONE)
        return RT_ERROR_NONE;
    return rc == DRV_ERROR_OUT_OF_MEMORY ? ACL_ERROR_RT_MEMORY_ALLOCATION
                                         : ACL_ERROR_RT_PARAM_INVALID;
}

SIM_EXPORT rtError_t rtFree(void *devPtr)
{
    return halMemFree(devPtr) == DRV_ERROR_NONE ? RT_ERROR_NONE : ACL_ERROR_RT_PARAM_INVALID;
}

/* ---------------------------------------------------------------------- */
/* Streams: ids only. NULL is the default stream, id 0.                   */
/* ---------------------------------------------------------------------- */

struct sim_stream {
    uint64_t magic;
    int32_t id;
};
#define STREAM_MAGIC 0x53494d5354524d00ULL
#define MAX_STREAMS 4096

static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_stream *streams[MAX_STREAMS];
static int32_t next_stream_id = 1;

SIM_EXPORT rtError_t rtStreamCreate(rtStream_t *stm, int32_t priority)
{
    (void)priority;
    if (!stm)
        return ACL_ERROR_RT_PARAM_INVALID;
    struct sim_stream *s = malloc(sizeof *s);
    if (!s)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    rtError_t rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    pthread_mutex_lock(&stream_lock);
    for (int i = 0; i < MAX_STREAMS; i++) {
        if (!streams[i]) {
            s->magic = STREAM_MAGIC;
            s->id = next_stream_id++;
            streams[i] = s;
            rc = RT_ERROR_NONE;
            break;
        }
    }
    pthread_mutex_unlock(&stream_lock);
    if (rc != RT_ERROR_NONE) {
        free(s);
        return rc;
    }
    *stm = s;
    return RT_ERROR_NONE;
}

SIM_EXPORT rtError_t rtStreamDestroy(rtStream_t stm)
{
    rtError_t rc = ACL_ERROR_RT_STREAM_CONTEXT;
    pthread_mutex_lock(&stream_lock);
    for (int i = 0; i < MAX_STREAMS; i++) {
        if (streams[i] && streams[i] == stm) {
            streams[i] = NULL;
            rc = RT_ERROR_NONE;
            break;
        }
    }
    pthread_mutex_unlock(&stream_lock);
    if (rc == RT_ERROR_NONE)
        free(stm);
    return rc;
}

/* Looks a stream up by pointer value only, never dereferencing an unknown
 * pointer: callers pass arbitrary values (the Python mstx module passes a
 * PyObject address as the "stream"). Unknown streams get id -1. */
SIM_EXPORT rtError_t rtGetStreamId(rtStream_t stm, int32_t *streamId)
{
    if (!streamId)
        return ACL_ERROR_RT_PARAM_INVALID;
    if (!stm) {
        *streamId = 0;
        return RT_ERROR_NONE;
    }
    rtError_t rc = ACL_ERROR_RT_STREAM_CONTEXT;
    *streamId = -1;
    pthread_mutex_lock(&stream_lock);
    for (int i = 0; i < MAX_STREAMS; i++) {
        if (streams[i] && streams[i] == stm) {
            *streamId = streams[i]->id;
            rc = RT_ERROR_NONE;
            break;
        }
    }
    pthread_mutex_unlock(&stream_lock);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Kernel-name registry                                                    */
/* ---------------------------------------------------------------------- */

#define NAME_MAX_LEN 256

struct kernel_entry {
    const void *key;
    int interned;              /* key is a handle made by rtFuncGetByName */
    char name[NAME_MAX_LEN];
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kernel_entry *entries;
static size_t n_entries, cap_entries;

/* Caller holds reg_lock. */
static struct kernel_entry *entry_add(const void *key, const char *name, int interned)
{
    if (n_entries == cap_entries) {
        size_t ncap = cap_entries ? cap_entries * 2 : 64;
        struct kernel_entry *ne = realloc(entries, ncap * sizeof *ne);
        if (!ne)
            return NULL;
        entries = ne;
        cap_entries = ncap;
    }
    struct kernel_entry *e = &entries[n_entries++];
    e->key = key;
    e->interned = interned;
    snprintf(e->name, sizeof e->name, "%s", name);
    return e;
}

SIM_EXPORT rtError_t rtFunctionRegister(void *binHandle, const void *stubFunc,
                                        const char *stubName, const void *kernelInfoExt,
                                        uint32_t funcMode)
{
    (void)binHandle;
    (void)kernelInfoExt;
    (void)funcMode;
    if (!stubFunc || !stubName)
        return ACL_ERROR_RT_PARAM_INVALID;
    rtError_t rc = RT_ERROR_NONE;
    pthread_mutex_lock(&reg_lock);
    size_t i;
    for (i = 0; i < n_entries; i++)
        if (entries[i].key == stubFunc)
            break;
    if (i < n_entries)   /* re-registration renames, as a reloaded binary would */
        snprintf(entries[i].name, sizeof entries[i].name, "%s", stubName);
    else if (!entry_add(stubFunc, stubName, 0))
        rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

/* Returns one stable handle per kernel name. The handle is a private heap
 * object that only serves as a key. */
SIM_EXPORT rtError_t rtFuncGetByName(void *binHandle, const char *kernelName, void **funcHandle)
{
    (void)binHandle;
    if (!kernelName || !funcHandle)
        return ACL_ERROR_RT_PARAM_INVALID;
    rtError_t rc = RT_ERROR_NONE;
    pthread_mutex_lock(&reg_lock);
    size_t i;
    for (i = 0; i < n_entries; i++)
        if (entries[i].interned && strncmp(entries[i].name, kernelName, NAME_MAX_LEN - 1) == 0)
            break;
    if (i < n_entries) {
        *funcHandle = (void *)entries[i].key;
    } else {
        void *h = malloc(16);
        if (!h || !entry_add(h, kernelName, 1)) {
            free(h);
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
        } else {
            *funcHandle = h;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

static void lookup_name(const void *key, char *out, size_t outlen)
{
    pthread_mutex_lock(&reg_lock);
    size_t i;
    for (i = 0; i < n_entries; i++)
        if (entries[i].key == key)
            break;
    snprintf(out, outlen, "%s", i < n_entries ? entries[i].name : "unregistered_kernel");
    pthread_mutex_unlock(&reg_lock);
}

/* ---------------------------------------------------------------------- */
/* Launch reporting                                                        */
/* ---------------------------------------------------------------------- */

static uint32_t next_task_id;

static void report_launch(const char *name, rtStream_t stm, uint64_t taskType)
{
    uint64_t hash = MsprofGetHashId(name, strlen(name));

    int32_t dev = 0, sid = 0;
    if (rtGetDevice(&dev) != RT_ERROR_NONE)
        dev = 0;
    if (rtGetStreamId(stm, &sid) != RT_ERROR_NONE)
        sid = 0;

    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);

    MsprofCompactInfo info;
    memset(&info, 0, sizeof info);
    info.magicNumber = MSPROF_COMPACT_INFO_MAGIC;
    info.level = MSPROF_REPORT_RUNTIME_LEVEL;
    info.type = MSPROF_REPORT_RUNTIME_TASK_TRACK_TYPE;
    info.threadId = (uint32_t)syscall(SYS_gettid);
    info.dataLen = sizeof(MsprofRuntimeTrack);
    info.timeStamp = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    info.data.runtimeTrack.deviceId = (uint16_t)dev;
    info.data.runtimeTrack.streamId = (uint16_t)sid;
    info.data.runtimeTrack.taskInfo =
        __atomic_fetch_add(&next_task_id, 1, __ATOMIC_RELAXED) & 0xFFFFu;
    info.data.runtimeTrack.taskType = taskType;
    info.data.runtimeTrack.kernelName = hash;
    MsprofReportCompactInfo(0, &info, sizeof info);
}

static rtError_t launch_by_key(const void *key, rtStream_t stm)
{
    char name[NAME_MAX_LEN];
    lookup_name(key, name, sizeof name);
    report_launch(name, stm, 0 /* AI core */);
    return RT_ERROR_NONE;
}

SIM_EXPORT rtError_t rtKernelLaunch(const void *stubFunc, uint32_t blockDim, void *args,
                                    uint32_t argsSize, rtSmDesc_t *smDesc, rtStream_t stm)
{
    (void)blockDim;
    (void)args;
    (void)argsSize;
    (void)smDesc;
    return launch_by_key(stubFunc, stm);
}

SIM_EXPORT rtError_t rtKernelLaunchWithHandleV2(void *hdl, const uint64_t tilingKey,
                                                uint32_t blockDim, rtArgsEx_t *argsInfo,
                                                rtSmDesc_t *smDesc, rtStream_t stm,
                                                const rtTaskCfgInfo_t *cfgInfo)
{
    (void)tilingKey;
    (void)blockDim;
    (void)argsInfo;
    (void)smDesc;
    (void)cfgInfo;
    return launch_by_key(hdl, stm);
}

SIM_EXPORT rtError_t rtKernelLaunchWithFlagV2(const void *stubFunc, uint32_t blockDim,
                                              rtArgsEx_t *argsInfo, rtSmDesc_t *smDesc,
                                              rtStream_t stm, uint32_t flags,
                                              const rtTaskCfgInfo_t *cfgInfo)
{
    (void)blockDim;
    (void)argsInfo;
    (void)smDesc;
    (void)flags;
    (void)cfgInfo;
    return launch_by_key(stubFunc, stm);
}

SIM_EXPORT rtError_t rtAicpuKernelLaunchExWithArgs(const uint32_t kernelType,
                                                   const char *const opName,
                                                   const uint32_t blockDim,
                                                   const RtAicpuArgsExT *argsInfo,
                                                   void **const smDesc, void *const stm,
                                                   const uint32_t flags)
{
    (void)kernelType;
    (void)blockDim;
    (void)argsInfo;
    (void)smDesc;
    (void)flags;
    report_launch(opName ? opName : "aicpu_kernel", stm, 1 /* AI CPU */);
    return RT_ERROR_NONE;
}

SIM_EXPORT rtError_t rtLaunchKernelByFuncHandle(void *funcHandle, uint32_t blockDim,
                                                void *argsHandle, void *stm)
{
    (void)blockDim;
    (void)argsHandle;
    return launch_by_key(funcHandle, stm);
}

SIM_EXPORT rtError_t rtLaunchKernelByFuncHandleV2(void *funcHandle, uint32_t blockDim,
                                                  void *argsHandle, void *stm,
                                                  const RtTaskCfgInfoT *cfgInfo)
{
    (void)blockDim;
    (void)argsHandle;
    (void)cfgInfo;
    return launch_by_key(funcHandle, stm);
}
