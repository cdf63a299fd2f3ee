/* CUDA device memory through a dlopen'ed CUDA runtime (device_memory.h
 * says why it is not linked). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_internal.h"
#include "device_memory.h"
#include "digest_update.h"
#include "error.h"

/* The soname the build found first (WEX_CUDART_SONAME), then the ones a
 * driver of this era may come with. */
static const char *const cudart_names[] = {
#ifdef WEX_CUDART_SONAME
    WEX_CUDART_SONAME,
#endif
    "libcudart.so.13",
    "libcudart.so.12",
    "libcudart.so",
};

static wex_status load_symbols(wex__device *dev, const char *name)
{
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&dev->api.GetDeviceCount, "cudaGetDeviceCount"},
        {(void **)&dev->api.Malloc, "cudaMalloc"},
        {(void **)&dev->api.Free, "cudaFree"},
        {(void **)&dev->api.Memset, "cudaMemset"},
        {(void **)&dev->api.MallocHost, "cudaMallocHost"},
        {(void **)&dev->api.FreeHost, "cudaFreeHost"},
        {(void **)&dev->api.MemcpyAsync, "cudaMemcpyAsync"},
        {(void **)&dev->api.Memcpy2DAsync, "cudaMemcpy2DAsync"},
        {(void **)&dev->api.StreamCreateWithFlags, "cudaStreamCreateWithFlags"},
        {(void **)&dev->api.StreamSynchronize, "cudaStreamSynchronize"},
        {(void **)&dev->api.StreamDestroy, "cudaStreamDestroy"},
        {(void **)&dev->api.DeviceSynchronize, "cudaDeviceSynchronize"},
        {(void **)&dev->api.PointerGetAttributes, "cudaPointerGetAttributes"},
        {(void **)&dev->api.GetErrorString, "cudaGetErrorString"},
    };

    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].slot = dlsym(dev->dl, syms[i].name);
        if (*syms[i].slot == NULL)
            return wex__error(WEX_ERR_UNSUPPORTED,
                              "no CUDA runtime: %s has "
                              "no %s",
                              name, syms[i].name);
    }
    return WEX_OK;
}

wex_status wex__device_open(wex__device **dev_p)
{
    wex__device *dev = calloc(1, sizeof(*dev));
    /* WEX_CUDA_RUNTIME names the runtime to load instead (a CUDA install
     * outside the loader's path; the tests' runtime without a GPU). */
    const char *chosen = secure_getenv("WEX_CUDA_RUNTIME");
    const char *name = NULL;
    char tried[512] = "";
    wex_status st = WEX_OK;
    cuda_error e;
    int count = 0;

    if (dev == NULL)
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    if (chosen != NULL && chosen[0] != '\0') {
        name = chosen;
        if ((dev->dl = dlopen(chosen, RTLD_NOW | RTLD_LOCAL)) == NULL)
            snprintf(tried, sizeof(tried), "WEX_CUDA_RUNTIME: %s", dlerror());
    }
    for (size_t i = 0;
         name == NULL && i < sizeof(cudart_names) / sizeof(cudart_names[0]) &&
         dev->dl == NULL;
         i++) {
        dev->dl = dlopen(cudart_names[i], RTLD_NOW | RTLD_LOCAL);
        if (dev->dl != NULL)
            name = cudart_names[i];
        else if (tried[0] == '\0')
            snprintf(tried, sizeof(tried), "%s", dlerror());
    }
    if (dev->dl == NULL) {
        st = wex__error(WEX_ERR_UNSUPPORTED, "no CUDA runtime: %s", tried);
        goto out;
    }
    st = load_symbols(dev, name);
    if (st != WEX_OK)
        goto out;
    e = dev->api.GetDeviceCount(&count);
    if (e != CUDA_SUCCESS || count == 0) {
        st = wex__error(WEX_ERR_UNSUPPORTED,
                        "no CUDA device (cudaGetDevice"
                        "Count: %s)",
                        e != CUDA_SUCCESS ? dev->api.GetErrorString(e)
                                          : "0 devices");
        goto out;
    }
    e = dev->api.StreamCreateWithFlags(&dev->stream, CUDA_STREAM_NON_BLOCKING);
    if (e == CUDA_SUCCESS)
        e = dev->api.MallocHost((void **)&dev->staging, WEX__STAGING_BYTES);
    if (e != CUDA_SUCCESS)
        st = wex__cuda_fail(dev, e, "pinned staging memory");
out:
    if (st != WEX_OK) {
        wex__device_close(dev);
        return st;
    }
    *dev_p = dev;
    return WEX_OK;
}

