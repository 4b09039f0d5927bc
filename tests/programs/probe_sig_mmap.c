/* Signal handlers that allocate while the main thread loops on malloc/free: SIGALRM (every
 * 500 µs) maps and unmaps 12 KiB and, with argv[2] = 1, also mallocs/frees 777 bytes; with
 * argv[3] = 1 a second timer (SIGPROF) does the same from its own handler, which may interrupt
 * the first one. The program counts every call it makes and prints the counts, so a test can
 * check recorded rows + counted drops = calls. Runs until SIGALRM ran argv[1] (400) times;
 * argv[4] > 0 spins that many microseconds between the main loop's pairs (fewer rows). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t ticks, mmaps, munmaps, hmallocs, hfrees;
static int handler_malloc;

static void work(void) {
    void *p = mmap(NULL, 12288, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
        mmaps++;
        ((volatile char *)p)[0] = 1;
        if (munmap(p, 12288) == 0)
            munmaps++;
    }
    if (handler_malloc) {
        volatile char *q = malloc(777);
        if (q) {
            hmallocs++;
            q[0] = 1;
            free((void *)q);
            hfrees++;
        }
    }
}

static void on_alarm(int s) {
    (void)s;
    work();
    ticks++;
}

static void on_prof(int s) {
    (void)s;
    work();
}

static void arm(int which, int sig, void (*h)(int), long usec) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    struct itimerval it = {{0, usec}, {0, usec}};
    setitimer(which, &it, NULL);
}

int main(int argc, char **argv) {
    long target = argc > 1 ? atol(argv[1]) : 400;
    handler_malloc = argc > 2 && atoi(argv[2]) == 1;
    int prof = argc > 3 && atoi(argv[3]) == 1;
    long spin_ns = argc > 4 ? atol(argv[4]) * 1000 : 0;
    printf("sig_mmap start\n");
    fflush(stdout);
    arm(ITIMER_REAL, SIGALRM, on_alarm, 500);
    if (prof)
        arm(ITIMER_PROF, SIGPROF, on_prof, 700);
    long mallocs = 0, frees = 0;
    while (ticks < target) {
        volatile char *p = malloc(4242);
        if (!p)
            return 3;
        mallocs++;
        p[0] = 1;
        free((void *)p);
        frees++;
        if (spin_ns > 0) {
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            do
                clock_gettime(CLOCK_MONOTONIC, &b);
            while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < spin_ns);
        }
    }
    struct itimerval off;
    memset(&off, 0, sizeof off);
    setitimer(ITIMER_REAL, &off, NULL);
    setitimer(ITIMER_PROF, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    signal(SIGPROF, SIG_IGN);
    printf("ticks=%ld mallocs=%ld frees=%ld mmaps=%ld munmaps=%ld hmallocs=%ld hfrees=%ld\n",
           (long)ticks, mallocs, frees, (long)mmaps, (long)munmaps, (long)hmallocs, (long)hfrees);
    return 0;
}
