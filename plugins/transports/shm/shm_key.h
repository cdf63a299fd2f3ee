/*
 * The shm transport's memory key: what a destination rank publishes for
 * one buffer and a source decodes to attach it.
 *
 * Wire format, little-endian, 48 bytes of header then the socket name:
 *   0  u32  magic "WXSH"         24 u64 buffer id (the destination's)
 *   4  u16  version (1)          32 u64 size in bytes
 *   6  u8   kind (memfd/private) 40 u64 address in the destination
 *   7  u8   name length n             (what process_vm_writev targets
 *   8  u32  destination pid            for a private buffer)
 *  12  u32  reserved, zero       48 n bytes: the abstract socket name,
 *  16  u64  destination rank              without its leading NUL
 * Decoding checks every field, so a corrupt or foreign key is refused
 * with a reason, never trusted.
 */
#ifndef WEX_SHM_KEY_H
#define WEX_SHM_KEY_H

#include <stddef.h>
#include <stdint.h>

#define SHM_KEY_MAGIC 0x48535857u /* "WXSH" as little-endian bytes */
#define SHM_KEY_VERSION 1u
#define SHM_KEY_HEADER 48u

/* Buffer kinds. */
#define SHM_KIND_MEMFD 1u   /* a memfd the source maps (mem_alloc) */
#define SHM_KIND_PRIVATE 2u /* caller memory, process_vm_writev */
/* Requests only, never in a key: a destination's fence page and a slot
 * in it (shm_fence.c). */
#define SHM_KIND_FENCE 3u

/* An abstract Unix socket name: sun_path minus the leading NUL. */
#define SHM_NAME_MAX 107u

typedef struct shm_key {
    uint32_t kind;
    uint32_t pid;
    uint64_t rank;
    uint64_t buffer_id;
    uint64_t size;
    uint64_t address;
    uint32_t name_len;
    char name[SHM_NAME_MAX + 1]; /* NUL-terminated for messages */
} shm_key;

/* Writes the key into out (cap bytes); returns its length, or 0 when it
 * does not fit. */
size_t shm_key_encode(const shm_key *key, void *out, size_t cap);

/* Decodes and validates; 0 on success, otherwise -1 with a reason
 * ("bad magic 0x...") in why. */
int shm_key_decode(const void *data, size_t len, shm_key *key, char *why,
                   size_t why_cap);

#endif /* WEX_SHM_KEY_H */
