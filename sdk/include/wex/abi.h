/*
 * wex plugin ABI: versions, status codes, data types and the negotiation
 * entry point every plugin exports.
 *
 * Rules (see docs/plugins.md, "How the ABI grows"):
 *  - every struct and ops table starts with uint32_t struct_size;
 *  - each header publishes WEX_<STRUCT>_SIZE_1_0, the size of the struct
 *    as ABI 1.0 froze it: a reader accepts any struct_size at least that,
 *    and reads a member appended later only after WEX_HAS_MEMBER;
 *  - a minor ABI version only appends members;
 *  - only fixed-width integers, size_t, UTF-8 strings, pointers to SDK
 *    structs and opaque handles cross the boundary;
 *  - whoever allocates frees; pointers passed in are borrowed for the call.
 */
#ifndef WEX_ABI_H
#define WEX_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Versions                                                            */
/* ------------------------------------------------------------------ */

#define WEX_MAKE_VERSION(major, minor)                                         \
    ((((uint32_t)(major)) << 16) | ((uint32_t)(minor)&0xffffu))
#define WEX_VERSION_MAJOR(v) (((uint32_t)(v)) >> 16)
#define WEX_VERSION_MINOR(v) (((uint32_t)(v)) & 0xffffu)

/* ABI versions this SDK defines. Plugins state the one they implement as
 * a literal (WEX_ABI_1_0), never as "whatever the SDK is now", so a rebuild
 * against a newer SDK never claims support the plugin does not have. */
#define WEX_ABI_1_0 WEX_MAKE_VERSION(1, 0)
/* 1.1: pieces may carry WEX_TRANSFORM_CONVERT (host.h). Nothing else
 * changed: every struct keeps its 1.0 size. */
#define WEX_ABI_1_1 WEX_MAKE_VERSION(1, 1)
/* 1.2: wex_transport_ops.peer_path (transport.h) and
 * wex_sync_report.puts (wex.h) appended. */
#define WEX_ABI_1_2 WEX_MAKE_VERSION(1, 2)
/* 1.3: wex_transport_ops.connect and wex_transport_exchange
 * (transport.h) appended. */
#define WEX_ABI_1_3 WEX_MAKE_VERSION(1, 3)
/* 1.4: wex_transport_ops.fence and wex_transport_fence (transport.h)
 * appended. */
#define WEX_ABI_1_4 WEX_MAKE_VERSION(1, 4)
/* 1.5: wex_sync_report's delta fields (wire_bytes ... apply_seconds,
 * wex.h) appended. */
#define WEX_ABI_1_5 WEX_MAKE_VERSION(1, 5)
/* 1.6: wex_sync_report's elastic replica fields (replicas ...
 * seeded_bytes, wex.h) appended; wex_job_join and wex_job_leave. */
#define WEX_ABI_1_6 WEX_MAKE_VERSION(1, 6)
#define WEX_ABI_CURRENT WEX_ABI_1_6

/* True when a struct whose struct_size is `size` contains `member`. */
#define WEX_HAS_MEMBER(type, member, size)                                     \
    ((size_t)(size) >= offsetof(type, member) + sizeof(((type *)0)->member))

/* Bytes of `type` up to and including `member`: the struct_size of the
 * version of `type` that ends with `member`. The WEX_*_SIZE_1_0 constants
 * are written with it, so they never change when members are appended. */
#define WEX_SIZE_THROUGH(type, member)                                         \
    ((uint32_t)(offsetof(type, member) + sizeof(((type *)0)->member)))

/* ------------------------------------------------------------------ */
/* Export macro                                                        */
/* ------------------------------------------------------------------ */

#if defined(__GNUC__) || defined(__clang__)
#define WEX_EXPORT __attribute__((visibility("default")))
#define WEX_PRINTF(fmt_idx, arg_idx)                                           \
    __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define WEX_EXPORT
#define WEX_PRINTF(fmt_idx, arg_idx)
#endif

#ifdef __cplusplus
#define WEX_PLUGIN_EXPORT extern "C" WEX_EXPORT
#else
#define WEX_PLUGIN_EXPORT WEX_EXPORT
#endif

/* ------------------------------------------------------------------ */
/* Status                                                              */
/* ------------------------------------------------------------------ */

/* 0 ok, > 0 not done yet (call again / progress), < 0 an error class.
 * The set of classes is frozen; detail text goes through
 * wex_host_services.set_error. */
