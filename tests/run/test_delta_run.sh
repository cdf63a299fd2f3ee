#!/usr/bin/env bash
# Delta steps end to end with `wex run --changed`: a bf16 Megatron TP2
# trainer into two vLLM TP2 servers, every rank a process, every
# destination element checked after every step. Over shm and ucx, with
# fractions 0, 1 % and 1; into FP8 servers (their e4m3 bytes as deltas
# too, made once a step for both servers; the block scales whole); a destination killed mid-step and started
# again gets whole bytes once, then deltas; a 30 % step applied on 8
# threads. Then `wex plan --changed` and the refusals.
# Usage: test_delta_run.sh WEX TESTS_DATA_DIR SCHEMAS_DIR
set -uo pipefail
WEX=$1
DATA=$(cd "$2" && pwd)
SCHEMAS=$(cd "$3" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/checks.sh"

cat >"$TMP/model.json" <<'EOF'
{"architectures": ["Qwen3ForCausalLM"], "head_dim": 128, "hidden_size": 1024,
 "intermediate_size": 2048, "num_attention_heads": 8, "num_hidden_layers": 2,
 "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "vocab_size": 4096}
EOF
job() { # transport, out, [model]
    cat >"$2" <<EOF
{"model": "${3:-$TMP/model.json}",
 "source": {"engine": "megatron", "parallel": {"tp": 2}},
 "destination": {"engine": "vllm", "parallel": {"tp": 2, "dp": 2}},
 "transport": "$1", "verify": "digest", "delta": true,
 "topology": {"placement": "colocated", "gpus_per_host": 4},
 "timeouts": {"connect_seconds": 120, "step_seconds": 120}}
EOF
}

# check REPORT CHANGED: the report is valid and verified; step 1 goes
# whole, the later ones as CHANGED asks.
check() {
    /usr/bin/python3 - "$1" "$SCHEMAS/run-report.schema.json" "$2" <<'PY'
import json, sys, jsonschema
r = json.load(open(sys.argv[1])); changed = float(sys.argv[3])
jsonschema.Draft202012Validator(json.load(open(sys.argv[2]))).validate(r)
assert r["verified"] is True, r["errors"]
steps = r["steps"]
assert all(s["committed"] for s in steps), steps
assert steps[0]["mode"] == "full" and steps[0]["wire_bytes"] == steps[0]["bytes"], steps[0]
for s in steps[1:]:
    wire = s["wire_bytes"] / s["bytes"]
    if changed == 1:  # past max_fraction: every operation goes whole
        assert s["mode"] == "full" and wire == 1, s
    else:
        assert s["mode"] == "delta", s
        assert abs(s["changed_fraction"] - changed) <= 0.002, s
        assert wire <= (0.001 if changed == 0 else 0.02), s
assert r["snapshot_bytes"] > 0 and r["changed"] == changed, r
PY
}

for transport in shm ucx; do
    job "$transport" "$TMP/$transport.json"
    for changed in 0 0.01 1; do
        [ "$transport" = ucx ] && [ "$changed" != 0.01 ] && continue
        name="$transport, --changed $changed"
        if "$WEX" run "$TMP/$transport.json" --steps 3 --changed "$changed" \
                --json >"$TMP/report.json" 2>"$TMP/err"; then
            pass "$name: exit 0"
        else
            fail "$name: exit $? ($(tail -3 "$TMP/err"))"
        fi
        check "$TMP/report.json" "$changed" &&
            pass "$name: every element checked, step 1 whole, then the wire as the fraction asks" ||
            fail "$name: report"
        shm_clean "$name"
    done
done

# Human output names the mode and the wire's share.
if "$WEX" run "$TMP/shm.json" --steps 2 --changed 0.01 >"$TMP/human.txt" 2>&1 &&
    grep -q "^step 2 .* delta: [0-9.]* % of the bytes on the wire, 1.00 % changed" "$TMP/human.txt" &&
    grep -q "^delta .* sources' snapshots" "$TMP/human.txt"; then
    pass "the text report gives each step's mode, wire share and changed fraction"
else
    fail "text report: $(cat "$TMP/human.txt")"
fi

# FP8 servers: the e4m3 bytes a source quantizes go as deltas against
# those it last sent (one byte an element: about 2 % of the bytes at 1 %
# changed), the block scales whole, so the steps after the first are
# mixed; every element still checked against the quantizer.
for transport in shm ucx; do
    job $transport "$TMP/fp8.json" "$DATA/models/DeepSeek-V3-tiny-fp8.config.json"
    if "$WEX" run "$TMP/fp8.json" --steps 3 --changed 0.01 --json >"$TMP/fp8.out" 2>"$TMP/err"; then
        pass "fp8 destinations over $transport: exit 0"
    else
        fail "fp8 destinations over $transport: exit $? ($(tail -3 "$TMP/err"))"
    fi
    /usr/bin/python3 - "$TMP/fp8.out" <<'PY' && pass "fp8 destinations over $transport: every element checked; after the first step under 3 % of the bytes on the wire" || fail "fp8 destinations over $transport: report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verified"] is True, r["errors"]
assert r["steps"][0]["mode"] == "full", r["steps"][0]
assert all(s["mode"] == "mixed" and s["wire_bytes"] < 0.03 * s["bytes"]
           for s in r["steps"][1:]), r["steps"]
PY
done

# A destination killed in step 2 and started again: step 2 fails, step 3
# sends every destination whole bytes (no snapshot is a step they all
# committed), steps 4 and 5 are deltas again, every element checked.
if WEX_RUN_FAULT=die-mid:destination:1:2 "$WEX" run "$TMP/shm.json" --steps 5 \
        --changed 0.01 --respawn --json >"$TMP/respawn.json" 2>"$TMP/err"; then
    fail "respawn: exit 0 though a rank was killed"
fi
/usr/bin/python3 - "$TMP/respawn.json" <<'PY' && pass "respawned destination: step 3 whole, steps 4 and 5 deltas, every element checked" || fail "respawn: $(tail -3 "$TMP/err")"
import json, sys
r = json.load(open(sys.argv[1]))
s = {x["step"]: x for x in r["steps"]}
assert not s[2]["committed"], s[2]
assert all(s[i]["committed"] for i in (3, 4, 5)), r["steps"]
assert s[3]["mode"] == "full" and s[3]["wire_bytes"] == s[3]["bytes"], s[3]
assert s[4]["mode"] == s[5]["mode"] == "delta", (s[4], s[5])
assert any("destination rank 1 died" in e for e in r["errors"]), r["errors"]
PY
shm_clean "respawn"

# A step where 30 % changed (inboxes that hold it), applied on 8
# threads: the larger payloads are cut in pieces that threads write at
# once, into runs of a tensor (a TP4 trainer's quarter of a TP2 server's
# row-parallel weight) and straight into whole ones; every element
# checked.
sed -e 's/"delta": true/"delta": {"max_fraction": 0.5, "inbox_bytes": 33554432, "threads": 8}/' \
    -e 's/"megatron", "parallel": {"tp": 2}/"megatron", "parallel": {"tp": 4}/' \
    "$TMP/shm.json" >"$TMP/threads.json"
if "$WEX" run "$TMP/threads.json" --steps 3 --changed 0.3 --json \
        >"$TMP/threads.out" 2>"$TMP/err"; then
    pass "apply on 8 threads: exit 0"
else
    fail "apply on 8 threads: exit $? ($(tail -3 "$TMP/err"))"
fi
/usr/bin/python3 - "$TMP/threads.out" <<'PY' && pass "apply on 8 threads: steps 2 and 3 deltas of 30 %, every element checked" || fail "apply on 8 threads: report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verified"] is True, r["errors"]
assert all(s["committed"] for s in r["steps"]), r["steps"]
assert all(s["mode"] == "delta" and abs(s["changed_fraction"] - 0.3) < 0.01
           for s in r["steps"][1:]), r["steps"]
