/*
 * A CPU-only program that controls collection only through the probe's C API (issue 27 item
 * 3), under `--adapters host --device cpu --collect-mode deferred`: no device is ever touched.
 *   memscope_start()
 *   steps 1..3: memscope_step(); malloc(4096) / free
 *   memscope_stop()
 * The API is reached through weak references (resolved to the preloaded probe). Prints the
 * calls' results ("api 0 0 0 0 0"); exits 0, 3 without the probe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memscope_probe.h"

#pragma weak memscope_start
#pragma weak memscope_stop
#pragma weak memscope_step

int main(void)
{
    if (!memscope_start || !memscope_stop || !memscope_step)
        return 3;
    int r[5];
    r[0] = memscope_start();
    for (int s = 0; s < 3; s++) {
        r[1 + s] = memscope_step();
        char *volatile p = malloc(4096);
        if (p)
            memset(p, s, 4096);
        free(p);
    }
    r[4] = memscope_stop();
    printf("api %d %d %d %d %d\n", r[0], r[1], r[2], r[3], r[4]);
    return 0;
}
