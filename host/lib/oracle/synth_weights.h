/*
 * The test oracle (docs/design.md): synthetic weights that are a pure
 * function of (canonical tensor, element index, step). A source rank
 * writes them through its own layout and a destination rank checks every
 * element through its own, so any layout, plan or transport bug shows up
 * as a mismatch at an exact tensor and index. `wex run`, the GPU tests and
 * the benchmarks use it; it is not part of libwex's public API.
 */
#ifndef WEX_HOST_SYNTH_WEIGHTS_H
#define WEX_HOST_SYNTH_WEIGHTS_H

#include <stdint.h>

#include "job.h"

/* What the oracle reads beyond a rank's plan share (plan_share.h): the
 * model's catalog, and on a destination which dtype the sources hold
 * each tensor in, which only the whole plan says. Once, after opening. */
wex_status wex__synth_prepare(wex_job *job);

/* Writes step `step`'s value into every element of every piece the rank
 * holds (its bound memory must be host memory). */
void wex__synth_fill(const wex_job *job, uint64_t step);
/* Elements (of every piece the rank holds) that differ from step `step`'s
 * values; 0 when everything landed. */
uint64_t wex__synth_check(const wex_job *job, uint64_t step);
/* Flips one bit of the first element wex__synth_check reads, so a test
 * can show that the check finds a wrong element. */
void wex__synth_scribble(const wex_job *job);

#endif /* WEX_HOST_SYNTH_WEIGHTS_H */
