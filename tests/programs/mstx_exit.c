/*
 * Marks "m-0".."m-<N-1>" (N = argv[1], default 10), then calls _exit(3)
 * directly: no atexit handlers, no destructors, no stdio flush. A tracer
 * must not lose the marks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mstx_api.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10;
    char msg[32];
    for (int i = 0; i < n; i++) {
        snprintf(msg, sizeof msg, "m-%d", i);
        mstxMarkA(msg, NULL);
    }
    _exit(3);
}
