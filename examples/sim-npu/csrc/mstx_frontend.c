/*
 * msTX front end: the 13 public mstx* functions and the injection protocol
 * of abi.md §1.5 (own code, following the description of Appendix A).
 *
 * Built twice: as libms_tools_ext.so (the copy frameworks link) and as
 * libmstx_pyfront.so (the copy the Python `mstx` shim loads). Each DSO has
 * its own private context - the whole file is compiled with
 * -fvisibility=hidden and only the public API is exported - so each copy
 * runs its own handshake with the tool, as real front-end copies do.
 *
 * Two details keep the copies independent even when both are in the
 * global scope: the context is static, and the lazy-init trampolines
 * re-dispatch through static *_impl functions rather than through the
 * exported names (a PLT call from one copy could bind to the other copy's
 * export).
 *
 * Protocol summary (state: 0 UNINITED, 1 INITIALIZING, 2 COMPLETE,
 * 3 FAILED):
 *  - every slot starts out holding its lazy-init trampoline;
 *  - the first call of any API runs the trampoline -> init_once();
 *  - init_once: CAS 0->1; the winner locates the tool, losers sched_yield()
 *    until the state is 2 or 3;
 *  - tool lookup: h = dlopen($MSTX_INJECTION_PATH, RTLD_LAZY|RTLD_LOCAL) if
 *    the variable is set, else NULL; then dlsym(h, "InitInjectionMstx"),
 *    where NULL means RTLD_DEFAULT (the global scope, which holds every
 *    LD_PRELOAD library) - also when the dlopen failed;
 *  - InitInjectionMstx(get_module_func_table) fills slots through the
 *    tables; on success, slots still holding a trampoline become NULL; on
 *    failure (missing symbol or nonzero return) EVERY slot becomes NULL,
 *    including the ones the tool already wrote;
 *  - the trampoline then re-dispatches, so the first call reaches the tool;
 *  - a NULL slot gives the "no tool" default result of §1.2.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "mstx_api.h"

#define MSTX_EXPORT __attribute__((visibility("default")))

enum { ST_UNINITED = 0, ST_INITIALIZING = 1, ST_COMPLETE = 2, ST_FAILED = 3 };

/* Signatures of the public functions; a tool's slot function has exactly
 * the same signature as the public function of its row. */
typedef void (*mark_fn)(const char *, aclrtStream);
typedef mstxRangeId (*range_start_fn)(const char *, aclrtStream);
typedef void (*range_end_fn)(mstxRangeId);
typedef void (*tool_id_fn)(uint64_t *);
typedef mstxDomainHandle_t (*domain_create_fn)(const char *);
typedef void (*domain_destroy_fn)(mstxDomainHandle_t);
typedef void (*domain_mark_fn)(mstxDomainHandle_t, const char *, aclrtStream);
typedef mstxRangeId (*domain_range_start_fn)(mstxDomainHandle_t, const char *, aclrtStream);
typedef void (*domain_range_end_fn)(mstxDomainHandle_t, mstxRangeId);
typedef mstxMemHeapHandle_t (*heap_register_fn)(mstxDomainHandle_t, const mstxMemHeapDesc_t *);
typedef void (*heap_unregister_fn)(mstxDomainHandle_t, mstxMemHeapHandle_t);
typedef void (*regions_register_fn)(mstxDomainHandle_t, const mstxMemRegionsRegisterBatch_t *);
typedef void (*regions_unregister_fn)(mstxDomainHandle_t,
                                      const mstxMemRegionsUnregisterBatch_t *);

/* ---- implementations (defined below); trampolines call these ---------- */

static void mark_impl(const char *m, aclrtStream s);
static mstxRangeId range_start_impl(const char *m, aclrtStream s);
static void range_end_impl(mstxRangeId id);
static void tool_id_impl(uint64_t *id);
static mstxDomainHandle_t domain_create_impl(const char *n);
static void domain_destroy_impl(mstxDomainHandle_t d);
static void domain_mark_impl(mstxDomainHandle_t d, const char *m, aclrtStream s);
static mstxRangeId domain_range_start_impl(mstxDomainHandle_t d, const char *m, aclrtStream s);
static void domain_range_end_impl(mstxDomainHandle_t d, mstxRangeId id);
static mstxMemHeapHandle_t heap_register_impl(mstxDomainHandle_t d, const mstxMemHeapDesc_t *h);
static void heap_unregister_impl(mstxDomainHandle_t d, mstxMemHeapHandle_t h);
static void regions_register_impl(mstxDomainHandle_t d, const mstxMemRegionsRegisterBatch_t *b);
static void regions_unregister_impl(mstxDomainHandle_t d,
                                    const mstxMemRegionsUnregisterBatch_t *b);
