/* Minimal msTX front end (abi.md Appendix A, verbatim): built as libms_tools_ext.so for the
 * mark_cost benchmark, so marks go app -> front end (PLT) -> slot -> tool, as in real jobs. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <stddef.h>

typedef void (*mstx_fn)(void);
typedef int (*get_table_fn)(int module, mstx_fn ***outTable, unsigned *outSize);

static mstx_fn core[5], dom[6], mem[5];                 /* slot[i] = func id i; [0] unused */
static mstx_fn *core_t[6] = {0, &core[1], &core[2], &core[3], &core[4], 0};
static mstx_fn *dom_t[7]  = {0, &dom[1], &dom[2], &dom[3], &dom[4], &dom[5], 0};
static mstx_fn *mem_t[6]  = {0, &mem[1], &mem[2], &mem[3], &mem[4], 0};

static int get_table(int module, mstx_fn ***outTable, unsigned *outSize)
{
    mstx_fn **t; unsigned n;
    switch (module) {
    case 1: t = core_t; n = 6; break;
    case 2: t = dom_t;  n = 7; break;
    case 3: t = mem_t;  n = 6; break;
    default: return 1;
    }
    if (!outSize) return 1;
    *outSize = n - 1;
    if (!outTable) return 1;
    *outTable = t;
    return 0;
}

static volatile unsigned state;   /* 0 uninit, 1 initializing, 2 complete, 3 failed */

static void init_once(void)
{
    if (state == 2 || state == 3) return;
    if (__sync_val_compare_and_swap(&state, 0, 1) == 0) {
        void *h = NULL;
        const char *p = getenv("MSTX_INJECTION_PATH");
        if (p) h = dlopen(p, RTLD_LAZY | RTLD_LOCAL);
        int (*init)(get_table_fn) = (int (*)(get_table_fn))dlsym(h, "InitInjectionMstx");
        int ok = init && init(get_table) == 0;
        if (!ok) {
            for (int i = 0; i < 5; i++) core[i] = mem[i] = 0;
            for (int i = 0; i < 6; i++) dom[i] = 0;
        }
        __sync_lock_test_and_set(&state, ok ? 2u : 3u);
    } else {
        while (state != 2 && state != 3) sched_yield();
    }
}

typedef void *H;
typedef void     (*mark_t)(const char *, H);
typedef uint64_t (*rstart_t)(const char *, H);
typedef void     (*rend_t)(uint64_t);
typedef void     (*toolid_t)(uint64_t *);
typedef H        (*dcreate_t)(const char *);
typedef void     (*dh_t)(H);
typedef void     (*dmark_t)(H, const char *, H);
typedef uint64_t (*drstart_t)(H, const char *, H);
typedef void     (*drend_t)(H, uint64_t);
typedef H        (*hreg_t)(H, const void *);
typedef void     (*hunreg_t)(H, H);
typedef void     (*rbatch_t)(H, const void *);
#define FN(tab, id, T) (init_once(), (T)tab[id])

void mstxMarkA(const char *m, H s)            { mark_t f = FN(core, 1, mark_t); if (f) f(m, s); }
uint64_t mstxRangeStartA(const char *m, H s)  { rstart_t f = FN(core, 2, rstart_t); return f ? f(m, s) : 0; }
void mstxRangeEnd(uint64_t id)                { rend_t f = FN(core, 3, rend_t); if (f) f(id); }
void mstxGetToolId(uint64_t *id)              { if (!id) return; toolid_t f = FN(core, 4, toolid_t);
                                                if (f) f(id); else *id = 0; }
H mstxDomainCreateA(const char *n)            { dcreate_t f = FN(dom, 1, dcreate_t); return f ? f(n) : NULL; }
void mstxDomainDestroy(H d)                   { dh_t f = FN(dom, 2, dh_t); if (f) f(d); }
void mstxDomainMarkA(H d, const char *m, H s) { dmark_t f = FN(dom, 3, dmark_t); if (f) f(d, m, s); }
uint64_t mstxDomainRangeStartA(H d, const char *m, H s)
                                              { drstart_t f = FN(dom, 4, drstart_t); return f ? f(d, m, s) : 0; }
void mstxDomainRangeEnd(H d, uint64_t id)     { drend_t f = FN(dom, 5, drend_t); if (f) f(d, id); }
H mstxMemHeapRegister(H d, const void *desc)  { hreg_t f = FN(mem, 1, hreg_t); return f ? f(d, desc) : NULL; }
void mstxMemHeapUnregister(H d, H heap)       { hunreg_t f = FN(mem, 2, hunreg_t); if (f) f(d, heap); }
void mstxMemRegionsRegister(H d, const void *b)   { rbatch_t f = FN(mem, 3, rbatch_t); if (f) f(d, b); }
void mstxMemRegionsUnregister(H d, const void *b) { rbatch_t f = FN(mem, 4, rbatch_t); if (f) f(d, b); }
