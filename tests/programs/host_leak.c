/* HOST adapter test: leaks exactly 3 blocks of 1024 bytes from three known functions, and
 * allocates and frees many other blocks. Built with and without frame pointers. */
#include <stdlib.h>
#include <string.h>

void *volatile sink;

__attribute__((noinline)) void *leak_site_alpha(void) { void *p = malloc(1024); memset(p, 1, 1024); return p; }
__attribute__((noinline)) void *leak_site_beta(void) { void *p = calloc(1, 1024); return p; }
__attribute__((noinline)) void *leak_site_gamma(void) {
    void *p = malloc(16);
    p = realloc(p, 1024); /* the leaked block is the realloc result */
    return p;
}

__attribute__((noinline)) void churn(int n) {
    for (int i = 0; i < n; i++) {
        char *p = malloc(32 + i % 200);
        sink = p;
        free(p);
    }
}

__attribute__((noinline)) void level2(void) {
    sink = leak_site_alpha();
    sink = leak_site_beta();
}

__attribute__((noinline)) void level1(void) {
    level2();
    churn(1000);
    sink = leak_site_gamma();
}

int main(void) {
    level1();
    return 0;
}
