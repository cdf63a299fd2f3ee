#!/usr/bin/env bash
# wex run and the sync runtime end to end: real processes, real sockets,
# real shared memory. Usage: test_run.sh WEX SAMPLES_DIR SCHEMAS_DIR
set -uo pipefail
WEX=$1
SAMPLES=$(cd "$2" && pwd)
SCHEMAS=$(cd "$3" && pwd)
JOB=$SAMPLES/jobs/qwen3-0.6b-megatron-to-vllm-colocated.json
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; [ -n "${STORE_PID:-}" ] && kill "$STORE_PID" 2>/dev/null' EXIT
source "$(dirname "$0")/checks.sh"

# A job file beside the samples' models, with its own timeouts.
make_job() { # name, extra top-level JSON members
    sed -e 's|"../models/|"'"$SAMPLES"'/models/|' "$JOB" | /usr/bin/python3 -c '
import json, sys
job = json.load(sys.stdin)
job.update(json.loads(sys.argv[1]))
print(json.dumps(job))' "$2" >"$TMP/$1.json"
}

# 1. The default sample syncs, verifies and reports against the schema.
if "$WEX" run "$JOB" --steps 2 --json >"$TMP/report.json" 2>"$TMP/err"; then
    pass "default sample: exit 0"
else
    fail "default sample: exit $? ($(tail -3 "$TMP/err"))"
fi
"$WEX" plan "$JOB" --json >"$TMP/plan.json"
/usr/bin/python3 - "$TMP/report.json" "$SCHEMAS/run-report.schema.json" "$TMP/plan.json" <<'PY' && pass "report valid, verified, 2 steps committed, every planned byte moved" || fail "report"
import json, sys, jsonschema
r = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2]))
plan = json.load(open(sys.argv[3]))
jsonschema.Draft202012Validator(s).validate(r)
assert r["verified"] is True, r
assert [x["committed"] for x in r["steps"]] == [True, True], r
assert r["memcpy_gb_per_s"] > 0 and r["gb_per_s"] > 0, r
assert r["memcpy_two_threads_gb_per_s"] > 0, r
assert all(x["bytes"] == plan["bytes_needed"] for x in r["steps"]), (r["steps"], plan)
# every source of the 4 x 4 sample sends to every destination, over shm
assert r["paths"] == {"shm": 16}, r["paths"]
PY
shm_clean "default sample"

# Every source worker opens the job from the plan share the launcher
# wrote for it, in a directory of the run's own that is gone when the run
# ends (destination workers plan for themselves: their oracle needs the
# whole plan).
mkdir -p "$TMP/tmpdir"
if TMPDIR="$TMP/tmpdir" WEX_LOG_LEVEL=debug "$WEX" run "$JOB" --steps 1 \
    --verify none >"$TMP/shares.out" 2>"$TMP/shares.err"; then
    opened=$(grep -c "plan share: .* opened from $TMP/tmpdir/wex-run-" "$TMP/shares.err")
    left=$(ls "$TMP/tmpdir")
    sources=$(grep -c "plan share: source rank .* opened from $TMP/tmpdir/wex-run-" "$TMP/shares.err")
    if [ "$opened" -eq 4 ] && [ "$sources" -eq 4 ] && [ -z "$left" ]; then
        pass "every source worker opened from its plan share; the run's share directory is gone"
    else
        fail "plan shares: $opened workers ($sources sources) of 4 opened from one; left behind: $left"
    fi
else
    fail "plan shares run: exit $? ($(grep -v debug "$TMP/shares.err" | tail -3))"
fi

