/*
 * jemalloc_job.c — a program linked with the real jemalloc (Debian libjemalloc-dev) using its
 * non-standard API, for the example jemalloc adapter (examples/adapter-jemalloc):
 *   a = mallocx(4096, 0)                                   default arena
 *   b = kv_cache_alloc(arena, 1 MiB) = mallocx(arena|tcache none), then rallocx to 2 MiB
 *   c = mallocx(256, MALLOCX_ZERO | MALLOCX_LG_ALIGN(6))
 *   xallocx(c, 256, 0, 0)                                  no size change: no rows
 *   sdallocx(a, 4096, 0); dallocx(c, 0); b is leaked.
 * Then argv[1] (default 0) more mallocx/dallocx pairs. Prints "arena <n>" (the arena mallctl
 * created) and "b <old> <new>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <jemalloc/jemalloc.h>

__attribute__((noinline)) static void *kv_cache_alloc(unsigned arena, size_t n)
{
    return mallocx(n, MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE);
}

int main(int argc, char **argv)
{
    long more = argc > 1 ? atol(argv[1]) : 0;
    unsigned arena = 0;
    size_t sz = sizeof arena;
    if (mallctl("arenas.create", &arena, &sz, NULL, 0) != 0)
        return 3;
    void *a = mallocx(4096, 0);
    void *b = kv_cache_alloc(arena, 1 << 20);
    void *b2 = rallocx(b, 2 << 20, MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE);
    void *c = mallocx(256, MALLOCX_ZERO | MALLOCX_LG_ALIGN(6));
    xallocx(c, 256, 0, 0);
    sdallocx(a, 4096, 0);
    dallocx(c, 0);
    for (long i = 0; i < more; i++)
        dallocx(mallocx(64 + (size_t)(i % 16) * 16, 0), 0);
    printf("arena %u\nb %p %p\n", arena, b, b2);
    return a && b2 && c ? 0 : 4;
}
