/*
 * The lists a transport keeps of its memory registrations and attached
 * peers: doubly linked through a wt_link that each member embeds, so a
 * member is unlinked in O(1) and the list allocates nothing. The wt_
 * prefix ("wex transport") marks helpers private to the in-tree
 * transports that link this folder's static library.
 */
#ifndef WEX_TRANSPORT_LIST_H
#define WEX_TRANSPORT_LIST_H

#include <pthread.h>
#include <stddef.h>

typedef struct wt_link {
    struct wt_link *prev, *next;
} wt_link;

/* The `type` whose member `member` is the wt_link at `link`. */
#define WT_MEMBER_OF(link, type, member)                                       \
    ((type *)(void *)((char *)(link)-offsetof(type, member)))

/* The registration or peer that list link `l` is in, for a transport
 * whose wex_transport_mem and wex_transport_peer embed theirs as `link`. */
#define WT_MEM_OF(l) WT_MEMBER_OF(l, wex_transport_mem, link)
#define WT_PEER_OF(l) WT_MEMBER_OF(l, wex_transport_peer, link)

/* Puts `l` first in the list that starts at *head. */
static inline void wt_list_push(wt_link **head, wt_link *l)
{
    l->prev = NULL;
    l->next = *head;
    if (*head != NULL)
        (*head)->prev = l;
    *head = l;
}

/* Takes `l` out of the list that starts at *head. */
static inline void wt_list_unlink(wt_link **head, wt_link *l)
{
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        *head = l->next;
    if (l->next != NULL)
        l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

/* The same for a list guarded by `lock` because another thread reads it
 * (shm's buffer server looks registrations up in it): only the unlinking
 * holds the lock. The caller frees the member afterwards, outside it, so
 * the slow part of freeing (munmapping a large buffer) never holds up
 * that thread; a call that needs the lock for reasons of its own (ucx's
 * ucp_mem_unmap, against the progress thread) takes it again for just
 * that call. */
static inline void wt_list_unlink_locked(pthread_mutex_t *lock, wt_link **head,
                                         wt_link *l)
{
    pthread_mutex_lock(lock);
    wt_list_unlink(head, l);
    pthread_mutex_unlock(lock);
}

#endif /* WEX_TRANSPORT_LIST_H */
