/* The report of `wex run`: per-step time and throughput against this
 * machine's memcpy bandwidth, and whether every byte was verified. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run.h"
#include "tool_store.h"

typedef struct step_total {
    double seconds; /* the slowest destination's */
    double bytes;   /* every destination's */
    int ok;
    unsigned char *seen;          /* per worker: reported this step committed */
    double attempts, failed_over; /* the most any rank reported */
    double puts;                  /* every source's */
    /* delta steps (the ranks that count): bytes on the wire, elements
     * compared and changed, the slowest apply, the modes seen (a bit per
     * WEX_SYNC_*) */
    double wire_bytes, delta_elements, changed_elements, apply_seconds;
    unsigned modes;
    /* --elastic, as the sources saw it: replicas there, committed,
     * joined, left and seeded by a replica (-1: no source said); and the
     * bytes the seeded ranks took from a replica, not the sources */
    double replicas[5];
    double seeded_bytes;
} step_total;

static double number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void add_error(cJSON *errors, const char *who, const char *what)
{
    char line[1200];

    snprintf(line, sizeof(line), "%s: %s", who, what);
    cJSON_AddItemToArray(errors, cJSON_CreateString(line));
}

/* A source's "paths" ({"destination rank": "am"}) into the run's count
 * of source-destination pairs per path. */
static void count_paths(const cJSON *doc, cJSON *paths)
{
    const cJSON *one;

    cJSON_ArrayForEach(one, cJSON_GetObjectItemCaseSensitive(doc, "paths"))
    {
        cJSON *n;
        if (!cJSON_IsString(one))
            continue;
        n = cJSON_GetObjectItemCaseSensitive(paths, one->valuestring);
        if (n == NULL)
            cJSON_AddNumberToObject(paths, one->valuestring, 1);
        else
            cJSON_SetNumberValue(n, n->valuedouble + 1);
    }
}

/* A rank's step of a delta job into the step's totals. */
static void fold_delta(step_total *t, const cJSON *one)
{
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(one, "mode");

    /* a report without wire_bytes (an older worker) moved every byte */
    t->wire_bytes += cJSON_GetObjectItemCaseSensitive(one, "wire_bytes")
                         ? number(one, "wire_bytes")
                         : number(one, "bytes");
    if (!cJSON_IsString(mode))
        return;
    t->modes |= strcmp(mode->valuestring, "delta") == 0   ? 1u << WEX_SYNC_DELTA
                : strcmp(mode->valuestring, "mixed") == 0 ? 1u << WEX_SYNC_MIXED
                                                          : 1u << WEX_SYNC_FULL;
    t->delta_elements += number(one, "delta_elements");
    t->changed_elements += number(one, "changed_elements");
    if (number(one, "apply_seconds") > t->apply_seconds)
        t->apply_seconds = number(one, "apply_seconds");
}

/* "full", "delta" or "mixed": the mode every counted rank reported, or
 * mixed when they differ. */
static const char *step_mode(const step_total *t)
{
    if (t->modes == 1u << WEX_SYNC_DELTA)
        return "delta";
    if (t->modes == 1u << WEX_SYNC_FULL)
        return "full";
    return "mixed";
}

/* A source's "replicas" of a step (--elastic) into the step's. */
static void fold_replicas(step_total *t, const cJSON *one)
{
    static const char *const keys[5] = {"present", "committed", "joined",
                                        "left", "seeded"};
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(one, "replicas");

    for (int k = 0; cJSON_IsObject(r) && k < 5; k++)
        if (number(r, keys[k]) > t->replicas[k])
            t->replicas[k] = number(r, keys[k]);
}

/* One rank's report into the per-step totals; returns whether every
 * step it reported committed and verified. */
