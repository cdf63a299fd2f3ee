/*
 * Transports: move bytes between ranks. A transport registers memory
 * once per job, exchanges addresses through the host's rendezvous, and
 * executes a rank's copy operations each step.
 */
#ifndef WEX_TRANSPORT_H
#define WEX_TRANSPORT_H

#include <wex/host.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wex_transport_ctx wex_transport_ctx; /* plugin, per job */
typedef struct wex_transport_mem wex_transport_mem; /* plugin, per buffer */

/* Capability bits (wex_transport_ops.caps). */
#define WEX_TRANSPORT_CAP_HOST_MEMORY (1ull << 0)
#define WEX_TRANSPORT_CAP_CUDA_MEMORY (1ull << 1)
#define WEX_TRANSPORT_CAP_ONE_SIDED (1ull << 2) /* writes into peers */
#define WEX_TRANSPORT_CAP_SAME_HOST (1ull << 3) /* peers share a host */
#define WEX_TRANSPORT_CAP_NETWORK (1ull << 4)   /* peers across hosts */

/* Memory kinds. */
#define WEX_MEMORY_HOST 0u
#define WEX_MEMORY_CUDA 1u

typedef struct wex_transport_args {
    uint32_t struct_size;
    uint32_t side;               /* WEX_SIDE_* (policy.h) */
    uint64_t rank;               /* rank within its side */
    uint64_t source_ranks;
    uint64_t destination_ranks;
    const wex_options *options; /* validated against the manifest schema */
} wex_transport_args;

typedef struct wex_transport_ops {
    uint32_t struct_size;
    uint32_t reserved0;
    uint64_t caps; /* WEX_TRANSPORT_CAP_* */

    wex_status (*ctx_create)(wex_plugin_state *state,
                             const wex_transport_args *args,
                             wex_transport_ctx **ctx_p);
    void (*ctx_destroy)(wex_transport_ctx *ctx);

    /* Registers a buffer once per job; the buffer stays owned by the
     * caller and must outlive the registration. */
    wex_status (*mem_register)(wex_transport_ctx *ctx, void *address,
                               uint64_t bytes, uint32_t memory_kind,
                               wex_transport_mem **mem_p);
    void (*mem_deregister)(wex_transport_ctx *ctx, wex_transport_mem *mem);
} wex_transport_ops;

#ifdef __cplusplus
}
#endif

#endif /* WEX_TRANSPORT_H */
