/*
 * libprofapi.so stand-in (abi.md §3.6).
 *
 * A profiler (msMemScope, or the Rust tracer) registers callbacks here by
 * type; the runtime stand-in reports each kernel launch through
 * MsprofGetHashId + MsprofReportCompactInfo, which dispatch to those
 * callbacks synchronously on the launching thread. That is how the real
 * profiling API reaches a registered profiler, and it is what lets a tracer
 * attach kernel names to its pending launch records.
 *
 * Unlike the real library, reporting is not gated on profSetProfCommand:
 * the stand-in reports whenever a callback is registered.
 */
#include <stdint.h>
#include <stddef.h>

#include "sim_npu.h"

#define MSPROF_ERROR_NONE 0
#define MSPROF_ERROR (-1)

/* Callbacks by type id (0..13). Written by the profiler thread, read by
 * launching threads, so they are accessed atomically. */
static void *callbacks[SIM_PROF_CB_COUNT];

SIM_EXPORT int32_t MsprofRegisterProfileCallback(int32_t callbackType, void *callback,
                                                 uint32_t len)
{
    (void)len;
    if (callbackType < 0 || callbackType >= SIM_PROF_CB_COUNT)
        return MSPROF_ERROR;
    __atomic_store_n(&callbacks[callbackType], callback, __ATOMIC_RELEASE);
    return MSPROF_ERROR_NONE;
}

SIM_EXPORT int32_t profSetProfCommand(void *commandHandle, uint32_t len)
{
    (void)commandHandle;
    (void)len;
    return MSPROF_ERROR_NONE;
}

/* Returns the id the registered GET_HASH_ID callback gives `hashInfo`, or 0
 * when no profiler is attached. */
SIM_EXPORT uint64_t MsprofGetHashId(const char *hashInfo, size_t length)
{
    sim_hash_cb_t cb = (sim_hash_cb_t)__atomic_load_n(
        &callbacks[PROFILE_REPORT_GET_HASH_ID_C_CALLBACK], __ATOMIC_ACQUIRE);
    if (!cb || !hashInfo)
        return 0;
    return cb(hashInfo, length);
}

/* Hands a 64-byte MsprofCompactInfo record to the COMPACT callback. */
SIM_EXPORT int32_t MsprofReportCompactInfo(uint32_t agingFlag, const void *data, uint32_t length)
{
    sim_compact_cb_t cb = (sim_compact_cb_t)__atomic_load_n(
        &callbacks[PROFILE_REPORT_COMPACT_CALLBACK], __ATOMIC_ACQUIRE);
    if (!cb)
        return MSPROF_ERROR_NONE;
    return cb(agingFlag, data, length);
}
