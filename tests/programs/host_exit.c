/* HOST adapter test: N blocks of 4321 bytes then _exit (no atexit, no flush). */
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    for (int i = 0; i < n; i++) sink = malloc(4321);
    _exit(3);
}
