/* The report of `wex run`: per-step time and throughput against this
 * machine's memcpy bandwidth, and whether every byte was verified. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run.h"

typedef struct step_total {
    double seconds; /* the slowest destination's */
    double bytes;   /* every destination's */
    int ok;
    unsigned char *seen; /* per worker: reported this step committed */
    double attempts, failed_over; /* the most any rank reported */
    double puts;                  /* every source's */
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

    cJSON_ArrayForEach(one, cJSON_GetObjectItemCaseSensitive(doc, "paths")) {
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

/* One rank's report into the per-step totals; returns whether every
 * step it reported committed and verified. */
static int fold_one(launch *l, const run_args *a, size_t i, int counts,
                    step_total *steps, cJSON *errors, cJSON *paths)
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
    cJSON_ArrayForEach(one, list) {
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
        if (!counts)
            continue;
        steps[s - 1].seen[i] = 1;
        if (number(one, "seconds") > steps[s - 1].seconds)
            steps[s - 1].seconds = number(one, "seconds");
        steps[s - 1].bytes += number(one, "bytes");
        if (number(one, "mismatched_elements") != 0 ||
            (l->plan.job->verify_digest &&
             !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                 one, "digests_matched"))))
            verified = 0;
    }
    if (l->killed[i] != 0) {
        char what[64];
        snprintf(what, sizeof(what), "killed by signal %d", l->killed[i]);
        add_error(errors, who, what);
    } else if (doc == NULL || (cJSON_IsString(err) && !step_errors)) {
        add_error(errors, who, cJSON_IsString(err) ? err->valuestring
                                                    : "exited without a "
                                                      "report");
        verified = 0;
    }
    cJSON_Delete(doc);
    return verified;
}

/* Folds the ranks' reports into per-step totals; returns whether every
 * destination committed and verified every step. */
static int fold(launch *l, const run_args *a, step_total *steps,
                cJSON *errors, cJSON *paths)
{
    int verified = 1, have_dst = 0;

    /* Destinations tell what landed; a host running only sources
     * reports what its sources sent (and saw committed). */
    for (size_t i = 0; i < l->count; i++)
        have_dst |= l->sides[i] == WEX_SIDE_DESTINATION;
    for (uint64_t s = 0; s < a->steps; s++)
        if ((steps[s].seen = calloc(l->count ? l->count : 1, 1)) == NULL)
            return 0;
    for (size_t i = 0; i < l->count; i++) {
        int counts = !have_dst || l->sides[i] == WEX_SIDE_DESTINATION;
        verified &= fold_one(l, a, i, counts, steps, errors, paths);
        for (uint64_t s = 0; counts && s < a->steps; s++)
            if (!steps[s].seen[i])
                verified = 0;
    }
    for (uint64_t s = 0; s < a->steps; s++) {
        steps[s].ok = 1;
        for (size_t i = 0; i < l->count; i++)
            if ((!have_dst || l->sides[i] == WEX_SIDE_DESTINATION) &&
                !steps[s].seen[i])
                steps[s].ok = 0;
    }
    return verified;
}

/* "paths      am for 8 source-destination rank pairs" */
static void print_paths(const cJSON *paths)
{
    const cJSON *one;
    const char *sep = "";

    if (cJSON_GetArraySize(paths) == 0)
        return;
    printf("paths      ");
    cJSON_ArrayForEach(one, paths) {
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

int run_report(launch *l, const run_args *a, size_t failed)
{
    step_total *steps = calloc(a->steps, sizeof(*steps));
    cJSON *doc = cJSON_CreateObject(), *list, *errors, *paths;
    double memcpy_gbps, memcpy2_gbps, mean, steady, median;
    double total_s = 0, total_b = 0, warm_s = 0, warm_b = 0;
    int verified;
    char *text;

    if (steps == NULL || doc == NULL) {
        free(steps);
        cJSON_Delete(doc);
        return CLI_EXIT_FAILED;
    }
    errors = cJSON_CreateArray();
    paths = cJSON_CreateObject();
    /* Verified speaks of the weights; the exit status also of the
     * processes (a killed rank the job failed over from still failed). */
    verified = fold(l, a, steps, errors, paths);
    memcpy_gbps = run_memcpy_gbps(1);
    memcpy2_gbps = run_memcpy_gbps(2);
    cJSON_AddStringToObject(doc, "job", l->plan.job->path);
    cJSON_AddStringToObject(doc, "source_engine", l->plan.job->source.name);
    cJSON_AddStringToObject(doc, "destination_engine",
                            l->plan.job->destination.name);
    cJSON_AddNumberToObject(doc, "source_ranks", (double)l->plan.src.ranks);
    cJSON_AddNumberToObject(doc, "destination_ranks",
                            (double)l->plan.dst.ranks);
    cJSON_AddStringToObject(doc, "transport", l->plan.job->transport.name);
    cJSON_AddStringToObject(doc, "verify",
                            l->plan.job->verify_digest ? "digest" : "none");
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
        cJSON_AddItemToArray(list, one);
        if (steps[s].ok) {
            total_s += steps[s].seconds;
            total_b += steps[s].bytes;
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
    cJSON_AddBoolToObject(doc, "verified", verified);
    if (l->server != NULL)
        cJSON_AddNumberToObject(doc, "rendezvous_keys",
                                (double)wex__store_key_count(l->server));
    cJSON_AddItemToObject(doc, "errors", errors);
    if (a->json) {
        text = cJSON_Print(doc);
        if (text != NULL)
            puts(text);
        free(text);
    } else {
        printf("job        %s: %s (%llu rank%s) -> %s (%llu rank%s) over "
               "%s, verify %s\n",
               l->plan.job->path, l->plan.job->source.name,
               (unsigned long long)l->plan.src.ranks,
               l->plan.src.ranks == 1 ? "" : "s",
               l->plan.job->destination.name,
               (unsigned long long)l->plan.dst.ranks,
               l->plan.dst.ranks == 1 ? "" : "s",
               l->plan.job->transport.name,
               l->plan.job->verify_digest ? "digest" : "none");
        for (uint64_t s = 0; s < a->steps; s++) {
            printf("step %-5llu %s %.4f s, %.0f bytes, %.2f GB/s",
                   (unsigned long long)(s + 1),
                   steps[s].ok ? "committed" : "FAILED   ", steps[s].seconds,
                   steps[s].bytes, gbps(steps[s].bytes, steps[s].seconds));
            if (steps[s].failed_over > 0)
                printf(", failed over %.0f dead source rank%s",
                       steps[s].failed_over,
                       steps[s].failed_over > 1 ? "s" : "");
            putchar('\n');
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
