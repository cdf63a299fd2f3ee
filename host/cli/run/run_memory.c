/*
 * What `wex run` asks of this machine's memory before it starts a rank:
 * every rank it runs holds its local tensors (a source also a staging
 * arena where it converts dtypes, and one it packs strided runs into
 * over a network transport), in private memory or in shared memory
 * the destinations' transport maps (shm's memfds, which count against
 * MemAvailable and not against /dev/shm's size). A job that does not fit
 * is refused in one line with the figures, instead of workers killed by
 * the kernel half way.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "device_memory.h"
#include "run.h"

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

static uint64_t side_bytes(const wex__side *side, const run_args *a,
                           uint64_t per_rank_extra)
{
    uint64_t total = 0;

    for (uint64_t r = 0; r < side->ranks; r++)
        if (a->host < 0 || side->hosts[r] == (uint64_t)a->host)
            total += side->layouts[r].bytes + per_rank_extra;
    return total;
}

/* Whether the job's transport says (in its manifest, before it is
 * loaded) it crosses a network one-sidedly: then every source may pack
 * strided runs into up to staging_bytes of its own. */
static int sources_pack(const launch *l)
{
    const wex__plugin *p = l->plan.job->transport.plugin;
    const cJSON *caps, *c;
    int network = 0, two_sided = 0;

    if (p == NULL)
        return 0;
    caps = cJSON_GetObjectItemCaseSensitive(p->manifest.json, "capabilities");
    cJSON_ArrayForEach(c, caps) {
        network |= cJSON_IsString(c) && strcmp(c->valuestring, "network") == 0;
        two_sided |= cJSON_IsString(c) &&
                     strcmp(c->valuestring, "two-sided") == 0;
    }
    return network && !two_sided;
}

static double gb(uint64_t bytes)
{
    return (double)bytes / 1e9;
}

wex_status run_check_memory(launch *l, const run_args *a)
{
    /* a source reading a checkpoint holds nothing of its own */
    uint64_t src = a->from_checkpoint ? 0 : side_bytes(&l->plan.src, a, 0);
    uint64_t dst = side_bytes(&l->plan.dst, a, 0);
    uint64_t staging = 0, need, avail = mem_available();

    for (uint64_t c = 0; l->plan.quantized != NULL &&
                         c < l->plan.src_model->count; c++)
        if (l->plan.quantized[c]) {
            staging = side_bytes(&l->plan.src, a, WEX__STAGING_BYTES) -
                      side_bytes(&l->plan.src, a, 0);
            break;
        }
    if (sources_pack(l)) /* at most; a source allocates what it can use */
        staging += side_bytes(&l->plan.src, a, l->plan.job->staging_bytes) -
                   side_bytes(&l->plan.src, a, 0);
    need = src + dst + staging;
    if (avail > 0 && need > avail)
        return wex__error(WEX_ERR_INVALID, "%s: the ranks this run starts "
                          "hold %.2f GB (sources %.2f, destinations %.2f, "
                          "staging %.2f) and this machine has %.2f GB "
                          "available (MemAvailable): run fewer ranks here "
                          "(--host) or a smaller job",
                          a->job, gb(need), gb(src), gb(dst), gb(staging),
                          gb(avail));
    return WEX_OK;
}
