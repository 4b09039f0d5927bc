/*
 * good_plugin.c — fixture: a well-formed ABI 1.0 memscope adapter plugin ("good_plugin").
 *
 * Build: cc -shared -fPIC -I schemas -o libgood_plugin.so tests/plugins/good_plugin.c
 *
 * On init it emits, if a collection window is open:
 *   1. kind MALLOC, event type "MYPOOL", name "good_plugin", device 0, ptr 0x1000, size 4096,
 *      attrs "owner:fixture"
 *   2. kind FREE,   event type "MYPOOL", name "good_plugin", device 0, ptr 0x1000, size 4096
 * It also exports `int good_plugin_emit(void)` that emits the same pair again (the test
 * program may call it through dlsym or by linking the plugin); it returns 0 when both were
 * recorded, 1 when not recording, -1 before the probe called init (no host yet) or on error.
 *
 * Plugins are initialised when the process starts (the probe's constructor, ABI 1.1), so the
 * init pair is in the stream even for a program that never calls msTX or memscope_*.
 */
#include <stddef.h>
#include "memscope_plugin.h"

static const memscope_host *g_host;

static int emit_pair(void)
{
    if (!g_host)
        return -1;
    memscope_plugin_event ev = {0};
    ev.struct_size = sizeof ev;
    ev.kind = MEMSCOPE_KIND_MALLOC;
    ev.device = 0;
    ev.ptr = 0x1000;
    ev.size = 4096;
    ev.event_type = "MYPOOL";
    ev.name = "good_plugin";
    ev.attrs = "owner:fixture";
    int a = g_host->emit(&ev);
    ev.kind = MEMSCOPE_KIND_FREE;
    ev.attrs = NULL;
    int b = g_host->emit(&ev);
    if (a == 0 && b == 0)
        return 0;
    if (a == 1 || b == 1)
        return 1;
    return -1;
}

static int good_init(const memscope_host *host)
{
    if (!host || host->size < sizeof(memscope_host) || host->abi_major != MEMSCOPE_PLUGIN_ABI_MAJOR)
        return 1;
    g_host = host;
    emit_pair();
    return 0;
}

MEMSCOPE_PLUGIN_EXPORT int good_plugin_emit(void)
{
    return emit_pair();
}

MEMSCOPE_PLUGIN_DEFINE("good_plugin", good_init);
