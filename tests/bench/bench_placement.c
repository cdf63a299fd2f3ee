/*
 * What a placement change costs the ranks of a large job: the planner of
 * JOB.json (whose destination has redundant experts), then one
 * destination replica's experts moved (every MoE layer's slots
 * shuffled): the time every process of the job spends laying that
 * replica out again (wex__planner_open_placed + wex__planner_place), and
 * the time each rank then spends planning its operations again, for the
 * busiest rank and summed over every rank of both sides (what the job's
 * processes spend together), beside planning every rank from scratch.
 *
 * usage: bench_placement JOB.json REPLICA
 * prints: place_ms, the slowest rank's plan_ms, every rank's plan_s
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "clock.h"
#include "error.h"
#include "host_registry.h"
#include "plan.h"
#include "planner.h"
#include "registry.h"

static double plan_rank(wex__planner *p, uint32_t side, uint64_t rank,
                        size_t *ops)
{
    wex_plan_builder b;
    double t0 = wex__now(), dt;

    wex__plan_builder_init(&b, &p->src, &p->dst);
    if (wex__planner_rank(p, side, rank, &b) != WEX_OK) {
        fprintf(stderr, "bench_placement: %s\n", wex__last_error());
        exit(1);
    }
    dt = wex__now() - t0;
    *ops = b.count;
    wex__plan_builder_fini(&b);
    return dt;
}

/* Every rank of both sides planned: the sum, and the slowest. */
static void plan_all(wex__planner *p, double *sum, double *most)
{
    *sum = *most = 0;
    for (uint32_t side = 0; side < 2; side++) {
        const wex__side *s = side == WEX_SIDE_SOURCE ? &p->src : &p->dst;
        for (uint64_t r = 0; r < s->ranks; r++) {
            size_t ops;
            double dt = plan_rank(p, side, r, &ops);
            *sum += dt;
            *most = dt > *most ? dt : *most;
        }
    }
}

/* Each MoE layer's slots: slot p holds (p * 5 + layer) % experts. */
static cJSON *moved(uint64_t layers, uint64_t physical, uint64_t experts)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *rows = cJSON_AddArrayToObject(doc, "physical_to_logical");
    int *row = malloc(physical * sizeof(*row));

    for (uint64_t l = 0; l < layers; l++) {
        for (uint64_t p = 0; p < physical; p++)
            row[p] = (int)((p * 5 + l) % experts);
        cJSON_AddItemToArray(rows, cJSON_CreateIntArray(row, (int)physical));
    }
    free(row);
    return doc;
}

int main(int argc, char **argv)
{
    wex__registry *registry = NULL;
    wex__planner p;
    wex__engine *engine = NULL;
    uint64_t replica, per, experts, layers, physical;
    double t0, place, sum0 = 0, most0 = 0, sum1 = 0, most1 = 0;
    cJSON *map;

    if (argc != 3) {
        fprintf(stderr, "usage: bench_placement JOB.json REPLICA\n");
        return 2;
    }
    replica = strtoull(argv[2], NULL, 10);
    setenv("WEX_PLUGIN_MANIFESTS", WEX_BUILD_PLUGINS, 0);
    if (wex__registry_scan(&registry) != WEX_OK ||
        wex__planner_open(&p, registry, argv[1]) != WEX_OK) {
        fprintf(stderr, "bench_placement: %s\n", wex__last_error());
        return 1;
    }
    if (wex__planner_expert_slots(&p, &layers, &physical, &experts) != WEX_OK) {
        fprintf(stderr, "bench_placement: %s\n", wex__last_error());
        return 1;
    }
    per = p.dst.ranks / (uint64_t)cJSON_GetObjectItemCaseSensitive(
                            p.job->destination_parallel, "dp")
                            ->valuedouble;
    printf("job: %llu source ranks, %llu destination ranks (%llu a replica); "
           "%llu MoE layers of %llu slots (%llu experts)\n",
           (unsigned long long)p.src.ranks, (unsigned long long)p.dst.ranks,
           (unsigned long long)per, (unsigned long long)layers,
           (unsigned long long)physical, (unsigned long long)experts);
    if (getenv("BENCH_PLACE_ONLY") == NULL)
        plan_all(&p, &sum0, &most0);
    map = moved(layers, physical, experts);
    t0 = wex__now();
    if (wex__planner_open_placed(&p, map, &engine) != WEX_OK ||
        wex__planner_place(&p, engine, replica * per, per) != WEX_OK) {
        fprintf(stderr, "bench_placement: %s\n", wex__last_error());
        return 1;
    }
    place = wex__now() - t0;
    wex__engine_close(engine);
    cJSON_Delete(map);
    if (getenv("BENCH_PLACE_ONLY") == NULL)
        plan_all(&p, &sum1, &most1);
    printf("place_ms %.1f (replica %llu's %llu ranks laid out again, the "
           "destination's index and the policy renewed: once per process)\n",
           place * 1e3, (unsigned long long)replica, (unsigned long long)per);
    printf("plan_ms %.2f (the slowest rank planning its operations again; "
           "%.2f before the move)\n",
           most1 * 1e3, most0 * 1e3);
    printf("plan_s %.3f (every rank of both sides, summed; %.3f before)\n",
           sum1, sum0);
    wex__planner_close(&p);
    wex__registry_free(registry);
    return 0;
}