static void init_once(void);

/* ---- lazy-init trampolines: the initial value of every slot ------------ */

static void mark_tramp(const char *m, aclrtStream s)
{
    init_once();
    mark_impl(m, s);
}
static mstxRangeId range_start_tramp(const char *m, aclrtStream s)
{
    init_once();
    return range_start_impl(m, s);
}
static void range_end_tramp(mstxRangeId id)
{
    init_once();
    range_end_impl(id);
}
static void tool_id_tramp(uint64_t *id)
{
    init_once();
    tool_id_impl(id);
}
static mstxDomainHandle_t domain_create_tramp(const char *n)
{
    init_once();
    return domain_create_impl(n);
}
static void domain_destroy_tramp(mstxDomainHandle_t d)
{
    init_once();
    domain_destroy_impl(d);
}
static void domain_mark_tramp(mstxDomainHandle_t d, const char *m, aclrtStream s)
{
    init_once();
    domain_mark_impl(d, m, s);
}
static mstxRangeId domain_range_start_tramp(mstxDomainHandle_t d, const char *m, aclrtStream s)
{
    init_once();
    return domain_range_start_impl(d, m, s);
}
static void domain_range_end_tramp(mstxDomainHandle_t d, mstxRangeId id)
{
    init_once();
    domain_range_end_impl(d, id);
}
static mstxMemHeapHandle_t heap_register_tramp(mstxDomainHandle_t d, const mstxMemHeapDesc_t *h)
{
    init_once();
    return heap_register_impl(d, h);
}
static void heap_unregister_tramp(mstxDomainHandle_t d, mstxMemHeapHandle_t h)
{
    init_once();
    heap_unregister_impl(d, h);
}
static void regions_register_tramp(mstxDomainHandle_t d, const mstxMemRegionsRegisterBatch_t *b)
{
    init_once();
    regions_register_impl(d, b);
}
static void regions_unregister_tramp(mstxDomainHandle_t d,
                                     const mstxMemRegionsUnregisterBatch_t *b)
{
    init_once();
    regions_unregister_impl(d, b);
}

/* ---- the private context ---------------------------------------------- */

#define FP(f) ((mstxFuncPointer)(f))

/* Slot arrays are indexed by function id; index 0 (INVALID) is unused. */
static mstxFuncPointer core_slots[MSTX_API_CORE_SIZE] = {
    NULL, FP(mark_tramp), FP(range_start_tramp), FP(range_end_tramp), FP(tool_id_tramp)};
static mstxFuncPointer dom_slots[MSTX_API_CORE2_SIZE] = {
    NULL, FP(domain_create_tramp), FP(domain_destroy_tramp), FP(domain_mark_tramp),
    FP(domain_range_start_tramp), FP(domain_range_end_tramp)};
static mstxFuncPointer mem_slots[MSTX_API_CORE_MEM_SIZE] = {
    NULL, FP(heap_register_tramp), FP(heap_unregister_tramp), FP(regions_register_tramp),
    FP(regions_unregister_tramp)};

/* The trampolines, kept to recognise slots the tool left alone. */
static const mstxFuncPointer core_tramps[MSTX_API_CORE_SIZE] = {
    NULL, FP(mark_tramp), FP(range_start_tramp), FP(range_end_tramp), FP(tool_id_tramp)};
static const mstxFuncPointer dom_tramps[MSTX_API_CORE2_SIZE] = {
    NULL, FP(domain_create_tramp), FP(domain_destroy_tramp), FP(domain_mark_tramp),
    FP(domain_range_start_tramp), FP(domain_range_end_tramp)};
static const mstxFuncPointer mem_tramps[MSTX_API_CORE_MEM_SIZE] = {
    NULL, FP(heap_register_tramp), FP(heap_unregister_tramp), FP(regions_register_tramp),
    FP(regions_unregister_tramp)};

/* Tables handed to the tool: SIZE + 1 entries of slot addresses, NULL at
 * index 0 and a NULL sentinel at index SIZE. */
static mstxFuncPointer *core_table[MSTX_API_CORE_SIZE + 1] = {
    NULL, &core_slots[1], &core_slots[2], &core_slots[3], &core_slots[4], NULL};
static mstxFuncPointer *dom_table[MSTX_API_CORE2_SIZE + 1] = {
    NULL, &dom_slots[1], &dom_slots[2], &dom_slots[3], &dom_slots[4], &dom_slots[5], NULL};
static mstxFuncPointer *mem_table[MSTX_API_CORE_MEM_SIZE + 1] = {
    NULL, &mem_slots[1], &mem_slots[2], &mem_slots[3], &mem_slots[4], NULL};

