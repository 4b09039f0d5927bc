/*
 * A program that controls collection only through the probe's C API (issue 18, B5), under
 * `--collect-mode deferred`, over the sim-npu stand-ins:
 *   aclInit; aclrtSetDevice(2); aclrtMalloc(1 MiB) "before"   (outside the window: shadow)
 *   memscope_start()
 *   steps 1..4: memscope_step(); aclrtMalloc(1 MiB) / aclrtFree
 *   memscope_stop(); aclrtFree("before"); aclFinalize
 * The API is reached through weak references (resolved to the preloaded probe). Prints the
 * calls' results ("api 0 0 0 0 0 0"); exits 0, 1 on an ACL failure, 3 without the probe.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "memscope_probe.h"
#include "sim_npu.h"

#pragma weak memscope_start
#pragma weak memscope_stop
#pragma weak memscope_step

aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtMalloc(void **devPtr, size_t size, int policy);
aclError aclrtFree(void *devPtr);

int main(void)
{
    if (!memscope_start || !memscope_stop || !memscope_step)
        return 3;
    void *before = NULL;
    if (aclInit(NULL) != 0 || aclrtSetDevice(2) != 0 || aclrtMalloc(&before, 1 << 20, 0) != 0)
        return 1;
    int r[6];
    r[0] = memscope_start();
    for (int s = 0; s < 4; s++) {
        r[1 + (s < 3 ? s : 2)] = memscope_step();
        void *p = NULL;
        if (aclrtMalloc(&p, 1 << 20, 0) != 0 || aclrtFree(p) != 0)
            return 1;
    }
    r[4] = memscope_stop();
    r[5] = aclrtFree(before);
    aclFinalize();
    printf("api %d %d %d %d %d %d\n", r[0], r[1], r[2], r[3], r[4], r[5]);
    return 0;
}
