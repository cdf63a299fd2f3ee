/*
 * The shm transport's shared definitions: its objects and the functions
 * one file of it calls in another. shm.c says how the transport works.
 *   shm.c         the plugin's state, contexts (and the socket they serve
 *                 their buffers on), the descriptor
 *   shm_mem.c     destination memory: memfds, registered memory, keys
 *   shm_peer.c    attached peers, put and flush
 *   shm_fdpass.c  the buffer server and its client (shm_fdpass.h)
 *   shm_key.c     the key a destination publishes for each buffer
 * Each file calls only files listed below it.
 */
#ifndef WEX_SHM_INTERNAL_H
#define WEX_SHM_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <wex/plugin.h>

#include "shm_fdpass.h"
#include "shm_key.h"
#include "transport_common.h"
#include "transport_list.h"

struct wex_plugin_state {
    const wex_host_services *host;
    pthread_mutex_t lock;
    uint64_t ptracer_holders; /* private buffers exposed, process-wide */
    uint64_t anonymous_jobs;  /* contexts created without a job id */
};

struct wex_transport_mem {
    wt_link link; /* in ctx->mems */
    uint64_t id;
    uint32_t kind; /* SHM_KIND_* */
    int fd;        /* the memfd; -1 for private memory */
    void *address;
    uint64_t bytes;
    uint64_t map_bytes; /* memfd: the mapping's length, whole pages */
};

struct wex_transport_peer {
    wt_link link; /* in ctx->peers */
    uint32_t kind;
    pid_t pid;
    int pidfd; /* private: tells whether the process still runs; or -1 */
    uint64_t rank;
    uint64_t bytes;
    uint8_t *map;     /* memfd: our mapping of the destination's buffer */
    uint64_t address; /* private: the buffer in the destination */
};

struct wex_transport_ctx {
    wex_plugin_state *state;
    const wex_host_services *host;
    uint32_t side;
    uint64_t rank;
    int connect_timeout_ms;
    char name[SHM_NAME_MAX + 1]; /* destination: the abstract socket */
    size_t name_len;
    shm_server *server; /* destination only */
    pthread_mutex_t lock; /* mems and next_id; the server thread reads them */
    wt_link *mems;        /* wex_transport_mem */
    uint64_t next_id;
    wt_link *peers; /* wex_transport_peer */
};

/* ---- shm_mem.c ----------------------------------------------------- */

wex_status shm_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                         void **address_p, wex_transport_mem **mem_p);
wex_status shm_mem_register(wex_transport_ctx *ctx, void *address,
                            uint64_t bytes, uint32_t memory_kind,
                            wex_transport_mem **mem_p);
void shm_mem_deregister(wex_transport_ctx *ctx, wex_transport_mem *m);
wex_status shm_mem_key(wex_transport_ctx *ctx, wex_transport_mem *m,
                       void *key, uint64_t *key_len);
/* Unmaps and frees `m`, already unlinked from ctx->mems. */
void shm_mem_free(wex_transport_ctx *ctx, wex_transport_mem *m);

/* ---- shm_peer.c ---------------------------------------------------- */

wex_status shm_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
                           const void *key, uint64_t key_len,
                           wex_transport_peer **peer_p);
void shm_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p);
/* Unmaps and frees `p`, already unlinked from ctx->peers. */
void shm_peer_free(wex_transport_peer *p);
wex_status shm_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                   uint64_t offset, const void *src, uint64_t bytes);
wex_status shm_flush(wex_transport_ctx *ctx);

#endif /* WEX_SHM_INTERNAL_H */
