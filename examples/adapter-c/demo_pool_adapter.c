/*
 * demo_pool_adapter.c — an example third-party memscope adapter written in C, outside
 * memscope's workspace: it reports the blocks of the demo pool library
 * (examples/demo-pool/demo_pool.h) as MALLOC/FREE rows of its own Event Type "DEMO_POOL",
 * with the pool's tag as owner and its own Attr key `pool_tag`, and asks for C stacks.
 *
 * Build (any C compiler; only schemas/memscope_plugin.h is needed):
 *   cc -shared -fPIC -O2 -I schemas -o libdemo_pool_adapter.so \
 *      examples/adapter-c/demo_pool_adapter.c -ldl
 * Run:
 *   memscope run --device npu,cpu --adapter-path ./libdemo_pool_adapter.so --call-stack c:16 -- ./demo_job
 *   (the pool's blocks are host memory: rows on device "cpu", written with --device ...,cpu)
 * The demo job (its pool must be a shared library, as a real allocator's is, for the
 * adapter to interpose it):
 *   cc -shared -fPIC -O2 -o libdemo_pool.so examples/demo-pool/demo_pool.c
 *   cc -O2 -I examples/demo-pool -o demo_job examples/demo-pool/demo_job.c -L. -ldemo_pool -Wl,-rpath,$PWD
 *   (or "adapter_paths": ["./libdemo_pool_adapter.so"] in config.json)
 *
 * How: memscope puts the adapter in LD_PRELOAD after its probe, so the adapter's
 * demo_pool_alloc/demo_pool_free interpose the library's; each forwards to the real function
 * (dlsym RTLD_NEXT) and then emits an event. The probe calls demo_pool_init when the process
 * starts; before that (host == NULL) events are dropped and counted.
 * Rules kept (docs/adapter-spec.md): always forward; one check when not recording; no
 * allocation in the hook (attrs are formatted on the stack); never block.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include "memscope_plugin.h"

static const memscope_host *_Atomic g_host;
static _Atomic unsigned long g_dropped_before_init;

typedef void *(*alloc_fn)(size_t, const char *);
typedef void (*free_fn)(void *);

static void emit(uint32_t kind, void *p, size_t size, const char *attrs)
{
    const memscope_host *h = atomic_load_explicit(&g_host, memory_order_acquire);
    if (!h) {
        atomic_fetch_add_explicit(&g_dropped_before_init, 1, memory_order_relaxed);
        return;
    }
    if (!h->enabled())
        return;
    memscope_plugin_event ev = {0};
    ev.struct_size = sizeof ev;
    ev.kind = kind;
    ev.device = MEMSCOPE_DEVICE_CPU;
    ev.ptr = (uint64_t)(uintptr_t)p;
    ev.size = size;
    ev.event_type = "DEMO_POOL";
    ev.attrs = attrs;
    /* ABI 1.1: ask for the C stack of the code that called the pool. */
    ev.flags = h->abi_minor >= 1 ? MEMSCOPE_EVENT_C_STACK : 0;
    h->emit(&ev);
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
    if (p) {
        char attrs[160];
        snprintf(attrs, sizeof attrs, "owner:%s,pool_tag:%s", tag ? tag : "none",
                 tag ? tag : "none");
        emit(MEMSCOPE_KIND_MALLOC, p, size, attrs);
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
    /* Stamped before the call, as memscope's own hooks do: once freed, the address may be
     * handed out again by another thread before our FREE is written. */
    if (p)
        emit(MEMSCOPE_KIND_FREE, p, 0, NULL);
    if (f)
        f(p);
}

static int demo_pool_init(const memscope_host *host)
{
    if (!host || host->size < sizeof(memscope_host) || host->abi_major != MEMSCOPE_PLUGIN_ABI_MAJOR)
        return 1;
    atomic_store_explicit(&g_host, host, memory_order_release);
    unsigned long early = atomic_load_explicit(&g_dropped_before_init, memory_order_relaxed);
    if (early) {
        char msg[96];
        snprintf(msg, sizeof msg, "demo_pool: %lu events before init were dropped", early);
        host->log(MEMSCOPE_LOG_WARN, msg);
    }
    return 0;
}

MEMSCOPE_PLUGIN_DEFINE("demo_pool_c", demo_pool_init);
