/*
 * One rank of a multi-rank job over the sim-npu stand-ins (issue 18), started by
 * rank_launcher with RANK / LOCAL_RANK / WORLD_SIZE set.
 *
 *   aclInit; aclrtSetDevice(LOCAL_RANK), or 0 with argv[3] = "visible" (the launcher then sets
 *   ASCEND_RT_VISIBLE_DEVICES=<rank>, so logical device 0 is physical device <rank>)
 *   per step s: range "step start"; aclrtMalloc((1 + RANK) MiB) -> HAL MALLOC; mark "work";
 *               aclrtFree -> HAL FREE; range end; sleep argv[2] µs
 *   after step 1 it prints "rank <RANK> ready <pid>" (line-buffered)
 *
 * argv[1]: steps (0: until a signal ends it); argv[2]: µs to sleep per step.
 * Exits 0 after its steps (1 on an ACL failure).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mstx_api.h"
#include "sim_npu.h"

aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtMalloc(void **devPtr, size_t size, int policy);
aclError aclrtFree(void *devPtr);

static int env_int(const char *k)
{
    const char *v = getenv(k);
    return v ? atoi(v) : 0;
}

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 3;
    long pause_us = argc > 2 ? atol(argv[2]) : 0;
    int visible = argc > 3 && strcmp(argv[3], "visible") == 0;
    int rank = env_int("RANK");
    int local = env_int("LOCAL_RANK");
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (aclInit(NULL) != 0 || aclrtSetDevice(visible ? 0 : local) != 0)
        return 1;
    for (long s = 1; steps == 0 || s <= steps; s++) {
        mstxRangeId id = mstxRangeStartA("step start", NULL);
        void *p = NULL;
        if (aclrtMalloc(&p, (size_t)(1 + rank) << 20, 0) != 0)
            return 1;
        mstxMarkA("work", NULL);
        if (aclrtFree(p) != 0)
            return 1;
        mstxRangeEnd(id);
        if (s == 1)
            printf("rank %d ready %d\n", rank, (int)getpid());
        if (pause_us > 0)
            usleep((useconds_t)pause_us);
    }
    aclFinalize();
    return 0;
}
