/* wex layout: how an engine lays a model out over its ranks. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "cli.h"
#include "engine.h"
#include "error.h"
#include "json_pointer.h"
#include "schema_store.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex layout --model CONFIG.json --engine NAME "
            "[--parallel K=V,...]\n"
            "                  [--options JSON] [--rank N] [--json]\n"
            "\n"
            "Describes how engine NAME lays the model of CONFIG.json (a "
            "Hugging Face\nconfig.json) out over its ranks: the local "
            "tensors of each rank and the\npieces of canonical tensors "
            "they hold.\n"
            "\n"
            "  --parallel K=V,...  parallel config, e.g. tp=4,pp=2,ep=8,dp=2;"
            "\n"
            "                      pp_layers=12:14:14:12 for an uneven "
            "pipeline split\n"
            "  --options JSON      engine options (see the engine's "
            "manifest)\n"
            "  --rank N            only rank N\n"
            "  --json              a document valid against "
            "schemas/layout.schema.json\n"
            "\n"
            "Without --json: a summary of the model, then one line per "
            "rank (tensors,\npieces, bytes) and the replication factor.\n");
}

/* "tp=4,pp=2,pp_layers=3:5" -> {"tp":4,"pp":2,"pp_layers":[3,5]} */
static cJSON *parse_parallel(const char *text)
{
    cJSON *obj = cJSON_CreateObject();
    char *copy = strdup(text), *save = NULL;

    for (char *kv = strtok_r(copy, ",", &save); kv && obj;
         kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '='), *end;
        if (eq == NULL || eq == kv) {
            fprintf(stderr, "wex layout: --parallel: expected K=V, got "
                            "'%s'\n", kv);
            cJSON_Delete(obj);
            obj = NULL;
            break;
        }
        *eq = '\0';
        if (strchr(eq + 1, ':') != NULL) {
            cJSON *list = cJSON_AddArrayToObject(obj, kv);
            char *s2 = NULL;
            for (char *v = strtok_r(eq + 1, ":", &s2); v;
                 v = strtok_r(NULL, ":", &s2))
                cJSON_AddItemToArray(list,
                                     cJSON_CreateNumber(strtod(v, NULL)));
            continue;
        }
        errno = 0;
        double v = strtod(eq + 1, &end);
        if (*end != '\0' || errno != 0 || end == eq + 1) {
            fprintf(stderr, "wex layout: --parallel: %s: expected a "
                            "number, got '%s'\n", kv, eq + 1);
            cJSON_Delete(obj);
            obj = NULL;
            break;
        }
        cJSON_AddNumberToObject(obj, kv, v);
    }
    free(copy);
    return obj;
}

static cJSON *u64_array(const uint64_t *v, uint32_t n)
{
    cJSON *a = cJSON_CreateArray();

    for (uint32_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static cJSON *rank_json(const wex_model *model, const wex__rank_layout *l)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *coords = cJSON_AddObjectToObject(r, "coords");
    cJSON *tensors = cJSON_AddArrayToObject(r, "tensors");
    cJSON **pieces = calloc(l->tensor_count + 1, sizeof(*pieces));

    cJSON_AddNumberToObject(r, "rank", (double)l->rank);
    for (size_t i = 0; i < l->coord_count; i++)
        cJSON_AddNumberToObject(coords, l->coords[i].key,
                                (double)l->coords[i].value);
    for (size_t i = 0; i < l->tensor_count; i++) {
        const wex__local_tensor *t = &l->tensors[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", wex_dtype_name(t->dtype));
        cJSON_AddItemToObject(o, "shape", u64_array(t->shape, t->ndim));
        pieces[i] = cJSON_AddArrayToObject(o, "pieces");
        cJSON_AddItemToArray(tensors, o);
    }
    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "tensor",
                                model->tensors[p->canonical].name);
        cJSON_AddItemToObject(o, "offset", u64_array(p->offset, p->ndim));
        cJSON_AddItemToObject(o, "extent", u64_array(p->extent, p->ndim));
        cJSON_AddItemToObject(o, "at",
                              u64_array(p->at, l->tensors[p->tensor].ndim));
        cJSON_AddItemToArray(pieces[p->tensor], o);
    }
    free(pieces);
    return r;
}

static cJSON *model_json(const wex_model *model)
{
    cJSON *m = cJSON_CreateObject();
    cJSON *tensors;

    cJSON_AddStringToObject(m, "architecture", model->architecture);
    tensors = cJSON_AddArrayToObject(m, "tensors");
    for (uint64_t i = 0; i < model->count; i++) {
        const wex__tensor *t = &model->tensors[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", wex_dtype_name(t->dtype));
        cJSON_AddItemToObject(o, "shape", u64_array(t->shape, t->ndim));
        cJSON_AddItemToArray(tensors, o);
    }
    cJSON_AddNumberToObject(m, "total_bytes", (double)model->total_bytes);
    return m;
}

typedef struct layout_args {
    const char *model, *engine, *parallel, *options;
    long long rank; /* -1: all */
    int json;
} layout_args;

static int parse_args(int argc, char **argv, layout_args *a)
{
    memset(a, 0, sizeof(*a));
    a->rank = -1;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--json") == 0) {
            a->json = 1;
            continue;
        }
        if (next == NULL) {
            fprintf(stderr, "wex layout: unknown or incomplete option "
                            "'%s'\n", arg);
            return -1;
        }
        if (strcmp(arg, "--model") == 0)
            a->model = next;
        else if (strcmp(arg, "--engine") == 0)
            a->engine = next;
        else if (strcmp(arg, "--parallel") == 0)
            a->parallel = next;
        else if (strcmp(arg, "--options") == 0)
            a->options = next;
        else if (strcmp(arg, "--rank") == 0) {
            char *end;
            a->rank = strtoll(next, &end, 10);
            if (*end || a->rank < 0) {
                fprintf(stderr, "wex layout: --rank: expected a rank "
                                "number, got '%s'\n", next);
                return -1;
            }
        } else {
            fprintf(stderr, "wex layout: unknown option '%s'\n", arg);
            return -1;
        }
        i++;
    }
    if (a->model == NULL || a->engine == NULL) {
        fprintf(stderr, "wex layout: --model and --engine are required\n");
        return -1;
    }
    return 0;
}

