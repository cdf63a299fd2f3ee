#include "layout_slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Layer and expert of a canonical expert weight's name
 * ("model.layers.3.mlp.experts.17.gate_proj.weight"); 0 when the name is
 * no expert's. */
static int expert_of(const char *name, long *layer, long *expert)
{
    const char *l = strstr(name, "layers."), *x = strstr(name, ".experts.");

    if (l == NULL || x == NULL)
        return 0;
    *layer = strtol(l + 7, NULL, 10);
    *expert = strtol(x + 9, NULL, 10);
    return 1;
}

/* The experts tensor's slots: slot -> logical expert (-1 when no piece
 * says), and its layer; 0 when the tensor holds no experts. */
static int slots_of(const cJSON *tensor, long *slots, long n, long *layer)
{
    const cJSON *pieces = cJSON_GetObjectItemCaseSensitive(tensor, "pieces");
    const cJSON *p;
    int any = 0;

    for (long s = 0; s < n; s++)
        slots[s] = -1;
    cJSON_ArrayForEach(p, pieces)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "tensor");
        const cJSON *at = cJSON_GetObjectItemCaseSensitive(p, "at");
        long expert, slot;
        if (!cJSON_IsString(name) || !cJSON_IsArray(at) ||
            !expert_of(name->valuestring, layer, &expert))
            continue;
        slot = (long)cJSON_GetArrayItem(at, 0)->valuedouble;
        if (slot >= 0 && slot < n)
            slots[slot] = expert;
        any = 1;
    }
    return any;
}

/* base: the rank's first physical slot. */
static void print_run(long first, long last, const long *slots, long n,
                      long base)
{
    if (first == last)
        printf("  layer %ld", first);
    else
        printf("  layers %ld-%ld", first, last);
    printf(" slots %ld-%ld: experts", base, base + n - 1);
    for (long s = 0; s < n; s++)
        printf(" %ld", slots[s]);
    printf("\n");
}

void layout_print_slots(const cJSON *rank_doc)
{
    const cJSON *tensors =
        cJSON_GetObjectItemCaseSensitive(rank_doc, "tensors");
    const cJSON *coords = cJSON_GetObjectItemCaseSensitive(rank_doc, "coords");
    const cJSON *ep = cJSON_GetObjectItemCaseSensitive(coords, "ep");
    const cJSON *t;
    long *run = NULL, *now = NULL, run_n = 0, first = -1, last = -1;
    long ep_rank = cJSON_IsNumber(ep) ? (long)ep->valuedouble : 0;

    cJSON_ArrayForEach(t, tensors)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
        long n, layer = -1;
        if (!cJSON_IsString(name) || !cJSON_IsArray(shape) ||
            strstr(name->valuestring, "experts.w13_weight") == NULL ||
            strstr(name->valuestring, "_scale") != NULL)
            continue;
        n = (long)cJSON_GetArrayItem(shape, 0)->valuedouble;
        free(now);
        now = malloc(((size_t)n + 1) * sizeof(*now));
        if (now == NULL || !slots_of(t, now, n, &layer))
            continue;
        if (run != NULL && n == run_n && layer == last + 1 &&
            memcmp(run, now, (size_t)n * sizeof(*now)) == 0) {
            last = layer;
            continue;
        }
        if (run != NULL)
            print_run(first, last, run, run_n, ep_rank * run_n);
        free(run);
        run = now;
        now = NULL;
        run_n = n;
        first = last = layer;
    }
    if (run != NULL)
        print_run(first, last, run, run_n, ep_rank * run_n);
    free(run);
    free(now);
}
