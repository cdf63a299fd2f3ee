/*
 * The rendezvous a job lends a transport's connect (ABI 1.3), played for
 * C19 by files in one directory the tester and its forked destination
 * share: publish writes DIR/NAME whole (a temporary file renamed over
 * it), fetch waits for it until the kit's deadline. Names and sizes
 * follow the host's rule, so a transport that passes here publishes
 * nothing a job would refuse.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conformance.h"
#include "tool_base.h"

static wex_status exchange_publish(void *ctx, const char *name,
                                   const void *value, uint64_t len)
{
    const conf_exchange *x = ctx;
    char tmp[sizeof(x->dir) + 96], path[sizeof(x->dir) + 80];
    wex_status st = wex_tool_transport_publish_check(name, value, len);
    FILE *f;

    if (st != WEX_OK)
        return st;
    snprintf(tmp, sizeof(tmp), "%s/.%s.%ld", x->dir, name, (long)getpid());
    snprintf(path, sizeof(path), "%s/%s", x->dir, name);
    f = fopen(tmp, "wb");
    if (f == NULL || (len > 0 && fwrite(value, 1, len, f) != len) ||
        fclose(f) != 0 || rename(tmp, path) != 0)
        return wex_tool_error(WEX_ERR_SYSTEM, "kit: publish %s: %s: %s", name,
                              tmp, strerror(errno));
    return WEX_OK;
}

static wex_status exchange_fetch(void *ctx, const char *name, void *value,
                                 uint64_t cap, uint64_t *len_p)
{
    const conf_exchange *x = ctx;
    char path[sizeof(x->dir) + 80];
    unsigned char got[WEX_TRANSPORT_KEY_MAX];
    double deadline = wex_tool_now() + x->deadline_s;
    wex_status st = wex_tool_transport_fetch_check(name, value, cap, len_p);
    size_t len;
    FILE *f;

    if (st != WEX_OK)
        return st;
    snprintf(path, sizeof(path), "%s/%s", x->dir, name);
    while ((f = fopen(path, "rb")) == NULL) {
        struct timespec ms = {0, 1000000};

        if (wex_tool_now() > deadline)
            return wex_tool_error(WEX_ERR_TIMEOUT,
                                  "waiting for \"%s\": "
                                  "not published within %.1f s (--deadline)",
                                  name, x->deadline_s);
        nanosleep(&ms, NULL);
    }
    len = fread(got, 1, sizeof(got), f);
    fclose(f);
    memcpy(value, got, len < cap ? len : (size_t)cap);
    *len_p = len;
    return WEX_OK;
}

int conf_exchange_open(conf_exchange *x, double deadline_s)
{
    x->deadline_s = deadline_s > 0 ? deadline_s : 1.0;
    return wex_tool_temp_dir_make(x->dir, sizeof(x->dir), "wex-conformance");
}

void conf_exchange_lend(conf_exchange *x, wex_transport_exchange *ex)
{
    memset(ex, 0, sizeof(*ex));
    ex->struct_size = sizeof(*ex);
    ex->ctx = x;
    ex->publish = exchange_publish;
    ex->fetch = exchange_fetch;
}

void conf_exchange_close(conf_exchange *x)
{
    if (x->dir[0] == '\0')
        return;
    wex_tool_temp_dir_remove(x->dir);
    x->dir[0] = '\0';
}
