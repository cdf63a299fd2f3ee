#include "job_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "json_file.h"
#include "jsonschema.h"
#include "schema_store.h"

/* Collects "line\n" messages for callers that want every problem. */
typedef struct problems {
    char *text;
    size_t len;
} problems;

static void note(problems *p, const char *line)
{
    size_t n = strlen(line);
    char *grown = realloc(p->text, p->len + n + 2);

    if (grown == NULL)
        return;
    memcpy(grown + p->len, line, n);
    grown[p->len + n] = '\n';
    grown[p->len + n + 1] = '\0';
    p->text = grown;
    p->len += n + 1;
}

static void note_all(problems *p, char *lines)
{
    if (lines == NULL)
        return;
    for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save))
        note(p, l);
    free(lines);
}

/* "name" or {"name": ..., "options": {...}} */
static void read_ref(const cJSON *v, wex__plugin_ref *ref)
{
    if (cJSON_IsString(v)) {
        ref->name = v->valuestring;
        return;
    }
    ref->name = cJSON_GetObjectItemCaseSensitive(v, "name")->valuestring;
    ref->options = cJSON_GetObjectItemCaseSensitive(v, "options");
}

/* Finds the plugin and validates its options; every failure is noted. */
static wex_status resolve(wex__job_config *c, wex__registry *registry,
                          wex__plugin_ref *ref, uint32_t kind,
                          const char *pointer, const char *options_pointer,
                          problems *all)
{
    const cJSON *schema;
    cJSON *empty = NULL;
    char *lines = NULL;
    wex_status status;

    ref->plugin = wex__registry_find(registry, kind, ref->name);
    if (ref->plugin == NULL) {
        char *names = wex__registry_names(registry, kind);
        status = wex__error(WEX_ERR_INVALID,
                            "%s: %s: no %s plugin named \"%s\" (available: "
                            "%s)",
                            c->path, pointer, wex__kind_name(kind), ref->name,
                            names && names[0] ? names : "none");
        free(names);
        note(all, wex__last_error());
        return status;
    }
    schema = ref->plugin->manifest.options_schema;
    if (schema == NULL)
        return WEX_OK;
    if (ref->options == NULL)
        ref->options = empty = cJSON_CreateObject();
    status = wex__schema_check_with(schema, ref->options, c->path,
                                    options_pointer, &lines);
    note_all(all, lines);
    if (empty != NULL) {
        ref->options = NULL;
        cJSON_Delete(empty);
    }
    return status;
}

static char *join_dir(const char *base_dir, const char *path)
{
    char *out;

    if (path[0] == '/' || base_dir == NULL || base_dir[0] == '\0')
        return strdup(path);
    out = malloc(strlen(base_dir) + strlen(path) + 2);
    if (out != NULL)
        sprintf(out, "%s/%s", base_dir, path);
    return out;
}

/* A side's "model", resolved like the job's; the job's own otherwise. */
static char *side_model(const cJSON *side, const char *base_dir,
                        const char *job_model)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(side, "model");

    return cJSON_IsString(m) ? join_dir(base_dir, m->valuestring)
                             : strdup(job_model);
}

static double number_at(const cJSON *doc, const char *obj, const char *key)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(doc, obj);

    return cJSON_GetObjectItemCaseSensitive(o, key)->valuedouble;
}

/* "elastic": destinations only, a min_replicas their dp can hold, a
 * transport that connects peers one by one (not nccl's one
 * communicator of every rank). */
static wex_status read_elastic(wex__job_config *c, const cJSON *src,
                               const cJSON *dst, problems *all)
{
    const cJSON *el = cJSON_GetObjectItemCaseSensitive(dst, "elastic");
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(dst, "parallel"), "dp");
    const cJSON *transport =
        cJSON_GetObjectItemCaseSensitive(c->doc, "transport");
    const char *tname =
        cJSON_IsString(transport)
            ? transport->valuestring
            : cJSON_GetStringValue(
                  cJSON_GetObjectItemCaseSensitive(transport, "name"));
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(el, "seed");
    double replicas = cJSON_IsNumber(dp) ? dp->valuedouble : 1;
    wex_status st = WEX_OK;

    c->destination_replicas = (uint64_t)replicas;
    if (cJSON_GetObjectItemCaseSensitive(src, "elastic") != NULL)
        st = wex__error(WEX_ERR_INVALID,
                        "%s: /source/elastic: only destination replicas "
                        "can be elastic",
                        c->path);
    else if (el == NULL)
        return WEX_OK;
    else if ((c->elastic_min_replicas = (uint64_t)number_at(
                  dst, "elastic", "min_replicas")) > replicas)
        st = wex__error(WEX_ERR_INVALID,
                        "%s: /destination/elastic/min_replicas: %llu is "
                        "more than the destination's %.0f replica%s "
                        "(/destination/parallel/dp)",
                        c->path, (unsigned long long)c->elastic_min_replicas,
                        replicas, replicas == 1 ? "" : "s");
    else if (tname != NULL && strcmp(tname, "nccl") == 0)
        st = wex__error(WEX_ERR_INVALID,
                        "%s: /destination/elastic: the nccl transport holds "
                        "one communicator of every rank, so replicas cannot "
                        "join or leave it; use shm or ucx",
                        c->path);
    else if ((c->elastic_seed_replicas =
                  cJSON_IsString(seed) &&
                  strcmp(seed->valuestring, "replicas") == 0) &&
             tname != NULL && strcmp(tname, "shm") != 0 &&
             strcmp(tname, "ucx") != 0)
        st = wex__error(WEX_ERR_INVALID,
                        "%s: /destination/elastic/seed: \"replicas\" copies "
                        "host memory from replica to replica, over shm or "
                        "ucx; the %s transport takes \"sources\"",
                        c->path, tname);
    if (st != WEX_OK)
        note(all, wex__last_error());
    return st;
}

