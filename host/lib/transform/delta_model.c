/*
 * What a delta step is predicted to cost before any step runs (delta.h):
 * `wex plan --changed F` puts it beside the whole step's prediction.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "delta.h"
#include "parallel.h"

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

typedef struct region_work {
    const uint8_t *cur;
    uint8_t *snap, *out;
    uint64_t region, room; /* bytes a region; payload bytes a region */
    wex__delta_enc *enc;   /* a worker's */
} region_work;

static int encode_region(void *arg, size_t k, unsigned worker, char *why,
                         size_t cap)
{
    region_work *w = arg;
    wex__delta_enc *e = &w->enc[worker];

    (void)why;
    (void)cap;
    wex__delta_enc_start(e, 2, w->out + k * w->room, w->room);
    wex__delta_enc_feed(e, w->cur + k * w->region, w->snap + k * w->region,
                        w->region);
    return wex__delta_enc_end(e) < 0;
}

int wex__delta_encode_regions(const uint8_t *cur, uint8_t *snap,
                              uint64_t region, size_t count, unsigned threads,
                              uint8_t *out)
{
    region_work w = {cur, snap, out, region, wex__delta_bound(region / 2, 2),
                     NULL};
    unsigned made = 0;
    int rc = -1;

    if (threads < 1)
        threads = 1;
    w.enc = calloc(threads, sizeof(*w.enc));
    while (w.enc != NULL && made < threads &&
           wex__delta_enc_alloc(&w.enc[made]) == 0)
        made++;
    if (made == threads)
        rc = wex__parallel(count, threads, encode_region, &w, NULL, 0) != 0 ? -1
                                                                            : 0;
    while (made > 0)
        wex__delta_enc_free(&w.enc[--made]);
    free(w.enc);
    return rc;
}

double wex__delta_scan_rate(unsigned threads)
{
    enum { ELEMS = 16 << 20 };
    uint16_t *cur = malloc((size_t)ELEMS * sizeof(*cur));
    uint16_t *snap = malloc((size_t)ELEMS * sizeof(*snap));
    uint64_t region, room;
    uint8_t *out;
    double best = 0;

    if (threads < 1)
        threads = 1;
    if (threads > 64)
        threads = 64;
    region = (uint64_t)ELEMS * 2 / threads & ~(uint64_t)63;
    room = wex__delta_bound(region / 2, 2);
    out = malloc(room * threads);
    for (int pass = 0; cur != NULL && snap != NULL && out != NULL && pass < 3;
         pass++) {
        double t0, dt;
        /* 1 % of the elements differ from the snapshot, spread out */
        for (size_t i = 0; i < ELEMS; i++) {
            cur[i] = (uint16_t)(i * 2654435761u >> 7);
            snap[i] = (i * 2654435761u) % 100 == (unsigned)pass
                          ? (uint16_t)~cur[i]
                          : cur[i];
        }
        t0 = wex__now();
        if (wex__delta_encode_regions((const uint8_t *)cur, (uint8_t *)snap,
                                      region, threads, threads, out) != 0)
            break;
        dt = wex__now() - t0;
        if (dt > 0 && (double)region * threads / dt > best)
            best = (double)region * threads / dt;
    }
    free(out);
    free(cur);
    free(snap);
    return best;
}
