/*
 * The checks every plugin goes through whatever its kind: the manifest
 * and its options schema (C01, C02), the library's symbols (C03, C04),
 * negotiation and the descriptor (C05 - C12), init and fini (C13).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance.h"
#include "error.h"
#include "jsonschema.h"

/* ---- C01: the manifest -------------------------------------------------- */

void conf_check_manifest(conf_ctx *ctx)
{
    const wex__manifest *m = &ctx->manifest;

    if (wex__manifest_load(ctx->manifest_path, &ctx->manifest) != WEX_OK) {
        conf_set(ctx, CONF_MANIFEST, CONF_FAIL, "%s", wex__last_error());
        return;
    }
    ctx->manifest_ok = 1;
    if (access(m->library, R_OK) != 0) {
        conf_set(ctx, CONF_MANIFEST, CONF_FAIL,
                 "%s: library %s (named by /library_path): %s", m->path,
                 m->library, strerror(errno));
        return;
    }
    conf_set(ctx, CONF_MANIFEST, CONF_PASS,
             "%s plugin '%s' %s, ABI %u.%u..%u.%u", wex__kind_name(m->kind),
             m->name, m->version,
             WEX_VERSION_MAJOR(m->abi_min), WEX_VERSION_MINOR(m->abi_min),
             WEX_VERSION_MAJOR(m->abi_max), WEX_VERSION_MINOR(m->abi_max));
}

/* ---- C02: the options schema -------------------------------------------- */

/* First error of validating `doc` against `schema`: 0 valid, 1 invalid,
 * -1 malformed schema; `why` gets "POINTER: MESSAGE". */
static int validate(const cJSON *schema, const cJSON *doc, char *why,
                    size_t cap)
{
    wex__schema_result res = {0, NULL};
    int rc = wex__schema_validate(schema, doc, &res);

    if (rc != 0 && res.count > 0)
        snprintf(why, cap, "%s: %s", res.errors[0].pointer[0] ?
                                         res.errors[0].pointer : "(root)",
                 res.errors[0].message);
    else if (rc < 0)
        snprintf(why, cap, "the validator failed (%d)", rc);
    wex__schema_result_free(&res);
    return rc == 0 ? 0 : rc > 0 ? 1 : -1;
}

/* "type" absent, "object", or a list holding "object". */
static int allows_objects(const cJSON *schema)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    const cJSON *t;

    if (type == NULL)
        return 1;
    if (cJSON_IsString(type))
        return strcmp(type->valuestring, "object") == 0;
    cJSON_ArrayForEach(t, type)
        if (cJSON_IsString(t) && strcmp(t->valuestring, "object") == 0)
            return 1;
    return 0;
}

void conf_check_options_schema(conf_ctx *ctx)
{
    const cJSON *schema = ctx->manifest.options_schema, *props, *prop;
    cJSON *empty = cJSON_CreateObject();
    char why[CONF_REASON_MAX - 64];
    int rc;

    if (schema == NULL) {
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                 "no /options_schema: the host cannot check the plugin's "
                 "options in job configs");
        goto out;
    }
    if (!cJSON_IsObject(schema)) {
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                 "/options_schema is a boolean schema; expected a JSON "
                 "Schema object describing the options object");
        goto out;
    }
    if (!allows_objects(schema)) {
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                 "/options_schema/type does not allow an object, but "
                 "options are always a JSON object");
        goto out;
    }
    rc = validate(schema, empty, why, sizeof(why));
    if (rc < 0) {
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                 "/options_schema is not a schema the host can use: %s", why);
        goto out;
    }
    /* every property's own default is valid for it */
    props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    cJSON_ArrayForEach(prop, props) {
        const cJSON *dflt = cJSON_GetObjectItemCaseSensitive(prop, "default");
        if (dflt != NULL && validate(prop, dflt, why, sizeof(why)) != 0) {
            conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                     "/options_schema/properties/%s/default does not "
                     "validate against its own schema: %s",
                     prop->string, why);
            goto out;
        }
    }
    if (rc == 0) {
        /* {} is valid: filled with the defaults it must stay valid */
        if (wex__schema_apply_defaults(schema, empty) != 0 ||
            validate(schema, empty, why, sizeof(why)) != 0) {
            conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                     "{} with the schema's defaults filled in does not "
                     "validate: %s", why);
            goto out;
        }
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_PASS,
                 "{} and its defaults validate");
    } else {
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_PASS,
                 "the schema compiles; {} is refused (%s)", why);
    }
out:
    cJSON_Delete(empty);
}

