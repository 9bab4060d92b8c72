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

# wait_ranks WHAT PID...: waits for every rank started in the background;
# when any failed, shows the end of every rank*.log and fails with WHAT.
wait_ranks() {
  local what="$1" pid status=0
  shift
  for pid in "$@"; do wait "$pid" || status=1; done
  [ $status -eq 0 ] || { tail -n 20 rank*.log; fail "$what"; }
}

# Runs a command that must fail; checks the exit code and that stderr holds $1.
expect_failure() {
  local pattern="$1"; shift
  local err="$WORK/stderr.txt"
  if "$@" > /dev/null 2> "$err"; then fail "expected failure: $*"; fi
  grep -q -- "$pattern" "$err" || { cat "$err" >&2; fail "stderr lacks '$pattern' for: $*"; }
}

# Asserts two model.safetensors files hold the same parameters within a
# relative tolerance: ||a - b|| / ||a|| over all parameters (2-norms). Prints
# the worst single tensor as well, for information: element-wise or
# per-tensor ratios would fail on parameters whose exact gradient is zero,
# such as attention's key bias (softmax ignores a shift of the keys), where
# AdamW turns rounding noise into full-size steps in any two runs that sum
# in a different order.
compare_params() {
  python3 - "$1" "$2" "$3" <<'PY'
import array, json, struct, sys
def load(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n]); header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", (name, t["dtype"])
        a, b = t["data_offsets"]
        out[name] = array.array("f", raw[8 + n + a:8 + n + b])
    return out
x, y, rtol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert x.keys() == y.keys(), "tensor names differ"
sq = lambda v: sum(e * e for e in v)
diff = {k: sq([p - q for p, q in zip(x[k], y[k])]) for k in x}
total = (sum(diff.values()) / sum(sq(x[k]) for k in x)) ** 0.5
worst = max(((diff[k] / max(sq(x[k]), 1e-30)) ** 0.5, k) for k in x)
print(f"parameters: relative difference {total:.3g} (tolerance {rtol}); worst tensor {worst[1]} {worst[0]:.3g}")
sys.exit(0 if total <= rtol else 1)
PY
}

# The parameters of checkpoint directory $1 (a step_* directory) in one
# safetensors file: its model.safetensors, or its shards consolidated (a
# job of several workers writes shards).
params_file() {
  if [ -f "$1/model.safetensors" ]; then echo "$1/model.safetensors"; return; fi
  local out
  out="$WORK/consolidated-$(echo "$1" | md5sum | cut -c1-12).safetensors"
  "$MESHTRAIN" consolidate "$1" "$out" > /dev/null || fail "consolidate $1"
  echo "$out"
}

# Asserts two metrics.jsonl files have the same steps and, at each, losses
# (or FIELD, e.g. grad_norm) within a relative tolerance.
compare_losses() {
  python3 - "$1" "$2" "$3" "${4:-loss}" <<'PY'
import json, sys
field = sys.argv[4]
def values(p):
    return {r["step"]: r[field] for r in map(json.loads, open(p)) if field in r}
a, b, rtol = values(sys.argv[1]), values(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
worst = max((abs(a[s] - b[s]) / abs(a[s]), s) for s in a)
print(f"{field}: {len(a)} steps, worst relative difference {worst[0]:.3g} at step {worst[1]} (tolerance {rtol})")
sys.exit(0 if worst[0] <= rtol else 1)
PY
}

# Asserts metrics.jsonl $1 of a ZeRO stage $2 job reports its communication
# at every step: comm_ms (all above 0), comm_exposed_ms, comm_hidden_share
# within [0, 1], some step with exposed time (host-staged waits block the
# host, so any wait the report holds shows; a hidden share stuck at 1 is a
# report that holds none); stage 3 also comm_gathers_on_demand, 0 from step
# 2 on (the prefetch follows the first step's order).
expect_zero_overlap_report() {
  python3 - "$1" "$2" <<'PY'
import json, sys
stage = int(sys.argv[2])
steps = [r for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
assert steps, "no step records"
for r in steps:
    where = f"step {r['step']}"
    assert r["comm_ms"] > 0, (where, "comm_ms", r.get("comm_ms"))
    assert r["comm_exposed_ms"] >= 0, (where, "comm_exposed_ms")
    assert 0 <= r["comm_hidden_share"] <= 1, (where, "comm_hidden_share", r["comm_hidden_share"])
    if stage < 3:
        assert "comm_gathers_on_demand" not in r, where
    elif r["step"] >= 2:
        assert r["comm_gathers_on_demand"] == 0, (where, "gathers on demand", r["comm_gathers_on_demand"])
assert any(r["comm_exposed_ms"] > 0 and r["comm_hidden_share"] < 1 for r in steps), "no step waited for communication"
on_demand = [r.get("comm_gathers_on_demand") for r in steps[:3]]
print(f"overlap report: {len(steps)} steps, comm_ms {steps[-1]['comm_ms']:.3g}, "
      f"hidden {steps[-1]['comm_hidden_share']:.2f}, gathers on demand (first steps) {on_demand}")
PY
}
