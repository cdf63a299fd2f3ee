/*
 * Transports: move bytes between ranks with one-sided writes.
 *
 * A destination rank exposes its buffers once per job (mem_alloc or
 * mem_register, then mem_key); the host publishes each key through the
 * job's rendezvous. A source rank attaches each destination buffer it
 * writes into (peer_attach) and, every step, writes with put and waits
 * with flush. Nothing is allocated or registered during a step.
 *
 * Two-sided transports (WEX_TRANSPORT_CAP_TWO_SIDED, e.g. NCCL) cannot
 * write into a peer unasked: the destination posts a matching recv for
 * every put, in the plan's order (the same order the source puts in, per
 * pair of ranks), and completes them with its own flush. The key still
 * travels from destination to source; each side learns the other-side
 * ranks it will exchange with from wex_transport_args.peer_ranks. What a
 * transport must share among all the job's ranks to connect (NCCL's
 * unique id) goes through the job's rendezvous in `connect` (ABI 1.3).
 */
#ifndef WEX_TRANSPORT_H
#define WEX_TRANSPORT_H

#include <wex/host.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wex_transport_ctx wex_transport_ctx;   /* plugin, per job */
typedef struct wex_transport_mem wex_transport_mem;   /* a local buffer */
typedef struct wex_transport_peer wex_transport_peer; /* a peer's buffer */

/* Capability bits (wex_transport_ops.caps). */
#define WEX_TRANSPORT_CAP_HOST_MEMORY (1ull << 0)
#define WEX_TRANSPORT_CAP_CUDA_MEMORY (1ull << 1)
#define WEX_TRANSPORT_CAP_ONE_SIDED (1ull << 2) /* writes into peers */
#define WEX_TRANSPORT_CAP_SAME_HOST (1ull << 3) /* peers share a host */
#define WEX_TRANSPORT_CAP_NETWORK (1ull << 4)   /* peers across hosts */
#define WEX_TRANSPORT_CAP_ALLOC (1ull << 5)     /* mem_alloc works */
/* Destinations post recv for each put and flush them (see above). */
#define WEX_TRANSPORT_CAP_TWO_SIDED (1ull << 6)
/* ABI 1.2. Sources register the memory they put from with mem_register,
 * once per job when it is bound, and the transport's puts from inside a
 * registration use it (no registration on first use, as RDMA lanes would
 * otherwise make in the first step). */
#define WEX_TRANSPORT_CAP_REGISTER_SOURCE (1ull << 7)
/* Puts land in the order they are made, once flush has returned; and an
 * 8-byte put at an 8-aligned offset lands whole, never torn. With
 * CAP_ONE_SIDED and CAP_ALLOC it lets a destination watch a word each
 * source writes after its bytes (the host's landing board) and check
 * what landed while it is still in cache. Like every cap bit, it needs
 * no new ABI version: a host that does not know it ignores it. */
#define WEX_TRANSPORT_CAP_PUTS_LAND_IN_ORDER (1ull << 8)

/* Memory kinds. */
#define WEX_MEMORY_HOST 0u
#define WEX_MEMORY_CUDA 1u

/* The most bytes a memory key may take. */
#define WEX_TRANSPORT_KEY_MAX 4096u

/* ABI 1.3. The job's rendezvous, lent to a transport's `connect`: small
 * values every rank of the job can read, in a namespace of the
 * transport's own (the host prefixes the names), e.g. a unique id one
 * rank draws and every other rank joins with. Valid only during the
 * call. */
typedef struct wex_transport_exchange {
    uint32_t struct_size;
    uint32_t reserved0;
    void *ctx; /* pass back as the first argument below */
    /* Sets `name` (1-64 characters of [A-Za-z0-9_.-]) to `len` bytes,
     * at most WEX_TRANSPORT_KEY_MAX; replaces an earlier value. */
    wex_status (*publish)(void *ctx, const char *name, const void *value,
                          uint64_t len);
    /* Waits until `name` is set, up to the job's connect timeout
     * (WEX_ERR_TIMEOUT after), and copies at most `cap` bytes of it into
     * `value`; *len_p receives its whole length. */
    wex_status (*fetch)(void *ctx, const char *name, void *value, uint64_t cap,
                        uint64_t *len_p);
} wex_transport_exchange;
#define WEX_TRANSPORT_EXCHANGE_SIZE_1_3                                        \
    WEX_SIZE_THROUGH(wex_transport_exchange, fetch)

/* ABI 1.4. Fencing: a destination takes the writes of one epoch at a
 * time (an epoch is one try of one step, the same number on every rank;
 * never 0), so a source it gave up on can never write into it again for
 * that try (docs/plugins.md, "Fencing"). */
#define WEX_FENCE_OPEN 1u /* destination: take writes of `epoch` only */
#define WEX_FENCE_CLOSE                                                        \
    2u                     /* destination: take none; returns once no
                              write of an earlier epoch can land */
#define WEX_FENCE_WRITE 3u /* source: the puts that follow are `epoch`'s */

typedef struct wex_transport_fence {
    uint32_t struct_size;
    uint32_t op;    /* WEX_FENCE_* */
    uint64_t epoch; /* OPEN and WRITE */
    /* CLOSE: the epoch did not commit, so writers may still be inside
     * it (a source that stalled or was left behind); 0 after a commit,
     * when every source has flushed. */
    uint32_t abandoned;
    /* CLOSE: how long a writer caught inside a write may take to leave
     * it before the transport stops it by force (kills a same-host
     * process, closes an endpoint). */
    uint32_t grace_ms;
    /* CLOSE, out: the transport revoked its memory keys and made new
     * ones (RDMA); the host publishes them again and sources attach
     * them before the next try. */
    uint32_t rekeyed;
    uint32_t reserved0;
} wex_transport_fence;
#define WEX_TRANSPORT_FENCE_SIZE_1_4                                           \
    WEX_SIZE_THROUGH(wex_transport_fence, reserved0)

