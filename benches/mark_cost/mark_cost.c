/*
 * mark_cost.c — cost of one msTX mark, plain and under the memscope probe.
 *
 *   mark_cost N [threads]
 *
 * Calls mstxMarkA("mark-cost-msg", NULL) N times per thread (after one warm-up mark, which
 * triggers the front end's injection handshake and the probe's init), and runs an empty loop
 * of the same length. Prints, for thread 0:
 *   empty_ns    <wall ns per empty iteration>
 *   mark_ns     <wall ns per mstxMarkA call>
 *   mark_cpu_ns <thread CPU ns per mstxMarkA call (CLOCK_THREAD_CPUTIME_ID): insensitive to
 *                other work on the machine, but blind to time spent waiting, e.g. in I/O>
 *   marks       <total mstxMarkA calls made by the process, warm-up included>
 * Without a tool injected the front end returns at once (the "plain" cost); under
 * LD_PRELOAD=libmemscope_probe.so with MEMSCOPE_SPOOL set and the mstx adapter selected every
 * call is recorded.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void mstxMarkA(const char *message, void *stream);

static long n_iter;
static const char *volatile msg = "mark-cost-msg";

static double clock_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
static double now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
static double cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

struct result { double empty_ns, mark_ns, mark_cpu_ns; };

static void *run(void *arg)
{
    struct result *r = arg;
    const char *m = msg;
    double t0 = now_ns();
    for (long i = 0; i < n_iter; i++)
        __asm__ volatile("" : : "r"(m) : "memory");
    double t1 = now_ns(), c1 = cpu_ns();
    for (long i = 0; i < n_iter; i++)
        mstxMarkA(m, NULL);
    double t2 = now_ns(), c2 = cpu_ns();
    r->empty_ns = (t1 - t0) / n_iter;
    r->mark_ns = (t2 - t1) / n_iter;
    r->mark_cpu_ns = (c2 - c1) / n_iter;
    return NULL;
}

int main(int argc, char **argv)
{
    n_iter = argc > 1 ? atol(argv[1]) : 1000000;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (n_iter <= 0 || threads <= 0 || threads > 256) {
        fprintf(stderr, "usage: mark_cost N [threads]\n");
        return 2;
    }
    mstxMarkA("warm-up", NULL);
    pthread_t tid[256];
    struct result res[256];
    for (int i = 1; i < threads; i++)
        pthread_create(&tid[i], NULL, run, &res[i]);
    run(&res[0]);
    for (int i = 1; i < threads; i++)
        pthread_join(tid[i], NULL);
    printf("empty_ns %.2f\nmark_ns %.2f\nmark_cpu_ns %.2f\nmarks %ld\n", res[0].empty_ns,
           res[0].mark_ns, res[0].mark_cpu_ns, n_iter * threads + 1);
    return 0;
}
