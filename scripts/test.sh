#!/usr/bin/env bash
# Builds everything and runs every test: unit and integration tests on the
# Release build, then the unit tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer in build-asan/ (any report fails the run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
scripts/prepare-data.sh

# The Python tools the tests check our output with (PyTorch's torchrun,
# transformers, tokenizers, tensorboard: PyPI, into bench/.venv), fetched
# while the build keeps the cores busy. Where they cannot be installed, the
# tests that need them are skipped with a message.
echo "== Python tools into bench/.venv (beside the build; log: build/setup-venv.log)"
mkdir -p build
bench/setup-venv.sh --no-apt > build/setup-venv.log 2>&1 &
venv_pid=$!

echo "== Release build and all tests"
scripts/build.sh
wait "$venv_pid" || { tail -n 20 build/setup-venv.log; echo "test: the Python tools could not be installed; the tests that need them are skipped"; }
ctest --test-dir build --output-on-failure -j2 --timeout 600

echo "== Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Asan -DMESHTRAIN_SANITIZE=ON >/dev/null
ninja -C build-asan -j2 $(cd build-asan && ninja -t targets all | grep -o '^unit_[a-z]*' | sort -u)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j2 -L unit --timeout 900
