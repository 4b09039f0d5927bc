/*
 * Shared declarations for the simulated CANN stand-in libraries.
 *
 * Every struct here mirrors a layout from abi.md (x86_64 / LP64); the
 * _Static_asserts at the bottom pin the sizes and offsets the tracer reads,
 * so a typo here fails the build instead of silently corrupting a test.
 *
 * Functions prefixed `sim_` are NOT part of CANN. They are small helpers
 * one stand-in exports for another (e.g. DCMI asks the HAL for its live
 * byte count) and are documented where they are defined.
 */
#ifndef SIM_NPU_H
#define SIM_NPU_H

#include <stddef.h>
#include <stdint.h>

#include "mstx_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIM_EXPORT __attribute__((visibility("default")))

/* ===================================================================== */
/* §2 HAL                                                                 */
/* ===================================================================== */

typedef int drvError_t;
#define DRV_ERROR_NONE 0
#define DRV_ERROR_INVALID_VALUE 3
#define DRV_ERROR_OUT_OF_MEMORY 6
#define DRV_ERROR_NOT_SUPPORT 0xfffe
#define DRV_ERROR_RESERVED 0xffff

typedef struct drv_mem_handle drv_mem_handle_t;   /* opaque to callers */

struct drv_mem_prop {          /* size 32, align 8 */
    uint32_t side;
    uint32_t devid;
    uint32_t module_id;
    uint32_t pg_type;          /* 0 normal 4 KiB, 1 huge 2 MiB, 2 giant 1 GiB */
    uint32_t mem_type;
    uint64_t reserve;
};

/* §2.3 halMemAlloc flag layout. */
#define SIM_FLAG_DEVID_MASK 0x3FFULL
#define SIM_FLAG_MEMTYPE_SHIFT 10
#define SIM_FLAG_MEMTYPE_MASK 0x3C00ULL
#define SIM_MEMTYPE_SVM 0ULL
#define SIM_MEMTYPE_DEVICE 1ULL
#define SIM_MEMTYPE_HOST 2ULL
#define SIM_MEMTYPE_DVPP 3ULL
#define SIM_FLAG_HUGE_PAGE (1ULL << 17)
#define SIM_FLAG_GIANT_PAGE (1ULL << 31)
#define SIM_FLAG_MODULE_SHIFT 56

/* §2.4 module ids used by the stand-ins. */
#define SIM_MODULE_RUNTIME 7ULL
#define SIM_MODULE_APP 33ULL
#define SIM_MODULE_ASCENDCL 48ULL

#define SIM_HAL_FLAG(module, memtype, page, dev)                                          \
    (((uint64_t)(module) << SIM_FLAG_MODULE_SHIFT) | (page) |                              \
     ((uint64_t)(memtype) << SIM_FLAG_MEMTYPE_SHIFT) | ((uint64_t)(dev) & SIM_FLAG_DEVID_MASK))

/* Upper bound for device ids: the flag has 10 bits of device id. */
#define SIM_MAX_DEVICES 1024

drvError_t halMemAlloc(void **pp, unsigned long long size, unsigned long long flag);
drvError_t halMemFree(void *pp);
drvError_t halMemCreate(drv_mem_handle_t **handle, size_t size, const struct drv_mem_prop *prop,
                        uint64_t flag);
drvError_t halMemRelease(drv_mem_handle_t *handle);
drvError_t halMemAllocInner(void **pp, unsigned long long size, unsigned long long flag);
drvError_t halMemFreeInner(void *pp);
drvError_t halMemCreateInner(drv_mem_handle_t **handle, size_t size,
                             const struct drv_mem_prop *prop, uint64_t flag);
drvError_t halMemReleaseInner(drv_mem_handle_t *handle);
drvError_t halGetDeviceInfo(uint32_t devId, int32_t moduleType, int32_t infoType, int64_t *value);

