/*
 * A running job on one rank (the wex_job of wex.h): the plan, this
 * rank's operations, its local tensors and their memory, the transport
 * and the rendezvous.
 *
 * The job's code lies in the folders beside this header, each using only
 * those before it: device (device memory, digests), convert (converting
 * operations), move (the executor, the landing board, the staging
 * window), connect (meeting the other ranks, failover), step (a step and
 * its fence), api (<wex/wex.h>).
 */
#ifndef WEX_HOST_JOB_H
#define WEX_HOST_JOB_H

#include <pthread.h>

#include <wex/wex.h>
#include "digest_update.h"

#include "delta.h"
#include "planner.h"
#include "store.h"

/* What one of a source's attachments is: a destination rank's tensor,
 * as that rank's `incarnation` (its connects, counted) published it. */
typedef struct wex__attachment {
    uint64_t rank, tensor;
    int64_t incarnation;
    uint32_t pass, passes; /* the tensor's pass, and the rank's passes
                              (window.h) */
    uint64_t bytes;        /* a delta inbox's size (delta_move.h); else 0 */
} wex__attachment;

/* What a destination publishes before each memory key: its incarnation,
 * the tensor's pass and how many passes it has (window.h). */
#define WEX__MEM_HEADER 16u

typedef struct wex__binding {
    void *address;
    uint64_t bytes;
    wex_transport_mem *mem; /* registered or allocated by the transport */
    int owned;              /* wex allocated it (free on close) */
    /* A destination's CUDA tensor fed by a host-memory transport: the
     * pinned host copy the transport writes, copied to the device once
     * the step's bytes have landed and checked (job_sync.c): a place in
     * the staging window, or a copy of its own (window.h). */
    void *shadow;
    int own_shadow; /* the copy is its own, not in the window */
    uint32_t pass;  /* the pass it is received in */
} wex__binding;

/* The transport plugin and its context for this job: opened by
 * wex_job_open (api/job_api.c), destroyed by wex_job_close. */
typedef struct wex__job_transport {
    wex__plugin *plugin;
    const wex_transport_ops *ops;
    wex_transport_ctx *ctx;
    wex_options options;
} wex__job_transport;

/* Where the ranks meet: the rendezvous, and what every rank agreed on
 * there (connect/job_connect.c). */
typedef struct wex__job_rendezvous {
    wex__store_client *store;
    char *address, *token, *job_id;
    uint64_t layout_digest;
    int connected;
} wex__job_rendezvous;

/* Who takes part in a step (connect/job_members.c). */
typedef struct wex__job_members {
    uint8_t *optional_sources; /* bit i: every region of source i has
                                  another holder, so a step may go on
                                  without it */
    uint64_t *dead;            /* the sources the ops plan around */
    uint64_t dead_count;
    uint64_t earlier_steps[2]; /* the steps of the last two wex_sync
                                  calls, older first (0: none) */
    /* Elastic destinations (connect/elastic_members.c): ranks a
     * replica (0: not elastic), the destination ranks this rank's ops
     * leave out (absent_count UINT64_MAX: none planned yet), and per
     * replica whether it took part in the last step this rank ran. */
    uint64_t replica_ranks;
    uint64_t *absent;
    uint64_t absent_count;
    uint8_t *took_part;
    uint8_t *here; /* ... and in this try */
    /* per replica, this try: 1 + the replica that seeds it, or 0 when
     * the sources fill it (step/elastic_seed.h) */
    uint64_t *seeded_by;
    /* The last step's replicas: there, committed, new since the step
     * before, gone since. */
    uint64_t replicas_present, replicas_committed, replicas_joined,
        replicas_left, replicas_seeded;
    /* Expert placements (connect/placement.c): per destination rank,
     * the digest of the placement its pieces follow (0: the job's
     * options; NULL until one changed); on a destination, the placement
     * it set for the next step (JSON text, NULL: none) and its digest;
     * destination ranks placed anew so far. */
    uint64_t *placed;
    char *placing;
    uint64_t placing_digest;
    uint64_t placements;
    /* whether the destination has routed experts to move: 1 yes, -1 no
     * (a job without them reads no placement at its steps), 0 not looked
     * at yet */
    int experts_move;
    /* the layouts changed since the ops were planned: the next fit plans
     * again, whoever takes part */
    int replan;
    /* Called once a try's barrier has passed, before this rank moves a
     * byte: where `wex run`'s fault injection kills a rank inside a
     * step, at a moment that cannot race the step's end. NULL: none. */
    void (*after_barrier)(struct wex_job *job, uint64_t step);
} wex__job_members;

