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

#ifdef __cplusplus
}
#endif

#endif /* MEMSCOPE_PROBE_H */
