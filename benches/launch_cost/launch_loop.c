/*
 * The measured loop of benches/launch_cost (issue 36): what the race check
 * asks the job's thread to pay. argv: N MODE, MODE one of
 *   launch  aclrtLaunchKernel on a created stream (its KERNEL_LAUNCH row
 *           with the stream, when launches are collected)
 *   mark    a sanitizer-op: mark with three tensors, on the stream (how a
 *           custom operator reports its accesses)
 *   sync    aclrtRecordEvent + aclrtStreamWaitEvent (two SYSTEM rows)
 * on the sim-npu stand-ins (libascendcl's calls do no device work).
 * Prints "ns_per_op <wall> <thread cpu>".
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mstx_api.h"
#include "sim_npu.h"

aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtCreateEvent(aclrtEvent *event);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError aclrtSynchronizeDevice(void);
aclError aclrtBinaryGetFunction(aclrtBinHandle binHandle, const char *kernelName,
                                aclrtFuncHandle *funcHandle);
aclError aclrtLaunchKernel(aclrtFuncHandle f, uint32_t blockDim, const void *argsData,
                           size_t argsSize, aclrtStream stream);

static double now(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    const char *mode = argc > 2 ? argv[2] : "launch";
    aclrtStream s1 = NULL, s2 = NULL;
    aclrtEvent e = NULL;
    aclrtFuncHandle f = NULL;
    uint64_t args[2] = {1, 2};
    if (aclrtSetDevice(0) || aclrtCreateStream(&s1) || aclrtCreateStream(&s2) ||
        aclrtCreateEvent(&e) || aclrtBinaryGetFunction(NULL, "K_bench", &f)) {
        fprintf(stderr, "launch_loop: setup failed\n");
        return 1;
    }
    const char *msg = "sanitizer-op: name=my_ext.fused;read=a:0x7f0000:1024,b:0x7f1000:512;"
                      "write=out:0x7f2000:2048";
    int m = strcmp(mode, "launch") == 0 ? 0 : strcmp(mode, "mark") == 0 ? 1
          : strcmp(mode, "sync") == 0 ? 2 : -1;
    if (m < 0) {
        fprintf(stderr, "launch_loop: unknown mode %s\n", mode);
        return 2;
    }
    double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < n; i++) {
        switch (m) {
        case 0:
            aclrtLaunchKernel(f, 1, args, sizeof args, s1);
            break;
        case 1:
            mstxMarkA(msg, s1);
            break;
        default:
            aclrtRecordEvent(e, s1);
            aclrtStreamWaitEvent(s2, e);
            break;
        }
    }
    double w1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_THREAD_CPUTIME_ID);
    aclrtSynchronizeDevice();
    printf("ns_per_op %.1f %.1f\n", (w1 - w0) / n, (c1 - c0) / n);
    return 0;
}
