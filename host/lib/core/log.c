#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static uint32_t max_level = WEX_LOG_WARN;

static const char *const level_names[] = {"",     "error", "warn",
                                          "info", "debug", "trace"};

static void read_level(void)
{
    const char *env = getenv("WEX_LOG_LEVEL");

    if (env == NULL)
        return;
    for (uint32_t l = WEX_LOG_ERROR; l <= WEX_LOG_TRACE; l++)
        if (strcasecmp(env, level_names[l]) == 0)
            max_level = l;
}

int wex__log_enabled(uint32_t level)
{
    pthread_once(&level_once, read_level);
    return level >= WEX_LOG_ERROR && level <= max_level;
}

void wex__vlog(uint32_t level, const char *who, const char *fmt, va_list ap)
{
    char line[2048];
    int n;

    if (!wex__log_enabled(level))
        return;
    /* One fprintf per line keeps lines from concurrent threads whole. */
    n = snprintf(line, sizeof(line), "wex: %s: %s%s%s", level_names[level],
                 who ? "[" : "", who ? who : "", who ? "] " : "");
    if (n < 0 || (size_t)n >= sizeof(line))
        n = 0;
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", line);
}

void wex__log(uint32_t level, const char *who, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    wex__vlog(level, who, fmt, ap);
    va_end(ap);
}
