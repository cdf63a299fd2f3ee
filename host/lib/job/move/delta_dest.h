/*
 * A destination's delta steps in parts (docs/design.md, "Delta steps"):
 * delta_dest.c keeps the inboxes and checks what came into them;
 * delta_stream.c reads and writes an operation's bytes as the stream a
 * payload describes; delta_device.c does both for CUDA tensors on the
 * device; delta_apply.c applies at commit. Private to job/move.
 */
#ifndef WEX_HOST_DELTA_DEST_H
#define WEX_HOST_DELTA_DEST_H

#include <stddef.h>
#include <stdint.h>
#include "digest_update.h"

#include "delta.h"
#include "job.h"

/* The inbox kept for source rank `rank`, or SIZE_MAX. */
size_t wex__delta_inbox_slot(const wex_job *job, uint64_t rank);

/* A CUDA tensor's pinned copy holds what the device holds between steps
 * only when no other tensor takes its place in the window: one pass, or
 * a copy of its own. */
int wex__delta_mirrored(const wex_job *job, size_t t);
/* A CUDA tensor whose bytes are on the device only: its place in the
 * window holds other tensors between its passes, or the transport
 * writes the device itself (nccl). */
int wex__delta_on_device(const wex_job *job, size_t t);

/* The digest of operation o as it will be once `payload` is applied
 * (its live bytes where nothing changed, the payload's elsewhere),
 * nothing written; h NULL: only decoded. 0, or -1 with why said. In
 * host memory (or a CUDA tensor's pinned copy), `chunk` a scratch of a
 * chunk's bytes; on the device, read through staging (delta_device.c). */
int wex__delta_digest_host(wex_job *job, const wex__op *o,
                           const uint8_t *payload, uint64_t len, wex__digest *h,
                           uint8_t *chunk, uint64_t *digest, uint64_t *changed,
                           char *why, size_t cap);
int wex__delta_digest_device(wex_job *job, const wex__op *o,
                             const uint8_t *payload, uint64_t len,
                             wex__digest *h, uint64_t *digest,
                             uint64_t *changed, char *why, size_t cap);

/* An operation whose delta the check digests on the rank's threads:
 * what wex__delta_digest_host is given, and what it gives back. */
typedef struct wex__delta_pending {
    size_t op, slot;          /* its operation, and the inbox it came in */
    uint64_t offset, len;     /* where in the inbox */
    uint64_t want;            /* the source's digest of its current bytes */
    uint64_t digest, changed; /* out */
} wex__delta_pending;

/* wex__delta_digest_host for each of `count` operations in host memory
 * (pending[k].digest and .changed), on the rank's delta threads, each
 * with the digest state (when verifying) and the chunk scratch
 * wex__delta_dest_prepare made it. 0, or -1 with the first failure in
 * why. */
int wex__delta_digest_pending(wex_job *job, wex__delta_pending *pending,
                              size_t count, int verify, char *why, size_t cap);

/* Writes a piece of a checked payload into operation o's live bytes in
 * host memory (or a CUDA tensor's pinned copy): 0, or -1 with why said. */
int wex__delta_write_piece(wex_job *job, const wex__op *o,
                           const uint8_t *payload, const wex__delta_piece *p,
                           char *why, size_t cap);

/* At commit, after the host's apply: the deltas into CUDA tensors
 * applied on the device (delta_device.c). */
wex_status wex__delta_apply_device(wex_job *job);

#endif /* WEX_HOST_DELTA_DEST_H */