/* ---- C03, C04: symbols -------------------------------------------------- */

static int listed(char *const *list, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(list[i], name) == 0)
            return 1;
    return 0;
}

/* "a, b, c and 4 more" into out. */
static void join(char *const *list, size_t count, const char *skip,
                 char *out, size_t cap)
{
    size_t used = 0, shown = 0, total = 0;

    out[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        if (skip && strcmp(list[i], skip) == 0)
            continue;
        total++;
        if (shown < 6 && used < cap) {
            used += (size_t)snprintf(out + used, cap - used, "%s%s",
                                     shown ? ", " : "", list[i]);
            shown++;
        }
    }
    if (total > shown && used < cap)
        snprintf(out + used, cap - used, " and %zu more", total - shown);
}

static void resolve_child(conf_ctx *ctx, void *arg)
{
    const conf_elf *elf = arg;
    char list[320] = "";
    size_t missing = 0, used = 0;
    void *handle;

    conf_begin(CONF_DEPENDENCIES);
    handle = dlopen(ctx->manifest.library, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        conf_report(CONF_DEPENDENCIES, CONF_FAIL,
                    "does not load with RTLD_NOW: %s", dlerror());
        return;
    }
    /* dlsym on the handle searches the library and its dependency tree
     * only: not libwex, not the kit, not the global scope that let the
     * load succeed. Whatever is missing there came from the process. */
    for (size_t i = 0; i < elf->undefined_count; i++) {
        dlerror();
        if (dlsym(handle, elf->undefined[i]) != NULL || dlerror() == NULL)
            continue;
        if (missing++ < 5 && used < sizeof(list))
            used += (size_t)snprintf(list + used, sizeof(list) - used,
                                     "%s%s", missing > 1 ? ", " : "",
                                     elf->undefined[i]);
    }
    if (missing > 0)
        conf_report(CONF_DEPENDENCIES, CONF_FAIL,
                    "%zu undefined symbol%s resolved by no library it "
                    "depends on, only by the process that loads it: "
                    "%s%s (link with -z defs)",
                    missing, missing == 1 ? " is" : "s are", list,
                    missing > 5 ? ", ..." : "");
    else
        conf_report(CONF_DEPENDENCIES, CONF_PASS,
                    "%zu undefined symbols, all resolved from its %zu "
                    "DT_NEEDED libraries and theirs",
                    elf->undefined_count, elf->needed_count);
}

void conf_check_symbols(conf_ctx *ctx)
{
    const char *entry = ctx->manifest.entry_point;
    static const int ids[] = {CONF_DEPENDENCIES};
    char err[256], list[320];
    conf_elf elf;

    if (conf_elf_read(ctx->manifest.library, &elf, err, sizeof(err)) != 0) {
        conf_set(ctx, CONF_EXPORTS, CONF_FAIL, "%s", err);
        conf_set(ctx, CONF_DEPENDENCIES, CONF_FAIL, "%s", err);
        return;
    }
    if (!listed(elf.exported, elf.exported_count, entry)) {
        if (listed(elf.undefined, elf.undefined_count, entry)) {
            join(elf.needed, elf.needed_count, NULL, list, sizeof(list));
            conf_set(ctx, CONF_EXPORTS, CONF_FAIL,
                     "'%s' is not defined by the library itself: it is "
                     "undefined, so it would come from a dependency (%s)",
                     entry, list);
        } else {
            conf_set(ctx, CONF_EXPORTS, CONF_FAIL,
                     "does not export '%s' (mark it WEX_PLUGIN_EXPORT)",
                     entry);
        }
    } else if (elf.exported_count > 1) {
        join(elf.exported, elf.exported_count, entry, list, sizeof(list));
        conf_set(ctx, CONF_EXPORTS, CONF_FAIL,
                 "exports %zu symbol%s besides '%s': %s (build with "
                 "-fvisibility=hidden)",
                 elf.exported_count - 1, elf.exported_count == 2 ? "" : "s",
                 entry, list);
    } else {
        conf_set(ctx, CONF_EXPORTS, CONF_PASS, "exports only '%s'", entry);
    }
    for (size_t i = 0; i < elf.needed_count; i++)
        if (strncmp(elf.needed[i], "libwex.so", 9) == 0) {
            conf_set(ctx, CONF_DEPENDENCIES, CONF_FAIL,
                     "links the host library (DT_NEEDED %s): everything a "
                     "plugin needs from the host comes through its services "
                     "table",
                     elf.needed[i]);
            break;
        }
    if (ctx->results[CONF_DEPENDENCIES].status == CONF_NOT_RUN)
        conf_run_child(ctx, "C04 symbols", ids, 1, resolve_child, &elf);
    conf_elf_free(&elf);
}

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

