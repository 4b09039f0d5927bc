/*
 * Marks with awkward messages, in this order:
 *   1. "a,b"                  (CSV separator)
 *   2. "say \"hi\""           (quotes)
 *   3. "line1\nline2"         (a real newline)
 *   4. 300 bytes: "L300-" followed by 'x' up to 300 characters
 *   5. NULL                   (the slot is called with a NULL message)
 *   6. ""                     (empty)
 *   7. "=cmd"                 (spreadsheet formula-injection prefix)
 * Prints nothing.
 */
#include <string.h>

#include "mstx_api.h"

int main(void)
{
    char long_msg[301];
    memset(long_msg, 'x', 300);
    memcpy(long_msg, "L300-", 5);
    long_msg[300] = '\0';

    mstxMarkA("a,b", NULL);
    mstxMarkA("say \"hi\"", NULL);
    mstxMarkA("line1\nline2", NULL);
    mstxMarkA(long_msg, NULL);
    mstxMarkA(NULL, NULL);
    mstxMarkA("", NULL);
    mstxMarkA("=cmd", NULL);
    return 0;
}
