/*
 * The names a transport may publish through the rendezvous the host lends
 * its connect (wex_transport_exchange, ABI 1.3): the host's rule, which
 * the conformance kit's stand-in rendezvous applies too.
 */
#ifndef WEX_HOST_TRANSPORT_EXCHANGE_H
#define WEX_HOST_TRANSPORT_EXCHANGE_H

/* The longest name, in characters. */
#define WEX__TRANSPORT_NAME_MAX 64

/* 1 when `name` is 1 to WEX__TRANSPORT_NAME_MAX characters of
 * [A-Za-z0-9_.-]. */
int wex__transport_name_ok(const char *name);

#endif /* WEX_HOST_TRANSPORT_EXCHANGE_H */
