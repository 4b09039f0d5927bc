/*
 * bad_magic_plugin.c — fixture: exports `memscope_plugin` with a wrong magic. The probe must
 * refuse it before calling any of its code ("refusing adapter plugin <path>: bad magic ...")
 * and write a MEMSCOPE_KIND_DIAGNOSTIC "PLUGIN_REFUSED" record. Its init aborts the process.
 *
 * Build: cc -shared -fPIC -I schemas -o libbad_magic_plugin.so tests/plugins/bad_magic_plugin.c
 */
#include <stdlib.h>
#include "memscope_plugin.h"

static int bad_init(const memscope_host *host)
{
    (void)host;
    abort();
}

MEMSCOPE_PLUGIN_EXPORT const memscope_plugin_header memscope_plugin = {
    0x4C504D53u /* "MSPL" byte-swapped */, MEMSCOPE_PLUGIN_ABI_MAJOR, MEMSCOPE_PLUGIN_ABI_MINOR,
    (uint32_t)sizeof(memscope_plugin_header), 0, "bad_magic_plugin", bad_init,
};
