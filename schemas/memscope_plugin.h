/*
 * memscope_plugin.h — ABI 1.2 of third-party memscope adapter plugins.
 *
 * A plugin is a shared library that reports memory events of an allocator or framework the
 * built-in adapters do not know. It exports ONE data symbol, `memscope_plugin`, of type
 * `memscope_plugin_header`; the probe (libmemscope_probe.so) loads it and calls its `init` with
 * a host vtable; the plugin then calls `host->emit(...)` whenever something happens.
 *
 * Loading
 *   - `memscope run --adapter-path /path/libx.so` puts the path in MEMSCOPE_PLUGINS (':'-separated)
 *     and also in LD_PRELOAD after the probe, so a plugin can interpose functions itself
 *     (only LD_PRELOAD interposes; dlopen does not).
 *   - The probe loads the plugins when the process starts (ABI 1.1; 1.0 probes waited for the
 *     first msTX or memscope_* call): from its ELF constructor, after the libraries the probe
 *     depends on were initialised and before the program's main runs (a probe loaded later
 *     with dlopen, e.g. by `import memscope`, loads them then). A plugin's own hooks may still
 *     run before its init (another library's constructor calling it): a plugin must tolerate
 *     `host == NULL` (drop and count the event; the Rust SDK does).
 *   - For each path: dlopen(path, RTLD_NOW | RTLD_LOCAL) (a preloaded plugin is already loaded;
 *     the same object is returned), dlsym("memscope_plugin"), then the header is checked
 *     BEFORE any plugin function is called: magic must be MEMSCOPE_PLUGIN_MAGIC, abi_major
 *     must equal the probe's major (1); abi_minor may be anything (older or newer); `size` must
 *     cover the 1.0 header; `init` must be non-NULL. Then init(host) is called once, on the thread that
 *     loads the probe, while the dynamic loader lock is held: init must not wait for other
 *     threads, must not dlopen or dlclose, and must not call msTX (the msTX front end may not
 *     be initialised yet). init may emit.
 *   - A refused plugin is reported with one line on stderr, e.g.
 *       memscope: refusing adapter plugin /path/libx.so: ABI version 2.0, this probe supports 1.x
 *     and with a MEMSCOPE_KIND_DIAGNOSTIC record in the process's stream (the collector lists
 *     it in its report); the job continues without the plugin. Plugins are never dlclose'd.
 *   - Do not rely on ELF constructors: the probe calls `init`. (dlopen runs constructors
 *     before the probe can check the header; keep them absent or trivial.)
 *   - A C++ plugin must not let exceptions escape init or its calls into the host.
 *
 * Versioning
 *   - Major: incompatible change; the probe refuses other majors.
 *   - Minor: only appends fields at the END of memscope_host / memscope_plugin_event /
 *     memscope_plugin_header and adds kind codes. Each struct starts with (or carries) its own
 *     size: the probe reads only the fields a plugin's `size` covers; a plugin must check
 *     `host->size` before using a function added in a later minor.
 *
 * Two ways to emit (both may be used by one plugin):
 *   - emit (ABI 1.0): one memscope_plugin_event with its texts (event type, name, "k:v" attrs)
 *     copied on every call. Simple; fine for events counted in thousands.
 *   - register_type + emit_compact (ABI 1.2): register each event type once (its texts, its
 *     fixed attributes, the names of up to MEMSCOPE_MAX_VALUES numeric attributes) and get an
 *     id; then emit events by id: kind, pointer, size, flags and the values, no text. The probe
 *     writes the type's texts once per thread and the event in ~6 bytes (a MALLOC or FREE
 *     without values takes the shape of the built-in allocation records), and the collector
 *     resolves the type once, so an allocator with millions of events costs what a built-in
 *     adapter costs. Check host->size >= offsetof(memscope_host, emit_compact) + 8 (or
 *     host->abi_minor >= 2) first; an older probe has neither function.
 *
 * Threading: emit/now_ns/enabled/log (and register_type/emit_compact) may be called from any thread, concurrently, at any time
 * after init returned (also from signal handlers: emit then only drops). They never block,
 * never allocate through the traced allocator and never unwind.
 */
