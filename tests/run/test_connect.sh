#!/usr/bin/env bash
# A transport's connect (ABI 1.3) through real `wex run` jobs: real
# processes, the real rendezvous. The transports are the conformance
# kit's test plugins (tests/conformance/broken_plugin.c): conf-connect,
# whose destinations publish a value every source fetches and which
# refuses mem_key and put on a rank that did not connect, and bad-name,
# which publishes under a name the host refuses.
#   test_connect.sh WEX SAMPLES_DIR BROKEN_DIR
set -uo pipefail
WEX=$1
SAMPLES=$(cd "$2" && pwd)
BROKEN=$(cd "$3" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/checks.sh"

job() { # transport
    cat <<JSON
{"model": "$SAMPLES/models/Qwen3-0.6B.config.json",
 "source": {"engine": "megatron", "parallel": {"tp": 2}},
 "destination": {"engine": "vllm", "parallel": {"tp": 2}},
 "transport": "$1",
 "topology": {"placement": "colocated", "gpus_per_host": 2},
 "timeouts": {"connect_seconds": 60, "step_seconds": 120}}
JSON
}

# 1. Every rank connects before any key: both steps commit and verify.
job conf-connect >"$TMP/good.json"
WEX_PLUGIN_PATH="$BROKEN/conf-connect" "$WEX" run "$TMP/good.json" --steps 2 \
    --json >"$TMP/good.out" 2>"$TMP/good.err"
code=$?
/usr/bin/python3 - "$TMP/good.out" <<'PY' && [ "$code" -eq 0 ] \
    && pass "a transport with connect: 2 steps committed and verified on 2 + 2 ranks" \
    || fail "a transport with connect: exit $code: $(tail -3 "$TMP/good.err")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verified"], r.get("errors")
assert [s["committed"] for s in r["steps"]] == [True, True], r["steps"]
PY
shm_clean "a transport with connect"

# 2. A connect that fails on the destinations: every rank fails at
#    connect, at once (the sources' fetch is refused by the same rule),
#    each naming the transport and what it refused; no step runs.
job bad-name >"$TMP/bad.json"
start=$(date +%s)
WEX_PLUGIN_PATH="$BROKEN/bad-name" "$WEX" run "$TMP/bad.json" --steps 2 \
    --json >"$TMP/bad.out" 2>"$TMP/bad.err"
code=$?
elapsed=$(( $(date +%s) - start ))
said=$(grep -c 'connecting: transport bad-name: \(publish\|fetch\): the name "greeting/0" is not 1-64 characters of \[A-Za-z0-9_.-\]$' "$TMP/bad.err")
[ "$code" -eq 1 ] && [ "$said" -eq 4 ] && [ "$elapsed" -lt 30 ] \
    && pass "a failing connect: all 4 ranks stopped in ${elapsed}s: $(grep -m1 'destination rank 0' "$TMP/bad.err")" \
    || fail "a failing connect: exit $code after ${elapsed}s, $said of 4 ranks said why: $(head -4 "$TMP/bad.err")"
/usr/bin/python3 - "$TMP/bad.out" <<'PY' \
    && pass "a failing connect: no step committed or moved a byte" \
    || fail "a failing connect: the report: $(head -c 600 "$TMP/bad.out")"
import json, sys
r = json.load(open(sys.argv[1]))
assert not r["verified"], r
assert r["steps"] and all(not s["committed"] and s["bytes"] == 0 for s in r["steps"]), r["steps"]
assert len(r["errors"]) == 4, r["errors"]
PY
shm_clean "a failing connect"

echo "$fails failures"
[ "$fails" -eq 0 ]
