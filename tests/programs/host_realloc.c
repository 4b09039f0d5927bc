/* HOST adapter test: realloc chains and glibc's edge cases. Sizes are unique markers. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void *volatile sink;

int main(void) {
    char *p = realloc(NULL, 101);          /* MALLOC 101 */
    p = realloc(p, 202);                   /* FREE 101, MALLOC 202 */
    p = realloc(p, 30303);                 /* FREE 202, MALLOC 30303 */
    p = realloc(p, 404);                   /* FREE 30303, MALLOC 404 (shrink, maybe in place) */
    char *q = realloc(p, 0);               /* FREE 404, returns NULL (glibc) */
    if (q != NULL) return 10;
    free(NULL);                            /* nothing */
    sink = malloc(0);                      /* MALLOC 0 */
    free(sink);                            /* FREE */
    errno = 0;
    char *r = reallocarray(NULL, SIZE_MAX / 2, 4); /* overflow: NULL, ENOMEM, nothing */
    if (r != NULL || errno != ENOMEM) return 11;
    r = reallocarray(NULL, 5, 101);        /* MALLOC 505 */
    r = reallocarray(r, 6, 101);           /* FREE 505, MALLOC 606 */
    free(r);                               /* FREE 606 */
    char *big = malloc(SIZE_MAX / 2);      /* fails: nothing */
    if (big != NULL) return 12;
    return 0;
}
