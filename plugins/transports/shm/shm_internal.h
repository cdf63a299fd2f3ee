/*
 * The shm transport's shared definitions: its objects and the functions
 * one file of it calls in another. shm.c says how the transport works.
 *   shm.c         the plugin's state, contexts (and the socket they serve
 *                 their buffers on), the descriptor
 *   shm_mem.c     destination memory: memfds, registered memory, keys
 *   shm_peer.c    attached peers, put and flush
 *   shm_fence.c   fencing: the page a destination shares with its
 *                 sources, their slots in it, and stopping a source that
 *                 stays inside a write of a try the destination gave up on
 *   shm_fdpass.c  the buffer server and its client (shm_fdpass.h)
 *   shm_key.c     the key a destination publishes for each buffer
 * Each file calls only files listed below it.
 */
#ifndef WEX_SHM_INTERNAL_H
#define WEX_SHM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <wex/plugin.h>

#include "plugin_fail.h"
#include "shm_fdpass.h"
#include "shm_key.h"
#include "transport_common.h"
#include "transport_list.h"

/* shm's own per-load state rather than plugins/common's (plugin_state.h):
 * besides the host's services it keeps what is process-wide here, under
 * a lock, since Yama's ptracer exception and the names of contexts
 * without a job id belong to the process, not to one context. */
struct wex_plugin_state {
    const wex_host_services *host;
    pthread_mutex_t lock;
    uint64_t ptracer_holders; /* private buffers exposed, process-wide */
    uint64_t anonymous_jobs;  /* contexts created without a job id */
};

/* ---- fencing (shm_fence.c) ------------------------------------------ */

/* Sources a destination's fence page has room for at once; a slot whose
 * source is gone is given to the next. */
#define SHM_FENCE_SLOTS 1024u
/* How much a source writes between two looks at the destination's word:
 * what a destination may still receive from a source it caught inside a
 * write, in the moment before the source sees it closed. */
#define SHM_FENCE_CHUNK (1ull << 20)

typedef struct shm_fence_line {
    _Atomic uint64_t word;
    uint8_t pad[56]; /* a cache line each: sources write only their own */
} shm_fence_line;

/* Shared by a destination with every source that attaches it. */
typedef struct shm_fence_page {
    shm_fence_line open;                     /* the epoch taking writes;
                                                0: none */
    shm_fence_line writing[SHM_FENCE_SLOTS]; /* per slot: the epoch its
                                                source is inside a write
                                                of; 0: none */
} shm_fence_page;

/* A destination's record of who holds a slot (under ctx->lock). */
typedef struct shm_writer {
    int conn;  /* the source's connection to the server; -1: slot free */
    pid_t pid; /* 0: in a pid namespace this process cannot see */
    int pidfd; /* -1 when pid is 0 or pidfd_open failed */
} shm_writer;

/* A source's hold on one destination process's fence page, shared by
 * every buffer of that destination it attached. */
typedef struct shm_fence_ref {
    struct shm_fence_ref *next;
    uint64_t rank;
    pid_t pid; /* the destination's, as its keys say */
    shm_fence_page *page;
    uint32_t slot;
    int sock; /* kept open while the slot is held */
    uint64_t refs;
} shm_fence_ref;

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
    shm_fence_ref *fence;
};

struct wex_transport_ctx {
    wex_plugin_state *state;
    const wex_host_services *host;
    uint32_t side;
    uint64_t rank;
    int connect_timeout_ms;
    char name[SHM_NAME_MAX + 1]; /* destination: the abstract socket */
    size_t name_len;
    shm_server *server;   /* destination only */
    pthread_mutex_t lock; /* mems and next_id; the server thread reads them */
    wt_link *mems;        /* wex_transport_mem */
    uint64_t next_id;
    wt_link *peers; /* wex_transport_peer */
    /* fencing (shm_fence.c) */
    int fence_fd;          /* destination: the fence page's memfd */
    shm_fence_page *fence; /* destination: the page, mapped */
    shm_writer *writers;   /* destination: [SHM_FENCE_SLOTS] */
    uint64_t epoch;        /* source: the try its puts are for; 0: the
                               host never said (no fencing) */
    shm_fence_ref *fences; /* source: one per destination process */
};

/* ---- shm_mem.c ----------------------------------------------------- */

wex_status shm_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                         void **address_p, wex_transport_mem **mem_p);
wex_status shm_mem_register(wex_transport_ctx *ctx, void *address,
                            uint64_t bytes, uint32_t memory_kind,
                            wex_transport_mem **mem_p);
void shm_mem_deregister(wex_transport_ctx *ctx, wex_transport_mem *m);
wex_status shm_mem_key(wex_transport_ctx *ctx, wex_transport_mem *m, void *key,
                       uint64_t *key_len);
/* Unmaps and frees `m`, already unlinked from ctx->mems. */
void shm_mem_free(wex_transport_ctx *ctx, wex_transport_mem *m);

/* ---- shm_peer.c ---------------------------------------------------- */

wex_status shm_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
                           const void *key, uint64_t key_len,
                           wex_transport_peer **peer_p);
void shm_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p);
/* Unmaps and frees `p`, already unlinked from ctx->peers. */
void shm_peer_free(wex_transport_ctx *ctx, wex_transport_peer *p);
wex_status shm_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                   uint64_t offset, const void *src, uint64_t bytes);
wex_status shm_flush(wex_transport_ctx *ctx);

/* ---- shm_fence.c --------------------------------------------------- */

/* A destination's fence page (at ctx_create) and its teardown (after the
 * server stopped). */
wex_status shm_fence_setup(wex_transport_ctx *ctx);
void shm_fence_teardown(wex_transport_ctx *ctx);
/* The server thread's answer to a fence request: the page and a slot,
 * held for as long as the source keeps the connection. */
uint32_t shm_fence_serve(wex_transport_ctx *ctx, shm_asked *asked,
                         shm_reply *reply, int *fd_p);
/* Source: takes (or shares) a slot in the fence page of the destination
 * `f` names, for peer `p`; and gives it back with its last peer. */
wex_status shm_fence_attach(wex_transport_ctx *ctx, wex_transport_peer *p,
                            const shm_fetch *f);
void shm_fence_release(wex_transport_ctx *ctx, wex_transport_peer *p);
/* Source, around each put: whether the destination takes writes of the
 * source's epoch (enter marks the slot as inside a write first; still
 * open is asked again before each chunk); leave clears the mark. Both
 * fail with WEX_ERR_PEER saying the source is fenced, the mark cleared.
 * A no-op where the host names no epoch. */
wex_status shm_fence_enter(wex_transport_ctx *ctx, const wex_transport_peer *p);
wex_status shm_fence_still_open(wex_transport_ctx *ctx,
                                const wex_transport_peer *p);
void shm_fence_leave(wex_transport_ctx *ctx, const wex_transport_peer *p);
/* The transport's fence op (ABI 1.4). */
wex_status shm_fence(wex_transport_ctx *ctx, wex_transport_fence *f);

#endif /* WEX_SHM_INTERNAL_H */
