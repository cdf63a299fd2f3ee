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
grep -qE '^wex [0-9]+\.[0-9]+\.[0-9]+ \(plugin ABI 1\.0\)$' "$tmp/out"; check "--version format" $?
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
"$wex" layout --model "$models/Qwen3-0.6B.config.json" --engine hf --parallel tp=2 2>"$tmp/err"
[ $? -eq 2 ]; check "layout hf refuses tp=2" $?
contains "$tmp/err" "parallel/tp: the hf layout is one unsharded rank"; check "layout tp error text" $?
"$wex" layout --model "$models/Qwen3-0.6B.config.json" --engine nope 2>"$tmp/err"
[ $? -eq 2 ]; check "layout unknown engine exits 2" $?
contains "$tmp/err" "no engine plugin named \"nope\" (available: hf)"; check "layout unknown engine text" $?
"$wex" layout --model "$models/Qwen3-0.6B.config.json" --engine hf --parallel tp=0 2>"$tmp/err"
[ $? -eq 2 ]; check "layout bad parallel exits 2" $?
contains "$tmp/err" "--parallel: /tp: "; check "layout bad parallel names /tp" $?
"$wex" layout --model /nonexistent/config.json --engine hf 2>"$tmp/err"
[ $? -eq 2 ]; check "layout missing model exits 2" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
