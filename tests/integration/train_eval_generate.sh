# Trains a tiny GPT end to end through the CLI, then evaluates and samples
# from its checkpoint. Checks the metrics file and the checkpoint layout.
source "$(dirname "$0")/lib.sh"
make_text text.txt 300000
tiny_config job.toml "$WORK/text.txt"

"$MESHTRAIN" train job.toml --training.steps=40 --optimizer.lr=3e-3 > train.log 2>&1 || { cat train.log; fail "train"; }
grep -q "global batch 4" train.log || { cat train.log; fail "log lacks the global batch"; }
grep -q "effective lr" train.log || { cat train.log; fail "log lacks the effective lr"; }

metrics="$WORK/run/metrics.jsonl"
[ -s "$metrics" ] || fail "no metrics file"
python3 - "$metrics" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "loss" in r]
evals = [r for r in rows if "val_loss" in r]
assert steps, "no step records"
for r in steps:
    for k in ("step", "loss", "lr", "tokens_per_s", "step_ms"):
        assert k in r, f"missing {k} in {r}"
    assert math.isfinite(r["loss"]) and r["tokens_per_s"] > 0 and r["step_ms"] > 0
assert steps[-1]["step"] == 40, steps[-1]
assert steps[-1]["loss"] < steps[0]["loss"] - 0.5, (steps[0]["loss"], steps[-1]["loss"])
assert evals and math.isfinite(evals[-1]["val_loss"]), evals
print("metrics ok: loss %.3f -> %.3f, val_loss %.3f" % (steps[0]["loss"], steps[-1]["loss"], evals[-1]["val_loss"]))
PY

ls "$WORK/run/checkpoints" | grep -q '^step_00000040$' || { ls -la "$WORK/run/checkpoints"; fail "no final checkpoint"; }
ls "$WORK/run/checkpoints/step_00000040/model.safetensors" > /dev/null

"$MESHTRAIN" eval "$WORK/run/checkpoints" --batches 2 --json > eval.json || fail "eval"
python3 -c "
import json; r = json.load(open('eval.json'))
assert r['step'] == 40 and 0 < r['val_loss'] < 5.6 and 0 <= r['val_accuracy'] <= 1, r
print('eval ok', r)"

"$MESHTRAIN" generate "$WORK/run/checkpoints" --prompt "And the" --tokens 40 --seed 3 > gen1.txt || fail "generate"
"$MESHTRAIN" generate "$WORK/run/checkpoints" --prompt "And the" --tokens 40 --seed 3 > gen2.txt
cmp -s gen1.txt gen2.txt || fail "generation with one seed is not deterministic"
[ "$(head -c 7 gen1.txt)" = "And the" ] || fail "generation does not start with the prompt"
[ "$(wc -c < gen1.txt)" -ge 47 ] || fail "generation too short"
echo "generated: $(cat gen1.txt)"

"$MESHTRAIN" plot "$metrics" --out curve.svg > /dev/null || fail "plot"
grep -q "<polyline" curve.svg && grep -q "val_loss" curve.svg || fail "plot has no curves"
echo "plot ok"
