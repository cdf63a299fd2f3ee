#!/usr/bin/env bash
# The wex CLI end to end: help, version, plugins (each failure mode shows
# its one line), validate (exit codes and error lines).
#   test_cli.sh WEX FAKE_DIR DATA_DIR SOURCE_DIR MODELS_DIR
set -u
wex=$1 fake=$2 data=$3 src=$4 models=$5
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # name, condition already evaluated as $?
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi
}
contains() { grep -qF -- "$2" "$1"; }

"$wex" --help >"$tmp/out"; check "--help exits 0" $?
contains "$tmp/out" "Commands:"; check "--help lists commands" $?
contains "$tmp/out" "WEX_PLUGIN_PATH"; check "--help names the environment" $?
"$wex" --version >"$tmp/out"; check "--version exits 0" $?
grep -qE '^wex [0-9]+\.[0-9]+\.[0-9]+ \(plugin ABI 1\.6\)$' "$tmp/out"; check "--version format" $?
"$wex" frobnicate 2>"$tmp/err"; [ $? -eq 2 ]; check "unknown command exits 2" $?
contains "$tmp/err" "unknown command 'frobnicate'"; check "unknown command named" $?
"$wex" plugins --help >"$tmp/out"; check "plugins --help" $?
"$wex" validate --help >"$tmp/out"; check "validate --help" $?

# Good plugins load; the listing has every column.
WEX_PLUGIN_MANIFESTS="$fake/good:$fake/good-copy:$fake/policy" "$wex" plugins >"$tmp/out"
check "plugins exits 0 when all load" $?
grep -qE '^fake-good +engine +0\.0\.1 +1\.0-1\.0 +loaded ' "$tmp/out"; check "plugins row" $?
contains "$tmp/out" "shadows: $fake/good-copy/engine-fake-good.json"; check "shadowed copy listed" $?
WEX_PLUGIN_MANIFESTS="$fake/good:$fake/policy" "$wex" plugins --json >"$tmp/json"
check "plugins --json exits 0" $?
/usr/bin/python3 - "$tmp/json" <<'PY'; check "plugins --json content" $?
import json, sys
d = json.load(open(sys.argv[1]))
names = {(p["name"], p["kind"], p["status"], p["abi"]) for p in d["plugins"]}
assert ("fake-good", "engine", "loaded", "1.0") in names, names
assert ("fake-policy", "policy", "loaded", "1.0") in names, names
assert d["invalid_manifests"] == []
PY

# Every failure mode: one line each, exit 1.
all="$fake/refuse:$fake/abi-disjoint:$fake/no-entry:$fake/kind-mismatch:$fake/name-mismatch"
all="$all:$fake/init-fails:$data/manifests/missing-library:$data/manifests/not-elf:$data/manifests/bad"
WEX_PLUGIN_MANIFESTS="$all" "$wex" plugins >"$tmp/out"; [ $? -eq 1 ]; check "plugins exits 1 on failures" $?
for want in "the plugin refused ABI 1.0..1.0" \
            "ABI ranges are disjoint" \
            "no entry symbol 'wex_plugin_negotiate'" \
            "kind mismatch: the manifest says engine, the library says policy" \
            "name mismatch" \
            "init failed (system error): cannot reach the license server" \
            "is missing (named by /library_path)" \
            "dlopen failed: " \
            "invalid manifest: $data/manifests/bad/syntax.json:4:3: invalid JSON" \
            "invalid manifest: $data/manifests/bad/bad-kind.json: /kind: "; do
    contains "$tmp/out" "$want"; check "plugins shows: $want" $?
done

# validate: exit 0 and "valid", or exit 2 with one line per problem.
cat >"$tmp/job.json" <<JSON
{"model": "$models/Qwen3-0.6B.config.json",
 "source": {"engine": "fake-good", "parallel": {"tp": 2, "pp": 2}},
 "destination": {"engine": "fake-good"},
 "policy": "fake-policy", "transport": "fake-transport"}
