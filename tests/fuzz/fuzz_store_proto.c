/*
 * fuzz_store_proto: the rendezvous store's wire format (store_proto.h).
 *
 * Each input is decoded as a request and as a response twice: as given,
 * and with its length prefix patched to match its size (so the fuzzer
 * reaches the body rules without having to guess the prefix). A decoded
 * message must point inside the input, re-encode to exactly the same
 * bytes, and decode again to the same fields; anything else aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store_proto.h"

#include "fuzz_util.h"

static int inside(const uint8_t *msg, size_t len, const void *p, size_t n)
{
    const uint8_t *b = p;

    return b >= msg && b <= msg + len && n <= (size_t)(msg + len - b);
}

static void request(const uint8_t *msg, size_t len)
{
    wex__store_request req, again;
    uint8_t *enc = NULL;
    size_t enc_len = 0;
    uint32_t body;

    if (wex__store_decode_request(msg, len, &req) != WEX_OK) {
        FUZZ_CHECK(wex__last_error()[0] != '\0');
        return;
    }
    FUZZ_CHECK(wex__store_op_name(req.op) != NULL);
    FUZZ_CHECK(inside(msg, len, req.key, req.key_len));
    FUZZ_CHECK(inside(msg, len, req.value, req.value_len));
    FUZZ_CHECK(req.key_len <= WEX__STORE_KEY_MAX);
    FUZZ_CHECK(req.value_len <= WEX__STORE_VALUE_MAX);
    FUZZ_CHECK(memchr(req.key, 0, req.key_len) == NULL);
    FUZZ_CHECK(wex__store_frame_length(msg, WEX__STORE_REQUEST_MIN,
                                       WEX__STORE_REQUEST_MAX,
                                       &body) == WEX_OK);
    FUZZ_CHECK(body == len - WEX__STORE_HEADER);
    if (req.op == WEX__STORE_HELLO)
        FUZZ_CHECK(len - WEX__STORE_HEADER <= WEX__STORE_HELLO_MAX);

    /* What the client would send for these fields is this very message. */
    FUZZ_CHECK(wex__store_encode_request(req.op, req.key, req.key_len,
                                         req.value, req.value_len, &enc,
                                         &enc_len) == WEX_OK);
    FUZZ_CHECK(enc_len == len && memcmp(enc, msg, len) == 0);
    FUZZ_CHECK(wex__store_decode_request(enc, enc_len, &again) == WEX_OK);
    FUZZ_CHECK(again.op == req.op && again.key_len == req.key_len &&
               again.value_len == req.value_len);
    FUZZ_CHECK(memcmp(again.key, req.key, req.key_len) == 0);
    FUZZ_CHECK(req.value_len == 0 ||
               memcmp(again.value, req.value, req.value_len) == 0);
    free(enc);
}

static void response(const uint8_t *msg, size_t len)
{
    wex__store_response resp, again;
    uint8_t *enc = NULL;
    size_t enc_len = 0;

    if (wex__store_decode_response(msg, len, &resp) != WEX_OK) {
        FUZZ_CHECK(wex__last_error()[0] != '\0');
        return;
    }
    FUZZ_CHECK(resp.status <= WEX__STORE_R_LAST);
    FUZZ_CHECK(inside(msg, len, resp.payload, resp.len));
    FUZZ_CHECK(wex__store_encode_response(resp.status, resp.payload, resp.len,
                                          &enc, &enc_len) == WEX_OK);
    FUZZ_CHECK(enc_len == len && memcmp(enc, msg, len) == 0);
    FUZZ_CHECK(wex__store_decode_response(enc, enc_len, &again) == WEX_OK);
    FUZZ_CHECK(again.status == resp.status && again.len == resp.len);
    FUZZ_CHECK(resp.len == 0 ||
               memcmp(again.payload, resp.payload, resp.len) == 0);
    free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Copies, so a read past the message is a heap overflow ASan sees
     * (libFuzzer's own buffer is exact-size already; the patched copy
     * must be too). */
    uint8_t *msg = malloc(size ? size : 1);
    uint32_t body;

    if (msg == NULL)
        abort();
    if (size)
        memcpy(msg, data, size);
    request(msg, size);
    response(msg, size);
    if (size >= WEX__STORE_HEADER) {
        (void)wex__store_frame_length(msg, 0, UINT32_MAX, &body);
        wex__store_put_u32(msg, (uint32_t)(size - WEX__STORE_HEADER));
        FUZZ_CHECK(wex__store_get_u32(msg) == size - WEX__STORE_HEADER);
        request(msg, size);
        response(msg, size);
    }
    free(msg);
    return 0;
}
