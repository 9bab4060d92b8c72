# Shared helpers for integration tests; sourced, not run.
set -euo pipefail
MESHTRAIN="$1"
SRC="$2"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-test.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

fail() { echo "FAIL: $*" >&2; exit 1; }

# Writes a small deterministic English-like text file for tests that need
# data but not the real corpus: the first N bytes of the Bible when it is
# prepared, otherwise generated sentences.
make_text() {
  local out="$1" bytes="${2:-200000}"
  if [ -s "$SRC/data/kjv.txt" ]; then
    head -c "$bytes" "$SRC/data/kjv.txt" > "$out"
  else
    python3 -c "
import random
r = random.Random(7)
words = 'and the lord said unto him behold i will make thee a great nation in the land of egypt'.split()
s = []
n = 0
while n < $bytes:
    line = ' '.join(r.choice(words) for _ in range(12)) + '.\n'
    s.append(line); n += len(line)
open('$out', 'w').write(''.join(s)[:$bytes])
"
  fi
}

# A tiny GPT config over the given text file.
tiny_config() {
  cat > "$1" <<TOML
[model]
kind = "gpt"
n_layer = 2
n_embd = 32
n_head = 2
block_size = 32
[data]
path = "$2"
val_fraction = 0.1
[training]
batch_size = 4
steps = 20
log_every = 5
eval_every = 10
eval_batches = 2
threads = 1
out_dir = "$WORK/run"
[optimizer]
name = "adamw"
lr = 1e-3
[schedule]
warmup_steps = 5
[checkpoint]
every = 10
keep = 2
TOML
}

# Runs a command that must fail; checks the exit code and that stderr holds $1.
expect_failure() {
  local pattern="$1"; shift
  local err="$WORK/stderr.txt"
  if "$@" > /dev/null 2> "$err"; then fail "expected failure: $*"; fi
  grep -q -- "$pattern" "$err" || { cat "$err" >&2; fail "stderr lacks '$pattern' for: $*"; }
}
