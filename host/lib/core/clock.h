/* The monotonic clock every deadline and timing in wex is measured on. */
#ifndef WEX_HOST_CLOCK_H
#define WEX_HOST_CLOCK_H

/* Seconds on CLOCK_MONOTONIC. */
double wex__now(void);

#endif /* WEX_HOST_CLOCK_H */
