/* RFC 6901 JSON Pointers over cJSON documents. */
#ifndef WEX_HOST_JSON_POINTER_H
#define WEX_HOST_JSON_POINTER_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* The value `pointer` names inside `root`, or NULL when there is none or
 * the pointer is malformed. "" names the root itself. */
const cJSON *wex__json_pointer_get(const cJSON *root, const char *pointer);

#endif /* WEX_HOST_JSON_POINTER_H */