JSON
export WEX_PLUGIN_MANIFESTS="$fake/good:$fake/policy:$fake/transport"
"$wex" validate "$tmp/job.json" >"$tmp/out"; check "validate good exits 0" $?
contains "$tmp/out" "$tmp/job.json: valid"; check "validate says valid" $?
cat >"$tmp/bad.json" <<JSON
{"model": "x", "source": {"engine": "fake-good", "parallel": {"tp": -1}},
 "destination": {"engine": "nope"}, "transport": {"name": "fake-transport", "options": {"depth": 0}},
 "policy": "fake-policy", "extra": 1}
JSON
"$wex" validate "$tmp/bad.json" 2>"$tmp/err"; [ $? -eq 2 ]; check "validate bad exits 2" $?
contains "$tmp/err" "$tmp/bad.json: /source/parallel/tp: "; check "validate names tp" $?
contains "$tmp/err" "$tmp/bad.json: : unknown property \"extra\""; check "validate names extra" $?
"$wex" validate "$tmp/missing.json" 2>"$tmp/err"; [ $? -eq 2 ]; check "validate missing file exits 2" $?
contains "$tmp/err" "cannot open"; check "validate missing file message" $?
unset WEX_PLUGIN_MANIFESTS

# layout: the hf engine over a real config (the in-tree plugins).
unset WEX_PLUGIN_MANIFESTS
"$wex" layout --help >"$tmp/out"; check "layout --help" $?
"$wex" layout --model "$models/Qwen3-8B.config.json" --engine hf >"$tmp/out"
check "layout hf exits 0" $?
contains "$tmp/out" "rank 0     399 tensors, 399 pieces, 16381470720 bytes"; check "layout hf totals" $?
"$wex" layout --model "$models/Qwen3-0.6B.config.json" --engine hf --json >"$tmp/json"
check "layout --json exits 0" $?
/usr/bin/python3 - "$tmp/json" <<'PY'; check "layout --json content" $?
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ranks"] == 1 and d["engine"] == "hf"
names = [t["name"] for t in d["model"]["tensors"]]
local = d["layout"][0]["tensors"]
assert [t["name"] for t in local] == names
for t in local:
    (p,) = t["pieces"]
    assert p["tensor"] == t["name"] and p["extent"] == t["shape"] and set(p["at"]) == {0}
PY
"$wex" layout --model "$models/Qwen3-0.6B.config.json" --engine hf --parallel dp=2 --json >"$tmp/hf-dp2.json"
check "layout hf dp=2" $?
/usr/bin/python3 - "$tmp/hf-dp2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ranks"] == 2, d["ranks"]
a, b = d["layout"]
assert a["coords"] == {"dp": 0} and b["coords"] == {"dp": 1}, (a["coords"], b["coords"])
assert a["tensors"] == b["tensors"], "the two replicas hold different things"
PY
check "layout hf dp=2: two ranks, each the whole checkpoint" $?
"$wex" layout --model "$models/Qwen3-0.6B.config.json" --engine hf --parallel tp=2 2>"$tmp/err"
[ $? -eq 2 ]; check "layout hf refuses tp=2" $?
contains "$tmp/err" "parallel/tp: the hf layout is one unsharded rank per replica"; check "layout tp error text" $?
"$wex" layout --model "$models/Qwen3-0.6B.config.json" --engine hf --options '{"dtyp": "bf16"}' 2>"$tmp/err"
[ $? -eq 2 ]; check "layout refuses an unknown option" $?
contains "$tmp/err" 'engine hf: /options: unknown property "dtyp", did you mean "dtype"?'; check "layout unknown option text" $?
[ "$(grep -c . "$tmp/err")" -eq 1 ]; check "layout unknown option: one line" $?
"$wex" layout --model "$models/Qwen3-0.6B.config.json" --engine nope 2>"$tmp/err"
[ $? -eq 2 ]; check "layout unknown engine exits 2" $?
contains "$tmp/err" "no engine plugin named \"nope\" (available: "; check "layout unknown engine text" $?
grep -qE "\(available: ([a-z]+, )*hf[,)]" "$tmp/err"; check "layout unknown engine lists hf" $?
# --help-options: every option of every in-tree engine, from its manifest,
# with its default and description; no model needed.
"$wex" plugins --json >"$tmp/plugins.json"
for engine in hf fsdp megatron vllm sglang; do
    "$wex" layout --engine "$engine" --help-options >"$tmp/opts"
    check "layout --help-options $engine exits 0" $?
    /usr/bin/python3 - "$tmp/plugins.json" "$engine" "$tmp/opts" <<'PY'; check "layout --help-options $engine lists every option" $?
