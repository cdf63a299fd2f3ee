/*
 * Building the validator's messages: growable strings that quote JSON
 * values on one line, and the lists of errors a validation returns.
 */
#include "jsonschema_priv.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Values quoted in messages are cut beyond this many bytes. */
#define VALUE_MAX 80

/* ------------------------------------------------------------------ */
/* Strings                                                             */
/* ------------------------------------------------------------------ */

void wex__js_append(struct wex__js_buf *sb, const char *s, size_t n)
{
    size_t cap;
    char *data;

    if (sb->failed)
        return;
    if (sb->len + n + 1 > sb->cap) {
        for (cap = sb->cap ? sb->cap : 64; cap < sb->len + n + 1; cap *= 2)
            ;
        data = realloc(sb->data, cap);
        if (!data) {
            sb->failed = true;
            return;
        }
        sb->data = data;
        sb->cap = cap;
    }
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void wex__js_puts(struct wex__js_buf *sb, const char *s)
{
    wex__js_append(sb, s, strlen(s));
}

void wex__js_printf(struct wex__js_buf *sb, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(buf))
        sb->failed = true;
    else
        wex__js_append(sb, buf, (size_t)n);
}

void wex__js_quote(struct wex__js_buf *sb, const char *s)
{
    const unsigned char *p;

    wex__js_puts(sb, "\"");
    for (p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            wex__js_printf(sb, "\\%c", *p);
        else if (*p == '\n')
            wex__js_puts(sb, "\\n");
        else if (*p == '\t')
            wex__js_puts(sb, "\\t");
        else if (*p < 0x20)
            wex__js_printf(sb, "\\u%04x", *p);
        else
            wex__js_append(sb, (const char *)p, 1);
    }
    wex__js_puts(sb, "\"");
}

void wex__js_name(struct wex__js_buf *sb, const char *s)
{
    const char *p;

    for (p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || strchr("_-.$@", *p)))
            break;
    if (*s && !*p)
        wex__js_puts(sb, s);
    else
        wex__js_quote(sb, s);
}

void wex__js_value(struct wex__js_buf *sb, const cJSON *value)
{
    char *text = cJSON_PrintUnformatted(value);
    size_t n;

    if (!text) {
        sb->failed = true;
        return;
    }
    n = strlen(text);
    if (n <= VALUE_MAX) {
        wex__js_append(sb, text, n);
    } else {
        /* Back up to a character boundary so the cut stays valid UTF-8. */
        n = VALUE_MAX - 3;
        while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
            n--;
        wex__js_append(sb, text, n);
        wex__js_puts(sb, "...");
    }
    cJSON_free(text);
}

void wex__js_describe(struct wex__js_buf *sb, const cJSON *value)
{
    if (cJSON_IsNull(value)) {
        wex__js_puts(sb, "null");
        return;
    }
    wex__js_puts(sb, wex__js_type_name(value));
    wex__js_puts(sb, " ");
    wex__js_value(sb, value);
}

void wex__js_token(struct wex__js_buf *sb, const char *key)
{
    const char *p;

    wex__js_puts(sb, "/");
    for (p = key; *p; p++) {
        if (*p == '~')
            wex__js_puts(sb, "~0");
        else if (*p == '/')
            wex__js_puts(sb, "~1");
        else
            wex__js_append(sb, p, 1);
    }
}

void wex__js_truncate(struct wex__js_buf *sb, size_t len)
{
    if (sb->failed || len >= sb->len)
        return;
    sb->len = len;
    sb->data[len] = '\0';
}

char *wex__js_strdup(const struct wex__js_buf *sb)
{
    if (sb->failed)
        return NULL;
    return strdup(sb->data ? sb->data : "");
}

char *wex__js_steal(struct wex__js_buf *sb)
{
    char *text = sb->failed ? NULL : sb->data ? sb->data : strdup("");

    if (text == sb->data)
        sb->data = NULL;
    wex__js_free(sb);
    return text;
}

void wex__js_free(struct wex__js_buf *sb)
{
    free(sb->data);
    memset(sb, 0, sizeof(*sb));
}

/* ------------------------------------------------------------------ */
/* Error lists                                                         */
/* ------------------------------------------------------------------ */

int wex__js_errors_push(struct wex__js_errors *list, char *pointer,
                        char *message, bool weak)
{
    wex__schema_error *items;
    size_t cap;

    if (!pointer || !message)
        goto fail;
    if (list->count == list->cap) {
        cap = list->cap ? list->cap * 2 : 8;
        items = realloc(list->items, cap * sizeof(*items));
        if (!items)
            goto fail;
        list->items = items;
        list->cap = cap;
    }
    if (list->count == 0)
        list->first_weak = weak;
    list->items[list->count].pointer = pointer;
    list->items[list->count].message = message;
    list->count++;
    return 0;
fail:
    free(pointer);
    free(message);
    return -ENOMEM;
}

int wex__js_errors_push_buf(struct wex__js_errors *list,
                            struct wex__js_buf *pointer,
                            struct wex__js_buf *message)
{
    return wex__js_errors_push(list, wex__js_steal(pointer),
                               wex__js_steal(message), false);
}

int wex__js_errors_push_str(struct wex__js_errors *list, const char *pointer,
                            const char *message)
{
    return wex__js_errors_push(list, strdup(pointer), strdup(message), false);
}

void wex__js_errors_clear(struct wex__js_errors *list)
{
    size_t i;

    for (i = 0; i < list->count; i++) {
        free(list->items[i].pointer);
        free(list->items[i].message);
    }
    free(list->items);
    memset(list, 0, sizeof(*list));
}
