/*
 * Running the operations that change the bytes on their way (plan.h's
 * WEX__OP_CONVERT, DEQUANTIZE, QUANTIZE, SCALE), on a source: each
 * operation's destination bytes are made row by row into a bounded
 * staging arena (WEX__STAGING_BYTES; full, it is flushed and reused) and
 * put from there, in the destination's run order, so a destination sees
 * and digests exactly the bytes a copy of them would have brought.
 *
 * Quantizing needs each 128 x 128 block's amax before any of its
 * elements: a step first finds the amax of every block this source
 * quantizes, over all its operations. A block whose cells come from
 * several sources (quantize_plan.h) gets the amax of the whole block:
 * each of them posts its partial amaxes to the rendezvous under
 * "step/STEP/TRY/amax/RANK" and reads its partners' before it quantizes.
 */
#ifndef WEX_HOST_TRANSFORMS_H
#define WEX_HOST_TRANSFORMS_H

#include "job.h"

/* After this source's operations are (re)planned around `dead`: which
 * blocks they quantize, and which other sources share some of them. */
wex_status wex__transforms_prepare(wex_job *job, const uint64_t *dead,
                                   uint64_t dead_count);
void wex__transforms_free(wex_job *job);

/* Before a step's operations: every block's amax, agreed with the
 * partners under `prefix` ("step/STEP/TRY/amax/"), waiting up to
 * `timeout` seconds for them. */
wex_status wex__transforms_amax(wex_job *job, const char *prefix,
                                double timeout);

/* The operation a source runs k-th: plan order, but for QUANTIZE
 * operations that make the same bytes for several destination replicas
 * (twins, plan/quantize_once.h), which run one after the other so their
 * bytes are made once (not over a two-sided transport). */
size_t wex__transforms_nth(const wex_job *job, size_t k);

/* QUANTIZE operation i's e4m3 bytes on host memory (at most
 * WEX__STAGING_BYTES), its rows one after the other: made into the
 * staging arena, unless a twin's still lie there; valid until the arena
 * is next reused (the next make of another cell, or the step's end). */
wex_status wex__transforms_made(wex_job *job, size_t i,
                                const unsigned char **bytes_p);

/* Makes and puts operation i (not a copy), digesting what it puts into
 * `h` (may be NULL). A QUANTIZE operation whose twin ran just before it
 * puts the bytes that twin made. */
wex_status wex__transforms_put(wex_job *job, size_t i, wex__digest *h);

/* On a destination of matched receives (nccl): posts the receives of
 * converting operation i, a row at a time, as its source puts them
 * (wex__merge_rows). */
wex_status wex__transforms_recv(wex_job *job, size_t i);

/* Whether one of this source's operations dequantizes local tensor
 * `tensor`, or reads its block scales to dequantize another: work wex
 * does on host memory only, so such a tensor is refused as CUDA memory
 * when it is bound. */
int wex__transforms_dequantize_from(const wex_job *job, uint64_t tensor);

/* After the step's last put landed: the staging can be reused. */
void wex__transforms_reset(wex_job *job);

#endif /* WEX_HOST_TRANSFORMS_H */
