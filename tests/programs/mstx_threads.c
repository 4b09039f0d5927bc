/*
 * 8 threads, each with M marks "t<thread>-<i>" (thread = 0..7,
 * i = 0..M-1; M = argv[1], default 1000). The first call of all threads
 * races into the front end's init-once. Prints nothing.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "mstx_api.h"

#define THREADS 8

static int marks_per_thread;

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    char msg[64];
    for (int i = 0; i < marks_per_thread; i++) {
        snprintf(msg, sizeof msg, "t%d-%d", t, i);
        mstxMarkA(msg, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    marks_per_thread = argc > 1 ? atoi(argv[1]) : 1000;
    if (marks_per_thread < 0) {
        fprintf(stderr, "mstx_threads: bad count %s\n", argv[1]);
        return 2;
    }
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        if (pthread_create(&th[t], NULL, worker, (void *)(long)t) != 0) {
            fprintf(stderr, "mstx_threads: pthread_create failed\n");
            return 1;
        }
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    return 0;
}
