/*
 * The ucx transport's shared definitions: its objects and the functions
 * one file of it calls in another. ucx.c says how the transport works.
 *   ucx.c       contexts, the destination's progress thread, the descriptor
 *   ucx_conn.c  endpoints to destination workers: open, flush, close
 *   ucx_mem.c   destination memory: map, publish keys, unmap
 *   ucx_data.c  attached peers, put and flush
 *   ucx_am.c    the active-message data path, where no lane does RMA
 *   ucx_fence.c fencing: the try a destination takes writes of, and
 *               stopping a source that stays inside a write of another
 *   ucx_key.c   the key a destination publishes for each buffer
 */
#ifndef WEX_UCX_INTERNAL_H
#define WEX_UCX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <ucp/api/ucp.h>
#include <wex/plugin.h>

#include "ucx_key.h"
#include "transport_common.h"
#include "transport_list.h"
#include "plugin_fail.h"
#include "plugin_state.h"

#define FLUSH_TIMEOUT_DEFAULT_MS 60000
#define CONNECT_TIMEOUT_DEFAULT_MS 10000
#define TIMEOUT_MAX_MS 3600000
#define MAX_OUTSTANDING_DEFAULT 1024
#define MAX_OUTSTANDING_MAX 1048576
/* UCX's tcp receive segment, which also caps each active-message
 * fragment over tcp (UCX's own default is 64 KiB). */
#define TCP_SEGMENT_DEFAULT (512 << 10)
#define TCP_SEGMENT_MIN (64 << 10)
#define TCP_SEGMENT_MAX (64 << 20)
/* How long closing endpoints may take to flush and say goodbye before
 * they are abandoned to the worker's destruction. */
#define CLOSE_TIMEOUT_MS 2000
/* How long a source that gave up on a try waits for what it sent to
 * finish (ucx_data.c). */
#define DRAIN_MS 2000
/* Progress calls that found nothing to do before the progress thread
 * sleeps, and how long it sleeps at most: a safety net for interfaces
 * that cannot raise wakeup events. */
#define IDLE_SPINS 64
#define IDLE_WAIT_MS 5

/* How a source writes a destination's bytes (option data_path). */
enum { UCX_PATH_AUTO, UCX_PATH_PUT, UCX_PATH_AM };

typedef struct ucx_am_source ucx_am_source;
typedef struct ucx_am_recv ucx_am_recv;

/* An endpoint to one destination rank's worker, shared by every buffer
 * of that rank a source attaches. Never freed before the worker is
 * destroyed: a late completion may still name it. */
typedef struct ucx_conn {
    struct ucx_conn *next;
    wex_transport_ctx *ctx;
    ucp_ep_h ep; /* NULL once closed */
    uint8_t *address;
    uint32_t address_len;
    uint64_t rank;
    uint32_t pid;
    char host[UCX_HOST_MAX + 1];
    uint64_t peers;       /* attached buffers using it */
    ucs_status_t failure; /* UCS_OK until the endpoint fails */
    int stuck;            /* a flush or put timed out: close it by force */
    int dropped;          /* failed, and its endpoint closed by force at once */
    /* the flush in progress */
    void *flush_req;
    int flush_done;
    ucs_status_t flush_status;
    /* active messages (ucx_am.c): used instead of puts when set */
    int am;
    uint64_t am_sent;         /* bytes sent since the context began */
    uint64_t am_seq;          /* the last flush asked */
    int am_answered;          /* ... and answered */
    uint64_t am_placed;       /* what the answer says was placed */
    uint64_t am_refused;      /* ... and refused, in all */
    uint64_t am_refused_told; /* refused bytes a flush already failed for */
    uint64_t am_fenced;       /* ... and dropped as another try's, of the
                             flush's epoch */
    uint64_t am_fenced_told;
} ucx_conn;

struct wex_transport_mem {
    wt_link link; /* in ctx->mems */
    ucp_mem_h memh;
    void *address;
    uint64_t bytes;
    uint64_t map_bytes; /* our own mmap's length, or 0: caller's memory,
                           or UCX's (freed by ucp_mem_unmap) */
    int ucx_owned;      /* UCX allocated it: it cannot be registered again */
};

struct wex_transport_peer {
    wt_link link; /* in ctx->peers */
    ucx_conn *conn;
    ucp_rkey_h rkey;
    uint64_t rank;
    uint64_t address; /* in the destination */
    uint64_t bytes;
};

struct wex_transport_ctx {
    wex_plugin_state *state;
    const wex_host_services *host;
    uint32_t side;
    uint64_t rank;
    int flush_timeout_ms;
    int connect_timeout_ms;
    uint64_t max_outstanding;
    int data_path; /* UCX_PATH_* */
    ucp_err_handling_mode_t err_mode;
    ucp_context_h context;
    ucp_worker_h worker;
    /* destination */
    pthread_mutex_t lock; /* every UCP call, against the progress thread */
    ucp_address_t *address;
    size_t address_len;
    char host_name[UCX_HOST_MAX + 1];
    pthread_t thread;
    int thread_started;
    atomic_int stop;
    int efd;       /* the worker's event fd, or -1: sleep instead */
    int wake_fd;   /* an eventfd that ends the thread's sleep */
    wt_link *mems; /* wex_transport_mem */
    /* sources: the registration the last put came from (ucx_mem.c) */
    const wex_transport_mem *last_source_mem;
    ucx_am_source *am_sources; /* what each source sent by message */
    ucx_am_recv *am_receiving; /* rendezvous receives in flight */
    /* fencing (ucx_fence.c), under ctx->lock: the try whose messages
     * are placed; 0: none. Until the host first opens one (`fencing`),
     * every message is. */
    uint64_t open_epoch;
    int fencing;
    /* source */
    uint64_t nonce; /* tells this context's messages from another's */
    uint64_t epoch; /* the try its messages are for (ucx_fence.c) */
    ucx_conn *conns;
    wt_link *peers;       /* wex_transport_peer */
    uint64_t outstanding; /* put requests not yet completed */
};

