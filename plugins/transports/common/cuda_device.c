#include "cuda_device.h"

#include <cuda_runtime_api.h>

#include "plugin_fail.h"
#include "plugin_options.h"

wex_status wt_cuda_device(const wex_host_services *h, const wex_options *o,
                          int *device_p)
{
    int64_t device = -1;
    int count = 0, current = 0;
    cudaError_t e;
    wex_status st = wp_option_i64(h, o, "/device", -1, 1023, &device);

    if (st != WEX_OK)
        return st;
    e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        return WP_FAIL(h, WEX_ERR_UNSUPPORTED,
                       "no CUDA device (cudaGetDevice"
                       "Count: %s)",
                       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    if (device >= count)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "options/device: %lld, but this "
                       "host has CUDA devices 0..%d",
                       (long long)device, count - 1);
    if (device < 0 && (e = cudaGetDevice(&current)) != cudaSuccess)
        return WP_FAIL(h, WEX_ERR_SYSTEM, "cudaGetDevice: %s",
                       cudaGetErrorString(e));
    *device_p = device >= 0 ? (int)device : current;
    return WEX_OK;
}