static offer_result offer(wex_plugin_negotiate_fn fn, uint32_t lo,
                          uint32_t hi)
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
        conf_report(id, CONF_PASS, "refused %s..%s with WEX_ERR_ABI",
                    vt(lo).s, vt(hi).s);
    else if (r.status >= 0)
        conf_report(id, CONF_FAIL,
                    "accepted the offer %s..%s (status %d, chose %s), which "
                    "holds no version it implements",
                    vt(lo).s, vt(hi).s, r.status, vt(r.abi).s);
    else
        conf_report(id, CONF_FAIL,
                    "refused %s..%s with status %d (%s); expected "
                    "WEX_ERR_ABI (%d)",
                    vt(lo).s, vt(hi).s, r.status,
                    wex_status_string(r.status), WEX_ERR_ABI);
}

/* C05 and C08: an offer the plugin must accept. */
static int expect_acceptance(int id, const offer_result *r,
                             const wex__manifest *m)
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
        conf_report(id, CONF_FAIL,
                    "accepted %s..%s but left out->desc NULL", vt(r->lo).s,
                    vt(r->hi).s);
        return 0;
    }
    conf_report(id, CONF_PASS, "offered %s..%s, chose %s", vt(r->lo).s,
                vt(r->hi).s, vt(r->abi).s);
    return 1;
}

static void check_descriptor(const wex__manifest *m, const offer_result *r)
{
    const wex_plugin_desc *d = r->desc;
    uint32_t level;

    conf_begin(CONF_DESCRIPTOR);
    if (d->struct_size < sizeof(wex_plugin_desc)) {
        conf_report(CONF_DESCRIPTOR, CONF_FAIL,
                    "descriptor struct_size %u is smaller than ABI 1.0's %zu",
                    d->struct_size, sizeof(wex_plugin_desc));
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
                    wex__kind_name(m->kind), wex__kind_name(d->kind),
                    d->kind);
    else if (d->name == NULL || strcmp(d->name, m->name) != 0)
        conf_report(CONF_IDENTITY, CONF_FAIL,
                    "name mismatch: the manifest says '%s', the library "
                    "says '%s'",
                    m->name, d->name ? d->name : "(null)");
    else
        conf_report(CONF_IDENTITY, CONF_PASS, "%s '%s'",
                    wex__kind_name(d->kind), d->name);
}

/* The ABI 1.0 function pointers of each kind's ops table. */
typedef struct fn_slot {
    const char *name;
    size_t offset;
} fn_slot;

#define SLOT(type, member) {#member, offsetof(type, member)}

static const fn_slot engine_slots[] = {
    SLOT(wex_engine_ops, ctx_create), SLOT(wex_engine_ops, ctx_destroy),
    SLOT(wex_engine_ops, rank_count), SLOT(wex_engine_ops, describe_rank),
    {NULL, 0}};
static const fn_slot policy_slots[] = {
    SLOT(wex_policy_ops, ctx_create), SLOT(wex_policy_ops, ctx_destroy),
    SLOT(wex_policy_ops, plan), {NULL, 0}};
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

static void check_ops(const wex__manifest *m, const wex_plugin_desc *d)
{
    const fn_slot *slots = m->kind == WEX_KIND_ENGINE   ? engine_slots
                           : m->kind == WEX_KIND_POLICY ? policy_slots
                                                        : transport_slots;
    size_t need = m->kind == WEX_KIND_ENGINE   ? sizeof(wex_engine_ops)
                  : m->kind == WEX_KIND_POLICY ? sizeof(wex_policy_ops)
                  /* ABI 1.0's table ends at flush; recv was appended */
                  : offsetof(wex_transport_ops, recv);
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
                    "1.0's %zu",
                    wex__kind_name(m->kind), size, need);
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
    conf_report(CONF_OPS, CONF_PASS, "%s ops, struct_size %u",
                wex__kind_name(m->kind), size);
}

