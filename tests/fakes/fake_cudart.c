/*
 * A CUDA runtime without a GPU, for the tests of wex's device-memory
 * paths on machines that have none (libwex loads it through
 * WEX_CUDA_RUNTIME). "Device" memory is a memfd mapped twice: the
 * pointer handed out is mapped PROT_NONE, so any code that touches
 * device memory from the CPU instead of copying it faults at once, as
 * it would on a GPU; the copies below reach it through a private
 * read-write alias. It implements only the entry points libwex, the
 * device transports and the tests call, and the entry points of
 * libwex_cuda.so (fake_cuda_kernels.c, loaded through WEX_CUDA_KERNELS).
 * Copies and kernels run at once, inside the call. A stream still holds
 * the work another fake queues on it (fake_nccl.c: a group of sends and
 * receives that completes later, on its progress thread), because a
 * caller that records an event after it, or synchronizes the stream,
 * must wait for that work as it would on a GPU. An allocation keeps its
 * memfd open, so that another process can map it through CUDA IPC
 * (fake_cuda_ipc.c, which adds it there as "imported" device memory).
 *
 * Failures on demand: WEX_FAKE_CUDA_FAIL="ENTRY@N[,ENTRY@N...]" makes the
 * Nth call of ENTRY in this process (counted from 1) fail with
 * ERR_INJECTED (cudaMalloc out of memory), e.g. "cudaMalloc@3,
 * cudaMemcpyAsync@40,wex_cuda_box_quantize@3". With
 * a "!" after N ("cudaMemcpyAsync@40!") that call kills the process
 * instead, as a rank that dies halfway through a step. "ipc_copy" counts
 * the copies (a 2-D copy's rows each) into imported memory: a source's
 * puts over cuda-ipc. The variable is read at every call, so a forked
 * rank that sets it fails alone.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SUCCESS 0
#define ERR_INVALID_VALUE 1
#define ERR_MEMORY_ALLOCATION 2
#define ERR_INVALID_DEVICE 101
#define ERR_INVALID_HANDLE 400
#define ERR_NOT_READY 600
#define ERR_INJECTED 999

typedef struct allocation {
    unsigned char *device; /* PROT_NONE */
    unsigned char *alias;  /* read-write */
    size_t bytes;
    int fd;       /* cudaMalloc's memfd, else -1 */
    int imported; /* another process's (fake_cuda_import) */
    struct allocation *next;
} allocation;

typedef struct attributes {
    int type; /* 0 unregistered, 1 host, 2 device, 3 managed */
    int device;
    void *device_pointer;
    void *host_pointer;
} attributes;

static allocation *allocations;
static allocation *pinned; /* cudaMallocHost's; alias only */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The entries that can be made to fail, and how often each was called. */
static const char *const failing[] = {
    "cudaMallocHost",         "cudaMemcpyAsync",
    "cudaMemcpy2DAsync",      "cudaStreamSynchronize",
    "wex_cuda_box_amax",      "wex_cuda_box_quantize",
    "wex_cuda_delta_apply",   "wex_cuda_delta_count",
    "wex_cuda_delta_encode",  "ipc_copy",
    "wex_cuda_digest_blocks", "cudaMalloc"};
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
    for (const char *at = spec; at != NULL && (at = strstr(at, entry));
         at += n) {
        char *end;
        if ((at == spec || at[-1] == ',') && at[n] == '@' &&
            strtoul(at + n + 1, &end, 10) == call) {
            if (*end == '!')
                raise(SIGKILL);
            return 1;
        }
    }
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

/* The device allocation holding `ptr`: where it starts, its size and its
 * memfd (-1: imported). 0, or -1 when `ptr` is not device memory. */
int fake_cuda_allocation(const void *ptr, void **base, size_t *bytes, int *fd);
int fake_cuda_allocation(const void *ptr, void **base, size_t *bytes, int *fd)
{
    const unsigned char *p = ptr;
    int found = -1;

    pthread_mutex_lock(&lock);
    for (allocation *a = allocations; a != NULL && found != 0; a = a->next)
        if (p >= a->device && p < a->device + a->bytes) {
            *base = a->device;
            *bytes = a->bytes;
            *fd = a->fd;
            found = 0;
        }
    pthread_mutex_unlock(&lock);
    return found;
}