static int fold_one(launch *l, const run_args *a, int verify_digest, size_t i,
                    int counts, step_total *steps, cJSON *errors, cJSON *paths,
                    double *snapshot_bytes)
{
    cJSON *doc = run_worker_report(l, l->sides[i], l->ranks[i]);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "steps");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(doc, "error");
    const cJSON *one;
    int verified = 1, step_errors = 0;
    char who[96];

    snprintf(who, sizeof(who), "%s rank %llu",
             l->sides[i] == WEX_SIDE_SOURCE ? "source" : "destination",
             (unsigned long long)l->ranks[i]);
    count_paths(doc, paths);
    *snapshot_bytes += number(doc, "snapshot_bytes");
    cJSON_ArrayForEach(one, list)
    {
        uint64_t s = (uint64_t)number(one, "step");
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(one, "error");
        if (s == 0 || s > a->steps ||
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(one, "missed")))
            continue;
        if (cJSON_IsString(why)) {
            add_error(errors, who, why->valuestring);
            step_errors = 1;
            verified = 0;
            continue;
        }
        if (number(one, "attempts") > steps[s - 1].attempts)
            steps[s - 1].attempts = number(one, "attempts");
        if (number(one, "failed_over") > steps[s - 1].failed_over)
            steps[s - 1].failed_over = number(one, "failed_over");
        steps[s - 1].puts += number(one, "puts");
        if (l->sides[i] == WEX_SIDE_SOURCE)
            fold_replicas(&steps[s - 1], one);
        if (!counts)
            continue;
        steps[s - 1].seen[i] = 1;
        if (number(one, "seconds") > steps[s - 1].seconds)
            steps[s - 1].seconds = number(one, "seconds");
        steps[s - 1].bytes += number(one, "bytes");
        if (number(one, "seeded_bytes") > 0) /* from a replica */
            steps[s - 1].seeded_bytes += number(one, "seeded_bytes");
        else
            fold_delta(&steps[s - 1], one);
        if (number(one, "mismatched_elements") != 0 ||
            (verify_digest && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                                  one, "digests_matched"))))
            verified = 0;
    }
    if (l->killed[i] != 0) {
        char what[64];
        snprintf(what, sizeof(what), "killed by signal %d", l->killed[i]);
        add_error(errors, who, what);
    } else if (doc == NULL || (cJSON_IsString(err) && !step_errors)) {
        add_error(errors, who,
                  cJSON_IsString(err) ? err->valuestring
                                      : "exited without a "
                                        "report");
        verified = 0;
    }
    cJSON_Delete(doc);
    return verified;
}

/* Whether worker i takes part in `step`: every rank does, but with
 * --elastic a destination whose replica is gone. */
static int due(const launch *l, size_t i, uint64_t step)
{
    if (l->elastic.per == 0 || l->sides[i] != WEX_SIDE_DESTINATION)
        return 1;
    return run_elastic_present(&l->elastic, l->ranks[i] / l->elastic.per, step);
}

/* Folds the ranks' reports into per-step totals; returns whether every
 * destination committed and verified every step it took part in. */
static int fold(launch *l, const run_args *a, int verify_digest,
                step_total *steps, cJSON *errors, cJSON *paths,
                double *snapshot_bytes)
{
    int verified = 1, have_dst = 0;

    /* Destinations tell what landed; a host running only sources
     * reports what its sources sent (and saw committed). */
    for (size_t i = 0; i < l->count; i++)
        have_dst |= l->sides[i] == WEX_SIDE_DESTINATION;
    for (uint64_t s = 0; s < a->steps; s++) {
        if ((steps[s].seen = calloc(l->count ? l->count : 1, 1)) == NULL)
            return 0;
        for (int k = 0; k < 5; k++)
            steps[s].replicas[k] = -1;
    }
    for (size_t i = 0; i < l->count; i++) {
        int counts = !have_dst || l->sides[i] == WEX_SIDE_DESTINATION;
        verified &= fold_one(l, a, verify_digest, i, counts, steps, errors,
                             paths, snapshot_bytes);
        for (uint64_t s = 0; counts && s < a->steps; s++)
            if (!steps[s].seen[i] && due(l, i, s + 1))
                verified = 0;
    }
    for (uint64_t s = 0; s < a->steps; s++) {
        steps[s].ok = 1;
        for (size_t i = 0; i < l->count; i++)
            if ((!have_dst || l->sides[i] == WEX_SIDE_DESTINATION) &&
                !steps[s].seen[i] && due(l, i, s + 1))
                steps[s].ok = 0;
    }
    return verified;
}

