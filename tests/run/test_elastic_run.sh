#!/usr/bin/env bash
# `wex run --elastic`: a bf16 Megatron TP2 trainer into three vLLM TP2
# replicas whose ranks come and go (WEX_RUN_FAULT leave/join), every rank
# a process, every element of every replica there checked after every
# step. Over shm and ucx, with delta steps on shm: replica 2 joins at
# step 2, replica 1 leaves before step 3 and joins again at step 5. The
# sources never fail a step, the report counts the replicas each step,
# and the joiners' first steps go whole while the others keep deltas;
# with "seed": "replicas" the joiners are copied from a replica instead
# and the sources send only deltas. Then the refusals.
# Usage: test_elastic_run.sh WEX SCHEMAS_DIR
set -uo pipefail
WEX=$1
SCHEMAS=$(cd "$2" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/checks.sh"

cat >"$TMP/model.json" <<'EOF2'
{"architectures": ["Qwen3ForCausalLM"], "head_dim": 128, "hidden_size": 1024,
 "intermediate_size": 2048, "num_attention_heads": 8, "num_hidden_layers": 2,
 "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "vocab_size": 4096}
EOF2
job() { # transport, delta, out
    cat >"$3" <<EOF2
{"model": "model.json",
 "source": {"engine": "megatron", "parallel": {"tp": 2}},
 "destination": {"engine": "vllm", "parallel": {"tp": 2, "dp": 3}},
 "transport": "$1", "verify": "digest", "delta": $2,
 "topology": {"placement": "colocated", "gpus_per_host": 8},
 "timeouts": {"connect_seconds": 120, "step_seconds": 60}}
EOF2
}

FAULTS=join:2:2,leave:1:3,join:1:5
for transport in shm ucx; do
    delta=false
    [ "$transport" = shm ] && delta=true
    job "$transport" "$delta" "$TMP/$transport.json"
    name="$transport, delta $delta"
    if WEX_RUN_FAULT=$FAULTS "$WEX" run "$TMP/$transport.json" --elastic \
            --steps 6 --changed 0.01 --json >"$TMP/report.json" 2>"$TMP/err"; then
        pass "$name: exit 0"
    else
        fail "$name: exit $? ($(tail -3 "$TMP/err"))"
    fi
    /usr/bin/python3 - "$TMP/report.json" "$SCHEMAS/run-report.schema.json" "$delta" <<'PY' && pass "$name: replicas 2, 3, 2, 2, 3, 3; every step committed and every element checked; a joiner's first step whole" || fail "$name: report"
import json, sys, jsonschema
r = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[2]))).validate(r)
assert r["verified"] is True, r["errors"]
steps = r["steps"]
want = {1: (2, 2, 0), 2: (3, 1, 0), 3: (2, 0, 1), 4: (2, 0, 0),
        5: (3, 1, 0), 6: (3, 0, 0)}
for s in steps:
    rep = s["replicas"]
    assert s["committed"], s
    assert (rep["present"], rep["joined"], rep["left"]) == want[s["step"]], s
    assert rep["committed"] == rep["present"], s
if sys.argv[3] == "true":
    by = {s["step"]: s for s in steps}
    # joiners take whole bytes while the replicas that stayed take deltas
    assert by[2]["mode"] == "mixed" and by[5]["mode"] == "mixed", (by[2], by[5])
    assert by[4]["mode"] == "delta" and by[6]["mode"] == "delta", (by[4], by[6])
PY
    grep -q "joined step 5 in" "$TMP/err" &&
        pass "$name: a line per join" || fail "$name: no join lines: $(tail -3 "$TMP/err")"
    shm_clean "$name"
done

# "seed": "replicas": the joiners are filled from a replica the sources
# filled, so the sources send only deltas in the steps they join, and the
# joiners take deltas from the step after.
job shm true "$TMP/seed.json"
sed -i 's/"dp": 3}}/"dp": 3}, "elastic": {"min_replicas": 1, "seed": "replicas"}}/' "$TMP/seed.json"
if WEX_RUN_FAULT=$FAULTS "$WEX" run "$TMP/seed.json" --elastic --steps 6 \
        --changed 0.01 --json >"$TMP/report.json" 2>"$TMP/err"; then
    pass "seed replicas: exit 0"
else
    fail "seed replicas: exit $? ($(tail -3 "$TMP/err"))"
fi
/usr/bin/python3 - "$TMP/report.json" "$SCHEMAS/run-report.schema.json" <<'PY' && pass "seed replicas: the joiners of steps 2 and 5 seeded from a replica, the sources sending only deltas; the joiners take deltas after" || fail "seed replicas: report"
import json, sys, jsonschema
r = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[2]))).validate(r)
assert r["verified"] is True, r["errors"]
by = {s["step"]: s for s in r["steps"]}
for step in (2, 5):
    s, rep = by[step], by[step]["replicas"]
    assert (rep["present"], rep["committed"], rep["seeded"]) == (3, 2, 1), s
    assert rep["seeded_bytes"] * 3 == s["bytes"], s  # one replica of three
    assert s["mode"] == "delta" and s["wire_bytes"] < 0.05 * s["bytes"], s
for step in (3, 4, 6):
    assert by[step]["mode"] == "delta", by[step]
    assert by[step]["replicas"].get("seeded", 0) == 0, by[step]
