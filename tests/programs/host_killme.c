/* HOST adapter test: allocates N blocks of 6666 bytes, writes its pid to the file argv[1],
 * then waits to be killed. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

int main(int argc, char **argv) {
    int n = argc > 2 ? atoi(argv[2]) : 100;
    for (int i = 0; i < n; i++) sink = malloc(6666);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *f = fopen(tmp, "w");
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    rename(tmp, argv[1]);
    for (;;) pause();
}
