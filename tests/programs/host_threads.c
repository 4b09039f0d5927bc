/* HOST adapter test: N threads x M malloc/free pairs of a marker size (exact totals). */
#include <pthread.h>
#include <stdlib.h>

static int per_thread;
void *volatile sink;

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < per_thread; i++) {
        char *p = malloc(777);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 16;
    per_thread = argc > 2 ? atoi(argv[2]) : 100000;
    pthread_t t[256];
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    return 0;
}
