/*
 * Runs a program of stream operations on the sim-npu stand-ins (issue 36):
 * the race check's scenarios and random sequences, executed through the
 * real ABIs so that memscope records them as a job's rows. argv[1] is a
 * text file, one operation per line:
 *
 *   P i             a program begins: aclrtSynchronizeDevice, then every
 *                   event is destroyed (programs share nothing unordered)
 *   L s name ro rw out
 *                   a custom operator on stream s, reported by its
 *                   sanitizer-op: mark (mstxMarkA on the stream): reads
 *                   ro and rw, writes rw and out (comma-separated hex
 *                   addresses of 256-byte tensors, or -)
 *   S s             stream s is created (if not yet)
 *   E e / X e       event e is created (again: destroyed first) / destroyed
 *   R e s           aclrtRecordEvent(e, s)
 *   W s e           aclrtStreamWaitEvent(s, e)
 *   Y s / Z e / D   aclrtSynchronizeStream / Event / Device
 *   A a / F a       the caching pool (msTX domain ptaCaching) hands out /
 *                   takes back the 256-byte block at a (a live block is
 *                   freed first / a free block is handed out first, so the
 *                   rows always pair)
 *
 * Stream 0 is the default stream (NULL); streams 1-7 and events 0-127 are
 * created on first use. Prints "ops N" and exits 0, or 1 with a message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mstx_api.h"
#include "sim_npu.h"

aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtCreateEvent(aclrtEvent *event);
aclError aclrtDestroyEvent(aclrtEvent event);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtSynchronizeEvent(aclrtEvent event);
aclError aclrtSynchronizeDevice(void);

#define NSTREAMS 8
#define NEVENTS 128
#define HEAP_BASE 0x100000ULL
#define HEAP_SIZE 0x100000ULL
#define BLOCK 256

static aclrtStream streams[NSTREAMS];
static aclrtEvent events[NEVENTS];
static mstxDomainHandle_t pool;
static mstxMemHeapHandle_t heap;
static unsigned char live[HEAP_SIZE / BLOCK];

static int fail(const char *what, long line)
{
    fprintf(stderr, "race_prog: line %ld: %s\n", line, what);
    return 1;
}

static aclrtStream stream(long s)
{
    if (s <= 0 || s >= NSTREAMS)
        return NULL;
    if (!streams[s] && aclrtCreateStream(&streams[s]) != 0)
        return NULL;
    return streams[s];
}

static aclrtEvent event(long e)
{
    if (e < 0 || e >= NEVENTS)
        return NULL;
    if (!events[e] && aclrtCreateEvent(&events[e]) != 0)
        return NULL;
    return events[e];
}

static void destroy_event(long e)
{
    if (e >= 0 && e < NEVENTS && events[e]) {
        aclrtDestroyEvent(events[e]);
        events[e] = NULL;
    }
}

static int block_slot(uint64_t a)
{
    if (a < HEAP_BASE || a >= HEAP_BASE + HEAP_SIZE || (a - HEAP_BASE) % BLOCK)
        return -1;
    return (int)((a - HEAP_BASE) / BLOCK);
}

static void region(uint64_t a, int take)
{
    int i = block_slot(a);
    if (take) {
        mstxMemVirtualRangeDesc_t r = {0, (void *)(uintptr_t)a, BLOCK};
        mstxMemRegionsRegisterBatch_t b = {heap, MSTX_MEM_TYPE_VIRTUAL_ADDRESS, 1, &r, NULL};
        mstxMemRegionsRegister(pool, &b);
    } else {
        mstxMemRegionRef_t ref;
        ref.refType = MSTX_MEM_REGION_REF_TYPE_POINTER;
        ref.pointer = (void *)(uintptr_t)a;
        mstxMemRegionsUnregisterBatch_t b = {1, &ref};
        mstxMemRegionsUnregister(pool, &b);
    }
    live[i] = (unsigned char)take;
}

/* Appends "alias:addr:256" items of a comma-separated list to buf. */
static int list(char *buf, size_t cap, const char *items, int *first)
{
    if (strcmp(items, "-") == 0)
        return 0;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", items);
    for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t n = strlen(buf);
        if (snprintf(buf + n, cap - n, "%st%s:%s:%d", *first ? "" : ",", t + 2, t, BLOCK) >=
            (int)(cap - n))
            return -1;
        *first = 0;
    }
    return 0;
}

