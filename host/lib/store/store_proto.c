#include "store_proto.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

const char *wex__store_op_name(uint8_t op)
{
    switch (op) {
    case WEX__STORE_HELLO: return "HELLO";
    case WEX__STORE_SET: return "SET";
    case WEX__STORE_GET: return "GET";
    case WEX__STORE_ADD: return "ADD";
    case WEX__STORE_WAIT_GE: return "WAIT_GE";
    case WEX__STORE_BYE: return "BYE";
    case WEX__STORE_ARRIVE: return "ARRIVE";
    case WEX__STORE_GATHER: return "GATHER";
    case WEX__STORE_DROP: return "DROP";
    default: return NULL;
    }
}

/* The one set of rules both the encoder and the decoder apply, so a
 * client can never send what the server would refuse. */
static wex_status check_request(uint8_t op, const char *key, size_t key_len,
                                const uint8_t *value, size_t value_len)
{
    const char *name = wex__store_op_name(op);
    size_t want = SIZE_MAX; /* the value length the opcode needs, if fixed */

    if (name == NULL)
        return wex__error(WEX_ERR_INVALID, "unknown opcode %u", op);
    if (key_len > WEX__STORE_KEY_MAX)
        return wex__error(WEX_ERR_INVALID,
                          "%s: key of %zu bytes is over the %u-byte limit",
                          name, key_len, WEX__STORE_KEY_MAX);
    if (value_len > WEX__STORE_VALUE_MAX)
        return wex__error(WEX_ERR_INVALID,
                          "%s: value of %zu bytes is over the %u-byte "
                          "limit",
                          name, value_len, WEX__STORE_VALUE_MAX);
    if (op == WEX__STORE_HELLO && value_len > WEX__STORE_TOKEN_MAX)
        return wex__error(WEX_ERR_INVALID,
                          "HELLO: token of %zu bytes is over the %u-byte "
                          "limit",
                          value_len, WEX__STORE_TOKEN_MAX);
    if (key_len > 0 && memchr(key, '\0', key_len) != NULL)
        return wex__error(WEX_ERR_INVALID, "%s: key holds a NUL byte", name);
    switch (op) {
    case WEX__STORE_GET:
    case WEX__STORE_ADD: want = 8; break;
    case WEX__STORE_WAIT_GE: want = 16; break;
    case WEX__STORE_BYE:
    case WEX__STORE_DROP: want = 0; break;
    case WEX__STORE_ARRIVE: {
        uint64_t ns = 0, nd = 0;
        if (value_len >= 32) {
            ns = wex__store_get_u64(value + 16);
            nd = wex__store_get_u64(value + 24);
        }
        if (value_len < 32 || ns > WEX__STORE_MEMBERS_MAX ||
            nd > WEX__STORE_MEMBERS_MAX)
            return wex__error(WEX_ERR_INVALID,
                              "%s: expected a timeout, "
                              "flags and at most %u sources and "
                              "destinations",
                              name, WEX__STORE_MEMBERS_MAX);
        want = 32 + (size_t)(ns + 7) / 8;
        if (wex__store_get_u64(value + 8) & WEX__ARRIVE_ELASTIC) {
            uint64_t per = 0, least = 0;
            want += 16;
            if (value_len == want) {
                per = wex__store_get_u64(value + want - 16);
                least = wex__store_get_u64(value + want - 8);
            }
            if (value_len == want &&
                (per == 0 || nd % per != 0 || least > nd / per))
                return wex__error(WEX_ERR_INVALID,
                                  "%s: expected ranks per replica that "
                                  "divide the %llu destinations and at "
                                  "most that many replicas",
                                  name, (unsigned long long)nd);
        }
        break;
    }
    case WEX__STORE_GATHER:
        if (value_len <= 16 ||
            wex__store_get_u64(value + 8) > WEX__STORE_MEMBERS_MAX ||
            value_len - 16 > WEX__STORE_KEY_MAX ||
            memchr(value + 16, '\0', value_len - 16) != NULL)
            return wex__error(WEX_ERR_INVALID,
                              "%s: expected a timeout, a "
                              "count of at most %u and an owner prefix "
                              "without NUL bytes",
                              name, WEX__STORE_MEMBERS_MAX);
        break;
    default: break;
    }
    if (op == WEX__STORE_BYE ? key_len != 0 : key_len == 0)
        return wex__error(WEX_ERR_INVALID, "%s: %s key", name,
                          key_len ? "unexpected" : "empty");
    if (want != SIZE_MAX && value_len != want)
        return wex__error(WEX_ERR_INVALID,
                          "%s: expected a %zu-byte value, got %zu bytes", name,
                          want, value_len);
    return WEX_OK;
}

