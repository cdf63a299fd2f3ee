#include "error.h"

#include <stdio.h>
#include <string.h>

/* Global-dynamic TLS (the default for a shared library), so libwex itself
 * can be dlopen'ed by a Python extension without exhausting static TLS. */
static _Thread_local char last_error[WEX__ERROR_MAX];

wex_status wex__verror(wex_status status, const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    return status;
}

wex_status wex__error(wex_status status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    wex__verror(status, fmt, ap);
    va_end(ap);
    return status;
}

wex_status wex__error_prefix(wex_status status, const char *fmt, ...)
{
    char prefix[WEX__ERROR_MAX];
    char old[WEX__ERROR_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof(old));
    /* Truncation is fine: a message is one line for a human. */
    size_t n = strlen(prefix);
    if (n > sizeof(last_error) - 3)
        n = sizeof(last_error) - 3;
    memcpy(last_error, prefix, n);
    memcpy(last_error + n, ": ", 2);
    n += 2;
    size_t rest = strnlen(old, sizeof(old) - 1);
    if (rest > sizeof(last_error) - 1 - n)
        rest = sizeof(last_error) - 1 - n;
    memcpy(last_error + n, old, rest);
    last_error[n + rest] = '\0';
    return status;
}

const char *wex__last_error(void)
{
    return last_error;
}

void wex__error_clear(void)
{
    last_error[0] = '\0';
}
