/* Loading one plugin: dlopen, the shallow entry-symbol check,
 * negotiation, descriptor checks against the manifest, and init. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "registry.h"

static void version_text(uint32_t v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%u.%u", WEX_VERSION_MAJOR(v), WEX_VERSION_MINOR(v));
}

/* The entry symbol must be defined by the plugin's own file, not found
 * through one of its dependencies (a plugin linking another plugin). */
static wex_status check_symbol_origin(const wex__manifest *m, void *symbol)
{
    char want[PATH_MAX], got[PATH_MAX];
    Dl_info info;

    if (dladdr(symbol, &info) == 0 || info.dli_fname == NULL)
        return WEX_OK; /* nothing to compare against */
    if (realpath(m->library, want) == NULL ||
        realpath(info.dli_fname, got) == NULL)
        return WEX_OK;
    if (strcmp(want, got) != 0)
        return wex__error(WEX_ERR_INVALID,
                          "%s: entry symbol '%s' is defined by %s, not by "
                          "the plugin itself",
                          m->library, m->entry_point, got);
    return WEX_OK;
}

/* Smallest legal ops table per kind: every member of ABI 1.0. */
static uint32_t min_ops_size(uint32_t kind)
{
    switch (kind) {
    case WEX_KIND_ENGINE: return WEX_ENGINE_OPS_SIZE_1_0;
    case WEX_KIND_POLICY: return WEX_POLICY_OPS_SIZE_1_0;
    case WEX_KIND_TRANSPORT: return WEX_TRANSPORT_OPS_SIZE_1_0;
    default: return 0;
    }
}

/* The size of the ops table this host was built with. */
static size_t host_ops_size(uint32_t kind)
{
    switch (kind) {
    case WEX_KIND_ENGINE: return sizeof(wex_engine_ops);
    case WEX_KIND_POLICY: return sizeof(wex_policy_ops);
    case WEX_KIND_TRANSPORT: return sizeof(wex_transport_ops);
    default: return 0;
    }
}

/* The one place where the size of a plugin's ops table matters: copy what
 * both the plugin and this host know, and leave the members this host
 * knows but an older plugin lacks zero (NULL), so every caller tests a
 * member for NULL instead of comparing sizes. Members a newer plugin
 * appended past this host's table are not copied. */
static void copy_ops(wex__plugin *p)
{
    uint32_t given = *(const uint32_t *)p->desc->ops;
    size_t known = host_ops_size(p->desc->kind);

    memset(&p->ops, 0, sizeof(p->ops));
    memcpy(&p->ops, p->desc->ops, given < known ? given : known);
    p->ops.struct_size = given;
}

static wex_status check_descriptor(const wex__manifest *m,
                                   const wex_plugin_desc *d,
                                   uint32_t abi_version)
{
    const uint32_t *ops_size = (const uint32_t *)d->ops;

    if (d->struct_size < WEX_PLUGIN_DESC_SIZE_1_0)
        return wex__error(WEX_ERR_ABI,
                          "%s: descriptor struct_size %u is smaller than "
                          "ABI 1.0's %u",
                          m->library, d->struct_size, WEX_PLUGIN_DESC_SIZE_1_0);
    if (d->abi_version != abi_version)
        return wex__error(WEX_ERR_ABI,
                          "%s: negotiated ABI 0x%x but the descriptor says "
                          "0x%x",
                          m->library, abi_version, d->abi_version);
    if (d->kind != m->kind)
        return wex__error(WEX_ERR_INVALID,
                          "%s: kind mismatch: the manifest says %s, the "
                          "library says %s",
                          m->library, wex__kind_name(m->kind),
                          wex__kind_name(d->kind));
    if (d->name == NULL || strcmp(d->name, m->name) != 0)
        return wex__error(WEX_ERR_INVALID,
                          "%s: name mismatch: the manifest says '%s', the "
                          "library says '%s'",
                          m->library, m->name, d->name ? d->name : "(null)");
    if (ops_size == NULL || *ops_size < min_ops_size(d->kind))
        return wex__error(WEX_ERR_ABI,
                          "%s: %s ops table missing or smaller than ABI "
                          "1.0's %u bytes",
                          m->library, wex__kind_name(d->kind),
                          min_ops_size(d->kind));
    return WEX_OK;
}

static wex_status negotiate(const wex__manifest *m, void *symbol, uint32_t lo,
                            uint32_t hi, const wex_plugin_desc **desc_p,
                            uint32_t *abi_p)
{
    wex_plugin_negotiate_fn fn;
    wex_negotiate_in in;
    wex_negotiate_out out;
    char a[16], b[16];
    wex_status status;

    memset(&in, 0, sizeof(in));
    memset(&out, 0, sizeof(out));
    in.struct_size = sizeof(in);
    in.abi_min = lo;
    in.abi_max = hi;
    in.host_version = WEX_VERSION_STRING;
    out.struct_size = sizeof(out);
    *(void **)&fn = symbol;
    version_text(lo, a, sizeof(a));
    version_text(hi, b, sizeof(b));
    status = fn(&in, &out);
    if (status < 0)
        return wex__error(WEX_ERR_ABI, "%s: the plugin refused ABI %s..%s (%s)",
                          m->library, a, b, wex_status_string(status));
    if (out.abi_version < lo || out.abi_version > hi || out.desc == NULL)
        return wex__error(WEX_ERR_ABI,
                          "%s: the plugin chose ABI 0x%x, outside the "
                          "offered %s..%s, or gave no descriptor",
                          m->library, out.abi_version, a, b);
    *desc_p = out.desc;
    *abi_p = out.abi_version;
    return WEX_OK;
}

