#!/usr/bin/env bash
# Builds the libFuzzer targets in tests/fuzz/ (clang, ASan + UBSan) against
# libwex's own sources, then runs each for SECONDS (default 60) from a
# writable copy of its seed corpus. Fails on any crash, leak, timeout,
# out-of-memory or sanitizer report, naming the reproducer.
#
#   bash tools/fuzz.sh [SECONDS] [TARGET...]
#
# Everything goes to build-fuzz/: obj/ (libwex compiled for fuzzing),
# fuzz_<target> binaries, corpus/<target>/ (seeds plus what the fuzzer
# found; kept between runs), artifacts/<target>/ (reproducers) and
# logs/<target>.log. Reproduce a finding with
#   build-fuzz/fuzz_<target> build-fuzz/artifacts/<target>/crash-...
# (for job: WEX_FUZZ_PLUGIN_MANIFESTS=build-fuzz/plugins as well).
# Needs clang and libclang-rt-14-dev (tools/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
[ $# -gt 0 ] && shift
case "$seconds" in
  ''|*[!0-9]*|0) echo "usage: $0 [SECONDS>0] [TARGET...]" >&2; exit 2 ;;
esac
all_targets=(job manifest schema store_proto catalog safetensors plan_share delta)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all_targets[@]}"); fi
for t in "${targets[@]}"; do
  [ -f "tests/fuzz/fuzz_$t.c" ] || { echo "fuzz: no target '$t' (${all_targets[*]})" >&2; exit 2; }
done

CC=${FUZZ_CC:-clang}
out=build-fuzz
jobs=$(nproc 2>/dev/null || echo 2)
command -v "$CC" >/dev/null || { echo "fuzz: $CC not found (run tools/install-deps.sh)" >&2; exit 1; }
pkg-config --exists libcjson libxxhash || { echo "fuzz: cJSON or xxHash not found (run tools/install-deps.sh)" >&2; exit 1; }
mkdir -p "$out/obj" "$out/plugins" "$out/logs"

