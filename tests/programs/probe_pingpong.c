/* A producer thread allocates small blocks and hands them through a ring to a consumer thread
 * that frees them; with one shared arena and no tcache (MALLOC_ARENA_MAX=1,
 * glibc.malloc.tcache_count=0) the producer's next malloc reuses a block the consumer freed
 * moments before. The stamps of the free (consumer) and of the malloc that reuses its block
 * (producer) must be in that order. argv[1]: blocks (300000). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define RING 256
static void *ring[RING];
static atomic_long head, tail;
static long blocks;

static void *consumer(void *arg) {
    (void)arg;
    for (long i = 0; i < blocks; i++) {
        while (atomic_load_explicit(&tail, memory_order_acquire) == i)
            ;
        void *p = ring[i % RING];
        atomic_store_explicit(&head, i + 1, memory_order_release);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    blocks = argc > 1 ? atol(argv[1]) : 300000;
    pthread_t t;
    pthread_create(&t, NULL, consumer, NULL);
    for (long i = 0; i < blocks; i++) {
        while (i - atomic_load_explicit(&head, memory_order_acquire) >= RING)
            ;
        volatile char *p = malloc(48);
        if (!p)
            abort();
        p[0] = (char)i;
        ring[i % RING] = (void *)p;
        atomic_store_explicit(&tail, i + 1, memory_order_release);
    }
    pthread_join(t, NULL);
    printf("pingpong %ld\n", blocks);
    return 0;
}
