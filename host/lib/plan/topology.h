/*
 * Where ranks run: assigns every rank of both sides a host id from the
 * job's "topology" (explicit hosts, or gpus_per_host with a colocated or
 * disaggregated placement) and reads the link bandwidths.
 */
#ifndef WEX_HOST_TOPOLOGY_H
#define WEX_HOST_TOPOLOGY_H

#include <cjson/cJSON.h>

#include "side.h"

typedef struct wex__topology {
    uint64_t hosts;         /* number of hosts */
    double nic_bytes_per_s; /* per rank, per direction */
    double intra_bytes_per_s;
    /* bytes of floats one source quantizes to fp8 per second: the job's
     * quantize_gb_per_s, else measured on this CPU (quantize_plan.c) */
    double quantize_bytes_per_s;
    int colocated;
} wex__topology;

/* Fills src->hosts and dst->hosts. `topology` is the job's (defaults
 * applied); `file` names the job in messages. */
wex_status wex__topology_place(const cJSON *topology, const char *file,
                               wex__side *src, wex__side *dst,
                               wex__topology *out);

#endif /* WEX_HOST_TOPOLOGY_H */