# --- build ------------------------------------------------------------------
version=$(sed -n 's/^project(wex VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
read -r -a deps <<<"$(pkg-config --cflags --libs libcjson libxxhash)"
cflags=(-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer
        -fsanitize=address,undefined -fno-sanitize-recover=all
        -Wall -Wextra -Isdk/include -Ischemas
        "-DWEX_VERSION_STRING=\"$version\""
        "-DWEX_INSTALL_PLUGINDIR=\"/nonexistent/wex-fuzz/plugins\""
        $(pkg-config --cflags libcjson libxxhash))
# libwex's folders (host/lib/<concept>/), each on the include path as the
# CMake build puts them; the test oracle and the command's tool API are
# not needed.
for dir in host/lib/*/; do
  case "$dir" in host/lib/oracle/ | host/lib/tool/) ;; *) cflags+=("-I${dir%/}") ;; esac
done
# The fingerprint of the host library's sources that plan shares carry,
# generated as host/lib/plan/CMakeLists.txt does.
cmake "-DOUT=$PWD/$out/generated/source_id.h" "-DROOT=$PWD" \
      -P host/lib/plan/source_id.cmake
cflags+=("-I$out/generated")
lib_cflags=("${cflags[@]}" -fsanitize=fuzzer-no-link -fPIC)

# The embedded schemas, generated as host/CMakeLists.txt does.
schema_files=(schemas/manifest.schema.json schemas/job.schema.json
              schemas/layout.schema.json schemas/plan.schema.json
              schemas/run-report.schema.json)
inputs=$(IFS='|'; echo "${schema_files[*]/#/$PWD/}")
cmake "-DOUT=$PWD/$out/schemas_embedded.c" "-DINPUTS=$inputs" \
      -P schemas/embed.cmake

# Rebuild an object when it is missing, older than its source or any
# header, or built with other flags.
echo "${lib_cflags[*]}" >"$out/flags.new"
if ! cmp -s "$out/flags.new" "$out/flags"; then rm -f "$out"/obj/*.o; fi
mv "$out/flags.new" "$out/flags"
headers=(host/lib/*/*.h sdk/include/wex/*.h "$out/generated/source_id.h")
stale() {
  local o=$1 f
  shift
  [ -e "$o" ] || return 0
  for f in "$@" "${headers[@]}"; do [ "$f" -nt "$o" ] && return 0; done
  return 1
}
sources=()
for src in host/lib/*/*.c; do
  case "$src" in host/lib/oracle/* | host/lib/tool/*) ;; *) sources+=("$src") ;; esac
done
sources+=("$out/schemas_embedded.c")
objs=() running=0 pids=()
for src in "${sources[@]}"; do
  o="$out/obj/$(basename "${src%.c}").o"
  objs+=("$o")
  if stale "$o" "$src"; then
    "$CC" "${lib_cflags[@]}" -c "$src" -o "$o" &
    pids+=($!)
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); running=$((running - 1)); fi
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
if stale "$out/libwex-fuzz.a" "${objs[@]}"; then
  rm -f "$out/libwex-fuzz.a"
  ar rcs "$out/libwex-fuzz.a" "${objs[@]}"
fi

for t in "${targets[@]}"; do
  bin="$out/fuzz_$t"
  if stale "$bin" "tests/fuzz/fuzz_$t.c" tests/fuzz/fuzz_util.h "$out/libwex-fuzz.a"; then
    "$CC" "${cflags[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$t.c" \
          "$out/libwex-fuzz.a" "${deps[@]}" -ldl -lm -lpthread -o "$bin"
  fi
done

# The in-tree plugins' manifests, configured as wex_add_plugin() does
# (sdk/cmake/wexPlugin.cmake), for fuzz_job's real registry. Only the
# manifests are read; no library is loaded.
rm -f "$out"/plugins/*.json
for in in plugins/*/*/manifest.json.in; do
  name=$(basename "$(dirname "$in")")
  case "$(basename "$(dirname "$(dirname "$in")")")" in
    engines) kind=engine ;; policies) kind=policy ;; transports) kind=transport ;;
    *) continue ;;
  esac
  sed -e "s/@WEX_PLUGIN_NAME@/$name/" -e "s/@WEX_PLUGIN_KIND@/$kind/" \
      -e "s/@WEX_PLUGIN_LIBRARY@/libwex-$kind-$name.so/" \
      "$in" >"$out/plugins/$kind-$name.json"
done
export WEX_FUZZ_PLUGIN_MANIFESTS="$PWD/$out/plugins"

# --- run --------------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
printf '%-12s %12s %s\n' target executions result
for t in "${targets[@]}"; do
  corpus="$out/corpus/$t" artifacts="$out/artifacts/$t" log="$out/logs/$t.log"
  mkdir -p "$corpus" "$artifacts"
  [ -d "tests/fuzz/corpus/$t" ] && cp -f "tests/fuzz/corpus/$t"/* "$corpus"/
  dict=()
  case "$t" in store_proto | plan_share | delta) ;; *) dict=("-dict=tests/fuzz/json.dict") ;; esac
  rc=0
  "$out/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 \
      -malloc_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" "${dict[@]}" "$corpus" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  if [ "$rc" -ne 0 ] || grep -qE '^==[0-9]+==ERROR|runtime error:|^SUMMARY: (Address|Leak|UndefinedBehavior)Sanitizer|fuzz invariant failed|ERROR: libFuzzer' "$log"; then
    failed=1
    printf '%-12s %12s %s\n' "$t" "${execs:-?}" "FAILED (exit $rc)"
    grep -E 'ERROR|runtime error|SUMMARY|invariant|#[0-9]+ 0x' "$log" | head -n 40 | sed 's/^/    /'
    repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "    reproducer: ${repro:-none written} (full log: $log)"
    [ -n "$repro" ] && echo "    rerun: $out/fuzz_$t $repro"
  else
    printf '%-12s %12s %s\n' "$t" "${execs:-?}" ok
  fi
done
[ "$failed" -eq 0 ] || { echo "fuzz: a target failed" >&2; exit 1; }
echo "fuzz: all targets ran clean for ${seconds}s each"
