#!/usr/bin/env bash
# Delta steps against their limits, from one run, in an optimized build
# (build-release/).
#
# First the encoding of a bf16 region (payload size against the region
# and against an int32 index and a value per changed element; encoding
# against single-thread memcpy and against this core's ceiling, reading
# both streams and nothing else; applying against copying the region) at
# several fractions changed. Then whole syncs: the Qwen3-0.6B
# disaggregated sample (Megatron TP2 PP2 into one vLLM TP2 server), a
# step where 1 % of the elements changed against a full step of the same
# job without deltas, each the median of the steps after the first:
# over shm (memory-bound either way: the ratio, no target), over UCX's
# tcp on loopback (target >= 2x) and, as root, across two network
# namespaces whose veth pair `tc` limits to 1 Gbit/s (target >= 20x).
#   bash tools/bench-delta.sh [MIB [PERCENT...]]
#   WEX_DELTA_SYNC=0 skips the whole syncs, =local runs only those on one
#   host, =veth only the one across namespaces, =none-codec skips the
#   codec's figures; WEX_DELTA_STEPS=N (default 4) steps each;
#   WEX_DELTA_ISA=avx2 or scalar holds the codec's scan and decoders to
#   those instructions (bench_delta), to compare them on one CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
sync=${WEX_DELTA_SYNC:-1}
case "$sync" in local | veth) ;; *) ./build-release/bin/bench_delta "$@" ;; esac
[ "$sync" = 0 ] && exit 0

wex=$PWD/build-release/bin/wex
steps=${WEX_DELTA_STEPS:-4}
tmp=$(mktemp -d)
tag=wexd$$
cleanup() {
    [ -n "${store_pid:-}" ] && kill "$store_pid" 2>/dev/null
    ip netns del "${tag}a" 2>/dev/null || true
    ip netns del "${tag}b" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
export UCX_LOG_LEVEL=error UCX_WARN_UNUSED_ENV_VARS=n

# job TRANSPORT DELTA -> a variant of the sample
job() {
    /usr/bin/python3 - "$1" "$2" "$PWD" >"$tmp/$1-$2.json" <<'PY'
import json, sys
transport, delta, root = sys.argv[1], sys.argv[2] == "delta", sys.argv[3]
j = json.load(open(root + "/samples/jobs/qwen3-0.6b-megatron-to-vllm-disaggregated.json"))
j["model"] = root + "/samples/models/Qwen3-0.6B.config.json"
j["destination"]["parallel"]["dp"] = 1
j["transport"] = transport
j["timeouts"]["step_seconds"] = 600
if delta:
    j["delta"] = True
json.dump(j, sys.stdout)
PY
    echo "$tmp/$1-$2.json"
}

# seconds REPORT.json -> the median step's seconds after the first, and
# the wire fraction of those steps
seconds() {
    /usr/bin/python3 - "$1" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
assert r["verified"], r["errors"]
later = r["steps"][1:]
wire = sum(s.get("wire_bytes", s["bytes"]) for s in later) / sum(s["bytes"] for s in later)
print(statistics.median(s["seconds"] for s in later), wire)
PY
}

# compare NAME TARGET FULL.json DELTA.json
compare() {
    read -r full _ < <(seconds "$3")
    read -r delta wire < <(seconds "$4")
    /usr/bin/python3 -c "
full, delta, wire, target = $full, $delta, $wire, float('$2')
ratio = full / delta if delta > 0 else 0
goal = '' if target == 0 else (', target >= %gx: %s' % (target, 'met' if ratio >= target else 'NOT met'))
print('%-22s full step %.3f s, 1 %%-changed delta step %.3f s (%.2f %% of the bytes on the wire): %.1fx%s' % ('$1', full, delta, 100 * wire, ratio, goal))"
}

local_run() { # TRANSPORT MODE -> report file
    local j out=$tmp/$1-$2.out
    j=$(job "$1" "$2")
    if [ "$2" = delta ]; then
        "$wex" run "$j" --steps "$steps" --changed 0.01 --json >"$out"
    else
        "$wex" run "$j" --steps "$steps" --json >"$out"
    fi
    echo "$out"
}

echo "whole syncs: Qwen3-0.6B, Megatron TP2 PP2 -> vLLM TP2, $steps steps, median after the first"
if [ "$sync" != veth ]; then
    compare "shm" 0 "$(local_run shm full)" "$(local_run shm delta)"
    UCX_TLS=tcp compare "ucx/tcp loopback" 2 "$(UCX_TLS=tcp local_run ucx full)" \
        "$(UCX_TLS=tcp local_run ucx delta)"
fi
[ "$sync" = local ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v tc >/dev/null ||
    ! ip netns add "${tag}a" 2>/dev/null; then
    echo "veth 1 Gbit/s         skipped: needs root, iproute2 and network namespaces"
    exit 0
fi
A=${tag}a B=${tag}b
ip netns add "$B"
ip link add "${tag}x" type veth peer name "${tag}y"
ip link set "${tag}x" netns "$A"
ip link set "${tag}y" netns "$B"
ip -n "$A" addr add 10.78.0.1/24 dev "${tag}x"
ip -n "$B" addr add 10.78.0.2/24 dev "${tag}y"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "${tag}x" up
ip -n "$B" link set "${tag}y" up
# the sources' side sends: its egress is the link
ip netns exec "$A" tc qdisc add dev "${tag}x" root tbf rate 1gbit burst 256kb latency 100ms
ip netns exec "$B" tc qdisc add dev "${tag}y" root tbf rate 1gbit burst 256kb latency 100ms
export UCX_TLS=tcp
netns_run() { # MODE -> host 1's report file
    local j out=$tmp/veth-$1.json extra=() addr
    # a rendezvous of its own: a store serves one job
    ip netns exec "$B" "$wex" store --listen 10.78.0.2:0 --token delta-bench >"$tmp/store.out" 2>&1 &
    store_pid=$!
    for _ in $(seq 100); do grep -q listening "$tmp/store.out" && break; sleep 0.1; done
    addr=$(sed -n 's/^listening on //p' "$tmp/store.out")
    j=$(job ucx "$1")
    [ "$1" = delta ] && extra=(--changed 0.01)
    local common=(--steps "$steps" --rendezvous "$addr" --token delta-bench
                  --job-id "$tag-$1" --json "${extra[@]}")
    ip netns exec "$A" env UCX_NET_DEVICES="${tag}x" "$wex" run "$j" --host 0 "${common[@]}" >/dev/null &
    local src=$!
    ip netns exec "$B" env UCX_NET_DEVICES="${tag}y" "$wex" run "$j" --host 1 "${common[@]}" >"$out"
    wait "$src"
    kill "$store_pid" 2>/dev/null
    wait "$store_pid" 2>/dev/null
    store_pid=
    echo "$out"
}
compare "veth 1 Gbit/s" 20 "$(netns_run full)" "$(netns_run delta)"