# A long job's rendezvous does not grow with its steps: finished steps'
# keys are dropped.
"$WEX" run "$JOB" --steps 6 --verify none --json >"$TMP/six.json" 2>"$TMP/six.err"
/usr/bin/python3 - "$TMP/report.json" "$TMP/six.json" <<'PY' && pass "the rendezvous holds as many keys after 6 steps as after 2" || fail "rendezvous keys grow with steps: $(tail -2 "$TMP/six.err")"
import json, sys
two, six = (json.load(open(p)) for p in sys.argv[1:3])
assert six["verified"] and all(s["committed"] for s in six["steps"]), six
assert two["rendezvous_keys"] == six["rendezvous_keys"] > 0, (two["rendezvous_keys"], six["rendezvous_keys"])
PY
/usr/bin/python3 - "$TMP/six.json" <<'PY' && pass "the report's median is the median committed step, against memcpy" || fail "median: $(cat "$TMP/six.json" | head -c 600)"
import json, sys
r = json.load(open(sys.argv[1]))
g = sorted(s["gb_per_s"] for s in r["steps"] if s["committed"])
want = (g[2] + g[3]) / 2  # six committed steps
assert abs(r["median_gb_per_s"] - want) <= 1e-9 * want, (r["median_gb_per_s"], g)
assert abs(r["median_ratio_to_memcpy"] - want / r["memcpy_gb_per_s"]) <= 1e-9, r
PY

# 2. A destination that dies: the step is not committed anywhere, and
#    every surviving rank says who died, within the timeout.
make_job fast '{"timeouts": {"connect_seconds": 120, "step_seconds": 120}}'
start=$(date +%s)
WEX_RUN_FAULT=die:source:1:2 "$WEX" run "$TMP/fast.json" --steps 3 --json >"$TMP/dead.json" 2>"$TMP/dead.err"
code=$?
elapsed=$(( $(date +%s) - start ))
[ "$code" -eq 1 ] && pass "dead peer: exit 1" || fail "dead peer: exit $code"
# Seen as a disconnection at once, not as a 20 s timeout.
grep -q "disconnected" "$TMP/dead.err" && ! grep -q "not set within" "$TMP/dead.err" \
    && pass "dead peer: detected by its disconnection (run took ${elapsed}s)" \
    || fail "dead peer: not detected as a disconnection: $(head -3 "$TMP/dead.err")"
/usr/bin/python3 - "$TMP/dead.json" <<'PY' && pass "dead peer: step 1 committed, steps 2-3 not, errors name source/1" || fail "dead peer report"
import json, sys
r = json.load(open(sys.argv[1]))
assert [x["committed"] for x in r["steps"]] == [True, False, False], r["steps"]
assert r["verified"] is False
errs = " | ".join(r["errors"])
assert "source/1" in errs, errs
assert sum("destination rank" in e for e in r["errors"]) == 4, errs
PY
shm_clean "dead peer"

# 3. Wrong token, and a rank that never shows up: one clear error each,
#    within the connect timeout.
: >"$TMP/store.out"
"$WEX" store --listen 127.0.0.1:0 --token right-token-123 >"$TMP/store.out" 2>&1 &
STORE_PID=$!
for _ in $(seq 50); do grep -q listening "$TMP/store.out" && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$TMP/store.out")
make_job short '{"timeouts": {"connect_seconds": 3, "step_seconds": 3}}'
WEX_RENDEZVOUS=$ADDR WEX_TOKEN=wrong-token-456 WEX_JOB_ID=t3 \
    "$WEX" run --worker destination 0 "$TMP/short.json" --steps 1 2>"$TMP/token.err"
code=$?
[ "$code" -ne 0 ] && grep -q "refused the token" "$TMP/token.err" \
    && pass "wrong token refused: $(head -1 "$TMP/token.err")" || fail "wrong token: exit $code, $(cat "$TMP/token.err")"
start=$(date +%s)
WEX_RENDEZVOUS=$ADDR WEX_TOKEN=right-token-123 WEX_JOB_ID=t4 \
    "$WEX" run --worker destination 1 "$TMP/short.json" --steps 1 2>"$TMP/alone.err"
