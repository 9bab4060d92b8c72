# Hugging Face GPT-2 both ways, checked by transformers itself:
#   in   a random GPT2LMHeadModel saved with save_pretrained -> model.init_from
#        -> meshtrain's first-step loss on a fixed batch (sequential token
#        windows) equals the Hugging Face model's (1e-5 relative), and its
#        logits and loss on the validation batches too; the same start under tensor, pipeline and ZeRO-3
#        layouts trains like one process;
#   out  a checkpoint meshtrain trained -> consolidate --format hf ->
#        from_pretrained loads it with no missing or unexpected keys, its
#        logits equal meshtrain's (1e-4 absolute) and its loss meshtrain
#        eval's;
#   bad  a config or a tensor that does not fit names the key or the tensor.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_tools_lib.sh"
require_python_modules torch transformers safetensors

make_text text.txt 100000
tiny_config job.toml "$WORK/text.txt"
common=(--training.log_every=1 --training.eval_every=0 --checkpoint.every=0 --schedule.warmup_steps=0 --parallel.timeout_s=60)

# hf_check DIR EVAL_JSON LOGITS [DIR EVAL_JSON LOGITS ...]: each Hugging Face
# model in DIR on the batches `meshtrain eval --logits` wrote: no missing or
# unexpected keys, logits within 1e-4 and the mean loss within 1e-5
# (relative) of meshtrain's. One Python for all (importing torch and
# transformers takes seconds).
hf_check() {
  OMP_NUM_THREADS=1 "$TOOLS_PYTHON" - "$@" <<'PY'
import json, sys, torch
from safetensors.torch import load_file
from transformers import GPT2LMHeadModel
ok = True
for model_dir, eval_json, logits_file in zip(*[iter(sys.argv[1:])] * 3):
    model, info = GPT2LMHeadModel.from_pretrained(model_dir, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    assert not bad, f"loading {model_dir}: {bad}"
    ours = json.load(open(eval_json))
    batch = load_file(logits_file)
    with torch.no_grad():
        logits = model(batch["tokens"].long()).logits
    diff = (logits - batch["logits"]).abs().max().item()
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["targets"].long().flatten()).item()
    rel = abs(loss - ours["val_loss"]) / ours["val_loss"]
    print(f"{model_dir}: {batch['tokens'].shape[0]} sequences, logits max |difference| {diff:.2e}; "
          f"loss {loss:.6f} (transformers) vs {ours['val_loss']:.6f} (meshtrain eval), relative {rel:.2e}")
    ok = ok and diff <= 1e-4 and rel <= 1e-5
sys.exit(0 if ok else 1)
PY
}

# In: a random GPT-2 of the tiny config's sizes (vocabulary 256: bytes),
# the text's bytes as a nanoGPT token file, and the Hugging Face model's loss
# on the first 8 windows of 32 tokens: the batch a sequential run's first
# step takes (docs/tokenized_data.md).
OMP_NUM_THREADS=1 "$TOOLS_PYTHON" - "$WORK/hf-random" "$WORK/text.txt" "$WORK/tokens.bin" <<'PY' > hf-first-loss.txt ||
import sys, numpy as np, torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
config = GPT2Config(vocab_size=256, n_positions=32, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                    embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None, eos_token_id=None)
model = GPT2LMHeadModel(config)
model.save_pretrained(sys.argv[1])
tokens = np.frombuffer(open(sys.argv[2], "rb").read(), dtype=np.uint8).astype(np.uint16)
tokens.tofile(sys.argv[3])
windows = torch.tensor(np.stack([tokens[i * 32:i * 32 + 33] for i in range(8)]).astype(np.int64))
with torch.no_grad():
    logits = model(windows[:, :-1]).logits
print(torch.nn.functional.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item())
PY
  fail "save a random GPT2LMHeadModel"