/* Checks the manifest's range against the host's before any code runs. */
static wex_status common_range(const wex__manifest *m, uint32_t *lo_p,
                               uint32_t *hi_p)
{
    uint32_t lo =
        m->abi_min > WEX__HOST_ABI_MIN ? m->abi_min : WEX__HOST_ABI_MIN;
    uint32_t hi =
        m->abi_max < WEX__HOST_ABI_MAX ? m->abi_max : WEX__HOST_ABI_MAX;
    char pm[16], px[16], hm[16], hx[16];

    if (lo <= hi) {
        *lo_p = lo;
        *hi_p = hi;
        return WEX_OK;
    }
    version_text(m->abi_min, pm, sizeof(pm));
    version_text(m->abi_max, px, sizeof(px));
    version_text(WEX__HOST_ABI_MIN, hm, sizeof(hm));
    version_text(WEX__HOST_ABI_MAX, hx, sizeof(hx));
    return wex__error(WEX_ERR_ABI,
                      "%s: ABI ranges are disjoint: the plugin implements "
                      "%s..%s, this host accepts %s..%s",
                      m->path, pm, px, hm, hx);
}

/* The services table the plugin keeps until its fini: the registry's
 * functions, this host's size and the plugin's own context. */
static void give_services(const wex__registry *r, wex__plugin *p)
{
    memset(&p->services, 0, sizeof(p->services));
    if (r->fill_services != NULL)
        r->fill_services(&p->services);
    p->services.struct_size = sizeof(p->services);
    p->services.abi_version = p->abi_version;
    p->services.ctx = &p->host_ctx;
}

static wex_status open_and_init(const wex__registry *r, wex__plugin *p)
{
    const wex__manifest *m = &p->manifest;
    uint32_t lo = 0, hi = 0;
    wex_status status;
    void *symbol;

    status = common_range(m, &lo, &hi);
    if (status != WEX_OK)
        return status;
    if (access(m->library, F_OK) != 0)
        return wex__error(WEX_ERR_INVALID,
                          "%s: library %s is missing (named by /library_path)",
                          m->path, m->library);
    p->dl = dlopen(m->library, RTLD_NOW | RTLD_LOCAL);
    if (p->dl == NULL)
        return wex__error(WEX_ERR_SYSTEM, "%s: dlopen failed: %s", m->library,
                          dlerror());
    symbol = dlsym(p->dl, m->entry_point);
    if (symbol == NULL)
        return wex__error(WEX_ERR_INVALID,
                          "%s: no entry symbol '%s' (export it with "
                          "WEX_PLUGIN_EXPORT)",
                          m->library, m->entry_point);
    status = check_symbol_origin(m, symbol);
    if (status == WEX_OK)
        status = negotiate(m, symbol, lo, hi, &p->desc, &p->abi_version);
    if (status == WEX_OK)
        status = check_descriptor(m, p->desc, p->abi_version);
    if (status != WEX_OK)
        return status;
    copy_ops(p);
    give_services(r, p);
    if (p->desc->init != NULL) {
        wex__error_clear();
        status = p->desc->init(&p->services, &p->plugin_state);
        if (status != WEX_OK && wex__last_error()[0] == '\0')
            return wex__error(WEX_ERR_INVALID,
                              "%s: init failed (%s) without a message",
                              m->library, wex_status_string(status));
        if (status != WEX_OK)
            return wex__error_prefix(WEX_ERR_INVALID, "%s: init failed (%s)",
                                     m->library, wex_status_string(status));
    }
    return WEX_OK;
}

wex_status wex__plugin_load(wex__registry *r, wex__plugin *p)
{
    wex_status status;

    pthread_mutex_lock(&r->lock);
    if (p->state == WEX__PLUGIN_LOADED) {
        status = WEX_OK;
    } else if (p->state == WEX__PLUGIN_FAILED) {
        status = wex__error(WEX_ERR_INVALID, "%s", p->error);
    } else {
        status = open_and_init(r, p);
        if (status == WEX_OK) {
            p->state = WEX__PLUGIN_LOADED;
            WEX__DEBUG("loaded %s plugin '%s' from %s (ABI 0x%x)",
                       wex__kind_name(p->manifest.kind), p->manifest.name,
                       p->manifest.library, p->abi_version);
        } else {
            p->state = WEX__PLUGIN_FAILED;
            p->error = strdup(wex__last_error());
            p->desc = NULL;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return status;
}