code=$?
elapsed=$(( $(date +%s) - start ))
[ "$code" -ne 0 ] && [ "$elapsed" -le 10 ] && grep -q "within 3.0 s" "$TMP/alone.err" \
    && pass "missing ranks: timeout after ${elapsed}s: $(head -1 "$TMP/alone.err")" \
    || fail "missing ranks: exit $code after ${elapsed}s: $(cat "$TMP/alone.err")"
kill "$STORE_PID" 2>/dev/null; wait "$STORE_PID" 2>/dev/null; STORE_PID=

# 4. Two ranks started with different job configs (another policy
#    option changes the plan): the layout digests disagree.
: >"$TMP/store2.out"
"$WEX" store --listen 127.0.0.1:0 --token right-token-123 >"$TMP/store2.out" 2>&1 &
STORE_PID=$!
for _ in $(seq 50); do grep -q listening "$TMP/store2.out" && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$TMP/store2.out")
# Source 0 with one job file, destination 0 with another: the destination
# must be refused at connect, its error naming the digest (and `what`).
refused_at_connect() { # label, source job, destination job, job id, what
    export WEX_RENDEZVOUS=$ADDR WEX_TOKEN=right-token-123 WEX_JOB_ID=$4
    "$WEX" run --worker source 0 "$TMP/$2.json" --steps 1 2>"$TMP/src0.err" &
    SRC0=$!
    "$WEX" run --worker destination 0 "$TMP/$3.json" --steps 1 2>"$TMP/digest.err"
    code=$?
    kill "$SRC0" 2>/dev/null; wait "$SRC0" 2>/dev/null
    unset WEX_RENDEZVOUS WEX_TOKEN WEX_JOB_ID
    [ "$code" -ne 0 ] && grep -q "layout digest differs.*$5" "$TMP/digest.err" \
        && pass "$1: $(head -1 "$TMP/digest.err")" || fail "$1: exit $code, $(cat "$TMP/digest.err")"
}
make_job other '{"timeouts": {"connect_seconds": 60, "step_seconds": 60}, "policy": {"name": "balanced", "options": {"coalesce": false}}}'
make_job same '{"timeouts": {"connect_seconds": 60, "step_seconds": 60}}'
refused_at_connect "layout digests disagree" same other t5 policy
# ... and two ranks whose transport options differ (ucx's data path):
#    refused at connect, not left to time out at the first flush.
if [ -e "$(dirname "$WEX")/../lib/wex/plugins/transport-ucx.json" ]; then
    make_job ucxauto '{"timeouts": {"connect_seconds": 60, "step_seconds": 60}, "transport": "ucx"}'
    make_job ucxput '{"timeouts": {"connect_seconds": 60, "step_seconds": 60}, "transport": {"name": "ucx", "options": {"data_path": "put"}}}'
    refused_at_connect "transport options disagree" ucxauto ucxput t5b transport
fi
kill "$STORE_PID" 2>/dev/null; wait "$STORE_PID" 2>/dev/null; STORE_PID=
shm_clean "faults"

# 5. The same faults over ucx (every rank on this host): a destination
#    that dies between steps and a source killed before its puts; an
#    unreachable rendezvous.
UCXJOB=$SAMPLES/jobs/qwen3-0.6b-megatron-to-vllm-disaggregated.json
if [ -e "$(dirname "$WEX")/../lib/wex/plugins/transport-ucx.json" ]; then
    export UCX_LOG_LEVEL=error UCX_WARN_UNUSED_ENV_VARS=n
    sed -e 's|"../models/|"'"$SAMPLES"'/models/|' "$UCXJOB" | /usr/bin/python3 -c '