typedef struct wex_transport_args {
    uint32_t struct_size;
    uint32_t side; /* WEX_SIDE_* */
    uint64_t rank; /* rank within its side */
    uint64_t source_ranks;
    uint64_t destination_ranks;
    const wex_options *options; /* validated against the manifest schema */
    /* Unique per running job (every rank gets the same): lets a transport
     * name per-job endpoints without colliding with other jobs. */
    const char *job_id;
    /* The other-side ranks this rank's operations involve, ascending
     * (borrowed for ctx_create). */
    const uint64_t *peer_ranks;
    uint64_t peer_count;
} wex_transport_args;
#define WEX_TRANSPORT_ARGS_SIZE_1_0                                            \
    WEX_SIZE_THROUGH(wex_transport_args, peer_count)

typedef struct wex_transport_ops {
    uint32_t struct_size;
    uint32_t reserved0;
    uint64_t caps; /* WEX_TRANSPORT_CAP_* */

    wex_status (*ctx_create)(wex_plugin_state *state,
                             const wex_transport_args *args,
                             wex_transport_ctx **ctx_p);
    void (*ctx_destroy)(wex_transport_ctx *ctx);

    /* Allocates `bytes` of memory peers can write into directly (zeroed,
     * page aligned); WEX_ERR_UNSUPPORTED without CAP_ALLOC. Freed by
     * mem_deregister. */
    wex_status (*mem_alloc)(wex_transport_ctx *ctx, uint64_t bytes,
                            void **address_p, wex_transport_mem **mem_p);
    /* Registers a caller-owned buffer, which must outlive the
     * registration. */
    wex_status (*mem_register)(wex_transport_ctx *ctx, void *address,
                               uint64_t bytes, uint32_t memory_kind,
                               wex_transport_mem **mem_p);
    void (*mem_deregister)(wex_transport_ctx *ctx, wex_transport_mem *mem);
    /* What a peer needs to attach the buffer: at most *key_len bytes
     * (WEX_TRANSPORT_KEY_MAX suffices); *key_len receives the length. */
    wex_status (*mem_key)(wex_transport_ctx *ctx, wex_transport_mem *mem,
                          void *key, uint64_t *key_len);

    /* Attaches destination rank `peer_rank`'s buffer from its key. */
    wex_status (*peer_attach)(wex_transport_ctx *ctx, uint64_t peer_rank,
                              const void *key, uint64_t key_len,
                              wex_transport_peer **peer_p);
    void (*peer_detach)(wex_transport_ctx *ctx, wex_transport_peer *peer);

    /* Writes `bytes` from local `src` into the peer's buffer at byte
     * `offset`. May return before the bytes land; flush waits. A failed
     * peer is WEX_ERR_PEER with a message naming it. */
    wex_status (*put)(wex_transport_ctx *ctx, wex_transport_peer *peer,
                      uint64_t offset, const void *src, uint64_t bytes);
    /* Every put issued so far has landed in the peers' memory (and, with
     * CAP_TWO_SIDED, every recv posted so far has completed). */
    wex_status (*flush)(wex_transport_ctx *ctx);

    /* NULL unless CAP_TWO_SIDED. On a destination: receives the `bytes` that source rank `peer_rank`'s
     * matching put sends into local buffer `mem` at byte `offset`. Posted
     * in the plan's order; flush waits. */
    wex_status (*recv)(wex_transport_ctx *ctx, uint64_t peer_rank,
                       wex_transport_mem *mem, uint64_t offset, uint64_t bytes);

    /* ABI 1.2; may be NULL. How this rank's bytes reach an attached
     * peer, as a short name the host reports (ucx: "am" for active
     * messages, "put" for one-sided puts). NULL (or a NULL op): the
     * transport has one way, and the host names it by the transport's
     * name. The string lives as long as the library is loaded. */
    const char *(*peer_path)(wex_transport_ctx *ctx,
                             const wex_transport_peer *peer);

    /* ABI 1.3; may be NULL. Called once per job on every rank of both
     * sides, after the ranks have met at the rendezvous and before any
     * memory key is taken or attached, for a transport that forms a
     * group of all the job's ranks (nccl: one communicator). A failure
     * fails the rank's connect with the transport's message. */
    wex_status (*connect)(wex_transport_ctx *ctx,
                          const wex_transport_exchange *exchange);

    /* ABI 1.4; may be NULL: the transport cannot fence, and the host
     * says so once per job. A destination is opened for each try before
     * its barrier (OPEN) and closed after it (CLOSE); a source says
     * which try its puts are for (WRITE) before making them. A put or
     * flush into a destination not open to the source's epoch fails
     * with WEX_ERR_PEER and a message saying the source was fenced; a
     * CLOSE that cannot stop a writer fails naming it (and the host
     * keeps the destination dirty). */
    wex_status (*fence)(wex_transport_ctx *ctx, wex_transport_fence *fence);
} wex_transport_ops;
#define WEX_TRANSPORT_OPS_SIZE_1_0 WEX_SIZE_THROUGH(wex_transport_ops, recv)
#define WEX_TRANSPORT_OPS_SIZE_1_2                                             \
    WEX_SIZE_THROUGH(wex_transport_ops, peer_path)
#define WEX_TRANSPORT_OPS_SIZE_1_3 WEX_SIZE_THROUGH(wex_transport_ops, connect)
#define WEX_TRANSPORT_OPS_SIZE_1_4 WEX_SIZE_THROUGH(wex_transport_ops, fence)

#ifdef __cplusplus
}
#endif

#endif /* WEX_TRANSPORT_H */
