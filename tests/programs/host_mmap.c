/*
 * Mapped memory for MEMSCOPE_HOST_MMAP=1: after each step an msTX mark "live=<bytes>" names
 * the bytes this program has mapped since the mark "begin" (P = page size):
 *   4 pages; unmap the head page; unmap the tail page          -> 4P, 3P, 2P
 *   8 pages; a 2-page MAP_FIXED overlay inside; unmap all 8     -> 10P, 10P, 2P   (peak 10P)
 *   mmap(NULL, 3000) (one page); mremap it to 3 pages           -> 3P, 5P
 *   4 pages; unmap the middle 2; unmap all 4 (over the hole)    -> 9P, 7P, 5P
 *   unmap the 3 remapped pages; unmap one of the 2 first pages  -> 2P, P
 * One page stays mapped and 100 heap bytes stay allocated at exit; then mark "end".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mstx_api.h"

static void *map(void *at, size_t len, int fixed)
{
    void *p = mmap(at, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (fixed ? MAP_FIXED : 0), -1, 0);
    if (p == MAP_FAILED) {
        perror("host_mmap: mmap");
        exit(1);
    }
    return p;
}

static void live(long bytes)
{
    char b[64];
    snprintf(b, sizeof b, "live=%ld", bytes);
    mstxMarkA(b, NULL);
}

static void unmap(void *p, size_t len)
{
    if (munmap(p, len) != 0) {
        perror("host_mmap: munmap");
        exit(1);
    }
}

int main(void)
{
    long P = sysconf(_SC_PAGESIZE);
    mstxMarkA("begin", NULL);
    char *p = map(NULL, 4 * P, 0);
    live(4 * P);
    unmap(p, P);
    live(3 * P);
    unmap(p + 3 * P, P);
    live(2 * P);
    char *q = map(NULL, 8 * P, 0);
    live(10 * P);
    map(q + 2 * P, 2 * P, 1);
    live(10 * P);
    unmap(q, 8 * P);
    live(2 * P);
    char *r = map(NULL, 3000, 0);
    live(3 * P);
    char *r2 = mremap(r, 3000, 3 * P, MREMAP_MAYMOVE);
    if (r2 == MAP_FAILED) {
        perror("host_mmap: mremap");
        return 1;
    }
    live(5 * P);
    char *s = map(NULL, 4 * P, 0);
    live(9 * P);
    unmap(s + P, 2 * P);
    live(7 * P);
    unmap(s, 4 * P);
    live(5 * P);
    unmap(r2, 3 * P);
    live(2 * P);
    unmap(p + P, P);
    live(P);
    void *leak = malloc(100);
    (void)leak;
    mstxMarkA("end", NULL);
    return 0;
}
