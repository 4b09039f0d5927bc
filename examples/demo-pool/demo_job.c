/*
 * demo_job.c — a job using the demo pool: allocates and frees `n` (argv[1], default 3) blocks
 * of 1024 * (i % 8 + 1) bytes tagged "weights", then one 4096-byte block tagged "kv_cache" that
 * it keeps, and never calls msTX or the memscope API (third-party adapters must start with the
 * process). With argv[2] = "fork" it then forks; the child does the same once more.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
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
    int do_fork = argc > 2 && strcmp(argv[2], "fork") == 0;
    for (int round = 0; round < 1 + do_fork; round++) {
        if (round == 1) {
            fflush(stdout);
            pid_t c = fork();
            if (c > 0) {
                int st = 0;
                waitpid(c, &st, 0);
                return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
            }
        }
        for (int i = 0; i < n; i++) {
            void *p = load_weights(1024 * (size_t)(i % 8 + 1));
            demo_pool_free(p);
        }
        void *kv = grow_kv_cache(4096);
        printf("kv at %p\n", kv);
    }
    return 0;
}