#ifndef MEMSCOPE_PLUGIN_H
#define MEMSCOPE_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMSCOPE_PLUGIN_MAGIC     0x4D53504Cu   /* "MSPL" */
#define MEMSCOPE_PLUGIN_ABI_MAJOR 1
#define MEMSCOPE_PLUGIN_ABI_MINOR 2

/* ---- event kinds (memscope_plugin_event.kind) -------------------------------------------
 * How the collector turns each into a dump row ("Event" column / "Event Type" column):
 *   MALLOC        MALLOC / event_type   a block [ptr, ptr+size) was allocated on `device`.
 *   FREE          FREE   / event_type   the block at ptr was freed (size may be 0 = unknown;
 *                                       the collector takes the size of the MALLOC).
 *   MARK          MSTX   / Mark         a point in time; name = message.
 *   OP_START      OP_LAUNCH / event_type  an operator began; name = operator name.
 *   OP_END        OP_LAUNCH / event_type  the operator ended (same name).
 *   KERNEL_START  KERNEL_LAUNCH / event_type  a kernel began; name = kernel name.
 *   KERNEL_END    KERNEL_LAUNCH / event_type  the kernel ended.
 *   ACCESS        ACCESS / event_type   a read/write of the block at ptr (size bytes);
 *                                       attrs may carry `type:READ` / `type:WRITE`.
 * Codes 1..199 are for plugins; 200..255 are reserved for the host. */
#define MEMSCOPE_KIND_MALLOC       1
#define MEMSCOPE_KIND_FREE         2
#define MEMSCOPE_KIND_MARK         3
#define MEMSCOPE_KIND_OP_START     4
#define MEMSCOPE_KIND_OP_END       5
#define MEMSCOPE_KIND_KERNEL_START 6
#define MEMSCOPE_KIND_KERNEL_END   7
#define MEMSCOPE_KIND_ACCESS       8
/* Host only (emit rejects it): a diagnostic about a plugin, written by the probe into the
 * stream. event_type "PLUGIN_REFUSED" (bad magic, other major, no header, short header, no
 * init) or "PLUGIN_FAILED" (dlopen failed, init returned non-zero); name = the plugin path;
 * attrs = the whole human-readable message (free text, NOT k:v pairs). */
#define MEMSCOPE_KIND_DIAGNOSTIC   255

/* ---- devices (memscope_plugin_event.device) ---------------------------------------------- */
#define MEMSCOPE_DEVICE_NONE 0xFFFFFFFFu  /* no device: "N/A" */
#define MEMSCOPE_DEVICE_CPU  0xFFFFFFFEu  /* host memory: "cpu" */
/* any other value: logical NPU device id (the collector maps it through
 * ASCEND_RT_VISIBLE_DEVICES) */

/* ---- log levels (memscope_host.log) ------------------------------------------------------ */
#define MEMSCOPE_LOG_ERROR 0   /* printed to stderr as "memscope: plugin error: <msg>" */
#define MEMSCOPE_LOG_WARN  1   /* printed to stderr as "memscope: plugin warning: <msg>" */
#define MEMSCOPE_LOG_INFO  2   /* ignored in 1.0 */
#define MEMSCOPE_LOG_DEBUG 3   /* ignored in 1.0 */

/* ---- event flags (memscope_plugin_event.flags, ABI 1.1) ------------------------------------
 * C_STACK: record the C call stack of the emitting thread with the event (its rows get
 *   "Call Stack(C)"). Depth: the run's `--call-stack c:N` (no stack when C stacks are off).
 *   Frames inside the probe and inside the emitting plugin's own library are left out, so the
 *   stack starts at the code that called into the plugin (e.g. the program's mallocx call).
 *   Honoured by probes of ABI >= 1.1 (host->abi_minor >= 1); older probes ignore the field. */
