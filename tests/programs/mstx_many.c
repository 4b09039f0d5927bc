/*
 * mstx_many N MODE [EVERY] [SLEEP_US]: N mstxMarkA calls with no device event.
 * MODE "unique": message "u-<i>" (every text different); "same": "mark".
 * EVERY > 0: after every EVERY-th mark prints the index of the last completed mark
 * ("<i>\n", flushed) and sleeps SLEEP_US microseconds. Prints "done <N>" at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mstx_api.h"

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    int unique = argc > 2 && strcmp(argv[2], "unique") == 0;
    long every = argc > 3 ? atol(argv[3]) : 0;
    long sleep_us = argc > 4 ? atol(argv[4]) : 0;
    char msg[32];
    for (long i = 0; i < n; i++) {
        if (unique) {
            snprintf(msg, sizeof msg, "u-%ld", i);
            mstxMarkA(msg, NULL);
        } else {
            mstxMarkA("mark", NULL);
        }
        if (every > 0 && i % every == every - 1) {
            printf("%ld\n", i);
            fflush(stdout);
            if (sleep_us > 0)
                usleep((useconds_t)sleep_us);
        }
    }
    printf("done %ld\n", n);
    fflush(stdout);
    return 0;
}
