/* wex.h: opening a job on one rank, its tensors and their memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi_copy.h"
#include "device_memory.h"
#include "error.h"
#include "host_registry.h"
#include "delta_move.h"
#include "elastic_seed.h"
#include "landing.h"
#include "log.h"
#include "plan_share.h"
#include "job.h"
#include "transforms.h"
#include "window.h"

static char *env_or(const char *given, const char *name, const char *fallback)
{
    const char *v = given;

    if (v == NULL)
        v = secure_getenv(name);
    if (v == NULL)
        v = fallback;
    return v ? strdup(v) : NULL;
}

static const char *json_string(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static wex_status open_transport(wex_job *job)
{
    wex__plugin_ref *ref = &job->plan.job->transport;
    wex_transport_args args;
    wex_status st;

    job->transport.plugin = ref->plugin;
    st = wex__plugin_load(job->registry, job->transport.plugin);
    if (st != WEX_OK)
        return st;
    job->transport.ops = &job->transport.plugin->ops.transport;
    job->transport.options = wex__options_view(ref->options);
    memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    args.side = job->side;
    args.rank = job->rank;
    args.source_ranks = job->plan.src.ranks;
    args.destination_ranks = job->plan.dst.ranks;
    args.options = &job->transport.options;
    args.job_id = job->rendezvous.job_id;
    args.peer_ranks = job->peers;
    args.peer_count = job->peer_count;
    wex__error_clear();
    st = job->transport.ops->ctx_create(job->transport.plugin->plugin_state,
                                        &args, &job->transport.ctx);
    if (st != WEX_OK) {
        if (wex__last_error()[0] == '\0')
            wex__error(st, "failed without a message");
        return wex__error_prefix(st, "transport %s", ref->name);
    }
    return WEX_OK;
}

/* This rank's operations with every source live, and its peers: those
 * its share held (`b`, when the planner was opened from it), else
 * planned here, and then written as its share when the job has a place
 * for shares. */
static wex_status plan_rank(wex_job *job, wex_plan_builder *b,
                            const char *shares)
{
    wex_status st = WEX_OK;

    if (!job->plan.from_share) {
        wex__plan_builder_init(b, &job->plan.src, &job->plan.dst);
        st = wex__planner_rank(&job->plan, job->side, job->rank, b);
        if (st == WEX_OK && shares != NULL &&
            wex__share_write(&job->plan, shares, job->side, job->rank, b->ops,
                             b->count, NULL) != WEX_OK)
            WEX__WARN("%s rank %llu: could not write its plan share: %s",
                      job->mine->what, (unsigned long long)job->rank,
                      wex__last_error());
    }
    if (st == WEX_OK)
        st = wex__job_take_ops(job, b, NULL, 0);
    wex__plan_builder_fini(b);
    return st;
}