import json, sys
plugins = json.load(open(sys.argv[1]))["plugins"]
entry = next(p for p in plugins if p["name"] == sys.argv[2] and p["kind"] == "engine")
manifest = json.load(open(entry["manifest"]))
text = open(sys.argv[3]).read()
assert text.startswith("engine %s " % sys.argv[2]), text[:80]
props = manifest.get("options_schema", {}).get("properties", {})
for name, prop in props.items():
    line = next((l for l in text.splitlines() if l.startswith("  %s: " % name)), None)
    assert line is not None, (name, text)
    if "default" in prop:
        assert line.endswith("default " + json.dumps(prop["default"], separators=(",", ":"))), line
    assert prop["description"].split()[0] in text, name
if not props:
    assert "options: none" in text
PY
done
"$wex" layout --engine nope --help-options 2>"$tmp/err"
[ $? -eq 2 ]; check "layout --help-options unknown engine exits 2" $?
contains "$tmp/err" "no engine plugin named \"nope\" (available: "; check "layout --help-options unknown engine text" $?
"$wex" layout --model "$models/Qwen3-0.6B.config.json" --engine hf --parallel tp=0 2>"$tmp/err"
[ $? -eq 2 ]; check "layout bad parallel exits 2" $?
contains "$tmp/err" "--parallel: /tp: "; check "layout bad parallel names /tp" $?
"$wex" layout --model /nonexistent/config.json --engine hf 2>"$tmp/err"
[ $? -eq 2 ]; check "layout missing model exits 2" $?

# layout --json against schemas/layout.schema.json, with python-jsonschema
# as the independent judge: hf always, the other in-tree engines once built
# (optional here; test_engine_props checks what their layouts mean).
# python-jsonschema takes seconds per MoE document, so: one rank of the
# MoE model per sharded engine, each distinct model section validated
# once, and the documents spread over the cores.
schema="$src/schemas/layout.schema.json"
plugins="$(dirname "$wex")/../lib/wex/plugins"
docs=() labels=()
layout_json() { # model engine [--parallel P [--rank N]]
    local model=$1 engine=$2 doc="$tmp/layout-${#docs[@]}.json"
    shift 2
    "$wex" layout --model "$models/$model.config.json" --engine "$engine" "$@" --json >"$doc"
    check "layout --json $engine $model $* exits 0" $?
    docs+=("$doc") labels+=("$engine $model $*")
}
layout_json Qwen3-8B hf
layout_json Qwen3-30B-A3B hf
for engine in fsdp megatron vllm sglang; do
    [ -f "$plugins/engine-$engine.json" ] || continue
    parallel=tp=2
    [ "$engine" = fsdp ] && parallel=dp=2
    layout_json Qwen3-8B "$engine" --parallel "$parallel"
    layout_json Qwen3-30B-A3B "$engine" --parallel "$parallel" --rank 1
done
/usr/bin/python3 - "$schema" "${docs[@]}" >"$tmp/verdicts" <<'PY'
import json, multiprocessing, sys
from jsonschema import Draft202012Validator

schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema)

def first_error(doc):
    for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.path)):
        return "/" + "/".join(map(str, e.path)) + ": " + e.message[:300]
    return "valid"

def verdict(job):
    path, skip_model = job
    doc = json.load(open(path))
    if skip_model:  # the same model section as an earlier document
        doc["model"]["tensors"] = doc["model"]["tensors"][:1]
    return path + ": " + first_error(doc)

