/*
 * The measured loop: argv[1] iterations (default 1000000) of
 * halMemAlloc(&p, 4096, RUNTIME|DEVICE|dev 0) + halMemFree(p), after a
 * warm-up of 10000 pairs (first-call resolution, chunk mapping). Prints
 * "ns_per_event <wall> <cpu>" where an event is one call (two per
 * iteration): <wall> from CLOCK_MONOTONIC around the whole loop, <cpu> from
 * CLOCK_THREAD_CPUTIME_ID, i.e. only the time this (the recording) thread
 * ran, kernel time such as page faults included, without the time it waited
 * for a core that the collector or other processes held.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int halMemAlloc(void **pp, unsigned long long size, unsigned long long flag);
int halMemFree(void *p);

static double now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    const unsigned long long flag = (7ULL << 56) | (1ULL << 10);
    void *p;
    for (int i = 0; i < 10000; i++) {
        if (halMemAlloc(&p, 4096, flag) != 0 || halMemFree(p) != 0)
            return 1;
    }
    double c0 = now(CLOCK_THREAD_CPUTIME_ID), t0 = now(CLOCK_MONOTONIC);
    for (long i = 0; i < n; i++) {
        halMemAlloc(&p, 4096, flag);
        halMemFree(p);
    }
    double t1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_THREAD_CPUTIME_ID);
    printf("ns_per_event %.2f %.2f\n", (t1 - t0) / (2.0 * (double)n), (c1 - c0) / (2.0 * (double)n));
    return 0;
}
