#!/usr/bin/env bash
# wex conformance end to end (docs/conformance.md):
#  - every in-tree plugin passes every check that applies to it;
#  - every fake plugin (tests/plugins/fake_plugin.c), every broken plugin
#    (tests/conformance/broken_plugin.c), the bad manifests of tests/data
#    and manifests written here fail exactly the checks they break, so each
#    of C01..C22 is seen failing at least once;
#  - the PLUGIN argument's forms, exit codes, --json, --help.
#   test_conformance.sh WEX PLUGIN_DIR FAKE_DIR MODELS_DIR BROKEN_DIR DATA_DIR
set -u
wex=$1 plugins=$2 fake=$3 models=$4 broken=$5 data=$6
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The policy checks plan with the hf engine: take this build's.
unset WEX_PLUGIN_MANIFESTS
export WEX_PLUGIN_PATH=$plugins
seen_failing=" "

check() { # name, status of the condition
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi
}
contains() { grep -qF -- "$2" "$1"; }

# expect WHAT "Cnn Cnn ..." ARGS...: the kit exits 1 (0 when nothing may
# fail), prints 22 check lines and a summary, and the checks that FAIL are
# exactly the expected ones.
expect() {
    local what=$1 want=$2 rc got want_rc=1 lines
    shift 2
    "$wex" conformance --models "$models" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    got=$(grep -oE '^FAIL C[0-9]+' "$tmp/out" | cut -c6- | tr '\n' ' ' | sed 's/ $//')
    lines=$(grep -cE '^(PASS|FAIL|SKIP) C[0-9][0-9] ' "$tmp/out")
    [ -z "$want" ] && want_rc=0
    if [ "$rc" -eq "$want_rc" ] && [ "$got" = "$want" ] && [ "$lines" -eq 22 ] &&
        grep -qE '^summary: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped: ' "$tmp/out"; then
        pass=$((pass + 1))
        for c in $got; do seen_failing="$seen_failing$c "; done
    else
        fail=$((fail + 1))
        echo "FAIL: $what: exit $rc (want $want_rc), failing [$got] (want [$want]), $lines check lines"
        sed 's/^/    /' "$tmp/out" "$tmp/err"
    fi
}