/* Sim helpers exported by libascend_hal.so. */
uint64_t sim_hal_live_bytes(uint32_t dev);     /* bytes held on `dev` (device-side types) */
uint64_t sim_hal_hbm_limit(void);              /* SIM_NPU_HBM_LIMIT, or UINT64_MAX */
uint64_t sim_hal_other_bytes(void);            /* SIM_NPU_OTHER_PROCESS_BYTES, or 0 */
uint32_t sim_hal_device_count(void);           /* SIM_NPU_DEVICE_COUNT, default 8 */

/* ===================================================================== */
/* §3 ACL / runtime                                                       */
/* ===================================================================== */

typedef int aclError;
typedef int rtError_t;
typedef void *rtStream_t;
typedef void *aclrtFuncHandle;
typedef void *aclrtBinHandle;
typedef void *aclrtEvent;

#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_RT_PARAM_INVALID 107000
#define ACL_ERROR_RT_CONTEXT_NULL 107002
#define ACL_ERROR_RT_MEMORY_ALLOCATION 207001
#define RT_ERROR_NONE 0

#define ACL_HOST_REG_PINNED 0x10000000u
#define ACL_HBM_MEM 1

/* rtMalloc memory policy bits (subset). */
#define SIM_RT_MEMORY_POLICY_HUGE_PAGE_FIRST 0x400u
#define SIM_RT_MEMORY_POLICY_HUGE_PAGE_ONLY 0x800u
#define SIM_RT_MEMORY_POLICY_DEFAULT_PAGE_ONLY 0x1000u

typedef struct rtSmDesc rtSmDesc_t;   /* opaque */

typedef struct rtArgsEx {             /* size 32 */
    void *args;
    void *hostInputInfoPtr;
    uint32_t argsSize;
    uint16_t tilingAddrOffset;
    uint16_t tilingDataOffset;
    uint16_t hostInputInfoNum;
    uint8_t hasTiling;
    uint8_t isNoNeedH2DCopy;
    uint8_t reserved[4];
} rtArgsEx_t;

typedef struct rtTaskCfgInfo {        /* size 4 */
    uint8_t qos;
    uint8_t partId;
    uint8_t schemMode;
    uint8_t res;
} rtTaskCfgInfo_t;

typedef struct RtTaskCfgInfo {        /* size 12 */
    uint8_t qos;
    uint8_t partId;
    uint8_t schemMode;
    uint8_t d2dCrossFlag;
    uint32_t blockDimOffset;
    uint8_t dumpflag;
} RtTaskCfgInfoT;

typedef struct RtAicpuArgsEx {        /* size 48; never read by the stand-ins */
    uint8_t opaque[48];
} RtAicpuArgsExT;

typedef struct aclrtLaunchKernelAttr {  /* size 20 */
    int id;
    uint8_t value[16];
} aclrtLaunchKernelAttr;

typedef struct aclrtLaunchKernelCfg {   /* size 16 */
    aclrtLaunchKernelAttr *attrs;
    size_t numAttrs;
} aclrtLaunchKernelCfg;

typedef struct aclrtPlaceHolderInfo {   /* size 8 */
    uint32_t addrOffset;
    uint32_t dataOffset;
} aclrtPlaceHolderInfo;

/* libruntime.so */
rtError_t rtSetDevice(int32_t deviceId);
rtError_t rtGetDevice(int32_t *deviceId);
rtError_t rtGetDeviceCount(int32_t *count);
rtError_t rtMalloc(void **devPtr, uint64_t size, uint32_t type, uint16_t moduleId);
rtError_t rtFree(void *devPtr);
rtError_t rtStreamCreate(rtStream_t *stm, int32_t priority);
rtError_t rtStreamDestroy(rtStream_t stm);
rtError_t rtGetStreamId(rtStream_t stm, int32_t *streamId);
rtError_t rtFunctionRegister(void *binHandle, const void *stubFunc, const char *stubName,
                             const void *kernelInfoExt, uint32_t funcMode);
rtError_t rtFuncGetByName(void *binHandle, const char *kernelName, void **funcHandle);
rtError_t rtKernelLaunch(const void *stubFunc, uint32_t blockDim, void *args, uint32_t argsSize,
                         rtSmDesc_t *smDesc, rtStream_t stm);
