/*
 * Walking an operation's box row by row (its last dimension is a row):
 * the converting transforms read and write a row at a time.
 */
#ifndef WEX_HOST_ROW_WALK_H
#define WEX_HOST_ROW_WALK_H

#include <stdint.h>

#include "plan.h"

typedef struct wex__rows {
    const wex__op *o;
    uint64_t idx[WEX_MAX_DIMS]; /* the box coordinates of the row's start */
    uint64_t left;              /* rows still to come */
    uint64_t width;             /* elements in a row */
} wex__rows;

/* At the box's first row. */
void wex__rows_init(wex__rows *w, const wex__op *o);
/* On to the next row (the caller counts `left` down). */
void wex__rows_next(wex__rows *w);

#endif /* WEX_HOST_ROW_WALK_H */