# ---- every in-tree plugin passes --------------------------------------------
count=0
for m in "$plugins"/*.json; do
    expect "in-tree $(basename "$m")" "" "$m"
    count=$((count + 1))
done
[ "$count" -ge 7 ]; check "found the in-tree plugins ($count manifests in $plugins)" $?

# ---- small conformant plugins written from scratch pass too ------------------
expect "conformant engine" "" "$broken/conf-engine/engine-conf-engine.json"
expect "conformant policy" "" "$broken/conf-policy/policy-conf-policy.json"
expect "conformant transport" "" "$broken/conf-transport/transport-conf-transport.json"
expect "conformant transport with connect" "" "$broken/conf-connect/transport-conf-connect.json" --verbose
grep -q "^PASS C19 .*both ends connected; 67 puts" "$tmp/out"
check "C19 connects both ends of a transport with connect" $?
# no directory for the stand-in rendezvous: C19 fails saying so, but only
# for a transport that has connect
TMPDIR=/nonexistent expect "connect, TMPDIR missing" "C19" "$broken/conf-connect/transport-conf-connect.json"
contains "$tmp/out" "kit: a directory for connect's rendezvous in /nonexistent/wex-conformance-"
check "C19 says the kit could not make connect's rendezvous" $?
TMPDIR=/nonexistent expect "no connect, TMPDIR missing" "" "$broken/conf-transport/transport-conf-transport.json"

# ---- the loader's fake plugins ----------------------------------------------
f() { echo "$fake/$1/$2-fake-$1.json"; }
expect "fake refuse" "C05 C08 C13" "$(f refuse engine)"
expect "fake out-of-range" "C05 C08 C09 C13" "$(f out-of-range engine)"
expect "fake abi-disjoint" "C05 C08 C13" "$(f abi-disjoint engine)"
expect "fake no-entry" "C03 C05 C06 C07 C08 C13" "$(f no-entry engine)"
expect "fake kind-mismatch" "C10 C13" "$(f kind-mismatch engine)"
expect "fake name-mismatch" "C10 C13" "$(f name-mismatch engine)"
expect "fake init-fails" "C13" "$(f init-fails engine)"
expect "fake small-desc" "C09 C13" "$(f small-desc engine)"
expect "fake borrowed-entry" "C03 C10 C13" "$(f borrowed-entry engine)"
# loads fine, but as an engine it holds nothing of the model
expect "fake good" "C15" "$(f good engine)"
# ABI 1.0's exact table sizes, and tables larger than this host knows
expect "fake min-tables" "C15" "$(f min-tables engine)"
expect "fake big-tables" "C15" "$(f big-tables engine)"
expect "fake short-ops" "C11 C13" "$(f short-ops engine)"
# an engine's ops table behind a policy: plans nothing
expect "fake policy" "C17 C22" "$(f policy policy)"
# an engine's ops table behind a transport: too small
expect "fake transport" "C11 C13" "$(f transport transport)"

"$wex" conformance --models "$models" "$(f init-fails engine)" >"$tmp/out" 2>&1
contains "$tmp/out" "init failed (system error): cannot reach the license server"
check "init failure shows the plugin's own message" $?

# ---- broken plugins: one rule each ------------------------------------------
b() { echo "$broken/$1/$2-$1.json"; }
expect "broken extra-export" "C03" "$(b extra-export engine)"
expect "broken undefined-host" "C04" "$(b undefined-host engine)"
contains "$tmp/out" "resolved by no library it depends on, only by the process that loads it: wex_last_error"
check "C04 names the undefined symbol" $?
expect "broken links-libwex" "C04" "$(b links-libwex engine)"
contains "$tmp/out" "DT_NEEDED libwex.so"; check "C04 names the libwex dependency" $?
expect "broken accept-any-abi" "C06 C07" "$(b accept-any-abi engine)"
expect "broken null-op" "C11 C14" "$(b null-op engine)"
contains "$tmp/out" "died of signal 11"; check "a crashing plugin fails its check, not the kit" $?
expect "broken fresh-desc" "C12" "$(b fresh-desc engine)"
expect "broken unstable" "C14" "$(b unstable engine)"
expect "broken gap" "C15" "$(b gap engine)"
contains "$tmp/out" "first model.norm.weight: 1024 of its 1024 elements are in no piece"
check "C15 names the uncovered tensor" $?
expect "broken accept-any-tp" "C16" "$(b accept-any-tp engine)"
expect "broken prints" "C21" "$(b prints engine)"
contains "$tmp/out" "broken plugin: initialised"; check "C21 quotes what was printed" $?
expect "broken twice" "C17 C22" "$(b twice policy)"
contains "$tmp/out" "written more than once"; check "C17 says what is wrong" $?
expect "broken asymmetric" "C18 C22" "$(b asymmetric policy)"
expect "broken ignores-dead" "C22" "$(b ignores-dead policy)"
contains "$tmp/out" "cannot fail over: it planned an operation from dead source rank 0"
check "C22 says the policy planned from the dead" $?
expect "broken drop" "C19" "$(b drop transport)"
expect "broken bad-name" "C19" "$(b bad-name transport)"
contains "$tmp/out" 'destination connect: publish: the name "greeting/0" is not 1-64 characters of [A-Za-z0-9_.-]'
check "C19 holds connect's names to the host's rule, and says so" $?
start=$SECONDS
expect "broken hang" "C20" "$(b hang transport)" --deadline 2
contains "$tmp/out" "did not return within 2 s"; check "a hang becomes a FAIL with a reason" $?
[ $((SECONDS - start)) -lt 60 ]; check "the hang is cut short ($((SECONDS - start)) s)" $?

# ---- manifests -----------------------------------------------------------------
for m in "$data"/manifests/bad/*.json; do
    expect "bad manifest $(basename "$m")" "C01" "$m"
done
expect "missing library" "C01 C02" "$data/manifests/missing-library/missing-library.json"
expect "not an ELF file" "C02 C03 C04 C05 C06 C07 C08 C13" "$data/manifests/not-elf/not-elf.json"

# options_schema variants around the conformant engine's library
lib=$(cd "$broken/conf-engine" && pwd)/libwex-engine-conf-engine.so
manifest() { # file, options_schema member (with its leading comma) or ""
    cat >"$1" <<JSON
{"file_format_version": "1.0.0", "name": "conf-engine", "kind": "engine",
 "library_path": "$lib", "abi": {"min": "1.0", "max": "1.0"},
 "version": "0.0.1", "capabilities": ["tp"]$2}
JSON
}
manifest "$tmp/none.json" ""
expect "no options_schema" "C02" "$tmp/none.json"
manifest "$tmp/boolean.json" ', "options_schema": true'
expect "boolean options_schema" "C02" "$tmp/boolean.json"
manifest "$tmp/string.json" ', "options_schema": {"type": "string"}'
expect "options_schema for strings" "C02" "$tmp/string.json"
manifest "$tmp/malformed.json" ', "options_schema": {"type": "object", "properties": {"depth": {"type": "integr"}}}'
expect "malformed options_schema" "C02" "$tmp/malformed.json"
manifest "$tmp/default.json" ', "options_schema": {"type": "object", "properties": {"depth": {"type": "integer", "minimum": 1, "default": 0}}}'
expect "options_schema with a bad default" "C02" "$tmp/default.json"
contains "$tmp/out" "/options_schema/properties/depth/default"; check "C02 names the bad default" $?
manifest "$tmp/required.json" ', "options_schema": {"type": "object", "required": ["x"], "properties": {"x": {"type": "integer"}}}'
expect "options_schema that refuses {}" "" "$tmp/required.json"

# ---- every check is seen failing --------------------------------------------
for n in $(seq -w 1 22); do
    case "$seen_failing" in
    *" C$n "*) ;;
    *) fail=$((fail + 1)); echo "FAIL: no plugin made C$n fail" ;;
    esac
done

# ---- the PLUGIN argument, options and exit codes ------------------------------
expect "a library with its manifest beside it" "" "$broken/conf-engine/libwex-engine-conf-engine.so"
WEX_PLUGIN_PATH="$broken/gap:$plugins" expect "a name on the search path" "C15" gap
WEX_PLUGIN_PATH="$broken/gap:$plugins" expect "KIND/NAME" "C15" engine/gap
expect "an in-tree plugin by name" "" shm

"$wex" conformance >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "no PLUGIN exits 2" $?
"$wex" conformance no-such-plugin >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "unknown name exits 2" $?
contains "$tmp/err" "no plugin named 'no-such-plugin' on the search path"; check "unknown name explained" $?
"$wex" conformance "$tmp/missing.json" >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "missing manifest exits 2" $?
"$wex" conformance "$tmp" >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "a directory exits 2" $?
"$wex" conformance "$lib" --frobnicate >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "unknown option exits 2" $?
"$wex" conformance "$lib" --options '[1]' >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "--options must be an object" $?
"$wex" conformance --models "$models" "$lib" --options '{"bogus": 1}' >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "--options are validated" $?
contains "$tmp/err" 'unknown property "bogus"'; check "--options error names the member" $?
"$wex" conformance "$lib" --models "$tmp" >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "no model exits 2" $?
contains "$tmp/err" "Qwen3-0.6B.config.json"; check "no model explained" $?
"$wex" conformance "$lib" --timeout 0 >"$tmp/out" 2>"$tmp/err"; [ $? -eq 2 ]; check "--timeout 0 exits 2" $?

"$wex" conformance --help >"$tmp/out"; check "--help exits 0" $?
for n in $(seq -w 1 22); do
    grep -qE "^  C$n " "$tmp/out" || { fail=$((fail + 1)); echo "FAIL: --help does not explain C$n"; }
done
"$wex" --help | grep -qE '^  conformance +'; check "wex --help lists conformance" $?

"$wex" conformance --json --models "$models" "$(f refuse engine)" >"$tmp/json"
[ $? -eq 1 ]; check "--json exits 1 on failures" $?
/usr/bin/python3 - "$tmp/json" <<'PY'; check "--json content" $?
import json, sys
d = json.load(open(sys.argv[1]))
assert d["plugin"]["name"] == "fake-refuse" and d["plugin"]["kind"] == "engine", d["plugin"]
ids = [c["id"] for c in d["checks"]]
assert ids == ["C%02d" % i for i in range(1, 23)], ids
failed = [c["id"] for c in d["checks"] if c["status"] == "fail"]
assert failed == ["C05", "C08", "C13"], failed
assert all(c["status"] in ("pass", "fail", "skip") and c["title"] and c["rule"] for c in d["checks"])
assert (d["passed"], d["failed"], d["skipped"], d["conformant"]) == (7, 3, 12, False), d
PY
"$wex" conformance --json --models "$models" "$plugins/transport-shm.json" >"$tmp/json"
[ $? -eq 0 ]; check "--json exits 0 when conformant" $?
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["conformant"] and d["failed"] == 0' "$tmp/json"
check "--json conformant" $?

echo "conformance: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