int cudaGetDeviceCount(int *count)
{
    *count = 1;
    return SUCCESS;
}

int cudaSetDevice(int device)
{
    return device == 0 ? SUCCESS : ERR_INVALID_DEVICE;
}

int cudaGetDevice(int *device)
{
    *device = 0; /* the one device there is */
    return SUCCESS;
}

/* Puts `a` at the head of `list`. */
static void link_allocation(allocation **list, allocation *a)
{
    pthread_mutex_lock(&lock);
    a->next = *list;
    *list = a;
    pthread_mutex_unlock(&lock);
}

/* Takes the allocation whose device pointer (by_device) or host alias
 * is `ptr` off `list`; NULL when none is. */
static allocation *unlink_allocation(allocation **list, const void *ptr,
                                     int by_device)
{
    allocation **link, *a = NULL;

    pthread_mutex_lock(&lock);
    for (link = list; *link != NULL; link = &(*link)->next)
        if ((by_device ? (*link)->device : (*link)->alias) == ptr) {
            a = *link;
            *link = a->next;
            break;
        }
    pthread_mutex_unlock(&lock);
    return a;
}

/* Lists `size` bytes of memfd `fd` as device memory, mapped twice: our
 * own (keeping `fd` for cudaIpcGetMemHandle until cudaFree) or another
 * process's, `imported`. NULL when that fails. */
static allocation *map_device(int fd, size_t size, int imported)
{
    allocation *a = calloc(1, sizeof(*a));

    if (a == NULL)
        return NULL;
    a->device = mmap(NULL, size, PROT_NONE, MAP_SHARED, fd, 0);
    a->alias = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (a->device == MAP_FAILED || a->alias == MAP_FAILED) {
        if (a->device != MAP_FAILED)
            munmap(a->device, size);
        if (a->alias != MAP_FAILED)
            munmap(a->alias, size);
        free(a);
        return NULL;
    }
    a->bytes = size;
    a->fd = imported ? -1 : fd;
    a->imported = imported;
    link_allocation(&allocations, a);
    return a;
}

/* Takes the allocation at `ptr` off the list and unmaps it, if it is
 * `imported` or not as asked: cudaFree and cudaIpcCloseMemHandle each
 * refuse the other's memory, as CUDA does. */
static int unmap_device(void *ptr, int imported)
{
    allocation *a = unlink_allocation(&allocations, ptr, 1);

    if (a != NULL && a->imported != imported) {
        link_allocation(&allocations, a);
        a = NULL;
    }
    if (a == NULL)
        return -1;
    munmap(a->device, a->bytes);
    munmap(a->alias, a->bytes);
    if (a->fd >= 0)
        close(a->fd);
    free(a);
    return 0;
}

int cudaMalloc(void **ptr, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = (bytes + page - 1) / page * page;
    int fd = fake_cuda_injected("cudaMalloc") /* as a full device */
                 ? -1
                 : memfd_create("fake-cuda", MFD_CLOEXEC);
    allocation *a = NULL;

    if (fd >= 0 && ftruncate(fd, (off_t)size) == 0)
        a = map_device(fd, size, 0);
    if (a == NULL) {
        if (fd >= 0)
            close(fd);
        return ERR_MEMORY_ALLOCATION;
    }
    *ptr = a->device;
    return SUCCESS;
}

int cudaFree(void *ptr)
{
    if (ptr == NULL)
        return SUCCESS;
    return unmap_device(ptr, 0) == 0 ? SUCCESS : ERR_INVALID_VALUE;
}

/* Maps `bytes` of another process's allocation, open here as `fd`, as
 * device memory of this one; NULL when that fails. */