/* Reads the validated, defaulted document into the struct. */
static wex_status bind_fields(wex__job_config *c, const char *base_dir,
                              wex__registry *registry, unsigned flags,
                              problems *all)
{
    const cJSON *doc = c->doc;
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(doc, "source");
    const cJSON *dst = cJSON_GetObjectItemCaseSensitive(doc, "destination");
    const cJSON *verify = cJSON_GetObjectItemCaseSensitive(doc, "verify");
    wex_status first = WEX_OK, status;

    c->model_path = join_dir(
        base_dir, cJSON_GetObjectItemCaseSensitive(doc, "model")->valuestring);
    if (c->model_path == NULL)
        return wex__error(WEX_ERR_NOMEM, "%s: out of memory", c->path);
    c->source_model_path = side_model(src, base_dir, c->model_path);
    c->destination_model_path = side_model(dst, base_dir, c->model_path);
    if (c->source_model_path == NULL || c->destination_model_path == NULL)
        return wex__error(WEX_ERR_NOMEM, "%s: out of memory", c->path);
    {
        const cJSON *shares =
            cJSON_GetObjectItemCaseSensitive(doc, "plan_shares");
        if (cJSON_IsString(shares) &&
            (c->plan_shares = join_dir(base_dir, shares->valuestring)) == NULL)
            return wex__error(WEX_ERR_NOMEM, "%s: out of memory", c->path);
    }
    c->topology = cJSON_GetObjectItemCaseSensitive(doc, "topology");
    c->source.name =
        cJSON_GetObjectItemCaseSensitive(src, "engine")->valuestring;
    c->source.options = cJSON_GetObjectItemCaseSensitive(src, "options");
    c->source_parallel = cJSON_GetObjectItemCaseSensitive(src, "parallel");
    c->destination.name =
        cJSON_GetObjectItemCaseSensitive(dst, "engine")->valuestring;
    c->destination.options = cJSON_GetObjectItemCaseSensitive(dst, "options");
    c->destination_parallel = cJSON_GetObjectItemCaseSensitive(dst, "parallel");
    read_ref(cJSON_GetObjectItemCaseSensitive(doc, "policy"), &c->policy);
    read_ref(cJSON_GetObjectItemCaseSensitive(doc, "transport"), &c->transport);
    c->verify_digest = strcmp(verify->valuestring, "digest") == 0;
    c->staging_bytes =
        (uint64_t)cJSON_GetObjectItemCaseSensitive(doc, "staging_bytes")
            ->valuedouble;
    c->device_staging_bytes =
        (uint64_t)cJSON_GetObjectItemCaseSensitive(doc, "device_staging_bytes")
            ->valuedouble;
    c->connect_seconds = number_at(doc, "timeouts", "connect_seconds");
    c->step_seconds = number_at(doc, "timeouts", "step_seconds");
    c->peer_seconds = number_at(doc, "timeouts", "peer_seconds");
    c->fence_seconds = number_at(doc, "timeouts", "fence_seconds");
    c->join_seconds = number_at(doc, "timeouts", "join_seconds");
    status = read_elastic(c, src, dst, all);
    first = first ? first : status;
    {
        const cJSON *delta = cJSON_GetObjectItemCaseSensitive(doc, "delta");
        const cJSON *fraction, *inbox, *threads, *snapshots;
        c->delta = cJSON_IsTrue(delta) || cJSON_IsObject(delta);
        /* the schema's defaults are not filled into an alternative of its
         * oneOf: an object without max_fraction takes it here */
        fraction = cJSON_GetObjectItemCaseSensitive(delta, "max_fraction");
        c->delta_max_fraction =
            cJSON_IsNumber(fraction) ? fraction->valuedouble : 0.25;
        inbox = cJSON_GetObjectItemCaseSensitive(delta, "inbox_bytes");
        c->delta_inbox_bytes =
            cJSON_IsNumber(inbox) ? (uint64_t)inbox->valuedouble : 0;
        threads = cJSON_GetObjectItemCaseSensitive(delta, "threads");
        c->delta_threads =
            cJSON_IsNumber(threads) ? (unsigned)threads->valuedouble : 0;
        snapshots = cJSON_GetObjectItemCaseSensitive(delta, "snapshots");
        c->delta_host_snapshots = cJSON_IsString(snapshots) &&
                                  strcmp(snapshots->valuestring, "host") == 0;
    }

    status = resolve(c, registry, &c->source, WEX_KIND_ENGINE, "/source/engine",
                     "/source/options", all);
    first = first ? first : status;
    status = resolve(c, registry, &c->destination, WEX_KIND_ENGINE,
                     "/destination/engine", "/destination/options", all);
    first = first ? first : status;
    status = resolve(c, registry, &c->policy, WEX_KIND_POLICY, "/policy",
                     "/policy/options", all);
    first = first ? first : status;
    if (flags & WEX__JOB_PLAN_ONLY)
        return first;
    status = resolve(c, registry, &c->transport, WEX_KIND_TRANSPORT,
                     "/transport", "/transport/options", all);
    first = first ? first : status;
    return first;
}

