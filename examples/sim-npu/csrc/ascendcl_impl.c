/*
 * libascendcl_impl.so stand-in: the *Impl layer between the public ACL
 * library and the runtime (abi.md §3.4, §3.5).
 *
 * A tracer calls aclrtGetDeviceImpl and aclrtStreamGetIdImpl directly, and
 * interposes aclrtLaunchKernelImpl / aclrtLaunchKernelV2Impl. As in the
 * real runtime, every aclrt launch here forwards to an rt launch through
 * the PLT, so a tracer that hooks both families sees the nested rt call
 * and must count the launch once.
 */
#include <stddef.h>
#include <stdint.h>

#include "sim_npu.h"

#define ACL_MEM_MALLOC_HUGE_FIRST 0
#define ACL_MEM_MALLOC_HUGE_ONLY 1
#define ACL_MEM_MALLOC_NORMAL_ONLY 2

SIM_EXPORT aclError aclrtSetDeviceImpl(int32_t deviceId)
{
    return rtSetDevice(deviceId);
}

SIM_EXPORT aclError aclrtGetDeviceImpl(int32_t *deviceId)
{
    return rtGetDevice(deviceId);
}

/* Must accept a NULL stream (the default stream, id 0): a tracer asks for
 * the stream id of every mark, and most marks carry no stream. */
SIM_EXPORT aclError aclrtStreamGetIdImpl(aclrtStream stream, int32_t *streamId)
{
    if (!streamId)
        return ACL_ERROR_INVALID_PARAM;
    return rtGetStreamId(stream, streamId);
}

SIM_EXPORT aclError aclrtCreateStreamImpl(aclrtStream *stream)
{
    return rtStreamCreate(stream, 0);
}

SIM_EXPORT aclError aclrtDestroyStreamImpl(aclrtStream stream)
{
    return rtStreamDestroy(stream);
}

/* aclrtMalloc's module id is APP (33), so its HAL flag decodes like the
 * torch_npu example in abi.md §2.3. */
SIM_EXPORT aclError aclrtMallocImpl(void **devPtr, size_t size, int policy)
{
    uint32_t type;
    switch (policy) {
    case ACL_MEM_MALLOC_HUGE_ONLY:
        type = SIM_RT_MEMORY_POLICY_HUGE_PAGE_ONLY;
        break;
    case ACL_MEM_MALLOC_NORMAL_ONLY:
        type = SIM_RT_MEMORY_POLICY_DEFAULT_PAGE_ONLY;
        break;
    default:
        type = SIM_RT_MEMORY_POLICY_HUGE_PAGE_FIRST;
        break;
    }
    return rtMalloc(devPtr, size, type, (uint16_t)SIM_MODULE_APP);
}

SIM_EXPORT aclError aclrtFreeImpl(void *devPtr)
{
    return rtFree(devPtr);
}

SIM_EXPORT aclError aclrtBinaryGetFunctionImpl(aclrtBinHandle binHandle, const char *kernelName,
                                               aclrtFuncHandle *funcHandle)
{
    return rtFuncGetByName(binHandle, kernelName, funcHandle);
}

SIM_EXPORT aclError aclrtLaunchKernelImpl(void *funcHandle, uint32_t blockDim,
                                          const void *argsData, size_t argsSize,
                                          aclrtStream stream)
{
    (void)argsData;
    (void)argsSize;
    return rtLaunchKernelByFuncHandle(funcHandle, blockDim, NULL, stream);
}

SIM_EXPORT aclError aclrtLaunchKernelV2Impl(void *funcHandle, uint32_t blockDim,
                                            const void *argsData, size_t argsSize,
                                            aclrtLaunchKernelCfg *cfg, aclrtStream stream)
{
    (void)argsData;
    (void)argsSize;
    (void)cfg;
    return rtLaunchKernelByFuncHandleV2(funcHandle, blockDim, NULL, stream, NULL);
}

SIM_EXPORT aclError aclrtLaunchKernelWithConfigImpl(void *funcHandle, uint32_t blockDim,
                                                    aclrtStream stream,
                                                    aclrtLaunchKernelCfg *cfg, void *argsHandle,
                                                    void *reserve)
{
    (void)cfg;
    (void)reserve;
    return rtLaunchKernelByFuncHandleV2(funcHandle, blockDim, argsHandle, stream, NULL);
}

SIM_EXPORT aclError aclrtLaunchKernelWithHostArgsImpl(void *funcHandle, uint32_t blockDim,
                                                      aclrtStream stream,
                                                      aclrtLaunchKernelCfg *cfg, void *hostArgs,
                                                      size_t argsSize,
                                                      aclrtPlaceHolderInfo *placeHolderArray,
                                                      size_t placeHolderNum)
{
    (void)cfg;
    (void)argsSize;
    (void)placeHolderArray;
    (void)placeHolderNum;
    return rtLaunchKernelByFuncHandleV2(funcHandle, blockDim, hostArgs, stream, NULL);
}