rtError_t rtKernelLaunchWithHandleV2(void *hdl, const uint64_t tilingKey, uint32_t blockDim,
                                     rtArgsEx_t *argsInfo, rtSmDesc_t *smDesc, rtStream_t stm,
                                     const rtTaskCfgInfo_t *cfgInfo);
rtError_t rtKernelLaunchWithFlagV2(const void *stubFunc, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                   rtSmDesc_t *smDesc, rtStream_t stm, uint32_t flags,
                                   const rtTaskCfgInfo_t *cfgInfo);
rtError_t rtAicpuKernelLaunchExWithArgs(const uint32_t kernelType, const char *const opName,
                                        const uint32_t blockDim, const RtAicpuArgsExT *argsInfo,
                                        void **const smDesc, void *const stm,
                                        const uint32_t flags);
rtError_t rtLaunchKernelByFuncHandle(void *funcHandle, uint32_t blockDim, void *argsHandle,
                                     void *stm);
rtError_t rtLaunchKernelByFuncHandleV2(void *funcHandle, uint32_t blockDim, void *argsHandle,
                                       void *stm, const RtTaskCfgInfoT *cfgInfo);

/* libascendcl_impl.so */
aclError aclrtSetDeviceImpl(int32_t deviceId);
aclError aclrtGetDeviceImpl(int32_t *deviceId);
aclError aclrtStreamGetIdImpl(aclrtStream stream, int32_t *streamId);
aclError aclrtCreateStreamImpl(aclrtStream *stream);
aclError aclrtDestroyStreamImpl(aclrtStream stream);
aclError aclrtMallocImpl(void **devPtr, size_t size, int policy);
aclError aclrtFreeImpl(void *devPtr);
aclError aclrtBinaryGetFunctionImpl(aclrtBinHandle binHandle, const char *kernelName,
                                    aclrtFuncHandle *funcHandle);
aclError aclrtLaunchKernelImpl(void *funcHandle, uint32_t blockDim, const void *argsData,
                               size_t argsSize, aclrtStream stream);
aclError aclrtLaunchKernelV2Impl(void *funcHandle, uint32_t blockDim, const void *argsData,
                                 size_t argsSize, aclrtLaunchKernelCfg *cfg, aclrtStream stream);
aclError aclrtLaunchKernelWithConfigImpl(void *funcHandle, uint32_t blockDim, aclrtStream stream,
                                         aclrtLaunchKernelCfg *cfg, void *argsHandle,
                                         void *reserve);
aclError aclrtLaunchKernelWithHostArgsImpl(void *funcHandle, uint32_t blockDim,
                                           aclrtStream stream, aclrtLaunchKernelCfg *cfg,
                                           void *hostArgs, size_t argsSize,
                                           aclrtPlaceHolderInfo *placeHolderArray,
                                           size_t placeHolderNum);

/* ===================================================================== */
/* §3.6 profiling                                                         */
/* ===================================================================== */

#define SIM_PROF_CB_COUNT 14
#define PROFILE_REPORT_COMPACT_CALLBACK 4
#define PROFILE_REPORT_API_C_CALLBACK 9
#define PROFILE_REPORT_GET_HASH_ID_C_CALLBACK 12

#define MSPROF_REPORT_RUNTIME_LEVEL 5000
#define MSPROF_REPORT_RUNTIME_TASK_TRACK_TYPE 802
#define MSPROF_COMPACT_INFO_MAGIC 0x5a5a

typedef uint64_t (*sim_hash_cb_t)(const char *hashInfo, size_t len);
typedef int32_t (*sim_compact_cb_t)(uint32_t agingFlag, const void *data, uint32_t length);

typedef struct MsprofRuntimeTrack {   /* size 24 */
    uint16_t deviceId;
    uint16_t streamId;
    uint32_t taskInfo;                /* low 16 bits = task id */
    uint64_t taskType;
    uint64_t kernelName;              /* hash id from the GET_HASH_ID callback */
} MsprofRuntimeTrack;

