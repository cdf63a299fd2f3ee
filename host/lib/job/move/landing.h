/*
 * The landing board: how a destination checks bytes while they are
 * still in cache.
 *
 * Without it, a destination digests what landed once every source has
 * said it is done, reading the whole step back from memory: on a copying
 * transport that read costs about as much as the copy. With a transport
 * whose puts land in order (WEX_TRANSPORT_CAP_PUTS_LAND_IN_ORDER: shm),
 * each destination exposes one more small buffer, the board, with a word
 * per source rank. After each of its operations into that destination a
 * source writes there how many it has finished in this try; the
 * destination, watching its board, digests each operation as soon as it
 * has landed, from the cache the source has just written it through.
 *
 * The board only moves work earlier. The verdict is the same: each early
 * digest is compared with the source's, which arrives with "done" as
 * before, and whatever the destination did not digest early (a source
 * that failed, went quiet or died) is digested then. A word is the try's
 * tag in its high half and the count in its low half, so the words of
 * an earlier try are never taken for this one's.
 */
#ifndef WEX_HOST_LANDING_H
#define WEX_HOST_LANDING_H

#include <stddef.h>
#include <stdint.h>

#include <wex/wex.h>

struct wex_job;

/* Whether this job's transport lets destinations watch a board. */
int wex__landing_on(const struct wex_job *job);
/* The word's high half for try `number` of `step` (never 0). */
uint32_t wex__landing_tag(uint64_t step, uint64_t number);
/* Sizes the per-operation and per-peer scratch after the ops change. */
wex_status wex__landing_size(struct wex_job *job);
/* Destinations: allocates the board (once) and says its memory key. */
wex_status wex__landing_key(struct wex_job *job, unsigned char *key,
                            uint64_t *len);
/* Sources: op `i` has been put; tells its destination (a no-op without
 * boards). */
wex_status wex__landing_tell(struct wex_job *job, size_t i, uint32_t tag);
/* Destinations: how many of peers[p]'s ops its word says have landed in
 * the try of `tag` (0 for another try's word; never past its ops). */
uint64_t wex__landing_count(const struct wex_job *job, size_t p, uint32_t tag);
/* Destinations (landing_watch.c): digests operations as they land, until
 * all have or no source has moved for a while; job->dst.early marks those
 * digested. */
void wex__landing_watch(struct wex_job *job, uint32_t tag);
/* Frees what the board holds (both sides). */
void wex__landing_free(struct wex_job *job);

/* The attachment "tensor" that stands for a destination's board. */
#define WEX__BOARD_TENSOR UINT64_MAX

#endif /* WEX_HOST_LANDING_H */