/* ---- ucx_conn.c ---------------------------------------------------- */

int64_t ucx_now_ms(void);
/* One progress pass on a source's worker; naps after a run of idle ones. */
void ucx_source_progress(wex_transport_ctx *ctx, unsigned *idle);
/* The error for a failed endpoint, naming its destination; a source's
 * endpoint is closed by force first. */
wex_status ucx_peer_failed(wex_transport_ctx *ctx, ucx_conn *c);
/* Closes endpoints no peer uses any more (all of them with `all`). */
void ucx_close_conns(wex_transport_ctx *ctx, int all);
ucx_conn *ucx_find_conn(wex_transport_ctx *ctx, const ucx_key *k);
/* What ucp_ep_print_info says of `ep` (its lanes and their transports),
 * malloc'd; NULL when it cannot be had. */
char *ucx_ep_info(ucp_ep_h ep);
void ucx_flush_start(ucx_conn *c);
void ucx_flush_abandon(ucx_conn *c);
/* Opens an endpoint to the worker `k` names and waits (connect_timeout_ms)
 * until it is wired up. */
wex_status ucx_conn_open(wex_transport_ctx *ctx, const ucx_key *k,
                         ucx_conn **conn_p);

/* ---- ucx_mem.c ----------------------------------------------------- */

wex_status ucx_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                         void **address_p, wex_transport_mem **mem_p);
wex_status ucx_mem_register(wex_transport_ctx *ctx, void *address,
                            uint64_t bytes, uint32_t memory_kind,
                            wex_transport_mem **mem_p);
void ucx_mem_deregister(wex_transport_ctx *ctx, wex_transport_mem *m);
wex_status ucx_mem_key(wex_transport_ctx *ctx, wex_transport_mem *m, void *key,
                       uint64_t *key_len);
/* Unmaps and frees `m`, already unlinked from ctx->mems; takes ctx->lock
 * for the UCP call only. */
void ucx_mem_free(wex_transport_ctx *ctx, wex_transport_mem *m);
/* Destination: registers every buffer UCX did not allocate again and
 * drops the old registration, revoking the remote keys sources hold;
 * returns how many, or -1 (with the error set) when one failed. */
int ucx_mem_rekey(wex_transport_ctx *ctx);
/* Sources: the handle of the registration [src, src + bytes) lies in,
 * or NULL (UCX then registers on use, where its lanes need it). */
ucp_mem_h ucx_source_memh(wex_transport_ctx *ctx, const void *src,
                          uint64_t bytes);

/* ---- ucx_data.c ---------------------------------------------------- */

wex_status ucx_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
                           const void *key, uint64_t key_len,
                           wex_transport_peer **peer_p);
void ucx_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p);
/* Releases `p` (its rkey, its hold on its endpoint) and unlinks it. */
void ucx_peer_free(wex_transport_ctx *ctx, wex_transport_peer *p);
wex_status ucx_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                   uint64_t offset, const void *src, uint64_t bytes);
wex_status ucx_flush(wex_transport_ctx *ctx);
/* "am" or "put": the path ucx_peer_attach chose for p's endpoint. */
const char *ucx_peer_path(wex_transport_ctx *ctx, const wex_transport_peer *p);

/* ---- ucx_am.c ------------------------------------------------------ */

/* Registers the context's message handlers (a source's for answers, a
 * destination's for data and flushes). */
wex_status ucx_am_handlers(wex_transport_ctx *ctx);
/* Decides, once its endpoint exists, whether c sends messages or puts. */
void ucx_am_choose(wex_transport_ctx *ctx, ucx_conn *c);
wex_status ucx_am_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                      uint64_t offset, const void *src, uint64_t bytes);
/* Asks c's destination to answer once every byte sent so far is placed. */
void ucx_am_flush_start(ucx_conn *c);
void ucx_am_sources_free(wex_transport_ctx *ctx);
/* Destination, with ctx->lock held: rendezvous receives in flight; and
 * closing, by force, the endpoints they come on (the receives then fail
 * and place nothing more), returning how many endpoints it closed. */
uint64_t ucx_am_receiving(const wex_transport_ctx *ctx);
unsigned ucx_am_cut_receiving(wex_transport_ctx *ctx);

/* ---- ucx_fence.c --------------------------------------------------- */

/* The transport's fence op (ABI 1.4). */
wex_status ucx_fence(wex_transport_ctx *ctx, wex_transport_fence *f);

#endif /* WEX_UCX_INTERNAL_H */