/* The parallel config must follow the job schema's definition. */
static int check_parallel(const cJSON *parallel)
{
    const cJSON *schema = wex__json_pointer_get(wex__schema("job"),
                                                "/$defs/parallel");

    if (schema != NULL &&
        wex__schema_check_with(schema, parallel, "--parallel", "", NULL) !=
            WEX_OK) {
        fprintf(stderr, "wex layout: %s\n", wex__last_error());
        return -1;
    }
    return 0;
}

static int describe_all(wex__engine *e, const layout_args *a,
                        const wex_model *model)
{
    uint64_t first = a->rank >= 0 ? (uint64_t)a->rank : 0;
    uint64_t last = a->rank >= 0 ? (uint64_t)a->rank : e->ranks - 1;
    cJSON *doc = NULL, *ranks = NULL;
    uint64_t total = 0;
    int rc = WEX_EXIT_OK;

    if (a->json) {
        doc = cJSON_CreateObject();
        cJSON_AddItemToObject(doc, "model", model_json(model));
        cJSON_AddStringToObject(doc, "engine", a->engine);
        cJSON_AddItemToObject(doc, "parallel",
                              cJSON_Duplicate(e->parallel.root, 1));
        cJSON_AddNumberToObject(doc, "ranks", (double)e->ranks);
        ranks = cJSON_AddArrayToObject(doc, "layout");
    } else {
        printf("model   %s: %llu tensors, %llu bytes\n",
               model->architecture, (unsigned long long)model->count,
               (unsigned long long)model->total_bytes);
        printf("engine  %s: %llu ranks\n", a->engine,
               (unsigned long long)e->ranks);
    }
    for (uint64_t r = first; r <= last && rc == WEX_EXIT_OK; r++) {
        wex__rank_layout l;
        if (wex__engine_describe(e, r, &l) != WEX_OK) {
            fprintf(stderr, "wex layout: %s\n", wex__last_error());
            rc = WEX_EXIT_USAGE;
        } else if (a->json) {
            cJSON_AddItemToArray(ranks, rank_json(model, &l));
        } else {
            printf("rank %-5llu %zu tensors, %zu pieces, %llu bytes\n",
                   (unsigned long long)r, l.tensor_count, l.piece_count,
                   (unsigned long long)l.bytes);
        }
        total += l.bytes;
        wex__rank_layout_fini(&l);
    }
    if (rc == WEX_EXIT_OK && a->json) {
        char *text = cJSON_PrintUnformatted(doc);
        if (text)
            printf("%s\n", text);
        free(text);
    } else if (rc == WEX_EXIT_OK && a->rank < 0) {
        printf("total   %llu bytes held, %.3fx the model\n",
               (unsigned long long)total,
               model->total_bytes ? (double)total /
                                        (double)model->total_bytes
                                  : 0.0);
    }
    cJSON_Delete(doc);
    return rc;
}

int wex_cmd_layout(int argc, char **argv)
{
    cJSON *parallel = NULL, *options = NULL;
    wex__registry *r = NULL;
    wex_model *model = NULL;
    wex__engine *e = NULL;
    layout_args a;
    int rc = WEX_EXIT_USAGE;

    if (wex_cli_wants_help(argc, argv)) {
        usage(stdout);
        return WEX_EXIT_OK;
    }
    if (parse_args(argc, argv, &a) != 0) {
        usage(stderr);
        return WEX_EXIT_USAGE;
    }
    parallel = a.parallel ? parse_parallel(a.parallel) : cJSON_CreateObject();
    if (parallel == NULL || check_parallel(parallel) != 0)
        goto out;
    if (a.options && (options = cJSON_Parse(a.options)) == NULL) {
        fprintf(stderr, "wex layout: --options: invalid JSON\n");
        goto out;
    }
    if (wex__model_load(a.model, &model) != WEX_OK ||
        wex__registry_scan(&r) != WEX_OK ||
        wex__engine_open(r, a.engine, model, parallel, options, &e) !=
            WEX_OK) {
        fprintf(stderr, "wex layout: %s\n", wex__last_error());
        goto out;
    }
    if (a.rank >= 0 && (uint64_t)a.rank >= e->ranks) {
        fprintf(stderr, "wex layout: --rank %lld: engine %s has ranks "
                        "0..%llu\n", a.rank, a.engine,
                (unsigned long long)(e->ranks - 1));
        goto out;
    }
    rc = describe_all(e, &a, model);
out:
    wex__engine_close(e);
    wex__registry_free(r);
    wex__model_free(model);
    cJSON_Delete(parallel);
    cJSON_Delete(options);
    return rc;
}
