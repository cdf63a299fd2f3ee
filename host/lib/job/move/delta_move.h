/*
 * Delta steps (docs/design.md, "Delta steps"): a source sends the
 * elements of an operation that changed since it last sent them, into an
 * inbox its destination keeps for it; the destination checks them with
 * the step and writes them into its live tensors only at commit.
 *   delta_source.c  snapshots, encoding once per group, puts
 *   delta_send.c    which destinations take deltas, records, the payloads
 *                   from device memory, the layout posted first over nccl
 *   delta_dest.c    inboxes, checking a source's records, applying
 *   delta_receive.c over nccl: the receives a destination posts
 */
#ifndef WEX_HOST_DELTA_MOVE_H
#define WEX_HOST_DELTA_MOVE_H

#include <stddef.h>
#include <stdint.h>
#include "digest_update.h"

#include "box_runs.h"
#include "peer_outcome.h"
#include "job.h"

/* The attachment "tensor" that stands for a destination's inbox for
 * this source. */
#define WEX__INBOX_TENSOR (UINT64_MAX - 1)

/* op_runs.c: op o's box as runs (source offsets a, destination b). */
void wex__op_runs(const wex_job *job, const wex__op *o, wex__box_runs *w);
/* Whether op o's digest is taken on the device (digest_blocks.h): its
 * box is one run in its destination tensor (else its source tensor),
 * starting at *offset there, and the kernels of libwex_cuda.so are there;
 * else it is read through staging. */
int wex__op_digest_on_device(wex_job *job, const wex__op *o, int destination,
                             uint64_t *offset);

/* Sized from the ops whenever they change (no-ops without deltas). */
wex_status wex__delta_prepare(wex_job *job);
void wex__delta_free(wex_job *job);

/* ---- sources (delta_source.c) ---- */

/* A try begins: which peers take deltas (their bases under the try's
 * keys), every group encoded and digested (`h`: with digests). */
wex_status wex__delta_begin(wex_job *job, uint64_t number,
                            const char *try_prefix, double timeout,
                            wex__digest *h);
/* Op i as a delta, when its destination takes one and it fits: 1 (the
 * put's status in *st_p, the op's record made), else 0. */
int wex__delta_put(wex_job *job, size_t i, wex_status *st_p);
/* (delta_send.c) Which peers take deltas this try: those whose base,
 * posted under the try's keys, is the step the snapshots hold. */
wex_status wex__delta_read_bases(wex_job *job, uint64_t number,
                                 const char *try_prefix, double timeout);
/* Op i's record this try (its group encoded): 1 and a payload with its
 * room taken in the peer's inbox, or 0 and whole. */
int wex__delta_decide(wex_job *job, size_t i, wex__delta_record *r);
/* Over a transport of device memory only, after the encoding: every
 * op's record decided and the payloads copied to device memory; over
 * nccl, each destination's records posted under step/S/T/layout/DST/SRC
 * for it to post its receives by. */
wex_status wex__delta_send_layout(wex_job *job, const char *try_prefix);
/* A failed try: those keys say so (a no-op but over nccl). */
void wex__delta_fail_layouts(wex_job *job, const char *try_prefix,
                             const char *value, size_t len);
/* Where group `group`'s payload is sent from. */
const uint8_t *wex__delta_payload_of(const wex_job *job, size_t group);
/* Op i went whole, with this digest. */
void wex__delta_full_done(wex_job *job, size_t i, uint64_t digest);
/* The step ended: the snapshots hold `step` when it committed, and no
 * step otherwise. */
void wex__delta_end(wex_job *job, uint64_t step, int committed);

/* ---- destinations (delta_dest.c) ---- */

wex_status wex__delta_dest_prepare(wex_job *job);
/* Whether the job's transport can carry deltas: one-sided, into memory
 * it allocates (the inboxes: shm, ucx), or of device memory only, into
 * inboxes in device memory: one-sided (cuda-ipc) or matched sends and
 * receives (nccl). */
int wex__delta_transport_carries(const wex_job *job);
/* Whether it is the latter: the inboxes are device memory, and a source
 * sends its payloads from device memory. */
int wex__delta_device_inboxes(const wex_job *job);
/* Whether it is the latter: a destination receives each payload with a
 * receive of its length, known before the source sends it. */
int wex__delta_matched(const wex_job *job);
void wex__delta_dest_free(wex_job *job);
/* Makes an inbox for every source peer (at connect, the tensors bound),
 * where the destination can take deltas. */
wex_status wex__delta_inbox_open(wex_job *job);
/* The inbox for source rank `rank`: its transport memory, or NULL. */
wex_transport_mem *wex__delta_inbox_of(const wex_job *job, uint64_t rank);
/* The base it posts before a try: the step its tensors hold when it can
 * take deltas, else 0. */
uint64_t wex__delta_base(const wex_job *job);
/* A try begins: nothing to apply yet. */
void wex__delta_try_start(wex_job *job);
/* (delta_receive.c) Over nccl, in place of the plain receives: each
 * source's layout for this destination read, a receive posted for each
 * of its ops (the runs of one that comes whole, the payload of a delta
 * into the inbox's device memory), and the payloads copied to the host.
 * WEX__PEER_OK, or how it failed with the reason in why. */
wex__peer_outcome wex__delta_receive(wex_job *job, const char *try_prefix,
                                     double timeout, char *why, size_t cap);
/* Source rank `peer`'s records (n of them, its ops in order): full ops
 * digested as they landed, payloads checked in the inbox (their digest,
 * and with the payload applied the operation's digest, without writing
 * anything), and queued to apply. */
wex__peer_outcome wex__delta_check(wex_job *job, uint64_t peer,
                                   const wex__delta_record *records, size_t n,
                                   int verify, char *why, size_t cap);
/* At the verdict, in place of the window's copy: the CUDA tensors that
 * operations sent whole landed in this try, copied from their pinned
 * copies to the device (those that only deltas touch wait for the
 * apply). */
wex_status wex__delta_copy_landed(wex_job *job);
/* The same for the CUDA tensors of pass `pass` of the staging window, as
 * it drains (window.c): a tensor all of whose operations came whole, or
 * that has a pinned copy of its own, whole; otherwise the boxes of those
 * that came whole (their place in the window holds nothing else of it). */
wex_status wex__delta_copy_pass(wex_job *job, uint32_t pass);
/* At commit: writes every queued payload into the live tensors (and a
 * CUDA tensor's pinned copy, then the device), on wex__delta_threads
 * threads. */
wex_status wex__delta_apply(wex_job *job);
/* Where the destination side of a walk of runs (box_runs.h) puts each
 * element of its stream, as the device's apply takes it (delta_chunks.h);
 * -1 when the box has more outer dims than a map holds. */
struct wex_delta_map;
int wex__delta_map_of(const wex__box_runs *w, struct wex_delta_map *m);
/* The same for its source side: where a CUDA source's encoding on the
 * device reads the stream (delta_scan_chunks.h). */
int wex__delta_source_map_of(const wex__box_runs *w, struct wex_delta_map *m);
/* (delta_device.c) Copies bytes [from, from + bytes) of the device inbox
 * in slot `slot` to its host copy, through staging. */
wex_status wex__delta_inbox_fetch(wex_job *job, size_t slot, uint64_t from,
                                  uint64_t bytes);

/* The threads a rank encodes or applies with: the job's delta.threads,
 * or its CPUs, at most WEX__DELTA_THREADS. */
unsigned wex__delta_threads(const wex_job *job);

#endif /* WEX_HOST_DELTA_MOVE_H */
