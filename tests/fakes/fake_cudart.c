/*
 * A CUDA runtime without a GPU, for the tests of wex's device-memory
 * paths on machines that have none (libwex loads it through
 * WEX_CUDA_RUNTIME). "Device" memory is a memfd mapped twice: the
 * pointer handed out is mapped PROT_NONE, so any code that touches
 * device memory from the CPU instead of copying it faults at once, as
 * it would on a GPU; the copies below reach it through a private
 * read-write alias. It implements only the entry points libwex and the
 * tests call, synchronously (a stream is a no-op), and the entry points
 * of libwex_cuda.so (fake_cuda_kernels.c, loaded through
 * WEX_CUDA_KERNELS).
 *
 * Failures on demand: WEX_FAKE_CUDA_FAIL="ENTRY@N[,ENTRY@N...]" makes the
 * Nth call of ENTRY in this process (counted from 1) fail with
 * ERR_INJECTED, e.g. "cudaMemcpyAsync@40,wex_cuda_box_quantize@3". The
 * variable is read at every call, so a forked rank that sets it before
 * its first call fails alone.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SUCCESS 0
#define ERR_INVALID_VALUE 1
#define ERR_MEMORY_ALLOCATION 2
#define ERR_INJECTED 999

typedef struct allocation {
    unsigned char *device; /* PROT_NONE */
    unsigned char *alias;  /* read-write */
    size_t bytes;
    struct allocation *next;
} allocation;

typedef struct attributes {
    int type; /* 0 unregistered, 1 host, 2 device, 3 managed */
    int device;
    void *device_pointer;
    void *host_pointer;
} attributes;

static allocation *allocations;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The entries that can be made to fail, and how often each was called. */
static const char *const failing[] = {
    "cudaMallocHost",        "cudaMemcpyAsync",   "cudaMemcpy2DAsync",
    "cudaStreamSynchronize", "wex_cuda_box_amax", "wex_cuda_box_quantize",
    "wex_cuda_delta_apply"};
static unsigned long calls[sizeof(failing) / sizeof(failing[0])];

/* How often `entry` (one of `failing`) was called in this process. */
unsigned long fake_cuda_calls(const char *entry);
unsigned long fake_cuda_calls(const char *entry)
{
    unsigned long n = 0;

    pthread_mutex_lock(&lock);
    for (size_t e = 0; e < sizeof(failing) / sizeof(failing[0]); e++)
        if (strcmp(failing[e], entry) == 0)
            n = calls[e];
    pthread_mutex_unlock(&lock);
    return n;
}

/* Whether this call of `entry` is the one WEX_FAKE_CUDA_FAIL names. */
int fake_cuda_injected(const char *entry);
int fake_cuda_injected(const char *entry)
{
    const char *spec = getenv("WEX_FAKE_CUDA_FAIL");
    size_t n = strlen(entry), e = 0;
    unsigned long call;

    while (e < sizeof(failing) / sizeof(failing[0]) &&
           strcmp(failing[e], entry) != 0)
        e++;
    if (e == sizeof(failing) / sizeof(failing[0]))
        return 0;
    pthread_mutex_lock(&lock);
    call = ++calls[e];
    pthread_mutex_unlock(&lock);
    for (const char *at = spec; at != NULL && (at = strstr(at, entry)); at += n)
        if ((at == spec || at[-1] == ',') && at[n] == '@' &&
            strtoul(at + n + 1, NULL, 10) == call)
            return 1;
    return 0;
}

/* The read-write alias of a device pointer, or the pointer itself for
 * host memory; *left is how many bytes follow it in its allocation. */
unsigned char *fake_cuda_reach(const void *ptr, size_t *left);
unsigned char *fake_cuda_reach(const void *ptr, size_t *left)
{
    const unsigned char *p = ptr;
    unsigned char *out = (unsigned char *)p;

    *left = SIZE_MAX;
    pthread_mutex_lock(&lock);
    for (allocation *a = allocations; a != NULL; a = a->next)
        if (p >= a->device && p < a->device + a->bytes) {
            out = a->alias + (p - a->device);
            *left = a->bytes - (size_t)(p - a->device);
            break;
        }
    pthread_mutex_unlock(&lock);
    return out;
}

int cudaGetDeviceCount(int *count)
{
    *count = 1;
    return SUCCESS;
}

int cudaSetDevice(int device)
{
    return device == 0 ? SUCCESS : ERR_INVALID_VALUE;
}