static wex_status open_job(wex_job *job, const char *config,
                           const wex_job_options *given)
{
    wex_job_options full, *o = NULL;
    const cJSON *rdv;
    wex__job_config *cfg;
    wex_plan_builder b;
    const char *shares;
    wex_status st;

    if (given != NULL) {
        if (given->struct_size < WEX_JOB_OPTIONS_SIZE_1_0)
            return wex__error(WEX_ERR_ABI,
                              "wex_job_open: options "
                              "struct_size %u is smaller than ABI 1.0's %u",
                              given->struct_size, WEX_JOB_OPTIONS_SIZE_1_0);
        wex__abi_in(&full, sizeof(full), given);
        o = &full;
    }
    st = wex__registry_default(&job->registry);
    if (st == WEX_OK)
        st = wex__job_config_read(config, job->registry, 0, &cfg);
    if (st != WEX_OK)
        return st;
    rdv = cJSON_GetObjectItemCaseSensitive(cfg->doc, "rendezvous");
    job->rendezvous.address = env_or(o ? o->rendezvous : NULL, "WEX_RENDEZVOUS",
                                     json_string(rdv, "address"));
    job->rendezvous.token =
        env_or(o ? o->token : NULL, "WEX_TOKEN", json_string(rdv, "token"));
    job->rendezvous.job_id =
        env_or(o ? o->job_id : NULL, "WEX_JOB_ID", job->rendezvous.address);
    /* A share of this rank's plan spares it laying out every rank. */
    shares = secure_getenv("WEX_PLAN_SHARES");
    if (shares == NULL || shares[0] == '\0')
        shares = cfg->plan_shares;
    memset(&b, 0, sizeof(b));
    if (shares == NULL ||
        !wex__planner_open_share(&job->plan, job->registry, cfg, shares,
                                 job->side, job->rank, &b)) {
        st = wex__planner_open_job(&job->plan, job->registry, cfg);
        if (st != WEX_OK)
            return st;
    }
    if (job->rendezvous.token == NULL) {
        wex__plan_builder_fini(&b);
        return wex__error(WEX_ERR_INVALID,
                          "%s: /rendezvous/token: every rank needs the job's "
                          "token (the config, WEX_TOKEN or the options)",
                          job->plan.job->path);
    }
    job->mine = job->side == WEX_SIDE_SOURCE ? &job->plan.src : &job->plan.dst;
    job->theirs =
        job->side == WEX_SIDE_SOURCE ? &job->plan.dst : &job->plan.src;
    if (job->rank >= job->mine->ranks)
        return wex__error(WEX_ERR_INVALID,
                          "%s rank %llu: the %s engine has "
                          "ranks 0..%llu",
                          job->mine->what, (unsigned long long)job->rank,
                          job->mine->what,
                          (unsigned long long)(job->mine->ranks - 1));
    job->layout = &job->mine->layouts[job->rank];
    job->bind =
        calloc(job->layout->tensor_count ? job->layout->tensor_count : 1,
               sizeof(*job->bind));
    job->memory_kind =
        calloc(job->layout->tensor_count ? job->layout->tensor_count : 1,
               sizeof(*job->memory_kind));
    if (job->bind == NULL || job->memory_kind == NULL) {
        wex__plan_builder_fini(&b);
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    }
    st = plan_rank(job, &b, shares);
    if (st == WEX_OK)
        st = open_transport(job);
    if (st == WEX_OK) /* what packs depends on the transport's caps */
        st = wex__pack_prepare(job);
    return st;
}

wex_status wex_job_open(const char *config, uint32_t side, uint64_t rank,
                        const wex_job_options *options, wex_job **job_p)
{
    wex_job *job;
    wex_status st;

    if (config == NULL || job_p == NULL ||
        (side != WEX_SIDE_SOURCE && side != WEX_SIDE_DESTINATION))
        return wex__error(WEX_ERR_INVALID,
                          "wex_job_open: expected a config, "
                          "a side (source or destination) and a job pointer");
    job = calloc(1, sizeof(*job));
    if (job == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    job->side = side;
    job->rank = rank;
    wex__job_lock_init(job);
    st = open_job(job, config, options);
    if (st != WEX_OK) {
        char msg[WEX__ERROR_MAX];
        snprintf(msg, sizeof(msg), "%s", wex__last_error());
        wex_job_close(job);
        return wex__error(st, "%s", msg);
    }
    *job_p = job;
    return WEX_OK;
}

/* Gives every local tensor's memory back: the transport's registration,
 * and what wex allocated. */
static void release_bindings(wex_job *job)
{
    for (size_t i = 0; job->bind && i < job->layout->tensor_count; i++) {
        if (job->bind[i].mem != NULL)
            job->transport.ops->mem_deregister(job->transport.ctx,
                                               job->bind[i].mem);
        if (job->bind[i].owned && job->memory_kind[i] == WEX_MEMORY_CUDA)
            wex__device_free(job->device, job->bind[i].address);
        else if (job->bind[i].owned)
            free(job->bind[i].address);
    }
}

/* Each part goes with its owner's fini, in the order they lean on each
 * other: what the transport registered or attached before its context,
 * the context before the device runtime its memory may live in. */
void wex_job_close(wex_job *job)
{
    if (job == NULL)
        return;
    wex__job_lock_close(job);
    wex__delta_free(job); /* its inboxes and outbox, registered */
    wex__job_detach_all(job);
    release_bindings(job);
    wex__window_free(job);
    wex__pack_free(job);
    wex__landing_free(job);
    wex__seed_close(job); /* its peers are detached after each seed */
    if (job->transport.ctx != NULL)
        job->transport.ops->ctx_destroy(job->transport.ctx);
    wex__job_rendezvous_fini(job);
    wex__planner_close(&job->plan);
    wex__job_members_fini(job);
    wex__transforms_free(job); /* its arena may be pinned */
    wex__device_close(job->device);
    wex__job_checkpoint_close(job);
    wex__job_ops_free(job);
    free(job->memory_kind); /* last: the parts above read them */
    free(job->bind);
    free(job);
}

uint64_t wex_job_tensor_count(const wex_job *job)
{
    return job ? job->layout->tensor_count : 0;
}

wex_status wex_job_tensor(const wex_job *job, uint64_t index, wex_tensor *t)
{
    const wex__local_tensor *l;
    wex_tensor full;

    if (job == NULL || t == NULL || index >= job->layout->tensor_count)
        return wex__error(WEX_ERR_INVALID, "wex_job_tensor: no tensor %llu",
                          (unsigned long long)index);
    l = &job->layout->tensors[index];
    memset(&full, 0, sizeof(full));
    full.dtype = l->dtype;
    full.ndim = l->ndim;
    full.name = l->name;
    full.shape = l->shape;
    full.bytes = l->bytes;
    wex__abi_out(t, &full, sizeof(full));
    return WEX_OK;
}

static wex_status check_bindable(wex_job *job, uint64_t index)
{
    if (job == NULL || index >= job->layout->tensor_count)
        return wex__error(WEX_ERR_INVALID, "no local tensor %llu",
                          (unsigned long long)index);
    if (job->rendezvous.connected || job->bind[index].address != NULL)
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s is already bound "
                          "(binding is once per job, before connecting)",
                          job->layout->tensors[index].name);
    return WEX_OK;
}

