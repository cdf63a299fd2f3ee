/*
 * Delta encoding of one operation's bytes: what changed since the bytes
 * last sent (the snapshot), as positions and values.
 *
 * An operation's bytes form a stream (its runs in walk order) of
 * elements of the wire dtype's size (1, 2, 4 or 8 bytes). The stream is
 * cut into chunks of WEX__DELTA_CHUNK elements (the last may be short),
 * and each chunk is written the smallest of three ways, or skipped:
 *
 *   SKIP    tag 0, varint k: the next k chunks did not change
 *   SPARSE  tag 1, varint n, u8 l, the positions as Elias-Fano codes
 *           (n low parts of l bits, then the high parts as a unary
 *           bitmap of n + (U >> l) + 1 bits), then n values
 *   BITMAP  tag 2, a bit per element (U bits), then the changed values
 *   DENSE   tag 3, every value of the chunk
 *
 * where U is the chunk's element count; bit i of a byte array is bit
 * (i % 8) of byte i / 8, varints are LEB128, values are the elements'
 * bytes as they are. Sparse positions cost 2 + log2(U / n) bits each,
 * so at 1 % of bf16 elements changed a delta is about 1.5 % of the
 * stream's bytes (an int32 index and a value per element would be 3 %);
 * at 0 % a SKIP per run of unchanged chunks; at 50 % the bitmap (56 %).
 *
 * Encoding reads the current bytes and the snapshot once, and writes
 * into the snapshot only the elements that changed, so that afterwards
 * the snapshot equals the current bytes.
 */
#ifndef WEX_HOST_DELTA_H
#define WEX_HOST_DELTA_H

#include <stddef.h>
#include <stdint.h>

#define WEX__DELTA_CHUNK 16384u
/* A rank encodes (source) or applies (destination) deltas on the CPUs it
 * may run on, at most this many unless the job's delta.threads says
 * otherwise: both are bound by the memory misses one core keeps in
 * flight (the apply's writes are scattered lines), so a second core
 * nearly halves them. */
#define WEX__DELTA_THREADS 4u

enum {
    WEX__DELTA_SKIP = 0,
    WEX__DELTA_SPARSE = 1,
    WEX__DELTA_BITMAP = 2,
    WEX__DELTA_DENSE = 3
};

typedef struct wex__delta_enc {
    unsigned elem; /* bytes an element */
    uint8_t *out;  /* the payload */
    size_t cap, used;
    int overflow;            /* the payload outgrew cap: nothing more written */
    uint32_t fill;           /* elements scanned of the current chunk */
    uint32_t n;              /* ... of which changed */
    uint64_t skip;           /* unchanged chunks not yet written */
    uint64_t elems, changed; /* totals */
    uint16_t *pos;           /* [WEX__DELTA_CHUNK]: changed positions */
    uint8_t *vals;           /* ... and their current bytes */
    /* the snapshot of the chunk's first element: the caller's snapshot
     * is one contiguous stream, and after the scan it holds the chunk's
     * current bytes, which the payload's values are taken from */
    const uint8_t *chunk_snap;
} wex__delta_enc;

/* Scratch for an encoder (its positions), made once and reused. */
int wex__delta_enc_alloc(wex__delta_enc *e);
void wex__delta_enc_free(wex__delta_enc *e);
/* Starts a stream of `elem`-byte elements into out[0..cap). */
void wex__delta_enc_start(wex__delta_enc *e, unsigned elem, uint8_t *out,
                          size_t cap);
/* The next `bytes` of the stream (a multiple of elem): compares cur with
 * snap, records what changed, and copies the changed elements into
 * snap. Successive calls' snap must follow each other in memory (one
 * snapshot per stream); cur may come from anywhere (the runs of a
 * box). */
void wex__delta_enc_feed(wex__delta_enc *e, const uint8_t *cur, uint8_t *snap,
                         size_t bytes);
/* Ends the stream; the payload's length, or -1 when it outgrew cap (the
 * snapshot is up to date either way). */
int64_t wex__delta_enc_end(wex__delta_enc *e);

/* The vector instructions the encoder may use, the best this CPU has by
 * default; tests lower it to reach every path on one machine. */
enum { WEX__DELTA_ISA_SCALAR, WEX__DELTA_ISA_AVX2, WEX__DELTA_ISA_AVX512 };
void wex__delta_limit_isa(int isa);

/* The bytes a chunk of u elements with n changed takes in a payload
 * (0 for none: it joins a SKIP run). */
size_t wex__delta_chunk_bytes(uint32_t n, uint32_t u, unsigned elem);
/* The most bytes a payload of a stream of `elems` elements can take. */
uint64_t wex__delta_bound(uint64_t elems, unsigned elem);