# Its first training step's loss in meshtrain, on the same batch.
"$MESHTRAIN" train job.toml "${common[@]}" --model.init_from="$WORK/hf-random" --training.steps=1 \
  --data.kind=tokens --data.train_path="$WORK/tokens.bin" --data.order=sequential --training.batch_size=8 \
  --training.out_dir="$WORK/first-step" > first-step.log 2>&1 || { cat first-step.log; fail "first step from the Hugging Face model"; }
python3 - "$WORK/first-step/metrics.jsonl" "$(tail -n 1 hf-first-loss.txt)" <<'PY' || fail "first-step loss differs from transformers'"
import json, sys
ours = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if r.get("step") == 1 and "loss" in r][0]
theirs = float(sys.argv[2])
print(f"first step: loss {ours:.7f} (meshtrain, init_from) vs {theirs:.7f} (transformers), relative {abs(ours - theirs) / theirs:.2e}")
sys.exit(0 if abs(ours - theirs) / theirs <= 1e-5 else 1)
PY

# One optimizer step at a learning rate too small to move a float32
# parameter, so step 1's checkpoint holds the Hugging Face parameters as
# they were read; eval then runs meshtrain's forward on them.
"$MESHTRAIN" train job.toml "${common[@]}" --model.init_from="$WORK/hf-random" --training.steps=1 \
  --optimizer.lr=1e-30 --training.out_dir="$WORK/imported" > imported.log 2>&1 || { cat imported.log; fail "init_from"; }
grep -q "parameters from Hugging Face GPT-2 .*hf-random/model.safetensors (model.init_from)" imported.log ||
  { cat imported.log; fail "the log does not say where the parameters came from"; }
"$MESHTRAIN" eval "$WORK/imported/checkpoints" --json --batches 2 --logits imported-logits.safetensors > imported-eval.json ||
  fail "eval the imported model"

# The same start in every layout trains like one process: the step losses
# (the first is the Hugging Face model's on that batch) and the parameters.
train_from() {
  local name=$1 workers=$2
  shift 2
  local cmd=("$MESHTRAIN" train job.toml "${common[@]}" --model.init_from="$WORK/hf-random" --training.steps=5
             --parallel.workers="$workers" --training.out_dir="$WORK/$name" "$@")
  [ "$workers" -gt 1 ] && cmd=("$MESHTRAIN" launch --nproc "$workers" -- "${cmd[@]}")
  "${cmd[@]}" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name: train from the Hugging Face model"; }
}
train_from one 1 --training.batch_size=8
for layout in "tp2 2 --parallel.tensor=2 --training.batch_size=8" \
              "pp2 2 --parallel.pipeline=2 --parallel.micro_batches=2 --parallel.data=none --training.batch_size=8" \
              "zero3 2 --parallel.data=allreduce --parallel.zero_stage=3 --training.batch_size=4"; do
  read -r name workers args <<< "$layout"
  # shellcheck disable=SC2086
  train_from "$name" "$workers" $args
  compare_losses "$WORK/one/metrics.jsonl" "$WORK/$name/metrics.jsonl" 1e-5 || fail "$name: losses differ"
  compare_params "$WORK/one/checkpoints/step_00000005/model.safetensors" \
                 "$(params_file "$WORK/$name/checkpoints/step_00000005")" 1e-5 || fail "$name: parameters differ"
done
python3 - "$WORK/one/metrics.jsonl" <<'PY' || fail "training from the Hugging Face model did not lower the loss"
import json, sys
losses = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
assert losses[-1] < losses[0], losses
PY

# Out: a model meshtrain trained (from scratch, 20 steps, 2 tensor ways), as
# a Hugging Face directory.
"$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train job.toml "${common[@]}" --parallel.workers=2 --parallel.tensor=2 \
  --training.out_dir="$WORK/trained" > trained.log 2>&1 || { cat trained.log; fail "train"; }
"$MESHTRAIN" consolidate "$WORK/trained/checkpoints" "$WORK/hf-out" --format hf > consolidate.log ||
  fail "consolidate --format hf"
"$MESHTRAIN" eval "$WORK/trained/checkpoints" --json --batches 2 --logits trained-logits.safetensors > trained-eval.json ||
  fail "eval the trained model"