import json, sys
job = json.load(sys.stdin)
job["timeouts"] = {"connect_seconds": 120, "step_seconds": 120}
print(json.dumps(job))' >"$TMP/ucx.json"
    for fault in die:destination:1:2 die:source:2:2; do
        WEX_RUN_FAULT=$fault "$WEX" run "$TMP/ucx.json" --steps 3 --json >"$TMP/ucxdead.json" 2>"$TMP/ucxdead.err"
        code=$?
        who=$(echo "$fault" | cut -d: -f2,3 | tr : /)
        /usr/bin/python3 - "$TMP/ucxdead.json" "$who" <<'PY' && [ "$code" -eq 1 ] \
            && pass "ucx, $fault: step 1 committed, steps 2-3 not, every surviving rank names $who" \
            || fail "ucx, $fault: exit $code: $(head -3 "$TMP/ucxdead.err")"
import json, sys
r = json.load(open(sys.argv[1])); who = sys.argv[2]
assert [x["committed"] for x in r["steps"]] == [True, False, False], r["steps"]
survivors = [e for e in r["errors"] if "killed by signal 9" not in e]
assert len(survivors) == 7, r["errors"]  # every survivor, and the killed rank
assert len(r["errors"]) == 8, r["errors"]
assert all(who in e for e in survivors), r["errors"]
# UCX over TCP has no RMA: every pair of the 4 x 4 sample sends messages
assert r["paths"] == {"am": 16}, r["paths"]
PY
    done
    start=$(date +%s)
    WEX_RENDEZVOUS=127.0.0.1:9 WEX_TOKEN=whatever-token WEX_JOB_ID=t6 \
        "$WEX" run --worker destination 0 "$TMP/short.json" --steps 1 2>"$TMP/unreach.err"
    code=$?
    elapsed=$(( $(date +%s) - start ))
    [ "$code" -ne 0 ] && [ "$elapsed" -le 10 ] && grep -q "127.0.0.1:9" "$TMP/unreach.err" \
        && pass "unreachable rendezvous: $(head -1 "$TMP/unreach.err") (${elapsed}s)" \
        || fail "unreachable rendezvous: exit $code after ${elapsed}s: $(cat "$TMP/unreach.err")"
    shm_clean "ucx faults"
else
    fail "the ucx transport is not built"
fi

# 5b. Packing: Megatron TP1 into vLLM TP2 reads every row-parallel weight
#     (o_proj, down_proj) row by row. Over ucx each such box goes out as
#     one put from staging; over shm (no packing) as one put per row. With
#     the smallest staging (1 MiB), a box straddles full staging often, and
#     every byte still verifies.
if [ -e "$(dirname "$WEX")/../lib/wex/plugins/transport-ucx.json" ]; then
    for t in ucx shm; do
        /usr/bin/python3 - "$SAMPLES" "$t" "$TMP/pack-model.json" >"$TMP/pack-$t.json" <<'PY'
import json, sys
samples, t, cut = sys.argv[1:4]
# 4 of Qwen3-0.6B's 28 layers and a 16k vocabulary: the same boxes, a
# seventh of the rows, so the case stays quick under the sanitizers
model = json.load(open(samples + "/models/Qwen3-0.6B.config.json"))
model.update({"num_hidden_layers": 4, "vocab_size": 16384})
json.dump(model, open(cut, "w"))
print(json.dumps({"model": cut,
    "source": {"engine": "megatron", "parallel": {"tp": 1, "pp": 1}},
    "destination": {"engine": "vllm", "parallel": {"tp": 2}},
    "transport": t,
    "topology": {"placement": "disaggregated" if t == "ucx" else "colocated", "gpus_per_host": 2},
    "timeouts": {"connect_seconds": 120, "step_seconds": 120}}))
PY
        "$WEX" run "$TMP/pack-$t.json" --steps 1 --verify none --json >"$TMP/pack-$t.out" 2>"$TMP/pack-$t.err"
    done
    "$WEX" plan "$TMP/pack-ucx.json" --json >"$TMP/pack-plan.json"
    /usr/bin/python3 - "$TMP/pack-ucx.out" "$TMP/pack-shm.out" "$TMP/pack-plan.json" <<'PY' \
        && pass "packing: over ucx about one put per operation, over shm one per row" \
        || fail "packing: $(tail -2 "$TMP/pack-ucx.err")"