void wex__device_close(wex__device *dev)
{
    if (dev == NULL)
        return;
    wex__device_kernels_free(dev);
    if (dev->staging != NULL)
        dev->api.FreeHost(dev->staging);
    if (dev->stream != NULL)
        dev->api.StreamDestroy(dev->stream);
    /* The runtime stays loaded: unloading it under live CUDA state (the
     * application's, the transport's) is not safe. */
    free(dev);
}

wex_status wex__device_alloc(wex__device *dev, uint64_t bytes, void **ptr_p)
{
    void *ptr = NULL;
    cuda_error e = dev->api.Malloc(&ptr, bytes ? bytes : 1);

    if (e != CUDA_SUCCESS)
        return wex__error(WEX_ERR_NOMEM, "cudaMalloc of %llu bytes: %s",
                          (unsigned long long)bytes,
                          dev->api.GetErrorString(e));
    e = dev->api.Memset(ptr, 0, bytes);
    if (e == CUDA_SUCCESS)
        e = dev->api.DeviceSynchronize();
    if (e != CUDA_SUCCESS) {
        dev->api.Free(ptr);
        return wex__cuda_fail(dev, e, "zeroing device memory");
    }
    *ptr_p = ptr;
    return WEX_OK;
}

wex_status wex__device_alloc_pinned(wex__device *dev, uint64_t bytes,
                                    void **ptr_p)
{
    cuda_error e = dev->api.MallocHost(ptr_p, bytes ? bytes : 1);

    if (e != CUDA_SUCCESS)
        return wex__error(WEX_ERR_NOMEM, "cudaMallocHost of %llu bytes: %s",
                          (unsigned long long)bytes,
                          dev->api.GetErrorString(e));
    memset(*ptr_p, 0, bytes);
    return WEX_OK;
}

void wex__device_free_pinned(wex__device *dev, void *ptr)
{
    if (dev != NULL && ptr != NULL)
        dev->api.FreeHost(ptr);
}

/* One copy queued on the job's stream; `what` names a failure. */
static wex_status queue_copy(wex__device *dev, void *to, const void *from,
                             uint64_t bytes, int kind, const char *what)
{
    cuda_error e = dev->api.MemcpyAsync(to, from, bytes, kind, dev->stream);

    return e == CUDA_SUCCESS ? WEX_OK : wex__cuda_fail(dev, e, what);
}

wex_status wex__device_copy_in(wex__device *dev, void *ptr, const void *host,
                               uint64_t bytes)
{
    return queue_copy(dev, ptr, host, bytes, CUDA_MEMCPY_HOST_TO_DEVICE,
                      "copying into device memory");
}

wex_status wex__device_copy_within(wex__device *dev, void *dst, const void *src,
                                   uint64_t bytes)
{
    wex_status st =
        queue_copy(dev, dst, src, bytes, CUDA_MEMCPY_DEVICE_TO_DEVICE,
                   "copying within device memory");

    return st == WEX_OK ? wex__device_copy_in_end(dev) : st;
}

wex_status wex__device_copy_in_rows(wex__device *dev, void *ptr,
                                    const void *host, uint64_t pitch,
                                    uint64_t width, uint64_t rows)
{
    cuda_error e;

    if (rows == 0)
        return WEX_OK;
    e = dev->api.Memcpy2DAsync(ptr, rows > 1 ? pitch : width, host,
                               rows > 1 ? pitch : width, width, rows,
                               CUDA_MEMCPY_HOST_TO_DEVICE, dev->stream);
    return e == CUDA_SUCCESS
               ? WEX_OK
               : wex__cuda_fail(dev, e, "copying rows into device memory");
}

