# bf16 mixed precision (training.precision = "bf16"):
#  - one process says it runs bf16 products, trains differently from fp32
#    (the rounding shows in the losses) but close to it, and the tiny GPT's
#    validation loss after 300 steps is within 2% of fp32's;
#  - every layout trains like one bf16 process on the same global batch:
#    data parallel, ZeRO-3, tensor, pipeline (1F1B and zero-bubble) and
#    expert parallelism; losses every step within 1e-4 relative and the
#    parameters after 12 steps within 2e-3. Why these bounds: a layout sums
#    the same exact bf16 products in another order (fp32 results ~1e-7
#    apart), and where such a difference straddles a bf16 rounding boundary
#    the next product's operand lands one bf16 ulp (2^-8) apart. AdamW
#    normalises each gradient, so the parameters inherit those flips at
#    about their relative size, most in attention's query and key biases,
#    whose exact gradient is zero (lib.sh, compare_params); the bound is
#    bf16's unit roundoff, 2^-9. Measured: losses 1e-6 to 3e-6, parameters
#    1.5e-4 to 8e-4. The MoE layout gets 5x these: a token whose top-2
#    scores nearly tie can change experts after such a flip;
#  - parallel.reduce_dtype = "bf16": the gradients cross the wire in bf16
#    (data parallel, ZeRO-2, ZeRO-3 whose parameter gathers are bf16 too,
#    the Reduction Server, beside tensor, pipeline and expert parallelism)
#    at half the bytes, and still train like one bf16 process: losses within
#    1e-3 (the averaged gradients are rounded to bf16 once more, 2^-9, and
#    ZeRO-3 computes with bf16-rounded norms and biases as well; measured
#    1e-5 to 6e-5, ZeRO-3 3e-4) and parameters within 1e-2 (measured 7e-4
#    to 1.6e-3);
#  - a run stopped at step 6 and resumed ends bitwise equal to a straight one
#    (chaos_kill.sh kills a bf16 ZeRO-3 worker and checks the same).
source "$(dirname "$0")/lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
common=(--model.n_layer=2 --model.n_embd=64 --model.n_head=4 --model.block_size=32 --training.steps=12
        --training.log_every=1 --training.eval_every=0 --schedule.warmup_steps=0 --checkpoint.every=6
        --parallel.timeout_s=60 --training.precision=bf16)

train_layout() {  # NAME WORKERS ARGS...
  local name=$1 workers=$2
  shift 2
  local cmd=("$MESHTRAIN" train job.toml "${common[@]}" --parallel.workers="$workers"
             --training.out_dir="$WORK/$name" "$@")
  [ "$workers" -gt 1 ] && cmd=("$MESHTRAIN" launch --nproc "$workers" -- "${cmd[@]}")
  "${cmd[@]}" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name in bf16"; }
}

like_one() {  # NAME [ONE [LOSS_RTOL PARAMS_RTOL]]: losses every step and the final parameters against one bf16 process
  local one=${2:-one}
  compare_losses "$WORK/$one/metrics.jsonl" "$WORK/$1/metrics.jsonl" "${3:-1e-4}" ||
    fail "$1: losses differ from one bf16 process"
  compare_params "$(params_file "$WORK/$one/checkpoints/step_00000012")" \
                 "$(params_file "$WORK/$1/checkpoints/step_00000012")" "${4:-2e-3}" || fail "$1: parameters differ"
}

train_layout one 1 --training.batch_size=8
grep -q "precision: bf16 products" one.log || { cat one.log; fail "the setup does not say it runs bf16"; }
train_layout one-fp32 1 --training.batch_size=8 --training.precision=fp32
python3 - "$WORK" <<'PY' || fail "bf16 against fp32 in one process"
import json, sys
loss = lambda p: [r["loss"] for r in map(json.loads, open(p)) if "loss" in r]
a, b = loss(f"{sys.argv[1]}/one/metrics.jsonl"), loss(f"{sys.argv[1]}/one-fp32/metrics.jsonl")
worst = max(abs(x - y) / y for x, y in zip(a, b))
print(f"bf16 against fp32, one process: worst relative loss difference {worst:.3g}")
assert 0 < worst < 1e-2, worst
PY

