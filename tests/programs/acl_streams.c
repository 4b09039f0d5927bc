/*
 * Two streams ordered by an event (issue 36): the calls a cross-stream
 * check needs, each once, on device 0, in this order:
 *
 *    1 aclrtCreateStream(&s1)            6 aclrtStreamWaitEvent(s2, e)
 *    2 aclrtCreateStream(&s2)            7 aclrtLaunchKernelWithHostArgs  K_consumer on s2
 *    3 aclrtCreateEvent(&e)              8 aclrtLaunchKernel              K_default on NULL
 *    4 aclrtLaunchKernelWithConfig       9 aclrtSynchronizeStream(s2)
 *        K_producer on s1               10 aclrtSynchronizeEvent(e)
 *    5 aclrtRecordEvent(e, s1)          11 aclrtSynchronizeDevice()
 *                                       12 aclrtDestroyEvent(e)
 *                                       13 aclrtDestroyStream(s2), 14 (s1)
 *
 * plus two calls that fail (a NULL event), which a tracer must not count.
 * Prints "s1 0x..", "s2 0x..", "e 0x.." and "streams ok"; exits 0 when
 * every call that should succeed did.
 */
#include <stdint.h>
#include <stdio.h>

#include "sim_npu.h"

aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtCreateEvent(aclrtEvent *event);
aclError aclrtDestroyEvent(aclrtEvent event);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtSynchronizeEvent(aclrtEvent event);
aclError aclrtSynchronizeDevice(void);
aclError aclrtBinaryGetFunction(aclrtBinHandle binHandle, const char *kernelName,
                                aclrtFuncHandle *funcHandle);
aclError aclrtLaunchKernel(aclrtFuncHandle f, uint32_t blockDim, const void *argsData,
                           size_t argsSize, aclrtStream stream);
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

#define CHECK(call)                                                  \
    do {                                                             \
        int rc_ = (call);                                            \
        if (rc_ != 0) {                                              \
            fprintf(stderr, "%s returned %d\n", #call, rc_);         \
            return 1;                                                \
        }                                                            \
    } while (0)

int main(void)
{
    aclrtStream s1 = NULL, s2 = NULL;
    aclrtEvent e = NULL;
    uint64_t args[2] = {1, 2};
    aclrtLaunchKernelCfg cfg = {NULL, 0};
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&s1));
    CHECK(aclrtCreateStream(&s2));
    CHECK(aclrtCreateEvent(&e));
    CHECK(aclrtLaunchKernelWithConfig(fn("K_producer"), 1, s1, &cfg, args, NULL));
    CHECK(aclrtRecordEvent(e, s1));
    CHECK(aclrtStreamWaitEvent(s2, e));
    CHECK(aclrtLaunchKernelWithHostArgs(fn("K_consumer"), 1, s2, &cfg, args, sizeof args, NULL,
                                        0));
    CHECK(aclrtLaunchKernel(fn("K_default"), 1, args, sizeof args, NULL));
    CHECK(aclrtSynchronizeStream(s2));
    CHECK(aclrtSynchronizeEvent(e));
    CHECK(aclrtSynchronizeDevice());
    if (aclrtRecordEvent(NULL, s1) == 0 || aclrtSynchronizeEvent(NULL) == 0) {
        fprintf(stderr, "a NULL event was accepted\n");
        return 1;
    }
    CHECK(aclrtDestroyEvent(e));
    CHECK(aclrtDestroyStream(s2));
    CHECK(aclrtDestroyStream(s1));
    printf("s1 0x%llx\ns2 0x%llx\ne 0x%llx\n", (unsigned long long)(uintptr_t)s1,
           (unsigned long long)(uintptr_t)s2, (unsigned long long)(uintptr_t)e);
    printf("streams ok\n");
    return 0;
}
