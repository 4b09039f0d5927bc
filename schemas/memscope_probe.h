/*
 * memscope_probe.h — C API exported by libmemscope_probe.so (the memscope LD_PRELOAD probe).
 *
 * A program (or the Python API extension) may call these to control collection. They are safe
 * to call when the probe is not loaded only through a weak reference or dlsym; when the probe
 * is loaded but passive (the process was not launched by `memscope`, MEMSCOPE_SPOOL unset),
 * every call returns -1 and does nothing.
 *
 * All functions are thread-safe, never block on other threads, and never unwind.
 */
#ifndef MEMSCOPE_PROBE_H
#define MEMSCOPE_PROBE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opens a collection window: adapters start recording (with `--collect-mode deferred` the
 * probe starts with recording off until this call). Records SYSTEM/START_TRACE if the window
 * was closed. Returns 0 on success (also when already recording), -1 when passive. */
int memscope_start(void);

/* Closes the collection window. Records SYSTEM/STOP_TRACE if a window was open.
 * Returns 0 on success, -1 when passive. */
int memscope_stop(void);

/* Records SYSTEM/STEP (a training step boundary) inside a window.
 * Returns 0 when recorded, -1 otherwise (passive, outside a window, or dropped). */
int memscope_step(void);

/* Pushes `label` (UTF-8, NUL-terminated, at most 1024 bytes are kept) on the calling thread's
 * owner stack; memory events of this thread are attributed to it until the matching pop.
 * Recorded inside and outside windows. Returns 0, or -1 for a NULL label or when passive. */
int memscope_owner_push(const char *label);

/* Pops the calling thread's owner stack (no-op on an empty stack). Returns 0, or -1 when
 * passive. */
int memscope_owner_pop(void);

/* The probe's version, e.g. "0.1.0" (static storage, never NULL). */
const char *memscope_version(void);

/* ---- For the memscope Python package (python/memscope, through ctypes.PyDLL) -------------
 * Called with the GIL held. CPython is reached through symbols resolved at run time
 * (dlsym(RTLD_DEFAULT)); the probe never links libpython. -1 results leave a reason in
 * memscope_py_last_error() where one applies. */

/* 1 when the probe records (a collector follows this process), 0 when passive. */
int memscope_py_status(void);
/* Closes the collection window without a STOP_TRACE row (config() gives deferred semantics). */
int memscope_py_defer(void);
/* At exit, wait at most ms milliseconds for the collector to end (plain-python mode: the
 * summary, with the exit status, is printed before the process is gone). 0. */
int memscope_py_wait_at_exit(int ms);
/* Asks the collector to write everything this process recorded so far (stop()): returns the
 * request's number N > 0, answered by <spool>/barrier.<pid>.done holding N or more; 0 when
 * nothing was recorded (passive, or the stream is full). */
int memscope_py_barrier(void);
/* Why the last memscope_py_* call returned -1 (static buffer; empty when no reason). */
const char *memscope_py_last_error(void);
/* Python tracer (python_trace files): start on every thread (0; 1 already running; -1 error),
 * install on the calling thread (threads started later), stop (0; 1 not running), query. */
int memscope_py_trace_start(void);
int memscope_py_trace_thread(void);
int memscope_py_trace_stop(void);
int memscope_py_trace_active(void);
/* RecordFunction(name): end = 0 at the start of the block, 1 at its end (window open only). */
int memscope_py_record_function(const char *name, int end);
/* describer(addr, owner=label): the live pool block starting at addr gets the user owner level. */
int memscope_py_owner_addr(uint64_t addr, const char *label);
/* take_snapshot: values = total, free, reserved, peak_reserved, allocated, peak_allocated
 * (bytes); bit i of known set when values[i] is real (the collector fills the others from its
 * pool accounting); device UINT32_MAX = the calling thread's current device. */
int memscope_py_snapshot(const char *name, uint32_t device, uint32_t known,
                         const uint64_t values[6]);

#ifdef __cplusplus
}
#endif

#endif /* MEMSCOPE_PROBE_H */