import json, sys
ucx, shm, plan = (json.load(open(p)) for p in sys.argv[1:4])
ops = plan["operations"]
u, s = ucx["steps"][0]["puts"], shm["steps"][0]["puts"]
assert ucx["verified"] and shm["verified"], (ucx["errors"], shm["errors"])
# a box that straddles full staging takes two puts: a few
assert ops <= u <= ops + ops // 100, (u, ops)
assert s >= 50 * u, (s, u)
PY
    /usr/bin/python3 - "$TMP/pack-ucx.json" >"$TMP/pack-small.json" <<'PY'
import json, sys
job = json.load(open(sys.argv[1])); job["staging_bytes"] = 1 << 20
print(json.dumps(job))
PY
    "$WEX" run "$TMP/pack-small.json" --steps 2 --json >"$TMP/pack-small.out" 2>"$TMP/pack-small.err"
    /usr/bin/python3 - "$TMP/pack-small.out" "$TMP/pack-ucx.out" <<'PY' \
        && pass "packing: with 1 MiB of staging and digests, both steps verify" \
        || fail "packing with 1 MiB of staging: $(tail -2 "$TMP/pack-small.err")"
import json, sys
small, big = (json.load(open(p)) for p in sys.argv[1:3])
assert small["verified"] and [x["committed"] for x in small["steps"]] == [True, True], small
# digests put 256 KiB at a time; 1 MiB packs split the boxes: more puts
assert small["steps"][0]["puts"] > big["steps"][0]["puts"], (small["steps"], big["steps"])
PY
    shm_clean "packing"

    # 5c. The element check finds a wrong element: a bit flipped in what
    #     landed, after the step committed, fails the run naming the rank.
    WEX_RUN_FAULT=scribble:destination:1:1 "$WEX" run "$TMP/pack-shm.json" \
        --steps 1 --verify none >/dev/null 2>"$TMP/scribble.err"
    code=$?
    [ "$code" -eq 1 ] \
        && grep -q "destination rank 1: step 1: 1 elements differ from what was sent" "$TMP/scribble.err" \
        && pass "a flipped bit: $(grep -m1 'elements differ' "$TMP/scribble.err")" \
        || fail "a flipped bit: exit $code, $(tail -3 "$TMP/scribble.err")"
    shm_clean "a flipped bit"
fi

# 6. The rendezvous server killed mid-run: every rank errors out, none
#    hangs (the ranks' waits fail as their connection drops).
: >"$TMP/store3.out"
"$WEX" store --listen 127.0.0.1:0 --token right-token-123 >"$TMP/store3.out" 2>&1 &
STORE_PID=$!
for _ in $(seq 50); do grep -q listening "$TMP/store3.out" && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$TMP/store3.out")
make_job long '{"timeouts": {"connect_seconds": 120, "step_seconds": 120}}'
"$WEX" run "$TMP/long.json" --host 0 --rendezvous "$ADDR" --token right-token-123 \
    --job-id t7 --steps 1000 --verify none >"$TMP/killed.out" 2>"$TMP/killed.err" &