PY
shm_clean "seed replicas"

# The text report prints a line per change.
job shm false "$TMP/text.json"
if WEX_RUN_FAULT=leave:0:2 "$WEX" run "$TMP/text.json" --elastic --steps 2 \
        >"$TMP/human.txt" 2>&1 &&
    grep -q "replicas: 0 joined, 1 left; 2 there, 2 committed" "$TMP/human.txt"; then
    pass "the text report tells each change of replicas"
else
    fail "text report: $(tail -5 "$TMP/human.txt")"
fi

# A job whose destination is not elastic is made so by --elastic; one that
# is refuses nccl, a min_replicas above dp, and fsdp's shards.
sed 's/"dp": 3}}/"dp": 3}, "elastic": {"min_replicas": 4}}/' "$TMP/text.json" >"$TMP/many.json"
"$WEX" run "$TMP/many.json" --steps 1 >"$TMP/out" 2>&1
[ $? -ne 0 ] && grep -q "/destination/elastic/min_replicas: 4 is more than the destination's 3 replicas" "$TMP/out" &&
    [ "$(grep -c . "$TMP/out")" -eq 1 ] &&
    pass "min_replicas above dp refused in one line" || fail "min_replicas: $(cat "$TMP/out")"
sed 's/"engine": "vllm", "parallel": {"tp": 2, "dp": 3}/"engine": "fsdp", "parallel": {"dp": 2}/' "$TMP/text.json" >"$TMP/fsdp.json"
"$WEX" run "$TMP/fsdp.json" --elastic --steps 1 >"$TMP/out" 2>&1
[ $? -ne 0 ] && grep -q "destination ranks 0-0 do not hold a whole copy" "$TMP/out" &&
    pass "fsdp's shards refused as elastic replicas" || fail "fsdp: $(cat "$TMP/out")"

sed 's/"transport": "shm"/"transport": "nccl"/' "$TMP/many.json" | sed 's/"min_replicas": 4/"min_replicas": 1/' >"$TMP/nccl.json"
"$WEX" plan "$TMP/nccl.json" >"$TMP/out" 2>&1
[ $? -ne 0 ] && grep -q "/destination/elastic: the nccl transport holds one communicator of every rank" "$TMP/out" &&
    [ "$(grep -c . "$TMP/out")" -eq 1 ] &&
    pass "nccl refused in one line" || fail "nccl: $(cat "$TMP/out")"
sed 's/"transport": "shm"/"transport": "cuda_ipc"/' "$TMP/seed.json" >"$TMP/seed_ipc.json"
"$WEX" plan "$TMP/seed_ipc.json" >"$TMP/out" 2>&1
[ $? -ne 0 ] && grep -q '/destination/elastic/seed: "replicas" copies host memory from replica to replica, over shm or ucx' "$TMP/out" &&
    [ "$(grep -c . "$TMP/out")" -eq 1 ] &&
    pass "seed replicas over cuda_ipc refused in one line" || fail "seed over cuda_ipc: $(cat "$TMP/out")"
sed 's/"source": {"engine": "megatron", "parallel": {"tp": 2}}/"source": {"engine": "megatron", "parallel": {"tp": 2}, "elastic": {}}/' "$TMP/text.json" >"$TMP/src.json"
"$WEX" plan "$TMP/src.json" >"$TMP/out" 2>&1
[ $? -ne 0 ] && grep -q "/source/elastic: only destination replicas can be elastic" "$TMP/out" &&
    pass "an elastic source refused in one line" || fail "source: $(cat "$TMP/out")"

# A job --elastic cannot read: one line naming it.
echo '{"model": "x"' >"$TMP/broken.json"
for bad in "$TMP/missing.json" "$TMP/broken.json"; do
    "$WEX" run "$bad" --elastic >"$TMP/out" 2>&1
    [ $? -ne 0 ] && grep -q "^wex run: $bad: " "$TMP/out" && [ "$(grep -c . "$TMP/out")" -eq 1 ] &&
        pass "--elastic with $(basename "$bad") refused in one line" ||
        fail "--elastic with $bad: $(cat "$TMP/out")"
done

# Bad events: one line naming the event.
for bad in join:3:2 leave:0:9 leave:0:2,leave:0:3 join:1:2,join:1:3 wobble:1:2x; do
    WEX_RUN_FAULT=$bad "$WEX" run "$TMP/text.json" --elastic --steps 3 >"$TMP/out" 2>&1
    code=$?
    case $bad in
    wobble*) # not an elastic event: another fault kind, ignored by --elastic
        [ $code -eq 0 ] && pass "WEX_RUN_FAULT=$bad: not a replica event" ||
            fail "WEX_RUN_FAULT=$bad: $(tail -3 "$TMP/out")" ;;
    *)
        [ $code -ne 0 ] && grep -q "WEX_RUN_FAULT" "$TMP/out" &&
            [ "$(grep -c . "$TMP/out")" -eq 1 ] &&
            pass "WEX_RUN_FAULT=$bad refused in one line: $(cat "$TMP/out")" ||
            fail "WEX_RUN_FAULT=$bad: $(cat "$TMP/out")" ;;
    esac
done
shm_clean "refusals"

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "wex run --elastic: replicas joined and left over shm and ucx, every element checked"
