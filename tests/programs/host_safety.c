/* HOST adapter test: threads created and exiting in a loop (frees during teardown), a signal
 * handler that allocates, dlopen with RTLD_DEEPBIND, and malloc_usable_size on traced blocks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
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

int main(void) {
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
    return 0;
}
