# metrics.tensorboard: the event files worker 0 and an evaluator write are
# read by the PyPI tensorboard package's own reader (which checks every
# CRC), and hold every number of metrics.jsonl / eval.jsonl at its step
# (as float32). A run killed with SIGKILL after a checkpoint and resumed
# shows each step exactly once. One damaged byte fails the reader's CRC check.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/python_tools_lib.sh"
require_python_modules tensorboard
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"

# check_run OUT_DIR: TensorBoard's view of OUT_DIR/tb against the JSONL files.
cat > check.py <<'PY'
import glob, json, math, os, struct, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow

def records(path):
    """Every record of a file through the reader's own framing and CRC checks; raises DataLossError."""
    reader = pywrap_tensorflow.PyRecordReader_New(path.encode())
    out = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return out
        out.append(reader.record())

JOB = {"batch_size", "global_batch", "effective_lr", "workers", "data_parallel", "tensor_parallel",
       "pipeline_parallel", "expert_parallel", "zero_stage"}
MOE = {"aux_loss", "z_loss", "dropped_tokens"}
def trainer_tag(key, run_peaks):  # docs/tensorboard.md
    if key.startswith("val_"): return "val/" + key[4:]
    if key.startswith("peak_"): return ("run/" if run_peaks else "memory/") + key
    if key.startswith("comm_"): return "comm/" + key[5:]
    if key in MOE: return "moe/" + key
    if key in JOB: return "job/" + key
    return "train/" + key
def evaluator_tag(key):
    return "eval/" + (key[4:] if key.startswith("val_") else key)
def numbers(record):
    return {k: v for k, v in record.items()
            if k not in ("step", "rank", "time") and isinstance(v, (int, float)) and not isinstance(v, bool)}
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]

out_dir = sys.argv[1]
want = {}  # (tag, step) -> (value, wall time or None)
for r in map(json.loads, open(os.path.join(out_dir, "metrics.jsonl"))):
    if not isinstance(r.get("step"), int): continue
    for k, v in numbers(r).items():
        key = (trainer_tag(k, "memory" in r), r["step"])
        assert key not in want, ("two records give", key)
        want[key] = (f32(v), r["time"])
eval_path = os.path.join(out_dir, "eval.jsonl")
if os.path.exists(eval_path):
    for r in map(json.loads, open(eval_path)):
        for k, v in numbers(r).items():
            want[(evaluator_tag(k), r["step"])] = (f32(v), None)

files = sorted(glob.glob(os.path.join(out_dir, "tb", "*tfevents*")))
assert files, "no event files"
for f in files:
    recs = records(f)  # the whole file checks
    first = event_pb2.Event.FromString(recs[0])
    assert first.file_version == "brain.Event:2", (f, first)
    for r in recs[1:]:
        e = event_pb2.Event.FromString(r)
        assert e.HasField("summary") and e.step > 0, (f, e)

acc = EventAccumulator(os.path.join(out_dir, "tb"), size_guidance={"scalars": 0})
acc.Reload()
got = {}
for tag in acc.Tags()["scalars"]:
    for ev in acc.Scalars(tag):
        assert (tag, ev.step) not in got, ("step shown twice", tag, ev.step)
        got[(tag, ev.step)] = (ev.value, ev.wall_time)
missing = sorted(set(want) - set(got))
extra = sorted(set(got) - set(want))
assert not missing and not extra, ("missing", missing[:10], "extra", extra[:10])
for key, (value, time) in want.items():
    assert got[key][0] == value or (math.isnan(value) and math.isnan(got[key][0])), (key, got[key][0], value)
    if time is not None: assert got[key][1] == time, (key, got[key][1], time)
steps = sorted(s for t, s in got if t == "train/loss")
tags = sorted({t for t, _ in got})
print(f"{out_dir}: {len(files)} file(s), {len(got)} scalars in {len(tags)} tags equal the JSONL; "
      f"train/loss at steps {steps[0]}..{steps[-1]} ({len(steps)}), once each")
PY
check_run() { OMP_NUM_THREADS=1 "$TOOLS_PYTHON" check.py "$1" || fail "TensorBoard's view of $1"; }

# 1. A whole run, then an evaluator over its checkpoints: both write tb/.
"$MESHTRAIN" train job.toml --metrics.tensorboard=true --training.log_every=2 > train.log 2>&1 ||
  { cat train.log; fail "train"; }
timeout 30 "$MESHTRAIN" evaluator job.toml --metrics.tensorboard=true > evaluator.log 2>&1 ||
  { cat evaluator.log; fail "evaluator"; }
