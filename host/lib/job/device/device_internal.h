/*
 * What device_memory.c and device_kernels.c share: the CUDA runtime's
 * entry points (dlopen'ed, device_memory.h says why) and a job's device
 * state. Private to those two files.
 */
#ifndef WEX_HOST_DEVICE_INTERNAL_H
#define WEX_HOST_DEVICE_INTERNAL_H

#include "device_memory.h"
#include "error.h"

/* The CUDA runtime ABI, as cuda_runtime_api.h declares it: enums are
 * ints, handles are pointers. */
typedef int cuda_error;
#define CUDA_SUCCESS 0
#define CUDA_MEMCPY_HOST_TO_DEVICE 1
#define CUDA_MEMCPY_DEVICE_TO_HOST 2
#define CUDA_MEMCPY_DEVICE_TO_DEVICE 3
#define CUDA_MEMORY_TYPE_DEVICE 2
#define CUDA_MEMORY_TYPE_MANAGED 3
#define CUDA_STREAM_NON_BLOCKING 1u

/* cudaPointerAttributes, with room to spare for later members. */
typedef struct cuda_pointer_attributes {
    int type;
    int device;
    void *device_pointer;
    void *host_pointer;
    long reserved[32];
} cuda_pointer_attributes;

typedef struct cuda_api {
    cuda_error (*GetDeviceCount)(int *);
    cuda_error (*Malloc)(void **, size_t);
    cuda_error (*Free)(void *);
    cuda_error (*Memset)(void *, int, size_t);
    cuda_error (*MallocHost)(void **, size_t);
    cuda_error (*FreeHost)(void *);
    cuda_error (*MemcpyAsync)(void *, const void *, size_t, int, void *);
    cuda_error (*Memcpy2DAsync)(void *, size_t, const void *, size_t, size_t,
                                size_t, int, void *);
    cuda_error (*StreamCreateWithFlags)(void **, unsigned int);
    cuda_error (*StreamSynchronize)(void *);
    cuda_error (*StreamDestroy)(void *);
    cuda_error (*DeviceSynchronize)(void);
    cuda_error (*PointerGetAttributes)(cuda_pointer_attributes *, const void *);
    const char *(*GetErrorString)(cuda_error);
} cuda_api;

typedef struct wex__device_kernels wex__device_kernels;

struct wex__device {
    void *dl;
    cuda_api api;
    void *stream;           /* copies into staging */
    unsigned char *staging; /* pinned, WEX__STAGING_BYTES */
    uint64_t used;
    wex__device_kernels *kernels; /* device_kernels.c, on first use */
    /* why they did not load, once they did not: not tried again */
    char kernels_missing[512];
};

void wex__device_kernels_free(wex__device *dev);

/* A CUDA error as the job's error, `what` naming what failed. */
static inline wex_status wex__cuda_fail(const wex__device *dev, cuda_error e,
                                        const char *what)
{
    return wex__error(WEX_ERR_SYSTEM, "%s: %s (CUDA error %d)", what,
                      dev->api.GetErrorString(e), e);
}

#endif /* WEX_HOST_DEVICE_INTERNAL_H */