static unsigned init_state = ST_UNINITED;

/* ---- handshake ---------------------------------------------------------- */

static int get_module_func_table(mstxFuncModule module, mstxFuncTable *outTable,
                                 unsigned int *outSize)
{
    mstxFuncTable table;
    unsigned int size;
    switch (module) {
    case MSTX_API_MODULE_CORE:
        table = core_table;
        size = MSTX_API_CORE_SIZE;
        break;
    case MSTX_API_MODULE_CORE_DOMAIN:
        table = dom_table;
        size = MSTX_API_CORE2_SIZE;
        break;
    case MSTX_API_MODULE_CORE_MEM:
        table = mem_table;
        size = MSTX_API_CORE_MEM_SIZE;
        break;
    default:
        return MSTX_FAIL;   /* invalid module: touch nothing */
    }
    if (!outSize)
        return MSTX_FAIL;
    *outSize = size;
    if (!outTable)
        return MSTX_FAIL;   /* *outSize has already been written */
    *outTable = table;
    return MSTX_SUCCESS;
}

static void settle_slots(mstxFuncPointer *slots, const mstxFuncPointer *tramps, int n, int ok)
{
    for (int i = 0; i < n; i++) {
        mstxFuncPointer cur = __atomic_load_n(&slots[i], __ATOMIC_RELAXED);
        if (!ok || cur == tramps[i])
            __atomic_store_n(&slots[i], NULL, __ATOMIC_RELAXED);
    }
}

static void init_once(void)
{
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == ST_COMPLETE)
        return;
    unsigned expected = ST_UNINITED;
    if (!__atomic_compare_exchange_n(&init_state, &expected, ST_INITIALIZING, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* Someone else is initialising (or has finished, possibly with
         * FAILED). A tool that calls mstx from InitInjectionMstx ends up
         * here on its own thread and spins forever, as with the real
         * front end. */
        for (;;) {
            unsigned st = __atomic_load_n(&init_state, __ATOMIC_ACQUIRE);
            if (st == ST_COMPLETE || st == ST_FAILED)
                return;
            sched_yield();
        }
    }

    void *h = NULL;
    const char *path = getenv("MSTX_INJECTION_PATH");
    if (path)
        h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    /* A NULL handle (variable unset, or dlopen failed) is RTLD_DEFAULT. */
    mstxInitInjectionFunc init =
        (mstxInitInjectionFunc)dlsym(h ? h : RTLD_DEFAULT, "InitInjectionMstx");
    int ok = init != NULL && init(get_module_func_table) == MSTX_SUCCESS;

    settle_slots(core_slots, core_tramps, MSTX_API_CORE_SIZE, ok);
    settle_slots(dom_slots, dom_tramps, MSTX_API_CORE2_SIZE, ok);
    settle_slots(mem_slots, mem_tramps, MSTX_API_CORE_MEM_SIZE, ok);
    __atomic_store_n(&init_state, ok ? ST_COMPLETE : ST_FAILED, __ATOMIC_RELEASE);
}

/* ---- dispatch ----------------------------------------------------------- */

#define SLOT(arr, id, T) ((T)__atomic_load_n(&(arr)[id], __ATOMIC_ACQUIRE))

static void mark_impl(const char *m, aclrtStream s)
{
    mark_fn f = SLOT(core_slots, MSTX_API_CORE_MARK_A, mark_fn);
    if (f)
        f(m, s);
}

static mstxRangeId range_start_impl(const char *m, aclrtStream s)
{
    range_start_fn f = SLOT(core_slots, MSTX_API_CORE_RANGE_START_A, range_start_fn);
    return f ? f(m, s) : 0;
}

static void range_end_impl(mstxRangeId id)
{
    range_end_fn f = SLOT(core_slots, MSTX_API_CORE_RANGE_END, range_end_fn);
    if (f)
        f(id);
}

static void tool_id_impl(uint64_t *id)
{
    tool_id_fn f = SLOT(core_slots, MSTX_API_CORE_GET_TOOL_ID, tool_id_fn);
    if (f)
        f(id);
    else
        *id = MSTX_TOOL_INVALID_ID;
}

static mstxDomainHandle_t domain_create_impl(const char *n)
{
    domain_create_fn f = SLOT(dom_slots, MSTX_API_CORE2_DOMAIN_CREATE_A, domain_create_fn);
    return f ? f(n) : NULL;
}

static void domain_destroy_impl(mstxDomainHandle_t d)
{
    domain_destroy_fn f = SLOT(dom_slots, MSTX_API_CORE2_DOMAIN_DESTROY, domain_destroy_fn);
    if (f)
        f(d);
}

