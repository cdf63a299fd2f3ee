/* The version of libwex itself (not of the ABI). */
#ifndef WEX_HOST_VERSION_H
#define WEX_HOST_VERSION_H

const char *wex__version(void);

#endif /* WEX_HOST_VERSION_H */
