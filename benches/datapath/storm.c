/* storm [THREADS=64] [ROUNDS=32] [PAIRS=1000]: a storm of short-lived threads. ROUNDS times,
 * THREADS threads (1-64) start at once, each does PAIRS malloc/free pairs of mixed small sizes
 * (keeping up to 8 blocks live, as a request handler does) and exits; the round's threads are
 * joined before the next round starts. Every thread is new, so a tool pays its per-thread
 * set-up (TLS, buffers, stream chunks) ROUNDS * THREADS times.
 * stdout: the exact number of heap calls ("calls total=N"). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long pairs = 1000;

static void *worker(void *arg)
{
    uint64_t s = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    void *live[8] = {0};
    for (long i = 0; i < pairs; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        unsigned slot = s & 7;
        free(live[slot]);
        char *p = malloc(16 + (s >> 8) % 496);
        if (!p)
            abort();
        p[0] = 1;
        live[slot] = p;
    }
    /* frees of NULL count as calls too: the slots never filled are freed as NULL above */
    for (int k = 0; k < 8; k++)
        free(live[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    long rounds = argc > 2 ? atol(argv[2]) : 32;
    pairs = argc > 3 ? atol(argv[3]) : 1000;
    if (n < 1 || n > 64)
        n = 64;
    pthread_t t[64];
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++)
            if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(r * 64 + i + 1)))
                abort();
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
    }
    printf("calls total=%ld\n", rounds * n * (2 * pairs + 8));
    return 0;
}