static void domain_mark_impl(mstxDomainHandle_t d, const char *m, aclrtStream s)
{
    domain_mark_fn f = SLOT(dom_slots, MSTX_API_CORE2_DOMAIN_MARK_A, domain_mark_fn);
    if (f)
        f(d, m, s);
}

static mstxRangeId domain_range_start_impl(mstxDomainHandle_t d, const char *m, aclrtStream s)
{
    domain_range_start_fn f =
        SLOT(dom_slots, MSTX_API_CORE2_DOMAIN_RANGE_START_A, domain_range_start_fn);
    return f ? f(d, m, s) : 0;
}

static void domain_range_end_impl(mstxDomainHandle_t d, mstxRangeId id)
{
    domain_range_end_fn f = SLOT(dom_slots, MSTX_API_CORE2_DOMAIN_RANGE_END, domain_range_end_fn);
    if (f)
        f(d, id);
}

static mstxMemHeapHandle_t heap_register_impl(mstxDomainHandle_t d, const mstxMemHeapDesc_t *h)
{
    heap_register_fn f = SLOT(mem_slots, MSTX_API_CORE_MEMHEAP_REGISTER, heap_register_fn);
    return f ? f(d, h) : NULL;
}

static void heap_unregister_impl(mstxDomainHandle_t d, mstxMemHeapHandle_t h)
{
    heap_unregister_fn f = SLOT(mem_slots, MSTX_API_CORE_MEMHEAP_UNREGISTER, heap_unregister_fn);
    if (f)
        f(d, h);
}

static void regions_register_impl(mstxDomainHandle_t d, const mstxMemRegionsRegisterBatch_t *b)
{
    regions_register_fn f =
        SLOT(mem_slots, MSTX_API_CORE_MEM_REGIONS_REGISTER, regions_register_fn);
    if (f)
        f(d, b);
}

static void regions_unregister_impl(mstxDomainHandle_t d,
                                    const mstxMemRegionsUnregisterBatch_t *b)
{
    regions_unregister_fn f =
        SLOT(mem_slots, MSTX_API_CORE_MEM_REGIONS_UNREGISTER, regions_unregister_fn);
    if (f)
        f(d, b);
}

/* ---- public API ----------------------------------------------------------- */

MSTX_EXPORT void mstxMarkA(const char *message, aclrtStream stream)
{
    mark_impl(message, stream);
}

MSTX_EXPORT mstxRangeId mstxRangeStartA(const char *message, aclrtStream stream)
{
    return range_start_impl(message, stream);
}

MSTX_EXPORT void mstxRangeEnd(mstxRangeId id)
{
    range_end_impl(id);
}

/* A NULL `id` returns at once: no handshake, no tool call. */
MSTX_EXPORT void mstxGetToolId(uint64_t *id)
{
    if (!id)
        return;
    tool_id_impl(id);
}

MSTX_EXPORT mstxDomainHandle_t mstxDomainCreateA(const char *name)
{
    return domain_create_impl(name);
}

MSTX_EXPORT void mstxDomainDestroy(mstxDomainHandle_t domain)
{
    domain_destroy_impl(domain);
}

MSTX_EXPORT void mstxDomainMarkA(mstxDomainHandle_t domain, const char *message,
                                 aclrtStream stream)
{
    domain_mark_impl(domain, message, stream);
}

MSTX_EXPORT mstxRangeId mstxDomainRangeStartA(mstxDomainHandle_t domain, const char *message,
                                              aclrtStream stream)
{
    return domain_range_start_impl(domain, message, stream);
}

MSTX_EXPORT void mstxDomainRangeEnd(mstxDomainHandle_t domain, mstxRangeId id)
{
    domain_range_end_impl(domain, id);
}

MSTX_EXPORT mstxMemHeapHandle_t mstxMemHeapRegister(mstxDomainHandle_t domain,
                                                    const mstxMemHeapDesc_t *desc)
{
    return heap_register_impl(domain, desc);
}

MSTX_EXPORT void mstxMemHeapUnregister(mstxDomainHandle_t domain, mstxMemHeapHandle_t heap)
{
    heap_unregister_impl(domain, heap);
}

MSTX_EXPORT void mstxMemRegionsRegister(mstxDomainHandle_t domain,
                                        const mstxMemRegionsRegisterBatch_t *desc)
{
    regions_register_impl(domain, desc);
}

MSTX_EXPORT void mstxMemRegionsUnregister(mstxDomainHandle_t domain,
                                          const mstxMemRegionsUnregisterBatch_t *desc)
{
    regions_unregister_impl(domain, desc);
}
