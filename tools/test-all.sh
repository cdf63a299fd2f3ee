#!/usr/bin/env bash
# Builds wex and runs every test: the sources' format (.clang-format),
# the suite (warnings as errors), the
# install + an out-of-tree plugin built against the installed SDK and
# loaded by the installed wex, the Python package installed with pip into
# a fresh venv and its tests, then the suite again under ASan + UBSan,
# then every libFuzzer target for 60 s.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

echo "== the sources follow .clang-format"
bash tools/format.sh --check

echo "== build and test (-Werror)"
cmake -S . -B build -DWEX_WERROR=ON >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
# With the CUDA toolkit, tools/install-deps.sh provides NCCL (its wheel when
# the toolkit has none): the nccl transport must then have been built, so
# its conformance and structure checks above ran.
if [ -d /usr/local/cuda ] && [ ! -f build/lib/wex/plugins/libwex-transport-nccl.so ]; then
    echo "CUDA is here but the nccl transport was not built (docs/gpu.md)"; exit 1
fi

echo "== install, then build the out-of-tree sample plugin against it"
rm -rf install install-sample build-sample
cmake --install build --prefix "$PWD/install" >/dev/null
cmake -S samples/plugins/replicated -B build-sample \
      -DCMAKE_PREFIX_PATH="$PWD/install" >/dev/null
cmake --build build-sample
cmake --install build-sample --prefix "$PWD/install-sample" >/dev/null
listing=$(WEX_PLUGIN_PATH="$PWD/install-sample/lib/wex/plugins" \
          ./install/bin/wex plugins)
echo "$listing"
echo "$listing" | grep -qE '^replicated +engine +1\.0\.0 +1\.0-1\.0 +loaded ' \
    || { echo "the installed wex did not load the out-of-tree plugin"; exit 1; }
pkg-config --with-path="$PWD/install/lib/pkgconfig" --variable=plugindir wex

echo "== the Python package: pip install . into a fresh venv, then its tests"
# --system-site-packages: torch, transformers and pytest come from the
# python3 tools/install-deps.sh set up; the venv gets wex alone, built
# from this tree, with nothing pointing it at the build above.
rm -rf build-venv
python3 -m venv --system-site-packages build-venv
build-venv/bin/python -m pip install -q --disable-pip-version-check \
    --no-build-isolation .
(cd / && env -u WEX_LIBRARY "$OLDPWD/build-venv/bin/python" -c \
    'import wex; print("import wex:", wex.__version__, wex.__file__)')
env -u WEX_LIBRARY build-venv/bin/python -m pytest -q tests/python
echo "== the Python tests that bind transformers models, under transformers 5"
# A second venv: transformers 5 over the same system packages, and the wex
# installed above (build-venv's site-packages, after this venv's own).
rm -rf build-tf5
python3 -m venv --system-site-packages build-tf5
build-tf5/bin/python -m pip install -q --disable-pip-version-check \
    "transformers==5.25.0"
purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
purelib build-venv/bin/python >"$(purelib build-tf5/bin/python)/wex-build-venv.pth"
env -u WEX_LIBRARY build-tf5/bin/python -m pytest -q tests/python/test_families.py \
    tests/python/test_fsdp2.py tests/python/test_modules.py tests/python/test_api.py \
    tests/python/test_resharded.py tests/python/test_fp8.py \
    tests/python/test_checkpoint.py
echo "== the Python package's type hints (mypy --strict)"
python3 -m mypy --strict --cache-dir build-mypy sdk/python/wex

echo "== the suite under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build-asan -DWEX_WERROR=ON -DWEX_SANITIZE=ON \
      -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j "$jobs"
# intercept_tls_get_addr=0: ASan's bookkeeping of dynamic TLS (what
# __tls_get_addr hands out for dlopened libraries) records a bogus block
# in processes using UCX (seen as "DTLS 6 at 0x2a0-0x24000013a2" with
# verbosity=1), and LeakSanitizer's tracer then faults scanning it at
# every exit ("Tracer caught signal 11"); without it LSan does not scan
# dynamic TLS, which holds no allocation of wex's.
ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp" \
    python3 tools/ctest-lsan-retry.py build-asan -j "$jobs"

echo "== fuzz targets (libFuzzer, ASan + UBSan), 60 s each"
bash tools/fuzz.sh 60
echo "all tests passed"