/* One thread at a time (api/job_lock.c). */
typedef struct wex__job_lock {
    pthread_mutex_t busy;
    int ready, closing;
} wex__job_lock;

/* Per-job scratch, so a step allocates nothing (both sides). */
typedef struct wex__job_scratch {
    uint64_t *digests;      /* per op */
    uint64_t *pair_digests; /* one peer's ops, as posted */
    wex__digest *hash;
    /* the landing board's view of the ops by peer (move/landing.c) */
    size_t *peer_first, *peer_ops; /* ops of peers[p]: peer_ops[
                                      peer_first[p] .. peer_first[p+1]) */
    uint64_t *landed;              /* per peer: told / digested */
} wex__job_scratch;

/* Delta steps (move/delta_source.c, move/delta_dest.c): what a source
 * posts for each of its operations into a destination, in op order. */
typedef struct wex__delta_record {
    uint64_t mode;           /* WEX__DELTA_OP_* */
    uint64_t offset, length; /* PAYLOAD: where in the inbox */
    uint64_t payload_digest; /* PAYLOAD: of the payload's bytes */
    uint64_t digest;         /* of the operation's bytes (as today's) */
} wex__delta_record;
#define WEX__DELTA_OP_FULL 0u    /* written whole into the live tensor */
#define WEX__DELTA_OP_PAYLOAD 1u /* a delta in the inbox, applied at commit */

/* A source's operations that read the same bytes (the same box of the
 * same local tensor, for replicas of a destination) share a snapshot,
 * are encoded once a step and send the same payload to each. */
typedef struct wex__delta_group {
    size_t first_op; /* the op whose runs it is read through */
    wex__op read;    /* ... as it was: a new plan's groups meet
                                  the old by it (delta_source.c) */
    int fresh; /* its snapshot does not hold snap_step: its ops go whole */
    uint64_t snap_off, bytes;  /* its snapshot in the source's snapshots */
    uint64_t out_off, out_cap; /* its payload's room in the outbox */
    int64_t payload_len;       /* this step's; -1: the ops go whole */
    int made;                  /* QUANTIZE: encoded when first made */
    uint64_t payload_digest, digest;
    uint64_t changed, elems;
    uint64_t dev_off; /* over nccl: its payload's place in dev_outbox */
} wex__delta_group;

/* A source's delta state. */
typedef struct wex__job_source_delta {
    uint32_t *group_of; /* per op; UINT32_MAX: never a delta */
    wex__delta_group *groups;
    size_t group_count;
    uint8_t *snapshots; /* the bytes last sent, per group */
    uint64_t snapshot_bytes;
    /* a CUDA source's, where it encodes on the device: device memory in
     * the same layout (its host groups' parts unused) */
    uint8_t *dev_snapshots;
    uint8_t *outbox; /* this step's payloads, per group */
    uint64_t outbox_bytes;
    wex_transport_mem *outbox_mem;
    /* per worker of a step's encoding (worker 0's serve the device and
     * quantized groups too), and the digest states of workers 1, 2, ... */
    wex__delta_enc *encs;
    struct wex__digest **hashes;
    unsigned workers;
    int verify;                        /* this try digests what it sends */
    uint64_t snap_step;                /* the committed step the snapshots hold
                                  (0: none: every destination whole) */
    wex_transport_peer **inbox;        /* per peer: its inbox for this source */
    uint64_t *inbox_size, *inbox_used; /* per peer */
    uint8_t *peer_delta;               /* per peer: takes deltas this try */
    wex__delta_record *records;        /* per op, this try's */
    wex__delta_record *pair_records;   /* one peer's, as posted */
    uint64_t wire_bytes, changed, elems; /* this try's */
    uint64_t delta_ops;                  /* ... its ops sent as deltas */
    /* over a transport of matched sends and receives (nccl): the records
     * are decided before any send (matched), and the payloads sent from
     * device memory (delta_send.c) */
    int matched;
    /* over a transport of device memory only (nccl, cuda-ipc): the
     * records decided after the encoding, the payloads put from there */
    int decided;
    uint8_t *dev_outbox;
    uint64_t dev_outbox_bytes;
} wex__job_source_delta;

