/*
 * The nccl transport's shared definitions: its objects and the functions
 * one file of it calls in another. nccl.c says how the transport works.
 *   nccl.c       contexts, connect, memory registration, the descriptor
 *   nccl_data.c  attached peers, queued puts and recvs, flush
 *   nccl_comm.c  the job's communicator: join, settle, abort, close
 *   nccl_key.c   the group's ranks and the key of each buffer
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
#include "plugin_fail.h"
#include "transport_common.h"

#define TIMEOUT_DEFAULT_MS 60000
#define TIMEOUT_MAX_MS 3600000
/* The exchange's name for the unique id destination rank 0 draws. */
#define NCCL_ID_NAME "unique-id"

struct wex_transport_mem {
    unsigned char *address;
    uint64_t bytes;
};

struct wex_transport_peer {
    uint64_t rank; /* destination rank = its rank in the communicator */
    uint64_t bytes;
};

/* One queued send or receive. */
typedef struct nccl_transfer {
    int peer; /* rank in the communicator */
    int send;
    void *ptr;
    uint64_t bytes;
} nccl_transfer;

struct wex_transport_ctx {
    const wex_host_services *host;
    uint32_t side;
    uint64_t rank, source_ranks, destination_ranks;
    uint64_t *peers; /* other-side ranks, ascending */
    uint64_t peer_count;
    int group_rank, group_size; /* in the job's communicator */
    int device;
    int64_t timeout_ms;
    int broken; /* the communicator aborted: every call fails */
    cudaStream_t stream;
    cudaEvent_t done;
    ncclComm_t comm;      /* NULL until connect */
    int ready;            /* its init completed */
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
/* The transport's fence op (ABI 1.4): an abandoned try aborts the
 * communicator. */
wex_status nccl_fence(wex_transport_ctx *ctx, wex_transport_fence *f);

/* ---- nccl_comm.c --------------------------------------------------- */

/* A short sleep between polls of NCCL's asynchronous state. */
void nccl_nap(void);
/* Starts joining the job's communicator with unique id `id` as
 * ctx->group_rank of ctx->group_size (non-blocking: settle waits). */
wex_status nccl_join(wex_transport_ctx *ctx, const ncclUniqueId *id);
/* Aborts the communicator: what is in flight stops, and no later call
 * touches it; the context is broken from then on. */
void nccl_abort(wex_transport_ctx *ctx);
/* Polls the communicator until it is not in progress; an error or the
 * deadline (wt_now_ms) aborts it. `what` names the wait. */
wex_status nccl_settle(wex_transport_ctx *ctx, double deadline,
                       const char *what);
/* Says goodbye within timeout_ms when healthy, aborts otherwise. */
void nccl_close(wex_transport_ctx *ctx);

#endif /* WEX_NCCL_INTERNAL_H */
