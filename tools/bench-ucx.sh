#!/usr/bin/env bash
# UCX benchmark on one host over loopback: wex's `ucx` sync throughput for
# the default sample (Qwen3-0.6B Megatron TP2 PP2 -> vLLM TP2 x 2, every
# rank a process, verify none) against ucx_perftest's UCP bandwidth at the
# plan's mean operation size, measured in the same run. With UCX_TLS=tcp
# wex sends active messages (tcp has no native RMA), so the limit is
# ucx_perftest's ucp_am_bw (target: ratio >= 0.9), printed as it is and
# with peer error handling (-e), as wex runs. With UCX's default selection
# and error_handling none (shared memory) the limit is ucp_put_bw, and
# single-thread memcpy beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${WEX_BENCH_BUILD:-build-bench}
steps=${1:-3}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
wex="$build/bin/wex"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
job=samples/jobs/qwen3-0.6b-megatron-to-vllm-disaggregated.json
size=$("$wex" plan "$job" --json | /usr/bin/python3 -c 'import json,sys; p=json.load(sys.stdin); print(p["bytes"] // p["operations"])')
iters=$(( (1 << 30) / size + 20 ))
export UCX_LOG_LEVEL=error UCX_WARN_UNUSED_ENV_VARS=n
perftest() { # TEST SIZE ITERS [FLAGS]: prints MB/s of that UCP bandwidth test
    local port=$((20000 + RANDOM % 20000))
    ucx_perftest -t "$1" -s "$2" -n "$3" -p "$port" ${4:-} >"$tmp/server.txt" 2>&1 &
    local server=$!
    sleep 1
    ucx_perftest 127.0.0.1 -t "$1" -s "$2" -n "$3" -p "$port" ${4:-} 2>/dev/null |
        awk '/^Final:/ {print $7}'
    wait "$server" 2>/dev/null || true
}
# ucx_perftest over loopback tcp swings by 3x from one run to the next on
# a shared 2-core machine; the median of three is the figure compared.
perftest3() { # TEST SIZE ITERS [FLAGS]: "median run1 run2 run3" in MB/s
    local a b c
    a=$(perftest "$@"); b=$(perftest "$@"); c=$(perftest "$@")
    printf '%s\n' "$a" "$b" "$c" | sort -g | sed -n 2p | tr '\n' ' '
    echo "$a $b $c"
}
wexrun() { # job -> GB/s over every step, after the first, and of one-thread memcpy
    "$wex" run "$1" --verify none --steps "$steps" --json | /usr/bin/python3 -c \
        'import json,sys; r=json.load(sys.stdin); assert r["verified"], r["errors"]; print(r["gb_per_s"], r.get("steady_gb_per_s", 0), r["memcpy_gb_per_s"])'
}
# UCX's default selection drops shared memory when peer-failure handling is
# on; this job variant turns it off so both sides may use what UCX picks.
sed -e 's|"../models/|"'"$PWD"'/samples/models/|' \
    -e 's|"transport": "ucx"|"transport": {"name": "ucx", "options": {"error_handling": "none"}}|' \
    "$job" >"$tmp/nohandling.json"
echo "mean operation size of the plan: $size bytes"
for tls in tcp default; do
    if [ "$tls" = default ]; then unset UCX_TLS; j="$tmp/nohandling.json"; else export UCX_TLS=tcp; j=$job; fi
    read -r w steady memcpy < <(wexrun "$j")
    if [ "$tls" = tcp ]; then
        # wex's endpoints detect a dead peer (UCP_ERR_HANDLING_MODE_PEER).
        # Then UCX 1.13 receives a rendezvous message's fragments into
        # its own buffers and copies them out, where without error
        # handling (ucx_perftest's default) it puts them straight into the
        # receiver's buffer: a profile of each shows it. Both limits are
        # printed: the first as the target names it, the second like for
        # like (-e: peer error handling).
        read -r am am1 am2 am3 < <(perftest3 ucp_am_bw "$size" "$iters")
        read -r ame ame1 ame2 ame3 < <(perftest3 ucp_am_bw "$size" "$iters" -e)
        bigam=$(perftest ucp_am_bw $((256 << 20)) 8 -e)
        /usr/bin/python3 -c "
g = lambda v: float(v) / 1000
am, ame, w, s, big = g('$am'), g('$ame'), float('$w'), float('$steady'), g('$bigam')
print('UCX_TLS=tcp      ucx_perftest ucp_am_bw %.3f GB/s (median of %s); with peer error handling, as wex (-e): %.3f GB/s (median of %s); at 256 MiB with -e: %.3f GB/s' % (am, ', '.join('%.3f' % g(v) for v in '$am1 $am2 $am3'.split()), ame, ', '.join('%.3f' % g(v) for v in '$ame1 $ame2 $ame3'.split()), big))
print('UCX_TLS=tcp      wex sync %.3f GB/s, after the first step %.3f GB/s: ratio %.2f to ucp_am_bw, %.2f to ucp_am_bw -e, %.2f to ucp_am_bw -e at 256 MiB' % (w, s, s / am, s / ame, s / big))"
    else
        put=$(perftest ucp_put_bw "$size" "$iters")
        big=$(perftest ucp_put_bw $((256 << 20)) 8)
        /usr/bin/python3 -c "
pt, dr, w, s, m = float('$put') / 1000, float('$big') / 1000, float('$w'), float('$steady'), float('$memcpy')
print('UCX_TLS=default  ucx_perftest ucp_put_bw %.3f GB/s (%.3f at 256 MiB), memcpy %.3f GB/s (one thread); wex sync %.3f GB/s, after the first step %.3f GB/s: ratio %.2f to ucp_put_bw (%.2f at 256 MiB), %.2f to memcpy' % (pt, dr, m, w, s, s / pt, s / dr, s / m))"
    fi
done
# Two hosts: the same sample across two network namespaces joined by a
# veth pair (root only), against ucp_am_bw across the same pair.
if [ "$(id -u)" -eq 0 ]; then
    unset UCX_TLS
    WEX_NETNS_PERFTEST=$size bash tests/multihost/test_netns.sh "$wex" samples | grep -E 'veth|FAIL' || true
fi