/* A destination's: an inbox per source peer, and what it applies at
 * commit. */
typedef struct wex__job_destination_delta {
    /* an inbox per source peer it had when it connected */
    uint64_t *inbox_rank; /* the source rank each is for */
    uint8_t **inbox;      /* host memory: where the check and apply read */
    wex_transport_mem **inbox_mem;
    uint64_t *inbox_size;
    size_t inbox_count;
    /* over nccl, per inbox: the device memory the transport receives in
     * (copied into inbox[] once received) */
    uint8_t **inbox_dev;
    /* over nccl, per op: the record its source posted before sending */
    wex__delta_record *layout;
    size_t *apply;           /* ops to apply at commit, this try's */
    uint64_t (*apply_at)[3]; /* per entry: inbox, offset, length */
    size_t apply_count;
    /* this check's operations in host memory, digested together; per
     * thread of it, a chunk's scratch, and the digest states of threads
     * 1, 2, ... (the first uses the step's) */
    struct wex__delta_pending *pending;
    uint8_t *check_chunks;
    struct wex__digest **check_hashes;
    uint8_t *landed;  /* per tensor: written this try (CUDA: to copy) */
    uint8_t *whole;   /* per op: came whole this try (a pass's sources say
                         which as it drains, the records the rest) */
    int live_written; /* a try wrote a full op into live memory */
    uint64_t wire_bytes, changed, elems; /* this try's */
    uint64_t delta_ops;                  /* ... its ops received as deltas */
    double apply_seconds;
    int whole_copies; /* no kernels: CUDA tensors copied whole at commit */
    unsigned threads; /* the apply's (wex__delta_threads, once a plan) */
} wex__job_destination_delta;

/* What only a source holds. */
typedef struct wex__job_source {
    /* the destination buffers it writes into (connect/job_members.c) */
    wex_transport_peer **op_peer;  /* per op: the attached buffer */
    wex_transport_peer **attached; /* distinct attachments */
    size_t attached_count;
    wex__attachment *attached_what; /* what attached[i] is */
    int64_t joins_seen;             /* "joins" when last looked at */
    /* short strided runs packed into one put over a network transport
     * (move/executor.c), and the puts of the last try */
    unsigned char *pack;
    wex_transport_mem *pack_mem; /* its registration, if any */
    uint64_t pack_bytes, pack_used;
    uint64_t puts;
    wex_transport_peer **board_peer; /* per peer: its landing board */
    uint32_t *op_pass;     /* per op: its tensor's pass (move/window.h) */
    uint32_t *peer_passes; /* per peer: its passes */
    /* what converting operations need (convert/transforms.c) */
    struct wex__quant_state *quant;
    /* the checkpoint it is bound to (api/job_checkpoint.c) */
    struct wex__checkpoint *checkpoint;
    wex__job_source_delta delta;
} wex__job_source;

/* What only a destination holds. */
typedef struct wex__job_destination {
    uint64_t committed;
    /* A failed step may have written part of its tensors: they hold a
     * mix of steps until the next commit (wex_job_dirty). */
    int dirty;
    int fence_told; /* that the transport cannot fence (step/fence.c) */
    /* 1 + the source rank whose part of this try never came: it died,
     * or stalled past the step's timeout (a try stops checking at its
     * first failure, so one at most); the others are given the time to
     * finish before the try is closed */
    uint64_t silent_peer;
    /* the landing board (move/landing.c): sources tell it, in the word
     * they own, how many of their ops have landed; it digests those
     * while they are in cache */
    uint8_t *early; /* per op: digested early, into scratch.digests */
    void *board;
    wex_transport_mem *board_mem;
    /* the staging window of its CUDA tensors (move/window.h) */
    void *window; /* pinned, device_staging_bytes */
    uint64_t window_used;
    uint32_t passes;      /* passes so far (0: none) */
    uint32_t window_pass; /* the pass the window fills */
    wex__job_destination_delta delta;
    /* where it writes from when it seeds a replica that is behind
     * (step/elastic_seed.h); NULL until it first does */
    wex_transport_ctx *seed_ctx;
    int seeded; /* the last step's last try: a replica filled it */
} wex__job_destination;