static void negotiation_child(conf_ctx *ctx, void *arg)
{
    static const int neg[] = {CONF_NEG_EXACT, CONF_NEG_ABOVE, CONF_NEG_BELOW,
                              CONF_NEG_WIDE};
    static const int desc_ids[] = {CONF_DESCRIPTOR, CONF_IDENTITY, CONF_OPS,
                                   CONF_NEG_REPEAT};
    const wex__manifest *m = &ctx->manifest;
    wex_plugin_negotiate_fn fn;
    offer_result exact = {0, 0, 0, 0, NULL}, again, wide;
    uint32_t lo, hi, major;
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
            snprintf(why, sizeof(why), "no entry symbol '%s'",
                     m->entry_point);
        for (size_t i = 0; i < 4; i++)
            conf_report(neg[i], CONF_FAIL, "%s", why);
        for (size_t i = 0; i < 4; i++)
            conf_report(desc_ids[i], CONF_SKIP, "needs an entry point");
        return;
    }
    *(void **)&fn = sym;

    /* C05: what this host offers, cut to the manifest's range */
    conf_begin(CONF_NEG_EXACT);
    lo = m->abi_min > WEX__HOST_ABI_MIN ? m->abi_min : WEX__HOST_ABI_MIN;
    hi = m->abi_max < WEX__HOST_ABI_MAX ? m->abi_max : WEX__HOST_ABI_MAX;
    if (lo > hi) {
        conf_report(CONF_NEG_EXACT, CONF_FAIL,
                    "the manifest's ABI range %s..%s holds no version this "
                    "host accepts (%s..%s)",
                    vt(m->abi_min).s, vt(m->abi_max).s,
                    vt(WEX__HOST_ABI_MIN).s, vt(WEX__HOST_ABI_MAX).s);
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
            conf_report(desc_ids[i], CONF_SKIP,
                        "needs a descriptor from C05");
        return;
    }
    check_descriptor(m, &exact);
    if (exact.desc->struct_size >= sizeof(wex_plugin_desc))
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
    static const int ids[] = {CONF_NEG_EXACT, CONF_NEG_ABOVE, CONF_NEG_BELOW,
                              CONF_NEG_WIDE, CONF_DESCRIPTOR, CONF_IDENTITY,
                              CONF_OPS, CONF_NEG_REPEAT};

    conf_run_child(ctx, "negotiation", ids, sizeof(ids) / sizeof(ids[0]),
                   negotiation_child, NULL);
}

/* ---- C13: init and fini ------------------------------------------------- */

wex__plugin *conf_load_plugin(const conf_ctx *ctx, const char *manifests,
                              wex__registry **registry_p)
{
    const wex__manifest *m = &ctx->manifest;
    wex__registry *r = NULL;
    wex__plugin *p;

    *registry_p = NULL;
    setenv("WEX_PLUGIN_MANIFESTS", manifests, 1);
    if (wex__registry_scan(&r) != WEX_OK)
        return NULL;
    *registry_p = r;
    p = wex__registry_find(r, m->kind, m->name);
    if (p == NULL) {
        wex__error(WEX_ERR_INVALID, "%s",
                   r->bad_count ? r->bad[0].error
                                : "the registry did not list the plugin");
        return NULL;
    }
    if (wex__plugin_load(r, p) != WEX_OK)
        return NULL;
    return p;
}

static void init_fini_child(conf_ctx *ctx, void *arg)
{
    wex__registry *r;
    wex__plugin *p;
    wex_status st;

    (void)arg;
    conf_begin(CONF_INIT_FINI);
    p = conf_load_plugin(ctx, ctx->manifest_path, &r);
    if (p == NULL) {
        conf_report(CONF_INIT_FINI, CONF_FAIL, "the host's loader: %s",
                    wex__last_error());
        return;
    }
    /* the loader ran negotiate and init; now fini, init, and the
     * registry's own fini */
    if (p->desc->fini != NULL)
        p->desc->fini(p->plugin_state);
    p->plugin_state = NULL;
    if (p->desc->init != NULL) {
        wex__error_clear();
        st = p->desc->init(&p->services, &p->plugin_state);
        if (st != WEX_OK) {
            p->state = WEX__PLUGIN_FAILED; /* no fini for a failed init */
            conf_report(CONF_INIT_FINI, CONF_FAIL,
                        "init after fini failed (%s): %s",
                        wex_status_string(st),
                        wex__last_error()[0] ? wex__last_error()
                                             : "no message");
            return;
        }
    }
    wex__registry_free(r);
    conf_report(CONF_INIT_FINI, CONF_PASS,
                "loaded by the host (services struct_size %zu), then fini, "
                "init, fini",
                sizeof(wex_host_services));
}

void conf_check_init_fini(conf_ctx *ctx)
{
    static const int ids[] = {CONF_INIT_FINI};

    conf_run_child(ctx, "init/fini", ids, 1, init_fini_child, NULL);
}
