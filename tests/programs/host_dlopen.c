/* HOST adapter test: allocates before and after opening host_dlib shared objects with dlopen,
 * one by full path (argv[1]) and one by bare name (argv[2]), which only the program's own
 * RUNPATH finds; each leaks one block from inside the library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

void *volatile sink;

static int leak_from(const char *lib, size_t n) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "cannot load %s: %s\n", lib, dlerror());
        return 1;
    }
    void *(*leak)(size_t) = (void *(*)(size_t))dlsym(h, "dlib_leak_site");
    if (!leak || !(sink = leak(n))) return 2;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return 64;
    /* Stacks are captured (and the program's modules announced) before any dlopen. */
    for (int i = 0; i < 10; i++) {
        sink = malloc(100 + i);
        free(sink);
    }
    int rc = leak_from(argv[1], 4321);
    if (rc) return rc;
    rc = leak_from(argv[2], 4322);
    if (rc) return 10 + rc;
    printf("loaded\n");
    return 0;
}
