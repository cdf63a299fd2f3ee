/*
 * The checks of wex_plugin_negotiate, in a child process: the offers it
 * must accept and refuse (C05 - C08), the descriptor it answers with and
 * its ops table (C09 - C11), and the same answer twice (C12).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"

/* ---- C05 - C12: negotiation and the descriptor -------------------------- */

typedef struct offer_result {
    wex_status status;
    uint32_t lo, hi;
    uint32_t abi;
    const wex_plugin_desc *desc;
} offer_result;

typedef struct vtext {
    char s[16];
} vtext;

static vtext vt(uint32_t v)
{
    vtext t;

    snprintf(t.s, sizeof(t.s), "%u.%u", WEX_VERSION_MAJOR(v),
             WEX_VERSION_MINOR(v));
    return t;
}

static offer_result offer(wex_plugin_negotiate_fn fn, uint32_t lo, uint32_t hi)
{
    wex_negotiate_in in;
    wex_negotiate_out out;
    offer_result r;

    memset(&in, 0, sizeof(in));
    memset(&out, 0, sizeof(out));
    in.struct_size = sizeof(in);
    in.abi_min = lo;
    in.abi_max = hi;
    in.host_version = WEX_VERSION_STRING;
    out.struct_size = sizeof(out);
    r.status = fn(&in, &out);
    r.lo = lo;
    r.hi = hi;
    r.abi = out.abi_version;
    r.desc = out.desc;
    return r;
}

/* C06, C07: an offer the plugin implements nothing of. */
static void expect_refusal(int id, wex_plugin_negotiate_fn fn, uint32_t lo,
                           uint32_t hi)
{
    offer_result r;

    conf_begin(id);
    r = offer(fn, lo, hi);
    if (r.status == WEX_ERR_ABI)
        conf_report(id, CONF_PASS, "refused %s..%s with WEX_ERR_ABI", vt(lo).s,
                    vt(hi).s);
    else if (r.status >= 0)
        conf_report(id, CONF_FAIL,
                    "accepted the offer %s..%s (status %d, chose %s), which "
                    "holds no version it implements",
                    vt(lo).s, vt(hi).s, r.status, vt(r.abi).s);
    else
        conf_report(id, CONF_FAIL,
                    "refused %s..%s with status %d (%s); expected "
                    "WEX_ERR_ABI (%d)",
                    vt(lo).s, vt(hi).s, r.status, wex_status_string(r.status),
                    WEX_ERR_ABI);
}

/* C05 and C08: an offer the plugin must accept. */
static int expect_acceptance(int id, const offer_result *r,
                             const wex_tool_manifest_info *m)
{
    if (r->status != WEX_OK) {
        conf_report(id, CONF_FAIL, "refused the offer %s..%s (status %d, %s)",
                    vt(r->lo).s, vt(r->hi).s, r->status,
                    wex_status_string(r->status));
        return 0;
    }
    if (r->abi < r->lo || r->abi > r->hi) {
        conf_report(id, CONF_FAIL, "chose ABI %s, outside the offer %s..%s",
                    vt(r->abi).s, vt(r->lo).s, vt(r->hi).s);
        return 0;
    }
    if (r->abi < m->abi_min || r->abi > m->abi_max) {
        conf_report(id, CONF_FAIL,
                    "chose ABI %s, outside the range its manifest declares "
                    "(%s..%s)",
                    vt(r->abi).s, vt(m->abi_min).s, vt(m->abi_max).s);
        return 0;
    }
    if (r->desc == NULL) {
        conf_report(id, CONF_FAIL, "accepted %s..%s but left out->desc NULL",
                    vt(r->lo).s, vt(r->hi).s);
        return 0;
    }
    conf_report(id, CONF_PASS, "offered %s..%s, chose %s", vt(r->lo).s,
                vt(r->hi).s, vt(r->abi).s);
    return 1;
}

