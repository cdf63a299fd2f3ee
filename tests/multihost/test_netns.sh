#!/usr/bin/env bash
# Two hosts on one machine: two network namespaces joined by a veth pair.
# Sources run in one, destinations and the rendezvous in the other; a full
# sync with verification over UCX's TCP transport. Needs root (CI runs as
# root); the namespaces are removed even when the test fails.
# Usage: test_netns.sh WEX SAMPLES_DIR
# WEX_NETNS_PERFTEST=BYTES (tools/bench-ucx.sh sets it) also runs
# ucx_perftest's ucp_am_bw across the same veth pair at that message size
# (three times: the median counts), and prints the sync's throughput as a
# ratio to it.
set -uo pipefail
WEX=$(readlink -f "$1")
SAMPLES=$(cd "$2" && pwd)
JOB=$SAMPLES/jobs/qwen3-0.6b-megatron-to-vllm-disaggregated.json
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
    echo "SKIP: needs root and iproute2 to create network namespaces" >&2
    exit 77
fi
tag=wex$$
A=${tag}a B=${tag}b
TMP=$(mktemp -d)
cleanup() {
    [ -n "${STORE_PID:-}" ] && kill "$STORE_PID" 2>/dev/null
    ip netns del "$A" 2>/dev/null
    ip netns del "$B" 2>/dev/null
    [ -n "${KEEP:-}" ] && cp -r "$TMP" /tmp/netns-debug; rm -rf "$TMP"
}
trap cleanup EXIT
KEEP=${WEX_NETNS_KEEP:-}
if ! ip netns add "$A" 2>"$TMP/netns.err"; then
    echo "SKIP: cannot create network namespaces here: $(cat "$TMP/netns.err")" >&2
    exit 77
fi
set -e
ip netns add "$B"
ip link add "${tag}x" type veth peer name "${tag}y"
ip link set "${tag}x" netns "$A"
ip link set "${tag}y" netns "$B"
ip -n "$A" addr add 10.77.0.1/24 dev "${tag}x"
ip -n "$B" addr add 10.77.0.2/24 dev "${tag}y"
for ns in "$A" "$B"; do
    ip -n "$ns" link set lo up
done
ip -n "$A" link set "${tag}x" up
ip -n "$B" link set "${tag}y" up
set +e
# TCP over the veth pair; UCX logs to stdout, so only errors.
export UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n UCX_LOG_LEVEL=error
: >"$TMP/store.out"
ip netns exec "$B" "$WEX" store --listen 10.77.0.2:0 --token netns-token-1 >"$TMP/store.out" 2>&1 &
STORE_PID=$!
for _ in $(seq 100); do grep -q listening "$TMP/store.out" && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$TMP/store.out")
[ -n "$ADDR" ] || { echo "FAIL: no rendezvous: $(cat "$TMP/store.out")"; exit 1; }
perftest_mb=
perftest_runs=
if [ -n "${WEX_NETNS_PERFTEST:-}" ]; then
    # Loopback and veth throughput swing from run to run on a shared
    # machine: the median of three runs is the figure compared.
    size=$WEX_NETNS_PERFTEST
    for port in 23777 23778 23779; do
        ip netns exec "$B" env UCX_NET_DEVICES="${tag}y" ucx_perftest -t ucp_am_bw -s "$size" \
            -n $(( (1 << 30) / size + 20 )) -p "$port" >"$TMP/perf-server.txt" 2>&1 &
        perf_server=$!
        sleep 1
        perftest_runs+=" $(ip netns exec "$A" env UCX_NET_DEVICES="${tag}x" ucx_perftest 10.77.0.2 \
            -t ucp_am_bw -s "$size" -n $(( (1 << 30) / size + 20 )) -p "$port" 2>/dev/null |
            awk '/^Final:/ {print $7}')"
        kill "$perf_server" 2>/dev/null
        wait "$perf_server" 2>/dev/null
    done
    perftest_mb=$(printf '%s\n' $perftest_runs | sort -g | sed -n 2p)
fi
common=(--steps 2 --rendezvous "$ADDR" --token netns-token-1 --job-id "$tag" --json)
# The sources log which path each endpoint takes (debug level).
ip netns exec "$A" env UCX_NET_DEVICES="${tag}x" WEX_LOG_LEVEL=debug "$WEX" run "$JOB" --host 0 "${common[@]}" >"$TMP/a.json" 2>"$TMP/a.err" &
SRC=$!
ip netns exec "$B" env UCX_NET_DEVICES="${tag}y" "$WEX" run "$JOB" --host 1 "${common[@]}" >"$TMP/b.json" 2>"$TMP/b.err"
code_b=$?
wait "$SRC"
code_a=$?
fails=0
# A host's last lines, after any sanitizer line its workers printed (a
# LeakSanitizer tracer crash is told by its first line, which the last
# lines may have left behind; tools/ctest-lsan-retry.py reads both).
why() {
    { grep -E 'Tracer caught|Sanitizer|runtime error' "$1" | head -5
      tail -3 "$1"; } | tr '\n' ' '
}
if [ "$code_a" -eq 0 ] && [ "$code_b" -eq 0 ]; then
    echo "ok   both hosts exit 0"
else
    echo "FAIL host 0 exit $code_a: $(why "$TMP/a.err"); host 1 exit $code_b: $(why "$TMP/b.err")"
    fails=1
fi
# TCP has no native RMA: every endpoint sends active messages.
am=$(grep -c -- '-> destination rank [0-9]*: active messages (no lane does RMA natively)' "$TMP/a.err")
puts=$(grep -c -- '-> destination rank [0-9]*: one-sided puts' "$TMP/a.err")
if [ "$am" -gt 0 ] && [ "$puts" -eq 0 ]; then
    echo "ok   every source endpoint sends active messages ($am endpoints)"
else
    echo "FAIL endpoints: $am with active messages, $puts with puts"
    fails=1
fi
/usr/bin/python3 - "$TMP/b.json" <<'PY' || fails=1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["transport"] == "ucx", r
assert r["verified"] is True, r
assert all(s["committed"] for s in r["steps"]) and len(r["steps"]) == 2, r["steps"]
print("ok   destinations on host 1 verified 2 steps over UCX/TCP across namespaces: %.2f GB/s" % r["gb_per_s"])
PY
if [ -n "$perftest_mb" ]; then
    /usr/bin/python3 -c "
import json
r = json.load(open('$TMP/b.json'))
pt = float('$perftest_mb') / 1000
s = r.get('steady_gb_per_s', 0) or r['gb_per_s']
runs = ', '.join('%.3f' % (float(v) / 1000) for v in '$perftest_runs'.split())
print('across the veth pair: ucx_perftest ucp_am_bw %.3f GB/s at $WEX_NETNS_PERFTEST bytes (median of %s); wex sync %.3f GB/s (ratio %.2f), step 2 %.3f GB/s (ratio %.2f)' % (pt, runs, r['gb_per_s'], r['gb_per_s'] / pt, s, s / pt))"
fi
exit "$fails"
