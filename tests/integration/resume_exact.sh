# Exact resume: 20 steps straight and 10 steps, stop, resume for 10 more give
# bitwise-identical parameters and optimizer state.
source "$(dirname "$0")/lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"

"$MESHTRAIN" train job.toml --training.out_dir="$WORK/straight" > straight.log 2>&1 || { cat straight.log; fail "straight run"; }
"$MESHTRAIN" train job.toml --training.out_dir="$WORK/split" --stop-at-step 10 > first.log 2>&1 || { cat first.log; fail "first half"; }
[ -d "$WORK/split/checkpoints/step_00000010" ] || fail "no checkpoint at the stop"
[ ! -d "$WORK/split/checkpoints/step_00000020" ] || fail "the first half ran too far"
"$MESHTRAIN" train job.toml --training.out_dir="$WORK/split" --resume > second.log 2>&1 || { cat second.log; fail "resumed run"; }
grep -q "resuming from step 10" second.log || { cat second.log; fail "did not say it resumed"; }

cmp "$WORK/straight/checkpoints/step_00000020/model.safetensors" "$WORK/split/checkpoints/step_00000020/model.safetensors" ||
  fail "parameters differ between the straight and the resumed run"
# The optimizer state too; its metadata names the run's own out_dir, so
# compare the tensor bytes and the metadata other than the config.
python3 - "$WORK/straight/checkpoints/step_00000020/train_state.safetensors" \
          "$WORK/split/checkpoints/step_00000020/train_state.safetensors" <<'PY'
import json, struct, sys
def load(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__")
    meta.pop("config")
    return header, meta, raw[8 + n:]
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a[0] == b[0], "tensor layout differs"
assert a[1] == b[1], (a[1], b[1])
assert a[2] == b[2], "optimizer state differs"
print("optimizer state equal:", a[1])
PY
# The loss of each step after the resume matches too.
python3 - "$WORK/straight/metrics.jsonl" "$WORK/split/metrics.jsonl" <<'PY'
import json, sys
def losses(p):
    return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert a == b, (a, b)
print("per-step losses equal:", sorted(a.items())[-1])
PY
# Resuming a finished run does nothing harmful and says so.
"$MESHTRAIN" train job.toml --training.out_dir="$WORK/split" --resume > third.log 2>&1 || { cat third.log; fail "resume of a finished run"; }
grep -q "already finished" third.log || { cat third.log; fail "no 'already finished' message"; }
cmp "$WORK/straight/checkpoints/step_00000020/model.safetensors" "$WORK/split/checkpoints/step_00000020/model.safetensors"
echo "resume exact"
