#include "topology.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

static double number(const cJSON *obj, const char *key, double fallback)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsNumber(v) ? v->valuedouble : fallback;
}

/* Every rank of `side` listed exactly once under hosts[*].<key>. */
static wex_status place_explicit(const cJSON *hosts, const char *file,
                                 const char *key, wex__side *side)
{
    unsigned char *seen = calloc(side->ranks ? side->ranks : 1, 1);
    const cJSON *host;
    uint64_t h = 0;

    if (seen == NULL)
        return wex__error(WEX_ERR_NOMEM, "topology: out of memory");
    cJSON_ArrayForEach(host, hosts)
    {
        const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(host, key);
        const cJSON *r;
        int i = 0;
        cJSON_ArrayForEach(r, ranks)
        {
            double v = r->valuedouble;
            if (v >= (double)side->ranks || seen[(uint64_t)v]) {
                free(seen);
                return wex__error(
                    WEX_ERR_INVALID,
                    "%s: /topology/hosts/%llu/%s/%d: %s rank %.0f %s", file,
                    (unsigned long long)h, key, i, side->what, v,
                    v >= (double)side->ranks
                        ? "does not exist (the engine has fewer ranks)"
                        : "is already on another host");
            }
            seen[(uint64_t)v] = 1;
            side->hosts[(uint64_t)v] = h;
            i++;
        }
        h++;
    }
    for (uint64_t r = 0; r < side->ranks; r++)
        if (!seen[r]) {
            free(seen);
            return wex__error(WEX_ERR_INVALID,
                              "%s: /topology/hosts: %s rank %llu is on no "
                              "host; expected every rank of both sides once",
                              file, side->what, (unsigned long long)r);
        }
    free(seen);
    return WEX_OK;
}

wex_status wex__topology_place(const cJSON *topology, const char *file,
                               wex__side *src, wex__side *dst,
                               wex__topology *out)
{
    const cJSON *hosts = cJSON_GetObjectItemCaseSensitive(topology, "hosts");
    const cJSON *placement =
        cJSON_GetObjectItemCaseSensitive(topology, "placement");
    uint64_t per = (uint64_t)number(topology, "gpus_per_host", 8);
    wex_status st;

    memset(out, 0, sizeof(*out));
    out->nic_bytes_per_s = number(topology, "nic_gb_per_s", 50) * 1e9;
    out->intra_bytes_per_s = number(topology, "intra_host_gb_per_s", 400) * 1e9;
    out->quantize_bytes_per_s = number(topology, "quantize_gb_per_s", 0) * 1e9;
    out->colocated = cJSON_IsString(placement) &&
                     strcmp(placement->valuestring, "colocated") == 0;
    if (cJSON_IsArray(hosts)) {
        st = place_explicit(hosts, file, "source", src);
        if (st == WEX_OK)
            st = place_explicit(hosts, file, "destination", dst);
        out->hosts = (uint64_t)cJSON_GetArraySize(hosts);
        return st;
    }
    if (per == 0)
        per = 1;
    {
        uint64_t src_hosts = (src->ranks + per - 1) / per;
        uint64_t dst_hosts = (dst->ranks + per - 1) / per;
        uint64_t base = out->colocated ? 0 : src_hosts;

        for (uint64_t r = 0; r < src->ranks; r++)
            src->hosts[r] = r / per;
        for (uint64_t r = 0; r < dst->ranks; r++)
            dst->hosts[r] = base + r / per;
        out->hosts = out->colocated
                         ? (src_hosts > dst_hosts ? src_hosts : dst_hosts)
                         : src_hosts + dst_hosts;
    }
    return WEX_OK;
}
