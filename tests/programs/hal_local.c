/*
 * The verified pitfall of abi.md §2.5: the HAL reaches the process only as
 * a dependency of a library opened RTLD_LOCAL, so dlsym(RTLD_DEFAULT,
 * "halMemAllocInner") and RTLD_NEXT cannot see it. libruntime.so is opened
 * RTLD_LOCAL from $SIM_NPU_DIR/lib64; its rtMalloc calls halMemAlloc
 * through the PLT, which binds to a preloaded hook. The hook must still
 * find the driver (through an explicit handle) instead of failing.
 *
 *   rtSetDevice(0); rtMalloc(&p, 3 MiB, huge page first, module HCCL); rtFree(p)
 * Prints "rtMalloc <rc>" and "rtFree <rc>"; exits 0 when both are 0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    const char *dir = getenv("SIM_NPU_DIR");
    if (!dir) {
        fprintf(stderr, "SIM_NPU_DIR is not set\n");
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/lib64/libruntime.so", dir);
    void *rt = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!rt) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    int (*set_device)(int32_t) = (int (*)(int32_t))dlsym(rt, "rtSetDevice");
    int (*rt_malloc)(void **, uint64_t, uint32_t, uint16_t) =
        (int (*)(void **, uint64_t, uint32_t, uint16_t))dlsym(rt, "rtMalloc");
    int (*rt_free)(void *) = (int (*)(void *))dlsym(rt, "rtFree");
    if (!set_device || !rt_malloc || !rt_free || set_device(0) != 0)
        return 1;
    void *p = NULL;
    int rc = rt_malloc(&p, 3 << 20, 0x400 /* huge page first */, 3 /* HCCL */);
    printf("rtMalloc %d\n", rc);
    int rc2 = rc == 0 ? rt_free(p) : -1;
    printf("rtFree %d\n", rc2);
    return rc == 0 && rc2 == 0 ? 0 : 1;
}