wex_status wex__store_encode_request(uint8_t op, const char *key,
                                     size_t key_len, const void *value,
                                     size_t value_len, uint8_t **msg_p,
                                     size_t *len_p)
{
    wex_status st =
        check_request(op, key, key_len, (const uint8_t *)value, value_len);
    size_t body = 5 + key_len + value_len;
    uint8_t *msg;

    if (st != WEX_OK)
        return st;
    msg = malloc(WEX__STORE_HEADER + body);
    if (msg == NULL)
        return wex__error(WEX_ERR_NOMEM,
                          "out of memory for a %zu-byte "
                          "message",
                          body);
    wex__store_put_u32(msg, (uint32_t)body);
    msg[4] = op;
    wex__store_put_u32(msg + 5, (uint32_t)key_len);
    if (key_len)
        memcpy(msg + 9, key, key_len);
    if (value_len)
        memcpy(msg + 9 + key_len, value, value_len);
    *msg_p = msg;
    *len_p = WEX__STORE_HEADER + body;
    return WEX_OK;
}

wex_status wex__store_encode_response(uint8_t status, const void *payload,
                                      size_t len, uint8_t **msg_p,
                                      size_t *len_p)
{
    uint8_t *msg;

    if (len > WEX__STORE_VALUE_MAX)
        return wex__error(WEX_ERR_INVALID,
                          "reply of %zu bytes is over the "
                          "%u-byte limit",
                          len, WEX__STORE_VALUE_MAX);
    msg = malloc(WEX__STORE_HEADER + 1 + len);
    if (msg == NULL)
        return wex__error(WEX_ERR_NOMEM,
                          "out of memory for a %zu-byte "
                          "reply",
                          len);
    wex__store_put_u32(msg, (uint32_t)(1 + len));
    msg[4] = status;
    if (len)
        memcpy(msg + 5, payload, len);
    *msg_p = msg;
    *len_p = WEX__STORE_HEADER + 1 + len;
    return WEX_OK;
}

wex_status wex__store_frame_length(const uint8_t header[WEX__STORE_HEADER],
                                   uint32_t min, uint32_t max,
                                   uint32_t *body_len_p)
{
    uint32_t n = wex__store_get_u32(header);

    if (n < min || n > max)
        return wex__error(WEX_ERR_INVALID,
                          "message length %u is outside "
                          "[%u, %u]",
                          n, min, max);
    *body_len_p = n;
    return WEX_OK;
}

/* The body of a whole message, or WEX_ERR_INVALID when the prefix does
 * not match the bytes there are. */
static wex_status frame_body(const uint8_t *msg, size_t len, uint32_t min,
                             uint32_t max, size_t *body_len_p)
{
    uint32_t n = 0;
    wex_status st;

    if (len < WEX__STORE_HEADER)
        return wex__error(WEX_ERR_INVALID,
                          "message truncated: %zu bytes, "
                          "no length prefix",
                          len);
    st = wex__store_frame_length(msg, min, max, &n);
    if (st != WEX_OK)
        return st;
    if (len - WEX__STORE_HEADER != n)
        return wex__error(WEX_ERR_INVALID,
                          "message %s: the prefix says "
                          "%u bytes, there are %zu",
                          len - WEX__STORE_HEADER < n ? "truncated"
                                                      : "too long",
                          n, len - WEX__STORE_HEADER);
    *body_len_p = n;
    return WEX_OK;
}

wex_status wex__store_decode_request(const uint8_t *msg, size_t len,
                                     wex__store_request *req)
{
    size_t body = 0, key_len;
    wex_status st;

    st = frame_body(msg, len, WEX__STORE_REQUEST_MIN, WEX__STORE_REQUEST_MAX,
                    &body);
    if (st != WEX_OK)
        return st;
    msg += WEX__STORE_HEADER;
    key_len = wex__store_get_u32(msg + 1);
    if (key_len > body - 5)
        return wex__error(WEX_ERR_INVALID,
                          "key length %zu runs past the "
                          "%zu-byte message",
                          key_len, body);
    st = check_request(msg[0], (const char *)msg + 5, key_len,
                       msg + 5 + key_len, body - 5 - key_len);
    if (st != WEX_OK)
        return st;
    req->op = msg[0];
    req->key = (const char *)msg + 5;
    req->key_len = key_len;
    req->value = msg + 5 + key_len;
    req->value_len = body - 5 - key_len;
    return WEX_OK;
}

wex_status wex__store_decode_response(const uint8_t *msg, size_t len,
                                      wex__store_response *resp)
{
    size_t body = 0;
    wex_status st;

    st = frame_body(msg, len, WEX__STORE_RESPONSE_MIN, WEX__STORE_RESPONSE_MAX,
                    &body);
    if (st != WEX_OK)
        return st;
    if (msg[WEX__STORE_HEADER] > WEX__STORE_R_LAST)
        return wex__error(WEX_ERR_INVALID, "unknown reply status %u",
                          msg[WEX__STORE_HEADER]);
    resp->status = msg[WEX__STORE_HEADER];
    resp->payload = msg + WEX__STORE_HEADER + 1;
    resp->len = body - 1;
    return WEX_OK;
}
