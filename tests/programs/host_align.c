/* HOST adapter test: every alignment function, with unique sizes. */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

int main(void) {
    void *a = NULL;
    if (posix_memalign(&a, 64, 1001) != 0 || (uintptr_t)a % 64) return 1;
    void *bad = (void *)1;
    if (posix_memalign(&bad, 3, 1002) == 0 || bad != (void *)1) return 2; /* EINVAL, nothing */
    void *b = aligned_alloc(128, 1024 + 3);
    if (!b || (uintptr_t)b % 128) return 3;
    void *c = memalign(256, 1004);
    if (!c || (uintptr_t)c % 256) return 4;
    void *d = valloc(1005);
    if (!d || (uintptr_t)d % 4096) return 5;
    void *e = pvalloc(1006);
    if (!e || (uintptr_t)e % 4096) return 6;
    void *f = calloc(7, 143); /* 1001 */
    if (!f) return 7;
    free(a); free(b); free(c); free(d); free(e); free(f);
    return 0;
}