/* A step's delta figures in its --json entry. */
static void add_step_delta(cJSON *one, const step_total *t)
{
    cJSON_AddNumberToObject(one, "wire_bytes", t->wire_bytes);
    if (t->modes == 0)
        return;
    cJSON_AddStringToObject(one, "mode", step_mode(t));
    cJSON_AddNumberToObject(
        one, "changed_fraction",
        t->delta_elements > 0 ? t->changed_elements / t->delta_elements : 0);
    cJSON_AddNumberToObject(one, "apply_seconds", t->apply_seconds);
}

/* ", delta: 1.55 % of the bytes on the wire, 1.00 % changed, applied in
 * 0.0012 s" */
static void print_step_delta(const step_total *t)
{
    printf(", %s: %.2f %% of the bytes on the wire",
           t->modes ? step_mode(t) : "full",
           t->bytes > 0 ? 100 * t->wire_bytes / t->bytes : 0);
    if (t->delta_elements > 0)
        printf(", %.2f %% changed, applied in %.4f s",
               100 * t->changed_elements / t->delta_elements, t->apply_seconds);
}

/* "paths      am for 8 source-destination rank pairs" */
static void print_paths(const cJSON *paths)
{
    const cJSON *one;
    const char *sep = "";

    if (cJSON_GetArraySize(paths) == 0)
        return;
    printf("paths      ");
    cJSON_ArrayForEach(one, paths)
    {
        printf("%s%s for %.0f", sep, one->string, one->valuedouble);
        sep = ", ";
    }
    printf(" source-destination rank pairs\n");
}

/* GB/s of `bytes` in `seconds`, and a figure's ratio to its limit; 0
 * where there is nothing to divide by. */
static double gbps(double bytes, double seconds)
{
    return seconds > 0 ? bytes / seconds / 1e9 : 0;
}

