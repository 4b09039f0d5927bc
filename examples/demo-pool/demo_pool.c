/* demo_pool.c — the demo pool library (libdemo_pool.so): a bump allocator over malloc. */
#include <stdlib.h>
#include "demo_pool.h"

void *demo_pool_alloc(size_t size, const char *tag)
{
    (void)tag;
    return malloc(size ? size : 1);
}

void demo_pool_free(void *p)
{
    free(p);
}
