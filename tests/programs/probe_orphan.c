/* Two phases of malloc(6464)/free pairs with a pause between them: after phase 1 it prints
 * "phase1 done" and waits for a line on stdin (the test kills the collector meanwhile), then
 * runs phase 2 and prints "done". Exits 0. argv: pairs of phase 1, pairs of phase 2. */
#include <stdio.h>
#include <stdlib.h>

static void phase(long n) {
    for (long i = 0; i < n; i++) {
        volatile char *p = malloc(6464);
        if (!p)
            exit(3);
        p[0] = 1;
        free((void *)p);
    }
}

int main(int argc, char **argv) {
    long a = argc > 1 ? atol(argv[1]) : 50000;
    long b = argc > 2 ? atol(argv[2]) : 500000;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("orphan start\n");
    phase(a);
    printf("phase1 done\n");
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        return 4;
    phase(b);
    printf("done %ld %ld\n", a, b);
    return 0;
}
