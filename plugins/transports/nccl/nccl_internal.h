/*
 * The nccl transport's shared definitions: its objects and the functions
 * one file of it calls in another. nccl.c says how the transport works.
 *   nccl.c       contexts, memory registration, the descriptor
 *   nccl_data.c  attached peers, queued puts and recvs, flush
 *   nccl_comm.c  communicators: join, settle, abort, close
 *   nccl_key.c   the key a destination publishes for each buffer
 * Each file calls only files listed below it.
 */
#ifndef WEX_NCCL_INTERNAL_H
#define WEX_NCCL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <wex/plugin.h>

#include "nccl_key.h"
#include "transport_common.h"

#define TIMEOUT_DEFAULT_MS 60000
#define TIMEOUT_MAX_MS 3600000

/* A communicator, and which destination rank owns it. */
typedef struct nccl_comm {
    struct nccl_comm *next;
    ncclComm_t nccl;
    uint64_t owner;
    int rank, size;
    int ready; /* init completed */
} nccl_comm;

struct wex_transport_mem {
    unsigned char *address;
    uint64_t bytes;
};

struct wex_transport_peer {
    nccl_comm *c;
    uint64_t rank, bytes;
};

/* One queued send or receive. */
typedef struct nccl_transfer {
    nccl_comm *c;
    int peer; /* rank in c */
    int send;
    void *ptr;
    uint64_t bytes;
} nccl_transfer;

struct wex_transport_ctx {
    const wex_host_services *host;
    uint32_t side;
    uint64_t rank, source_ranks;
    uint64_t *peers; /* other-side ranks, ascending */
    uint64_t peer_count;
    int device;
    int64_t timeout_ms;
    int broken; /* communicators aborted: every call fails */
    cudaStream_t stream;
    cudaEvent_t done;
    ncclUniqueId id;  /* destination: its communicator's */
    nccl_comm *comms; /* destination: its own; source: one per destination */
    nccl_transfer *queue; /* kept across steps: a step allocates nothing */
    size_t queued, queue_cap;
};

/* ---- nccl_data.c --------------------------------------------------- */

wex_status nccl_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
                            const void *key, uint64_t key_len,
                            wex_transport_peer **peer_p);
void nccl_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p);
wex_status nccl_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                    uint64_t offset, const void *src, uint64_t bytes);
wex_status nccl_recv(wex_transport_ctx *ctx, uint64_t peer_rank,
                     wex_transport_mem *m, uint64_t offset, uint64_t bytes);
wex_status nccl_flush(wex_transport_ctx *ctx);

/* ---- nccl_comm.c --------------------------------------------------- */

/* A short sleep between polls of NCCL's asynchronous state. */
void nccl_nap(void);
/* Starts joining communicator `id` of destination rank `owner` as rank
 * `rank` of `size` (non-blocking: settle waits) and links it into
 * ctx->comms. */
wex_status nccl_comm_start(wex_transport_ctx *ctx, uint64_t owner,
                           const ncclUniqueId *id, int rank, int size,
                           nccl_comm **comm_p);
/* Aborts every communicator: what is in flight stops, and no later call
 * touches them; the context is broken from then on. */
void nccl_abort_all(wex_transport_ctx *ctx);
/* Who is at the other end of `c`, for messages. */
const char *nccl_comm_who(const wex_transport_ctx *ctx, const nccl_comm *c,
                          char *buf, size_t cap);
/* Polls every communicator until none is in progress; an error or the
 * deadline (wt_now_ms) aborts them all. `what` names the wait. */
wex_status nccl_settle(wex_transport_ctx *ctx, double deadline,
                       const char *what);
/* Says goodbye within timeout_ms when healthy, aborts otherwise. */
void nccl_comm_close(wex_transport_ctx *ctx, nccl_comm *c);

#endif /* WEX_NCCL_INTERNAL_H */