jobs, seen = [], set()
for path in sys.argv[2:]:
    model = json.dumps(json.load(open(path)).get("model"), sort_keys=True)
    jobs.append((path, model in seen))
    seen.add(model)
with multiprocessing.get_context("fork").Pool() as pool:
    print("\n".join(pool.map(verdict, jobs)))
doc = json.load(open(sys.argv[2]))
del doc["ranks"]
print("missing ranks:", "rejected" if any(
    "'ranks' is a required property" in e.message for e in validator.iter_errors(doc)) else "accepted")
PY
check "layout schema validation ran" $?
for i in "${!docs[@]}"; do
    grep -qxF "${docs[$i]}: valid" "$tmp/verdicts"
    check "layout --json ${labels[$i]} matches the schema" $?
done
grep -qxF "missing ranks: rejected" "$tmp/verdicts"; check "layout schema rejects a missing ranks" $?
grep -v ": valid$" "$tmp/verdicts" | grep -v "^missing ranks: rejected$"

# ---- wex plan: a bad job gets one clear error line and exit 2 ----------
# (tests/plan/ checks the plans of good jobs; these are the refusals.)
unset WEX_PLUGIN_MANIFESTS
mkdir -p "$tmp/plan"
qwen="$(cd "$models" && pwd)/Qwen3-0.6B.config.json"
plan_refuses() { # name, job file, texts the error line must contain...
    local name=$1 job=$2 lines failed=$fail
    shift 2
    "$wex" plan "$job" >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "plan $name exits 2" $?
    lines=$(wc -l <"$tmp/err")
    [ "$lines" -eq 1 ] && [ ! -s "$tmp/out" ]
    check "plan $name: one error line ($lines), nothing on stdout" $?
    grep -q "^wex plan: " "$tmp/err"; check "plan $name: the line says wex plan" $?
    for want in "$@"; do
        contains "$tmp/err" "$want"; check "plan $name names: $want" $?
    done
    [ "$fail" -eq "$failed" ] || sed 's/^/    /' "$tmp/err"
}
cat >"$tmp/plan/engine.json" <<JSON
{"model": "$qwen", "source": {"engine": "nope"}, "destination": {"engine": "hf"},
 "transport": "shm"}
JSON
plan_refuses "unknown source engine" "$tmp/plan/engine.json" \
    "$tmp/plan/engine.json" "/source/engine" '"nope"'
# Megatron shares DeepSeek's MTP embedding and head with the main ones;
# an hf destination holds the checkpoint's copies: refused before planning.
deepseek="$(cd "$models" && pwd)/DeepSeek-V3.config.json"
cat >"$tmp/plan/uncovered.json" <<JSON
{"model": "$deepseek", "source": {"engine": "megatron", "parallel": {"tp": 2}},
 "destination": {"engine": "hf"}, "transport": "shm"}
JSON
plan_refuses "tensor no source holds" "$tmp/plan/uncovered.json" \
    "$tmp/plan/uncovered.json" "destination engine hf holds model.layers.61.embed_tokens.weight" \
    "no rank of source engine megatron holds any of it"
cat >"$tmp/plan/policy.json" <<JSON
{"model": "$qwen", "source": {"engine": "hf"}, "destination": {"engine": "hf"},
 "transport": "shm", "policy": "frobnicate"}
JSON
plan_refuses "unknown policy" "$tmp/plan/policy.json" \
    "$tmp/plan/policy.json" "/policy" '"frobnicate"' "balanced"
cat >"$tmp/plan/hosts.json" <<JSON
{"model": "$qwen", "source": {"engine": "hf"},
 "destination": {"engine": "vllm", "parallel": {"tp": 2}}, "transport": "shm",
 "topology": {"hosts": [{"source": [0], "destination": [0]}]}}
JSON
plan_refuses "hosts leaving a destination rank out" "$tmp/plan/hosts.json" \
    "$tmp/plan/hosts.json" "/topology/hosts" "destination rank 1"
