/*
 * A long job for the flight recorder (--keep, issue 38): four long-lived HAL blocks at the
 * start, then `n` steps (an msTX "step start" range each) that allocate a 4 KiB block and free
 * the one allocated 64 steps before, leaking one block every 1000 steps; `us` microseconds of
 * sleep per step. Usage: keep_job N US. Prints "done N" and exits 0 when every call returned 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mstx_api.h"
#include "sim_npu.h"

#define RING 64

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000;
    long us = argc > 2 ? atol(argv[2]) : 0;
    unsigned long long flag = SIM_HAL_FLAG(SIM_MODULE_RUNTIME, SIM_MEMTYPE_DEVICE, 0, 0);
    void *keep[4];
    for (int i = 0; i < 4; i++)
        if (halMemAlloc(&keep[i], (1u << 20) * (i + 1), flag) != 0)
            return 1;
    void *ring[RING] = {0};
    for (long s = 0; s < n; s++) {
        uint64_t id = mstxRangeStartA("step start", NULL);
        void *p = NULL;
        if (halMemAlloc(&p, 4096 + (s % 7) * 512, flag) != 0)
            return 1;
        void *old = ring[s % RING];
        ring[s % RING] = p;
        if (old && s % 1000 != 0 && halMemFree(old) != 0)
            return 1;
        mstxRangeEnd(id);
        if (us > 0)
            usleep(us);
    }
    for (int i = 0; i < RING; i++)
        if (ring[i])
            halMemFree(ring[i]);
    for (int i = 0; i < 4; i++)
        halMemFree(keep[i]);
    printf("done %ld\n", n);
    return 0;
}
