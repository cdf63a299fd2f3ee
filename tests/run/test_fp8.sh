#!/usr/bin/env bash
# FP8 on the wire, end to end with wex run: bf16 Megatron trainers into
# vLLM servers holding the FP8 checkpoint format (quantized on the
# sender), with TP shards that are whole 128 x 128 blocks (aligned) and
# shards that cut blocks in two (straddling: the sources agree on each
# block's amax), and an FP8 vLLM server into a bf16 trainer (dequantized).
# Every destination checks every fp8 byte and every scale against the
# same rule applied to the sources' synthetic values, element by element,
# over shm and over ucx. Then the refusals.
# Usage: test_fp8.sh WEX TESTS_DATA_DIR SCHEMAS_DIR
set -uo pipefail
WEX=$1
DATA=$(cd "$2" && pwd)
SCHEMAS=$(cd "$3" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/checks.sh"

# The job with another transport (and its model by absolute path).
with_transport() { # job, transport, out
    /usr/bin/python3 - "$1" "$2" "$DATA" >"$3" <<'PY'
import json, os, sys
job = json.load(open(sys.argv[1]))
job["model"] = os.path.join(sys.argv[3], "models", os.path.basename(job["model"]))
job["transport"] = sys.argv[2]
job["timeouts"] = {"connect_seconds": 120, "step_seconds": 120}
print(json.dumps(job))
PY
}

# A job's sources quantize each fp8 cell once a step, however many
# destination replicas hold it (the disaggregated job: two vLLM servers).
for job in "$DATA"/jobs/fp8-*.json; do
    name=$(basename "$job" .json)
    for transport in shm ucx; do
        with_transport "$job" "$transport" "$TMP/$name-$transport.json"
        "$WEX" plan "$TMP/$name-$transport.json" --json >"$TMP/plan.json"
        if WEX_LOG_LEVEL=debug "$WEX" run "$TMP/$name-$transport.json" \
                --steps 2 --json >"$TMP/report.json" 2>"$TMP/err"; then
            pass "$name over $transport: exit 0"
        else
            fail "$name over $transport: exit $? ($(tail -3 "$TMP/err"))"
        fi
        /usr/bin/python3 - "$TMP/report.json" "$SCHEMAS/run-report.schema.json" "$TMP/plan.json" "$name" "$TMP/err" <<'PY' \
            && pass "$name over $transport: 2 steps committed, every element checked, every planned byte moved" \
            || fail "$name over $transport: report"
import json, sys, jsonschema
r = json.load(open(sys.argv[1])); plan = json.load(open(sys.argv[3]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[2]))).validate(r)
assert r["verified"] is True, r
assert [s["committed"] for s in r["steps"]] == [True, True], r["steps"]
assert all(s["bytes"] == plan["bytes"] == plan["bytes_needed"] for s in r["steps"]), (r["steps"], plan)
assert plan["redundant_bytes"] == 0, plan
if "dequantized" in sys.argv[4] or "vllm-tp2-to-megatron" in sys.argv[4]:
    assert plan.get("quantized_bytes", 0) == 0, plan
else:
    # the wire carries one byte per quantized element, read as two
    assert 0 < plan["quantized_bytes"] <= plan["source_bytes"], plan
    assert plan["bytes"] < plan["source_bytes"], plan
    # each cell quantized once, for every replica that holds it: what the
    # plan counts is the work, and what the sources did each step
    assert plan["quantized_bytes"] == plan["quantize_work_bytes"], plan
    import re
    made = [int(m.group(1)) for m in re.finditer(
        r"source rank \d+: quantized (\d+) bytes of floats", open(sys.argv[5]).read())]
    assert sum(made) == 2 * plan["quantized_bytes"], (sum(made), plan)
PY
        shm_clean "$name over $transport"
    done
done

# The straddling job really has blocks whose cells two sources quantize
# (so they must agree on the amax: without the agreement its destinations
# see wrong bytes), and the aligned job has none.
"$WEX" plan "$TMP/fp8-megatron-tp4-to-vllm-tp2-shm.json" --ops - >"$TMP/ops4" 2>&1
"$WEX" plan "$TMP/fp8-megatron-tp2-to-vllm-tp2-shm.json" --ops - >"$TMP/ops2" 2>&1
/usr/bin/python3 - "$TMP/ops4" "$TMP/ops2" <<'PY' && pass "straddling job: blocks quantized on two sources; aligned job: none" || fail "straddling blocks"
import json, sys
def shared_blocks(path):
    owners = {}
    for line in open(path):
        if not line.startswith("{"):
            continue
        o = json.loads(line)
        if o.get("transform") != "quantize":
            continue
        r0, c0 = o["canonical_offset"]; rows, cols = o["extent"][-2:]
        for br in range(r0 // 128, (r0 + rows - 1) // 128 + 1):
            for bc in range(c0 // 128, (c0 + cols - 1) // 128 + 1):
                owners.setdefault((o["dst_rank"], o["canonical"], br, bc), set()).add(o["src_rank"])
    assert owners, path
    return sum(len(s) > 1 for s in owners.values())
assert shared_blocks(sys.argv[1]) > 0
assert shared_blocks(sys.argv[2]) == 0
PY

# Refusals, one line each, nothing started.
/usr/bin/python3 - "$DATA/models/DeepSeek-V3-tiny-fp8.config.json" "$TMP/b64.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["quantization_config"]["weight_block_size"] = [64, 64]
json.dump(c, open(sys.argv[2], "w"))
PY
/usr/bin/python3 - "$TMP/fp8-megatron-tp2-to-vllm-tp2-shm.json" "$TMP/b64.json" >"$TMP/b64job.json" <<'PY'
import json, sys
job = json.load(open(sys.argv[1])); job["model"] = sys.argv[2]
print(json.dumps(job))
PY
"$WEX" plan "$TMP/b64job.json" >"$TMP/out" 2>"$TMP/err"; code=$?
[ "$code" -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] \
    && grep -q "weight_block_size.*fp8-block-128, blocks of 128 x 128, only" "$TMP/err" \
    && grep -q "model.layers.0.self_attn.q_a_proj.weight" "$TMP/err" \
    && pass "64 x 64 blocks refused in one line naming the tensor" \
    || fail "64 x 64 blocks: exit $code: $(cat "$TMP/err")"
"$WEX" run "$TMP/b64job.json" --steps 1 >"$TMP/out" 2>"$TMP/err"; code=$?
[ "$code" -eq 2 ] && grep -q "blocks of 128 x 128, only" "$TMP/err" \
    && pass "wex run refuses it before starting a rank" \
    || fail "wex run with 64 x 64 blocks: exit $code: $(tail -2 "$TMP/err")"
shm_clean "refusals"

echo "$fails failures"
[ "$fails" -eq 0 ]
