/* The tool API's errors, logging, clock, pipes and temporary directories
 * (tool_base.h): libwex's core, under the names the command uses. */
#include <stdarg.h>
#include <stdio.h>

#include "clock.h"
#include "error.h"
#include "fd_io.h"
#include "log.h"
#include "temp_dir.h"
#include "tool_base.h"

wex_status wex_tool_error(wex_status status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    status = wex__verror(status, fmt, ap);
    va_end(ap);
    return status;
}

wex_status wex_tool_error_prefix(wex_status status, const char *fmt, ...)
{
    char prefix[WEX__ERROR_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    return wex__error_prefix(status, "%s", prefix);
}

void wex_tool_error_clear(void)
{
    wex__error_clear();
}

void wex_tool_log(uint32_t level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    wex__vlog(level, NULL, fmt, ap);
    va_end(ap);
}

double wex_tool_now(void)
{
    return wex__now();
}

int wex_tool_write_all(int fd, const void *buf, size_t n)
{
    return wex__write_all(fd, buf, n);
}

int wex_tool_read_all(int fd, void *buf, size_t n)
{
    return wex__read_all(fd, buf, n);
}

int wex_tool_temp_dir_make(char *dir, size_t cap, const char *prefix)
{
    return wex__temp_dir_make(dir, cap, prefix);
}

void wex_tool_temp_dir_remove(const char *dir)
{
    wex__temp_dir_remove(dir);
}
