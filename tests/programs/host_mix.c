/*
 * host_mix PAIRS: two threads, each PAIRS malloc/free pairs of varied sizes (some blocks kept
 * for a while, some reallocated), plus a few msTX marks; 7 blocks of 777 bytes are never freed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "mstx_api.h"

static long pairs = 1000;

static void *worker(void *arg)
{
    unsigned long seed = (unsigned long)arg * 2654435761u + 1;
    void *keep[64] = {0};
    for (long i = 0; i < pairs; i++) {
        seed = seed * 6364136223846793005ul + 1442695040888963407ul;
        size_t size = 16 + (seed >> 33) % 4000;
        unsigned k = (seed >> 20) % 64;
        if (keep[k]) {
            if ((seed >> 40) % 8 == 0)
                keep[k] = realloc(keep[k], size / 2 + 1);
            free(keep[k]);
        }
        keep[k] = malloc(size);
        if (i % 5000 == 0)
            mstxMarkA("progress", NULL);
    }
    for (unsigned k = 0; k < 64; k++)
        free(keep[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    pairs = argc > 1 ? atol(argv[1]) : 1000;
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 7; i++)
        if (!malloc(777))
            return 1;
    printf("done\n");
    return 0;
}
