/*
 * Allocations the cuda-ipc transport exports or opens, each once per
 * job: tensors that share an allocation (a caching allocator's pool, one
 * big buffer cut into tensors) share one IPC handle, because exporting
 * and above all opening handles is expensive, and a process may open a
 * given handle only once. Entries are counted references; pure bookkeeping
 * with no CUDA calls, so it is tested without a GPU.
 */
#ifndef WEX_CUDA_IPC_ALLOCS_H
#define WEX_CUDA_IPC_ALLOCS_H

#include <stdint.h>

typedef struct ipc_alloc {
    struct ipc_alloc *next;
    uint64_t owner; /* 0 for ours; the exporting pid for opened ones */
    uint64_t base;  /* in the owner's address space */
    uint64_t size;
    uint64_t refs;
    void *mapped; /* opened: where it is mapped here */
    unsigned char handle[64];
} ipc_alloc;

typedef struct ipc_allocs {
    ipc_alloc *head;
} ipc_allocs;

/* The entry for (owner, base), or NULL. */
ipc_alloc *ipc_allocs_find(ipc_allocs *t, uint64_t owner, uint64_t base);
/* The entry holding [address, address + bytes) of `owner`, or NULL. */
ipc_alloc *ipc_allocs_containing(ipc_allocs *t, uint64_t owner,
                                 uint64_t address, uint64_t bytes);
/* A new entry with one reference; NULL when out of memory. */
ipc_alloc *ipc_allocs_add(ipc_allocs *t, uint64_t owner, uint64_t base,
                          uint64_t size);
/* Drops one reference; returns 1 when it was the last, after unlinking
 * the entry: the caller then releases the CUDA side and frees it. */
int ipc_allocs_release(ipc_allocs *t, ipc_alloc *a);

#endif /* WEX_CUDA_IPC_ALLOCS_H */
