/*
 * Quantizing once (docs/design.md, "Transforms"): every replica of an fp8
 * destination needs the same cells, and the planner sends each cell from
 * the same source to all of them (quantize_plan.c picks a cell's source
 * by a hash of the cell). Those QUANTIZE operations are twins: one source
 * reads the same floats and makes the same e4m3 bytes for each. A source
 * makes them once a step and puts them to every twin
 * (job/convert/transforms.c); `wex plan` counts what the sources
 * quantize that way beside the work itself, each cell once.
 */
#ifndef WEX_HOST_QUANTIZE_ONCE_H
#define WEX_HOST_QUANTIZE_ONCE_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"

/* Whether a and b are QUANTIZE operations of one source rank that make
 * the same bytes: the same cell of the same fp8 weight, read from the
 * same box of the same local tensor. */
int wex__quantize_twins(const wex__op *a, const wex__op *b);

/* For each of `count` operations of one source rank, the first in plan
 * order that it is a twin of (itself when none comes before it, and for
 * any operation that does not quantize). */
wex_status wex__quantize_leaders(const wex__op *ops, size_t count,
                                 size_t *leader);

/* A set of cells seen, by a 64-bit hash of each (a collision would
 * count a cell once too few: figures only, never bytes). */
typedef struct wex__cell_set {
    uint64_t *keys; /* open addressing; 0 is empty */
    size_t cap, used;
} wex__cell_set;

/* Adds QUANTIZE operation o's cell, with its source rank (the bytes one
 * source quantizes) or without (the work: each cell once). 1 when it
 * was new, 0 when seen, -1 out of memory. */
int wex__cell_set_add(wex__cell_set *s, const wex__op *o, int per_source);
void wex__cell_set_free(wex__cell_set *s);

#endif /* WEX_HOST_QUANTIZE_ONCE_H */