static void check_descriptor(const wex_tool_manifest_info *m,
                             const offer_result *r)
{
    const wex_plugin_desc *d = r->desc;
    uint32_t level;

    conf_begin(CONF_DESCRIPTOR);
    if (d->struct_size < WEX_PLUGIN_DESC_SIZE_1_0) {
        conf_report(CONF_DESCRIPTOR, CONF_FAIL,
                    "descriptor struct_size %u is smaller than ABI 1.0's %u",
                    d->struct_size, WEX_PLUGIN_DESC_SIZE_1_0);
        conf_report(CONF_IDENTITY, CONF_SKIP, "needs a whole descriptor (C09)");
        conf_report(CONF_OPS, CONF_SKIP, "needs a whole descriptor (C09)");
        return;
    }
    level = d->flags & WEX_PLUGIN_THREAD_MASK;
    if (d->abi_version != r->abi)
        conf_report(CONF_DESCRIPTOR, CONF_FAIL,
                    "the descriptor says ABI %s but negotiate chose %s",
                    vt(d->abi_version).s, vt(r->abi).s);
    else if (d->version == NULL || d->version[0] == '\0')
        conf_report(CONF_DESCRIPTOR, CONF_FAIL,
                    "the descriptor's version string is %s",
                    d->version ? "empty" : "NULL");
    else if (level > WEX_PLUGIN_THREAD_SAFE)
        conf_report(CONF_DESCRIPTOR, CONF_FAIL,
                    "flags declare threading level %u; known levels are 0 "
                    "(single), 1 (per ctx) and 2 (safe)",
                    level);
    else
        conf_report(CONF_DESCRIPTOR, CONF_PASS,
                    "struct_size %u, ABI %s, version %s, threading %s",
                    d->struct_size, vt(d->abi_version).s, d->version,
                    level == WEX_PLUGIN_THREAD_SAFE      ? "safe"
                    : level == WEX_PLUGIN_THREAD_PER_CTX ? "per ctx"
                                                         : "single");

    conf_begin(CONF_IDENTITY);
    if (d->kind != m->kind)
        conf_report(CONF_IDENTITY, CONF_FAIL,
                    "kind mismatch: the manifest says %s, the library says "
                    "%s (%u)",
                    wex_tool_kind_name(m->kind), wex_tool_kind_name(d->kind),
                    d->kind);
    else if (d->name == NULL || strcmp(d->name, m->name) != 0)
        conf_report(CONF_IDENTITY, CONF_FAIL,
                    "name mismatch: the manifest says '%s', the library "
                    "says '%s'",
                    m->name, d->name ? d->name : "(null)");
    else
        conf_report(CONF_IDENTITY, CONF_PASS, "%s '%s'",
                    wex_tool_kind_name(d->kind), d->name);
}

/* The ABI 1.0 function pointers of each kind's ops table. */
typedef struct fn_slot {
    const char *name;
    size_t offset;
} fn_slot;

#define SLOT(type, member)                                                     \
    {                                                                          \
#member, offsetof(type, member)                                        \
    }

static const fn_slot engine_slots[] = {SLOT(wex_engine_ops, ctx_create),
                                       SLOT(wex_engine_ops, ctx_destroy),
                                       SLOT(wex_engine_ops, rank_count),
                                       SLOT(wex_engine_ops, describe_rank),
                                       {NULL, 0}};
static const fn_slot policy_slots[] = {SLOT(wex_policy_ops, ctx_create),
                                       SLOT(wex_policy_ops, ctx_destroy),
                                       SLOT(wex_policy_ops, plan),
                                       {NULL, 0}};
static const fn_slot transport_slots[] = {
    SLOT(wex_transport_ops, ctx_create),
    SLOT(wex_transport_ops, ctx_destroy),
    SLOT(wex_transport_ops, mem_alloc),
    SLOT(wex_transport_ops, mem_register),
    SLOT(wex_transport_ops, mem_deregister),
    SLOT(wex_transport_ops, mem_key),
    SLOT(wex_transport_ops, peer_attach),
    SLOT(wex_transport_ops, peer_detach),
    SLOT(wex_transport_ops, put),
    SLOT(wex_transport_ops, flush),
    {NULL, 0}};

