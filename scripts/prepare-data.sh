#!/usr/bin/env bash
# Writes data/kjv.txt, the default text corpus: the King James Bible as plain
# ASCII, one verse per line ("Ge1:1 In the beginning God created ..."), about
# 4.4 MB. Debian's bible-kjv-text stores the text in a compressed random-access
# format (/usr/lib/bible.data) that only the `bible` program of bible-kjv reads,
# so we dump it with that program once. Safe to run again: a non-empty
# data/kjv.txt is left alone.
#
# Fashion-MNIST needs no preparation: the loader reads Debian's gzipped IDX
# files in /usr/share/datasets/fashion-mnist directly.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/data/kjv.txt"

if [ -s "$out" ]; then
  echo "prepare-data: $out already present ($(wc -c < "$out") bytes)"
  exit 0
fi

if ! command -v bible > /dev/null 2>&1 || [ ! -r /usr/lib/bible.data ]; then
  echo "prepare-data: the King James Bible is not installed (Debian packages bible-kjv and" >&2
  echo "bible-kjv-text); run scripts/install-deps.sh first" >&2
  exit 1
fi

mkdir -p "$root/data"
tmp="$(mktemp "$root/data/kjv.txt.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
# -f turns pretty-printing OFF (it is on by default): no headings, no line
# wrapping, one verse per line. stdin from /dev/null so bible never waits for
# interactive commands. Run from / so a stray bible.data in the current
# directory (bible searches there first) cannot be picked up.
(cd / && bible -f "Gen1:1-Rev22:21" < /dev/null) > "$tmp"

bytes="$(wc -c < "$tmp")"
if [ "$bytes" -lt 4000000 ]; then
  echo "prepare-data: bible printed only $bytes bytes, expected about 4.4 MB" >&2
  exit 1
fi
# Rename last, so an interrupted run never leaves a partial data/kjv.txt behind
# that the next run would mistake for a finished one.
chmod 644 "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "prepare-data: wrote $out ($bytes bytes)"
