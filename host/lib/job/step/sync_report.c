/* What a wex_sync did on this rank, as its report says it. */
#include <string.h>

#include "abi_copy.h"
#include "clock.h"
#include "job.h"

void wex__sync_report_fill(const wex_job *job, wex_sync_report *r,
                           uint64_t step, uint64_t number, double started,
                           int missed, int ok, int elastic_passed)
{
    uint64_t tries = number + 1;
    wex_sync_report full;

    memset(&full, 0, sizeof(full));
    full.verified = ok && job->plan.job->verify_digest;
    full.step = step;
    full.committed_step = job->dst.committed;
    full.operations = job->op_count;
    for (size_t i = 0; i < job->op_count; i++)
        full.bytes += job->ops[i].bytes;
    full.peers = job->peer_count;
    full.seconds = wex__now() - started;
    full.attempts = (uint32_t)tries;
    full.missed = (uint32_t)missed;
    full.failed_over = ok ? job->members.dead_count : 0;
    full.puts = job->side == WEX_SIDE_SOURCE ? job->src.puts : 0;
    full.wire_bytes = full.bytes;
    if (job->dst.seeded) { /* a copy of each tensor, from one replica */
        full.operations = job->layout->tensor_count;
        full.bytes = full.seeded_bytes = job->layout->bytes;
        full.peers = 1;
        full.wire_bytes = 0; /* none from the sources */
    }
    if (job->plan.job->delta && !job->dst.seeded) {
        int src = job->side == WEX_SIDE_SOURCE;
        uint64_t deltas =
            src ? job->src.delta.delta_ops : job->dst.delta.delta_ops;
        full.wire_bytes =
            src ? job->src.delta.wire_bytes : job->dst.delta.wire_bytes;
        full.delta_elements = src ? job->src.delta.elems : job->dst.delta.elems;
        full.changed_elements =
            src ? job->src.delta.changed : job->dst.delta.changed;
        full.mode = deltas == 0               ? WEX_SYNC_FULL
                    : deltas == job->op_count ? WEX_SYNC_DELTA
                                              : WEX_SYNC_MIXED;
        full.apply_seconds = src ? 0 : job->dst.delta.apply_seconds;
    }
    if (job->members.replica_ranks && elastic_passed) {
        full.replicas = job->members.replicas_present;
        full.replicas_committed = job->members.replicas_committed;
        full.replicas_joined = job->members.replicas_joined;
        full.replicas_left = job->members.replicas_left;
        full.replicas_seeded = job->members.replicas_seeded;
    }
    wex__abi_out(r, &full, sizeof(full));
}
