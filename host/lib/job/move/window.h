/*
 * The staging window: a destination's CUDA tensors fed by a host-memory
 * transport (shm, ucx) land in pinned host memory before they are copied
 * to the device. Rather than a pinned copy as large as the tensors, a
 * destination holds one window of the job's device_staging_bytes and
 * receives its CUDA tensors in passes: each tensor is given a pass and a
 * place in the window when it is bound, and a step runs pass by pass
 * (docs/gpu.md, "The staging window"):
 *
 *   sources  put every operation of pass p (the pass of the tensor it
 *            writes), flush, and tell each destination that has a pass
 *            after p ("step/S/T/pass/P/D/SRC"); before pass p + 1 they
 *            wait for each such destination to say it has drained p
 *            ("step/S/T/drained/P/D": "ok", or "!" and why);
 *   a destination, once every source said so, digests what landed in
 *            pass p and copies pass p's tensors to the device, then says
 *            so. Its last pass is the step's end as without a window.
 *
 * A tensor larger than the window gets a pinned copy of its own, in a
 * pass of its own. A destination with one pass (host tensors only, or
 * CUDA tensors that fit the window together) runs a step as before; with
 * more, it publishes no landing board, since it digests each pass when
 * it drains it.
 */
#ifndef WEX_HOST_WINDOW_H
#define WEX_HOST_WINDOW_H

#include "peer_outcome.h"
#include "job.h"

/* Destinations: where the transport should write CUDA tensor `index`
 * (`bytes`), in its place in the window or a copy of its own; sets the
 * tensor's pass. */
wex_status wex__window_place(wex_job *job, uint64_t index, uint64_t bytes,
                             void **host_p);
/* Destinations: frees the window and the tensors' own copies. */
void wex__window_free(wex_job *job);

/* Destinations, inside a try whose keys start with `prefix`
 * ("step/S/T/"): every pass but the last, waited for, digested into
 * job->scratch.digests (job->dst.early set) when `verify`, copied to the device and
 * said drained.
 * Returns WEX__PEER_OK, or how it failed with the reason in `why`; a
 * failed destination tells its sources so they stop waiting. */
wex__peer_outcome wex__window_drain(wex_job *job, const char *prefix,
                                    int verify, double timeout, char *why,
                                    size_t cap);
/* Destinations that fail a try before draining: tells the sources, so
 * none waits for a pass that will not drain (`why`: the reason). */
void wex__window_refuse(wex_job *job, const char *prefix, const char *why);
/* Destinations: copies the tensors of pass `pass` (all passes: UINT32_MAX)
 * from the host to the device. */
wex_status wex__window_copy_in(wex_job *job, uint32_t pass);

/* Sources: after pass `pass`'s operations were put: flushes, tells the
 * destinations with a later pass, and waits for them to drain it. */
wex_status wex__window_end_pass(wex_job *job, uint32_t pass, const char *prefix,
                                double timeout);
/* Sources: a failed try tells each destination waiting for one of its
 * passes (`value`: "!" and why). */
void wex__window_fail(wex_job *job, const char *prefix, const char *value,
                      size_t len);
/* Sources: the most passes of any destination this rank writes to. */
uint32_t wex__window_source_passes(const wex_job *job);

#endif /* WEX_HOST_WINDOW_H */
