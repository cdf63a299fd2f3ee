/*
 * The engine-facing API: what a trainer or an inference rank calls to
 * take part in weight syncs. Link against libwex (pkg-config wex).
 *
 *   wex_job *job;
 *   wex_job_open("job.json", WEX_SIDE_DESTINATION, rank, NULL, &job);
 *   for (i = 0; i < wex_job_tensor_count(job); i++)
 *       wex_job_alloc(job, i, &weights[i]);   // or wex_job_bind(...)
 *   wex_job_connect(job);                      // once; optional
 *   for (step = 1;; step++)
 *       wex_sync(job, step, &report);          // every rank, both sides
 *   wex_job_close(job);
 *
 * Every call returns a wex_status; wex_last_error() says why in one
 * line. A job is used by one thread at a time: a call made while another
 * thread is inside one on the same job fails at once (WEX_ERR_INVALID),
 * and wex_job_close waits for a running call to return (no call may
 * start after it). Different jobs may be used from different threads.
 */
#ifndef WEX_WEX_H
#define WEX_WEX_H

#include <wex/host.h>
#include <wex/transport.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wex_job wex_job;

typedef struct wex_job_options {
    uint32_t struct_size;
    uint32_t reserved0;
    /* Override the job's rendezvous address and token ("HOST:PORT");
     * NULL keeps the config's (or $WEX_RENDEZVOUS / $WEX_TOKEN). */
    const char *rendezvous;
    const char *token;
    /* Identifies one running job to every rank (for transports' private
     * endpoints); NULL derives it from the rendezvous address. */
    const char *job_id;
} wex_job_options;
#define WEX_JOB_OPTIONS_SIZE_1_0 WEX_SIZE_THROUGH(wex_job_options, job_id)

/* One local tensor of this rank, as its engine holds it. */
typedef struct wex_tensor {
    uint32_t struct_size;
    uint32_t dtype; /* WEX_DTYPE_* */
    uint32_t ndim;
    uint32_t reserved0;
    const char *name;
    const uint64_t *shape;
    uint64_t bytes;
} wex_tensor;
#define WEX_TENSOR_SIZE_1_0 WEX_SIZE_THROUGH(wex_tensor, bytes)

typedef struct wex_sync_report {
    uint32_t struct_size;
    int32_t verified; /* 1 digests matched, 0 not checked (verify none) */
    uint64_t step;
    uint64_t committed_step; /* this rank's after the call (destinations) */
    uint64_t operations;     /* this rank's */
    uint64_t bytes;          /* sent (source) or received (destination) */
    uint64_t peers;
    double seconds;    /* from the step's start barrier to commit */
    uint32_t attempts; /* tries the step took: 1 unless a rank died */
    /* 1 when the step failed because it had begun without this rank (it
     * rejoined while the step ran, or replayed it): nothing was written,
     * and the rank takes part from a later step. The slot was reserved
     * (always 0) before, so an older library reads as "not missed". */
    uint32_t missed;
    uint64_t failed_over; /* dead source ranks the step went without */
    /* ABI 1.2. Sources: the transport puts of the step's last try (short
     * strided runs packed into one put count once); 0 on a destination. */
    uint64_t puts;
    /* ABI 1.5, delta steps (docs/design.md). The bytes that crossed the
     * wire for this rank in the step's last try: payloads of deltas and
     * whole operations (`bytes` stays what the operations cover). */
    uint64_t wire_bytes;
    /* Elements of the operations sent (source) or received (destination)
     * as deltas, and how many of them changed; both 0 without deltas. */
    uint64_t delta_elements;
    uint64_t changed_elements;
    uint32_t mode; /* WEX_SYNC_FULL, _DELTA or _MIXED */
    uint32_t reserved0;
    /* Destinations: the time the commit spent writing deltas into the
     * live tensors, the one moment they change in a delta step. */
    double apply_seconds;
    /* ABI 1.6, elastic destination replicas (docs/design.md, "Elastic
     * replicas"), as of the step's last try: the replicas that took part,
     * those that committed, those taking part that had not in this
     * rank's previous step, and those that had and no longer do. All 0
     * in a job without elastic replicas, or a try that did not pass its
     * barrier. */
    uint64_t replicas;
    uint64_t replicas_committed;
    uint64_t replicas_joined;
    uint64_t replicas_left;
    /* Of the replicas that took part, those filled by another replica
     * ("seed": "replicas"), which commit after the sources' step and so
     * are not in a source's replicas_committed; on a destination rank
     * so filled, the bytes copied in (its `bytes`; its wire_bytes, from
     * the sources, 0). */
    uint64_t replicas_seeded;
    uint64_t seeded_bytes;
} wex_sync_report;
#define WEX_SYNC_REPORT_SIZE_1_0 WEX_SIZE_THROUGH(wex_sync_report, failed_over)
#define WEX_SYNC_REPORT_SIZE_1_2 WEX_SIZE_THROUGH(wex_sync_report, puts)
#define WEX_SYNC_REPORT_SIZE_1_5                                               \
    WEX_SIZE_THROUGH(wex_sync_report, apply_seconds)
