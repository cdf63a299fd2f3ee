#include "services.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "options.h"
#include "registry.h"
#include "services_model.h"
#include "services_plan.h"

static const char *who(const wex_host_ctx *ctx)
{
    return ctx && ctx->plugin ? ctx->plugin->manifest.name : "plugin";
}

static void svc_log(wex_host_ctx *ctx, uint32_t level, const char *file,
                    int32_t line, const char *fmt, ...)
{
    char where[256];
    va_list ap;

    (void)file;
    (void)line;
    if (level < WEX_LOG_ERROR)
        level = WEX_LOG_ERROR;
    if (level > WEX_LOG_TRACE)
        level = WEX_LOG_TRACE;
    snprintf(where, sizeof(where), "%s", who(ctx));
    va_start(ap, fmt);
    wex__vlog(level, where, fmt, ap);
    va_end(ap);
}

static int32_t svc_log_enabled(wex_host_ctx *ctx, uint32_t level)
{
    (void)ctx;
    return wex__log_enabled(level);
}

static void svc_set_error(wex_host_ctx *ctx, wex_status status, const char *fmt,
                          ...)
{
    va_list ap;

    (void)ctx;
    va_start(ap, fmt);
    wex__verror(status, fmt, ap);
    va_end(ap);
}

void wex__services_fill(wex_host_services *s)
{
    s->log = svc_log;
    s->log_enabled = svc_log_enabled;
    s->set_error = svc_set_error;
    s->opt_type = wex__opt_type;
    s->opt_get_i64 = wex__opt_get_i64;
    s->opt_get_f64 = wex__opt_get_f64;
    s->opt_get_bool = wex__opt_get_bool;
    s->opt_get_str = wex__opt_get_str;
    s->opt_count = wex__opt_count;
    s->opt_key = wex__opt_key;
    wex__services_model_init(s);
    wex__services_plan_init(s);
}
