/*
 * How a source says "failed" in a key that otherwise holds records of
 * `unit` bytes (its digests, 8 bytes each, in step/S/T/done/SRC/DST; its
 * block amaxes in step/S/T/amax/SRC): '!' and the reason, never a
 * multiple of `unit` bytes long (the reason's NUL is kept when it would
 * be), where a list of records always is. A reader tells the two apart
 * by the length first: a record may well start with the byte '!'.
 */
#ifndef WEX_HOST_STEP_FAILURE_H
#define WEX_HOST_STEP_FAILURE_H

#include <stddef.h>
#include <string.h>

/* Writes the failure into `out` (room for strlen(why) + 2 bytes);
 * returns its length. `unit` > 1. */
static inline size_t wex__step_failure(char *out, const char *why, size_t unit)
{
    size_t len = strlen(why), n = len + 1;

    out[0] = '!';
    memcpy(out + 1, why, len + 1);
    return n % unit == 0 ? n + 1 : n;
}

/* The reason when `value` (NUL after its `len` bytes, as the rendezvous
 * returns values) is a failure; NULL when it is a list of records. */
static inline const char *wex__step_failure_reason(const void *value,
                                                   size_t len, size_t unit)
{
    const char *v = value;

    return len % unit != 0 && v[0] == '!' ? v + 1 : NULL;
}

#endif /* WEX_HOST_STEP_FAILURE_H */
