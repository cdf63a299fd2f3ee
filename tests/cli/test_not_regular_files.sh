#!/usr/bin/env bash
# Inputs that are not regular files: a FIFO (no writer ever opens it),
# /dev/zero and a directory, wherever wex opens a file (a job file, a
# model config, a checkpoint shard), are each refused at once in one line
# naming the path and what it is. `timeout 10` makes a wex that waits on
# the FIFO fail here rather than hang.
#   test_not_regular_files.sh WEX MODELS_DIR
set -u
wex=$1 models=$2
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name, text the one error line must contain, wex arguments...
refused() {
    local name=$1 want=$2 rc
    shift 2
    timeout 10 "$wex" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ "$rc" -ne 124 ] && [ "$rc" -ne 0 ] && grep -qF -- "$want" "$tmp/err"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $name (exit $rc, want '$want'):"
        sed 's/^/    /' "$tmp/err"
    fi
}

qwen="$(cd "$models" && pwd)/Qwen3-0.6B.config.json"
mkfifo "$tmp/fifo.json"
refused "validate: the job file a FIFO" "$tmp/fifo.json: not a regular file (a FIFO)" \
    validate "$tmp/fifo.json"
refused "plan: the job file a FIFO" "$tmp/fifo.json: not a regular file (a FIFO)" \
    plan "$tmp/fifo.json"
for model in "$tmp/fifo.json:a FIFO" "/dev/zero:a character device" "$tmp:a directory"; do
    path=${model%%:*} kind=${model#*:}
    cat >"$tmp/job.json" <<JSON
{"model": "$path", "source": {"engine": "hf"}, "destination": {"engine": "hf"},
 "transport": "shm"}
JSON
    refused "plan: the model config $kind" "$path: not a regular file ($kind)" plan "$tmp/job.json"
    refused "check: the model config $kind" "$path: not a regular file ($kind)" \
        check "$tmp" --model "$path"
done
mkdir "$tmp/ck"
mkfifo "$tmp/ck/model.safetensors"
refused "check: the checkpoint's shard a FIFO" \
    "$tmp/ck/model.safetensors: not a regular file (a FIFO)" check "$tmp/ck" --model "$qwen"
mkdir "$tmp/ck2"
mkfifo "$tmp/ck2/model.safetensors.index.json"
refused "check: the checkpoint's index a FIFO" \
    "$tmp/ck2/model.safetensors.index.json: not a regular file (a FIFO)" \
    check "$tmp/ck2" --model "$qwen"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
