/*
 * msTX marks on changing runtime devices, with no ACL hook involved:
 *   mark "before-runtime"          (no runtime loaded yet: Device N/A)
 *   dlopen(argv[1], RTLD_LOCAL)    (the stand-in libruntime.so, loaded late and locally)
 *   rtSetDevice(2); mark "on-2"
 *   a thread: rtSetDevice(3); mark "thread-on-3"; range "thread-range"
 *   mark "still-on-2"; rtSetDevice(1); mark "on-1"
 *   fork: the child marks "child-on-1" (its own stream, same device)
 * Exits 0, or 1 when the runtime cannot be loaded.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mstx_api.h"

typedef int (*set_device_fn)(int32_t);
static set_device_fn set_device;

static void *worker(void *arg)
{
    (void)arg;
    set_device(3);
    mstxMarkA("thread-on-3", NULL);
    mstxRangeId id = mstxRangeStartA("thread-range", NULL);
    mstxRangeEnd(id);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mstx_devices LIBRUNTIME\n");
        return 2;
    }
    mstxMarkA("before-runtime", NULL);
    void *rt = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!rt) {
        fprintf(stderr, "mstx_devices: %s\n", dlerror());
        return 1;
    }
    set_device = (set_device_fn)dlsym(rt, "rtSetDevice");
    if (!set_device) {
        fprintf(stderr, "mstx_devices: no rtSetDevice\n");
        return 1;
    }
    set_device(2);
    mstxMarkA("on-2", NULL);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    mstxMarkA("still-on-2", NULL);
    set_device(1);
    mstxMarkA("on-1", NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        mstxMarkA("child-on-1", NULL);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return 0;
}