/* Whether this rank can hand the transport memory of `kind`: CUDA memory
 * reaches a host-memory transport through pinned host memory (a source's
 * through staging, a destination's through a host copy of each tensor);
 * a two-sided transport must move it itself. */
static wex_status check_kind(wex_job *job, uint64_t index, uint32_t kind)
{
    const char *tensor = job->layout->tensors[index].name;
    const char *transport = job->plan.job->transport.name;
    uint64_t caps = job->transport.ops->caps;
    int host = (caps & WEX_TRANSPORT_CAP_HOST_MEMORY) != 0;
    int cuda = (caps & WEX_TRANSPORT_CAP_CUDA_MEMORY) != 0;
    wex_status st;

    if (kind != WEX_MEMORY_HOST && kind != WEX_MEMORY_CUDA)
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s: unknown memory "
                          "kind %u (WEX_MEMORY_HOST or WEX_MEMORY_CUDA)",
                          tensor, kind);
    if (kind == WEX_MEMORY_HOST && !host)
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "local tensor %s: transport %s "
                          "moves CUDA memory only: bind or allocate it as "
                          "WEX_MEMORY_CUDA",
                          tensor, transport);
    if (kind == WEX_MEMORY_CUDA && !cuda &&
        (!host || (caps & WEX_TRANSPORT_CAP_TWO_SIDED)))
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "local tensor %s: transport %s "
                          "cannot write into CUDA memory (use cuda-ipc or "
                          "nccl, or host memory)",
                          tensor, transport);
    if (kind == WEX_MEMORY_CUDA && job->side == WEX_SIDE_SOURCE &&
        wex__transforms_dequantize_from(job, index))
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "local tensor %s: the job "
                          "dequantizes its fp8 on the way, which wex does on "
                          "host memory only: bind it as WEX_MEMORY_HOST (on "
                          "the device, wex quantizes bf16, f16 and f32 into "
                          "fp8)",
                          tensor);
    if (kind == WEX_MEMORY_CUDA && job->device == NULL) {
        st = wex__device_open(&job->device);
        if (st != WEX_OK)
            return wex__error_prefix(st, "local tensor %s", tensor);
    }
    return WEX_OK;
}

/* A destination exposes tensor `index` at `address` to the transport:
 * itself, or for a CUDA tensor a host-memory transport cannot write, its
 * place in the pinned staging window (window.h), which the transport
 * writes instead. */
static wex_status expose(wex_job *job, uint64_t index, void *address,
                         uint64_t bytes, uint32_t kind)
{
    wex__binding *b = &job->bind[index];
    wex_status st;

    if (kind == WEX_MEMORY_CUDA &&
        !(job->transport.ops->caps & WEX_TRANSPORT_CAP_CUDA_MEMORY)) {
        st = wex__window_place(job, index, bytes, &address);
        if (st != WEX_OK)
            return st;
        kind = WEX_MEMORY_HOST;
    }
    wex__error_clear();
    return job->transport.ops->mem_register(job->transport.ctx, address, bytes,
                                            kind, &b->mem);
}

