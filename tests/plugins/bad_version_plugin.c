/*
 * bad_version_plugin.c — fixture: a plugin built for ABI 2.0. The probe must refuse it before
 * calling any of its code, print
 *   memscope: refusing adapter plugin <path>: ABI version 2.0, this probe supports 1.x
 * and write a MEMSCOPE_KIND_DIAGNOSTIC "PLUGIN_REFUSED" record. Its init aborts the process, so
 * a probe that wrongly calls it fails the test loudly.
 *
 * Build: cc -shared -fPIC -I schemas -o libbad_version_plugin.so tests/plugins/bad_version_plugin.c
 */
#include <stdlib.h>
#include "memscope_plugin.h"

static int bad_init(const memscope_host *host)
{
    (void)host;
    abort();
}

MEMSCOPE_PLUGIN_EXPORT const memscope_plugin_header memscope_plugin = {
    MEMSCOPE_PLUGIN_MAGIC, 2, 0, (uint32_t)sizeof(memscope_plugin_header), 0,
    "bad_version_plugin", bad_init,
};
