/*
 * Job configs: read, validate against schemas/job.schema.json, fill in
 * defaults, resolve the plugins they name and validate each plugin's
 * options against that plugin's manifest.
 */
#ifndef WEX_HOST_JOB_CONFIG_H
#define WEX_HOST_JOB_CONFIG_H

#include <cjson/cJSON.h>
#include <wex/abi.h>

#include "registry.h"

/* One plugin a job names, with its (validated) options. */
typedef struct wex__plugin_ref {
    const char *name;     /* inside the job document */
    const cJSON *options; /* NULL when absent */
    wex__plugin *plugin;  /* resolved in the registry */
} wex__plugin_ref;

typedef struct wex__job_config {
    char *path;              /* the job file; "<string>" for in-memory text */
    char *model_path;        /* resolved relative to the job file */
    cJSON *doc;              /* the whole document, defaults filled in */
    char *source_model_path; /* the side's own model, else model_path */
    char *destination_model_path;
    char *plan_shares;      /* "plan_shares" resolved, else NULL */
    const cJSON *topology;  /* defaults filled in */
    wex__plugin_ref source; /* engine */
    const cJSON *source_parallel;
    wex__plugin_ref destination; /* engine */
    const cJSON *destination_parallel;
    wex__plugin_ref policy;
    wex__plugin_ref transport;
    int verify_digest;             /* verify == "digest" */
    uint64_t staging_bytes;        /* a source's packing staging, at most */
    uint64_t device_staging_bytes; /* a destination's pinned window */
    double connect_seconds, step_seconds, peer_seconds, fence_seconds;
    double join_seconds;
    /* "destination.elastic": replicas join and leave; the fewest that
     * must commit a step (0: not elastic) */
    uint64_t elastic_min_replicas;
    /* "destination.elastic.seed" is "replicas": a replica that is behind
     * is filled from one the sources filled (step/elastic_seed.c) */
    int elastic_seed_replicas;
    uint64_t destination_replicas; /* parallel.dp: the most it holds */
    /* "delta": deltas on, the fraction above which an operation goes
     * whole, each destination's inbox (0: 5 % of what it holds) and the
     * threads a rank encodes or applies with (0: its CPUs, at most
     * WEX__DELTA_THREADS) */
    int delta;
    double delta_max_fraction;
    uint64_t delta_inbox_bytes;
    unsigned delta_threads;
    int delta_host_snapshots; /* delta.snapshots "host" */
} wex__job_config;

/* Flags: a job read only to plan need not name an installed transport. */
#define WEX__JOB_PLAN_ONLY 1u

/* Parses and checks a job. On failure the thread's error holds the first
 * problem; with `all_p` every problem comes back, one line each
 * ("FILE: POINTER: MESSAGE"), for the caller to free. */
wex_status wex__job_config_load(const char *path, wex__registry *registry,
                                unsigned flags, wex__job_config **config_p,
                                char **all_p);
/* The same from text; `name` stands for the file in messages and
 * `base_dir` resolves the model path. */
wex_status wex__job_config_parse(const char *name, const char *text,
                                 const char *base_dir, wex__registry *registry,
                                 unsigned flags, wex__job_config **config_p,
                                 char **all_p);
/* A job from a file's path, or from the job's JSON text itself when it
 * starts with '{' (named "<job text>", paths in it relative to the
 * working directory): what wex_job_open, wex_plan_json and the Python
 * package take. */
wex_status wex__job_config_read(const char *path_or_text,
                                wex__registry *registry, unsigned flags,
                                wex__job_config **config_p);
void wex__job_config_free(wex__job_config *config);

#endif /* WEX_HOST_JOB_CONFIG_H */
