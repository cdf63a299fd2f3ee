/*
 * The transform of an operation a policy planned (docs/design.md,
 * "Transforms"): from the two local tensors' dtypes and the pieces the
 * source box lies in. Policies plan regions of canonical tensors and
 * know nothing of dtypes; the host decides what the bytes become.
 */
#ifndef WEX_HOST_OP_TRANSFORM_H
#define WEX_HOST_OP_TRANSFORM_H

#include "plan.h"

/* Fills o->transform (and, to dequantize, where the source's block scales
 * are) for an operation between tensors of different dtypes; `why` gets
 * the reason when the pair is not one the host converts (an fp8
 * destination fed floats is planned by the host itself, not by a
 * policy). */
wex_status wex__op_derive(const wex__side *src, const wex__side *dst,
                          wex__op *o, const char **why);

/* The piece of source rank `rank`'s tensor `tensor` whose local box holds
 * the box at `off` (tensor coordinates) of `extent` (its trailing dims),
 * or NULL. */
const wex__piece *wex__piece_holding(const wex__side *side, uint64_t rank,
                                     uint64_t tensor, const uint64_t *off,
                                     uint32_t ndim, const uint64_t *extent);

#endif /* WEX_HOST_OP_TRANSFORM_H */
