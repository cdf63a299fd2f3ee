/*
 * What a transport may publish and fetch through the rendezvous the host
 * lends its connect (wex_transport_exchange, ABI 1.3): the host's rule,
 * which the conformance kit's stand-in rendezvous applies too.
 */
#ifndef WEX_HOST_TRANSPORT_EXCHANGE_H
#define WEX_HOST_TRANSPORT_EXCHANGE_H

#include <stdint.h>

#include <wex/abi.h>

/* The longest name, in characters. */
#define WEX__TRANSPORT_NAME_MAX 64

/* WEX_OK when `name` may be published with `len` bytes of `value`: a
 * name of 1 to WEX__TRANSPORT_NAME_MAX characters of [A-Za-z0-9_.-] and
 * at most WEX_TRANSPORT_KEY_MAX bytes; else WEX_ERR_INVALID, told. */
wex_status wex__transport_publish_check(const char *name, const void *value,
                                        uint64_t len);
/* The same for a fetch of `name` into `cap` bytes at `value`, its length
 * into *len_p. */
wex_status wex__transport_fetch_check(const char *name, const void *value,
                                      uint64_t cap, const uint64_t *len_p);

#endif /* WEX_HOST_TRANSPORT_EXCHANGE_H */