#define WEX_SYNC_REPORT_SIZE_1_6 WEX_SIZE_THROUGH(wex_sync_report, seeded_bytes)

/* wex_sync_report.mode: every operation whole, every one a delta, or
 * some of each. */
#define WEX_SYNC_FULL 0u
#define WEX_SYNC_DELTA 1u
#define WEX_SYNC_MIXED 2u

/* `config` is a job file's path, or the job's JSON text itself when it
 * starts with '{' (paths inside are then relative to the working
 * directory). `side` is WEX_SIDE_SOURCE or WEX_SIDE_DESTINATION. Lays
 * out both sides and plans this rank's operations. */
WEX_EXPORT wex_status wex_job_open(const char *config, uint32_t side,
                                   uint64_t rank,
                                   const wex_job_options *options,
                                   wex_job **job_p);
WEX_EXPORT void wex_job_close(wex_job *job);

WEX_EXPORT uint64_t wex_job_tensor_count(const wex_job *job);
WEX_EXPORT wex_status wex_job_tensor(const wex_job *job, uint64_t index,
                                     wex_tensor *tensor);

/* Binds local tensor `index` to the application's memory (`bytes` must
 * be the tensor's size; an empty tensor, 0 bytes, binds at any address,
 * NULL included), or lets wex allocate it in memory peers can write into
 * directly (freed by wex_job_close). Every tensor must be bound or
 * allocated before wex_job_connect. */
WEX_EXPORT wex_status wex_job_bind(wex_job *job, uint64_t index, void *address,
                                   uint64_t bytes);
WEX_EXPORT wex_status wex_job_alloc(wex_job *job, uint64_t index,
                                    void **address_p);

/* The same for any memory kind (WEX_MEMORY_HOST, WEX_MEMORY_CUDA of
 * <wex/transport.h>); wex_job_bind and wex_job_alloc are the host kind.
 * CUDA memory is a device pointer of the calling thread's current device
 * (wex_job_alloc_memory allocates it there with cudaMalloc, zeroed). A
 * kind the job's transport cannot move is refused (WEX_ERR_UNSUPPORTED),
 * except that a source's CUDA tensors reach a host-memory transport
 * through pinned staging. */
WEX_EXPORT wex_status wex_job_bind_memory(wex_job *job, uint64_t index,
                                          void *address, uint64_t bytes,
                                          uint32_t memory_kind);
WEX_EXPORT wex_status wex_job_alloc_memory(wex_job *job, uint64_t index,
                                           uint32_t memory_kind,
                                           void **address_p);

/* Binds every local tensor of this source rank to checkpoint directory
 * `dir` (model.safetensors.index.json and its shards, or one
 * model.safetensors), mapped read-only: the page cache is the source
 * memory. The rank must hold whole checkpoint tensors in the checkpoint's
 * dtypes (engine hf, the default dtype); the checkpoint must hold every
 * tensor of the model with the catalog's dtype and shape, else one line
 * names the file, the tensor, what was expected and what was found.
 * Tensors the model does not have are skipped. Unmapped by
 * wex_job_close. */
WEX_EXPORT wex_status wex_job_bind_checkpoint(wex_job *job, const char *dir);

/* Saves what this side holds as a Hugging Face checkpoint in `dir`, which
 * must not exist or be empty: canonical names and dtypes, shards of at
 * most `shard_bytes` (0: one model.safetensors) with an index, metadata
 * {"format": "pt"}. Every rank of the side calls it (after connecting,
 * when the side has several); each writes the regions it holds and no
 * lower rank does, into files renamed into place only when every rank's
 * bytes are written, so a failed save leaves no checkpoint behind. */
WEX_EXPORT wex_status wex_job_save(wex_job *job, const char *dir,
                                   uint64_t shard_bytes);

/* Meets every other rank: checks both sides agree on the layouts,
 * registers memory, exchanges keys, attaches peers. wex_sync calls it
 * if the application did not. */
WEX_EXPORT wex_status wex_job_connect(wex_job *job);

/* One step, on every rank of both sides: sources write their operations
 * into the destinations' memory; a destination commits `step` only when
 * every operation landed (and, with verify "digest", matched). On error
 * nothing is committed and the message names the peers at fault. */
WEX_EXPORT wex_status wex_sync(wex_job *job, uint64_t step,
                               wex_sync_report *report);
