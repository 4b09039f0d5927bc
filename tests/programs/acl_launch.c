/*
 * Kernel launches through every hooked entry point of abi.md §3.5, each
 * once, on device 0 and a created stream. The stand-in runtime names them
 * through the profiling callbacks (GET_HASH_ID, then a task-track record).
 * An aclrt* launch forwards to an rt* launch inside the stand-ins, so a
 * tracer that hooks both families must count each launch once.
 *
 *   1 aclrtLaunchKernel           K_acl_impl       (-> aclrtLaunchKernelImpl -> rtLaunchKernelByFuncHandle)
 *   2 aclrtLaunchKernelV2         K_acl_v2         (-> aclrtLaunchKernelV2Impl -> rt...ByFuncHandleV2)
 *   3 aclrtLaunchKernelWithConfig K_acl_config     (-> ...Impl -> rt...ByFuncHandleV2)
 *   4 aclrtLaunchKernelWithHostArgs K_acl_host_args
 *   5 rtKernelLaunch              K_rt_stub        (stub registered with rtFunctionRegister)
 *   6 rtKernelLaunchWithHandleV2  K_rt_handle_v2
 *   7 rtKernelLaunchWithFlagV2    K_rt_flag_v2     (stub)
 *   8 rtAicpuKernelLaunchExWithArgs K_rt_aicpu     (named by opName)
 *   9 rtLaunchKernelByFuncHandle  K_rt_func
 *  10 rtLaunchKernelByFuncHandleV2 K_rt_func_v2
 * Prints "launched 10" and exits 0 when every call returned 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim_npu.h"

aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtBinaryGetFunction(aclrtBinHandle binHandle, const char *kernelName,
                                aclrtFuncHandle *funcHandle);
aclError aclrtLaunchKernel(aclrtFuncHandle f, uint32_t blockDim, const void *argsData,
                           size_t argsSize, aclrtStream stream);
aclError aclrtLaunchKernelV2(aclrtFuncHandle f, uint32_t blockDim, const void *argsData,
                             size_t argsSize, aclrtLaunchKernelCfg *cfg, aclrtStream stream);
aclError aclrtLaunchKernelWithConfig(aclrtFuncHandle f, uint32_t blockDim, aclrtStream stream,
                                     aclrtLaunchKernelCfg *cfg, void *argsHandle, void *reserve);
aclError aclrtLaunchKernelWithHostArgs(aclrtFuncHandle f, uint32_t blockDim, aclrtStream stream,
                                       aclrtLaunchKernelCfg *cfg, void *hostArgs,
                                       size_t argsSize, aclrtPlaceHolderInfo *ph, size_t phNum);

static void *fn(const char *name)
{
    void *h = NULL;
    return aclrtBinaryGetFunction(NULL, name, &h) == 0 ? h : NULL;
}

int main(void)
{
    aclrtStream s = NULL;
    if (aclrtSetDevice(0) != 0 || aclrtCreateStream(&s) != 0)
        return 1;
    static char stub_a[8], stub_b[8];
    if (rtFunctionRegister(NULL, stub_a, "K_rt_stub", NULL, 0) != 0 ||
        rtFunctionRegister(NULL, stub_b, "K_rt_flag_v2", NULL, 0) != 0)
        return 1;
    uint64_t args[2] = {1, 2};
    aclrtLaunchKernelCfg cfg = {NULL, 0};
    rtArgsEx_t ex;
    memset(&ex, 0, sizeof ex);
    RtAicpuArgsExT aicpu;
    memset(&aicpu, 0, sizeof aicpu);
    int rc[10];
    rc[0] = aclrtLaunchKernel(fn("K_acl_impl"), 1, args, sizeof args, s);
    rc[1] = aclrtLaunchKernelV2(fn("K_acl_v2"), 1, args, sizeof args, &cfg, s);
    rc[2] = aclrtLaunchKernelWithConfig(fn("K_acl_config"), 1, s, &cfg, args, NULL);
    rc[3] = aclrtLaunchKernelWithHostArgs(fn("K_acl_host_args"), 1, s, &cfg, args, sizeof args,
                                          NULL, 0);
    rc[4] = rtKernelLaunch(stub_a, 1, args, sizeof args, NULL, s);
    rc[5] = rtKernelLaunchWithHandleV2(fn("K_rt_handle_v2"), 0, 1, &ex, NULL, s, NULL);
    rc[6] = rtKernelLaunchWithFlagV2(stub_b, 1, &ex, NULL, s, 0, NULL);
    rc[7] = rtAicpuKernelLaunchExWithArgs(0, "K_rt_aicpu", 1, &aicpu, NULL, s, 0);
    rc[8] = rtLaunchKernelByFuncHandle(fn("K_rt_func"), 1, args, s);
    rc[9] = rtLaunchKernelByFuncHandleV2(fn("K_rt_func_v2"), 1, args, s, NULL);
    int n = 0;
    for (int i = 0; i < 10; i++) {
        if (rc[i] != 0) {
            fprintf(stderr, "launch %d returned %d\n", i + 1, rc[i]);
            return 1;
        }
        n++;
    }
    printf("launched %d\n", n);
    return 0;
}
