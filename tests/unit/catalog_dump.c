/*
 * catalog_dump: prints, for each config.json given, the tensor count, total
 * bytes (== the checkpoint's metadata.total_size), total elements
 * (parameters, fp8 scales included) and how long loading took. With -v it
 * also lists every tensor as "name dtype [shape] bytes", in canonical order.
 *
 *   catalog_dump [-v] config.json...
 */
#include "catalog.h"
#include "error.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void list_tensors(const wex_model *model)
{
    const wex__tensor *t;
    uint64_t i;
    uint32_t d;

    for (i = 0; i < model->count; i++) {
        t = &model->tensors[i];
        printf("%s %s [", t->name, wex_dtype_name(t->dtype));
        for (d = 0; d < t->ndim; d++)
            printf("%s%" PRIu64, d ? ", " : "", t->shape[d]);
        printf("] %" PRIu64 "\n", t->bytes);
    }
}

int main(int argc, char **argv)
{
    wex_model *model;
    double t0, ms;
    int verbose = 0, rc = 0, i;

    if (argc > 1 && strcmp(argv[1], "-v") == 0)
        verbose = 1;
    if (argc < 2 + verbose) {
        fprintf(stderr, "usage: %s [-v] config.json...\n", argv[0]);
        return 2;
    }
    printf("%-40s %-22s %8s %18s %18s %9s\n", "config", "architecture",
           "tensors", "bytes", "elements", "load ms");
    for (i = 1 + verbose; i < argc; i++) {
        t0 = now_ms();
        if (wex__model_load(argv[i], &model) != WEX_OK) {
            fprintf(stderr, "%s\n", wex__last_error());
            rc = 1;
            continue;
        }
        ms = now_ms() - t0;
        printf("%-40s %-22s %8" PRIu64 " %18" PRIu64 " %18" PRIu64 " %9.2f\n",
               argv[i], model->architecture, model->count, model->total_bytes,
               model->total_elements, ms);
        if (verbose)
            list_tensors(model);
        wex__model_free(model);
    }
    return rc;
}