ls "$WORK"/run/tb/events.out.tfevents.*.evaluator > /dev/null || { ls -la "$WORK/run/tb"; fail "no evaluator event file"; }
check_run "$WORK/run"

# 2. Killed with SIGKILL after the checkpoint of step 10, then resumed.
ARGS=(--metrics.tensorboard=true --training.out_dir="$WORK/killed" --training.steps=60 --training.batch_size=16
      --training.log_every=1 --training.eval_every=20 --checkpoint.async=false)
"$MESHTRAIN" train job.toml "${ARGS[@]}" > killed.log 2>&1 &
pid=$!
# grep, not Python: the poll must stay cheap while the run takes a core.
reached_14() { grep -Eqs '"step":(1[4-9]|[2-6][0-9])[,}]' "$WORK/killed/metrics.jsonl"; }
for _ in $(seq 2000); do
  reached_14 && break
  sleep 0.005
done
kill -9 "$pid" 2> /dev/null || true
wait "$pid" 2> /dev/null || true
reached_14 || { cat killed.log; fail "the run did not reach step 14"; }
grep -q '"step":60,' "$WORK/killed/metrics.jsonl" && fail "the run ended before the kill: too fast to test"
killed_at=$(python3 -c "import json,sys; print(max(json.loads(l)['step'] for l in open(sys.argv[1]) if '\"loss\"' in l))" \
  "$WORK/killed/metrics.jsonl")
tb_file=$(ls "$WORK"/killed/tb/events.out.tfevents.*)
# A write cut short by the kill: half a record at the end of the file.
mkdir -p untrimmed/tb && cp "$tb_file" untrimmed/tb/
printf '\x2a\x00\x00\x00\x00\x00\x00\x00\x11' >> "$tb_file"
"$MESHTRAIN" train job.toml "${ARGS[@]}" --resume > resumed.log 2>&1 || { cat resumed.log; fail "resumed run"; }
resumed_from=$(sed -n 's/^resuming from step \([0-9]*\).*/\1/p' resumed.log)
[ -n "$resumed_from" ] || { cat resumed.log; fail "did not resume from a checkpoint"; }
# Steps resumed_from+1 .. killed_at are logged twice in the JSONL history of the run, once in what TensorBoard shows.
echo "killed after step $killed_at, resumed from step $resumed_from"
[ "$killed_at" -gt "$resumed_from" ] || echo "note: the kill landed right after a checkpoint; no step was logged twice"
[ "$(ls "$WORK"/killed/tb/events.out.tfevents.* | wc -l)" = 2 ] || { ls -la "$WORK/killed/tb"; fail "expected the old file and the resumed run's"; }
# TensorBoard reads a run's files in name order; the resumed run's must come last.
[ "$(ls "$WORK"/killed/tb/events.out.tfevents.* | tail -n 1)" != "$tb_file" ] ||
  { ls -la "$WORK/killed/tb"; fail "the resumed run's file sorts before the old one"; }
check_run "$WORK/killed"
# The control: the killed run's file as it was, beside the resumed run's, shows steps twice.
if [ "$killed_at" -gt "$resumed_from" ]; then
  cp "$WORK/killed/metrics.jsonl" untrimmed/
  cp "$(ls -t "$WORK"/killed/tb/events.out.tfevents.* | head -n 1)" untrimmed/tb/
  OMP_NUM_THREADS=1 "$TOOLS_PYTHON" check.py untrimmed > untrimmed.log 2>&1 && fail "the check passes untrimmed files"
  grep -q "step shown twice" untrimmed.log || { cat untrimmed.log; fail "the untrimmed files failed for another reason"; }
fi

# 3. One damaged byte: the official reader's CRC check fails.
mkdir damaged
file=$(ls "$WORK"/run/tb/events.out.tfevents.*[0-9])
cp "$file" damaged/events.out.tfevents.1.damaged
OMP_NUM_THREADS=1 "$TOOLS_PYTHON" - damaged/events.out.tfevents.1.damaged <<'PY' || fail "damaged file"
import sys
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
path = sys.argv[1]
raw = bytearray(open(path, "rb").read())
n = int.from_bytes(raw[:8], "little")
second = 8 + 4 + n + 4                  # the second record: a scalar event
raw[second + 12 + 20] ^= 0x01           # a byte of its data
open(path, "wb").write(raw)
reader = pywrap_tensorflow.PyRecordReader_New(path.encode())
reader.GetNext()                        # the first record still checks
try:
    reader.GetNext()
except errors.DataLossError as e:
    assert "crc" in str(e).lower(), e
    print("damaged byte detected:", e)
else:
    sys.exit("the damaged record passed the CRC check")
PY
echo "tensorboard events ok"
