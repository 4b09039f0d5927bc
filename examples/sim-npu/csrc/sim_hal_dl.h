/*
 * Header-only helper for test programs that are linked only against
 * libms_tools_ext.so but need "device" memory from the HAL stand-in.
 *
 * It dlopens libascend_hal.so RTLD_GLOBAL (by bare name through the
 * program's RPATH/RUNPATH, then from $SIM_NPU_DIR/lib64) and then resolves
 * halMemAlloc/halMemFree with dlsym(RTLD_DEFAULT, ...). The RTLD_DEFAULT
 * lookup matters: it finds an LD_PRELOADed tracer's halMemAlloc first,
 * exactly as a PLT call from a linked program would, whereas
 * dlsym(handle, ...) would bypass the tracer.
 */
#ifndef SIM_HAL_DL_H
#define SIM_HAL_DL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim_npu.h"

typedef drvError_t (*sim_hal_alloc_fn)(void **, unsigned long long, unsigned long long);
typedef drvError_t (*sim_hal_free_fn)(void *);

struct sim_hal {
    sim_hal_alloc_fn alloc;
    sim_hal_free_fn free;
};

/* Returns 0 on success; prints the reason to stderr and returns -1 if the
 * HAL cannot be loaded. */
static inline int sim_hal_open(struct sim_hal *hal)
{
    void *h = dlopen("libascend_hal.so", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        const char *dir = getenv("SIM_NPU_DIR");
        if (dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/lib64/libascend_hal.so", dir);
            h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        }
    }
    if (!h) {
        fprintf(stderr, "cannot load libascend_hal.so: %s\n", dlerror());
        return -1;
    }
    hal->alloc = (sim_hal_alloc_fn)dlsym(RTLD_DEFAULT, "halMemAlloc");
    hal->free = (sim_hal_free_fn)dlsym(RTLD_DEFAULT, "halMemFree");
    if (!hal->alloc || !hal->free) {
        fprintf(stderr, "halMemAlloc/halMemFree not found\n");
        return -1;
    }
    return 0;
}

#endif /* SIM_HAL_DL_H */
