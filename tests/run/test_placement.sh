#!/usr/bin/env bash
# Redundant experts end to end: an hf trainer into vLLM and SGLang servers
# (TP2 = EP2, two replicas) whose MoE layers hold 4 experts + 2 redundant
# slots, placed by a map (one rank holding an expert twice) or linearly,
# over shm and ucx; every slot of every destination is checked against
# its logical expert (wex run's oracle), and the plan counts each slot's
# bytes as needed. Then placements that change every 2 steps
# (--rebalance-every), wex layout's slot lines and the refusals.
# Usage: test_placement.sh WEX TESTS_DATA_DIR
set -uo pipefail
WEX=$1
DATA=$(cd "$2" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/checks.sh"
MODEL=$DATA/models/DeepSeek-V3-tiny-fp8.config.json
MAP='{"physical_to_logical": [[0, 0, 1, 2, 3, 3], [3, 2, 1, 0, 1, 2]]}'

job() { # engine, transport, options JSON, out (the model: $MODEL)
    /usr/bin/python3 - "$MODEL" "$1" "$2" "$3" >"$4" <<'PY'
import json, sys
model, engine, transport, options = sys.argv[1:5]
job = {"model": model, "source": {"engine": "hf"},
       "destination": {"engine": engine, "parallel": {"tp": 2, "ep": 2, "dp": 2},
                       "options": json.loads(options)},
       "transport": transport,
       "timeouts": {"connect_seconds": 120, "step_seconds": 120}}
if transport == "ucx":
    job["topology"] = {"placement": "disaggregated", "gpus_per_host": 1}
print(json.dumps(job))
PY
}

# Each engine both ways over shm, and once over ucx (vLLM by the map,
# SGLang linearly): every run is a handful of processes, kept few.
for engine in vllm sglang; do
    job "$engine" shm '{}' "$TMP/plain.json"
    "$WEX" plan "$TMP/plain.json" --json >"$TMP/plain-plan.json"
    for transport in shm ucx; do
        for how in map linear; do
            if [ $transport = ucx ] &&
                { [ $engine = vllm ] && [ $how = linear ] ||
                  [ $engine = sglang ] && [ $how = map ]; }; then
                continue
            fi
            if [ $how = map ]; then
                opts="{\"redundant_experts\": 2, \"expert_placement\": $MAP}"
            else
                opts='{"redundant_experts": 2}'
            fi
            name="$engine $how over $transport"
            job "$engine" "$transport" "$opts" "$TMP/job.json"
            "$WEX" plan "$TMP/job.json" --json >"$TMP/plan.json"
            if "$WEX" run "$TMP/job.json" --steps 2 --json >"$TMP/report.json" \
                    2>"$TMP/err"; then
                pass "$name: exit 0"
            else
                fail "$name: exit $? ($(cat "$TMP/err"))"
            fi
            /usr/bin/python3 - "$TMP/report.json" "$TMP/plan.json" "$TMP/plain-plan.json" <<'PY' \
                && pass "$name: 2 steps committed, every slot checked; the plan counts the 2 redundant slots a layer needed" \
                || fail "$name: report or plan"
import json, sys
r = json.load(open(sys.argv[1])); plan = json.load(open(sys.argv[2]))
plain = json.load(open(sys.argv[3]))
assert r["verified"] is True, r
assert [s["committed"] for s in r["steps"]] == [True, True], r["steps"]
assert plan["redundant_bytes"] == 0, plan
# 2 more slots of 2 MoE layers in each of 2 replicas: w13 (2 x 256 x 256)
# and w2 (256 x 256) fp8 bytes, and their 128 x 128 block scales (4 x 2 and
# 2 x 2 float32)
slot = 3 * 256 * 256 + 12 * 4
assert plan["bytes_needed"] == plain["bytes_needed"] + 2 * 2 * 2 * slot, (plan, plain)
assert all(s["bytes"] == plan["bytes"] for s in r["steps"]), r["steps"]
PY
            shm_clean "$name"
        done
    done
done

# Placements that change while the job runs (wex run --rebalance-every),
# a DeepSeek-V3-shaped and a Qwen3-30B-A3B-shaped model, with and without
# deltas: every slot checked after every step, each move followed. Over
# ucx with deltas only (the other pairs run over shm).
QWEN=$DATA/models/Qwen3-MoE-tiny.config.json
for transport in shm ucx; do
    for shape in deepseek qwen; do
        for delta in false true; do
            if [ $transport = ucx ] && [ $delta = false ]; then
                continue
            fi
            name="rebalance $shape over $transport (delta $delta)"
            if [ $shape = deepseek ]; then
                job vllm "$transport" '{"redundant_experts": 2}' "$TMP/job.json"
            else
                MODEL=$QWEN job sglang "$transport" '{"redundant_experts": 4}' "$TMP/job.json"
            fi
            /usr/bin/python3 - "$TMP/job.json" "$delta" <<'PY'
import json, sys
job = json.load(open(sys.argv[1])); job["delta"] = sys.argv[2] == "true"
json.dump(job, open(sys.argv[1], "w"))
PY
            if "$WEX" run "$TMP/job.json" --steps 5 --rebalance-every 2 \
                    --changed 0.05 --json >"$TMP/report.json" 2>"$TMP/err"; then
                pass "$name: exit 0"
            else
                fail "$name: exit $? ($(cat "$TMP/err"))"
            fi
            /usr/bin/python3 - "$TMP/report.json" <<'PY' \
                && pass "$name: 5 steps committed, every slot checked, the moves of steps 3 and 5 followed" \
                || fail "$name: report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verified"] is True, r
