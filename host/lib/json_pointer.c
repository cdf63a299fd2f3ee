#include "json_pointer.h"

#include <stdlib.h>
#include <string.h>

/* Copies one reference token, undoing the ~1 -> '/' and ~0 -> '~'
 * escapes. Returns the token length, or -1 for a bad escape or a token
 * longer than the buffer. */
static long unescape_token(const char *start, size_t len, char *out,
                           size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        char c = start[i];
        if (c == '~') {
            if (i + 1 >= len || (start[i + 1] != '0' && start[i + 1] != '1'))
                return -1;
            c = start[i + 1] == '0' ? '~' : '/';
            i++;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return (long)o;
}

static const cJSON *array_element(const cJSON *array, const char *token)
{
    char *end;
    unsigned long index;

    /* Array indices are decimal without leading zeros (RFC 6901 §4). */
    if (token[0] == '\0' || (token[0] == '0' && token[1] != '\0'))
        return NULL;
    for (const char *p = token; *p; p++)
        if (*p < '0' || *p > '9')
            return NULL;
    index = strtoul(token, &end, 10);
    if (index > (unsigned long)cJSON_GetArraySize(array))
        return NULL;
    return cJSON_GetArrayItem(array, (int)index);
}

const cJSON *wex__json_pointer_get(const cJSON *root, const char *pointer)
{
    const cJSON *node = root;
    const char *p = pointer;
    char token[512];

    if (root == NULL || pointer == NULL)
        return NULL;
    if (*p == '\0')
        return root;
    if (*p != '/')
        return NULL;
    while (node != NULL && *p == '/') {
        const char *start = p + 1;
        const char *slash = strchr(start, '/');
        size_t len = slash ? (size_t)(slash - start) : strlen(start);

        if (unescape_token(start, len, token, sizeof(token)) < 0)
            return NULL;
        if (cJSON_IsArray(node))
            node = array_element(node, token);
        else if (cJSON_IsObject(node))
            node = cJSON_GetObjectItemCaseSensitive(node, token);
        else
            return NULL;
        p = start + len;
    }
    return node;
}
