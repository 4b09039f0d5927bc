/*
 * ATB operators through the fake libatb (abi.md §4, §7), for either C++
 * ABI: the library is $ATB_HOME_PATH/lib/libatb.so, opened RTLD_GLOBAL, or
 * RTLD_LOCAL when argv[1] is "local" (then RTLD_NEXT cannot see it and a
 * tracer must find the originals through the loaded object).
 *
 * The thread's device is set to 0 with the runtime's rtSetDevice. Device
 * buffers come from the HAL stand-in (halMemAlloc, device 0):
 *   LinearOperation: in  x (1 MiB), w (2 MiB), NULL (dropped: address 0)
 *                    out y (512 KiB); workspace ws (4 MiB)
 *   AddOperation:    in  y (512 KiB), x (1 MiB); out z (256 KiB); no workspace
 * stub_atb_run builds the RunnerVariantPack and calls Runner::Execute through
 * the PLT; the stand-in's Execute launches "<Op>Kernel" and writes 0xA5 into
 * the first bytes of every output, which this program checks, so a tracer
 * that skipped the operator is caught.
 * Prints "x <ptr>" ... "ws <ptr>", then "ran 2"; exits 0 on success.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_hal_dl.h"

typedef int (*stub_run_fn)(const char *, uint32_t, void *const *, const uint64_t *, uint32_t,
                           void *const *, const uint64_t *, void *, uint64_t, void *);

static const uint64_t MiB = 1ULL << 20;

int main(int argc, char **argv)
{
    bool local = argc > 1 && strcmp(argv[1], "local") == 0;
    const char *home = getenv("ATB_HOME_PATH");
    if (!home) {
        fprintf(stderr, "ATB_HOME_PATH is not set\n");
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/lib/libatb.so", home);
    void *atb = dlopen(path, RTLD_NOW | (local ? RTLD_LOCAL : RTLD_GLOBAL));
    if (!atb) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return 1;
    }
    stub_run_fn run = (stub_run_fn)dlsym(atb, "stub_atb_run");
    /* The runtime came in as libatb's dependency: dlsym on the handle finds it. */
    int (*set_device)(int32_t) = (int (*)(int32_t))dlsym(atb, "rtSetDevice");
    struct sim_hal hal;
    if (!run || !set_device || set_device(0) != 0 || sim_hal_open(&hal) != 0)
        return 1;
    const uint64_t flag = SIM_HAL_FLAG(SIM_MODULE_APP, SIM_MEMTYPE_DEVICE, 0, 0);
    const char *names[5] = {"x", "w", "y", "z", "ws"};
    uint64_t sizes[5] = {MiB, 2 * MiB, MiB / 2, MiB / 4, 4 * MiB};
    void *p[5];
    for (int i = 0; i < 5; i++) {
        if (hal.alloc(&p[i], sizes[i], flag) != 0)
            return 1;
        memset(p[i], 0, 16);
        printf("%s %p\n", names[i], p[i]);
    }
    void *lin_in[3] = {p[0], p[1], NULL};
    uint64_t lin_in_sz[3] = {sizes[0], sizes[1], 64};
    void *lin_out[1] = {p[2]};
    uint64_t lin_out_sz[1] = {sizes[2]};
    int rc1 = run("LinearOperation", 3, lin_in, lin_in_sz, 1, lin_out, lin_out_sz, p[4], sizes[4],
                  NULL);
    void *add_in[2] = {p[2], p[0]};
    uint64_t add_in_sz[2] = {sizes[2], sizes[0]};
    void *add_out[1] = {p[3]};
    uint64_t add_out_sz[1] = {sizes[3]};
    int rc2 = run("AddOperation", 2, add_in, add_in_sz, 1, add_out, add_out_sz, NULL, 0, NULL);
    int written = ((unsigned char *)p[2])[0] == 0xA5 && ((unsigned char *)p[3])[0] == 0xA5;
    if (rc1 != 0 || rc2 != 0 || !written) {
        fprintf(stderr, "rc %d %d written %d\n", rc1, rc2, written);
        return 1;
    }
    printf("ran 2\n");
    for (int i = 0; i < 5; i++)
        hal.free(p[i]);
    return 0;
}