typedef int32_t wex_status;

#define WEX_OK 0
#define WEX_INPROGRESS 1
#define WEX_ERR_INVALID (-1)     /* bad configuration or argument (user) */
#define WEX_ERR_UNSUPPORTED (-2) /* valid request this build cannot do */
#define WEX_ERR_NOMEM (-3)       /* out of memory */
#define WEX_ERR_SYSTEM (-4)      /* operating system or I/O failure */
#define WEX_ERR_TIMEOUT (-5)     /* a wait ran past its deadline */
#define WEX_ERR_PEER (-6)        /* a remote rank failed or misbehaved */
#define WEX_ERR_INTERNAL (-7)    /* a bug: contract broken by the caller */
#define WEX_ERR_ABI (-8)         /* no common ABI version / bad struct */

static inline const char *wex_status_string(wex_status status)
{
    switch (status) {
    case WEX_OK: return "ok";
    case WEX_INPROGRESS: return "in progress";
    case WEX_ERR_INVALID: return "invalid configuration or argument";
    case WEX_ERR_UNSUPPORTED: return "unsupported";
    case WEX_ERR_NOMEM: return "out of memory";
    case WEX_ERR_SYSTEM: return "system error";
    case WEX_ERR_TIMEOUT: return "timed out";
    case WEX_ERR_PEER: return "peer failure";
    case WEX_ERR_INTERNAL: return "internal error";
    case WEX_ERR_ABI: return "ABI mismatch";
    default: return status > 0 ? "in progress" : "unknown error";
    }
}

/* ------------------------------------------------------------------ */
/* Element types                                                       */
/* ------------------------------------------------------------------ */

#define WEX_DTYPE_INVALID 0u
#define WEX_DTYPE_BF16 1u
#define WEX_DTYPE_F16 2u
#define WEX_DTYPE_F32 3u
#define WEX_DTYPE_F64 4u
#define WEX_DTYPE_F8_E4M3 5u
#define WEX_DTYPE_F8_E5M2 6u
#define WEX_DTYPE_I8 7u
#define WEX_DTYPE_U8 8u
#define WEX_DTYPE_I32 9u
#define WEX_DTYPE_I64 10u
#define WEX_DTYPE_COUNT 11u

/* Size in bytes of one element, 0 for an unknown type. */
static inline uint32_t wex_dtype_size(uint32_t dtype)
{
    static const uint8_t sizes[WEX_DTYPE_COUNT] = {0, 2, 2, 4, 8, 1,
                                                   1, 1, 1, 4, 8};
    return dtype < WEX_DTYPE_COUNT ? sizes[dtype] : 0u;
}

/* The safetensors spelling ("BF16", "F8_E4M3", ...), NULL when unknown. */
static inline const char *wex_dtype_name(uint32_t dtype)
{
    static const char *const names[WEX_DTYPE_COUNT] = {
        NULL,      "BF16", "F16", "F32", "F64", "F8_E4M3",
        "F8_E5M2", "I8",   "U8",  "I32", "I64"};
    return dtype < WEX_DTYPE_COUNT ? names[dtype] : NULL;
}

/* Largest tensor rank anywhere in the ABI. */
#define WEX_MAX_DIMS 8u

/* ------------------------------------------------------------------ */
/* Plugin kinds, flags, handles                                        */
/* ------------------------------------------------------------------ */

#define WEX_KIND_ENGINE 1u
#define WEX_KIND_POLICY 2u
#define WEX_KIND_TRANSPORT 3u

/* Threading level, the low byte of wex_plugin_desc.flags. The host
 * serialises negotiate, init and fini under its loader lock. */
#define WEX_PLUGIN_THREAD_SINGLE 0u  /* host serialises every call */
#define WEX_PLUGIN_THREAD_PER_CTX 1u /* one ctx at a time per ctx */
#define WEX_PLUGIN_THREAD_SAFE 2u    /* any call from any thread */
#define WEX_PLUGIN_THREAD_MASK 0xffu

/* Opaque handles. Each side defines its own; the other never looks in. */
typedef struct wex_plugin_state wex_plugin_state; /* plugin, per process */
typedef struct wex_host_ctx wex_host_ctx;         /* host, per plugin */

struct wex_host_services; /* host.h */

/* ------------------------------------------------------------------ */
/* Negotiation                                                         */
/* ------------------------------------------------------------------ */

