/* A planned job for the command (tool_plan.h): config/job_config.h and
 * plan/planner.h, with the planner on the heap so the command holds a
 * handle, and what it needs of the job in a plain struct. */
#include <stdlib.h>

#include "device_memory.h"
#include "error.h"
#include "planner.h"
#include "tool_plan.h"

wex_status wex_tool_job_check(wex_tool_registry *registry, const char *path,
                              char **all_p)
{
    wex__job_config *config = NULL;
    wex__planner checked;
    wex_status st;

    st = wex__job_config_load(path, registry, 0, &config, all_p);
    if (st != WEX_OK)
        return st;
    /* the planner owns the config from here, and closes itself on
     * failure */
    st = wex__planner_check_job(&checked, registry, config);
    if (st == WEX_OK)
        wex__planner_close(&checked);
    return st;
}

/* A planner on the heap for open(p, ...) to fill, or NULL (told). */
static wex__planner *new_planner(void)
{
    wex__planner *p = calloc(1, sizeof(*p));

    if (p == NULL)
        wex__error(WEX_ERR_NOMEM, "planning: out of memory");
    return p;
}

/* Hands the planner over, or frees it when `st` says it failed (a
 * planner that fails to open has closed itself). */
static wex_status hand_over(wex__planner *p, wex_status st,
                            wex_tool_planner **planner_p)
{
    if (st != WEX_OK) {
        free(p);
        return st;
    }
    *planner_p = p;
    return WEX_OK;
}

wex_status wex_tool_planner_open(wex_tool_registry *registry, const char *path,
                                 wex_tool_planner **planner_p)
{
    wex__planner *p = new_planner();

    *planner_p = NULL;
    if (p == NULL)
        return WEX_ERR_NOMEM;
    return hand_over(p, wex__planner_open(p, registry, path), planner_p);
}

wex_status wex_tool_planner_open_text(wex_tool_registry *registry,
                                      const char *name, const char *text,
                                      wex_tool_planner **planner_p)
{
    wex__job_config *job = NULL;
    wex__planner *p;
    wex_status st;

    *planner_p = NULL;
    st = wex__job_config_parse(name, text, NULL, registry, WEX__JOB_PLAN_ONLY,
                               &job, NULL);
    if (st != WEX_OK)
        return st;
    if ((p = new_planner()) == NULL) {
        wex__job_config_free(job);
        return WEX_ERR_NOMEM;
    }
    return hand_over(p, wex__planner_open_job(p, registry, job), planner_p);
}

void wex_tool_planner_close(wex_tool_planner *planner)
{
    if (planner == NULL)
        return;
    wex__planner_close(planner);
    free(planner);
}

/* Whether the host quantizes any fp8 weight on the way. */
static int quantizes(const wex__planner *p)
{
    for (uint64_t c = 0; p->quantized != NULL && c < p->src_model->count; c++)
        if (p->quantized[c])
            return 1;
    return 0;
}

void wex_tool_planner_get_job(const wex_tool_planner *planner,
                              wex_tool_job_info *info)
{
    const wex__job_config *job = planner->job;

    info->path = job->path;
    info->doc = job->doc;
    info->source_engine = job->source.name;
    info->destination_engine = job->destination.name;
    info->policy = job->policy.name;
    info->transport = job->transport.name;
    info->transport_plugin = job->transport.plugin;
    info->plan_shares = job->plan_shares;
    info->source_ranks = planner->src.ranks;
    info->destination_ranks = planner->dst.ranks;
    info->hosts = planner->topology.hosts;
    info->nic_bytes_per_s = planner->topology.nic_bytes_per_s;
    info->intra_bytes_per_s = planner->topology.intra_bytes_per_s;
    info->quantize_bytes_per_s = planner->topology.quantize_bytes_per_s;
    info->layout_seconds = planner->layout_seconds;
    info->connect_seconds = job->connect_seconds;
    info->verify_digest = job->verify_digest;
    info->staging_bytes = job->staging_bytes;
    info->quantize_staging_bytes = quantizes(planner) ? WEX__STAGING_BYTES : 0;
    info->delta = job->delta;
    info->delta_inbox_bytes = job->delta_inbox_bytes;
}

void wex_tool_planner_set_verify(wex_tool_planner *planner, int digest)
{
    planner->job->verify_digest = digest;
}

static const wex__side *side_of(const wex__planner *p, uint32_t side)
{
    return side == WEX_SIDE_SOURCE ? &p->src : &p->dst;
}

const wex_model *wex_tool_planner_model(const wex_tool_planner *planner,
                                        uint32_t side)
{
    return side_of(planner, side)->model;
}

const wex_tool_layout *wex_tool_planner_layout(const wex_tool_planner *p,
                                               uint32_t side, uint64_t rank)
{
    return &side_of(p, side)->layouts[rank];
}

uint64_t wex_tool_planner_host(const wex_tool_planner *planner, uint32_t side,
                               uint64_t rank)
{
    return side_of(planner, side)->hosts[rank];
}
