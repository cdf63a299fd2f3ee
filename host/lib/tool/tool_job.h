/*
 * What `wex run`'s workers reach inside a wex_job beyond <wex/wex.h>
 * (tool.h): the hook its fault injection kills a rank from, the verify
 * override, the job's rendezvous connection its reports go through, the
 * ranks it sends to and its model; and the test oracle (docs/design.md,
 * "The test oracle"): synthetic weights that are a pure function of
 * (canonical tensor, element, step), written by a source through its own
 * layout and checked element by element by a destination through its
 * own, or checked against the checkpoint the sources read.
 */
#ifndef WEX_TOOL_JOB_H
#define WEX_TOOL_JOB_H

#include <stddef.h>
#include <stdint.h>

#include <wex/wex.h>

#include "tool_checkpoint.h"
#include "tool_store.h"

/* ---- inside a job ----------------------------------------------------- */

typedef void (*wex_tool_step_hook)(wex_job *job, uint64_t step);

/* Calls `hook` (NULL: none) once a try's barrier has passed, before this
 * rank moves a byte of the step: every other rank is in the step, so a
 * kill there cannot miss it, however busy the machine. */
void wex_tool_job_after_barrier(wex_job *job, wex_tool_step_hook hook);
/* Overrides the job's verify setting (1 "digest", 0 "none"); right after
 * wex_job_open, before it connects. */
void wex_tool_job_set_verify(wex_job *job, int digest);
/* The job's connection to its rendezvous (NULL before it has one). */
wex_tool_store_client *wex_tool_job_store(const wex_job *job);
/* The other side's ranks this rank's operations name, ascending. */
const uint64_t *wex_tool_job_peers(const wex_job *job, size_t *count_p);
/* The model of this rank's side. */
const wex_model *wex_tool_job_model(const wex_job *job);
/* A source's delta snapshots, in bytes, once it connected (0 when the
 * job has deltas off, or on a destination). */
uint64_t wex_tool_job_snapshot_bytes(const wex_job *job);

/* Destination ranks this process laid out again for a changed expert
 * placement, so far (connect/placement.c). */
uint64_t wex_tool_job_placements(const wex_job *job);
/* The destination's expert slots: MoE layers of the main model (no MTP
 * layers), physical slots a layer (routed experts + the destination's
 * options/redundant_experts) and routed experts. */
wex_status wex_tool_job_expert_slots(wex_job *job, uint64_t *layers_p,
                                     uint64_t *physical_p, uint64_t *experts_p);

/* ---- the test oracle -------------------------------------------------- */

/* What the oracle reads beyond a rank's plan share: the model's catalog,
 * and on a destination which dtype the sources hold each tensor in.
 * Once, after opening. */
wex_status wex_tool_synth_prepare(wex_job *job);
/* The fraction of the elements whose value changes from one step to
 * the next (default 1: all): the same elements on every rank, drawn from
 * a hash of tensor and element, so a destination still knows every
 * element's value at any step (`wex run --changed`). One setting per
 * process; before the first fill or check. */
void wex_tool_synth_set_changed(double fraction);
/* Writes step `step`'s value into every element of every piece the rank
 * holds (its memory must be host memory). */
void wex_tool_synth_fill(const wex_job *job, uint64_t step);
/* Elements of the rank's pieces that differ from step `step`'s values;
 * 0 when everything landed. */
uint64_t wex_tool_synth_check(const wex_job *job, uint64_t step);
/* Flips a bit of the first element wex_tool_synth_check reads, so a test
 * shows that the check finds a wrong element. */
void wex_tool_synth_scribble(const wex_job *job);
/* Elements of the rank's pieces that differ from what checkpoint `ck`
 * holds there (converted, or an fp8 weight dequantized, where the rank
 * holds a tensor in another float dtype, as the host's transforms do). */
uint64_t wex_tool_checkpoint_mismatches(const wex_job *job,
                                        const wex_tool_checkpoint *ck);

#endif /* WEX_TOOL_JOB_H */
