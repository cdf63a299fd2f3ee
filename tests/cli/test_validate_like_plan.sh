#!/usr/bin/env bash
# wex validate refuses what wex plan refuses: it loads
# the model config, lays out both sides with their engines and places the
# ranks on hosts, and says so in one line naming the file, the JSON path
# and what was expected.
#   test_validate_like_plan.sh WEX SAMPLES_DIR
set -u
wex=$1 samples=$(cd "$2" && pwd)
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset WEX_PLUGIN_MANIFESTS

check() { # name, condition already evaluated as $?
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi
}

# variant NAME PYTHON: the colocated Qwen3-0.6B sample, changed by PYTHON
# (on the dict j), written to $tmp/NAME.json.
variant() {
    /usr/bin/python3 - "$samples/jobs/qwen3-0.6b-megatron-to-vllm-colocated.json" \
        "$samples/models/Qwen3-0.6B.config.json" "$tmp/$1.json" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["model"] = sys.argv[2]
exec(sys.argv[4])
json.dump(j, open(sys.argv[3], "w"))
PY
}

# refused NAME MESSAGE: validate and plan both exit non-zero, and
# validate's error is one line: FILE: MESSAGE.
refused() {
    "$wex" validate "$tmp/$1.json" >"$tmp/out" 2>"$tmp/err"; local rc=$?
    [ "$rc" -eq 2 ]; check "validate $1 exits 2 (got $rc)" $?
    [ ! -s "$tmp/out" ]; check "validate $1 does not say valid" $?
    [ "$(wc -l <"$tmp/err")" -eq 1 ]; check "validate $1: one line" $?
    grep -qF -- "$tmp/$1.json: $2" "$tmp/err" || { cat "$tmp/err"; false; }
    check "validate $1 says: $2" $?
    "$wex" plan "$tmp/$1.json" >/dev/null 2>&1; [ $? -ne 0 ]; check "plan refuses $1 too" $?
}

variant good 'pass'
"$wex" validate "$tmp/good.json" >"$tmp/out"; check "validate good sample exits 0" $?
grep -qF "$tmp/good.json: valid" "$tmp/out"; check "validate good sample says valid" $?

variant tp3 'j["source"]["parallel"] = {"tp": 3}'
refused tp3 "/source/parallel/tp: num_attention_heads (16) must be divisible by tp (3)"
variant pp1000 'j["source"]["parallel"] = {"pp": 1000}'
refused pp1000 "/source/parallel/pp: 1000 pipeline stages for 28 layers"
variant pp_layers 'j["source"]["parallel"] = {"pp": 2, "pp_layers": [1, 2]}'
refused pp_layers "/source/parallel/pp_layers: the stages hold 3 layers; the model has 28"
variant host_twice 'j["topology"] = {"hosts": [{"source": [0, 1, 2, 3], "destination": [0, 1]}, {"source": [3], "destination": [2, 3]}]}'
refused host_twice "/topology/hosts/1/source/0: source rank 3 is already on another host"
variant model_dir "j[\"model\"] = \"$tmp\""
refused model_dir "/model: $tmp: "
variant model_dev_zero 'j["model"] = "/dev/zero"'
refused model_dev_zero "/model: /dev/zero: "
variant model_missing "j[\"model\"] = \"$tmp/no-such-config.json\""
refused model_missing "/model: $tmp/no-such-config.json: cannot open"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
