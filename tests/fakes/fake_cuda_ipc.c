/*
 * CUDA IPC for the fake runtime (fake_cudart.c), between processes of
 * one host, as the cuda-ipc transport uses it. Fake device memory is a
 * memfd, which cudaMalloc keeps open: a handle names it by the exporting
 * process's pid, the fd's number there and the file's inode, and the
 * importing process opens /proc/PID/fd/N and maps it as device memory of
 * its own, which copies reach as any other. Nothing outlives the
 * processes: the memory goes with the last fd or mapping of it. The
 * inode tells a handle whose fd number was closed and reused for another
 * allocation, or whose process is gone, from a good one.
 *
 * Also the driver entry point the transport fetches through the
 * runtime: cuMemGetAddressRange.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SUCCESS 0
#define ERR_INVALID_VALUE 1
#define ERR_MEMORY_ALLOCATION 2
#define ERR_INVALID_HANDLE 400
#define DRIVER_NOT_FOUND 500     /* CUDA_ERROR_NOT_FOUND */
#define HANDLE_MAGIC 0x43504946u /* "FIPC" */

/* cudaIpcMemHandle_t: 64 opaque bytes, passed by value. */
typedef struct ipc_handle {
    char reserved[64];
} ipc_handle;

typedef struct handle_fields {
    uint32_t magic;
    int32_t pid, fd;
    uint32_t reserved;
    uint64_t inode, bytes;
} handle_fields;

/* What this process opened: CUDA returns the same pointer, counting
 * references, when a handle is opened again. */
typedef struct opened {
    int32_t pid;
    uint64_t inode;
    void *device;
    unsigned refs;
    struct opened *next;
} opened;

int fake_cuda_allocation(const void *ptr, void **base, size_t *bytes, int *fd);
void *fake_cuda_import(int fd, size_t bytes);
int fake_cuda_unimport(void *ptr);

static opened *opens;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int cudaIpcGetMemHandle(ipc_handle *handle, void *ptr)
{
    handle_fields f;
    struct stat st;
    void *base;
    size_t bytes;
    int fd;

    /* CUDA exports whole allocations of cudaMalloc, by their start */
    if (handle == NULL || fake_cuda_allocation(ptr, &base, &bytes, &fd) != 0 ||
        base != ptr || fd < 0 || fstat(fd, &st) != 0)
        return ERR_INVALID_VALUE;
    memset(handle, 0, sizeof(*handle));
    memset(&f, 0, sizeof(f));
    f.magic = HANDLE_MAGIC;
    f.pid = (int32_t)getpid();
    f.fd = fd;
    f.inode = (uint64_t)st.st_ino;
    f.bytes = bytes;
    memcpy(handle->reserved, &f, sizeof(f));
    return SUCCESS;
}

int cudaIpcOpenMemHandle(void **ptr, ipc_handle handle, unsigned int flags)
{
    handle_fields f;
    struct stat st;
    char path[64];
    opened *o;
    int fd, e = SUCCESS;

    (void)flags; /* peer access: one device here */
    memcpy(&f, handle.reserved, sizeof(f));
    if (f.magic != HANDLE_MAGIC || f.pid <= 0 || f.pid == getpid())
        return ERR_INVALID_HANDLE; /* CUDA maps other processes' only */
    pthread_mutex_lock(&lock);
    for (o = opens; o != NULL; o = o->next)
        if (o->pid == f.pid && o->inode == f.inode)
            break;
    if (o != NULL) {
        o->refs++;
        *ptr = o->device;
        goto out;
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)f.pid, (int)f.fd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_ino != f.inode ||
        (uint64_t)st.st_size < f.bytes) {
        e = ERR_INVALID_HANDLE;
    } else if ((o = calloc(1, sizeof(*o))) == NULL ||
               (o->device = fake_cuda_import(fd, f.bytes)) == NULL) {
        free(o);
        e = ERR_MEMORY_ALLOCATION;
    } else {
        o->pid = f.pid;
        o->inode = f.inode;
        o->refs = 1;
        o->next = opens;
        opens = o;
        *ptr = o->device;
    }
    if (fd >= 0)
        close(fd); /* the mappings hold the memory */
out:
    pthread_mutex_unlock(&lock);
    return e;
}

int cudaIpcCloseMemHandle(void *ptr)
{
    opened **link, *o = NULL;
    int e = ERR_INVALID_VALUE;

    pthread_mutex_lock(&lock);
    for (link = &opens; *link != NULL; link = &(*link)->next)
        if ((*link)->device == ptr) {
            o = *link;
            break;
        }
    if (o != NULL && --o->refs > 0) {
        e = SUCCESS;
    } else if (o != NULL) {
        *link = o->next;
        e = fake_cuda_unimport(ptr) == 0 ? SUCCESS : ERR_INVALID_VALUE;
        free(o);
    }
    pthread_mutex_unlock(&lock);
    return e;
}

/* cuMemGetAddressRange_v2: the allocation holding `ptr`. */
static int address_range(unsigned long long *base, size_t *size,
                         unsigned long long ptr)
{
    void *start;
    size_t bytes;
    int fd;

    if (fake_cuda_allocation((const void *)(uintptr_t)ptr, &start, &bytes,
                             &fd) != 0)
        return DRIVER_NOT_FOUND;
    if (base != NULL)
        *base = (unsigned long long)(uintptr_t)start;
    if (size != NULL)
        *size = bytes;
    return SUCCESS;
}

/* The driver's entry points the fake has: cuMemGetAddressRange alone.
 * Another name is not found (*status 1), as a symbol the driver lacks. */
int cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                     unsigned int version,
                                     unsigned long long flags, int *status)
{
    int found = symbol != NULL && strcmp(symbol, "cuMemGetAddressRange") == 0;

    (void)flags;
    if (fn == NULL)
        return ERR_INVALID_VALUE;
    /* its _v2, the one a version of 3020 or later gets */
    *fn = found && version >= 3020 ? (void *)(uintptr_t)address_range : NULL;
    if (status != NULL)
        *status = *fn != NULL ? 0 : found ? 2 : 1;
    return SUCCESS;
}