cat >"$tmp/plan/host-rank.json" <<JSON
{"model": "$qwen", "source": {"engine": "hf"},
 "destination": {"engine": "vllm", "parallel": {"tp": 2}}, "transport": "shm",
 "topology": {"hosts": [{"source": [0], "destination": [0, 2]}]}}
JSON
plan_refuses "hosts naming a rank that does not exist" "$tmp/plan/host-rank.json" \
    "/topology/hosts/0/destination/1" "destination rank 2"
# The destination's own config.json, one field off the source's.
for change in hidden_size=2048 torch_dtype=float32; do
    /usr/bin/python3 - "$qwen" "$tmp/plan/$change.config.json" "$change" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
key, value = sys.argv[3].split("=")
config[key] = int(value) if value.isdigit() else value
json.dump(config, open(sys.argv[2], "w"))
PY
    cat >"$tmp/plan/model-$change.json" <<JSON
{"model": "$qwen", "source": {"engine": "hf"},
 "destination": {"engine": "hf", "model": "$change.config.json"}, "transport": "shm"}
JSON
done
plan_refuses "destination model with another hidden_size" \
    "$tmp/plan/model-hidden_size=2048.json" \
    "model.embed_tokens.weight" "[151936, 1024]" "[151936, 2048]" "hidden_size=2048.config.json"
plan_refuses "destination model with another dtype" \
    "$tmp/plan/model-torch_dtype=float32.json" \
    "model.embed_tokens.weight" "BF16" "F32" "torch_dtype=float32.config.json"
cat >"$tmp/plan/parallel.json" <<JSON
{"model": "$qwen", "source": {"engine": "vllm", "parallel": {"tp": 3}},
 "destination": {"engine": "hf"}, "transport": "shm"}
JSON
plan_refuses "a tp the engine refuses" "$tmp/plan/parallel.json" \
    "source" "vllm" "parallel/tp" "divisible by tp (3)"
cat >"$tmp/plan/hf-tp.json" <<JSON
{"model": "$qwen", "source": {"engine": "hf"},
 "destination": {"engine": "hf", "parallel": {"tp": 2}}, "transport": "shm"}
JSON
plan_refuses "tp for the one-rank hf engine" "$tmp/plan/hf-tp.json" \
    "destination" "hf" "parallel/tp"
# ---- end of the wex plan refusals ----------------------------------------

# ---- bad numbers and options: exit 2 and one line on stderr, which names
# the command and the option, and for a number the range it takes ------
refuses() { # name, the exact line, wex arguments...
    local name=$1 want=$2 lines
    shift 2
    "$wex" "$@" >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "$name exits 2" $?
    lines=$(wc -l <"$tmp/err")
    [ "$lines" -eq 1 ] && [ ! -s "$tmp/out" ]
    check "$name: one line on stderr ($lines), nothing on stdout" $?
    grep -qxF -- "$want" "$tmp/err"; check "$name says: $want" $?
    grep -qxF -- "$want" "$tmp/err" || sed 's/^/    /' "$tmp/err"
}
job="$tmp/job.json"
steps='wex run: --steps: expected an integer from 1 to 1000000, got'
refuses "run --steps abc" "$steps \"abc\"" run "$job" --steps abc
refuses "run --steps 0" "$steps \"0\"" run "$job" --steps 0
refuses "run --steps 1000001" "$steps \"1000001\"" run "$job" --steps 1000001
refuses "run --steps 2^64" "$steps \"18446744073709551616\"" run --steps 18446744073709551616 "$job"
refuses "run --steps -1" "$steps \"-1\"" run "$job" --steps -1
refuses "run --steps 3x" "$steps \"3x\"" run "$job" --steps 3x
refuses "run --steps ''" "$steps \"\"" run "$job" --steps ''
refuses "run --steps=0x10" "$steps \"0x10\"" run "$job" --steps=0x10
refuses "run --host -2" \
    'wex run: --host: expected an integer from 0 to 4294967295, got "-2"' \
    run "$job" --host -2 --rendezvous 127.0.0.1:1 --token t --job-id j