typedef struct wex_plugin_desc {
    uint32_t struct_size; /* sizeof(wex_plugin_desc) as the plugin built */
    uint32_t abi_version; /* the version this descriptor follows */
    uint32_t kind;        /* WEX_KIND_* ; must match the manifest */
    uint32_t flags;       /* WEX_PLUGIN_THREAD_* in the low byte */
    const char *name;     /* must equal the manifest's "name" */
    const char *version;  /* the plugin's own version, e.g. "1.2.0" */
    /* Per-process setup. `host` stays valid until fini returns. On
     * failure the plugin explains through host->set_error. May be NULL. */
    wex_status (*init)(const struct wex_host_services *host,
                       wex_plugin_state **state_p);
    void (*fini)(wex_plugin_state *state); /* may be NULL */
    /* The kind's ops table (wex_engine_ops, wex_policy_ops,
     * wex_transport_ops); it starts with struct_size. */
    const void *ops;
} wex_plugin_desc;

typedef struct wex_negotiate_in {
    uint32_t struct_size;     /* sizeof as compiled into the host */
    uint32_t abi_min;         /* oldest ABI the host still accepts */
    uint32_t abi_max;         /* newest ABI the host knows */
    uint32_t reserved0;       /* zero */
    const char *host_version; /* informational, e.g. "0.1.0" */
} wex_negotiate_in;

typedef struct wex_negotiate_out {
    uint32_t struct_size; /* set by the host: its capacity */
    uint32_t abi_version; /* chosen by the plugin, inside [abi_min, abi_max] */
    const wex_plugin_desc *desc; /* static storage inside the plugin */
} wex_negotiate_out;

typedef wex_status (*wex_plugin_negotiate_fn)(const wex_negotiate_in *in,
                                              wex_negotiate_out *out);

/* The sizes ABI 1.0 froze (see the rules at the top). */
#define WEX_PLUGIN_DESC_SIZE_1_0 WEX_SIZE_THROUGH(wex_plugin_desc, ops)
#define WEX_NEGOTIATE_IN_SIZE_1_0                                              \
    WEX_SIZE_THROUGH(wex_negotiate_in, host_version)
#define WEX_NEGOTIATE_OUT_SIZE_1_0 WEX_SIZE_THROUGH(wex_negotiate_out, desc)

/* The one symbol a plugin exports. Return WEX_ERR_ABI when no version in
 * [in->abi_min, in->abi_max] is one the plugin implements. */
#define WEX_PLUGIN_ENTRY_NAME "wex_plugin_negotiate"

/* The whole negotiation of a plugin that implements one ABI version:
 * `abi` is that version as a literal (WEX_ABI_1_0, never WEX_ABI_CURRENT,
 * so a rebuild against a newer SDK claims nothing new) and `desc` the
 * plugin's static descriptor, which states the same version. Most plugins
 * define their entry point with WEX_PLUGIN_DEFINE_ENTRY below. */
static inline wex_status wex_negotiate_one(const wex_negotiate_in *in,
                                           wex_negotiate_out *out, uint32_t abi,
                                           const wex_plugin_desc *desc)
{
    if (in == NULL || out == NULL ||
        in->struct_size < WEX_NEGOTIATE_IN_SIZE_1_0 ||
        out->struct_size < WEX_NEGOTIATE_OUT_SIZE_1_0 || desc == NULL ||
        desc->abi_version != abi)
        return WEX_ERR_ABI;
    if (in->abi_min > abi || in->abi_max < abi)
        return WEX_ERR_ABI;
    out->abi_version = abi;
    out->desc = desc;
    return WEX_OK;
}

/* Defines and exports wex_plugin_negotiate for a plugin of one ABI
 * version:  WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_0, my_plugin_desc)  */
#define WEX_PLUGIN_DEFINE_ENTRY(abi, desc)                                     \
    WEX_PLUGIN_EXPORT wex_status wex_plugin_negotiate(                         \
        const wex_negotiate_in *in, wex_negotiate_out *out);                   \
    WEX_PLUGIN_EXPORT wex_status wex_plugin_negotiate(                         \
        const wex_negotiate_in *in, wex_negotiate_out *out)                    \
    {                                                                          \
        return wex_negotiate_one(in, out, (abi), &(desc));                     \
    }

#ifdef __cplusplus
}
#endif

#endif /* WEX_ABI_H */
