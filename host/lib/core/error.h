/*
 * Host-side error messages: one thread-local "last error" line per thread,
 * like dlerror(). Every failing libwex call stores its one-line
 * explanation here before returning; callers propagate the status without
 * rewriting the message.
 */
#ifndef WEX_HOST_ERROR_H
#define WEX_HOST_ERROR_H

#include <stdarg.h>
#include <wex/abi.h>

#define WEX__ERROR_MAX 1024

/* Stores the message and returns `status`, so error paths read
 * `return wex__error(WEX_ERR_INVALID, "%s: %s: expected ...", ...);` */
wex_status wex__error(wex_status status, const char *fmt, ...) WEX_PRINTF(2, 3);
wex_status wex__verror(wex_status status, const char *fmt, va_list ap);

/* Prefixes the current message with "prefix: " (for context such as a
 * file name added by an outer caller). Returns `status`. */
wex_status wex__error_prefix(wex_status status, const char *fmt, ...)
    WEX_PRINTF(2, 3);

/* The calling thread's last message ("" when none). */
const char *wex__last_error(void);
void wex__error_clear(void);

#endif /* WEX_HOST_ERROR_H */
