/*
 * demo_job.c — a job using the demo pool: allocates `n` (argv[1], default 3) blocks of
 * 1024 * (i + 1) bytes tagged "weights", frees all but the last (tagged "kv_cache"), and never
 * calls msTX or the memscope API (third-party adapters must start with the process).
 */
#include <stdio.h>
#include <stdlib.h>
#include "demo_pool.h"

__attribute__((noinline)) static void *load_weights(size_t size)
{
    return demo_pool_alloc(size, "weights");
}

__attribute__((noinline)) static void *grow_kv_cache(size_t size)
{
    return demo_pool_alloc(size, "kv_cache");
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3;
    for (int i = 0; i < n; i++) {
        void *p = load_weights(1024 * (size_t)(i + 1));
        demo_pool_free(p);
    }
    void *kv = grow_kv_cache(4096);
    printf("kv at %p\n", kv);
    return 0;
}
