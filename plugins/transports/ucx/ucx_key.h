/*
 * The ucx transport's memory key: what a destination rank publishes for
 * one buffer and a source decodes to attach it.
 *
 * Wire format, little-endian, a 56-byte header and three blobs:
 *   0  u32  magic "WXUC"            24 u64 destination rank
 *   4  u16  version (1)             32 u64 buffer address in the
 *   6  u8   host name length h             destination (the RMA target)
 *   7  u8   reserved, zero          40 u64 buffer size in bytes
 *   8  u32  destination pid         48 u64 checksum: FNV-1a over the
 *  12  u32  worker address length a        whole key, this field zero
 *  16  u32  packed rkey length r    56 a bytes: ucp_worker_get_address
 *  20  u32  reserved, zero             r bytes: ucp_rkey_pack
 *                                      h bytes: host name (messages only)
 * The worker address and the rkey are opaque to us and UCX does not
 * validate them against corruption, so the checksum guards them: a key
 * that was cut, padded or altered is refused here, with a reason, before
 * UCX parses a byte of it.
 */
#ifndef WEX_UCX_KEY_H
#define WEX_UCX_KEY_H

#include <stddef.h>
#include <stdint.h>

#define UCX_KEY_MAGIC 0x43555857u /* "WXUC" as little-endian bytes */
#define UCX_KEY_VERSION 1u
#define UCX_KEY_HEADER 56u
#define UCX_HOST_MAX 64u

typedef struct ucx_key {
    uint32_t pid;
    uint64_t rank;
    uint64_t address;
    uint64_t size;
    const uint8_t *worker_address; /* points into the encoded key */
    uint32_t worker_address_len;
    const uint8_t *rkey; /* points into the encoded key */
    uint32_t rkey_len;
    uint32_t host_len;
    char host[UCX_HOST_MAX + 1]; /* NUL-terminated for messages */
} ucx_key;

/* The bytes a key with these blobs takes. */
size_t ucx_key_length(const ucx_key *key);

/* Writes the key into out (cap bytes); returns its length, or 0 when it
 * does not fit. */
size_t ucx_key_encode(const ucx_key *key, void *out, size_t cap);

/* Decodes and validates; 0 on success (the blob pointers then point into
 * data), otherwise -1 with a reason ("bad magic 0x...") in why. */
int ucx_key_decode(const void *data, size_t len, ucx_key *key, char *why,
                   size_t why_cap);

#endif /* WEX_UCX_KEY_H */
