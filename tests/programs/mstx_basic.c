/*
 * N marks "mark-<i>" (i = 0..N-1; N = argv[1], default 3), then one range
 * "work" (start/end). Prints nothing unless an argument is bad.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mstx_api.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3;
    if (n < 0) {
        fprintf(stderr, "mstx_basic: bad count %s\n", argv[1]);
        return 2;
    }
    char msg[64];
    for (int i = 0; i < n; i++) {
        snprintf(msg, sizeof msg, "mark-%d", i);
        mstxMarkA(msg, NULL);
    }
    mstxRangeId id = mstxRangeStartA("work", NULL);
    mstxRangeEnd(id);
    return 0;
}
