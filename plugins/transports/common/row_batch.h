/*
 * Rows of a strided box, batched into one two-dimensional copy.
 *
 * The runtime puts a box run by run. A row-parallel split of a weight (a
 * column slice of a row-major matrix) is thousands of equal runs at a
 * constant pitch on both sides, which a device copies far faster as one
 * cudaMemcpy2DAsync than as one copy each. A batch grows while each put
 * continues it, and is handed back to be issued when one does not, and
 * before a flush. Plain C: the copy itself is the transport's.
 */
#ifndef WEX_TRANSPORT_COMMON_ROW_BATCH_H
#define WEX_TRANSPORT_COMMON_ROW_BATCH_H

#include <stdint.h>

/* Pitches at or past this are not batched: a device's 2-D copy bounds
 * its pitch (cudaDevAttrMaxPitch, 2^31 - 1 on current GPUs). */
#define WT_ROWS_MAX_PITCH ((uint64_t)1 << 30)

typedef struct wt_rows {
    const void *peer;         /* whose buffer; the batch is empty at height 0 */
    uint64_t dst;             /* offset of the first row in it */
    const unsigned char *src; /* the first row */
    uint64_t width;           /* bytes a row */
    uint64_t dst_pitch, src_pitch; /* from one row to the next (height >= 2) */
    uint64_t height;               /* rows */
} wt_rows;

/* Takes a put of `bytes` (> 0) from `src` to `peer`'s buffer at `dst`.
 * When it does not continue the batch, the batch so far moves to *ready
 * (ready->height > 0: issue it before this put's bytes) and the put
 * starts a new one; otherwise ready->height is 0. */
void wt_rows_put(wt_rows *b, const void *peer, uint64_t dst, const void *src,
                 uint64_t bytes, wt_rows *ready);
/* Moves the batch to *ready (height 0 when there was none). */
void wt_rows_take(wt_rows *b, wt_rows *ready);

#endif /* WEX_TRANSPORT_COMMON_ROW_BATCH_H */