/* ABI 1.6. A destination rank that starts (new, or after a crash) while
 * the sources are stepping: connects, waits for the next step that takes
 * it (with elastic replicas, one its whole replica arrived at), receives
 * that step in full, commits it, and says which step in *step_p. Gives
 * up after the job's timeouts.join_seconds, naming why the last step
 * went on without it. Afterwards it syncs the steps that follow with
 * wex_sync. `report` (may be NULL) is the joined step's. */
WEX_EXPORT wex_status wex_job_join(wex_job *job, uint64_t *step_p,
                                   wex_sync_report *report);
/* ABI 1.6. Takes this destination rank out of the job between steps: it
 * says goodbye to the rendezvous, so the next step's barrier leaves its
 * replica out without failing anyone (an elastic job's sources go on
 * with the replicas there). Its tensors keep the committed step; a later
 * wex_job_join brings it back. wex_job_close does the same. */
WEX_EXPORT wex_status wex_job_leave(wex_job *job);
/* ABI 1.6. A destination rank whose engine moved its experts (EPLB's
 * rearrangement, with the vllm or sglang engine's redundant_experts):
 * `map` holds, for each of the `layers` MoE layers in layer order, the
 * logical expert each of its `physical` slots holds (row-major: the
 * engine's physical_to_logical_map). The engine's adapter checks it as
 * it checks options/expert_placement (one line naming the layer and the
 * slot; nothing changes on error). From the next step on every rank of
 * the job follows it: this rank's slots are laid out under it, the
 * operations into it planned again, and that step sends its slots whole.
 * Each rank of an engine instance hands in the same map. */
WEX_EXPORT wex_status wex_job_set_placement(wex_job *job, uint64_t layers,
                                            uint64_t physical,
                                            const int32_t *map);
/* The last step this destination rank committed (0: none yet). */
WEX_EXPORT uint64_t wex_job_committed_step(const wex_job *job);
/* 1 when a step this destination took part in failed after sources
 * began writing: its tensors may hold a mix of that step and the
 * committed one, until the next committed step clears it (0 on a
 * source). An engine should not serve a dirty rank's weights, and
 * wex_job_save refuses it. */
WEX_EXPORT int wex_job_dirty(const wex_job *job);
/* How this source rank's bytes reach destination rank `destination_rank`
 * once connected: the transport's name for the way (ucx: "am", active
 * messages, or "put", one-sided puts), or the transport's own name when it
 * has one way. NULL on a destination, before wex_job_connect, or when this
 * rank sends nothing to that rank. Valid until the job closes. */
WEX_EXPORT const char *wex_job_peer_path(const wex_job *job,
                                         uint64_t destination_rank);

/* This thread's last error, one line ("" when none). */
WEX_EXPORT const char *wex_last_error(void);

/* libwex's own version, "MAJOR.MINOR.PATCH" (not the ABI's). */
WEX_EXPORT const char *wex_version(void);

/* ---- a rendezvous served in this process ---------------------------- */

/* What `wex store` runs: the key-value store every rank of a job meets
 * at. An orchestrator (or one rank) serves it and hands its address to
 * every rank (wex_job_options.rendezvous). */
typedef struct wex_store wex_store;

/* Serves a rendezvous on threads of its own at `listen` ("HOST:PORT";
 * port 0 picks a free one, an empty HOST is loopback; NULL is
 * "127.0.0.1:0") for clients that present `token`, until
 * wex_store_close. */
WEX_EXPORT wex_status wex_store_open(const char *listen, const char *token,
                                     wex_store **store_p);
/* "HOST:PORT" it listens on; valid until wex_store_close. */
WEX_EXPORT const char *wex_store_address(const wex_store *store);
/* Stops serving (clients still connected see it go) and frees. */
WEX_EXPORT void wex_store_close(wex_store *store);

/* ---- documents ------------------------------------------------------- */

/* How `engine` lays out the model of `model_config` (a config.json path)
 * with `parallel` and `options` (JSON objects as text; NULL for none):
 * rank `rank`, or every rank when rank is -1, as the document of
 * schemas/layout.schema.json (what `wex layout --json` prints). *json_p
 * is NUL-terminated text; free it with wex_free. */
WEX_EXPORT wex_status wex_layout_json(const char *model_config,
                                      const char *engine, const char *parallel,
                                      const char *options, int64_t rank,
                                      char **json_p);
/* What the plan of job `config` (a path or the JSON text, as
 * wex_job_open takes) adds up to: the whole plan when rank is -1, else
 * the operations of rank `rank` of `side`, as the document of
 * schemas/plan.schema.json (what `wex plan --json` prints). The job's
 * transport need not be installed. Free *json_p with wex_free. */
WEX_EXPORT wex_status wex_plan_json(const char *config, uint32_t side,
                                    int64_t rank, char **json_p);
/* Frees what a wex_*_json call returned; NULL is a no-op. */
WEX_EXPORT void wex_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* WEX_WEX_H */
