/*
 * The job's rendezvous lent to a transport (wex_transport_exchange, ABI
 * 1.3): what one rank publishes under a name every rank of the job can
 * fetch, kept under "transport/NAME/" so a transport's names never meet
 * the host's keys. Its messages name no transport: they reach the
 * transport's connect, whose failure the host prefixes with its name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "job.h"
#include "transport_exchange.h"

typedef struct exchange_state {
    wex_job *job;
    double timeout;
} exchange_state;

static int name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;

    if (n == 0 || n > WEX__TRANSPORT_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

static wex_status check_name(const char *what, const char *name)
{
    if (!name_ok(name))
        return wex__error(WEX_ERR_INVALID,
                          "%s: the name \"%s\" is not "
                          "1-%d characters of [A-Za-z0-9_.-]",
                          what, name ? name : "(null)",
                          WEX__TRANSPORT_NAME_MAX);
    return WEX_OK;
}

wex_status wex__transport_publish_check(const char *name, const void *value,
                                        uint64_t len)
{
    wex_status st = check_name("publish", name);

    if (st == WEX_OK &&
        (len > WEX_TRANSPORT_KEY_MAX || (value == NULL && len > 0)))
        st = wex__error(WEX_ERR_INVALID,
                        "publish %s: %llu bytes (at most "
                        "%u)",
                        name, (unsigned long long)len, WEX_TRANSPORT_KEY_MAX);
    return st;
}

wex_status wex__transport_fetch_check(const char *name, const void *value,
                                      uint64_t cap, const uint64_t *len_p)
{
    wex_status st = check_name("fetch", name);

    if (st == WEX_OK && (len_p == NULL || (value == NULL && cap > 0)))
        st = wex__error(WEX_ERR_INVALID, "fetch %s: no place for the value",
                        name);
    return st;
}

static void store_key(const exchange_state *x, const char *name, char *key,
                      size_t cap)
{
    snprintf(key, cap, "transport/%s/%s", x->job->plan.job->transport.name,
             name);
}

static wex_status exchange_publish(void *ctx, const char *name,
                                   const void *value, uint64_t len)
{
    exchange_state *x = ctx;
    char key[160];
    wex_status st = wex__transport_publish_check(name, value, len);

    if (st != WEX_OK)
        return st;
    store_key(x, name, key, sizeof(key));
    return wex__store_set(x->job->rendezvous.store, key, value, (size_t)len);
}

static wex_status exchange_fetch(void *ctx, const char *name, void *value,
                                 uint64_t cap, uint64_t *len_p)
{
    exchange_state *x = ctx;
    char key[160];
    void *got = NULL;
    size_t len = 0;
    wex_status st = wex__transport_fetch_check(name, value, cap, len_p);

    if (st != WEX_OK)
        return st;
    store_key(x, name, key, sizeof(key));
    st = wex__store_get(x->job->rendezvous.store, key, x->timeout, &got, &len);
    if (st != WEX_OK)
        return wex__error_prefix(st, "waiting for \"%s\"", name);
    memcpy(value, got, len < cap ? len : (size_t)cap);
    *len_p = len;
    free(got);
    return WEX_OK;
}

wex_status wex__transport_connect(wex_job *job, double timeout)
{
    exchange_state x = {job, timeout};
    wex_transport_exchange ex;
    wex_status st;

    if (job->transport.ops->connect == NULL)
        return WEX_OK;
    memset(&ex, 0, sizeof(ex));
    ex.struct_size = sizeof(ex);
    ex.ctx = &x;
    ex.publish = exchange_publish;
    ex.fetch = exchange_fetch;
    wex__error_clear();
    st = job->transport.ops->connect(job->transport.ctx, &ex);
    if (st != WEX_OK && wex__last_error()[0] == '\0')
        wex__error(st, "failed without a message");
    if (st != WEX_OK)
        return wex__error_prefix(st, "transport %s",
                                 job->plan.job->transport.name);
    return WEX_OK;
}