hf_check "$WORK/hf-random" imported-eval.json imported-logits.safetensors \
         "$WORK/hf-out" trained-eval.json trained-logits.safetensors || fail "meshtrain and transformers differ"
python3 - "$WORK/hf-out/config.json" <<'PY' || fail "config.json"
import json, sys
c = json.load(open(sys.argv[1]))
want = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 2, "n_positions": 32, "vocab_size": 256,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
assert all(c[k] == v for k, v in want.items()), {k: c.get(k) for k in want}
PY
# ... and back: the export starts a run like the checkpoint it came from.
"$MESHTRAIN" train job.toml "${common[@]}" --model.init_from="$WORK/hf-out" --training.steps=1 --optimizer.lr=1e-30 \
  --training.out_dir="$WORK/round-trip" > round-trip.log 2>&1 || { cat round-trip.log; fail "init_from the export"; }
compare_params "$(params_file "$WORK/trained/checkpoints/step_00000020")" \
               "$WORK/round-trip/checkpoints/step_00000001/model.safetensors" 0 || fail "round trip changed parameters"
# A meshtrain checkpoint of another layout starts a run too (its parameters, not its step).
"$MESHTRAIN" train job.toml "${common[@]}" --model.init_from="$WORK/trained/checkpoints" --training.steps=1 \
  --optimizer.lr=1e-30 --training.out_dir="$WORK/from-ckpt" > from-ckpt.log 2>&1 || { cat from-ckpt.log; fail "init_from a checkpoint"; }
grep -q "parameters from checkpoint .*step_00000020 (model.init_from)" from-ckpt.log || { cat from-ckpt.log; fail "from-ckpt log"; }
compare_params "$WORK/round-trip/checkpoints/step_00000001/model.safetensors" \
               "$WORK/from-ckpt/checkpoints/step_00000001/model.safetensors" 0 || fail "init_from a checkpoint differs"

# Bad input: one message naming the problem, nothing trained.
expect_failure "n_layer is 2, but the job's model has model.n_layer = 3" \
  "$MESHTRAIN" train job.toml "${common[@]}" --model.init_from="$WORK/hf-random" --model.n_layer=3 --training.out_dir="$WORK/bad1"
mkdir bad-shape && cp "$WORK/hf-random/model.safetensors" bad-shape/
expect_failure "tensor 'transformer.wte.weight': the model has (512, 32), the file has (256, 32)" \
  "$MESHTRAIN" train job.toml "${common[@]}" --model.init_from="$WORK/bad-shape/model.safetensors" --model.vocab_size=512 \
  --training.out_dir="$WORK/bad2"
expect_failure "does not exist" "$MESHTRAIN" train job.toml "${common[@]}" --model.init_from="$WORK/nowhere" --training.out_dir="$WORK/bad3"
expect_failure "GPT-2 has no mixture of experts" \
  "$MESHTRAIN" train job.toml "${common[@]}" --model.init_from="$WORK/hf-random" --model.n_expert=4 --training.out_dir="$WORK/bad4"
expect_failure "model.init_from: parameter servers initialize their shards" \
  "$MESHTRAIN" train job.toml "${common[@]}" --model.init_from="$WORK/hf-random" --parallel.data=parameter_server \
  --training.out_dir="$WORK/bad5"
[ -z "$(find "$WORK"/bad* -name 'step_*' 2> /dev/null)" ] || fail "a refused run wrote a checkpoint"
# The GPT-2 small example is a valid job: it gets as far as reading the model it names.
expect_failure "model.init_from: $WORK/no-gpt2 does not exist" \
  "$MESHTRAIN" train "$SRC/examples/gpt2-small-finetune.toml" --model.init_from="$WORK/no-gpt2" --parallel.workers=1 \
  --data.train_path="$WORK/tokens.bin" --data.val_path= --data.tokenizer= --training.out_dir="$WORK/bad-example"
echo "Hugging Face GPT-2: imported and exported models agree with transformers; every layout starts alike"
