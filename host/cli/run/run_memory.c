/*
 * What `wex run` asks of this machine's memory before it starts a rank:
 * every rank it runs holds its local tensors (a source also a staging
 * arena where it converts dtypes, and one it packs strided runs into
 * over a network transport), in private memory or in shared memory
 * the destinations' transport maps (shm's memfds, which count against
 * MemAvailable and not against /dev/shm's size), and in a delta job its
 * snapshots and outbox, or its inboxes. A job that does not fit
 * is refused in one line with the figures, instead of workers killed by
 * the kernel half way.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "run.h"
#include "tool_base.h"

/* MemAvailable from /proc/meminfo, in bytes; 0 when unknown. */
static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    uint64_t kib = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kib) == 1)
            break;
    fclose(f);
    return kib * 1024;
}

static uint64_t side_bytes(const launch *l, const wex_tool_job_info *job,
                           uint32_t side, const run_args *a,
                           uint64_t per_rank_extra)
{
    uint64_t ranks =
        side == WEX_SIDE_SOURCE ? job->source_ranks : job->destination_ranks;
    uint64_t total = 0;

    for (uint64_t r = 0; r < ranks; r++)
        if (a->host < 0 ||
            wex_tool_planner_host(l->plan, side, r) == (uint64_t)a->host) {
            wex_tool_layout_info info;
            wex_tool_layout_get_info(wex_tool_planner_layout(l->plan, side, r),
                                     &info);
            total += info.bytes + per_rank_extra;
        }
    return total;
}

/* Whether the job's transport says (in its manifest, before it is
 * loaded) it crosses a network one-sidedly: then every source may pack
 * strided runs into up to staging_bytes of its own. */
static int sources_pack(const wex_tool_job_info *job)
{
    const cJSON *caps, *c;
    wex_tool_plugin_info p;
    int network = 0, two_sided = 0;

    if (job->transport_plugin == NULL)
        return 0;
    wex_tool_plugin_get_info(job->transport_plugin, &p);
    caps = cJSON_GetObjectItemCaseSensitive(p.manifest.json, "capabilities");
    cJSON_ArrayForEach(c, caps)
    {
        network |= cJSON_IsString(c) && strcmp(c->valuestring, "network") == 0;
        two_sided |=
            cJSON_IsString(c) && strcmp(c->valuestring, "two-sided") == 0;
    }
    return network && !two_sided;
}

/* What a delta job's ranks on this host hold beyond their tensors: each
 * source its snapshots and outbox, each destination its inboxes. */
static wex_status delta_bytes(launch *l, const wex_tool_job_info *job,
                              const run_args *a, uint64_t *bytes)
{
    const uint32_t D = WEX_SIDE_DESTINATION;

    *bytes = 0;
    if (!job->delta)
        return WEX_OK;
    for (uint64_t r = 0; r < job->source_ranks; r++) {
        uint64_t snapshot, outbox;
        wex_status st;
        if (a->host >= 0 && wex_tool_planner_host(l->plan, WEX_SIDE_SOURCE,
                                                  r) != (uint64_t)a->host)
            continue;
        st = wex_tool_planner_delta_memory(l->plan, r, &snapshot, &outbox);
        if (st != WEX_OK)
            return st;
        *bytes += snapshot + outbox;
    }
    for (uint64_t r = 0; r < job->destination_ranks; r++) {
        uint64_t inboxes;
        wex_status st;
        if (a->host >= 0 &&
            wex_tool_planner_host(l->plan, D, r) != (uint64_t)a->host)
            continue;
        st = wex_tool_planner_delta_inboxes(l->plan, r, &inboxes);
        if (st != WEX_OK)
            return st;
        *bytes += inboxes;
    }
    return WEX_OK;
}

static double gb(uint64_t bytes)
{
    return (double)bytes / 1e9;
}

wex_status run_check_memory(launch *l, const run_args *a)
{
    const uint32_t S = WEX_SIDE_SOURCE, D = WEX_SIDE_DESTINATION;
    uint64_t src, dst, staging = 0, delta, need, avail = mem_available();
    wex_tool_job_info job;
    wex_status st;

    wex_tool_planner_get_job(l->plan, &job);
    /* a source reading a checkpoint holds nothing of its own */
    src = a->from_checkpoint ? 0 : side_bytes(l, &job, S, a, 0);
    dst = side_bytes(l, &job, D, a, 0);
    /* a source quantizing fp8 weights on the way holds an arena for it */
    if (job.quantize_staging_bytes > 0)
        staging = side_bytes(l, &job, S, a, job.quantize_staging_bytes) -
                  side_bytes(l, &job, S, a, 0);
    if (sources_pack(&job)) /* at most; a source allocates what it can use */
        staging += side_bytes(l, &job, S, a, job.staging_bytes) -
                   side_bytes(l, &job, S, a, 0);
    if ((st = delta_bytes(l, &job, a, &delta)) != WEX_OK)
        return st;
    need = src + dst + staging + delta;
    if (avail > 0 && need > avail)
        return wex_tool_error(WEX_ERR_INVALID,
                              "%s: the ranks this run "
                              "starts hold %.2f GB (sources %.2f, "
                              "destinations %.2f, staging %.2f, delta "
                              "snapshots and inboxes %.2f) and this "
                              "machine has %.2f GB available (MemAvailable): "
                              "run fewer ranks here (--host) or a smaller "
                              "job",
                              a->job, gb(need), gb(src), gb(dst), gb(staging),
                              gb(delta), gb(avail));
    return WEX_OK;
}
