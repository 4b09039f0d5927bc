/*
 * Marks "k-0", "k-1", ... forever. After every 100th mark (i = 99, 199,
 * ...) it prints the index of the last completed mark on its own line
 * ("99\n"), flushes stdout and sleeps 1 ms. A test SIGKILLs it at some
 * point and checks that every index it read from stdout (and every mark
 * before it) is in the dump.
 */
#include <stdio.h>
#include <time.h>

#include "mstx_api.h"

int main(void)
{
    char msg[32];
    const struct timespec ms = {0, 1000 * 1000};
    for (long i = 0;; i++) {
        snprintf(msg, sizeof msg, "k-%ld", i);
        mstxMarkA(msg, NULL);
        if (i % 100 == 99) {
            printf("%ld\n", i);
            fflush(stdout);
            nanosleep(&ms, NULL);
        }
    }
}