struct wex_job {
    wex__registry *registry;
    wex__planner plan;
    uint32_t side;
    uint64_t rank;
    const wex__side *mine, *theirs;
    const wex__rank_layout *layout; /* this rank's */
    wex__binding *bind;             /* one per local tensor */
    uint32_t *memory_kind;          /* per local tensor, WEX_MEMORY_* */
    wex__op *ops;                   /* this rank's, in execution order */
    size_t op_count;
    uint64_t *peers; /* other-side ranks in the ops, ascending */
    size_t peer_count;
    uint32_t *op_peer_index; /* per op: its other-side rank in `peers` */
    wex__job_transport transport;
    wex__job_rendezvous rendezvous;
    wex__job_members members;
    wex__job_lock lock;
    wex__job_scratch scratch;
    wex__job_source src;        /* zero on a destination */
    wex__job_destination dst;   /* zero on a source */
    struct wex__device *device; /* CUDA runtime; NULL until CUDA memory */
    /* the saves made, which name each save's rendezvous keys
     * (api/job_checkpoint.c) */
    uint64_t saves;
};

/* job_plan.c: a job opened from its plan share lays out every rank
 * (failover, checkpoints); a no-op otherwise. */
wex_status wex__job_complete_plan(wex_job *job);
/* job_checkpoint.c: unmaps the checkpoint a source was bound to. */
void wex__job_checkpoint_close(wex_job *job);
/* job_connect.c */
wex_status wex__job_connect(wex_job *job);
/* job_connect.c: closes the rendezvous and forgets its address. */
void wex__job_rendezvous_fini(wex_job *job);
/* job_connect.c: a destination publishes a memory key for every local
 * tensor (and its landing board) under a new incarnation, which sources
 * follow at their next try (wex__job_follow_rejoins). */
wex_status wex__job_publish_memory(wex_job *job);
/* fence.c: the epoch of try `number` of `step` (never 0); a destination
 * opens its memory to it before the try's barrier and closes it after
 * (`abandoned`: the try did not commit; a writer still inside it gets
 * `grace_s` to leave before it is stopped), republishing its keys when the
 * transport revoked them; a source names it before its first put. No-ops
 * where the transport cannot fence, which the first open says. */
uint64_t wex__fence_epoch(uint64_t step, uint64_t number);
wex_status wex__fence_open(wex_job *job, uint64_t epoch);
wex_status wex__fence_close(wex_job *job, int abandoned, double grace_s);
wex_status wex__fence_write(wex_job *job, uint64_t epoch);
/* ... through another context of the job's transport (a seeder's). */
wex_status wex__fence_write_through(wex_job *job, wex_transport_ctx *ctx,
                                    uint64_t epoch);
/* fence.c: closes a destination to try `number` of `step` (abandoned:
 * it did not commit); when sources wrote it (its barrier passed, and a
 * replica did not seed it) they are first given `timeout` to say they
 * are done. A writer the transport could not stop is told in `why`,
 * after what is there (the destination stays dirty, and the transport
 * refuses to open again while that writer lives). */
void wex__fence_close_try(wex_job *job, uint64_t step, uint64_t number,
                          double timeout, int abandoned, int sources_wrote,
                          char *why, size_t cap);
/* job_lock.c: a public call that changes the job runs between enter and
 * leave; enter fails at once while another thread is inside. */
void wex__job_lock_init(wex_job *job);
wex_status wex__job_enter(wex_job *job, const char *call);
void wex__job_leave(wex_job *job);
/* Waits for a running call, then no call enters again. */
void wex__job_lock_close(wex_job *job);
/* job_members.c: which sources are replicated (at connect) */
wex_status wex__job_find_replicas(wex_job *job);
/* job_members.c: frees who takes part; the operations and what is
 * sized by them (peers, scratch, a source's per-op attachments); and, on
 * a source, detaches every destination buffer it attached. */
void wex__job_members_fini(wex_job *job);
void wex__job_ops_free(wex_job *job);
void wex__job_detach_all(wex_job *job);
/* job_members.c: takes a builder's operations as this rank's (the job
 * keeps the array), and sizes what depends on them. */
