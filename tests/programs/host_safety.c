/* HOST adapter test: threads created and exiting in a loop (frees during teardown), a signal
 * handler that allocates, dlopen with RTLD_DEEPBIND, and malloc_usable_size on traced blocks.
 * With a path to host_dlib's shared object as argv[1], that library is opened with
 * RTLD_DEEPBIND too, so its malloc/free bind to glibc directly (bypassing the tracer): the
 * program then frees and reallocates blocks the tracer never saw, and the library frees a
 * block the tracer saw allocated. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;
static __thread char *tls_block;

static void destructor(void *p) { free(p); }
static pthread_key_t key;

static void *short_thread(void *arg) {
    (void)arg;
    tls_block = malloc(8888);
    pthread_setspecific(key, malloc(9999)); /* freed by the key destructor at thread exit */
    free(tls_block);
    return NULL;
}

static void on_usr1(int sig) {
    (void)sig;
    void *p = malloc(1212);
    sink = p;
    free(p);
}

static int deepbind_library(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_DEEPBIND);
    if (!h) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        return 10;
    }
    void *(*lib_alloc)(size_t) = (void *(*)(size_t))dlsym(h, "dlib_alloc");
    void (*lib_free)(void *) = (void (*)(void *))dlsym(h, "dlib_free");
    if (!lib_alloc || !lib_free) return 11;
    for (int i = 0; i < 100; i++) {
        /* Allocated by glibc behind the tracer's back, freed through the tracer's free. */
        char *p = lib_alloc(5555);
        if (!p) return 12;
        memset(p, 1, 5555);
        if (malloc_usable_size(p) < 5555) return 13;
        free(p);
        /* Grown through the tracer's realloc. */
        char *q = lib_alloc(64);
        if (!q) return 14;
        memset(q, 2, 64);
        q = realloc(q, 70000);
        if (!q || q[63] != 2) return 15;
        free(q);
        /* Allocated through the tracer, freed by glibc directly. */
        char *r = malloc(6666);
        if (!r) return 16;
        memset(r, 3, 6666);
        lib_free(r);
    }
    return 0;
}

int main(int argc, char **argv) {
    pthread_key_create(&key, destructor);
    for (int i = 0; i < 200; i++) {
        pthread_t t;
        pthread_create(&t, NULL, short_thread, NULL);
        pthread_join(t, NULL);
    }
    signal(SIGUSR1, on_usr1);
    for (int i = 0; i < 50; i++) raise(SIGUSR1);
    void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_DEEPBIND);
    if (!h) return 1;
    double (*cosine)(double) = (double (*)(double))dlsym(h, "cos");
    if (!cosine || cosine(0.0) != 1.0) return 2;
    char *p = malloc(100);
    if (malloc_usable_size(p) < 100) return 3;
    free(p);
    if (argc > 1) {
        int rc = deepbind_library(argv[1]);
        if (rc) return rc;
    }
    printf("safe\n");
    return 0;
}
