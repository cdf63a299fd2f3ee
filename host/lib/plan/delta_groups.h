/*
 * Delta steps as a plan sees them (docs/design.md, "Delta steps"): which
 * of a source's operations can go as a delta, which of them read the
 * same bytes and so share one snapshot, and what a source holds for
 * them. A running source (job/move/delta_source.c) and `wex plan` /
 * `wex run`'s memory check count the same way.
 */
#ifndef WEX_HOST_DELTA_GROUPS_H
#define WEX_HOST_DELTA_GROUPS_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"

/* The largest QUANTIZE operation that goes as a delta: its e4m3 bytes
 * are made whole in the source's staging arena (WEX__STAGING_BYTES)
 * and encoded from there. */
#define WEX__DELTA_MADE_MAX (64ull << 20)

/* A copy of elements of 1 to 8 bytes, or a QUANTIZE operation (its e4m3
 * bytes against those it last sent) up to WEX__DELTA_MADE_MAX; other
 * converting operations, and fp8 scales, go whole. */
int wex__delta_eligible(const wex__op *o);
/* Whether two operations read the same box of the same local tensor and
 * make the same bytes of it (a copy, or the same cell quantized). */
int wex__delta_same_read(const wex__op *a, const wex__op *b);
/* Sorts pointers into one array of operations by what they read (local
 * tensor, box), then by position: operations that read the same bytes
 * end up next to each other. */
void wex__delta_sort(const wex__op **ops, size_t count);
/* The order wex__delta_sort puts reads in (0: the same read). */
int wex__delta_read_cmp(const wex__op *a, const wex__op *b);
/* The room one payload takes in a source's outbox: past max_fraction of
 * its elements an operation goes whole, so a bitmap and that many
 * values is all a useful payload needs. */
uint64_t wex__delta_outbox_cap(const wex__op *o, double max_fraction);
/* What a source with these operations holds: one snapshot per group of
 * operations that read the same bytes, 64-byte aligned, and their
 * outbox. WEX_ERR_NOMEM when sorting has no memory. */
wex_status wex__delta_memory(const wex__op *ops, size_t count,
                             double max_fraction, uint64_t *snapshot_p,
                             uint64_t *outbox_p);

/* A destination's inboxes: `inbox_bytes` (0: by default 5 % of the bytes
 * it receives, at least 1 MiB) shared out by what each source sends it,
 * each share at least 64 KiB, in whole pages. The share of a source
 * sending `pair` of the `received` bytes: */
uint64_t wex__delta_inbox_share(uint64_t inbox_bytes, uint64_t pair,
                                uint64_t received);
/* ... and all of a destination's with these operations, allocated as
 * shares are. WEX_ERR_NOMEM when sorting has no memory. */
wex_status wex__delta_inboxes(const wex__op *ops, size_t count,
                              uint64_t inbox_bytes, uint64_t *bytes_p);

#endif /* WEX_HOST_DELTA_GROUPS_H */