/* Refuses memory that overlaps another local tensor's: two tensors
 * sharing bytes would each be written with the other's values, and both
 * checked after the last write, so a digest would miss it. */
static wex_status check_overlap(const wex_job *job, uint64_t index,
                                const void *address, uint64_t bytes,
                                uint32_t kind)
{
    uintptr_t start = (uintptr_t)address, end = start + bytes;

    for (uint64_t i = 0; i < job->layout->tensor_count; i++) {
        const wex__binding *b = &job->bind[i];
        uintptr_t other = (uintptr_t)b->address;
        if (i == index || b->address == NULL || b->bytes == 0 ||
            job->memory_kind[i] != kind || other >= end ||
            start >= other + b->bytes)
            continue;
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s: its memory "
                          "[%p, +%llu) overlaps local tensor %s's [%p, "
                          "+%llu): every tensor needs memory of its own",
                          job->layout->tensors[index].name, address,
                          (unsigned long long)bytes,
                          job->layout->tensors[i].name, b->address,
                          (unsigned long long)b->bytes);
    }
    return WEX_OK;
}

static wex_status bind_memory(wex_job *job, uint64_t index, void *address,
                              uint64_t bytes, uint32_t memory_kind)
{
    wex_status st = check_bindable(job, index);
    const wex__local_tensor *t;

    if (st != WEX_OK)
        return st;
    t = &job->layout->tensors[index];
    /* An empty local tensor (FSDP2's to_local() on a rank past the end of
     * a parameter, whose data_ptr torch reports as NULL) needs no memory:
     * no operation reads or writes it. */
    if (t->bytes == 0 && bytes == 0 &&
        (memory_kind == WEX_MEMORY_HOST || memory_kind == WEX_MEMORY_CUDA)) {
        static unsigned char nothing;
        job->bind[index].address = address != NULL ? address : &nothing;
        job->bind[index].bytes = 0;
        job->memory_kind[index] = memory_kind;
        return WEX_OK;
    }
    if (address == NULL || bytes != t->bytes)
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s: expected %llu "
                          "bytes of memory, got %llu at %p",
                          t->name, (unsigned long long)t->bytes,
                          (unsigned long long)bytes, address);
    st = check_overlap(job, index, address, bytes, memory_kind);
    if (st == WEX_OK)
        st = check_kind(job, index, memory_kind);
    if (st == WEX_OK && memory_kind == WEX_MEMORY_CUDA) {
        st = wex__device_check(job->device, address, bytes);
        if (st != WEX_OK)
            return wex__error_prefix(st, "local tensor %s", t->name);
    }
    if (st != WEX_OK)
        return st;
    /* destinations expose their memory; sources register theirs where
     * the transport puts faster from registered memory */
    if (job->side == WEX_SIDE_DESTINATION) {
        st = expose(job, index, address, bytes, memory_kind);
        if (st != WEX_OK)
            return wex__error_prefix(st, "local tensor %s", t->name);
    } else if (job->transport.ops->caps & WEX_TRANSPORT_CAP_REGISTER_SOURCE) {
        wex__error_clear();
        st = job->transport.ops->mem_register(job->transport.ctx, address,
                                              bytes, memory_kind,
                                              &job->bind[index].mem);
        if (st != WEX_OK)
            return wex__error_prefix(st, "local tensor %s", t->name);
    }
    job->bind[index].address = address;
    job->bind[index].bytes = bytes;
    job->memory_kind[index] = memory_kind;
    return WEX_OK;
}

wex_status wex_job_bind_memory(wex_job *job, uint64_t index, void *address,
                               uint64_t bytes, uint32_t memory_kind)
{
    wex_status st = wex__job_enter(job, "wex_job_bind");

    if (st != WEX_OK)
        return st;
    st = bind_memory(job, index, address, bytes, memory_kind);
    wex__job_leave(job);
    return st;
}

wex_status wex_job_bind(wex_job *job, uint64_t index, void *address,
                        uint64_t bytes)
{
    return wex_job_bind_memory(job, index, address, bytes, WEX_MEMORY_HOST);
}

