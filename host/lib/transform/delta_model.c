/*
 * What a delta step is predicted to cost before any step runs (delta.h):
 * `wex plan --changed F` puts it beside the whole step's prediction.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "delta.h"

/* x^k by squaring (libwex does not link libm for this alone). */
static double power(double x, uint32_t k)
{
    double r = 1;

    for (; k > 0; k >>= 1, x *= x)
        if (k & 1)
            r *= x;
    return r;
}

/* A chunk of u elements, each changed with probability f: unchanged
 * with probability (1 - f)^u, and then it costs nothing (runs of them
 * share a SKIP); otherwise about u * f / (1 - that) of its elements
 * changed, at least one. */
static double chunk_bytes(uint32_t u, unsigned elem, double f)
{
    double none = power(1.0 - f, u);
    double n = none < 1 ? (double)u * f / (1.0 - none) : 0;

    if (n < 1)
        n = 1;
    if (n > u)
        n = u;
    return (1.0 - none) *
           (double)wex__delta_chunk_bytes((uint32_t)(n + 0.5), u, elem);
}

double wex__delta_expected_bytes(uint64_t elems, unsigned elem, double fraction)
{
    uint64_t whole = elems / WEX__DELTA_CHUNK;
    uint32_t tail = (uint32_t)(elems % WEX__DELTA_CHUNK);
    double f = fraction < 0 ? 0 : fraction > 1 ? 1 : fraction;
    double bytes;

    if (f == 0)
        return elems > 0 ? 2 : 0; /* one SKIP over every chunk */
    bytes = (double)whole * chunk_bytes(WEX__DELTA_CHUNK, elem, f);
    if (tail > 0)
        bytes += chunk_bytes(tail, elem, f);
    return bytes;
}

double wex__delta_scan_rate(void)
{
    enum { ELEMS = 16 << 20 };
    uint16_t *cur = malloc((size_t)ELEMS * sizeof(*cur));
    uint16_t *snap = malloc((size_t)ELEMS * sizeof(*snap));
    uint64_t cap = wex__delta_bound(ELEMS, 2);
    uint8_t *out = malloc(cap);
    wex__delta_enc e;
    double best = 0;

    if (cur == NULL || snap == NULL || out == NULL ||
        wex__delta_enc_alloc(&e) != 0) {
        free(cur);
        free(snap);
        free(out);
        return 0;
    }
    for (int pass = 0; pass < 3; pass++) {
        double t0, dt;
        /* 1 % of the elements differ from the snapshot, spread out */
        for (size_t i = 0; i < ELEMS; i++) {
            cur[i] = (uint16_t)(i * 2654435761u >> 7);
            snap[i] = (i * 2654435761u) % 100 == (unsigned)pass
                          ? (uint16_t)~cur[i]
                          : cur[i];
        }
        t0 = wex__now();
        wex__delta_enc_start(&e, 2, out, cap);
        wex__delta_enc_feed(&e, (const uint8_t *)cur, (uint8_t *)snap,
                            (size_t)ELEMS * 2);
        wex__delta_enc_end(&e);
        dt = wex__now() - t0;
        if (dt > 0 && (double)ELEMS * 2 / dt > best)
            best = (double)ELEMS * 2 / dt;
    }
    wex__delta_enc_free(&e);
    free(cur);
    free(snap);
    free(out);
    return best;
}