static int launch(long s, const char *name, const char *ro, const char *rw, const char *out)
{
    char msg[1024];
    int first = 1;
    snprintf(msg, sizeof msg, "sanitizer-op: name=%s;read=", name);
    if (list(msg, sizeof msg, ro, &first) || list(msg, sizeof msg, rw, &first))
        return -1;
    if (first) /* nothing read: no read field */
        msg[strlen(msg) - strlen(";read=")] = '\0';
    size_t n = strlen(msg);
    snprintf(msg + n, sizeof msg - n, ";write=");
    first = 1;
    if (list(msg, sizeof msg, rw, &first) || list(msg, sizeof msg, out, &first))
        return -1;
    if (first)
        msg[strlen(msg) - strlen(";write=")] = '\0';
    aclrtStream st = s == 0 ? NULL : stream(s);
    if (s != 0 && !st)
        return -1;
    mstxMarkA(msg, st);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: race_prog SCRIPT\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    if (aclrtSetDevice(0) != 0)
        return fail("aclrtSetDevice failed", 0);
    pool = mstxDomainCreateA("ptaCaching");
    mstxMemVirtualRangeDesc_t hr = {0, (void *)(uintptr_t)HEAP_BASE, HEAP_SIZE};
    mstxMemHeapDesc_t hd = {MSTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, MSTX_MEM_TYPE_VIRTUAL_ADDRESS,
                            &hr};
    heap = mstxMemHeapRegister(pool, &hd);

    char line[512], op[8], a1[256], a2[256], a3[256], a4[256], a5[256];
    long lineno = 0, ops = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        int n = sscanf(line, "%7s %255s %255s %255s %255s %255s", op, a1, a2, a3, a4, a5);
        if (n <= 0 || op[0] == '#')
            continue;
        long x = n > 1 ? strtol(a1, NULL, 0) : 0, y = n > 2 ? strtol(a2, NULL, 0) : 0;
        int rc = 0;
        switch (op[0]) {
        case 'P':
            rc = aclrtSynchronizeDevice();
            for (long e = 0; e < NEVENTS; e++)
                destroy_event(e);
            break;
        case 'L':
            if (n != 6)
                return fail("L takes: stream name ro rw out", lineno);
            rc = launch(x, a2, a3, a4, a5);
            break;
        case 'S':
            rc = stream(x) ? 0 : -1;
            break;
        case 'E':
            destroy_event(x);
            rc = event(x) ? 0 : -1;
            break;
        case 'X':
            destroy_event(x);
            break;
        case 'R':
            rc = event(x) ? aclrtRecordEvent(event(x), y == 0 ? NULL : stream(y)) : -1;
            break;
        case 'W':
            rc = event(y) ? aclrtStreamWaitEvent(x == 0 ? NULL : stream(x), event(y)) : -1;
            break;
        case 'Y':
            rc = aclrtSynchronizeStream(x == 0 ? NULL : stream(x));
            break;
        case 'Z':
            rc = event(x) ? aclrtSynchronizeEvent(event(x)) : -1;
            break;
        case 'D':
            rc = aclrtSynchronizeDevice();
            break;
        case 'A':
        case 'F': {
            uint64_t a = strtoull(a1, NULL, 0);
            if (block_slot(a) < 0)
                return fail("address outside the pool", lineno);
            int take = op[0] == 'A';
            if (live[block_slot(a)] == take)
                region(a, !take);
            region(a, take);
            break;
        }
        default:
            return fail("unknown operation", lineno);
        }
        if (rc != 0)
            return fail("call failed", lineno);
        ops++;
    }
    fclose(f);
    mstxMemHeapUnregister(pool, heap);
    printf("ops %ld\n", ops);
    return 0;
}