PY
shm_clean "apply on 8 threads"

# An object of some options takes the others' defaults.
for opts in '{"threads": 2}' '{"snapshots": "host"}' '{}'; do
    sed "s/\"delta\": true/\"delta\": $opts/" "$TMP/shm.json" >"$TMP/some.json"
    if "$WEX" plan "$TMP/some.json" --changed 0.01 --json >"$TMP/out" 2>"$TMP/err" &&
        /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["delta"]; assert d["max_fraction"] == 0.25, d' "$TMP/out"; then
        pass "delta $opts: the other options' defaults"
    else
        fail "delta $opts: $(cat "$TMP/err")"
    fi
done

# Bad delta options: one line naming the JSON path and what was expected.
for bad in '{"max_fraction": 0}|/delta/max_fraction: expected number > 0' \
           '{"max_fraction": 1.5}|/delta/max_fraction: expected number <= 1' \
           '{"inbox_bytes": 1000}|/delta/inbox_bytes: expected integer >= 1048576' \
           '{"threads": 0}|/delta/threads: expected integer >= 1' \
           '{"thread": 2}|unknown property "thread", did you mean "threads"' \
           '{"snapshots": "gpu"}|/delta/snapshots: expected one of "device", "host", got "gpu"'; do
    value=${bad%%|*} want=${bad#*|}
    sed "s/\"delta\": true/\"delta\": $value/" "$TMP/shm.json" >"$TMP/bad.json"
    "$WEX" plan "$TMP/bad.json" >"$TMP/out" 2>"$TMP/err"
    code=$?
    if [ "$code" -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] &&
        grep -qF -- "$want" "$TMP/err" && grep -qF "bad.json" "$TMP/err"; then
        pass "delta $value refused in one line"
    else
        fail "delta $value: exit $code: $(cat "$TMP/err")"
    fi
done

# wex plan --changed: the delta step beside the whole one.
"$WEX" plan "$TMP/shm.json" --changed 0.01 --json >"$TMP/plan.json" 2>"$TMP/err"
/usr/bin/python3 - "$TMP/plan.json" "$SCHEMAS/plan.schema.json" <<'PY' && pass "wex plan --changed 0.01: valid, about 1.55 % of the bytes on the wire, snapshots once per region" || fail "wex plan --changed: $(cat "$TMP/err")"
import json, sys, jsonschema
p = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[2]))).validate(p)
d = p["delta"]
assert 0.013 < d["wire_bytes"] / p["bytes"] < 0.02, d
assert d["whole_bytes"] == 0, d
# two replicas read the same regions: one snapshot serves both
assert abs(d["snapshot_bytes"] - p["bytes"] / 2) < 0.01 * p["bytes"], (d, p["bytes"])
assert 0 < d["predicted_seconds"] and d["scan_gb_per_s"] > 0, d
PY

# Refusals, one line each.
for bad in 2 -0.5 abc ""; do
    "$WEX" run "$TMP/shm.json" --changed "$bad" >"$TMP/out" 2>"$TMP/err"
    code=$?
    if [ "$code" -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] &&
        grep -q -- "--changed: expected a fraction from 0 to 1" "$TMP/err"; then
        pass "wex run --changed '$bad' refused in one line"
    else
        fail "wex run --changed '$bad': exit $code: $(cat "$TMP/err")"
    fi
done
if "$WEX" plan "$TMP/shm.json" --changed 0.01 --rank 0 2>"$TMP/err"; then
    fail "wex plan --changed --rank accepted"
else
    pass "wex plan --changed with --rank refused: $(cat "$TMP/err")"
fi
exit "$fails"
