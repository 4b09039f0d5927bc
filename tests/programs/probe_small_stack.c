/* A thread created with a 32 KiB stack recurses 17 frames of 1 KiB each and then mallocs and
 * prints. glibc takes every thread's static TLS (the probe's included) out of its stack, so a
 * preload library with a large static TLS, or a hook with a large stack frame, overflows it.
 * Where the smallest thread stack is larger (aarch64: PTHREAD_STACK_MIN is 128 KiB), the
 * thread gets that and first uses up the difference, so the same 32 KiB are left to it. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bottom(void) {
    char *p = malloc(333);
    if (!p)
        return -1;
    snprintf(p, 333, "small-stack thread reached the bottom");
    puts(p);
    int n = (int)strlen(p);
    p = realloc(p, 666);
    free(p);
    return n;
}

static int recurse(int depth) {
    volatile char buf[1024];
    memset((char *)buf, depth, sizeof buf);
    int r = depth == 1 ? bottom() : recurse(depth - 1);
    return r + buf[depth % 1024] - depth;
}

static int frames = 17;
static size_t pad; /* bytes the thread uses up first (stack size beyond 32 KiB) */

static void *thread_main(void *arg) {
    (void)arg;
    if (pad > 0) {
        volatile char used[pad];
        memset((char *)used, 1, pad);
        return (void *)(long)(recurse(frames) + used[pad - 1] - 1);
    }
    return (void *)(long)recurse(frames);
}

int main(int argc, char **argv) {
    if (argc > 1)
        frames = atoi(argv[1]);
    pthread_attr_t a;
    pthread_attr_init(&a);
    size_t size = 32 * 1024;
    if (size < (size_t)PTHREAD_STACK_MIN) {
        pad = (size_t)PTHREAD_STACK_MIN - size;
        size = PTHREAD_STACK_MIN;
    }
    if (pthread_attr_setstacksize(&a, size) != 0) {
        fprintf(stderr, "pthread_attr_setstacksize failed\n");
        return 2;
    }
    pthread_t t;
    if (pthread_create(&t, &a, thread_main, NULL) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 2;
    }
    void *res;
    pthread_join(t, &res);
    printf("small-stack thread returned %ld\n", (long)res);
    return 0;
}
