#!/usr/bin/env bash
# Host access to device memory is a compile error: the probe file compiles
# as written, and each of its host accesses (indexing, dereferencing, a span,
# data(), a raw pointer by conversion) fails to compile for that reason.
# usage: device_buffer_no_host_access.sh CXX SOURCE_DIR
set -u
cxx=$1 src=$2
file=$(dirname "$0")/device_buffer_no_host_access.cpp
compile() { LC_ALL=C "$cxx" -std=c++20 -fsyntax-only -I"$src" -DPROBE="$1" "$file" 2>&1; }

passed=0 failed=0
if out=$(compile 0); then passed=$((passed + 1)); else
  echo "FAIL: the probe without host access does not compile:"; echo "$out"; failed=$((failed + 1))
fi
expect=(
  [1]="no match for 'operator\[\]'"
  [2]="no match for 'operator\*'"
  [3]="no match for 'operator\[\]'"
  [4]="no matching function for call to 'std::span<float"
  [5]="has no member named 'data'"
  [6]="cannot convert"
)
for probe in 1 2 3 4 5 6; do
  if out=$(compile "$probe"); then
    echo "FAIL: probe $probe compiled: host access to device memory must not"; failed=$((failed + 1))
  elif ! grep -q -- "${expect[$probe]}" <<<"$out"; then
    echo "FAIL: probe $probe failed to compile, but not with \"${expect[$probe]}\":"; echo "$out" | head -5
    failed=$((failed + 1))
  else
    echo "ok: probe $probe is a compile error (${expect[$probe]})"; passed=$((passed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
