/*
 * Frees the tracer must survive (issue 5): a double halMemFree, a
 * halMemFree of a pointer the driver never handed out, a double
 * halMemRelease. The driver stand-in refuses the bad calls with
 * DRV_ERROR_INVALID_VALUE (3); the program checks that the codes come back
 * unchanged through the hook and prints "rc <free2> <bogus> <release2>".
 * Exits 0 when the good calls succeed and the bad ones return 3.
 */
#include <stdint.h>
#include <stdio.h>

#include "sim_npu.h"

int main(void)
{
    void *p = NULL;
    static char bogus[64];
    drv_mem_handle_t *h = NULL;
    struct drv_mem_prop prop = {0};
    if (halMemAlloc(&p, 1024, SIM_HAL_FLAG(SIM_MODULE_RUNTIME, SIM_MEMTYPE_DEVICE, 0, 0)) != 0)
        return 1;
    if (halMemCreate(&h, 4096, &prop, 0) != 0)
        return 1;
    if (halMemFree(p) != 0 || halMemRelease(h) != 0)
        return 1;
    int r1 = halMemFree(p);
    int r2 = halMemFree(bogus);
    int r3 = halMemRelease(h);
    printf("rc %d %d %d\n", r1, r2, r3);
    return (r1 == 3 && r2 == 3 && r3 == 3) ? 0 : 1;
}
