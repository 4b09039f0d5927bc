/*
 * Memory outside every hook, for `--sample` (issue 25): idles 1.5 s, maps 256 MiB with a raw
 * `syscall(SYS_mmap)` (no hook sees it, whatever MEMSCOPE_HOST_MMAP says) and touches every
 * page, mallocs 64 MiB and touches it (the HOST adapter sees that one), then idles 5 s and
 * exits without unmapping.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAPPED (256L << 20)
#define HEAP (64L << 20)

int main(void)
{
    usleep(1500 * 1000);
    long p = syscall(SYS_mmap, NULL, MAPPED, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == -1) {
        perror("sample_mmap: mmap");
        return 1;
    }
    memset((void *)p, 1, MAPPED);
    char *h = malloc(HEAP);
    if (!h) {
        perror("sample_mmap: malloc");
        return 1;
    }
    memset(h, 2, HEAP);
    usleep(5000 * 1000);
    printf("touched %ld %ld\n", (long)((char *)p)[MAPPED - 1], (long)h[HEAP - 1]);
    return 0;
}
