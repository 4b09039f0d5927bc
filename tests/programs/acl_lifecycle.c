/*
 * ACL lifecycle, current device and pinned host memory (abi.md §3.1-§3.2),
 * over the stand-ins (linked: calls go through the PLT).
 *
 *   aclInit(NULL)
 *   aclrtSetDevice(2)
 *   mstxMarkA("after set device")            (its row takes the thread's device)
 *   aclrtHostRegisterV2(a, 1 MiB, PINNED)     -> HOST MALLOC, pinned
 *   aclrtHostRegisterV2(b, 4096, 0)           -> not pinned: no row
 *   aclrtHostRegisterV2(c, 64 KiB, PINNED)    -> HOST MALLOC, pinned
 *   aclrtHostUnregister(a)                    -> HOST FREE
 *   aclrtHostUnregister(b)                    -> nothing
 *   aclrtHostUnregister(a) again              -> fails (error 100000): a warning
 *   aclrtHostUnregister(c)                    -> HOST FREE
 *   aclFinalize()
 * Prints "a <ptr>" and "c <ptr>"; exits 0 (1 on an unexpected result).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mstx_api.h"
#include "sim_npu.h"

aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtHostRegisterV2(void *ptr, uint64_t size, uint32_t flag);
aclError aclrtHostUnregister(void *ptr);

int main(void)
{
    char *a = malloc(1 << 20), *b = malloc(4096), *c = malloc(64 << 10);
    if (aclInit(NULL) != 0 || aclrtSetDevice(2) != 0)
        return 1;
    mstxMarkA("after set device", NULL);
    if (aclrtHostRegisterV2(a, 1 << 20, ACL_HOST_REG_PINNED) != 0 ||
        aclrtHostRegisterV2(b, 4096, 0) != 0 ||
        aclrtHostRegisterV2(c, 64 << 10, ACL_HOST_REG_PINNED) != 0)
        return 1;
    printf("a %p\nc %p\n", (void *)a, (void *)c);
    if (aclrtHostUnregister(a) != 0 || aclrtHostUnregister(b) != 0)
        return 1;
    if (aclrtHostUnregister(a) == 0)
        return 1;
    if (aclrtHostUnregister(c) != 0 || aclFinalize() != 0)
        return 1;
    free(a);
    free(b);
    free(c);
    return 0;
}
