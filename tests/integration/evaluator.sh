# An evaluator beside the workers evaluates every checkpoint once, and its
# record of the final one matches `meshtrain eval`.
source "$(dirname "$0")/lib.sh"
make_text data.txt 100000
tiny_config job.toml data.txt
"$MESHTRAIN" run job.toml --parallel.evaluators=1 --training.steps=30 --checkpoint.keep=5 > out.txt 2>&1 ||
  { cat out.txt; fail "run with an evaluator"; }
grep -q "^\[evaluator 0\] " out.txt || { cat out.txt; fail "no [evaluator 0] output"; }
python3 - "$WORK/run/eval.jsonl" <<'PY' || { cat out.txt; fail "eval.jsonl"; }
import json, math, sys
records = [json.loads(line) for line in open(sys.argv[1])]
steps = [r["step"] for r in records]
assert steps == [10, 20, 30], steps
for r in records:
    assert math.isfinite(r["val_loss"]) and 0 <= r["val_accuracy"] <= 1, r
PY
OMP_NUM_THREADS=1 "$MESHTRAIN" eval "$WORK/run/checkpoints/step_00000030" --json > eval.json
python3 - "$WORK/run/eval.jsonl" eval.json <<'PY' || fail "the evaluator's final record differs from meshtrain eval"
import json, sys
last = [json.loads(line) for line in open(sys.argv[1])][-1]
ref = json.load(open(sys.argv[2]))
for key in ("step", "val_loss", "val_accuracy", "predictions"):
    assert abs(last[key] - ref[key]) <= 1e-6 * max(1, abs(ref[key])), (key, last[key], ref[key])
PY

# Started by hand after training, it evaluates what is there and exits at the final step.
rm "$WORK/run/eval.jsonl"
rm -r "$WORK/run/.eval_claims"
timeout 20 "$MESHTRAIN" evaluator job.toml --training.steps=30 > alone.txt 2>&1 || { cat alone.txt; fail "evaluator alone"; }
[ "$(wc -l < "$WORK/run/eval.jsonl")" = 3 ] || fail "evaluator alone wrote $(wc -l < "$WORK/run/eval.jsonl") records"
echo "evaluator ok"