void *fake_cuda_import(int fd, size_t bytes);
void *fake_cuda_import(int fd, size_t bytes)
{
    allocation *a = map_device(fd, bytes, 1);

    return a != NULL ? a->device : NULL;
}

int fake_cuda_unimport(void *ptr);
int fake_cuda_unimport(void *ptr)
{
    return unmap_device(ptr, 1);
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

/* Pinned host memory: a GPU reaches it as well (mapped, with unified
 * addressing), so the fake NCCL takes it where it refuses pageable host
 * memory; fake_cuda_pinned says which is which. */
int fake_cuda_pinned(const void *ptr, size_t *left);
int fake_cuda_pinned(const void *ptr, size_t *left)
{
    const unsigned char *p = ptr;
    int found = 0;

    pthread_mutex_lock(&lock);
    for (allocation *a = pinned; a != NULL && !found; a = a->next)
        if (p >= a->alias && p < a->alias + a->bytes) {
            *left = a->bytes - (size_t)(p - a->alias);
            found = 1;
        }
    pthread_mutex_unlock(&lock);
    return found;
}

int cudaMallocHost(void **ptr, size_t bytes)
{
    allocation *a;

    if (fake_cuda_injected("cudaMallocHost"))
        return ERR_INJECTED;
    a = calloc(1, sizeof(*a));
    if (a == NULL || (a->alias = malloc(bytes ? bytes : 1)) == NULL) {
        free(a);
        return ERR_MEMORY_ALLOCATION;
    }
    a->bytes = bytes;
    a->fd = -1;
    link_allocation(&pinned, a);
    *ptr = a->alias;
    return SUCCESS;
}

int cudaFreeHost(void *ptr)
{
    allocation *a = unlink_allocation(&pinned, ptr, 0);

    if (a == NULL)
        return ptr == NULL ? SUCCESS : ERR_INVALID_VALUE;
    free(a->alias);
    free(a);
    return SUCCESS;
}

int cudaMemcpy(void *dst, const void *src, size_t bytes, int kind)
{
    size_t dst_left, src_left, size;
    unsigned char *d = fake_cuda_reach(dst, &dst_left);
    const unsigned char *s = fake_cuda_reach(src, &src_left);
    void *base;
    int fd;

    (void)kind; /* the pointers say where they are, as with UVA */
    if (bytes > dst_left || bytes > src_left)
        return ERR_INVALID_VALUE;
    if (fake_cuda_allocation(dst, &base, &size, &fd) == 0 && fd < 0 &&
        fake_cuda_injected("ipc_copy"))
        return ERR_INJECTED;
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

/* ---- streams and events -------------------------------------------- */

/* Work another fake queued on a stream (fake_cuda_work_begin). Items
 * finish in any order, but a stream completes them in the order they
 * were queued, as a GPU runs a stream's kernels one after another. */
typedef struct work {
    uint64_t ticket;
    int finished;
    struct stream *stream;
    struct work *next;
} work;

/* Freed once its handle, the events recorded on it and its work are all
 * gone: cudaStreamDestroy returns at once, as CUDA's does. */
typedef struct stream {
    uint64_t issued;   /* tickets handed out */
    work *head, *tail; /* not completed, in ticket order */
    unsigned refs;
} stream;

typedef struct event {
    stream *stream;  /* NULL: never recorded, complete */
    uint64_t ticket; /* complete once no work up to it is left */
} event;

/* The legacy default stream (0, cudaStreamLegacy, cudaStreamPerThread),
 * never freed; `done` is signalled whenever a stream completes work. */
static stream default_stream = {0, NULL, NULL, 1};
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;

static stream *stream_of(void *handle)
{
    return (uintptr_t)handle <= 2 ? &default_stream : handle;
}

static void stream_unref(stream *s)
{
    if (--s->refs == 0 && s != &default_stream)
        free(s);
}

static int event_complete(const event *e)
{
    return e->stream == NULL || e->stream->head == NULL ||
           e->stream->head->ticket > e->ticket;
}

/* Queues work on `handle`'s stream; fake_cuda_work_end finishes it. */
void *fake_cuda_work_begin(void *handle);
void *fake_cuda_work_begin(void *handle)
{
    work *w = calloc(1, sizeof(*w));

    if (w == NULL)
        return NULL;
    pthread_mutex_lock(&lock);
    w->stream = stream_of(handle);
    w->stream->refs++;
    w->ticket = ++w->stream->issued;
    if (w->stream->tail != NULL)
        w->stream->tail->next = w;
    else
        w->stream->head = w;
    w->stream->tail = w;
    pthread_mutex_unlock(&lock);
    return w;
}

void fake_cuda_work_end(void *item);
void fake_cuda_work_end(void *item)
{
    work *w = item;
    stream *s;

    if (w == NULL)
        return;
    pthread_mutex_lock(&lock);
    s = w->stream;
    w->finished = 1;
    while (s->head != NULL && s->head->finished) {
        w = s->head;
        s->head = w->next;
        if (s->head == NULL)
            s->tail = NULL;
        free(w);
        stream_unref(s);
    }
    pthread_cond_broadcast(&done);
    pthread_mutex_unlock(&lock);
}

int cudaStreamCreateWithFlags(void **handle, unsigned int flags)
{
    stream *s = calloc(1, sizeof(*s));

    (void)flags;
    if (s == NULL)
        return ERR_MEMORY_ALLOCATION;
    s->refs = 1;
    *handle = s;
    return SUCCESS;
}

int cudaStreamSynchronize(void *handle)
{
    stream *s = stream_of(handle);

    if (fake_cuda_injected("cudaStreamSynchronize"))
        return ERR_INJECTED;
    pthread_mutex_lock(&lock);
    while (s->head != NULL)
        pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
    return SUCCESS;
}

int cudaStreamDestroy(void *handle)
{
    if ((uintptr_t)handle <= 2)
        return ERR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    stream_unref(handle);
    pthread_mutex_unlock(&lock);
    return SUCCESS;
}

/* Only streams hold work, and only cudaStreamSynchronize is used with
 * it; a device-wide wait is the default stream's. */
int cudaDeviceSynchronize(void)
{
    return cudaStreamSynchronize(NULL);
}

int cudaEventCreateWithFlags(void **handle, unsigned int flags)
{
    (void)flags;
    *handle = calloc(1, sizeof(event));
    return *handle != NULL ? SUCCESS : ERR_MEMORY_ALLOCATION;
}

int cudaEventCreate(void **handle)
{
    return cudaEventCreateWithFlags(handle, 0);
}

int cudaEventRecord(void *handle, void *on)
{
    event *e = handle;

    if (e == NULL)
        return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    if (e->stream != NULL)
        stream_unref(e->stream);
    e->stream = stream_of(on);
    e->stream->refs++;
    e->ticket = e->stream->issued;
    pthread_mutex_unlock(&lock);
    return SUCCESS;
}

int cudaEventQuery(void *handle)
{
    int complete;

    if (handle == NULL)
        return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    complete = event_complete(handle);
    pthread_mutex_unlock(&lock);
    return complete ? SUCCESS : ERR_NOT_READY;
}

int cudaEventSynchronize(void *handle)
{
    if (handle == NULL)
        return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    while (!event_complete(handle))
        pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
    return SUCCESS;
}

int cudaEventDestroy(void *handle)
{
    event *e = handle;

    if (e == NULL)
        return ERR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    if (e->stream != NULL)
        stream_unref(e->stream);
    pthread_mutex_unlock(&lock);
    free(e);
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
    case ERR_INVALID_DEVICE:
        return "invalid device ordinal (fake CUDA runtime)";
    case ERR_INVALID_HANDLE:
        return "invalid resource handle (fake CUDA runtime)";
    case ERR_NOT_READY: return "device not ready (fake CUDA runtime)";
    case ERR_INJECTED: return "injected failure (WEX_FAKE_CUDA_FAIL)";
    default: return "unknown error (fake CUDA runtime)";
    }
}
