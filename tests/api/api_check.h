/*
 * What the programs of tests/api share: a failure count and EXPECT,
 * which counts and names a failed check and goes on, and the byte every
 * rank expects at an offset of a tensor in a step. They see libwex.so
 * through <wex/wex.h> only.
 */
#ifndef WEX_TEST_API_CHECK_H
#define WEX_TEST_API_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int failures;

#define EXPECT(cond, ...)                                                  \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
        }                                                                  \
    } while (0)

/* The byte every rank expects at `offset` of tensor `name` in `step`. */
static inline unsigned char expected(const char *name, uint64_t offset,
                                     uint64_t step)
{
    uint64_t h = 1469598103934665603ull ^ step;

    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h ^= offset * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    return (unsigned char)(h * 0xbf58476d1ce4e5b9ull >> 56);
}

#endif /* WEX_TEST_API_CHECK_H */