typedef struct MsprofCompactInfo {    /* size 64 */
    uint16_t magicNumber;
    uint16_t level;
    uint32_t type;
    uint32_t threadId;
    uint32_t dataLen;
    uint64_t timeStamp;
    union {
        uint8_t info[40];
        MsprofRuntimeTrack runtimeTrack;
    } data;
} MsprofCompactInfo;

int32_t MsprofRegisterProfileCallback(int32_t callbackType, void *callback, uint32_t len);
int32_t profSetProfCommand(void *commandHandle, uint32_t len);
uint64_t MsprofGetHashId(const char *hashInfo, size_t length);
int32_t MsprofReportCompactInfo(uint32_t agingFlag, const void *data, uint32_t length);

/* ===================================================================== */
/* §5 DCMI                                                                */
/* ===================================================================== */

struct dcmi_hbm_info {                /* size 32 */
    unsigned long long memory_size;   /* MB */
    unsigned int freq;
    unsigned long long memory_usage;  /* MB */
    int temp;
    unsigned int bandwith_util_rate;
};

struct dcmi_proc_mem_info {           /* size 16 */
    int proc_id;
    unsigned long proc_mem_usage;     /* bytes */
};

/* ===================================================================== */
/* Layout checks (abi.md sizes/offsets)                                   */
/* ===================================================================== */

#ifndef __cplusplus
_Static_assert(sizeof(struct drv_mem_prop) == 32, "drv_mem_prop");
_Static_assert(offsetof(struct drv_mem_prop, reserve) == 24, "drv_mem_prop.reserve");
_Static_assert(sizeof(mstxMemVirtualRangeDesc_t) == 24, "range desc");
_Static_assert(offsetof(mstxMemVirtualRangeDesc_t, size) == 16, "range desc size");
_Static_assert(sizeof(mstxMemHeapDesc_t) == 16, "heap desc");
_Static_assert(sizeof(mstxMemRegionsRegisterBatch_t) == 40, "register batch");
_Static_assert(offsetof(mstxMemRegionsRegisterBatch_t, regionCount) == 16, "regionCount");
_Static_assert(offsetof(mstxMemRegionsRegisterBatch_t, regionHandleArrayOut) == 32, "out");
_Static_assert(sizeof(mstxMemRegionRef_t) == 16, "region ref");
_Static_assert(sizeof(mstxMemRegionsUnregisterBatch_t) == 16, "unregister batch");
_Static_assert(sizeof(rtArgsEx_t) == 32, "rtArgsEx_t");
_Static_assert(sizeof(rtTaskCfgInfo_t) == 4, "rtTaskCfgInfo_t");
_Static_assert(sizeof(RtTaskCfgInfoT) == 12, "RtTaskCfgInfoT");
_Static_assert(sizeof(RtAicpuArgsExT) == 48, "RtAicpuArgsExT");
_Static_assert(sizeof(aclrtLaunchKernelAttr) == 20, "aclrtLaunchKernelAttr");
_Static_assert(sizeof(aclrtLaunchKernelCfg) == 16, "aclrtLaunchKernelCfg");
_Static_assert(sizeof(aclrtPlaceHolderInfo) == 8, "aclrtPlaceHolderInfo");
_Static_assert(sizeof(MsprofRuntimeTrack) == 24, "MsprofRuntimeTrack");
_Static_assert(sizeof(MsprofCompactInfo) == 64, "MsprofCompactInfo");
_Static_assert(offsetof(MsprofCompactInfo, data) == 24, "MsprofCompactInfo.data");
_Static_assert(sizeof(struct dcmi_hbm_info) == 32, "dcmi_hbm_info");
_Static_assert(offsetof(struct dcmi_hbm_info, memory_usage) == 16, "memory_usage");
_Static_assert(sizeof(struct dcmi_proc_mem_info) == 16, "dcmi_proc_mem_info");
#endif

#ifdef __cplusplus
}
#endif

#endif /* SIM_NPU_H */
