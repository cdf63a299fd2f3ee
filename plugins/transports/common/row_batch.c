#include "row_batch.h"

#include <string.h>

static void start(wt_rows *b, const void *peer, uint64_t dst, const void *src,
                  uint64_t bytes)
{
    memset(b, 0, sizeof(*b));
    b->peer = peer;
    b->dst = dst;
    b->src = src;
    b->width = bytes;
    b->height = 1;
}

/* Whether the next row of `b` is at (dst, src). The second row fixes the
 * pitches; rows never overlap (pitch >= width) and only go forward. */
static int continues(wt_rows *b, const void *peer, uint64_t dst,
                     const void *src, uint64_t bytes)
{
    uintptr_t s = (uintptr_t)src, s0 = (uintptr_t)b->src;

    if (b->height == 0 || peer != b->peer || bytes != b->width)
        return 0;
    if (b->height == 1) {
        if (dst < b->dst + b->width || s < s0 + b->width ||
            dst - b->dst >= WT_ROWS_MAX_PITCH || s - s0 >= WT_ROWS_MAX_PITCH)
            return 0;
        b->dst_pitch = dst - b->dst;
        b->src_pitch = s - s0;
        return 1;
    }
    return dst == b->dst + b->height * b->dst_pitch &&
           s == s0 + b->height * b->src_pitch;
}

void wt_rows_put(wt_rows *b, const void *peer, uint64_t dst, const void *src,
                 uint64_t bytes, wt_rows *ready)
{
    memset(ready, 0, sizeof(*ready));
    if (continues(b, peer, dst, src, bytes)) {
        b->height++;
        return;
    }
    if (b->height > 0)
        *ready = *b;
    start(b, peer, dst, src, bytes);
}

void wt_rows_take(wt_rows *b, wt_rows *ready)
{
    *ready = *b;
    memset(b, 0, sizeof(*b));
}