int cudaMalloc(void **ptr, size_t bytes)
{
    allocation *a = calloc(1, sizeof(*a));
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = (bytes + page - 1) / page * page;
    int fd = memfd_create("fake-cuda", MFD_CLOEXEC);

    if (a == NULL || fd < 0 || ftruncate(fd, (off_t)size) != 0)
        goto fail;
    a->device = mmap(NULL, size, PROT_NONE, MAP_SHARED, fd, 0);
    a->alias = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (a->device == MAP_FAILED || a->alias == MAP_FAILED)
        goto fail;
    close(fd);
    a->bytes = size;
    pthread_mutex_lock(&lock);
    a->next = allocations;
    allocations = a;
    pthread_mutex_unlock(&lock);
    *ptr = a->device;
    return SUCCESS;
fail:
    if (fd >= 0)
        close(fd);
    free(a);
    return ERR_MEMORY_ALLOCATION;
}

int cudaFree(void *ptr)
{
    allocation **link, *a = NULL;

    pthread_mutex_lock(&lock);
    for (link = &allocations; *link != NULL; link = &(*link)->next)
        if ((*link)->device == ptr) {
            a = *link;
            *link = a->next;
            break;
        }
    pthread_mutex_unlock(&lock);
    if (a == NULL)
        return ptr == NULL ? SUCCESS : ERR_INVALID_VALUE;
    munmap(a->device, a->bytes);
    munmap(a->alias, a->bytes);
    free(a);
    return SUCCESS;
}

int cudaMemset(void *ptr, int value, size_t bytes)
{
    size_t left;
    unsigned char *p = fake_cuda_reach(ptr, &left);

    if (bytes > left)
        return ERR_INVALID_VALUE;
    memset(p, value, bytes);
    return SUCCESS;
}

int cudaMallocHost(void **ptr, size_t bytes)
{
    if (fake_cuda_injected("cudaMallocHost"))
        return ERR_INJECTED;
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr != NULL ? SUCCESS : ERR_MEMORY_ALLOCATION;
}

int cudaFreeHost(void *ptr)
{
    free(ptr);
    return SUCCESS;
}

int cudaMemcpy(void *dst, const void *src, size_t bytes, int kind)
{
    size_t dst_left, src_left;
    unsigned char *d = fake_cuda_reach(dst, &dst_left);
    const unsigned char *s = fake_cuda_reach(src, &src_left);

    (void)kind; /* the pointers say where they are, as with UVA */
    if (bytes > dst_left || bytes > src_left)
        return ERR_INVALID_VALUE;
    memmove(d, s, bytes);
    return SUCCESS;
}

int cudaMemcpyAsync(void *dst, const void *src, size_t bytes, int kind,
                    void *stream)
{
    (void)stream;
    if (fake_cuda_injected("cudaMemcpyAsync"))
        return ERR_INJECTED;
    return cudaMemcpy(dst, src, bytes, kind);
}

int cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                      size_t width, size_t height, int kind, void *stream)
{
    (void)stream;
    if (fake_cuda_injected("cudaMemcpy2DAsync"))
        return ERR_INJECTED;
    if (width > dpitch || width > spitch)
        return ERR_INVALID_VALUE;
    for (size_t r = 0; r < height; r++) {
        int e =
            cudaMemcpy((unsigned char *)dst + r * dpitch,
                       (const unsigned char *)src + r * spitch, width, kind);
        if (e != SUCCESS)
            return e;
    }
    return SUCCESS;
}

int cudaStreamCreateWithFlags(void **stream, unsigned int flags)
{
    (void)flags;
    *stream = malloc(1);
    return *stream != NULL ? SUCCESS : ERR_MEMORY_ALLOCATION;
}

int cudaStreamSynchronize(void *stream)
{
    (void)stream;
    return fake_cuda_injected("cudaStreamSynchronize") ? ERR_INJECTED : SUCCESS;
}

int cudaStreamDestroy(void *stream)
{
    free(stream);
    return SUCCESS;
}

int cudaDeviceSynchronize(void)
{
    return SUCCESS;
}

int cudaPointerGetAttributes(attributes *a, const void *ptr)
{
    size_t left;

    memset(a, 0, sizeof(*a));
    if (fake_cuda_reach(ptr, &left) != ptr) {
        a->type = 2;
        a->device_pointer = (void *)ptr;
    }
    return SUCCESS;
}

const char *cudaGetErrorString(int error)
{
    switch (error) {
    case SUCCESS: return "no error";
    case ERR_INVALID_VALUE: return "invalid argument (fake CUDA runtime)";
    case ERR_MEMORY_ALLOCATION: return "out of memory (fake CUDA runtime)";
    case ERR_INJECTED: return "injected failure (WEX_FAKE_CUDA_FAIL)";
    default: return "unknown error (fake CUDA runtime)";
    }
}
