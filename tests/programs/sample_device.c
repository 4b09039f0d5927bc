/*
 * Device memory for `--sample` (issue 25), over the sim-npu stand-ins (linked):
 *   aclInit; aclrtSetDevice(0); idle 1.2 s; aclrtMalloc 64 MiB (a HAL block); idle 3 s;
 *   aclrtFree; idle 1.2 s; aclFinalize.
 * With SIM_NPU_OTHER_PROCESS_BYTES, "other processes" hold that much of every device: the
 * device's used memory is the live HAL blocks plus that, so untracked = the other bytes.
 * Exits 0 (1 on an unexpected result).
 */
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "sim_npu.h"

aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtMalloc(void **devPtr, size_t size, int policy);
aclError aclrtFree(void *devPtr);

int main(void)
{
    void *p = NULL;
    if (aclInit(NULL) != 0 || aclrtSetDevice(0) != 0)
        return 1;
    usleep(1200 * 1000);
    if (aclrtMalloc(&p, 64 << 20, 0) != 0 || !p)
        return 1;
    usleep(3000 * 1000);
    if (aclrtFree(p) != 0)
        return 1;
    usleep(1200 * 1000);
    return aclFinalize() != 0;
}