refuses "run --worker source abc" \
    'wex run: --worker: expected an integer from 0 to 4294967294, got "abc"' \
    run --worker source abc "$job"
refuses "run --first-step 0" \
    'wex run: --first-step: expected an integer from 1 to 1000000, got "0"' \
    run "$job" --first-step 0
refuses "plan --rank -1" \
    'wex plan: --rank: expected an integer from 0 to 4294967294, got "-1"' \
    plan "$job" --rank -1
refuses "plan --rank 2^32-1" \
    'wex plan: --rank: expected an integer from 0 to 4294967294, got "4294967295"' \
    plan "$job" --rank 4294967295 --side source
refuses "layout --rank 1.5" \
    'wex layout: --rank: expected an integer from 0 to 4294967294, got "1.5"' \
    layout --model "$models/Qwen3-0.6B.config.json" --engine hf --rank 1.5
refuses "layout --parallel tp=two" \
    'wex layout: --parallel: tp: expected an integer from 0 to 4294967295, got "two"' \
    layout --model "$models/Qwen3-0.6B.config.json" --engine hf --parallel dp=2,tp=two
refuses "layout --parallel pp_layers=3::4" \
    'wex layout: --parallel: pp_layers: expected an integer from 0 to 4294967295, got ""' \
    layout --model "$models/Qwen3-0.6B.config.json" --engine hf --parallel pp_layers=3::4
seconds='expected seconds, more than 0 and at most 86400, got'
refuses "conformance --timeout 0" "wex conformance: --timeout: $seconds \"0\"" \
    conformance shm --timeout 0
refuses "conformance --deadline nan" "wex conformance: --deadline: $seconds \"nan\"" \
    conformance --deadline nan shm
refuses "conformance --timeout 86401" "wex conformance: --timeout: $seconds \"86401\"" \
    conformance shm --timeout 86401
for cmd in plugins validate layout plan run store conformance check; do
    refuses "$cmd --frobnicate" \
        "wex $cmd: unknown option '--frobnicate' (see 'wex $cmd --help')" \
        "$cmd" --frobnicate
done
refuses "conformance -x" "wex conformance: unknown option '-x' (see 'wex conformance --help')" \
    conformance -x shm
refuses "run --steps without a value" "wex run: --steps needs a value (see 'wex run --help')" \
    run "$job" --steps
refuses "store --token without a value" \
    "wex store: --token needs a value (see 'wex store --help')" store --token
refuses "plugins --json=1" "wex plugins: --json takes no value, got '--json=1'" plugins --json=1
refuses "plan with two jobs" "wex plan: one job at a time ('$job')" plan "$job" "$job"
refuses "validate without a job" "wex validate: no job file (see 'wex validate --help')" validate
refuses "check without --model" \
    "wex check: needs a checkpoint directory and --model CONFIG.json (see 'wex check --help')" \
    check "$tmp"
refuses "check with two directories" "wex check: unexpected argument '$tmp' (see 'wex check --help')" \
    check "$tmp" "$tmp" --model x
refuses "check of no checkpoint" \
    "$tmp: neither model.safetensors.index.json nor model.safetensors is there: not a Hugging Face checkpoint" \
    check "$tmp" --model "$models/Qwen3-0.6B.config.json"
refuses "run --shard-bytes -1" "wex run: --shard-bytes: expected an integer from 0 to 9223372036854775807, got \"-1\"" \
    run "$job" --shard-bytes -1
"$wex" check --help >"$tmp/out"; check "check --help" $?
contains "$tmp/out" "one line per"; check "check --help says what it prints" $?
"$wex" run "$job" --steps abc --help >"$tmp/out" 2>&1; check "run --help wins over a bad number" $?
contains "$tmp/out" "usage: wex run"; check "run --help after a bad number shows the usage" $?
# ---- end of the bad numbers and options ---------------------------------

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
