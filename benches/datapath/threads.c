/* threads [THREADS=4] [PAIRS=500000]: each of THREADS threads (1-64) does PAIRS
 * malloc(64)/free pairs. The data-path bench runs it with the same total (2 M pairs) on 1,
 * 4, 16 and 64 threads, so the tool's cost per event can be compared across thread counts.
 * stdout: the exact number of heap calls ("calls total=N"). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long pairs = 500000;

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < pairs; i++) {
        volatile char *p = malloc(64);
        if (!p)
            abort();
        p[0] = 1;
        free((void *)p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    pairs = argc > 2 ? atol(argv[2]) : 500000;
    if (n < 1 || n > 64)
        n = 4;
    pthread_t t[64];
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, worker, NULL))
            abort();
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("calls total=%ld\n", 2 * pairs * n);
    return 0;
}
