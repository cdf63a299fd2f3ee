#include "json_pointer.h"

#include <limits.h>
#include <stdbool.h>
#include <string.h>

/* Whether reference token tok[0..n) (with the ~0 and ~1 escapes of
 * RFC 6901) spells `key`. Compared in place: tokens have no length
 * limit. */
static bool token_is(const char *tok, size_t n, const char *key)
{
    size_t i = 0;
    char c;

    while (i < n) {
        c = tok[i++];
        if (c == '~') {
            if (i == n || (tok[i] != '0' && tok[i] != '1'))
                return false;
            c = tok[i++] == '0' ? '~' : '/';
        }
        if (*key++ != c)
            return false;
    }
    return *key == '\0';
}

static const cJSON *step(const cJSON *node, const char *tok, size_t n)
{
    const cJSON *child;
    long index = 0;

    if (cJSON_IsObject(node)) {
        cJSON_ArrayForEach(
            child, node) if (child->string &&
                             token_is(tok, n, child->string)) return child;
        return NULL;
    }
    /* Array indices are decimal without leading zeros (RFC 6901 §4). */
    if (!cJSON_IsArray(node) || n == 0 || (n > 1 && tok[0] == '0'))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] < '0' || tok[i] > '9' || index > INT_MAX / 10)
            return NULL;
        index = index * 10 + (tok[i] - '0');
    }
    return index > INT_MAX ? NULL : cJSON_GetArrayItem(node, (int)index);
}

const cJSON *wex__json_pointer_get(const cJSON *root, const char *pointer)
{
    const char *p, *end;

    if (root == NULL || pointer == NULL)
        return NULL;
    for (p = pointer; root != NULL && *p; p = end) {
        if (*p != '/')
            return NULL;
        end = strchr(p + 1, '/');
        if (end == NULL)
            end = p + strlen(p);
        root = step(root, p + 1, (size_t)(end - p - 1));
    }
    return root;
}
