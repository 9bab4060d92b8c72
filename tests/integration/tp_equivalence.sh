# Tensor parallelism trains the same numbers as one process on the same
# global batch: dp x tp = 1x2, 1x4, 2x2 (and 2x2 under ZeRO-3, over TCP, and
# with LAMB, whose trust ratios need whole-tensor norms; with sequence
# parallelism; with the Reduction Server on the data axis) against one process,
# loss and gradient norm at every step and parameters after 20 steps within
# 1e-5 (relative); the tensor ranks' shards consolidate under the Hugging
# Face names. A checkpoint written at 2 tensor ways resumes at 2 ways with
# another data-parallel size and ZeRO stage, and at 4 ways (resharded by
# placement), continuing as the uninterrupted run does.
source "$(dirname "$0")/lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
# n_head 4 and vocab 256 split over 4 ways; clipping on, so the global
# gradient norm (replicated tensors once, shards summed) decides the step.
sed -i 's/^n_head = 2/n_head = 4/' job.toml
common=(--training.log_every=1 --checkpoint.every=10 --parallel.timeout_s=60 --optimizer.grad_clip=0.5)

single() {  # NAME global-batch [overrides...]
  local name=$1 batch=$2
  shift 2
  "$MESHTRAIN" train job.toml "${common[@]}" --training.batch_size="$batch" --training.out_dir="$WORK/$name" "$@" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "single process $name"; }
}

# mesh NAME DP TP [overrides...]: dp x tp workers, per-worker batch 8 / dp
# (and $REDUCERS reducer processes when set).
mesh() {
  local name=$1 dp=$2 tp=$3
  shift 3
  "$MESHTRAIN" launch --nproc $((dp * tp)) --reducers "${REDUCERS:-0}" -- "$MESHTRAIN" train job.toml "${common[@]}" \
    --parallel.data=allreduce \
    --parallel.tensor="$tp" --training.batch_size=$((8 / dp)) --training.out_dir="$WORK/$name" "$@" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
  grep -q "tensor parallel: $tp ways (pp=1 x dp=$dp (ep=1) x tp=$tp" "$name.log" || { cat "$name.log"; fail "$name: no mesh line"; }
}

# same REFERENCE NAME: losses, gradient norms and final parameters agree.
same() {
  echo "== $2 against $1"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 1e-5 || fail "$2: losses differ"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 1e-5 grad_norm || fail "$2: gradient norms differ"
  compare_params "$(params_file "$WORK/$1/checkpoints/step_00000020")" \
                 "$(params_file "$WORK/$2/checkpoints/step_00000020")" 1e-5 || fail "$2: parameters differ"
}

single one 8
mesh tp2 1 2
same one tp2
ls "$WORK/tp2/checkpoints/step_00000020" | grep -q '^tp-00001-of-00002.shard-00000-of-00001.safetensors$' ||
  { ls "$WORK/tp2/checkpoints/step_00000020"; fail "no shard of tensor rank 1"; }
# consolidate writes what one process writes for the same parameters.
"$MESHTRAIN" consolidate "$WORK/one/checkpoints/step_00000020" one-consolidated.safetensors > /dev/null
cmp one-consolidated.safetensors "$WORK/one/checkpoints/step_00000020/model.safetensors" ||
  fail "consolidate is not byte-equal to one process's model file"
mesh tp4 1 4
same one tp4
mesh dp2-tp2 2 2
same one dp2-tp2
mesh dp2-tp2-zero3 2 2 --parallel.zero_stage=3
same one dp2-tp2-zero3
mesh dp2-tp2-tcp 2 2 --parallel.transport=tcp --parallel.zero_stage=1
same one dp2-tp2-tcp
# Sequence parallelism: layernorm regions on each tensor rank's tokens.
mesh dp2-tp2-sp 2 2 --parallel.sequence_parallel=true
same one dp2-tp2-sp
mesh tp4-sp-m2 1 4 --parallel.sequence_parallel=true --parallel.micro_batches=2 --parallel.zero_stage=0
same one tp4-sp-m2
# The Reduction Server on the data axis: each tensor rank's data group gets
# its own reducer.
REDUCERS=2 mesh dp2-tp2-rs 2 2 --parallel.all_reduce=reduction_server
grep -q "all-reduce reduction_server" dp2-tp2-rs.log || { cat dp2-tp2-rs.log; fail "dp2-tp2-rs did not use the reducers"; }
same one dp2-tp2-rs
single one-lamb 8 --optimizer.name=lamb
mesh dp2-tp2-lamb 2 2 --optimizer.name=lamb --parallel.zero_stage=2
same one-lamb dp2-tp2-lamb

# The ViT shares GPT's blocks (its patch embedding and head stay whole on
# every rank): 2 tensor ways train it like one process too.
vit=(--training.steps=10 --training.log_every=1 --training.eval_every=0 --training.eval_batches=2
     --training.threads=1 --checkpoint.every=0 --optimizer.grad_clip=0.5 --schedule.warmup_steps=2)
"$MESHTRAIN" train "$SRC/examples/fashion-vit.toml" "${vit[@]}" --training.out_dir="$WORK/vit-one" > vit-one.log 2>&1 ||
  { cat vit-one.log; fail "vit, one process"; }
"$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train "$SRC/examples/fashion-vit.toml" "${vit[@]}" --parallel.tensor=2 \
  --training.out_dir="$WORK/vit-tp2" > vit-tp2.log 2>&1 || { cat vit-tp2.log; fail "vit, 2 tensor ways"; }
echo "== vit-tp2 against vit-one"
compare_losses "$WORK/vit-one/metrics.jsonl" "$WORK/vit-tp2/metrics.jsonl" 1e-5 || fail "vit-tp2: losses differ"
compare_params "$WORK/vit-one/checkpoints/step_00000010/model.safetensors" \
               "$(params_file "$WORK/vit-tp2/checkpoints/step_00000010")" 1e-5 || fail "vit-tp2: parameters differ"

# Resume: tp2's step-10 checkpoint continues at another data-parallel size
# and ZeRO stage (same tensor ways: each rank reads its own tensor rank's
# files), and at 4 tensor ways (resharded by placement, AdamW's moments too).
resume() {  # NAME DP TP [overrides...]
  local name=$1 dp=$2 tp=$3
  shift 3
  mkdir -p "$WORK/$name/checkpoints"
  cp -r "$WORK/tp2/checkpoints/step_00000010" "$WORK/$name/checkpoints/"
  "$MESHTRAIN" launch --nproc $((dp * tp)) -- "$MESHTRAIN" train job.toml "${common[@]}" --resume \
    --parallel.data=allreduce --parallel.tensor="$tp" --training.batch_size=$((8 / dp)) \
    --training.out_dir="$WORK/$name" "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
  grep -q "resuming from step 10" "$name.log" || { cat "$name.log"; fail "$name did not resume"; }
  compare_params "$(params_file "$WORK/one/checkpoints/step_00000020")" \
                 "$(params_file "$WORK/$name/checkpoints/step_00000020")" 1e-5 || fail "$name: parameters differ"
}
resume resume-dp2-tp2-zero2 2 2 --parallel.zero_stage=2
resume resume-tp4 1 4
resume resume-tp1 1 1 --parallel.data=none
echo "tensor-parallel equivalence holds"