RUN_PID=$!
# once the launcher and its 8 ranks are connected (a source may take more
# than 6 s to open in a Debug build on a busy machine), and then a little
# into the job
PORT=${ADDR##*:}
for _ in $(seq 600); do
    [ "$(ss -Htn state established "( dport = :$PORT )" | wc -l)" -ge 9 ] && break
    sleep 0.1
done
sleep 2
kill -9 "$STORE_PID"; wait "$STORE_PID" 2>/dev/null; STORE_PID=
start=$(date +%s)
wait "$RUN_PID"
code=$?
elapsed=$(( $(date +%s) - start ))
[ "$code" -ne 0 ] && [ "$elapsed" -le 25 ] \
    && pass "rendezvous killed: every rank stopped within ${elapsed}s: $(grep -m1 'rank' "$TMP/killed.err")" \
    || fail "rendezvous killed: exit $code after ${elapsed}s"
[ "$(grep -c 'wex run: .* rank' "$TMP/killed.err")" -eq 8 ] \
    && pass "rendezvous killed: all 8 ranks report an error" \
    || fail "rendezvous killed: $(grep -c 'wex run: .* rank' "$TMP/killed.err") of 8 ranks reported: $(head -3 "$TMP/killed.err")"
shm_clean "rendezvous killed"

# 7. Bad arguments, and a job naming a transport that is not installed
#    (refused once, before any rank starts).
sed -e 's|"transport": "shm"|"transport": "nope"|' -e 's|"../models/|"'"$SAMPLES"'/models/|' "$JOB" >"$TMP/nope.json"
"$WEX" run "$TMP/nope.json" --steps 1 >/dev/null 2>"$TMP/nope.err"; code=$?
[ "$code" -eq 2 ] && [ "$(wc -l <"$TMP/nope.err")" -eq 1 ] \
    && grep -q '/transport: no transport plugin named "nope"' "$TMP/nope.err" \
    && pass "missing transport: $(cat "$TMP/nope.err")" || fail "missing transport: exit $code: $(cat "$TMP/nope.err")"
"$WEX" run >/dev/null 2>"$TMP/noargs.err"; code=$?
[ "$code" -eq 2 ] && grep -q "no job file" "$TMP/noargs.err" && pass "no job: exit 2" || fail "no job: exit $code"
# 8. The launcher killed with SIGKILL in the middle of a long run: every
#    worker dies with it, even one wedged where it would never notice the
#    rendezvous is gone, and nothing is left in /dev/shm.
WEX_RUN_FAULT=hang:source:0:1 "$WEX" run "$JOB" --steps 1000 --verify none \
    >"$TMP/killed.out" 2>&1 &
launcher=$!
for _ in $(seq 300); do
    [ "$(pgrep -P "$launcher" -c 2>/dev/null)" -ge 8 ] 2>/dev/null && break
    sleep 0.1
done
workers=$(pgrep -P "$launcher" | tr '\n' ' ')
sleep 2 # into the steps
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null
# Within a second: the kernel kills them with their parent
# (PR_SET_PDEATHSIG); the wedged source would never go by itself.
left=""
for _ in $(seq 10); do
    left=""
    # a worker that died but was not reaped yet (a zombie) is dead
    for w in $workers; do
        state=$(ps -o stat= -p "$w" 2>/dev/null)
        [ -n "$state" ] && [ "${state#Z}" = "$state" ] && left="$left $w"
    done
    [ -z "$left" ] && break
    sleep 0.1
done
[ -n "$workers" ] && [ -z "$left" ] \
    && pass "launcher killed: its $(echo $workers | wc -w) workers died with it" \
    || fail "launcher killed: workers still running:$left (of: $workers)"
for w in $left; do kill -KILL "$w" 2>/dev/null; done
shm_clean "launcher killed"

# 9. A job this machine cannot hold is refused before any rank starts.
"$WEX" run "$SAMPLES/jobs/kimi-k2-megatron-to-vllm.json" --steps 1 >/dev/null 2>"$TMP/big.err"; code=$?
[ "$code" -eq 2 ] && [ "$(wc -l <"$TMP/big.err")" -eq 1 ] \
    && grep -q "GB available (MemAvailable)" "$TMP/big.err" \
    && pass "a job too big for this machine: refused in one line with the figures" \
    || fail "a job too big for this machine: exit $code: $(cat "$TMP/big.err")"

"$WEX" run "$JOB" --steps 0 >/dev/null 2>"$TMP/steps.err"; code=$?
[ "$code" -eq 2 ] && pass "--steps 0 refused" || fail "--steps 0: exit $code"

echo "$fails failures"
[ "$fails" -eq 0 ]
