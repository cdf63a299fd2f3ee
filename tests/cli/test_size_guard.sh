#!/usr/bin/env bash
# The size guard (docs/limits.md): a job of dp=65536, or
# a model config of 200,000 layers, is refused from the config before
# anything is laid out, by wex validate, wex plan and wex_job_open alike, in well under
# 10 s and 1 GB of address space, naming the file, the field and the limit.
#   test_size_guard.sh WEX SAMPLES_DIR LIBWEX
set -u
wex=$1 samples=$(cd "$2" && pwd) libwex=$3
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset WEX_PLUGIN_MANIFESTS
# A sanitized build reserves terabytes of shadow address space, so the
# 1 GB address-space bound applies to plain builds only (the 10 s bound
# holds for both), and Python cannot load a sanitized libwex unpreloaded.
sanitized=0
grep -q __asan_init "$wex" && sanitized=1
as_limit() { [ "$sanitized" -eq 1 ] || ulimit -v 1048576; }

check() { # name, condition already evaluated as $?
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi
}

/usr/bin/python3 - "$samples/jobs/qwen3-0.6b-megatron-to-vllm-colocated.json" \
    "$samples/models/Qwen3-0.6B.config.json" "$tmp" <<'PY'
import json, sys
job, model, tmp = sys.argv[1:]
j = json.load(open(job))
j["model"] = model
j["topology"] = {"placement": "colocated", "gpus_per_host": 8}
j["destination"]["parallel"] = {"tp": 1, "dp": 65536}
json.dump(j, open(tmp + "/dp65536.json", "w"))
m = json.load(open(model))
m["num_hidden_layers"] = 200000
json.dump(m, open(tmp + "/layers200000.config.json", "w"))
j["model"] = tmp + "/layers200000.config.json"
j["destination"]["parallel"] = {"tp": 2, "dp": 2}
j["source"]["parallel"] = {"tp": 2, "pp": 2}
json.dump(j, open(tmp + "/layers200000.json", "w"))
PY

# guarded COMMAND NAME MESSAGE
guarded() {
    ( as_limit; exec timeout 10 "$wex" "$1" "$tmp/$2.json" ) >/dev/null 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq 2 ]; check "$1 $2 refused at once with exit 2 (got $rc)" $?
    [ "$(wc -l <"$tmp/err")" -eq 1 ]; check "$1 $2: one line" $?
    grep -qF -- "$tmp/$2.json: $3" "$tmp/err" || { cat "$tmp/err"; false; }
    check "$1 $2 says: $3" $?
}

for cmd in validate plan; do
    guarded "$cmd" dp65536 "/destination/parallel: expected at most 32768 ranks a side (docs/limits.md), got 65536"
    guarded "$cmd" layers200000 "/model: $tmp/layers200000.config.json: /num_hidden_layers: expected at most 32768 layers of 0 experts (a catalog of at most 1048576 tensors, docs/limits.md), got 200000"
done

# wex_job_open (the C API every rank calls) hits the same guard.
for name in dp65536 layers200000; do
    [ "$sanitized" -eq 0 ] || { echo "wex_job_open $name: not through Python in a sanitized build (the CLI above ran the same guard)"; continue; }
    ( as_limit; exec timeout 10 /usr/bin/python3 - "$libwex" "$tmp/$name.json" ) \
        >"$tmp/err" 2>&1 <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.wex_last_error.restype = ctypes.c_char_p
job = ctypes.c_void_p()
st = lib.wex_job_open(sys.argv[2].encode(), 1, ctypes.c_uint64(0), None, ctypes.byref(job))
print(st, lib.wex_last_error().decode())
sys.exit(0 if st < 0 else 1)
PY
    check "wex_job_open $name refused at once" $?
    grep -qF "docs/limits.md" "$tmp/err" || { cat "$tmp/err"; false; }
    check "wex_job_open $name names the limit" $?
done

# The real models of samples/ stay well inside the bounds.
for job in "$samples"/jobs/*.json; do
    "$wex" validate "$job" >/dev/null; check "validate $(basename "$job") within the limits" $?
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
