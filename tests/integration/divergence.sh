# Divergence and skipped steps:
#  1. a run whose loss becomes NaN (SGD at lr 10, no clipping) stops with
#     status 5 naming the step, the workers and the first non-finite
#     gradient, and `meshtrain run` does not restart it (max_restarts 3);
#  2. training.skip_steps leaves the named steps out (recorded in the metrics);
#  3. training.spike_sigma skips spikes, and a run stopped and resumed in the
#     middle ends bitwise where the uninterrupted one does (the spike window
#     travels in the checkpoint).
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
chaos_job

rc=0
"$MESHTRAIN" run job.toml --nproc 2 --parallel.data=allreduce --parallel.max_restarts=3 --training.steps=30 \
  --schedule.warmup_steps=0 --optimizer.name=sgd --optimizer.lr=10 --optimizer.grad_clip=0 \
  --optimizer.weight_decay=0 --training.out_dir="$WORK/nan" > nan.txt 2>&1 || rc=$?
[ "$rc" -eq 5 ] || { cat nan.txt; fail "a diverged run exited with status $rc, expected 5"; }
grep -q "step [0-9]* diverged: loss .*nan.*the loss was not finite on worker(s) 0 (micro-batch 0), 1 (micro-batch 0); first non-finite gradient here (worker [01]): [a-z_.0-9]*weight" nan.txt ||
  { cat nan.txt; fail "the divergence is not named"; }
grep -q "the training diverged: not restarted" nan.txt || { cat nan.txt; fail "no 'not restarted'"; }
! grep -q "restarting the whole job" nan.txt || { cat nan.txt; fail "a diverged job was restarted"; }
echo "diverged: status 5, named, not restarted"

BASE=(--training.steps=16 --training.log_every=1 --training.eval_every=0 --checkpoint.every=0)
"$MESHTRAIN" train job.toml "${BASE[@]}" --training.skip_steps="3-4, 9" --training.out_dir="$WORK/skip" \
  > skip.txt 2>&1 || { cat skip.txt; fail "skip_steps run"; }
python3 - "$WORK/skip/metrics.jsonl" <<'PY' || fail "skip_steps metrics"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l and '"lr"' in l]
skipped = [r["step"] for r in recs if r.get("skipped") == "skip_steps"]
assert skipped == [3, 4, 9], skipped
assert all("loss" not in r for r in recs if r["step"] in (3, 4, 9))
assert recs[-1]["skipped_steps"] == 3, recs[-1]
print("skip_steps: steps 3, 4 and 9 left out")
PY

# A tight sigma over a short window so that this short run has spikes.
SPIKE=("${BASE[@]}" --training.steps=30 --training.spike_sigma=0.5 --training.spike_window=4 --checkpoint.every=5)
"$MESHTRAIN" train job.toml "${SPIKE[@]}" --training.out_dir="$WORK/spike" > spike.txt 2>&1 ||
  { cat spike.txt; fail "spike run"; }
spikes=$(grep -c "update skipped: .* is a spike" spike.txt || true)
[ "$spikes" -ge 1 ] || { cat spike.txt; fail "no spike was skipped"; }
"$MESHTRAIN" train job.toml "${SPIKE[@]}" --training.out_dir="$WORK/spike2" --stop-at-step=15 > spike2.txt 2>&1 ||
  { cat spike2.txt; fail "spike run to step 15"; }
"$MESHTRAIN" train job.toml "${SPIKE[@]}" --training.out_dir="$WORK/spike2" --resume > spike3.txt 2>&1 ||
  { cat spike3.txt; fail "spike run resumed"; }
cmp -s "$WORK/spike/checkpoints/step_00000030/model.safetensors" "$WORK/spike2/checkpoints/step_00000030/model.safetensors" ||
  fail "the resumed spike-skipping run differs from the uninterrupted one"
python3 - "$WORK/spike/metrics.jsonl" "$WORK/spike2/metrics.jsonl" <<'PY' || fail "spike metrics"
import json, sys
def skipped(path):
    return [r["step"] for r in map(json.loads, open(path)) if r.get("skipped") == "spike"]
a, b = skipped(sys.argv[1]), skipped(sys.argv[2])
assert a == b and a, (a, b)
print("spikes skipped at steps", a, "in both runs")
PY
echo "divergence: all cases pass"