assert [s["committed"] for s in r["steps"]] == [True] * 5, r["steps"]
# 4 destination ranks moved before steps 3 and 5
assert r["placed_ranks"] == 8, r
PY
            shm_clean "$name"
        done
    done
done

out=$("$WEX" layout --model "$MODEL" --engine vllm --parallel tp=2,ep=2 \
      --options "{\"redundant_experts\": 2, \"expert_placement\": $MAP}")
echo "$out" | grep -qx '  layer 1 slots 0-2: experts 0 0 1' &&
    echo "$out" | grep -qx '  layer 2 slots 3-5: experts 0 1 2' \
    && pass "wex layout prints each rank's slots and their experts" \
    || fail "wex layout slots: $out"
out=$("$WEX" layout --model "$MODEL" --engine sglang --parallel tp=2,ep=2 \
      --options '{"redundant_experts": 2}' --rank 1)
echo "$out" | grep -qx '  layers 1-2 slots 3-5: experts 3 0 1' \
    && pass "wex layout folds MoE layers placed alike" \
    || fail "wex layout linear slots: $out"
out=$("$WEX" layout --model "$MODEL" --engine vllm --parallel tp=2,ep=2)
echo "$out" | grep -q 'slots' && fail "slots printed without placement" \
    || pass "no slot lines without redundant experts or a placement"

"$WEX" layout --model "$MODEL" --engine vllm --parallel tp=2,ep=2 \
    --options '{"redundant_experts": 2, "expert_placement": {"physical_to_logical": [[0, 1, 2, 3, 0, 1], [0, 1, 2, 0, 1, 2]]}}' \
    >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] &&
    grep -q 'options/expert_placement/physical_to_logical/1: layer 2 holds logical expert 3 in no slot' "$TMP/err" \
    && pass "a map that is not a placement: one line naming the layer" \
    || fail "bad map: exit $rc, $(cat "$TMP/err")"
job vllm shm '{"redundant_experts": 3}' "$TMP/job.json"
"$WEX" run "$TMP/job.json" --steps 1 >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] &&
    grep -q 'do not spread evenly over ep = 2' "$TMP/err" \
    && pass "uneven slots: wex run refuses in one line" \
    || fail "uneven slots: exit $rc, $(cat "$TMP/err")"
# --rebalance-every on a destination without routed experts: the first
# move fails its ranks in one line, the run fails.
MODEL=$DATA/models/Qwen3-tiny-vocab-1000.config.json job sglang shm '{}' "$TMP/job.json"
/usr/bin/python3 - "$TMP/job.json" <<'PY'
import json, sys
job = json.load(open(sys.argv[1])); job["destination"]["parallel"] = {"tp": 3}
json.dump(job, open(sys.argv[1], "w"))
PY
"$WEX" run "$TMP/job.json" --steps 2 --rebalance-every 1 >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -ne 0 ] && grep -q "the destination's model has no routed experts" "$TMP/err" \
    && pass "rebalancing a dense model: the run fails, saying why" \
    || fail "dense rebalance: exit $rc, $(cat "$TMP/err")"
shm_clean "refusals"

echo "$fails failed"
[ "$fails" -eq 0 ]
