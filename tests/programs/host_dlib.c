/* HOST adapter test library (built as a shared object, opened with dlopen by host_dlopen.c and
 * host_safety.c): allocates and frees with whatever malloc/free its symbols bind to. */
#include <stdlib.h>
#include <string.h>

void *volatile dlib_sink;

/* A leak from inside the library: its name must appear in the Call Stack(C) of the MALLOC. */
__attribute__((noinline)) void *dlib_leak_site(size_t n) {
    char *p = malloc(n);
    if (p) memset(p, 7, n);
    dlib_sink = p;
    return p;
}

/* For RTLD_DEEPBIND: blocks the library allocates, and frees of blocks the program allocated. */
__attribute__((noinline)) void *dlib_alloc(size_t n) { return malloc(n); }
__attribute__((noinline)) void dlib_free(void *p) { free(p); }