/* Host memory wex allocates itself: page aligned, zeroed. */
static wex_status alloc_host(wex_job *job, uint64_t index, void **address_p)
{
    uint64_t bytes = job->layout->tensors[index].bytes;

    if (posix_memalign(address_p, 4096, bytes ? bytes : 1) != 0)
        return wex__error(WEX_ERR_NOMEM,
                          "local tensor %s: out of memory "
                          "(%llu bytes)",
                          job->layout->tensors[index].name,
                          (unsigned long long)bytes);
    memset(*address_p, 0, bytes);
    return WEX_OK;
}

static wex_status alloc_memory(wex_job *job, uint64_t index,
                               uint32_t memory_kind, void **address_p)
{
    wex_status st = check_bindable(job, index);
    const char *name;
    wex__binding *b;
    uint64_t bytes;

    if (st == WEX_OK && address_p == NULL)
        st = wex__error(WEX_ERR_INVALID, "wex_job_alloc_memory: no address "
                                         "pointer");
    if (st == WEX_OK)
        st = check_kind(job, index, memory_kind);
    if (st != WEX_OK)
        return st;
    b = &job->bind[index];
    bytes = job->layout->tensors[index].bytes;
    name = job->layout->tensors[index].name;
    job->memory_kind[index] = memory_kind;
    if (memory_kind == WEX_MEMORY_HOST && job->side == WEX_SIDE_DESTINATION &&
        (job->transport.ops->caps & WEX_TRANSPORT_CAP_ALLOC)) {
        wex__error_clear();
        st = job->transport.ops->mem_alloc(job->transport.ctx, bytes,
                                           &b->address, &b->mem);
        if (st != WEX_OK)
            return wex__error_prefix(st, "local tensor %s", name);
    } else {
        st = memory_kind == WEX_MEMORY_CUDA
                 ? wex__device_alloc(job->device, bytes, &b->address)
                 : alloc_host(job, index, &b->address);
        if (st != WEX_OK)
            return wex__error_prefix(st, "local tensor %s", name);
        b->owned = 1;
        if (job->side == WEX_SIDE_DESTINATION) {
            st = expose(job, index, b->address, bytes, memory_kind);
            if (st != WEX_OK)
                return wex__error_prefix(st, "local tensor %s", name);
        }
    }
    b->bytes = bytes;
    *address_p = b->address;
    return WEX_OK;
}

wex_status wex_job_alloc_memory(wex_job *job, uint64_t index,
                                uint32_t memory_kind, void **address_p)
{
    wex_status st = wex__job_enter(job, "wex_job_alloc");

    if (st != WEX_OK)
        return st;
    st = alloc_memory(job, index, memory_kind, address_p);
    wex__job_leave(job);
    return st;
}

wex_status wex_job_alloc(wex_job *job, uint64_t index, void **address_p)
{
    return wex_job_alloc_memory(job, index, WEX_MEMORY_HOST, address_p);
}

wex_status wex_job_connect(wex_job *job)
{
    wex_status st = wex__job_enter(job, "wex_job_connect");

    if (st != WEX_OK)
        return st;
    st = job->rendezvous.connected ? WEX_OK : wex__job_connect(job);
    wex__job_leave(job);
    return st;
}

wex_status wex_sync(wex_job *job, uint64_t step, wex_sync_report *report)
{
    wex_status st = wex__job_enter(job, "wex_sync");

    if (st != WEX_OK)
        return st;
    st = wex__job_sync(job, step, report);
    wex__job_leave(job);
    return st;
}

int wex_job_dirty(const wex_job *job)
{
    return job != NULL && job->dst.dirty;
}

uint64_t wex_job_committed_step(const wex_job *job)
{
    return job ? job->dst.committed : 0;
}

const char *wex_job_peer_path(const wex_job *job, uint64_t destination_rank)
{
    const char *path = NULL;

    if (job == NULL || job->side != WEX_SIDE_SOURCE)
        return NULL;
    for (size_t k = 0; k < job->src.attached_count; k++) {
        if (job->src.attached_what[k].rank != destination_rank)
            continue;
        if (job->transport.ops->peer_path != NULL)
            path = job->transport.ops->peer_path(job->transport.ctx,
                                                 job->src.attached[k]);
        return path != NULL ? path : job->plan.job->transport.name;
    }
    return NULL;
}

const char *wex_last_error(void)
{
    return wex__last_error();
}
