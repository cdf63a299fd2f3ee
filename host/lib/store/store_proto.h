/*
 * The rendezvous store's wire format: encoding and decoding only, no
 * sockets, so every rule about what a message may hold is in one place
 * and can be tested without a network.
 *
 * Every message is a little-endian u32 body length, then the body.
 *   request body:  u8 opcode, u32 key length, key, value (the rest)
 *   response body: u8 status, payload (the rest): a value, an i64, or a
 *                  one-line message
 * What each opcode's key and value hold:
 *   HELLO    key = the client's name ("source/3"), value = the job token
 *            (at most WEX__STORE_TOKEN_MAX bytes); must come first
 *   SET      key, value = the bytes to store
 *   GET      key, value = u64 timeout in ms; replies the value
 *   ADD      key, value = i64 delta; replies the new i64 (absent = 0)
 *   WAIT_GE  key, value = i64 target then u64 timeout in ms; replies the
 *            counter's i64 once it is >= target
 *   ARRIVE   key = a step barrier, value = u64 timeout in ms, u64 flags
 *            (WEX__ARRIVE_*), u64 source count S, u64 destination count
 *            D, then a bitmap of S bits (ceil(S/8) bytes, bit i of byte
 *            i/8): the sources the barrier may go on without when they
 *            are dead. Members are the clients named "source/i" and
 *            "destination/i". Replies, once every member has arrived
 *            alive (or, for the optional sources, has died at some
 *            point and is not here): u64 death count acknowledged, u64 N,
 *            then N u64 source ranks left out.
 *            With WEX__ARRIVE_ELASTIC the bitmap is followed by u64
 *            ranks per destination replica R (consecutive ranks, R
 *            divides D) and u64 min_replicas: destinations are then
 *            optional by replica (docs/design.md, "Elastic replicas");
 *            and the reply by u64 M, then M u64 destination ranks left
 *            out.
 *            The first reply is kept: every member gets the same one.
 *   GATHER   key = a key prefix, value = u64 timeout in ms, u64 N, then
 *            an owner prefix (no NUL): waits until, for each i < N, key
 *            PREFIX+i is set or its owner OWNER+i has died since this
 *            connection's last barrier; replies N records of u8 present,
 *            u32 length, the value (empty when its owner died), and
 *            acknowledges every death so far
 *   DROP     key = a prefix, empty value: removes every key that starts
 *            with it; replies the i64 number removed
 *   BYE      empty key and value: a clean goodbye
 * Keys are non-empty strings without NUL bytes. Counters are stored as
 * 8-byte little-endian i64 values.
 */
#ifndef WEX_HOST_STORE_PROTO_H
#define WEX_HOST_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <wex/abi.h>
#include <wex/bytes.h>

#define WEX__STORE_KEY_MAX 1024u
#define WEX__STORE_VALUE_MAX (64u << 20)
#define WEX__STORE_TOKEN_MAX 1024u
#define WEX__STORE_HEADER 4u /* the length prefix */
/* Bounds on a body, checked before reading it, so a hostile length
 * cannot make the reader allocate more than one maximal message. */
#define WEX__STORE_REQUEST_MIN 5u
#define WEX__STORE_REQUEST_MAX (5u + WEX__STORE_KEY_MAX + WEX__STORE_VALUE_MAX)
/* Before HELLO only a HELLO fits: an unauthenticated peer cannot make
 * the server allocate more than this. */
#define WEX__STORE_HELLO_MAX (5u + WEX__STORE_KEY_MAX + WEX__STORE_TOKEN_MAX)
#define WEX__STORE_RESPONSE_MIN 1u
#define WEX__STORE_RESPONSE_MAX (1u + WEX__STORE_VALUE_MAX)

enum {
    WEX__STORE_HELLO = 1,
    WEX__STORE_SET = 2,
    WEX__STORE_GET = 3,
    WEX__STORE_ADD = 4,
    WEX__STORE_WAIT_GE = 5,
    WEX__STORE_BYE = 6,
    WEX__STORE_ARRIVE = 7,
    WEX__STORE_GATHER = 8,
    WEX__STORE_DROP = 9,
};

/* ARRIVE flags */
#define WEX__ARRIVE_FAIL_FAST 1u /* a dead required member fails it now */
#define WEX__ARRIVE_ELASTIC 2u   /* destinations take part by replica */
#define WEX__STORE_MEMBERS_MAX (1u << 20) /* sources, destinations, N */

enum {
    WEX__STORE_R_OK = 0,
    WEX__STORE_R_TIMEOUT = 1,   /* the wait ran out; payload = message */
    WEX__STORE_R_PEER_DEAD = 2, /* a client died; payload names it */
    WEX__STORE_R_REFUSED = 3,   /* wrong token; the server then closes */
    WEX__STORE_R_ERROR = 4,     /* bad request; payload = message */
    WEX__STORE_R_PASSED = 5,    /* ARRIVE: the barrier was passed without
                                 * this client; payload = message */
    WEX__STORE_R_FEW = 6,       /* ARRIVE (elastic): fewer whole replicas
                                 * than min_replicas at the timeout;
                                 * payload = message */
    WEX__STORE_R_LAST = WEX__STORE_R_FEW /* the highest status decoded */
};

/* A decoded request. key and value point into the message they were
 * decoded from; key is not NUL-terminated. */
typedef struct wex__store_request {
    uint8_t op;
    const char *key;
    size_t key_len;
    const uint8_t *value;
    size_t value_len;
} wex__store_request;

typedef struct wex__store_response {
    uint8_t status;
    const uint8_t *payload;
    size_t len;
} wex__store_response;

const char *wex__store_op_name(uint8_t op);

/* The wire's little-endian u32 and u64: the SDK's byte order helpers
 * (wex/bytes.h, what plugins lay out their keys with), named for the two
 * widths the format uses. */
static inline void wex__store_put_u32(uint8_t *p, uint32_t v)
{
    wex_put_le(p, v, 4);
}

static inline uint32_t wex__store_get_u32(const uint8_t *p)
{
    return (uint32_t)wex_get_le(p, 4);
}

static inline void wex__store_put_u64(uint8_t *p, uint64_t v)
{
    wex_put_le(p, v, 8);
}

static inline uint64_t wex__store_get_u64(const uint8_t *p)
{
    return wex_get_le(p, 8);
}

/* Builds a whole message (length prefix included) in a malloc'd buffer.
 * A request breaking the rules above is WEX_ERR_INVALID, so a client
 * learns of an oversized key or value before anything is sent. */
wex_status wex__store_encode_request(uint8_t op, const char *key,
                                     size_t key_len, const void *value,
                                     size_t value_len, uint8_t **msg_p,
                                     size_t *len_p);
wex_status wex__store_encode_response(uint8_t status, const void *payload,
                                      size_t len, uint8_t **msg_p,
                                      size_t *len_p);

/* Reads the length prefix; WEX_ERR_INVALID when the body length is
 * outside [min, max]. */
wex_status wex__store_frame_length(const uint8_t header[WEX__STORE_HEADER],
                                   uint32_t min, uint32_t max,
                                   uint32_t *body_len_p);

/* Decodes one whole message (length prefix included, nothing after it).
 * Truncated, over-long or malformed input is WEX_ERR_INVALID with the
 * reason as the last error. */
wex_status wex__store_decode_request(const uint8_t *msg, size_t len,
                                     wex__store_request *req);
wex_status wex__store_decode_response(const uint8_t *msg, size_t len,
                                      wex__store_response *resp);

#endif /* WEX_HOST_STORE_PROTO_H */