static void check_ops(const wex_tool_manifest_info *m, const wex_plugin_desc *d)
{
    const fn_slot *slots = m->kind == WEX_KIND_ENGINE   ? engine_slots
                           : m->kind == WEX_KIND_POLICY ? policy_slots
                                                        : transport_slots;
    uint32_t need = m->kind == WEX_KIND_ENGINE   ? WEX_ENGINE_OPS_SIZE_1_0
                    : m->kind == WEX_KIND_POLICY ? WEX_POLICY_OPS_SIZE_1_0
                                                 : WEX_TRANSPORT_OPS_SIZE_1_0;
    const uint8_t *ops = d->ops;
    uint32_t size, reserved;
    uint64_t caps;

    conf_begin(CONF_OPS);
    if (ops == NULL) {
        conf_report(CONF_OPS, CONF_FAIL, "the descriptor's ops is NULL");
        return;
    }
    /* every kind's table starts {uint32 struct_size, uint32 reserved0,
     * uint64 caps} */
    memcpy(&size, ops, sizeof(size));
    memcpy(&reserved, ops + 4, sizeof(reserved));
    if (size < need) {
        conf_report(CONF_OPS, CONF_FAIL,
                    "the %s ops table's struct_size %u is smaller than ABI "
                    "1.0's %u",
                    wex_tool_kind_name(m->kind), size, need);
        return;
    }
    memcpy(&caps, ops + 8, sizeof(caps));
    if (reserved != 0 || (m->kind != WEX_KIND_TRANSPORT && caps != 0)) {
        conf_report(CONF_OPS, CONF_FAIL,
                    "reserved members of the ops table are not zero "
                    "(reserved0 %u, caps 0x%llx)",
                    reserved, (unsigned long long)caps);
        return;
    }
    for (const fn_slot *s = slots; s->name; s++) {
        void *fn;
        memcpy(&fn, ops + s->offset, sizeof(fn));
        if (fn == NULL) {
            conf_report(CONF_OPS, CONF_FAIL, "ops->%s is NULL", s->name);
            return;
        }
    }
    if (m->kind == WEX_KIND_TRANSPORT && (caps & WEX_TRANSPORT_CAP_TWO_SIDED)) {
        void *fn;
        memcpy(&fn, ops + offsetof(wex_transport_ops, recv), sizeof(fn));
        if (fn == NULL) {
            conf_report(CONF_OPS, CONF_FAIL,
                        "ops->recv is NULL in a two-sided transport");
            return;
        }
    }
    conf_report(CONF_OPS, CONF_PASS, "%s ops, struct_size %u",
                wex_tool_kind_name(m->kind), size);
}

