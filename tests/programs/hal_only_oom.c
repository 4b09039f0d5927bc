/*
 * Out-of-memory in a program that only calls the HAL (issue 27 item 2): no ACL runtime, so
 * nobody can report the device's total and free memory. Run with SIM_NPU_HBM_LIMIT=67108864.
 *   a = halMemAlloc(4 MiB, device 0)
 *   rc = halMemAlloc(1 GiB, device 0)   -> 6 (DRV_ERROR_OUT_OF_MEMORY)
 *   halMemFree(a)
 * Prints "oom <rc>"; exits 0 when rc is 6.
 */
#include <stdint.h>
#include <stdio.h>

#include "sim_npu.h"

#define MiB (1ULL << 20)

int main(void)
{
    void *a = NULL, *big = NULL;
    if (halMemAlloc(&a, 4 * MiB, SIM_HAL_FLAG(7, SIM_MEMTYPE_DEVICE, 0, 0)) != 0)
        return 1;
    int rc = halMemAlloc(&big, 1ULL << 30, SIM_HAL_FLAG(7, SIM_MEMTYPE_DEVICE, 0, 0));
    printf("oom %d\n", rc);
    halMemFree(a);
    return rc == DRV_ERROR_OUT_OF_MEMORY ? 0 : 1;
}