wex_status wex__device_copy_in_end(wex__device *dev)
{
    cuda_error e = dev->api.StreamSynchronize(dev->stream);

    return e == CUDA_SUCCESS
               ? WEX_OK
               : wex__cuda_fail(dev, e, "copying into device memory");
}

void wex__device_free(wex__device *dev, void *ptr)
{
    if (dev != NULL && ptr != NULL)
        dev->api.Free(ptr);
}

wex_status wex__device_check(wex__device *dev, const void *ptr, uint64_t bytes)
{
    cuda_pointer_attributes a;
    cuda_error e;

    memset(&a, 0, sizeof(a));
    e = dev->api.PointerGetAttributes(&a, ptr);
    if (e != CUDA_SUCCESS)
        return wex__error(WEX_ERR_INVALID, "%p is not CUDA memory: %s", ptr,
                          dev->api.GetErrorString(e));
    if (a.type != CUDA_MEMORY_TYPE_DEVICE && a.type != CUDA_MEMORY_TYPE_MANAGED)
        return wex__error(WEX_ERR_INVALID,
                          "%p (%llu bytes) is host memory, "
                          "not device memory (bind it as WEX_MEMORY_HOST)",
                          ptr, (unsigned long long)bytes);
    return WEX_OK;
}

static wex_status copy_out(wex__device *dev, void *host, const void *ptr,
                           uint64_t bytes)
{
    return queue_copy(dev, host, ptr, bytes, CUDA_MEMCPY_DEVICE_TO_HOST,
                      "copying device memory out");
}

wex_status wex__device_hash_end(wex__device *dev, wex__digest *h)
{
    cuda_error e = dev->api.StreamSynchronize(dev->stream);

    if (e != CUDA_SUCCESS) {
        dev->used = 0;
        return wex__cuda_fail(dev, e, "copying device memory out");
    }
    wex__digest_add(h, dev->staging, dev->used);
    dev->used = 0;
    return WEX_OK;
}

wex_status wex__device_hash_run(wex__device *dev, wex__digest *h,
                                const void *ptr, uint64_t bytes)
{
    const unsigned char *p = ptr;
    wex_status st = WEX_OK;

    while (bytes > 0 && st == WEX_OK) {
        uint64_t room = WEX__STAGING_BYTES - dev->used;
        uint64_t n = bytes < room ? bytes : room;
        if (n == 0) {
            st = wex__device_hash_end(dev, h);
            continue;
        }
        st = copy_out(dev, dev->staging + dev->used, p, n);
        dev->used += n;
        p += n;
        bytes -= n;
    }
    return st;
}

wex_status wex__device_stage_out(wex__device *dev, const void *ptr,
                                 uint64_t bytes, const void **host_p)
{
    cuda_error e;
    wex_status st;

    *host_p = NULL;
    if (bytes > WEX__STAGING_BYTES - dev->used)
        return WEX_OK;
    st = copy_out(dev, dev->staging + dev->used, ptr, bytes);
    if (st != WEX_OK)
        return st;
    e = dev->api.StreamSynchronize(dev->stream);
    if (e != CUDA_SUCCESS)
        return wex__cuda_fail(dev, e, "copying device memory out");
    *host_p = dev->staging + dev->used;
    dev->used += bytes;
    return WEX_OK;
}

wex_status wex__device_stage_rows(wex__device *dev, const void *ptr,
                                  uint64_t pitch, uint64_t width, uint64_t rows,
                                  const void **host_p)
{
    cuda_error e;

    *host_p = NULL;
    if (rows == 0 || width > WEX__STAGING_BYTES / rows ||
        rows * width > WEX__STAGING_BYTES - dev->used)
        return WEX_OK;
    e = dev->api.Memcpy2DAsync(dev->staging + dev->used, width, ptr,
                               rows > 1 ? pitch : width, width, rows,
                               CUDA_MEMCPY_DEVICE_TO_HOST, dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.StreamSynchronize(dev->stream);
    if (e != CUDA_SUCCESS)
        return wex__cuda_fail(dev, e, "copying device rows out");
    *host_p = dev->staging + dev->used;
    dev->used += rows * width;
    return WEX_OK;
}

void wex__device_stage_reset(wex__device *dev)
{
    dev->used = 0;
}
