/*
 * A step's verdicts told: every destination posts "ok", "retry:why" or
 * "fail:why" under the try's verdict/ keys, and every rank gathers them
 * all (job_sync.c); what went wrong is said once per distinct verdict.
 */
#ifndef WEX_HOST_VERDICTS_H
#define WEX_HOST_VERDICTS_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* "destination ranks 0, 2 did not commit: REASON; destination rank 1
 * died during the step" into why[0..cap), for the n verdicts v of
 * destination ranks first, first + 1, ...; the "ok" ones, and the
 * "absent" of an elastic replica left out of the step, are not told. */
void wex__step_tell_verdicts(const wex__store_gathered *v, uint64_t n,
                             uint64_t first, char *why, size_t cap);

#endif /* WEX_HOST_VERDICTS_H */
