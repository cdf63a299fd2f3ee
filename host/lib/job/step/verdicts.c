/* The destinations' verdicts told in one line (verdicts.h). */
#include <stdio.h>
#include <string.h>

#include "verdicts.h"

static int same_verdict(const wex__store_gathered *a,
                        const wex__store_gathered *b)
{
    return a->present == b->present && a->len == b->len &&
           memcmp(a->value, b->value, a->len) == 0;
}

/* "destination ranks 0, 2 did not commit: REASON", once per distinct
 * verdict, so a death every destination saw is told once. */
void wex__step_tell_verdicts(const wex__store_gathered *v, uint64_t n,
                             uint64_t first, char *why, size_t cap)
{
    size_t used = 0;

    if (cap > 0)
        why[0] = '\0';
    for (uint64_t d = 0; d < n && used < cap; d++) {
        uint64_t count = 0;
        int told = 0, retry;
        /* ok, an elastic replica left out of the step, or one a replica
         * seeds after it: not a reason */
        if (v[d].present && (strcmp(v[d].value, "ok") == 0 ||
                             strcmp(v[d].value, "absent") == 0 ||
                             strcmp(v[d].value, "seed") == 0))
            continue;
        for (uint64_t e = 0; e < d && !told; e++)
            told = same_verdict(&v[e], &v[d]);
        if (told)
            continue;
        for (uint64_t e = d; e < n; e++)
            count += same_verdict(&v[e], &v[d]);
        used += (size_t)snprintf(why + used, cap - used,
                                 "%sdestination rank%s %llu", used ? "; " : "",
                                 count > 1 ? "s" : "",
                                 (unsigned long long)(first + d));
        for (uint64_t e = d + 1; e < n && used < cap; e++)
            if (same_verdict(&v[e], &v[d]))
                used += (size_t)snprintf(why + used, cap - used, ", %llu",
                                         (unsigned long long)(first + e));
        retry = v[d].present && strncmp(v[d].value, "retry:", 6) == 0;
        if (used < cap)
            used += (size_t)snprintf(
                why + used, cap - used, " %s%s",
                v[d].present ? "did not commit: " : "died during the step",
                !v[d].present ? "" : v[d].value + (retry ? 6 : 5));
    }
}
