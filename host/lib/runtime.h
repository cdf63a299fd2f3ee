/*
 * A running job on one rank (the wex_job of wex.h): the plan, this
 * rank's operations, its local tensors and their memory, the transport
 * and the rendezvous.
 */
#ifndef WEX_HOST_RUNTIME_H
#define WEX_HOST_RUNTIME_H

#include <wex/wex.h>
#include <xxhash.h>

#include "planner.h"
#include "store.h"

typedef struct wex__binding {
    void *address;
    uint64_t bytes;
    wex_transport_mem *mem; /* registered or allocated by the transport */
    int owned;              /* wex allocated it (free on close) */
} wex__binding;

struct wex_job {
    wex__registry *registry;
    wex__planner plan;
    uint32_t side;
    uint64_t rank;
    const wex__side *mine, *theirs;
    const wex__rank_layout *layout; /* this rank's */
    wex__binding *bind;             /* one per local tensor */
    wex__op *ops;                   /* this rank's, in execution order */
    size_t op_count;
    uint64_t *peers; /* other-side ranks in the ops, ascending */
    size_t peer_count;
    /* transport */
    wex__plugin *transport;
    const wex_transport_ops *tops;
    wex_transport_ctx *tctx;
    wex_options transport_options;
    wex_transport_peer **op_peer; /* sources: the attached buffer per op */
    wex_transport_peer **attached; /* sources: distinct attachments */
    size_t attached_count;
    /* rendezvous */
    wex__store_client *store;
    char *address, *token, *job_id;
    uint64_t layout_digest;
    int connected;
    uint64_t committed;
    /* Per-job scratch, so a step allocates nothing: */
    uint64_t *digests;      /* per op */
    uint64_t *pair_digests; /* one peer's ops, as posted */
    XXH3_state_t *hash;
};

/* job_connect.c */
wex_status wex__job_connect(wex_job *job);
/* job_sync.c */
wex_status wex__job_sync(wex_job *job, uint64_t step, wex_sync_report *r);
/* executor.c: sources write every op (and digest it when `digests`);
 * destinations digest what landed, op by op. */
wex_status wex__execute_ops(wex_job *job, uint64_t *digests);
uint64_t wex__digest_landed(wex_job *job, const wex__op *op);

#endif /* WEX_HOST_RUNTIME_H */