wex_status wex__job_config_parse(const char *name, const char *text,
                                 const char *base_dir, wex__registry *registry,
                                 unsigned flags, wex__job_config **config_p,
                                 char **all_p)
{
    problems all = {NULL, 0};
    wex__job_config *c;
    char *lines = NULL;
    wex_status status;

    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->path = strdup(name)) == NULL) {
        free(c);
        return wex__error(WEX_ERR_NOMEM, "%s: out of memory", name);
    }
    status = wex__json_parse(name, text, strlen(text), &c->doc);
    if (status != WEX_OK) {
        note(&all, wex__last_error());
        goto out;
    }
    status = wex__schema_check("job", c->doc, name, &lines);
    note_all(&all, lines);
    if (status != WEX_OK)
        goto out;
    if (wex__schema_apply_defaults(wex__schema("job"), c->doc) != 0) {
        status = wex__error(WEX_ERR_NOMEM, "%s: out of memory", name);
        goto out;
    }
    status = bind_fields(c, base_dir, registry, flags, &all);
out:
    if (status != WEX_OK) {
        /* The first problem is what the thread's error reports. */
        char first[WEX__ERROR_MAX];
        snprintf(first, sizeof(first), "%s", wex__last_error());
        wex__job_config_free(c);
        if (all_p != NULL)
            *all_p = all.text;
        else
            free(all.text);
        return wex__error(status, "%s", first);
    }
    free(all.text);
    *config_p = c;
    return WEX_OK;
}

wex_status wex__job_config_load(const char *path, wex__registry *registry,
                                unsigned flags, wex__job_config **config_p,
                                char **all_p)
{
    char *text = NULL, *dir = NULL, *slash;
    size_t len;
    wex_status status;

    status = wex__read_file(path, &text, &len);
    if (status != WEX_OK) {
        if (all_p != NULL) {
            *all_p = malloc(strlen(wex__last_error()) + 2);
            if (*all_p)
                sprintf(*all_p, "%s\n", wex__last_error());
        }
        return status;
    }
    dir = strdup(path);
    slash = dir ? strrchr(dir, '/') : NULL;
    if (slash != NULL)
        *slash = '\0';
    else if (dir != NULL)
        strcpy(dir, ".");
    status = wex__job_config_parse(path, text, dir, registry, flags, config_p,
                                   all_p);
    free(dir);
    free(text);
    return status;
}

void wex__job_config_free(wex__job_config *c)
{
    if (c == NULL)
        return;
    free(c->path);
    free(c->model_path);
    free(c->plan_shares);
    free(c->source_model_path);
    free(c->destination_model_path);
    cJSON_Delete(c->doc);
    free(c);
}

wex_status wex__job_config_read(const char *config, wex__registry *registry,
                                unsigned flags, wex__job_config **job_p)
{
    char *all = NULL;
    wex_status st;

    while (*config == ' ' || *config == '\n' || *config == '\t' ||
           *config == '\r')
        config++;
    if (config[0] == '{')
        st = wex__job_config_parse("<job text>", config, ".", registry, flags,
                                   job_p, &all);
    else
        st = wex__job_config_load(config, registry, flags, job_p, &all);
    free(all);
    return st;
}
