# Gradient accumulation (parallel.micro_batches = M): a worker's batch runs as
# M micro-batches whose gradients add up before one synchronisation and one
# optimizer step. Alone, under plain data parallelism and under every ZeRO
# stage, M micro-batches train the numbers of one process taking the global
# batch at once: loss at every step and parameters after 20 steps within
# 1e-5 relative (the sums' order differs, so not bitwise).
source "$(dirname "$0")/lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
common=(--training.log_every=1 --checkpoint.every=0 --parallel.timeout_s=60)
"$MESHTRAIN" train job.toml "${common[@]}" --training.batch_size=8 --training.out_dir="$WORK/single" > single.log 2>&1 ||
  { cat single.log; fail "single process"; }
REF="$WORK/single/checkpoints/step_00000020/model.safetensors"

# accumulated NAME NPROC ARGS...: the job with NPROC workers, compared with the single process.
accumulated() {
  local name="$1" nproc="$2"; shift 2
  if [ "$nproc" = 1 ]; then
    "$MESHTRAIN" train job.toml "${common[@]}" "$@" --training.out_dir="$WORK/$name" > "$name.log" 2>&1
  else
    "$MESHTRAIN" launch --nproc "$nproc" -- "$MESHTRAIN" train job.toml "${common[@]}" --parallel.data=allreduce "$@" \
      --training.out_dir="$WORK/$name" > "$name.log" 2>&1
  fi || { cat "$name.log"; fail "$name"; }
  compare_losses "$WORK/single/metrics.jsonl" "$WORK/$name/metrics.jsonl" 1e-5 || fail "$name: losses differ"
  # AdamW barely sees a gradient's scale; the norm does (the sum of M micro-batches is divided by M).
  compare_losses "$WORK/single/metrics.jsonl" "$WORK/$name/metrics.jsonl" 1e-5 grad_norm || fail "$name: norms differ"
  compare_params "$REF" "$(params_file "$WORK/$name/checkpoints/step_00000020")" 1e-5 || fail "$name: parameters differ"
  echo "== $name: the numbers of one batch"
}

accumulated one-process-m4 1 --training.batch_size=8 --parallel.micro_batches=4
accumulated dp2-m2 2 --training.batch_size=4 --parallel.micro_batches=2
for stage in 1 2 3; do
  accumulated "zero$stage-m2" 2 --training.batch_size=4 --parallel.micro_batches=2 --parallel.zero_stage=$stage
done
accumulated zero3-m4 2 --training.batch_size=4 --parallel.micro_batches=4 --parallel.zero_stage=3

expect_failure "parallel.micro_batches: 3 micro-batches do not divide training.batch_size (8)" \
  "$MESHTRAIN" train job.toml --training.batch_size=8 --parallel.micro_batches=3
echo "gradient accumulation ok"
