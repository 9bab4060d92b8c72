# GPT-2 small's shape end to end in bf16, small enough for CI: width 768,
# 12 heads, GPT-2's vocabulary of 50257 (not a multiple of 64), at context
# 64 with flash attention, and 2 of its 12 layers (all 12 took 33 s here,
# most of it the kernel zeroing 2.4 GB of fresh pages and writing the
# checkpoint). Three steps on random token ids, then `eval` of the
# checkpoint: the parameter count is the formula's, the first loss is
# ln(50257) at initialisation, the losses are finite and the evaluation
# reads the checkpoint back. bench/gpt2_shape.sh measures all 12 layers at
# context 1024.
source "$(dirname "$0")/lib.sh"
python3 - <<'PY'
import array, random
r = random.Random(3)
array.array("H", (r.randrange(50257) for _ in range(20000))).tofile(open("tokens.bin", "wb"))
PY
cat > job.toml <<TOML
[model]
kind = "gpt"
n_layer = 2
n_embd = 768
n_head = 12
block_size = 64
vocab_size = 50257
[data]
kind = "tokens"
train_path = "$WORK/tokens.bin"
val_path = "$WORK/tokens.bin"
[training]
batch_size = 2
steps = 3
log_every = 1
eval_every = 0
eval_batches = 1
precision = "bf16"
attention = "flash"
peak_tflops = 0.5
out_dir = "$WORK/run"
[checkpoint]
every = 0
TOML
"$MESHTRAIN" train job.toml > train.log 2>&1 || { cat train.log; fail "train"; }
# wte 50257 x 768 (tied with the output layer), wpe 64 x 768, 2 blocks of 12 d^2 + 13 d, ln_f 2 d.
d=768; want=$(( 50257 * d + 64 * d + 2 * (12 * d * d + 13 * d) + 2 * d ))
grep -q "model gpt: $want parameters" train.log || { head -3 train.log; fail "expected $want parameters"; }
grep -q "attention: flash" train.log || fail "the setup does not name flash attention"
grep -q "mfu: model FLOPs against 0.5 TFLOP/s a device (training.peak_tflops)" train.log || fail "no mfu line"
python3 - "$WORK/run/metrics.jsonl" <<'PY'
import json, math, sys
losses = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
assert len(losses) == 3 and all(math.isfinite(l) for l in losses), losses
assert abs(losses[0] - math.log(50257)) < 0.3, f"first loss {losses[0]:.3f}, ln(50257) = {math.log(50257):.3f}"
# mfu: the model FLOPs of a token (6 N + 12 L d T, N the products' parameters) at the step's
# tokens/s over training.peak_tflops = 0.5.
L, d, T, V = 2, 768, 64, 50257
for r in (r for r in map(json.loads, open(sys.argv[1])) if "loss" in r):
    assert r["flop_per_token"] == 6 * (12 * L * d * d + V * d) + 12 * L * d * T, r["flop_per_token"]
    want = r["tokens_per_s"] * r["flop_per_token"] / 0.5e12
    assert abs(r["mfu"] - want) <= 1e-9 * want, (r["mfu"], want)
print("losses", " ".join(f"{l:.4f}" for l in losses))
PY
"$MESHTRAIN" eval "$WORK/run/checkpoints" --batches 1 --json --logits logits.safetensors > eval.json || fail "eval"
# eval --logits runs the output layer in the training's bf16, as the loss
# does: the cross-entropy of the logits it writes is the val_loss it
# reports (to 2e-7; the fp32 output layer it had was 1.8e-6 off).
python3 - <<'PY' || fail "eval --logits"
import array, json, math, struct
r = json.load(open("eval.json"))
assert r["step"] == 3 and abs(r["val_loss"] - math.log(50257)) < 0.5, r
raw = open("logits.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
def tensor(name, code):
    a, b = header[name]["data_offsets"]
    return array.array(code, raw[8 + n + a:8 + n + b])
logits, targets, V = tensor("logits", "f"), tensor("targets", "i"), 50257
loss = 0.0
for i, t in enumerate(targets):
    row = logits[i * V:(i + 1) * V]
    m = max(row)
    loss += math.log(sum(math.exp(x - m) for x in row)) + m - row[t]
loss /= len(targets)
print(f"eval val_loss {r['val_loss']:.7f}, cross-entropy of its logits {loss:.7f}")
assert abs(loss - r["val_loss"]) / r["val_loss"] < 2e-7, (loss, r["val_loss"])
PY
echo "GPT-2 shape: $want parameters, vocabulary 50257, bf16 with flash attention, trained and evaluated"
