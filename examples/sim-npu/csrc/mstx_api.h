/*
 * Public msTX API as exported by libms_tools_ext.so (abi.md §1.1-§1.4).
 *
 * This header is self-contained so that test programs can include it on
 * its own (cc prog.c -I examples/sim-npu/csrc ...). It declares the 13
 * public functions, the descriptor structs with the exact x86_64 / LP64
 * layout of §1.3, and the injection-protocol types of §1.4.
 */
#ifndef SIM_NPU_MSTX_API_H
#define SIM_NPU_MSTX_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- §1.1 basic types ------------------------------------------------ */

typedef uint64_t mstxRangeId;              /* 0 = invalid / failed */
typedef void *aclrtStream;                 /* may be NULL */
typedef struct mstxDomainRegistration_st *mstxDomainHandle_t;
typedef struct mstxMemHeap_st *mstxMemHeapHandle_t;
typedef struct mstxMemRegion_st *mstxMemRegionHandle_t;

#define MSTX_SUCCESS 0
#define MSTX_FAIL 1

#define MSTX_TOOL_INVALID_ID 0x0
#define MSTX_TOOL_MSPROF_ID 0x1000
#define MSTX_TOOL_MSOPPROF_ID 0x1001
#define MSTX_TOOL_MSSANITIZER_ID 0x1002
#define MSTX_TOOL_MSLEAKS_ID 0x1003

/* ---- §1.3 descriptor structs ----------------------------------------- */

typedef enum { MSTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR = 0 } mstxMemHeapUsageType;
typedef enum { MSTX_MEM_TYPE_VIRTUAL_ADDRESS = 0 } mstxMemType;
typedef enum {
    MSTX_MEM_REGION_REF_TYPE_POINTER = 0,
    MSTX_MEM_REGION_REF_TYPE_HANDLE = 1
} mstxMemRegionRefType;

typedef struct mstxMemVirtualRangeDesc_t {   /* size 24 */
    uint32_t deviceId;
    const void *ptr;
    uint64_t size;
} mstxMemVirtualRangeDesc_t;

typedef struct mstxMemHeapDesc_t {           /* size 16 */
    mstxMemHeapUsageType usage;
    mstxMemType type;
    const void *typeSpecificDesc;            /* -> mstxMemVirtualRangeDesc_t */
} mstxMemHeapDesc_t;

typedef struct mstxMemRegionsRegisterBatch_t {  /* size 40 */
    mstxMemHeapHandle_t heap;
    mstxMemType regionType;
    size_t regionCount;
    const void *regionDescArray;             /* mstxMemVirtualRangeDesc_t[regionCount] */
    mstxMemRegionHandle_t *regionHandleArrayOut; /* [out], may be NULL */
} mstxMemRegionsRegisterBatch_t;

typedef struct mstxMemRegionRef_t {          /* size 16 */
    mstxMemRegionRefType refType;
    union {
        const void *pointer;
        mstxMemRegionHandle_t handle;
    };
} mstxMemRegionRef_t;

typedef struct mstxMemRegionsUnregisterBatch_t {  /* size 16 */
    size_t refCount;
    const mstxMemRegionRef_t *refArray;
} mstxMemRegionsUnregisterBatch_t;

/* ---- §1.4 injection protocol types ----------------------------------- */

typedef enum mstxFuncModule {
    MSTX_API_MODULE_INVALID = 0,
    MSTX_API_MODULE_CORE = 1,
    MSTX_API_MODULE_CORE_DOMAIN = 2,
    MSTX_API_MODULE_CORE_MEM = 3,
    MSTX_API_MODULE_SIZE = 4,
    MSTX_API_MODULE_FORCE_INT = 0x7fffffff
} mstxFuncModule;

typedef void (*mstxFuncPointer)(void);
typedef mstxFuncPointer **mstxFuncTable;     /* array of pointers to slots */
typedef int (*mstxGetModuleFuncTableFunc)(mstxFuncModule module, mstxFuncTable *outTable,
                                          unsigned int *outSize);
typedef int (*mstxInitInjectionFunc)(mstxGetModuleFuncTableFunc getFuncTable);

/* Function ids (1-based) and per-module *_SIZE values. */
enum { MSTX_API_CORE_MARK_A = 1, MSTX_API_CORE_RANGE_START_A = 2, MSTX_API_CORE_RANGE_END = 3,
       MSTX_API_CORE_GET_TOOL_ID = 4, MSTX_API_CORE_SIZE = 5 };
enum { MSTX_API_CORE2_DOMAIN_CREATE_A = 1, MSTX_API_CORE2_DOMAIN_DESTROY = 2,
       MSTX_API_CORE2_DOMAIN_MARK_A = 3, MSTX_API_CORE2_DOMAIN_RANGE_START_A = 4,
       MSTX_API_CORE2_DOMAIN_RANGE_END = 5, MSTX_API_CORE2_SIZE = 6 };
enum { MSTX_API_CORE_MEMHEAP_REGISTER = 1, MSTX_API_CORE_MEMHEAP_UNREGISTER = 2,
       MSTX_API_CORE_MEM_REGIONS_REGISTER = 3, MSTX_API_CORE_MEM_REGIONS_UNREGISTER = 4,
       MSTX_API_CORE_MEM_SIZE = 5 };

/* ---- §1.2 public API ------------------------------------------------- */

void mstxMarkA(const char *message, aclrtStream stream);
mstxRangeId mstxRangeStartA(const char *message, aclrtStream stream);
void mstxRangeEnd(mstxRangeId id);
void mstxGetToolId(uint64_t *id);
mstxDomainHandle_t mstxDomainCreateA(const char *name);
void mstxDomainDestroy(mstxDomainHandle_t domain);
void mstxDomainMarkA(mstxDomainHandle_t domain, const char *message, aclrtStream stream);
mstxRangeId mstxDomainRangeStartA(mstxDomainHandle_t domain, const char *message,
                                  aclrtStream stream);
void mstxDomainRangeEnd(mstxDomainHandle_t domain, mstxRangeId id);
mstxMemHeapHandle_t mstxMemHeapRegister(mstxDomainHandle_t domain, const mstxMemHeapDesc_t *desc);
void mstxMemHeapUnregister(mstxDomainHandle_t domain, mstxMemHeapHandle_t heap);
void mstxMemRegionsRegister(mstxDomainHandle_t domain, const mstxMemRegionsRegisterBatch_t *desc);
void mstxMemRegionsUnregister(mstxDomainHandle_t domain,
                              const mstxMemRegionsUnregisterBatch_t *desc);

#ifdef __cplusplus
}
#endif

#endif /* SIM_NPU_MSTX_API_H */
