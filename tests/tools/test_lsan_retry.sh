#!/usr/bin/env bash
# tools/ctest-lsan-retry.py against a throwaway ctest project whose tests
# print what a LeakSanitizer tracer crash, a leak report or an assertion
# failure prints: only a lone tracer crash is rerun, once.
#   test_lsan_retry.sh RETRY_SCRIPT CMAKE
set -u
retry=$1 cmake=$2
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PATH="$(dirname "$cmake"):$PATH"

check() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }

crash='echo "Tracer caught signal 11: addr=0x148 pc=0x1 sp=0x2"; echo "==1==LeakSanitizer has encountered a fatal error."'
# project NAME BODY: one test running BODY with $MARK a file the test may
# create to remember it ran before.
project() {
    mkdir -p "$tmp/$1"
    cat >"$tmp/$1/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.20)
project(t NONE)
enable_testing()
add_test(NAME ok COMMAND sh -c "echo fine")
add_test(NAME t COMMAND sh -c [=[MARK=$tmp/$1/ran; $2]=])
CM
    "$cmake" -S "$tmp/$1" -B "$tmp/$1/b" >/dev/null
}

project once "if [ -f \$MARK ]; then echo passed; else touch \$MARK; $crash; exit 1; fi"
python3 "$retry" "$tmp/once/b" >"$tmp/out" 2>&1; check "a lone tracer crash is rerun and passes" $?
grep -q "rerunning once" "$tmp/out"; check "the rerun is said" $?

project leak "if [ -f \$MARK ]; then echo passed; else touch \$MARK; $crash; echo 'ERROR: LeakSanitizer: detected memory leaks'; exit 1; fi"
python3 "$retry" "$tmp/leak/b" >"$tmp/out" 2>&1; [ $? -ne 0 ]; check "a crash with a leak report fails" $?
grep -q "failed for real: t" "$tmp/out"; check "the leak is named a real failure" $?

project twice "$crash; exit 1"
python3 "$retry" "$tmp/twice/b" >"$tmp/out" 2>&1; [ $? -ne 0 ]; check "a second crash fails" $?

project plain "if [ -f \$MARK ]; then echo passed; else touch \$MARK; echo 'assertion failed'; exit 1; fi"
python3 "$retry" "$tmp/plain/b" >"$tmp/out" 2>&1; [ $? -ne 0 ]; check "a plain failure is not rerun" $?
! grep -q "rerunning once" "$tmp/out"; check "a plain failure says no rerun" $?

echo "lsan retry: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -eq 7 ]
