/* wex run: the launcher, its worker processes, and the synthetic weights
 * they fill and check. */
#ifndef WEX_CLI_RUN_H
#define WEX_CLI_RUN_H

#include <stdint.h>

#include "fd_io.h"
#include "runtime.h"

#include <stdio.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

typedef struct run_args {
    const char *job;
    uint64_t steps;
    int json;
    int worker;
    uint32_t side;
    uint64_t rank;
    int verify; /* -1: the job's; 0: none; 1: digest */
    int64_t host;           /* -1: every rank; else only this host's */
    const char *rendezvous; /* meet there instead of serving one */
    const char *token;
    const char *job_id;
    int respawn;         /* start a killed rank again, at the next step */
    int keep_going;      /* workers: a failed step is reported, not final */
    uint64_t first_step; /* workers: the step to start at (default 1) */
} run_args;

/* The launcher's state: the job's plan, the rendezvous it serves, and
 * one process per rank (sources first). */
typedef struct launch {
    wex__planner plan;
    wex__store_server *server;
    wex__store_client *client;
    pid_t *pids;
    uint32_t *sides;
    uint64_t *ranks;
    size_t count;
    char self[4096]; /* this executable, to start workers with */
    unsigned char *respawned; /* per worker: started again once */
    int *killed;              /* per worker: the signal that ended it */
} launch;

/* Best of several single-thread memcpy passes, GB/s. */
double wex_run_memcpy_gbps(void);
/* What a worker posted under report/SIDE/RANK, or NULL. */
cJSON *wex_run_worker_report(launch *l, uint32_t side, uint64_t rank);
/* Prints the run's report; returns the exit status. */
int wex_run_report(launch *l, const run_args *a, size_t failed);

/* The value of every element of canonical tensor `canonical` at `step`
 * is a hash of the three; a source writes it through its own layout and a
 * destination checks it through its own. */
void wex_run_fill(const wex_job *job, uint64_t step);
/* Elements (of every local piece) that differ from the step's values. */
uint64_t wex_run_check(const wex_job *job, uint64_t step);

/* `wex run --worker SIDE RANK JOB --steps N`: one rank's process. */
int wex_run_worker(const run_args *a);

#endif /* WEX_CLI_RUN_H */
