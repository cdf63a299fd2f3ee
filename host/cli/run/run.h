/* wex run: the launcher, its worker processes, and the synthetic weights
 * they fill and check. */
#ifndef CLI_RUN_H
#define CLI_RUN_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <wex/wex.h>

#include "tool_checkpoint.h"
#include "tool_plan.h"
#include "tool_store.h"

typedef struct run_args {
    const char *job;
    uint64_t steps;
    int json;
    int worker;
    uint32_t side;
    uint64_t rank;
    int verify;             /* -1: the job's; 0: none; 1: digest */
    int64_t host;           /* -1: every rank; else only this host's */
    const char *rendezvous; /* meet there instead of serving one */
    const char *token;
    const char *job_id;
    int respawn;         /* start a killed rank again, at the next step */
    int keep_going;      /* workers: a failed step is reported, not final */
    uint64_t first_step; /* workers: the step to start at (default 1) */
    const char *from_checkpoint; /* sources read it; destinations check it */
    const char *save;            /* destinations save what they hold */
    uint64_t shard_bytes;        /* the saved checkpoint's shard size */
    double changed; /* the fraction of elements a step changes (1: all) */
    int elastic;    /* replicas join and leave (run_elastic.c) */
    /* destinations move their experts every N steps (0: never;
     * run_rebalance.c) */
    uint64_t rebalance_every;
} run_args;

/* run_elastic.c: the replicas' comings and goings a run plays. */
typedef struct run_replica_event {
    int join; /* else a leave */
    uint64_t replica, step;
} run_replica_event;

typedef struct run_elastic {
    uint64_t replicas, per;    /* the destination's dp, ranks a replica */
    run_replica_event *events; /* by step */
    size_t count;
} run_elastic;

/* The launcher's state: the job's plan, the rendezvous it serves, and
 * one process per rank (sources first). */
typedef struct launch {
    wex_tool_planner *plan;
    wex_tool_store_server *server;
    wex_tool_store_client *client;
    pid_t *pids;
    uint32_t *sides;
    uint64_t *ranks;
    size_t count;
    char self[4096];          /* this executable, to start workers with */
    unsigned char *respawned; /* per worker: started again once */
    int *killed;              /* per worker: the signal that ended it */
    char shares[4096];        /* where the workers' plan shares are */
    int shares_owned;         /* the run made it, and removes it */
    run_elastic elastic;      /* --elastic: who is there when */
    char elastic_job[4200];   /* --elastic: the job made elastic, */
    char elastic_dir[4096];   /* ... in a directory of its own */
} launch;

/* A saved checkpoint's shards, as transformers' save_pretrained cuts
 * them ("5GB"). */
#define RUN_SHARD_BYTES UINT64_C(5000000000)

/* The most steps one run syncs. */
#define RUN_STEPS_MAX 1000000

/* run_rebalance.c: before step `step`, a destination whose run moves
 * its experts every a->rebalance_every steps hands the job a new
 * placement: each MoE layer's slots shuffled (seeded by the step and the
 * layer, the same on every rank), every logical expert still held. */
wex_status run_rebalance(wex_job *job, const run_args *a, uint64_t step);

/* Starts every rank this host runs (run_launch.c). */
wex_status run_launch(launch *l, const run_args *a);
/* Waits for every worker, drawing progress on a terminal; returns the
 * number of workers that failed. */
size_t run_wait(launch *l, const run_args *a);
/* Frees what run_launch made, killing the workers first if asked. */
void run_launch_close(launch *l, int kill_workers);
/* run_shares.c: every source rank this host starts gets its plan share,
 * in WEX_PLAN_SHARES or a directory of the run's (l->shares, which
 * spawn hands the source workers). */
wex_status run_write_shares(launch *l, const run_args *a);
/* Removes the run's own share directory, if it made one. */
void run_remove_shares(launch *l);
/* What a worker posted under report/SIDE/RANK, or NULL. */
cJSON *run_worker_report(launch *l, uint32_t side, uint64_t rank);

/* run_checkpoint.c: --from-checkpoint and --save checked before any
 * rank starts; a worker's checkpoint (a source binds it, a destination
 * keeps it to check against); what a destination holds that differs from
 * the checkpoint, or from step `step`'s synthetic weights without one. */
wex_status run_check_checkpoint(launch *l, const run_args *a);
wex_status run_worker_checkpoint_open(wex_job *job, const run_args *a,
                                      wex_tool_checkpoint **ck_p);
uint64_t run_worker_mismatches(const wex_job *job,
                               const wex_tool_checkpoint *ck, uint64_t step);
void run_worker_checkpoint_close(wex_tool_checkpoint *ck);

/* run_memory.c: the ranks this run starts fit in MemAvailable. */
wex_status run_check_memory(launch *l, const run_args *a);

/* run_memcpy.c: this machine's memcpy GB/s with 1 or 2 threads copying
 * at once (the latter all threads together). */
double run_memcpy_gbps(int threads);

/* run_elastic.c. The leave and join events of WEX_RUN_FAULT (other
 * faults are skipped), checked against the replicas and steps. */
wex_status run_elastic_parse(const char *faults, uint64_t replicas,
                             uint64_t per, uint64_t steps, run_elastic *el);
void run_elastic_free(run_elastic *el);
/* Whether the replica takes part in `step`. */
int run_elastic_present(const run_elastic *el, uint64_t replica, uint64_t step);
/* The first step from `step` on the replica takes part in; 0: none. */
uint64_t run_elastic_next(const run_elastic *el, uint64_t replica,
                          uint64_t step, uint64_t steps);
/* Sources: waits until every replica due at `step` has connected and
 * every one gone by it has left. */
wex_status run_elastic_before_step(const run_elastic *el,
                                   wex_tool_store_client *c, uint64_t step);
/* Joiners: waits until the sources finished `done` steps. */
wex_status run_elastic_await_steps(wex_tool_store_client *c, uint64_t done);
/* Source rank 0: one more step finished. */
wex_status run_elastic_step_done(wex_tool_store_client *c);
/* Adds one to elastic/WHAT/RANK ("arrived", "left"). */
wex_status run_elastic_tell(wex_tool_store_client *c, const char *what,
                            uint64_t rank);
/* The job, or a copy made elastic (min_replicas 1, its paths absolute)
 * in a directory of its own (`dir_out`, "" when none was made). */
wex_status run_elastic_job(const char *job, char *out, size_t cap,
                           char *dir_out, size_t dir_cap);
void run_elastic_remove_job(const char *job, const char *dir);

/* Prints the run's report; returns the exit status (run_report.c). */
int run_report(launch *l, const run_args *a, size_t failed);

/* `wex run --worker SIDE RANK JOB --steps N`: one rank's process
 * (run_worker.c). */
int run_worker(const run_args *a);

#endif /* CLI_RUN_H */