static void negotiation_child(conf_ctx *ctx, void *arg)
{
    static const int neg[] = {CONF_NEG_EXACT, CONF_NEG_ABOVE, CONF_NEG_BELOW,
                              CONF_NEG_WIDE};
    static const int desc_ids[] = {CONF_DESCRIPTOR, CONF_IDENTITY, CONF_OPS,
                                   CONF_NEG_REPEAT};
    const wex_tool_manifest_info *m = &ctx->manifest;
    wex_plugin_negotiate_fn fn;
    offer_result exact = {0, 0, 0, 0, NULL}, again, wide;
    uint32_t lo, hi, major, host_min, host_max;
    int have_exact = 0;
    void *dl, *sym;

    (void)arg;
    dl = dlopen(m->library, RTLD_NOW | RTLD_LOCAL);
    sym = dl ? dlsym(dl, m->entry_point) : NULL;
    if (sym == NULL) {
        char why[CONF_REASON_MAX - 32];
        if (dl == NULL)
            snprintf(why, sizeof(why), "dlopen failed: %s", dlerror());
        else
            snprintf(why, sizeof(why), "no entry symbol '%s'", m->entry_point);
        for (size_t i = 0; i < 4; i++)
            conf_report(neg[i], CONF_FAIL, "%s", why);
        for (size_t i = 0; i < 4; i++)
            conf_report(desc_ids[i], CONF_SKIP, "needs an entry point");
        return;
    }
    *(void **)&fn = sym;

    /* C05: what this host offers, cut to the manifest's range */
    conf_begin(CONF_NEG_EXACT);
    wex_tool_host_abi(&host_min, &host_max);
    lo = m->abi_min > host_min ? m->abi_min : host_min;
    hi = m->abi_max < host_max ? m->abi_max : host_max;
    if (lo > hi) {
        conf_report(CONF_NEG_EXACT, CONF_FAIL,
                    "the manifest's ABI range %s..%s holds no version this "
                    "host accepts (%s..%s)",
                    vt(m->abi_min).s, vt(m->abi_max).s, vt(host_min).s,
                    vt(host_max).s);
    } else {
        exact = offer(fn, lo, hi);
        have_exact = exact.status == WEX_OK && exact.desc != NULL;
        expect_acceptance(CONF_NEG_EXACT, &exact, m);
    }

    /* C06: the next major versions above what it declares */
    major = WEX_VERSION_MAJOR(m->abi_max) + 1;
    expect_refusal(CONF_NEG_ABOVE, fn, WEX_MAKE_VERSION(major, 0),
                   WEX_MAKE_VERSION(major + 1, 0));

    /* C07: 0.1 .. 0.9, below every 1.x */
    if (m->abi_min < WEX_MAKE_VERSION(1, 0))
        conf_report(CONF_NEG_BELOW, CONF_SKIP,
                    "the manifest declares ABI %s, below 1.0",
                    vt(m->abi_min).s);
    else
        expect_refusal(CONF_NEG_BELOW, fn, WEX_MAKE_VERSION(0, 1),
                       WEX_MAKE_VERSION(0, 9));

    /* C08: a wide offer */
    conf_begin(CONF_NEG_WIDE);
    wide = offer(fn, WEX_MAKE_VERSION(1, 0), WEX_MAKE_VERSION(9, 9));
    expect_acceptance(CONF_NEG_WIDE, &wide, m);

    if (!have_exact) {
        for (size_t i = 0; i < 4; i++)
            conf_report(desc_ids[i], CONF_SKIP, "needs a descriptor from C05");
        return;
    }
    check_descriptor(m, &exact);
    if (exact.desc->struct_size >= WEX_PLUGIN_DESC_SIZE_1_0)
        check_ops(m, exact.desc);

    /* C12: the same offer again gives the same answer */
    conf_begin(CONF_NEG_REPEAT);
    again = offer(fn, exact.lo, exact.hi);
    if (again.status != exact.status || again.abi != exact.abi)
        conf_report(CONF_NEG_REPEAT, CONF_FAIL,
                    "the same offer answered status %d, ABI %s the first "
                    "time and status %d, ABI %s the second",
                    exact.status, vt(exact.abi).s, again.status,
                    vt(again.abi).s);
    else if (again.desc != exact.desc)
        conf_report(CONF_NEG_REPEAT, CONF_FAIL,
                    "the same offer gave another descriptor (%p, then %p): "
                    "descriptors live in static storage",
                    (const void *)exact.desc, (const void *)again.desc);
    else
        conf_report(CONF_NEG_REPEAT, CONF_PASS, "the same descriptor");
}

void conf_check_negotiation(conf_ctx *ctx)
{
    static const int ids[] = {CONF_NEG_EXACT, CONF_NEG_ABOVE,  CONF_NEG_BELOW,
                              CONF_NEG_WIDE,  CONF_DESCRIPTOR, CONF_IDENTITY,
                              CONF_OPS,       CONF_NEG_REPEAT};

    conf_run_child(ctx, "negotiation", ids, sizeof(ids) / sizeof(ids[0]),
                   negotiation_child, NULL);
}
