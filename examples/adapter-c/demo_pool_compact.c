/*
 * demo_pool_compact.c — the demo pool adapter of demo_pool_adapter.c on plugin ABI 1.2:
 * registered event types and compact events. Same rows (Event Type "DEMO_POOL_COMPACT", the
 * pool's tag as owner and as Attr `pool_tag`, C stacks), no text per event: each owner tag
 * gets an event type the first time it is seen (its texts travel once), and every MALLOC and
 * FREE is then emitted by type id with its pointer, size and one numeric Attr, `bucket` (the
 * size's power-of-two class), as a per-event value.
 *
 * Build (any C compiler; only schemas/memscope_plugin.h is needed):
 *   cc -shared -fPIC -O2 -I schemas -o libdemo_pool_compact.so \
 *      examples/adapter-c/demo_pool_compact.c -ldl
 * Run:
 *   memscope run --device npu,cpu --adapter-path ./libdemo_pool_compact.so --call-stack c:16 -- ./demo_job
 *   (the pool's blocks are host memory: rows on device "cpu", written with --device ...,cpu)
 * The demo job (its pool must be a shared library, as a real allocator's is, for the
 * adapter to interpose it):
 *   cc -shared -fPIC -O2 -o libdemo_pool.so examples/demo-pool/demo_pool.c
 *   cc -O2 -I examples/demo-pool -o demo_job examples/demo-pool/demo_job.c -L. -ldemo_pool -Wl,-rpath,$PWD
 *
 * Needs a probe of ABI >= 1.2 (host->size covers emit_compact): init declines on an older one
 * (a 1.1 adapter, demo_pool_adapter.c, works with both).
 * Rules kept (docs/adapter-spec.md): always forward; no allocation and no lock in the hook
 * (the tag table is claimed with compare-and-swap; two threads seeing a new tag at once may
 * register it twice, which only costs a second id); never block.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "memscope_plugin.h"

static const memscope_host *_Atomic g_host;

typedef void *(*alloc_fn)(size_t, const char *);
typedef void (*free_fn)(void *);

/* Owner tags seen so far and their type ids (the pool's tags are string literals of the job;
 * a tag is matched by content). Past TAGS tags, events go under the "other" type. */
#define TAGS 32
static const char *_Atomic g_tag[TAGS];
static _Atomic int32_t g_type[TAGS];
static _Atomic int32_t g_free_type = -1;
static _Atomic int32_t g_other_type = -1;

static int32_t register_tag(const memscope_host *h, const char *tag)
{
    char attrs[160];
    snprintf(attrs, sizeof attrs, "owner:%s,pool_tag:%s", tag, tag);
    memscope_event_type t = {0};
    t.struct_size = sizeof t;
    t.device = MEMSCOPE_DEVICE_CPU;
    t.event_type = "DEMO_POOL_COMPACT";
    t.attrs = attrs;
    t.value_names = "bucket";
    return h->register_type(&t);
}

/* The type of `tag`'s MALLOCs. */
static int32_t type_of(const memscope_host *h, const char *tag)
{
    if (!tag)
        tag = "none";
    for (int i = 0; i < TAGS; i++) {
        const char *t = atomic_load_explicit(&g_tag[i], memory_order_acquire);
        if (!t) {
            int32_t id = register_tag(h, tag);
            const char *expected = NULL;
            if (atomic_compare_exchange_strong(&g_tag[i], &expected, tag)) {
                atomic_store_explicit(&g_type[i], id, memory_order_release);
                return id;
            }
            if (strcmp(expected, tag) == 0)
                return id; /* another thread registered it meanwhile: ours is as good */
            continue;
        }
        if (strcmp(t, tag) == 0) {
            int32_t id = atomic_load_explicit(&g_type[i], memory_order_acquire);
            return id >= 0 ? id : register_tag(h, tag);
        }
    }
    return atomic_load_explicit(&g_other_type, memory_order_relaxed);
}

static uint64_t bucket(size_t size)
{
    uint64_t b = 0;
    while (size > 1) {
        size >>= 1;
        b++;
    }
    return b;
}

void *demo_pool_alloc(size_t size, const char *tag)
{
    static _Atomic(alloc_fn) real;
    alloc_fn f = atomic_load_explicit(&real, memory_order_acquire);
    if (!f) {
        f = (alloc_fn)dlsym(RTLD_NEXT, "demo_pool_alloc");
        atomic_store_explicit(&real, f, memory_order_release);
    }
    void *p = f ? f(size, tag) : NULL;
    const memscope_host *h = atomic_load_explicit(&g_host, memory_order_acquire);
    if (p && h) {
        uint64_t values[1] = {bucket(size)};
        h->emit_compact(type_of(h, tag), MEMSCOPE_KIND_MALLOC, (uint64_t)(uintptr_t)p, size,
                        MEMSCOPE_EVENT_C_STACK, values);
    }
    return p;
}

void demo_pool_free(void *p)
{
    static _Atomic(free_fn) real;
    free_fn f = atomic_load_explicit(&real, memory_order_acquire);
    if (!f) {
        f = (free_fn)dlsym(RTLD_NEXT, "demo_pool_free");
        atomic_store_explicit(&real, f, memory_order_release);
    }
    /* Before the real free, as memscope's own hooks do (the address may be reused at once). */
    const memscope_host *h = atomic_load_explicit(&g_host, memory_order_acquire);
    if (p && h)
        h->emit_compact(atomic_load_explicit(&g_free_type, memory_order_relaxed),
                        MEMSCOPE_KIND_FREE, (uint64_t)(uintptr_t)p, 0, 0, NULL);
    if (f)
        f(p);
}

static int demo_pool_compact_init(const memscope_host *host)
{
    if (!host || host->abi_major != MEMSCOPE_PLUGIN_ABI_MAJOR ||
        host->size < offsetof(memscope_host, emit_compact) + sizeof host->emit_compact)
        return 1; /* a probe older than ABI 1.2: declined, reported as PLUGIN_FAILED */
    memscope_event_type t = {0};
    t.struct_size = sizeof t;
    t.device = MEMSCOPE_DEVICE_CPU;
    t.event_type = "DEMO_POOL_COMPACT";
    int32_t free_type = host->register_type(&t);
    t.attrs = "owner:other,pool_tag:other";
    t.value_names = "bucket";
    int32_t other_type = host->register_type(&t);
    if (free_type < 0 || other_type < 0)
        return 2;
    atomic_store_explicit(&g_free_type, free_type, memory_order_relaxed);
    atomic_store_explicit(&g_other_type, other_type, memory_order_relaxed);
    for (int i = 0; i < TAGS; i++)
        atomic_store_explicit(&g_type[i], -1, memory_order_relaxed);
    atomic_store_explicit(&g_host, host, memory_order_release);
    return 0;
}

MEMSCOPE_PLUGIN_DEFINE("demo_pool_compact", demo_pool_compact_init);
