/* Force-included into churn.c to build churn_deep: each worker thread runs its loop under
 * DEEP_FRAMES extra (non-inlined, non-tail) frames, so allocation stacks are ~30 frames deep. */
#include <pthread.h>
#ifndef DEEP_FRAMES
#define DEEP_FRAMES 24
#endif
struct deep_arg { void *(*f)(void *); void *arg; };
static __attribute__((noinline)) void *deep_recurse(struct deep_arg *d, int n) {
    void *volatile r;
    if (n == 0) r = d->f(d->arg);
    else r = deep_recurse(d, n - 1);
    return r;
}
static void *deep_start(void *p) { return deep_recurse(p, DEEP_FRAMES); }
static inline int deep_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg) {
    static struct deep_arg args[64];
    static int n;
    struct deep_arg *d = &args[n++ % 64];
    d->f = f; d->arg = arg;
    return pthread_create(t, a, deep_start, d);
}
#define pthread_create deep_create
