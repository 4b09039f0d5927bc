/*
 * The HAL data path at scale: N halMemAlloc + halMemFree pairs of 4 KiB on device 0 over the
 * HAL stand-in (linked; calls go through the PLT to a preloaded hook). Usage: hal_many N.
 * Exits 0 when every call returned 0.
 */
#include <stdlib.h>

#include "sim_npu.h"

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    unsigned long long flag = SIM_HAL_FLAG(SIM_MODULE_RUNTIME, SIM_MEMTYPE_DEVICE, 0, 0);
    for (long i = 0; i < n; i++) {
        void *p = NULL;
        if (halMemAlloc(&p, 4096, flag) != 0 || halMemFree(p) != 0)
            return 1;
    }
    return 0;
}