wex_status wex__job_take_ops(wex_job *job, wex_plan_builder *b,
                             const uint64_t *dead, uint64_t dead_count);
/* job_members.c: sources attach every destination buffer their ops
 * write into and have not attached yet. */
wex_status wex__job_attach(wex_job *job, double timeout);
/* job_members.c: sources drop attachments of destinations that have
 * rejoined since, and attach their new memory. */
wex_status wex__job_follow_rejoins(wex_job *job, double timeout);
/* job_members.c: re-plans this rank's operations around `dead` sources
 * (ascending), and on a source without the destination ranks `absent`
 * (ascending: elastic replicas left out of the step), unless they are
 * the ones already planned around. */
wex_status wex__job_fit(wex_job *job, const uint64_t *dead, uint64_t dead_count,
                        const uint64_t *absent, uint64_t absent_count,
                        double timeout);
/* placement.c: a destination's new expert placement (layers x physical
 * logical experts, row-major), checked by the engine, followed from the
 * next step on. */
wex_status wex__placement_set(wex_job *job, uint64_t layers, uint64_t physical,
                              const int32_t *map);
/* placement.c: before a try's barrier, a destination with a new
 * placement posts it under the try's keys `try_prefix`. */
wex_status wex__placement_post(wex_job *job, const char *try_prefix);
/* placement.c: after the barrier, every rank lays out again the
 * destination ranks whose placement changed, and plans again at the
 * fit that follows. */
wex_status wex__placement_follow(wex_job *job, const char *try_prefix,
                                 double timeout);
/* elastic_members.c: at connect, the job's replica shape (members'
 * replica_ranks; nothing planned yet for an elastic source). */
wex_status wex__elastic_setup(wex_job *job);
/* elastic_members.c: whether `rank` is among the `n` ranks `absent`
 * (ascending: a step's destination ranks left out). */
int wex__elastic_is_absent(const uint64_t *absent, uint64_t n, uint64_t rank);
/* elastic_members.c: drops the builder's operations into the ranks
 * `absent` (ascending). */
void wex__elastic_drop_absent(wex_plan_builder *b, const uint64_t *absent,
                              uint64_t absent_count);
/* transport_exchange.c: the transport's connect (ABI 1.3), when it has
 * one, with the job's rendezvous lent as its exchange; fetches wait up
 * to `timeout` seconds. */
wex_status wex__transport_connect(wex_job *job, double timeout);
/* job_sync.c */
/* Steps are in [1, WEX__STEP_LIMIT): 2^63, what every language's signed
 * 64-bit integer holds. */
#define WEX__STEP_LIMIT (UINT64_C(1) << 63)
wex_status wex__job_sync(wex_job *job, uint64_t step, wex_sync_report *r);
/* sync_report.c: what a wex_sync did, as the caller's report says it (up
 * to its struct_size): try `number` of `step` begun at `started`, `ok`
 * when it committed, `missed` when it began without this rank. */
void wex__sync_report_fill(const wex_job *job, wex_sync_report *r,
                           uint64_t step, uint64_t number, double started,
                           int missed, int ok, int elastic_passed);
/* executor.c: sources write every op (and digest it when `digests`,
 * telling each destination's landing board under `landing_tag`), pass by
 * pass (window.h), under the try's keys `try_prefix` ("step/S/T/");
 * destinations digest what landed, op by op. */
wex_status wex__execute_ops(wex_job *job, uint64_t *digests,
                            uint32_t landing_tag, const char *try_prefix,
                            double timeout);
/* op_runs.c: the digest of what landed of op `op` (destinations). */
uint64_t wex__digest_landed(wex_job *job, const wex__op *op);
/* executor.c: sizes the staging a source packs runs into, from its ops
 * and the job's staging_bytes (none where nothing packs). */
wex_status wex__pack_prepare(wex_job *job);
void wex__pack_free(wex_job *job);
/* executor.c: destinations of a two-sided transport post a recv for
 * every run of every op, in plan order, and wait for them (a no-op for
 * one-sided transports and sources). */
wex_status wex__post_receives(wex_job *job);
/* A destination's receives of op i, as its source puts it: a copy's runs,
 * a converting operation's rows. */
wex_status wex__recv_op(wex_job *job, size_t i);

#endif /* WEX_HOST_JOB_H */
