#!/usr/bin/env bash
# Installs what wex needs to build and test on Debian 12 (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config \
    libcjson-dev check libsubunit-dev \
    libucx-dev ucx-utils libxxhash-dev \
    python3 python3-jsonschema iproute2 \
    clang libclang-rt-14-dev >/dev/null
echo "dependencies installed"