#define MEMSCOPE_EVENT_C_STACK 0x1u

/* ---- event type flags (memscope_event_type.flags, ABI 1.2) ------------------------------
 * ACCOUNT: the volume policy of allocation sources with millions of small blocks (an object
 *   allocator): the type's MALLOC/FREE events are summed up in the collector's live account
 *   (peak and live at exit, by call stack; the report's "<EVENT_TYPE> peak" and "live at exit"
 *   sections) and kept in the capture, but written as dump rows only with --host-rows. Without
 *   it every event is a row, as with emit. */
#define MEMSCOPE_TYPE_ACCOUNT 0x1u
/* Most per-event values a type may name. */
#define MEMSCOPE_MAX_VALUES 4

/* One event type (ABI 1.2), read by register_type (its texts are copied; each is cut at 255
 * bytes; at most 256 types per process). 48 bytes on LP64. */
typedef struct memscope_event_type {
    uint32_t    struct_size;  /* sizeof(memscope_event_type) */
    uint32_t    device;       /* MEMSCOPE_DEVICE_NONE, MEMSCOPE_DEVICE_CPU, or a device id */
    uint32_t    flags;        /* MEMSCOPE_TYPE_* bits */
    uint32_t    reserved;     /* 0 */
    const char *event_type;   /* "Event Type" column (required, non-empty) */
    const char *name;         /* "Name" column of every event of the type (NULL: empty) */
    const char *attrs;        /* fixed attributes of every event, "k:v,k:v" (owner: the owner
                                 chain "<event_type>@<owner>"); NULL: none */
    const char *value_names;  /* names of the per-event numeric attributes, "k1,k2" (at most
                                 MEMSCOPE_MAX_VALUES; each event's values follow in this
                                 order, shown as "k1:<decimal>"); NULL: none. A name is not
                                 empty, not size/addr/allocation_id/used/owner, and has no
                                 : { } " space or newline */
} memscope_event_type;

/* One event, borrowed by the host for the duration of emit() (texts are copied). 64 bytes on
 * LP64 (56 in ABI 1.0, without flags/reserved2: the host reads `flags` only when struct_size
 * covers it). Texts are NUL-terminated UTF-8 (NULL = empty); each is cut at 1024 bytes.
 * `event_type` is the row's Event Type: a plugin may use its own (e.g. "JEMALLOC"); `attrs`
 * are its own Attr keys ("k:v,k:v"; `owner` feeds the owner chain: "<event_type>@<owner>"). */
typedef struct memscope_plugin_event {
    uint32_t    struct_size;  /* sizeof(memscope_plugin_event) as the plugin compiled it */
    uint32_t    kind;         /* MEMSCOPE_KIND_* (1..199) */
    uint32_t    device;       /* MEMSCOPE_DEVICE_NONE, MEMSCOPE_DEVICE_CPU, or a device id */
    uint32_t    reserved;     /* 0 */
    uint64_t    ptr;          /* address, 0 = none */
    uint64_t    size;         /* bytes */
    const char *event_type;   /* "Event Type" column, e.g. "MYPOOL" */
    const char *name;         /* "Name" column (MALLOC/FREE rows show N/A there, as the dump format says) */
    const char *attrs;        /* extra attributes "k:v,k:v" (e.g. "owner:kv_cache") */
    /* ---- ABI 1.1 ---- */
    uint32_t    flags;        /* MEMSCOPE_EVENT_* bits */
    uint32_t    reserved2;    /* 0 */
} memscope_plugin_event;

