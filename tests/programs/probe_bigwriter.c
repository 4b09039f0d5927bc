/* 200 000 (argv[1]) malloc(5151)/free pairs, for the file-size-limit and full-disk tests.
 * With argv[2], the program itself lowers its RLIMIT_FSIZE to argv[2] bytes after a tenth of
 * the pairs (the probe must read the limit at every reservation). Exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    long lower = argc > 2 ? atol(argv[2]) : -1;
    printf("bigwriter %ld\n", n);
    fflush(stdout);
    for (long i = 0; i < n; i++) {
        if (lower >= 0 && i == n / 10) {
            struct rlimit rl = {(rlim_t)lower, (rlim_t)lower};
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
                perror("setrlimit");
                return 2;
            }
        }
        volatile char *p = malloc(5151);
        if (!p)
            return 3;
        p[0] = (char)i;
        free((void *)p);
    }
    printf("done %ld\n", n);
    return 0;
}
