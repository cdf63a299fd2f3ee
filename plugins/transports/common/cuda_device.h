/* Which CUDA device a transport context works on. The wt_ prefix ("wex
 * transport") marks helpers private to the in-tree transports that link
 * this folder's static libraries. */
#ifndef WEX_TRANSPORT_CUDA_DEVICE_H
#define WEX_TRANSPORT_CUDA_DEVICE_H

#include <wex/plugin.h>

/* Option "/device" (absent or -1: the calling thread's current device,
 * as for the application's own tensors), checked against the devices
 * there are. No device at all is WEX_ERR_UNSUPPORTED "no CUDA device
 * (...)", which the conformance kit reports as a skip. */
wex_status wt_cuda_device(const wex_host_services *h, const wex_options *o,
                          int *device_p);

#endif /* WEX_TRANSPORT_CUDA_DEVICE_H */
