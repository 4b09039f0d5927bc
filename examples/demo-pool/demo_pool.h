/*
 * demo_pool.h — a tiny third-party "pool" library that memscope knows nothing about. The two
 * example adapters (examples/adapter-c, examples/adapter-rust) report its blocks to memscope
 * by interposing these functions.
 */
#ifndef DEMO_POOL_H
#define DEMO_POOL_H
#include <stddef.h>

/* Allocates `size` bytes for `tag` (e.g. "kv_cache"); NULL on failure. */
void *demo_pool_alloc(size_t size, const char *tag);
/* Frees a block of demo_pool_alloc (NULL: nothing). */
void demo_pool_free(void *p);

#endif