/* Where a chunk's changed elements go: the chunk starts at stream
 * element `base`; its n changed elements are at chunk positions pos[]
 * (ascending), or, when pos is NULL, are the chunk's first n elements
 * (a dense chunk); their bytes follow one another at `values`. Called in
 * stream order. Nonzero stops the walk. */
typedef int (*wex__delta_sink)(void *arg, uint64_t base, const uint32_t *pos,
                               uint32_t n, const uint8_t *values);

/* Writes a sparse chunk's n values (`elem` bytes each, one after the
 * other at `values`) to elements pos[] (ascending) of `to`: what a
 * destination's apply does with a chunk whose run is contiguous. */
void wex__delta_scatter(uint8_t *to, const uint32_t *pos, uint32_t n,
                        const uint8_t *values, unsigned elem);

/* Walks a payload of a stream of `elems` elements of `elem` bytes;
 * 0, or -1 with a reason in `why` when it is malformed (a length past
 * the payload, positions out of order or out of the chunk, a stream
 * longer or shorter than elems) or the sink stopped. */
int wex__delta_walk(const uint8_t *payload, size_t len, unsigned elem,
                    uint64_t elems, wex__delta_sink sink, void *arg, char *why,
                    size_t why_cap);

/* A piece of a payload: the chunks [first, end) of its stream, written
 * in payload bytes [offset, offset + len). */
typedef struct wex__delta_piece {
    size_t offset, len;
    uint64_t first, end;
} wex__delta_piece;

/* Cuts a payload into at most `max` pieces of about equal bytes, at
 * chunk boundaries, reading only the chunks' headers; how many. A
 * malformed payload's last piece holds the damage, for its walk to
 * report. The pieces can be walked at once (they write disjoint
 * elements): the parallel apply of a destination. */
size_t wex__delta_cut(const uint8_t *payload, size_t len, unsigned elem,
                      uint64_t elems, size_t max, wex__delta_piece *out);
/* wex__delta_walk over one piece: the sink sees its chunks only. */
int wex__delta_walk_piece(const uint8_t *payload, const wex__delta_piece *piece,
                          unsigned elem, uint64_t elems, wex__delta_sink sink,
                          void *arg, char *why, size_t why_cap);

/* The chunks of a payload that change something, from their headers,
 * for a device to apply (delta_chunks.h): how many went into out[0..cap),
 * or -1 when the payload is malformed or has more. */
struct wex_delta_chunk;
int64_t wex__delta_chunks(const uint8_t *payload, size_t len, unsigned elem,
                          uint64_t elems, struct wex_delta_chunk *out,
                          size_t cap);

/* The device's encoder laid out (delta_scan_chunks.h, delta_slots.c):
 * from counts[c], the changed elements of chunk c of a stream of `elems`
 * elements of `elem` bytes, a slot for every chunk that changed and one
 * for a trailing SKIP, in out[] (room for a slot a chunk, and one); their
 * number in *count_p. The payload's length, or -1 when a count is past
 * its chunk. */
struct wex_delta_slot;
int64_t wex__delta_slots(const uint32_t *counts, uint64_t elems, unsigned elem,
                         struct wex_delta_slot *out, size_t *count_p);

/* Writes a piece's elements into the stream held contiguously at `to`
 * (the stream's element 0 there), decoding and writing in one pass: what
 * wex__delta_walk_piece with a sink that writes does, faster. */
int wex__delta_apply_piece(const uint8_t *payload,
                           const wex__delta_piece *piece, unsigned elem,
                           uint64_t elems, uint8_t *to, char *why,
                           size_t why_cap);

/* delta_model.c: what `wex plan --changed F` predicts. The expected
 * payload of a stream of `elems` elements of `elem` bytes when each
 * changed with probability `fraction`, independently; and the bytes a
 * second this CPU's encoders scan at 1 % changed on `threads` threads
 * (their best of three passes over 32 MiB of bf16, cut among them). */
double wex__delta_expected_bytes(uint64_t elems, unsigned elem,
                                 double fraction);
double wex__delta_scan_rate(unsigned threads);
/* Encodes `count` bf16 regions of `region` bytes (the k-th of cur and of
 * snap at k * region) on `threads` threads, each with an encoder of its
 * own, as a source's threads encode its groups; region k's payload at
 * out + k * wex__delta_bound(region / 2, 2). 0, or -1 when memory ran
 * out or a payload outgrew its room. */
int wex__delta_encode_regions(const uint8_t *cur, uint8_t *snap,
                              uint64_t region, size_t count, unsigned threads,
                              uint8_t *out);

#endif /* WEX_HOST_DELTA_H */
