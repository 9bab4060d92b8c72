#!/usr/bin/env bash
# Configures and builds meshtrain in build/ (Release). Extra arguments go to
# CMake, e.g. scripts/build.sh -DMESHTRAIN_NATIVE=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C build -j2
