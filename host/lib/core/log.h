/*
 * Logging for libwex and its plugins. Messages go to stderr as
 * "wex: LEVEL: [who] message"; WEX_LOG_LEVEL (error, warn, info, debug,
 * trace; default warn) chooses how much.
 */
#ifndef WEX_HOST_LOG_H
#define WEX_HOST_LOG_H

#include <stdarg.h>
#include <wex/host.h>

int wex__log_enabled(uint32_t level);
void wex__log(uint32_t level, const char *who, const char *fmt, ...)
    WEX_PRINTF(3, 4);
void wex__vlog(uint32_t level, const char *who, const char *fmt, va_list ap);

#define WEX__WARN(...) wex__log(WEX_LOG_WARN, NULL, __VA_ARGS__)
#define WEX__INFO(...) wex__log(WEX_LOG_INFO, NULL, __VA_ARGS__)
#define WEX__DEBUG(...) wex__log(WEX_LOG_DEBUG, NULL, __VA_ARGS__)

#endif /* WEX_HOST_LOG_H */
