/*
 * Blocks from before a collection window under the HOST adapter (issue 26), run with
 * `--collect-mode deferred`; the window is opened through the probe's C API (weak references):
 *   kept = 777777 B, a = 111111 B, b = 222222 B freed at once      (before the window)
 *   memscope_start(); free(a); c = 333333 B; leak = 555555 B; memscope_stop()
 *   free(c)                                                        (after it)
 * kept and leak stay live at exit. Exits 3 without the probe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int memscope_start(void) __attribute__((weak));
int memscope_stop(void) __attribute__((weak));

static char *block(size_t n)
{
    char *volatile p = malloc(n);
    if (p)
        memset(p, 1, 16);
    return p;
}

int main(void)
{
    if (!memscope_start || !memscope_stop)
        return 3;
    char *volatile kept = block(777777);
    char *volatile a = block(111111);
    char *volatile b = block(222222);
    free(b);
    memscope_start();
    free(a);
    char *volatile c = block(333333);
    char *volatile leak = block(555555);
    memscope_stop();
    free(c);
    printf("host_history %d\n", kept[0] + leak[0]);
    return 0;
}