train_layout dp2 2 --parallel.data=allreduce --training.batch_size=4
train_layout zero3 2 --parallel.data=allreduce --parallel.zero_stage=3 --training.batch_size=4
train_layout tp2 2 --parallel.tensor=2 --training.batch_size=8
train_layout pp2-1f1b 2 --parallel.pipeline=2 --parallel.micro_batches=4 --parallel.schedule=1f1b \
  --parallel.data=none --training.batch_size=8
train_layout pp2-zb 2 --parallel.pipeline=2 --parallel.micro_batches=4 --parallel.schedule=zero_bubble \
  --parallel.data=none --training.batch_size=8
for layout in dp2 zero3 tp2 pp2-1f1b pp2-zb; do like_one $layout; done
# ZeRO-3 keeps no bf16 copy of a block's weights between its forward and its
# backward: one linear layer's at a time (and the tied output layer's), not
# the model's (here 2 blocks' 4 linears each: under a third).
python3 - "$WORK" <<'PY' || fail "ZeRO-3's bf16 weight copies"
import json, sys
peak = lambda name: [r for r in map(json.loads, open(f"{sys.argv[1]}/{name}/metrics.jsonl")) if r.get("memory") == "peak"][-1]["peak_weight_copies_mb"]
one, zero3 = peak("one"), peak("zero3")
print(f"bf16 weight copies: one process {one * 1024:.0f} KiB, ZeRO-3 on 2 workers {zero3 * 1024:.0f} KiB")
assert 0 < zero3 < 0.35 * one, (one, zero3)
PY

moe=(--model.n_expert=4 --model.top_k=2)
train_layout moe-one 1 "${moe[@]}" --training.batch_size=8
train_layout moe-ep2 2 "${moe[@]}" --parallel.data=allreduce --parallel.expert=2 --training.batch_size=4
# A token whose top-2 scores nearly tie can take another expert when an input
# lands one bf16 ulp apart: 5x the dense bounds (measured 5e-5 and 1e-3).
like_one moe-ep2 moe-one 5e-4 1e-2

# Gradients in bf16 on the wire: half the bytes of fp32's, like one process.
like_one_loosely() {  # NAME [ONE]
  local one=${2:-one}
  compare_losses "$WORK/$one/metrics.jsonl" "$WORK/$1/metrics.jsonl" 1e-3 || fail "$1: losses differ from one bf16 process"
  compare_params "$(params_file "$WORK/$one/checkpoints/step_00000012")" \
                 "$(params_file "$WORK/$1/checkpoints/step_00000012")" 1e-2 || fail "$1: parameters differ"
}
wire=(--parallel.data=allreduce --parallel.reduce_dtype=bf16)
train_layout dp2-wire 2 "${wire[@]}" --training.batch_size=4
train_layout zero2-wire 2 "${wire[@]}" --parallel.zero_stage=2 --training.batch_size=4
train_layout zero3-wire 2 "${wire[@]}" --parallel.zero_stage=3 --training.batch_size=4
train_layout dp2-tp2-wire 4 "${wire[@]}" --parallel.tensor=2 --training.batch_size=4
train_layout dp2-pp2-wire 4 "${wire[@]}" --parallel.pipeline=2 --parallel.micro_batches=2 --training.batch_size=4
for layout in dp2-wire zero2-wire zero3-wire dp2-tp2-wire dp2-pp2-wire; do like_one_loosely $layout; done
train_layout moe-ep2-wire 2 "${moe[@]}" "${wire[@]}" --parallel.expert=2 --training.batch_size=4
like_one_loosely moe-ep2-wire moe-one
"$MESHTRAIN" run job.toml "${common[@]}" --nproc 2 "${wire[@]}" --parallel.all_reduce=reduction_server \
  --parallel.reducers=1 --training.batch_size=4 --training.out_dir="$WORK/rs-wire" > rs-wire.log 2>&1 ||
  { cat rs-wire.log; fail "the Reduction Server with bf16 gradients"; }
