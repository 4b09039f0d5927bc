/*
 * HAL flag decoding (abi.md §2.3, §2.4) and the create/release path, over
 * the HAL stand-in (linked; calls go through the PLT to a preloaded hook).
 *
 * halMemAlloc, in this order (module, memory type, page, device, size):
 *   1. RUNTIME(7)  DEVICE  normal  dev 0   4096
 *   2. HCCL(3)     DEVICE  huge    dev 1   2 MiB
 *   3. 99 (unknown)SVM     giant   dev 3   1 MiB
 *   4. APP(33)     HOST    normal  dev 2   8192      -> HOST on cpu
 *   5. RUNTIME(7)  DVPP    huge+giant dev 0 512     -> giant wins
 * halMemCreate (prop.devid, prop.module_id, prop.pg_type, flag, size):
 *   6. dev 2, HCCL(3),    pg_type 1 (huge), flag 0,           3 MiB
 *   7. dev 1, RUNTIME(7), pg_type 0,        flag giant bit,   1 MiB
 * then halMemFree 1..5 in order and halMemRelease 6, 7.
 * Prints "addr <i> 0x<ptr>" for every block (1..7), exits 0 (1 on error).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim_npu.h"

#define MiB (1ULL << 20)

int main(void)
{
    struct { uint64_t module, memtype, page, dev, size; } a[5] = {
        {7, SIM_MEMTYPE_DEVICE, 0, 0, 4096},
        {3, SIM_MEMTYPE_DEVICE, SIM_FLAG_HUGE_PAGE, 1, 2 * MiB},
        {99, SIM_MEMTYPE_SVM, SIM_FLAG_GIANT_PAGE, 3, MiB},
        {33, SIM_MEMTYPE_HOST, 0, 2, 8192},
        {7, SIM_MEMTYPE_DVPP, SIM_FLAG_HUGE_PAGE | SIM_FLAG_GIANT_PAGE, 0, 512},
    };
    void *p[5];
    for (int i = 0; i < 5; i++) {
        uint64_t flag = SIM_HAL_FLAG(a[i].module, a[i].memtype, a[i].page, a[i].dev);
        if (halMemAlloc(&p[i], a[i].size, flag) != DRV_ERROR_NONE) {
            fprintf(stderr, "halMemAlloc %d failed\n", i + 1);
            return 1;
        }
        printf("addr %d %p\n", i + 1, p[i]);
    }
    struct drv_mem_prop props[2];
    memset(props, 0, sizeof props);
    props[0].devid = 2;
    props[0].module_id = 3;
    props[0].pg_type = 1;
    props[1].devid = 1;
    props[1].module_id = 7;
    props[1].pg_type = 0;
    uint64_t cflag[2] = {0, SIM_FLAG_GIANT_PAGE};
    uint64_t csize[2] = {3 * MiB, MiB};
    drv_mem_handle_t *h[2];
    for (int i = 0; i < 2; i++) {
        if (halMemCreate(&h[i], csize[i], &props[i], cflag[i]) != DRV_ERROR_NONE) {
            fprintf(stderr, "halMemCreate %d failed\n", i + 1);
            return 1;
        }
        printf("addr %d %p\n", i + 6, (void *)h[i]);
    }
    for (int i = 0; i < 5; i++) {
        if (halMemFree(p[i]) != DRV_ERROR_NONE) {
            fprintf(stderr, "halMemFree %d failed\n", i + 1);
            return 1;
        }
    }
    for (int i = 0; i < 2; i++) {
        if (halMemRelease(h[i]) != DRV_ERROR_NONE) {
            fprintf(stderr, "halMemRelease %d failed\n", i + 1);
            return 1;
        }
    }
    return 0;
}
