#include "cuda_ipc_allocs.h"

#include <stdlib.h>

ipc_alloc *ipc_allocs_find(ipc_allocs *t, uint64_t owner, uint64_t base)
{
    for (ipc_alloc *a = t->head; a != NULL; a = a->next)
        if (a->owner == owner && a->base == base)
            return a;
    return NULL;
}

ipc_alloc *ipc_allocs_containing(ipc_allocs *t, uint64_t owner,
                                 uint64_t address, uint64_t bytes)
{
    for (ipc_alloc *a = t->head; a != NULL; a = a->next)
        if (a->owner == owner && address >= a->base &&
            address - a->base <= a->size &&
            bytes <= a->size - (address - a->base))
            return a;
    return NULL;
}

ipc_alloc *ipc_allocs_add(ipc_allocs *t, uint64_t owner, uint64_t base,
                          uint64_t size)
{
    ipc_alloc *a = calloc(1, sizeof(*a));

    if (a == NULL)
        return NULL;
    a->owner = owner;
    a->base = base;
    a->size = size;
    a->refs = 1;
    a->next = t->head;
    t->head = a;
    return a;
}

int ipc_allocs_release(ipc_allocs *t, ipc_alloc *a)
{
    if (--a->refs > 0)
        return 0;
    for (ipc_alloc **p = &t->head; *p != NULL; p = &(*p)->next)
        if (*p == a) {
            *p = a->next;
            break;
        }
    return 1;
}
