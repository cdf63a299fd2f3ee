/* A group's encoding on a source: the steps every encoder shares
 * (delta_encode.c), and the groups of CUDA sources (delta_cuda.c).
 * Private to host/lib/job/move. */
#ifndef WEX_HOST_DELTA_ENCODE_H
#define WEX_HOST_DELTA_ENCODE_H

#include <stdint.h>
#include "digest_update.h"

#include "job.h"

/* ---- delta_encode.c ---- */

/* Feeds `n` current bytes at `cur` against the snapshot at `snap` to the
 * encoder `e`, a slice at a time, each digested right after its scan,
 * from cache. */
void wex__delta_feed(wex__delta_enc *e, const uint8_t *cur, uint8_t *snap,
                     uint64_t n, wex__digest *h);
/* Starts group g's encoding into its room in the outbox, and its digest
 * (`h`, when digesting). */
void wex__delta_encode_start(wex_job *job, wex__delta_enc *e,
                             const wex__delta_group *g, wex__digest *h);
/* The group's payload (len bytes; -1: its ops go whole), changed
 * elements and, when verifying, the digest of its current bytes and its
 * payload's; the try's totals are the callers' to add. */
void wex__delta_settle(wex_job *job, wex__delta_group *g, int verify,
                       uint64_t digest, int64_t len, uint64_t changed,
                       uint64_t elems);
/* Ends the encoding `e` of group g and settles it. */
void wex__delta_encode_end(wex_job *job, wex__delta_enc *e, wex__delta_group *g,
                           wex__digest *h);

/* ---- delta_cuda.c ---- */

/* A copying group whose source tensor is CUDA memory, read through
 * staging and encoded on the CPU against the host snapshot. */
wex_status wex__delta_encode_staged(wex_job *job, wex__delta_group *g,
                                    wex__digest *h);
/* ... encoded on the device against its device snapshot, and digested
 * there (the snapshot holds the current bytes then). */
wex_status wex__delta_encode_on_device(wex_job *job, wex__delta_group *g,
                                       wex__digest *h);

/* Where the job encodes its CUDA sources' groups on the device (the
 * transport carries deltas, delta.snapshots is "device", the kernels
 * load and the GPU has the room), their snapshots made in device memory,
 * in the host snapshots' layout; else nothing, and they are read through
 * staging. */
wex_status wex__delta_device_snapshots(wex_job *job);

#endif /* WEX_HOST_DELTA_ENCODE_H */
