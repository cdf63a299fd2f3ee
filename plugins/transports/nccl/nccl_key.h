/*
 * The nccl transport's memory key. Besides the buffer, it carries how to
 * join the destination's communicator: each destination rank owns one
 * communicator with the source ranks that send to it (itself rank 0, its
 * sources 1.. in ascending order), created from a unique id it draws in
 * ctx_create. Keys already travel from destination to source through the
 * rendezvous, so the id needs no other channel.
 *
 * Wire format, little-endian, 168 bytes of header then the member bitmap:
 *   0  u32  magic "WXNC"        24 u64 source ranks of the job (bits)
 *   4  u16  version (1)         32 u64 reserved, zero
 *   6  u16  reserved, zero      40 128 bytes: the ncclUniqueId
 *   8  u64  destination rank   168 ceil(bits / 8) bytes: bit s set when
 *  16  u64  buffer size              source rank s is a member
 * A source's rank in the communicator is 1 + the members below it.
 */
#ifndef WEX_NCCL_KEY_H
#define WEX_NCCL_KEY_H

#include <stddef.h>
#include <stdint.h>

#define NCCL_KEY_MAGIC 0x434e5857u /* "WXNC" as little-endian bytes */
#define NCCL_KEY_VERSION 1u
#define NCCL_KEY_ID_BYTES 128u
#define NCCL_KEY_HEADER (40u + NCCL_KEY_ID_BYTES)

typedef struct nccl_key {
    uint64_t rank;
    uint64_t bytes;
    uint64_t source_ranks;
    unsigned char id[NCCL_KEY_ID_BYTES];
    const uint8_t *members; /* decode: points into the key's bytes */
} nccl_key;

/* The key's length for a job with `source_ranks` sources. */
size_t nccl_key_size(uint64_t source_ranks);

/* Writes the key, the members being `peers` (ascending source ranks);
 * returns its length, or 0 when it does not fit in cap or a peer is out
 * of range. */
size_t nccl_key_encode(const nccl_key *key, const uint64_t *peers,
                       uint64_t peer_count, void *out, size_t cap);

/* Decodes and validates; 0 on success, otherwise -1 with a reason. */
int nccl_key_decode(const void *data, size_t len, nccl_key *key, char *why,
                    size_t why_cap);

/* Source rank `source`'s rank in the destination's communicator and the
 * communicator's size; -1 when it is not a member. */
int nccl_key_member(const nccl_key *key, uint64_t source, int *comm_rank,
                    int *comm_size);

#endif /* WEX_NCCL_KEY_H */
