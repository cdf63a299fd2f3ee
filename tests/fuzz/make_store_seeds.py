#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_store_proto: rendezvous-store messages
encoded as host/lib/store_proto.h describes them (u32 LE body length, then
request: u8 op, u32 LE key length, key, value; response: u8 status,
payload). Run from anywhere; rewrites tests/fuzz/corpus/store_proto/."""
import os
import struct

HELLO, SET, GET, ADD, WAIT_GE, BYE, ARRIVE, GATHER, DROP = 1, 2, 3, 4, 5, 6, 7, 8, 9
OK, TIMEOUT, PEER_DEAD, REFUSED, ERROR, PASSED, FEW = 0, 1, 2, 3, 4, 5, 6
ARRIVE_ELASTIC = 2


def request(op, key=b"", value=b""):
    body = struct.pack("<BI", op, len(key)) + key + value
    return struct.pack("<I", len(body)) + body


def response(status, payload=b""):
    body = struct.pack("<B", status) + payload
    return struct.pack("<I", len(body)) + body


SEEDS = {
    "req-hello": request(HELLO, b"source/3", b"0123456789abcdef-token"),
    "req-set": request(SET, b"plan/digest", b"\x00\x01\x02 some bytes"),
    "req-set-empty-value": request(SET, b"k", b""),
    "req-get": request(GET, b"plan/digest", struct.pack("<Q", 30000)),
    "req-add": request(ADD, b"barrier/step/1", struct.pack("<q", 1)),
    "req-add-negative": request(ADD, b"c", struct.pack("<q", -5)),
    "req-wait-ge": request(WAIT_GE, b"barrier/step/1",
                           struct.pack("<qQ", 8, 60000)),
    "req-bye": request(BYE),
    # timeout, flags, 10 sources, 4 destinations, a 2-byte optional map
    "req-arrive": request(ARRIVE, b"step/2/1/begin",
                          struct.pack("<QQQQ", 60000, 1, 10, 4) + b"\xff\x03"),
    # elastic: 2 sources, 4 destinations in replicas of 2, at least 1
    "req-arrive-elastic": request(ARRIVE, b"step/3/1/begin",
                                  struct.pack("<QQQQ", 60000, ARRIVE_ELASTIC,
                                              2, 4) + b"\x00" +
                                  struct.pack("<QQ", 2, 1)),
    "bad-arrive-elastic-indivisible": request(
        ARRIVE, b"b", struct.pack("<QQQQ", 1, ARRIVE_ELASTIC, 1, 3) +
        b"\x00" + struct.pack("<QQ", 2, 1)),
    "req-gather": request(GATHER, b"step/2/0/verdict/",
                          struct.pack("<QQ", 60000, 4) + b"destination/"),
    "resp-ok-arrive": response(OK, struct.pack("<QQQ", 3, 1, 7)),
    "resp-ok-gather": response(OK, b"\x01" + struct.pack("<I", 2) + b"ok" +
                               b"\x00" + struct.pack("<I", 0)),
    "bad-arrive-short-map": request(ARRIVE, b"b",
                                    struct.pack("<QQQQ", 1, 0, 9, 1) + b"\x01"),
    "req-drop": request(DROP, b"step/7/"),
    "bad-gather-no-owner": request(GATHER, b"p", struct.pack("<QQ", 1, 2)),
    "resp-ok-value": response(OK, b"stored value"),
    "resp-ok-counter": response(OK, struct.pack("<q", 42)),
    "resp-ok-empty": response(OK),
    "resp-timeout": response(TIMEOUT, b"GET plan/digest: timed out after 30 s"),
    "resp-peer-dead": response(PEER_DEAD, b"destination/1 died"),
    "resp-refused": response(REFUSED, b"wrong token"),
    "resp-error": response(ERROR, b"GET: expected a 8-byte value, got 3 bytes"),
    "resp-passed": response(PASSED, b"step/4/1/begin: passed without you"),
    "resp-few": response(FEW, b"step/4/1/begin: 0 whole replicas, expected 1"),
    "bad-unknown-status": response(FEW + 1, b"from a newer server"),
    # Malformed on purpose: the decoders must refuse these.
    "bad-truncated": request(SET, b"key", b"value")[:-2],
    "bad-key-past-end": struct.pack("<IBI", 5 + 3, SET, 99) + b"abc",
    "bad-key-nul": request(SET, b"a\x00b", b"v"),
    "bad-unknown-op": request(99, b"k", b"v"),
}

if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "corpus", "store_proto")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds in {out}")