compare_losses "$WORK/one/metrics.jsonl" "$WORK/rs-wire/metrics.jsonl" 1e-3 || fail "rs-wire: losses differ"
python3 - "$WORK" <<'PY' || fail "bf16 gradients should halve the bytes"
import json, sys
last = lambda name: [r for r in map(json.loads, open(f"{sys.argv[1]}/{name}/metrics.jsonl")) if "comm_bytes" in r][-1]["comm_bytes"]
for fp32, bf16 in (("dp2", "dp2-wire"), ("zero3", "zero3-wire")):
    ratio = last(bf16) / last(fp32)
    print(f"{bf16}: {ratio:.3f} of fp32's bytes")
    assert abs(ratio - 0.5) < 0.01, ratio
PY
expect_failure "parallel.reduce_dtype" "$MESHTRAIN" train job.toml "${common[@]}" --parallel.data=parameter_server \
  --parallel.reduce_dtype=bf16

# Resume: 6 steps, stop, 6 more, against the straight 12 of `one`.
train_layout split 1 --training.batch_size=8 --stop-at-step 6
train_layout split 1 --training.batch_size=8 --resume
compare_params "$WORK/one/checkpoints/step_00000012/model.safetensors" \
               "$WORK/split/checkpoints/step_00000012/model.safetensors" 0 || fail "bf16 resume is not bitwise"

# consolidate --dtype bf16: every tensor BF16, each value the fp32 master rounded to nearest even.
"$MESHTRAIN" consolidate "$WORK/one/checkpoints" "$WORK/one-fp32.safetensors" > /dev/null || fail "consolidate"
"$MESHTRAIN" consolidate "$WORK/one/checkpoints" "$WORK/one-bf16.safetensors" --dtype bf16 > /dev/null ||
  fail "consolidate --dtype bf16"
python3 - "$WORK" <<'PY' || fail "consolidate --dtype bf16"
import json, struct, sys
def load(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n]); header.pop("__metadata__", None)
    return {k: (t["dtype"], t["shape"], raw[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]]) for k, t in header.items()}
def rne(bits):  # fp32 bits -> bf16 bits, round to nearest even (no NaN in a trained model)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
f32, b16 = load(f"{sys.argv[1]}/one-fp32.safetensors"), load(f"{sys.argv[1]}/one-bf16.safetensors")
assert f32.keys() == b16.keys()
for name, (dtype, shape, data) in b16.items():
    assert dtype == "BF16" and shape == f32[name][1], (name, dtype)
    want = [rne(b) for b in struct.unpack(f"<{len(f32[name][2]) // 4}I", f32[name][2])]
    assert list(struct.unpack(f"<{len(data) // 2}H", data)) == want, name
print(f"consolidate --dtype bf16: {len(b16)} tensors, each the rounded fp32 master")
PY

# The tiny GPT, 300 steps (half its example's; CI time): validation loss within 2% of fp32's.
for p in fp32 bf16; do
  "$MESHTRAIN" train "$SRC/examples/tiny-gpt.toml" --data.path="$WORK/text.txt" --training.precision=$p \
    --training.threads=1 --training.steps=300 --training.eval_every=300 --checkpoint.every=0 \
    --training.out_dir="$WORK/tiny-$p" \
    > "tiny-$p.log" 2>&1 || { cat "tiny-$p.log"; fail "tiny GPT in $p"; }
done
python3 - "$WORK" <<'PY' || fail "bf16's validation loss after 600 steps"
import json, sys
val = lambda p: [r["val_loss"] for r in map(json.loads, open(p)) if "val_loss" in r][-1]
a, b = val(f"{sys.argv[1]}/tiny-bf16/metrics.jsonl"), val(f"{sys.argv[1]}/tiny-fp32/metrics.jsonl")
print(f"validation loss after 300 steps: bf16 {a:.4f}, fp32 {b:.4f} ({abs(a - b) / b:.2%})")
assert abs(a - b) / b <= 0.02
PY
expect_failure "training.precision" "$MESHTRAIN" train job.toml --training.precision=fp16
echo "bf16 trains like fp32, every layout like one bf16 process, and resumes bitwise"
