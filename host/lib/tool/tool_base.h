/*
 * What every part of the `wex` command uses from libwex (tool.h): the
 * thread's error line (read back with wex_last_error), logging in
 * libwex's own format, the clock every deadline is measured on, whole
 * reads and writes on pipes, and directories of a process's own.
 */
#ifndef WEX_TOOL_BASE_H
#define WEX_TOOL_BASE_H

#include <stddef.h>
#include <stdint.h>

#include <wex/host.h>

/* Stores the message as the thread's error and returns `status`, so an
 * error path reads `return wex_tool_error(WEX_ERR_INVALID, "...")`. */
wex_status wex_tool_error(wex_status status, const char *fmt, ...)
    WEX_PRINTF(2, 3);
/* Prefixes the thread's error with "PREFIX: " (context an outer caller
 * knows, such as an option); returns `status`. */
wex_status wex_tool_error_prefix(wex_status status, const char *fmt, ...)
    WEX_PRINTF(2, 3);
/* Empties the thread's error: before calling into a plugin, to tell
 * whether it explained a failure itself. */
void wex_tool_error_clear(void);

/* "wex: LEVEL: message" on stderr when WEX_LOG_LEVEL lets `level`
 * (WEX_LOG_* of <wex/host.h>) through. */
void wex_tool_log(uint32_t level, const char *fmt, ...) WEX_PRINTF(2, 3);

/* Seconds on CLOCK_MONOTONIC. */
double wex_tool_now(void);

/* 0 once all `n` bytes are written (read); -1 when the descriptor fails,
 * its other end is gone, or (reading) it ends first. EINTR is retried. */
int wex_tool_write_all(int fd, const void *buf, size_t n);
int wex_tool_read_all(int fd, void *buf, size_t n);

/* Makes "$TMPDIR/PREFIX-XXXXXX" (else under /tmp) into dir (cap bytes):
 * 0, or -1 with errno set and dir holding the path it tried. */
int wex_tool_temp_dir_make(char *dir, size_t cap, const char *prefix);
/* Removes every file in dir (not subdirectories), then dir. */
void wex_tool_temp_dir_remove(const char *dir);

#endif /* WEX_TOOL_BASE_H */