static double ratio(double figure, double limit)
{
    return limit > 0 ? figure / limit : 0;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The median committed step's GB/s (0 when none committed): on a shared
 * machine a neighbour's burst slows some steps, and the mean with them,
 * while memcpy's figure is the best of its passes. */
static double median_gbps(const step_total *steps, uint64_t count)
{
    double *v = malloc((count ? count : 1) * sizeof(*v)), m = 0;
    size_t n = 0;

    if (v == NULL)
        return 0;
    for (uint64_t s = 0; s < count; s++)
        if (steps[s].ok && steps[s].seconds > 0)
            v[n++] = gbps(steps[s].bytes, steps[s].seconds);
    if (n > 0) {
        qsort(v, n, sizeof(*v), by_value);
        m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }
    free(v);
    return m;
}

/* --rebalance-every: the destination ranks every rank laid out again
 * under a new placement, the most any rank saw (every rank sees them
 * all, unless it died). */
static double placed_ranks(launch *l)
{
    double most = 0;

    for (size_t i = 0; i < l->count; i++) {
        cJSON *doc = run_worker_report(l, l->sides[i], l->ranks[i]);
        double n = number(doc, "placed_ranks");
        most = n > most ? n : most;
        cJSON_Delete(doc);
    }
    return most;
}

int run_report(launch *l, const run_args *a, size_t failed)
{
    step_total *steps = calloc(a->steps, sizeof(*steps));
    cJSON *doc = cJSON_CreateObject(), *list, *errors, *paths;
    double memcpy_gbps, memcpy2_gbps, mean, steady, median;
    double total_s = 0, total_b = 0, warm_s = 0, warm_b = 0;
    double snapshot_bytes = 0, wire_b = 0;
    wex_tool_job_info job;
    int verified;
    char *text;

    wex_tool_planner_get_job(l->plan, &job);
    if (steps == NULL || doc == NULL) {
        free(steps);
        cJSON_Delete(doc);
        return CLI_EXIT_FAILED;
    }
    errors = cJSON_CreateArray();
    paths = cJSON_CreateObject();
    /* Verified speaks of the weights; the exit status also of the
     * processes (a killed rank the job failed over from still failed). */
    verified =
        fold(l, a, job.verify_digest, steps, errors, paths, &snapshot_bytes);
    memcpy_gbps = run_memcpy_gbps(1);
    memcpy2_gbps = run_memcpy_gbps(2);
    cJSON_AddStringToObject(doc, "job", job.path);
    cJSON_AddStringToObject(doc, "source_engine", job.source_engine);
    cJSON_AddStringToObject(doc, "destination_engine", job.destination_engine);
    cJSON_AddNumberToObject(doc, "source_ranks", (double)job.source_ranks);
    cJSON_AddNumberToObject(doc, "destination_ranks",
                            (double)job.destination_ranks);
    cJSON_AddStringToObject(doc, "transport", job.transport);
    cJSON_AddStringToObject(doc, "verify",
                            job.verify_digest ? "digest" : "none");
    /* source-destination rank pairs per path the transport took */
    cJSON_AddItemToObject(doc, "paths", paths);
    list = cJSON_AddArrayToObject(doc, "steps");
    for (uint64_t s = 0; s < a->steps; s++) {
        cJSON *one = cJSON_CreateObject();
        cJSON_AddNumberToObject(one, "step", (double)(s + 1));
        cJSON_AddBoolToObject(one, "committed", steps[s].ok);
        cJSON_AddNumberToObject(one, "seconds", steps[s].seconds);
        cJSON_AddNumberToObject(one, "bytes", steps[s].bytes);
        cJSON_AddNumberToObject(one, "gb_per_s",
                                gbps(steps[s].bytes, steps[s].seconds));
        cJSON_AddNumberToObject(one, "puts", steps[s].puts);
        if (steps[s].attempts > 1)
            cJSON_AddNumberToObject(one, "attempts", steps[s].attempts);
        if (steps[s].failed_over > 0)
            cJSON_AddNumberToObject(one, "failed_over", steps[s].failed_over);
        if (job.delta)
            add_step_delta(one, &steps[s]);
        if (a->elastic && steps[s].replicas[0] >= 0) {
            cJSON *r = cJSON_AddObjectToObject(one, "replicas");
            cJSON_AddNumberToObject(r, "present", steps[s].replicas[0]);
            cJSON_AddNumberToObject(r, "committed", steps[s].replicas[1]);
            cJSON_AddNumberToObject(r, "joined", steps[s].replicas[2]);
            cJSON_AddNumberToObject(r, "left", steps[s].replicas[3]);
            if (steps[s].replicas[4] > 0) {
                cJSON_AddNumberToObject(r, "seeded", steps[s].replicas[4]);
                cJSON_AddNumberToObject(r, "seeded_bytes",
                                        steps[s].seeded_bytes);
            }
        }
        cJSON_AddItemToArray(list, one);
        if (steps[s].ok) {
            total_s += steps[s].seconds;
            total_b += steps[s].bytes;
            wire_b += steps[s].wire_bytes;
            if (s > 0) { /* the first step also maps peers' memory */
                warm_s += steps[s].seconds;
                warm_b += steps[s].bytes;
            }
        }
    }
    mean = gbps(total_b, total_s);
    steady = gbps(warm_b, warm_s);
    median = median_gbps(steps, a->steps);
    cJSON_AddNumberToObject(doc, "gb_per_s", mean);
    cJSON_AddNumberToObject(doc, "memcpy_gb_per_s", memcpy_gbps);
    cJSON_AddNumberToObject(doc, "memcpy_two_threads_gb_per_s", memcpy2_gbps);
    cJSON_AddNumberToObject(doc, "ratio_to_memcpy", ratio(mean, memcpy_gbps));
    if (warm_s > 0) {
        cJSON_AddNumberToObject(doc, "steady_gb_per_s", steady);
        cJSON_AddNumberToObject(doc, "steady_ratio_to_memcpy",
                                ratio(steady, memcpy_gbps));
    }
    if (median > 0) {
        cJSON_AddNumberToObject(doc, "median_gb_per_s", median);
        cJSON_AddNumberToObject(doc, "median_ratio_to_memcpy",
                                ratio(median, memcpy_gbps));
    }
    if (job.delta) {
        cJSON_AddNumberToObject(doc, "changed", a->changed);
        cJSON_AddNumberToObject(doc, "snapshot_bytes", snapshot_bytes);
        cJSON_AddNumberToObject(doc, "wire_bytes", wire_b);
        cJSON_AddNumberToObject(doc, "wire_fraction",
                                total_b > 0 ? wire_b / total_b : 0);
    }
    if (a->rebalance_every > 0)
        cJSON_AddNumberToObject(doc, "placed_ranks", placed_ranks(l));
    cJSON_AddBoolToObject(doc, "verified", verified);
    if (l->server != NULL)
        cJSON_AddNumberToObject(doc, "rendezvous_keys",
                                (double)wex_tool_store_key_count(l->server));
    cJSON_AddItemToObject(doc, "errors", errors);
    if (a->json) {
        text = cJSON_Print(doc);
        if (text != NULL)
            puts(text);
        free(text);
    } else {
        printf("job        %s: %s (%llu rank%s) -> %s (%llu rank%s) over "
               "%s, verify %s\n",
               job.path, job.source_engine,
               (unsigned long long)job.source_ranks,
               job.source_ranks == 1 ? "" : "s", job.destination_engine,
               (unsigned long long)job.destination_ranks,
               job.destination_ranks == 1 ? "" : "s", job.transport,
               job.verify_digest ? "digest" : "none");
        for (uint64_t s = 0; s < a->steps; s++) {
            printf("step %-5llu %s %.4f s, %.0f bytes, %.2f GB/s",
                   (unsigned long long)(s + 1),
                   steps[s].ok ? "committed" : "FAILED   ", steps[s].seconds,
                   steps[s].bytes, gbps(steps[s].bytes, steps[s].seconds));
            if (steps[s].failed_over > 0)
                printf(", failed over %.0f dead source rank%s",
                       steps[s].failed_over,
                       steps[s].failed_over > 1 ? "s" : "");
            if (job.delta && steps[s].ok)
                print_step_delta(&steps[s]);
            putchar('\n');
            if (a->elastic &&
                (steps[s].replicas[2] > 0 || steps[s].replicas[3] > 0)) {
                printf("           replicas: %.0f joined, %.0f left; %.0f "
                       "there, %.0f committed",
                       steps[s].replicas[2], steps[s].replicas[3],
                       steps[s].replicas[0], steps[s].replicas[1]);
                if (steps[s].replicas[4] > 0)
                    printf(", %.0f seeded from a replica (%.0f bytes, none "
                           "from the sources)",
                           steps[s].replicas[4], steps[s].seeded_bytes);
                putchar('\n');
            }
        }
        printf("throughput %.2f GB/s; memcpy on this machine %.2f GB/s "
               "(one thread); ratio %.2f\n",
               mean, memcpy_gbps, ratio(mean, memcpy_gbps));
        printf("memcpy     %.2f GB/s with two threads copying at once "
               "(ratio to it %.2f)\n",
               memcpy2_gbps, ratio(mean, memcpy2_gbps));
        if (warm_s > 0)
            printf("steady     %.2f GB/s over the steps after the first "
                   "(ratio %.2f)\n",
                   steady, ratio(steady, memcpy_gbps));
        if (median > 0)
            printf("median     %.2f GB/s, the median committed step "
                   "(ratio %.2f)\n",
                   median, ratio(median, memcpy_gbps));
        print_paths(paths);
        if (a->rebalance_every > 0)
            printf("placement  the destinations moved their experts every "
                   "%llu steps: %.0f rank layouts followed\n",
                   (unsigned long long)a->rebalance_every, placed_ranks(l));
        if (job.delta)
            printf("delta      %.0f bytes on the wire of %.0f (%.2f %%); "
                   "sources' snapshots %.0f bytes; each step changes %g %% "
                   "of the elements\n",
                   wire_b, total_b, total_b > 0 ? 100 * wire_b / total_b : 0,
                   snapshot_bytes, 100 * a->changed);
        for (int i = 0; i < cJSON_GetArraySize(errors); i++)
            printf("error      %s\n",
                   cJSON_GetArrayItem(errors, i)->valuestring);
        printf("%s\n", verified ? "verified: every element of every "
                                  "destination matches what was sent"
                                : "NOT verified");
    }
    cJSON_Delete(doc);
    for (uint64_t s = 0; s < a->steps; s++)
        free(steps[s].seen);
    free(steps);
    return verified && failed == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
}
