#include "schema_store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "jsonschema.h"

#define SCHEMA_SLOTS 8

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const char *name;
    cJSON *doc;
} cache[SCHEMA_SLOTS];

const cJSON *wex__schema(const char *name)
{
    const cJSON *found = NULL;
    const char *text;

    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < SCHEMA_SLOTS && cache[i].name; i++)
        if (strcmp(cache[i].name, name) == 0) {
            found = cache[i].doc;
            goto out;
        }
    text = wex__embedded_schema(name);
    if (text == NULL)
        goto out;
    for (int i = 0; i < SCHEMA_SLOTS; i++)
        if (cache[i].name == NULL) {
            cache[i].doc = cJSON_Parse(text);
            if (cache[i].doc != NULL)
                cache[i].name = name;
            found = cache[i].doc;
            break;
        }
out:
    pthread_mutex_unlock(&cache_lock);
    return found;
}

/* Appends "file: pointer: message\n" to a growing buffer. */
static int append_line(char **buf, size_t *len, const char *file,
                       const char *prefix, const wex__schema_error *e)
{
    int n = snprintf(NULL, 0, "%s: %s%s: %s\n", file, prefix, e->pointer,
                     e->message);
    char *grown;

    if (n < 0)
        return -1;
    grown = realloc(*buf, *len + (size_t)n + 1);
    if (grown == NULL)
        return -1;
    snprintf(grown + *len, (size_t)n + 1, "%s: %s%s: %s\n", file, prefix,
             e->pointer, e->message);
    *buf = grown;
    *len += (size_t)n;
    return 0;
}

wex_status wex__schema_check_with(const cJSON *schema, const cJSON *doc,
                                  const char *file, const char *prefix,
                                  char **all_p)
{
    wex__schema_result result = {0, NULL};
    wex_status status = WEX_OK;
    char *all = NULL;
    size_t len = 0;
    int rc;

    if (prefix == NULL)
        prefix = "";
    rc = wex__schema_validate(schema, doc, &result);
    if (rc == 0)
        goto out;
    if (rc < 0 && result.count == 0) {
        status =
            wex__error(WEX_ERR_NOMEM, "%s: out of memory validating", file);
        goto out;
    }
    status = wex__error(rc < 0 ? WEX_ERR_INTERNAL : WEX_ERR_INVALID,
                        "%s: %s%s: %s", file, prefix, result.errors[0].pointer,
                        result.errors[0].message);
    if (all_p == NULL)
        goto out;
    for (size_t i = 0; i < result.count; i++)
        if (append_line(&all, &len, file, prefix, &result.errors[i]) != 0) {
            free(all);
            all = NULL;
            break;
        }
    *all_p = all;
out:
    wex__schema_result_free(&result);
    return status;
}

wex_status wex__schema_check(const char *name, const cJSON *doc,
                             const char *file, char **all_p)
{
    const cJSON *schema = wex__schema(name);

    if (schema == NULL)
        return wex__error(WEX_ERR_INTERNAL, "no built-in schema '%s'", name);
    return wex__schema_check_with(schema, doc, file, "", all_p);
}
