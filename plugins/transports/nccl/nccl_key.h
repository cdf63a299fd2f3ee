/*
 * The nccl transport's group and memory key. Every rank of the job, both
 * sides, is a member of one communicator: destination rank d is its rank
 * d, source rank s its rank D + s (D destination ranks). Destination rank
 * 0 draws the unique id and publishes it through the job's rendezvous in
 * connect (ABI 1.3); every other rank fetches it there. A memory key then
 * only says whose buffer it is and how big, and the group's size, so a
 * source that disagrees with the destination on the job is refused.
 *
 * Wire format, little-endian, 40 bytes:
 *   0  u32  magic "WXNC"        16 u64  buffer size
 *   4  u16  version (2)         24 u64  the group's size (D + S)
 *   6  u16  reserved, zero      32 u64  reserved, zero
 *   8  u64  destination rank
 */
#ifndef WEX_NCCL_KEY_H
#define WEX_NCCL_KEY_H

#include <stddef.h>
#include <stdint.h>

#define NCCL_KEY_MAGIC 0x434e5857u /* "WXNC" as little-endian bytes */
#define NCCL_KEY_VERSION 2u
#define NCCL_KEY_BYTES 40u

typedef struct nccl_key {
    uint64_t rank;
    uint64_t bytes;
    uint64_t group_size;
} nccl_key;

/* Writes the key; returns its length, or 0 when it does not fit in cap. */
size_t nccl_key_encode(const nccl_key *key, void *out, size_t cap);

/* Decodes and validates; 0 on success, otherwise -1 with a reason. */
int nccl_key_decode(const void *data, size_t len, nccl_key *key, char *why,
                    size_t why_cap);

/* A rank's place in the job's communicator: `side` is WEX_SIDE_*; -1 when
 * the rank is outside its side or the group would not fit an int. */
int64_t nccl_group_rank(uint32_t side, uint64_t rank, uint64_t source_ranks,
                        uint64_t destination_ranks);
/* The communicator's size (D + S); -1 when it would not fit an int. */
int64_t nccl_group_size(uint64_t source_ranks, uint64_t destination_ranks);

#endif /* WEX_NCCL_KEY_H */
