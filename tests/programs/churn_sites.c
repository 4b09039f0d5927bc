/*
 * Allocation churn from exactly four call sites (issue 38's aggregate mode): N allocations,
 * site i % 4, sizes 16..4111 bytes from a fixed generator; each block is freed two
 * allocations later, except every 1000th block of site_a, which is leaked. The number of
 * sites, and so an aggregate's size, does not depend on N.
 *
 *   churn_sites N
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t state = 42;

static size_t next_size(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return 16 + (size_t)(state % 4096);
}

__attribute__((noinline)) static void *site_a(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *site_b(size_t n) { return calloc(1, n); }
__attribute__((noinline)) static void *site_c(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *site_d(size_t n) { return malloc(n); }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000;
    void *ring[2] = {0, 0};
    int keep[2] = {0, 0};
    for (long i = 0; i < n; i++) {
        void *p;
        switch (i % 4) {
        case 0:
            p = site_a(next_size());
            break;
        case 1:
            p = site_b(next_size());
            break;
        case 2:
            p = site_c(next_size());
            break;
        default:
            p = site_d(next_size());
            break;
        }
        if (!keep[i % 2])
            free(ring[i % 2]);
        ring[i % 2] = p;
        keep[i % 2] = i % 4 == 0 && (i / 4) % 1000 == 0;
        ((volatile char *)p)[0] = 1;
    }
    for (int k = 0; k < 2; k++)
        if (!keep[k])
            free(ring[k]);
    printf("churn_sites: %ld allocations\n", n);
    return 0;
}