/* Host vtable handed to init(); valid for the life of the process. */
typedef struct memscope_host {
    uint32_t size;            /* sizeof(memscope_host) as the probe compiled it */
    uint16_t abi_major;       /* MEMSCOPE_PLUGIN_ABI_MAJOR of the probe */
    uint16_t abi_minor;       /* MEMSCOPE_PLUGIN_ABI_MINOR of the probe */
    /* Records `ev` with the current time and thread. Returns 0 recorded, 1 not recording now
     * (outside a collection window: the event is not kept; MALLOC and FREE events are kept
     * there too, so the blocks live when a window opens get their rows), -1 rejected (NULL,
     * struct_size too small, kind 0 or >= 200) or dropped (no space, re-entered). */
    int      (*emit)(const memscope_plugin_event *ev);
    /* The probe's clock: ns since the Unix epoch, monotonic (same clock as every record). */
    uint64_t (*now_ns)(void);
    /* 1 while emit would record a MALLOC or FREE event (the probe is recording, inside or
     * outside a collection window), else 0. */
    int      (*enabled)(void);
    /* Logs `msg` at `level` (MEMSCOPE_LOG_*). */
    void     (*log)(int level, const char *msg);
    /* ---- ABI 1.2 ---- */
    /* Registers an event type; returns its id (>= 0, valid for the life of the process, also
     * in fork children), or -1: rejected (NULL, struct_size too small, no event_type, more
     * than MEMSCOPE_MAX_VALUES value names or a bad one, 256 types already). Call it from init (or any
     * time; it never blocks). Registering the same texts twice gives two ids. */
    int32_t  (*register_type)(const memscope_event_type *type);
    /* Records one event of type `type_id`: kind (MEMSCOPE_KIND_* 1..8, as for emit), ptr,
     * size, flags (MEMSCOPE_EVENT_*) and `values`: NULL (no values) or one value per name the
     * type registered. Returns as emit (-1 also for an unknown type id, or a size past
     * INT64_MAX, which emit rejects too). No text is read.
     * A FREE is stamped with the time before the call (emit it before releasing the block,
     * so a MALLOC of the same address by another thread is stamped after it); other kinds
     * with the time after everything the calling thread did before. */
    int      (*emit_compact)(int32_t type_id, uint32_t kind, uint64_t ptr, uint64_t size,
                             uint32_t flags, const uint64_t *values);
} memscope_host;

/* The one symbol a plugin exports: `const memscope_plugin_header memscope_plugin = {...};`
 * 32 bytes on LP64. */
typedef struct memscope_plugin_header {
    uint32_t    magic;        /* MEMSCOPE_PLUGIN_MAGIC */
    uint16_t    abi_major;    /* MEMSCOPE_PLUGIN_ABI_MAJOR the plugin was built against */
    uint16_t    abi_minor;    /* MEMSCOPE_PLUGIN_ABI_MINOR the plugin was built against */
    uint32_t    size;         /* sizeof(memscope_plugin_header) */
    uint32_t    reserved;     /* 0 */
    const char *name;         /* short plugin name, for messages */
    /* Called once with the host; keep `host` for later emits. Return 0 to start, non-zero to
     * decline (reported as PLUGIN_FAILED; the plugin then gets no further calls). */
    int       (*init)(const memscope_host *host);
} memscope_plugin_header;

#if defined(__GNUC__)
#define MEMSCOPE_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define MEMSCOPE_PLUGIN_EXPORT
#endif

#ifdef __cplusplus
#define MEMSCOPE_PLUGIN_LINKAGE extern "C"
#else
#define MEMSCOPE_PLUGIN_LINKAGE
#endif

/* Defines the exported header (C or C++):  MEMSCOPE_PLUGIN_DEFINE("mypool", my_init); */
#define MEMSCOPE_PLUGIN_DEFINE(plugin_name, init_fn)                                   \
    MEMSCOPE_PLUGIN_LINKAGE MEMSCOPE_PLUGIN_EXPORT                                     \
    const memscope_plugin_header memscope_plugin = {                                   \
        MEMSCOPE_PLUGIN_MAGIC, MEMSCOPE_PLUGIN_ABI_MAJOR, MEMSCOPE_PLUGIN_ABI_MINOR,  \
        (uint32_t)sizeof(memscope_plugin_header), 0, (plugin_name), (init_fn)}

#ifdef __cplusplus
}
#endif

#endif /* MEMSCOPE_PLUGIN_H */
