/*
 * Small helpers shared by the libFuzzer targets (tests/fuzz/fuzz_*.c).
 * Built only by tools/fuzz.sh.
 */
#ifndef WEX_FUZZ_UTIL_H
#define WEX_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A NUL-terminated copy of the input (the input itself is not). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (s == NULL)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* An invariant the target checks failed: report and abort so libFuzzer
 * saves the input. */
#define FUZZ_CHECK(cond)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__,    \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

#endif /* WEX_FUZZ_UTIL_H */
