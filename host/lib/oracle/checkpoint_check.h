/*
 * The test oracle for a sync whose source is a checkpoint: every element
 * a destination rank holds, against the checkpoint's bytes, through the
 * rank's own layout (`wex run --from-checkpoint`).
 */
#ifndef WEX_HOST_CHECKPOINT_CHECK_H
#define WEX_HOST_CHECKPOINT_CHECK_H

#include "checkpoint.h"
#include "job.h"

/* Elements of the rank's pieces that differ from what the checkpoint
 * holds there: the same bytes, or, where the rank holds a tensor in
 * another float dtype, the checkpoint's value converted (an fp8 weight
 * dequantized by its block scales) as the host's transforms make it. */
uint64_t wex__checkpoint_mismatches(const wex_job *job,
                                    const wex__checkpoint *ck);

#endif /* WEX_HOST_CHECKPOINT_CHECK_H */
